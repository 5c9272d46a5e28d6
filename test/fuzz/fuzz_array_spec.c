/*
 * libFuzzer target for the controller's array definition, --bsopts
 * (controller/array_spec.h), and the value parsers tgtadm --op update
 * shares with it.
 *
 * The first input byte picks a mode.  Mode 0 parses the rest as --bsopts
 * text: nothing may crash, what is accepted is an array the controller can
 * run (RAID-5, 3-32 members and at most 8 spares on distinct boxes, a
 * power-of-two stripe unit from 4k to 1m, a datamover address in TPT mode,
 * timeouts and rates in range), every member URL shows in logs as
 * iscsi://host[:port]/iqn/lun alone, without its CHAP user, secret or
 * mutual-CHAP arguments, and that array written back in the documented
 * key=value form parses to the same array; its one-line form
 * (tpt_array_spec_canonical()) is one line and the same array, or is
 * refused as the text is.  Mode 1 probes one numeric
 * option of an otherwise valid spec with a number the fuzzer writes,
 * digits and suffix: it is accepted exactly when the number it denotes is
 * in the option's range, and then means that number.  Mode 2 hides the
 * secrets of arbitrary text into a buffer of the size the input asks for:
 * the result fits and is the start of what a large buffer gets.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/array_spec.h"
#include "controller/raid_level.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Room for a whole array written back, every URL at its longest. */
#define SPEC_TEXT_MAX \
	((TPT_SPEC_MAX_MEMBERS + TPT_SPEC_MAX_SPARES) * (TPT_SPEC_URL_MAX + 8) + \
	 1024)

static struct tpt_array_spec spec, again;
static char text[SPEC_TEXT_MAX];

