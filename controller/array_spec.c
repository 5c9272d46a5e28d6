#include "controller/array_spec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/raid_level.h"
#include "scsi/tpt_cdb.h"

#define DEFAULT_INITIATOR "iqn.2026-11.org.tptraid:controller"

static int spec_error(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int spec_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* "64k", "1m", "4096": a byte count with an optional binary suffix. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned int shift = 0;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case 'k': case 'K':
		shift = 10;
		end++;
		break;
	case 'm': case 'M':
		shift = 20;
		end++;
		break;
	default:
		break;
	}
	/* Shifted past 64 bits, 18014398509482048k would wrap to 64k. */
	if (*end || v > UINT64_MAX >> shift)
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* The part of a member URL after "iscsi://" and any "user%secret@":
 * host[:port]/iqn/lun, as libiscsi's tools take it.  No '@' in it: the
 * user part ends at the first one, so a second would make the URL read
 * differently once its secrets are hidden (tpt_spec_hide_secrets). */
static bool valid_box_address(const char *addr, size_t len)
{
	const char *end = addr + len, *slash, *lun;

	if (memchr(addr, '@', len))
		return false;
	slash = memchr(addr, '/', len);
	if (!slash || slash == addr)
		return false;
	for (lun = end; lun > slash + 1 && lun[-1] != '/'; lun--)
		;
	/* lun: after the last '/', which must not end an empty IQN. */
	if (lun <= slash + 2 || lun == end)
		return false;
	for (; lun < end; lun++)
		if (*lun < '0' || *lun > '9')
			return false;
	return true;
}

void tpt_spec_hide_secrets(const char *text, char *out, size_t outlen)
{
	size_t n = 0;

	if (!outlen)
		return;
	while (*text && n + 1 < outlen) {
		const char *end, *query, *at;

		if (strncmp(text, "://", 3)) {
			out[n++] = *text++;
			continue;
		}
		/* One URL: up to the end of its spec value.  As in
		 * libiscsi, the arguments start at the first '?' and the
		 * user part ends at the first '@' before them. */
		end = text + strcspn(text, "; \t\n");
		query = memchr(text, '?', end - text);
		if (!query)
			query = end;
		at = memchr(text, '@', query - text);
		n += snprintf(out + n, outlen - n, "://%.*s",
			      (int)(query - (at ? at + 1 : text + 3)),
			      at ? at + 1 : text + 3);
		if (n >= outlen)
			n = outlen - 1;
		text = end;
	}
	out[n] = '\0';
}

/* Why a CHAP secret in a member URL is refused, or NULL. */
static const char *bad_chap_secret(const char *secret, size_t len)
{
	if (len < TPT_SPEC_CHAP_SECRET_MIN)
		return "has a CHAP secret shorter than 12 characters "
		       "(RFC 7143 asks for 96 random bits)";
	if (memchr(secret, ',', len))
		return "has a ',' in a CHAP secret (tgtadm cannot set it)";
	return NULL;
}

/*
 * iscsi://[user%secret@]host[:port]/target-iqn/lun
 *	[?target_user=NAME&target_password=SECRET]
 *
 * user%secret is CHAP towards the member; the arguments make it mutual:
 * the name and secret the member must answer with (libiscsi checks them).
 * Messages name the URL with its secrets hidden.
 */
