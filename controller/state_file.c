/*
 * Reading and writing the array's state file (controller/state_file.h).
 */
#include "controller/state_file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((format(printf, 4, 5)))
static int state_error(char *err, size_t errlen, unsigned int line,
		       const char *fmt, ...)
{
	va_list ap;
	int n;

	if (err && errlen) {
		n = snprintf(err, errlen, "line %u: ", line);
		if (n < 0 || (size_t)n >= errlen)
			n = 0;
		va_start(ap, fmt);
		vsnprintf(err + n, errlen - n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static bool parse_uint(const char *s, uint64_t max, uint64_t *out, int base)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return false;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* 32 lower-case hex digits, not all zero. */
static int parse_key(const char *s, uint8_t key[TPT_STATE_KEY_LEN])
{
	uint8_t any = 0;
	unsigned int i;

	if (strlen(s) != 2 * TPT_STATE_KEY_LEN)
		return -1;
	for (i = 0; i < TPT_STATE_KEY_LEN; i++) {
		int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		key[i] = (uint8_t)(hi << 4 | lo);
		any |= key[i];
	}
	return any ? 0 : -1;
}

/* Whether @st's check_located, if any, fits its check: a count per
 * position, no more located than mismatched, KEPT at most their sum. */
static bool check_located_valid(const struct tpt_state *st)
{
	uint64_t sum = 0;
	unsigned int i;

	if (!st->nr_check_located)
		return !st->check_located_kept;
	if (!st->has_check || st->nr_check_located != st->nr_positions)
		return false;
	for (i = 0; i < st->nr_check_located; i++) {
		if (st->check_located[i] > st->check_mismatches - sum)
			return false;
		sum += st->check_located[i];
	}
	return st->check_located_kept <= sum;
}

/* Whether lost unit (@position, @stripe) may follow @prev (NULL: none):
 * the file lists them ascending by position, then stripe. */
static bool lost_follows(const struct tpt_state_lost *prev,
			 uint64_t position, uint64_t stripe)
{
	return !prev || prev->position < position ||
	       (prev->position == position && prev->stripe < stripe);
}

/* One line, without its newline: KEY and the rest. */
static int parse_line(char *l, unsigned int n, struct tpt_state *st,
		      bool seen[10], char *err, size_t errlen)
{
	char *rest = strchr(l, ' '), *arg2;
	uint64_t a, b;
	char check[256];

	if (!rest)
		return state_error(err, errlen, n, "expected KEY VALUE");
	*rest++ = '\0';
	if (!strcmp(l, "tptraid-state")) {
		if (seen[0] || !parse_uint(rest, UINT32_MAX, &a, 10) ||
		    a != TPT_STATE_VERSION)
			return state_error(err, errlen, n, "expected "
					   "\"tptraid-state %d\" first",
					   TPT_STATE_VERSION);
		seen[0] = true;
		return 0;
	}
	if (!seen[0])
		return state_error(err, errlen, n, "not a tptraid state file");
	if (!strcmp(l, "array")) {
		if (seen[1] || strlen(rest) != 16 ||
		    !parse_uint(rest, UINT64_MAX, &a, 16) || !a)
			return state_error(err, errlen, n, "array: expected "
					   "one 16-digit hex id, non-zero");
		st->array_id = a;
		seen[1] = true;
		return 0;
	}
	if (!strcmp(l, "key")) {
		if (seen[3] || parse_key(rest, st->key))
			return state_error(err, errlen, n, "key: expected "
					   "once, 32 hex digits, not all "
					   "zero");
		seen[3] = true;
		return 0;
	}
	if (!strcmp(l, "spec")) {
		if (seen[2] || strlen(rest) >= sizeof(st->spec))
			return state_error(err, errlen, n, "spec: once, at "
					   "most %zu bytes",
					   sizeof(st->spec) - 1);
		strcpy(st->spec, rest);
		seen[2] = true;
		return 0;
	}
	if (!strcmp(l, "rebuild_rate") || !strcmp(l, "fail_timeout")) {
		bool rate = !strcmp(l, "rebuild_rate");

		if (seen[rate ? 4 : 5])
			return state_error(err, errlen, n, "%s: at most once",
					   l);
		if ((rate ? tpt_spec_rebuild_rate : tpt_spec_fail_timeout)
		    (rest, rate ? &st->rebuild_rate : &st->fail_timeout,
		     check, sizeof(check)))
			return state_error(err, errlen, n, "%s", check);
		*(rate ? &st->has_rebuild_rate : &st->has_fail_timeout) = true;
		seen[rate ? 4 : 5] = true;
		return 0;
	}
	if (!strcmp(l, "check_located")) {
		char *save = NULL, *tok = strtok_r(rest, " ", &save);

		if (seen[8] || !tok || !parse_uint(tok, UINT64_MAX, &a, 10))
			return state_error(err, errlen, n, "check_located: at "
					   "most once, KEPT and a count per "
					   "position (decimal)");
		st->check_located_kept = a;
		while ((tok = strtok_r(NULL, " ", &save))) {
			if (st->nr_check_located == TPT_SPEC_MAX_MEMBERS ||
			    !parse_uint(tok, UINT64_MAX, &a, 10))
				return state_error(err, errlen, n, "check_"
						   "located: at most %u counts,"
						   " decimal",
						   TPT_SPEC_MAX_MEMBERS);
			st->check_located[st->nr_check_located++] = a;
		}
		seen[8] = true;
		return 0;
	}
	if (!strcmp(l, "held")) {
		if (!parse_uint(rest, TPT_STATE_MAX_BOXES - 1, &a, 10) ||
		    a >= st->nr_boxes || st->held[a] || !st->box[a][0])
			return state_error(err, errlen, n, "held %s: a box "
					   "listed before, not removed, at "
					   "most once", rest);
		st->held[a] = true;
		return 0;
	}
	if (!strcmp(l, "creating")) {
		if (seen[7] || strcmp(rest, "yes"))
			return state_error(err, errlen, n, "creating: at most "
					   "once, \"creating yes\"");
		st->creating = true;
		seen[7] = true;
		return 0;
	}
	if (strcmp(l, "box") && strcmp(l, "position") && strcmp(l, "check") &&
	    strcmp(l, "lost") && strcmp(l, "replace"))
		return state_error(err, errlen, n, "%s: unknown key (expected "
				   "tptraid-state, array, key, spec, box, "
				   "position, held, rebuild_rate, "
				   "fail_timeout, check, check_located, lost, "
				   "replace, creating)", l);
	arg2 = strchr(rest, ' ');
	if (!arg2)
		return state_error(err, errlen, n, "%s: expected two values",
				   l);
	*arg2++ = '\0';
	if (!strcmp(l, "check")) {
		/* UNREADABLE came later: a file without it has none. */
		char *arg3 = strchr(arg2, ' ');
		uint64_t c = 0;

		if (arg3)
			*arg3++ = '\0';
		if (seen[6] || !parse_uint(rest, UINT64_MAX, &a, 10) ||
		    !parse_uint(arg2, UINT64_MAX, &b, 10) ||
		    (arg3 && !parse_uint(arg3, UINT64_MAX, &c, 10)) ||
		    b > a || c > a - b)
			return state_error(err, errlen, n, "check: at most "
					   "once, FROM, MISMATCHES and "
					   "optionally UNREADABLE (stripes, "
					   "decimal, MISMATCHES + UNREADABLE "
					   "<= FROM)");
		st->has_check = true;
		st->check_from = a;
		st->check_mismatches = b;
		st->check_unreadable = c;
		seen[6] = true;
		return 0;
	}
	if (!strcmp(l, "replace")) {
		/* Whether the box is a spare is known once every position
		 * line is in (tpt_state_parse()). */
		if (seen[9] || !parse_uint(rest, TPT_SPEC_MAX_MEMBERS - 1, &a,
					   10) ||
		    !parse_uint(arg2, TPT_STATE_MAX_BOXES - 1, &b, 10) ||
		    b >= st->nr_boxes || !st->box[b][0] || st->held[b])
			return state_error(err, errlen, n, "replace: at most "
					   "once, POSITION and a BOX listed "
					   "before, neither removed nor held");
		st->has_replace = true;
		st->replace_position = (unsigned int)a;
		st->replace_box = (unsigned int)b;
		seen[9] = true;
		return 0;
	}
	if (!strcmp(l, "lost")) {
		struct tpt_state_lost *prev = st->nr_lost ?
					      &st->lost[st->nr_lost - 1] : NULL;

		if (st->nr_lost == TPT_STATE_LOST_MAX ||
		    !parse_uint(rest, TPT_SPEC_MAX_MEMBERS - 1, &a, 10) ||
		    !parse_uint(arg2, UINT64_MAX, &b, 10) ||
		    !lost_follows(prev, a, b))
			return state_error(err, errlen, n, "lost: POSITION "
					   "STRIPE (decimal), in ascending "
					   "order, at most %u lines",
					   TPT_STATE_LOST_MAX);
		st->lost[st->nr_lost].position = (unsigned int)a;
		st->lost[st->nr_lost++].stripe = b;
		return 0;
	}
	if (!strcmp(l, "box")) {
		if (!parse_uint(rest, TPT_STATE_MAX_BOXES - 1, &a, 10) ||
		    a != st->nr_boxes)
			return state_error(err, errlen, n, "box %s: ids go "
					   "0, 1, 2... in order, at most %u",
					   rest, TPT_STATE_MAX_BOXES);
		/* One word: the format writes none with a space. */
		if (strchr(arg2, ' '))
			return state_error(err, errlen, n, "box %s: one URL, "
					   "without spaces", rest);
		/* An id the operator removed: kept empty for spare=. */
		if (!strcmp(arg2, "removed")) {
			st->box[st->nr_boxes++][0] = '\0';
			return 0;
		}
		if (tpt_spec_member_url(arg2, check, sizeof(check)))
			return state_error(err, errlen, n, "box %s", check);
		strcpy(st->box[st->nr_boxes++], arg2);
		return 0;
	}
	/* position */
	{
		if (!parse_uint(rest, TPT_SPEC_MAX_MEMBERS - 1, &a, 10) ||
		    a != st->nr_positions)
			return state_error(err, errlen, n, "position %s: "
					   "positions go 0, 1, 2... in order, "
					   "at most %u", rest,
					   TPT_SPEC_MAX_MEMBERS);
		if (!strcmp(arg2, "-1")) {
			st->position[st->nr_positions++] = -1;
			return 0;
		}
		if (!parse_uint(arg2, TPT_STATE_MAX_BOXES - 1, &b, 10) ||
		    b >= st->nr_boxes || !st->box[b][0])
			return state_error(err, errlen, n, "position %s: box "
					   "%s is not listed before, or "
					   "removed", rest, arg2);
		st->position[st->nr_positions++] = (int)b;
		return 0;
	}
}

int tpt_state_parse(const char *text, size_t len, struct tpt_state *out,
		    char *err, size_t errlen)
{
	bool seen[10] = { false }, used[TPT_STATE_MAX_BOXES] = { false };
	unsigned int line = 0, p;
	char buf[TPT_STATE_SPEC_MAX + 64];
	size_t at = 0;
	int ret;

	memset(out, 0, sizeof(*out));
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;

		line++;
		if (n >= sizeof(buf))
			return state_error(err, errlen, line, "line too long");
		if (memchr(text + at, '\0', n))
			return state_error(err, errlen, line, "a NUL byte");
		memcpy(buf, text + at, n);
		buf[n] = '\0';
		at += n + (nl ? 1 : 0);
		if (!n || buf[0] == '#')
			continue;
		ret = parse_line(buf, line, out, seen, err, errlen);
		if (ret)
			return ret;
	}
	if (!seen[0] || !seen[1] || !seen[2])
		return state_error(err, errlen, line, "tptraid-state, array "
				   "and spec lines are required");
	if (!out->nr_positions || !out->nr_boxes)
		return state_error(err, errlen, line, "no box or position "
				   "lines");
	for (p = 0; p < out->nr_positions; p++) {
		int b = out->position[p];

		if (b < 0)
			continue;
		if (used[b])
			return state_error(err, errlen, line, "box %d serves "
					   "two positions", b);
		used[b] = true;
	}
	if (out->has_replace &&
	    (out->replace_position >= out->nr_positions ||
	     out->position[out->replace_position] < 0 ||
	     used[out->replace_box] || out->held[out->replace_box]))
		return state_error(err, errlen, line, "replace: position %u "
				   "with a box, by a spare that is not held",
				   out->replace_position);
	if (out->nr_lost &&
	    out->lost[out->nr_lost - 1].position >= out->nr_positions)
		return state_error(err, errlen, line, "lost: position %u is "
				   "not listed",
				   out->lost[out->nr_lost - 1].position);
	return check_located_valid(out) ? 0 :
	       state_error(err, errlen, line, "check_located: only with "
			   "check, a count per position, at most MISMATCHES "
			   "in all and KEPT at most their sum");
}

/* Appends to @buf (@len bytes, @at used): false when it does not fit. */
__attribute__((format(printf, 4, 5)))
static bool state_append(char *buf, size_t len, size_t *at, const char *fmt,
			 ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len - *at)
		return false;
	*at += (size_t)n;
	return true;
}

int tpt_state_format(const struct tpt_state *st, char *buf, size_t len)
{
	size_t at = 0;
	unsigned int i;

	if (!st->array_id || !st->nr_boxes || !st->nr_positions ||
	    st->nr_boxes > TPT_STATE_MAX_BOXES ||
	    st->nr_positions > TPT_SPEC_MAX_MEMBERS ||
	    strchr(st->spec, '\n'))
		return -EINVAL;
	for (i = 0; i < st->nr_boxes; i++)
		if (strchr(st->box[i], '\n') || strchr(st->box[i], ' ') ||
		    (!st->box[i][0] && st->held[i]))
			return -EINVAL;
	if (!len || !state_append(buf, len, &at, "# TPT-RAID array state, "
				  "written by the controller "
				  "(docs/controller.md)\ntptraid-state %d\n"
				  "array %016" PRIx64 "\nspec %s\n",
				  TPT_STATE_VERSION, st->array_id, st->spec))
		return -ENOSPC;
	for (i = 0; i < TPT_STATE_KEY_LEN && !st->key[i]; i++)
		;
	if (i < TPT_STATE_KEY_LEN) {
		if (!state_append(buf, len, &at, "key "))
			return -ENOSPC;
		for (i = 0; i < TPT_STATE_KEY_LEN; i++)
			if (!state_append(buf, len, &at, "%02x", st->key[i]))
				return -ENOSPC;
		if (!state_append(buf, len, &at, "\n"))
			return -ENOSPC;
	}
	for (i = 0; i < st->nr_boxes; i++)
		if (!state_append(buf, len, &at, "box %u %s\n", i,
				  st->box[i][0] ? st->box[i] : "removed"))
			return -ENOSPC;
	for (i = 0; i < st->nr_positions; i++)
		if (!state_append(buf, len, &at, "position %u %d\n", i,
				  st->position[i]))
			return -ENOSPC;
	for (i = 0; i < st->nr_boxes; i++)
		if (st->held[i] && !state_append(buf, len, &at, "held %u\n", i))
			return -ENOSPC;
	if (st->has_rebuild_rate &&
	    !state_append(buf, len, &at, "rebuild_rate %u\n", st->rebuild_rate))
		return -ENOSPC;
	if (st->has_fail_timeout &&
	    !state_append(buf, len, &at, "fail_timeout %u\n", st->fail_timeout))
		return -ENOSPC;
	if ((st->has_check && (st->check_mismatches > st->check_from ||
			       st->check_unreadable > st->check_from -
						      st->check_mismatches)) ||
	    !check_located_valid(st))
		return -EINVAL;
	if (st->has_check &&
	    !state_append(buf, len, &at, "check %" PRIu64 " %" PRIu64,
			  st->check_from, st->check_mismatches))
		return -ENOSPC;
	/* Left out when 0: a controller from before it reads the file. */
	if (st->has_check && st->check_unreadable &&
	    !state_append(buf, len, &at, " %" PRIu64, st->check_unreadable))
		return -ENOSPC;
	if (st->has_check && !state_append(buf, len, &at, "\n"))
		return -ENOSPC;
	if (st->nr_check_located) {
		if (!state_append(buf, len, &at, "check_located %" PRIu64,
				  st->check_located_kept))
			return -ENOSPC;
		for (i = 0; i < st->nr_check_located; i++)
			if (!state_append(buf, len, &at, " %" PRIu64,
					  st->check_located[i]))
				return -ENOSPC;
		if (!state_append(buf, len, &at, "\n"))
			return -ENOSPC;
	}
	if (st->nr_lost > TPT_STATE_LOST_MAX)
		return -EINVAL;
	for (i = 0; i < st->nr_lost; i++) {
		const struct tpt_state_lost *l = &st->lost[i];

		if (l->position >= st->nr_positions ||
		    !lost_follows(i ? l - 1 : NULL, l->position, l->stripe))
			return -EINVAL;
		if (!state_append(buf, len, &at, "lost %u %" PRIu64 "\n",
				  l->position, l->stripe))
			return -ENOSPC;
	}
	if (st->has_replace &&
	    (st->replace_position >= st->nr_positions ||
	     st->position[st->replace_position] < 0 ||
	     st->replace_box >= st->nr_boxes || !st->box[st->replace_box][0] ||
	     st->held[st->replace_box]))
		return -EINVAL;
	for (i = 0; st->has_replace && i < st->nr_positions; i++)
		if (st->position[i] == (int)st->replace_box)
			return -EINVAL;
	if (st->has_replace &&
	    !state_append(buf, len, &at, "replace %u %u\n",
			  st->replace_position, st->replace_box))
		return -ENOSPC;
	if (st->creating && !state_append(buf, len, &at, "creating yes\n"))
		return -ENOSPC;
	return (int)at;
}