static bool terminated(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

/*
 * A member URL as logs must show it: "iscsi://", then what follows the
 * first '@' (the end of user%secret@), or all of it, up to the first '?'
 * (the mutual-CHAP arguments).
 */
static void check_hidden(const char *url)
{
	char hidden[TPT_SPEC_URL_MAX], want[TPT_SPEC_URL_MAX];
	const char *addr = url + 8, *at;
	size_t len = strcspn(addr, "?");

	at = memchr(addr, '@', len);
	if (at) {
		len -= (size_t)(at + 1 - addr);
		addr = at + 1;
	}
	snprintf(want, sizeof(want), "iscsi://%.*s", (int)len, addr);
	tpt_spec_hide_secrets(url, hidden, sizeof(hidden));
	if (strcmp(hidden, want))
		abort();
	/* What logs and show print reads back as the same box. */
	tpt_spec_hide_secrets(hidden, want, sizeof(want));
	if (strcmp(hidden, want))
		abort();
}

/* What every accepted spec must be. */
static void check_runnable(const struct tpt_array_spec *s)
{
	const struct raid_level_ops *level = raid_level_find(s->raid_level);
	char err[256];
	unsigned int i, j, n = s->nr_members + s->nr_spares;

	if (!level || s->nr_members < level->min_members ||
	    s->nr_members > TPT_SPEC_MAX_MEMBERS ||
	    s->nr_spares > TPT_SPEC_MAX_SPARES ||
	    s->unit_bytes < TPT_SPEC_UNIT_MIN ||
	    s->unit_bytes > TPT_SPEC_UNIT_MAX ||
	    (s->unit_bytes & (s->unit_bytes - 1)) ||
	    (s->mode != TPT_MODE_TPT && s->mode != TPT_MODE_BASELINE) ||
	    !s->fail_timeout || s->fail_timeout > TPT_SPEC_FAIL_TIMEOUT_MAX ||
	    s->rebuild_rate > TPT_SPEC_REBUILD_RATE_MAX ||
	    !terminated(s->dm_addr, sizeof(s->dm_addr)) ||
	    !terminated(s->initiator, sizeof(s->initiator)) ||
	    strncmp(s->initiator, "iqn.", 4))
		abort();
	if (s->mode == TPT_MODE_TPT && !s->dm_addr[0])
		abort();
	for (i = 0; i < n; i++) {
		const char *a = i < s->nr_members ? s->member[i] :
				s->spare[i - s->nr_members];

		if (!terminated(a, TPT_SPEC_URL_MAX) ||
		    tpt_spec_member_url(a, err, sizeof(err)))
			abort();
		check_hidden(a);
		for (j = 0; j < i; j++)
			if (tpt_spec_same_box(a, j < s->nr_members ?
					      s->member[j] :
					      s->spare[j - s->nr_members]))
				abort();
	}
}

static void put(char *out, size_t *at, const char *key, const char *value)
{
	int n = snprintf(&out[*at], SPEC_TEXT_MAX - *at, "%s=%s;", key, value);

	if (n < 0 || (size_t)n >= SPEC_TEXT_MAX - *at)
		abort();
	*at += (size_t)n;
}

/* The spec in the form array_spec.h documents, every option explicit. */
static void format_spec(const struct tpt_array_spec *s, char *out)
{
	char num[64];
	size_t at = 0;
	unsigned int i;

	snprintf(num, sizeof(num), "%u", s->raid_level);
	put(out, &at, "raid", num);
	snprintf(num, sizeof(num), "%u", s->unit_bytes);
	put(out, &at, "unit", num);
	put(out, &at, "mode", tpt_array_mode_name(s->mode));
	if (s->dm_addr[0]) {
		/* Longer than dm_addr's 64 bytes by the port at most. */
		char dm[sizeof(s->dm_addr) + 8];

		snprintf(dm, sizeof(dm), "%s:%u", s->dm_addr, s->dm_port);
		put(out, &at, "dm", dm);
	}
	put(out, &at, "initiator", s->initiator);
	for (i = 0; i < s->nr_members; i++)
		put(out, &at, "member", s->member[i]);
	for (i = 0; i < s->nr_spares; i++)
		put(out, &at, "spare", s->spare[i]);
	snprintf(num, sizeof(num), "%u", s->fail_timeout);
	put(out, &at, "fail_timeout", num);
	snprintf(num, sizeof(num), "%u", s->rebuild_rate);
	put(out, &at, "rebuild_rate", num);
	put(out, &at, "assume_clean", s->assume_clean ? "yes" : "no");
	put(out, &at, "start_dirty_degraded",
	    s->start_dirty_degraded ? "yes" : "no");
	put(out, &at, "write_intent", s->write_intent ? "yes" : "no");
}

static bool same_spec(const struct tpt_array_spec *a,
		      const struct tpt_array_spec *b)
{
	unsigned int i;

	if (a->raid_level != b->raid_level || a->unit_bytes != b->unit_bytes ||
	    a->mode != b->mode || strcmp(a->dm_addr, b->dm_addr) ||
	    a->dm_port != b->dm_port || strcmp(a->initiator, b->initiator) ||
	    a->nr_members != b->nr_members || a->nr_spares != b->nr_spares ||
	    a->fail_timeout != b->fail_timeout ||
	    a->rebuild_rate != b->rebuild_rate ||
	    a->assume_clean != b->assume_clean ||
	    a->start_dirty_degraded != b->start_dirty_degraded ||
	    a->write_intent != b->write_intent)
		return false;
	for (i = 0; i < a->nr_members; i++)
		if (strcmp(a->member[i], b->member[i]))
			return false;
	for (i = 0; i < a->nr_spares; i++)
		if (strcmp(a->spare[i], b->spare[i]))
			return false;
	return true;
}

static void fuzz_text(const uint8_t *data, size_t size)
{
	char *opts = malloc(size + 1), err[256];

	memcpy(opts, data, size);
	opts[size] = '\0';
	bool accepted = !tpt_array_spec_parse(opts, &spec, err, sizeof(err));
	char *one = malloc(size + 1);

	if (accepted) {
		check_runnable(&spec);
		format_spec(&spec, text);
		if (tpt_array_spec_parse(text, &again, err, sizeof(err)) ||
		    !same_spec(&spec, &again))
			abort();
	} else if (!terminated(err, sizeof(err)) || !err[0]) {
		/* A refusal names what it refuses. */
		abort();
	}
	/* The one-line form the state file records: never longer than the
	 * text, one line for a spec that is accepted, and the same array,
	 * or refused as the text is. */
	if (tpt_array_spec_canonical(opts, one, size + 1))
		abort();
	if (accepted != !tpt_array_spec_parse(one, &again, err, sizeof(err)))
		abort();
	if (accepted && (strchr(one, '\n') || !same_spec(&spec, &again)))
		abort();
	free(one);
	free(opts);
}

/* The numeric options, with the range each accepts. */
static const struct numeric_option {
	const char *key;
	uint64_t min, max;
	bool power_of_two;
} numeric_options[] = {
	{ "unit", TPT_SPEC_UNIT_MIN, TPT_SPEC_UNIT_MAX, true },
	{ "fail_timeout", 1, TPT_SPEC_FAIL_TIMEOUT_MAX, false },
	{ "rebuild_rate", 0, TPT_SPEC_REBUILD_RATE_MAX, false },
	{ "dm", 0, 65535, false },	/* the port of dm=ADDR:PORT */
};

#define NR_NUMERIC_OPTIONS \
	(sizeof(numeric_options) / sizeof(numeric_options[0]))

static uint64_t option_value(const struct tpt_array_spec *s,
			     const struct numeric_option *o)
{
	switch (o - numeric_options) {
	case 0: return s->unit_bytes;
	case 1: return s->fail_timeout;
	case 2: return s->rebuild_rate;
	default: return s->dm_port;
	}
}

/*
 * Input: option index, suffix choice, then the digits (anything that is
 * not a digit ends them).  The value the text denotes is worked out here
 * without wrapping: @exact is false when it does not fit in 64 bits.
 */
static void fuzz_number(const uint8_t *data, size_t size)
{
	static const char *const suffixes[] = { "", "k", "m", "K", "M" };
	static const unsigned int shifts[] = { 0, 10, 20, 10, 20 };
	const struct numeric_option *o;
	char digits[32], err[256];
	unsigned int suffix;
	uint64_t value = 0;
	bool exact = true, in_range;
	size_t n = 0;

	if (size < 3)
		return;
	o = &numeric_options[data[0] % NR_NUMERIC_OPTIONS];
	suffix = data[1] % 5;
	for (data += 2, size -= 2; n < size && n < sizeof(digits) - 1 &&
	     data[n] >= '0' && data[n] <= '9'; n++) {
		digits[n] = (char)data[n];
		if (__builtin_mul_overflow(value, 10, &value) ||
		    __builtin_add_overflow(value, (uint64_t)(data[n] - '0'),
					   &value))
			exact = false;
	}
	if (!n)
		return;
	digits[n] = '\0';
	if (shifts[suffix] && value > UINT64_MAX >> shifts[suffix])
		exact = false;
	value <<= shifts[suffix];

	snprintf(text, sizeof(text),
		 "raid=5;mode=baseline;member=iscsi://a/iqn.t:0/1;"
		 "member=iscsi://b/iqn.t:1/1;member=iscsi://c/iqn.t:2/1;"
		 "%s=%s%s%s", o->key, strcmp(o->key, "dm") ? "" : "10.0.0.1:",
		 digits, suffixes[suffix]);
	in_range = exact && value >= o->min && value <= o->max &&
		   (!o->power_of_two || !(value & (value - 1)));
	if (!tpt_array_spec_parse(text, &spec, err, sizeof(err)) != in_range)
		abort();
	if (in_range && option_value(&spec, o) != value)
		abort();
}

/* Input: the output size, then the text. */
static void fuzz_hide(const uint8_t *data, size_t size)
{
	size_t outlen, len;
	char *in, *out, *full;

	if (!size)
		return;
	outlen = data[0];
	in = malloc(size);
	memcpy(in, data + 1, size - 1);
	in[size - 1] = '\0';
	/* Hiding never lengthens: a buffer of the input's size holds all. */
	full = malloc(size);
	out = malloc(outlen ? outlen : 1);
	tpt_spec_hide_secrets(in, full, size);
	tpt_spec_hide_secrets(in, out, outlen);
	len = strlen(full);
	if (len > strlen(in) ||
	    (outlen && (strlen(out) >= outlen ||
			strncmp(out, full, outlen - 1) ||
			strlen(out) != (len < outlen - 1 ? len : outlen - 1))))
		abort();
	free(in);
	free(out);
	free(full);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] % 3) {
	case 0: fuzz_text(data + 1, size - 1); break;
	case 1: fuzz_number(data + 1, size - 1); break;
	default: fuzz_hide(data + 1, size - 1); break;
	}
	return 0;
}