static int check_member_url(const char *key, const char *url, char *err,
			    size_t errlen)
{
	const char *query, *at, *pct = NULL, *addr, *why = NULL;
	const char *tuser = NULL, *tsecret = NULL;
	size_t tuser_len = 0, tsecret_len = 0, secret_len = 0;
	char name[TPT_SPEC_URL_MAX];

	tpt_spec_hide_secrets(url, name, sizeof(name));
	if (strlen(url) >= TPT_SPEC_URL_MAX)
		return spec_error(err, errlen, "%s%s%s: URL too long", key,
				  *key ? "=" : "", name);
	if (strncmp(url, "iscsi://", 8))
		goto syntax;
	query = strchr(url, '?');
	if (!query)
		query = url + strlen(url);
	at = memchr(url, '@', query - url);
	addr = at ? at + 1 : url + 8;
	if (!valid_box_address(addr, query - addr))
		goto syntax;
	if (at) {
		pct = memchr(url + 8, '%', at - (url + 8));
		if (!pct)
			why = "has a CHAP user but no secret (expected "
			      "user%secret@)";
		else if (pct == url + 8)
			why = "has a CHAP secret but no user (expected "
			      "user%secret@)";
		else
			why = bad_chap_secret(pct + 1, at - (pct + 1));
		secret_len = pct ? at - (pct + 1) : 0;
	}
	for (const char *arg = *query ? query + 1 : query; *arg && !why;) {
		size_t len = strcspn(arg, "&");
		const char *eq = memchr(arg, '=', len);

		if (eq && eq - arg == 11 && !strncmp(arg, "target_user", 11)) {
			tuser = eq + 1;
			tuser_len = len - 12;
		} else if (eq && eq - arg == 15 &&
			   !strncmp(arg, "target_password", 15)) {
			tsecret = eq + 1;
			tsecret_len = len - 16;
		} else {
			return spec_error(err, errlen, "%s%s%s: unknown URL "
					  "argument '%.*s' (expected "
					  "target_user=, target_password=)",
					  key, *key ? "=" : "", name,
					  (int)(eq ? (size_t)(eq - arg) : len),
					  arg);
		}
		arg += len + (arg[len] == '&');
	}
	if (!why && (tuser || tsecret)) {
		if (!tuser_len || !tsecret)
			why = "needs both target_user= and target_password= "
			      "for mutual CHAP";
		else if (!at)
			why = "asks for mutual CHAP without user%secret@: the "
			      "member must check the controller first";
		else if (!(why = bad_chap_secret(tsecret, tsecret_len)) &&
			 tsecret_len == secret_len &&
			 !memcmp(tsecret, pct + 1, secret_len))
			why = "uses one CHAP secret in both directions "
			      "(RFC 7143 forbids it)";
	}
	if (why)
		return spec_error(err, errlen, "%s%s%s: %s", key,
				  *key ? "=" : "", name, why);
	return 0;
syntax:
	return spec_error(err, errlen, "%s%s%s: expected iscsi://[user%%"
			  "secret@]host[:port]/target-iqn/lun"
			  "[?target_user=U&target_password=S]", key,
			  *key ? "=" : "", name);
}

static int parse_dm(const char *value, struct tpt_array_spec *out,
		    char *err, size_t errlen)
{
	const char *colon = strrchr(value, ':');
	uint64_t port;
	size_t alen;

	if (!colon || colon == value || parse_size(colon + 1, &port) ||
	    port > 65535)
		return spec_error(err, errlen, "dm=%s: expected ADDR:PORT", value);
	/* [IPV6]:PORT, or the address as it is. */
	if (value[0] == '[' && colon[-1] == ']')
		value++, colon--;
	alen = colon - value;
	if (alen >= sizeof(out->dm_addr))
		return spec_error(err, errlen, "dm=%s: address too long", value);
	memcpy(out->dm_addr, value, alen);
	out->dm_addr[alen] = '\0';
	/* The datamover listens on an address, which it also hands to the
	 * targets as its endpoint: a name would only fail then. */
	if (!tpt_addr_is_numeric(out->dm_addr))
		return spec_error(err, errlen, "dm=%s: not a numeric IPv4 or "
				  "IPv6 address", out->dm_addr);
	out->dm_port = port;
	return 0;
}

static int add_url(char list[][TPT_SPEC_URL_MAX], unsigned int *n,
		   unsigned int max, const char *key, const char *value,
		   char *err, size_t errlen)
{
	char name[TPT_SPEC_URL_MAX];
	int ret;

	ret = check_member_url(key, value, err, errlen);
	if (ret)
		return ret;
	if (*n == max) {
		tpt_spec_hide_secrets(value, name, sizeof(name));
		return spec_error(err, errlen, "%s=%s: at most %u %ss", key,
				  name, max, key);
	}
	strcpy(list[(*n)++], value);
	return 0;
}

int tpt_spec_unit(const char *value, uint32_t *out, char *err,
		  size_t errlen)
{
	uint64_t v;

	if (parse_size(value, &v) || v < TPT_SPEC_UNIT_MIN ||
	    v > TPT_SPEC_UNIT_MAX || (v & (v - 1)))
		return spec_error(err, errlen, "unit=%s: stripe unit must be a "
				  "power of two from 4k to 1m", value);
	*out = (uint32_t)v;
	return 0;
}

int tpt_spec_fail_timeout(const char *value, unsigned int *out, char *err,
			  size_t errlen)
{
	uint64_t v;

	if (parse_size(value, &v) || !v || v > TPT_SPEC_FAIL_TIMEOUT_MAX)
		return spec_error(err, errlen, "fail_timeout=%s: expected 1..%u "
				  "seconds", value, TPT_SPEC_FAIL_TIMEOUT_MAX);
	*out = (unsigned int)v;
	return 0;
}

int tpt_spec_rebuild_rate(const char *value, unsigned int *out, char *err,
			  size_t errlen)
{
	uint64_t v;

	if (parse_size(value, &v) || v > TPT_SPEC_REBUILD_RATE_MAX)
		return spec_error(err, errlen, "rebuild_rate=%s: expected 0 "
				  "(unthrottled) to %u MB/s", value,
				  TPT_SPEC_REBUILD_RATE_MAX);
	*out = (unsigned int)v;
	return 0;
}

int tpt_spec_member_url(const char *value, char *err, size_t errlen)
{
	return check_member_url("", value, err, errlen);
}

bool tpt_spec_same_box(const char *a, const char *b)
{
	char na[TPT_SPEC_URL_MAX], nb[TPT_SPEC_URL_MAX];

	tpt_spec_hide_secrets(a, na, sizeof(na));
	tpt_spec_hide_secrets(b, nb, sizeof(nb));
	return !strcmp(na, nb);
}

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The index of @value among @n @names, or -1. */
static int name_index(const char *value, const char *const *names,
		      unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (!strcmp(value, names[i]))
			return (int)i;
	return -1;
}

static int parse_yes_no(const char *key, const char *value, bool *out,
			char *err, size_t errlen)
{
	if (strcmp(value, "yes") && strcmp(value, "no"))
		return spec_error(err, errlen, "%s=%s: expected yes or no",
				  key, value);
	*out = !strcmp(value, "yes");
	return 0;
}

static int parse_option(char *key, char *value, struct tpt_array_spec *out,
			char *err, size_t errlen)
{
	if (!strcmp(key, "raid")) {
		if (strcmp(value, "1") && strcmp(value, "5") &&
		    strcmp(value, "6"))
			return spec_error(err, errlen, "raid=%s: RAID levels 1, "
					  "5 and 6 are supported", value);
		out->raid_level = (unsigned int)(value[0] - '0');
		return 0;
	}
	if (!strcmp(key, "unit"))
		return tpt_spec_unit(value, &out->unit_bytes, err, errlen);
	if (!strcmp(key, "mode")) {
		if (!strcmp(value, "tpt"))
			out->mode = TPT_MODE_TPT;
		else if (!strcmp(value, "baseline"))
			out->mode = TPT_MODE_BASELINE;
		else
			return spec_error(err, errlen, "mode=%s: expected tpt "
					  "or baseline", value);
		return 0;
	}
	if (!strcmp(key, "dm"))
		return parse_dm(value, out, err, errlen);
	if (!strcmp(key, "initiator")) {
		if (strncmp(value, "iqn.", 4) ||
		    strlen(value) >= sizeof(out->initiator))
			return spec_error(err, errlen, "initiator=%s: expected "
					  "an iqn. name", value);
		strcpy(out->initiator, value);
		return 0;
	}
	if (!strcmp(key, "member"))
		return add_url(out->member, &out->nr_members,
			       TPT_SPEC_MAX_MEMBERS, key, value, err, errlen);
	if (!strcmp(key, "spare"))
		return add_url(out->spare, &out->nr_spares,
			       TPT_SPEC_MAX_SPARES, key, value, err, errlen);
	if (!strcmp(key, "assume_clean"))
		return parse_yes_no(key, value, &out->assume_clean, err,
				    errlen);
	if (!strcmp(key, "write_intent"))
		return parse_yes_no(key, value, &out->write_intent, err,
				    errlen);
	if (!strcmp(key, "prefetch"))
		return parse_yes_no(key, value, &out->prefetch, err, errlen);
	if (!strcmp(key, "parity_gather")) {
		static const char *const names[] = {
			[TPT_GATHER_AUTO] = "auto",
			[TPT_GATHER_STAR] = "star",
			[TPT_GATHER_TREE] = "tree",
			[TPT_GATHER_FLAT] = "flat",
		};
		int i = name_index(value, names, ARRAY_LEN(names));

		if (i < 0)
			return spec_error(err, errlen, "parity_gather=%s: "
					  "expected auto, star, tree or flat",
					  value);
		out->parity_gather = (enum tpt_parity_gather)i;
		return 0;
	}
	if (!strcmp(key, "rebuild_gather")) {
		static const char *const names[] = {
			[TPT_REBUILD_TREE] = "tree",
			[TPT_REBUILD_FLAT] = "flat",
		};
		int i = name_index(value, names, ARRAY_LEN(names));

		if (i < 0)
			return spec_error(err, errlen, "rebuild_gather=%s: "
					  "expected tree or flat", value);
		out->rebuild_gather = (enum tpt_rebuild_gather)i;
		return 0;
	}
	if (!strcmp(key, "start_dirty_degraded"))
		return parse_yes_no(key, value, &out->start_dirty_degraded,
				    err, errlen);
	if (!strcmp(key, "fail_timeout"))
		return tpt_spec_fail_timeout(value, &out->fail_timeout, err,
					     errlen);
	if (!strcmp(key, "rebuild_rate"))
		return tpt_spec_rebuild_rate(value, &out->rebuild_rate, err,
					     errlen);
	return spec_error(err, errlen, "%s: unknown option (expected raid, "
			  "unit, mode, dm, initiator, member, spare, "
			  "fail_timeout, rebuild_rate, assume_clean, "
			  "start_dirty_degraded, write_intent, prefetch, "
			  "parity_gather, rebuild_gather)", key);
}

static int check_whole(struct tpt_array_spec *out, char *err, size_t errlen)
{
	const struct raid_level_ops *level;
	unsigned int i, j;

	if (!out->raid_level)
		return spec_error(err, errlen, "raid=1, raid=5 or raid=6 is required");
	level = raid_level_find(out->raid_level);
	if (level && out->nr_members < level->min_members)
		return spec_error(err, errlen, "RAID-%u needs at least %u "
				  "members, %u given", out->raid_level,
				  level->min_members, out->nr_members);
	if (out->mode == TPT_MODE_TPT && !out->dm_port && !out->dm_addr[0])
		return spec_error(err, errlen, "mode=tpt needs dm=ADDR:PORT, "
				  "where targets reach the controller");
	for (i = 0; i < out->nr_members + out->nr_spares; i++) {
		const char *a = i < out->nr_members ? out->member[i] :
				out->spare[i - out->nr_members];

		for (j = 0; j < i; j++) {
			const char *b = j < out->nr_members ? out->member[j] :
					out->spare[j - out->nr_members];

			if (tpt_spec_same_box(a, b)) {
				char name[TPT_SPEC_URL_MAX];

				tpt_spec_hide_secrets(a, name, sizeof(name));
				return spec_error(err, errlen, "%s is named "
						  "twice: a box may hold one "
						  "block of a stripe at most",
						  name);
			}
		}
	}
	return 0;
}

int tpt_array_spec_parse(const char *opts, struct tpt_array_spec *out,
			 char *err, size_t errlen)
{
	struct tpt_array_spec spec;
	char *copy, *p, *item;
	int ret = 0;

	if (!opts || !*opts)
		return spec_error(err, errlen, "no array options: expected "
				  "raid=5;unit=...;member=...");
	memset(&spec, 0, sizeof(spec));
	spec.unit_bytes = 64u << 10;
	spec.fail_timeout = TPT_SPEC_FAIL_TIMEOUT_DEFAULT;
	spec.write_intent = true;
	strcpy(spec.initiator, DEFAULT_INITIATOR);
	copy = strdup(opts);
	if (!copy)
		return -ENOMEM;
	for (p = copy; (item = strsep(&p, ";")) != NULL;) {
		char *value;

		item += strspn(item, " \t\n");
		if (!*item)
			continue;
		value = strchr(item, '=');
		if (!value) {
			ret = spec_error(err, errlen, "%s: expected key=value",
					 item);
			break;
		}
		*value++ = '\0';
		/* Specs are often written over several lines. */
		value[strcspn(value, " \t\n")] = '\0';
		ret = parse_option(item, value, &spec, err, errlen);
		if (ret)
			break;
	}
	free(copy);
	if (!ret)
		ret = check_whole(&spec, err, errlen);
	if (!ret)
		*out = spec;
	return ret;
}

int tpt_array_spec_canonical(const char *opts, char *out, size_t outlen)
{
	size_t at = 0;

	if (!outlen)
		return -E2BIG;
	out[0] = '\0';
	while (opts && *opts) {
		size_t item = strcspn(opts, ";"), lead, key, value;
		const char *eq;
		int n;

		lead = strspn(opts, " \t\n");
		if (lead > item)
			lead = item;
		eq = memchr(opts + lead, '=', item - lead);
		/* As the parser: a value ends at the first blank. */
		key = eq ? (size_t)(eq - (opts + lead)) : item - lead;
		value = eq ? strcspn(eq + 1, " \t\n;") : 0;
		if (item > lead) {
			n = snprintf(out + at, outlen - at, "%s%.*s%s%.*s",
				     at ? ";" : "", (int)key, opts + lead,
				     eq ? "=" : "", (int)value, eq ? eq + 1 : "");
			if (n < 0 || (size_t)n >= outlen - at)
				return -E2BIG;
			at += (size_t)n;
		}
		opts += item;
		if (*opts == ';')
			opts++;
	}
	return 0;
}

const char *tpt_array_mode_name(enum tpt_array_mode mode)
{
	return mode == TPT_MODE_TPT ? "tpt" : "baseline";
}
