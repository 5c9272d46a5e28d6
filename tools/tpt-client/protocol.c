/* tpt-client's JSON-lines protocol: the fields of a request and the
 * response objects, with jansson.  Binary data travels as lowercase hex
 * (either case accepted), 64-bit unsigned values as decimal strings. */
#include "client.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ms_left(long long deadline)
{
	long long left = deadline - now_ms();

	return left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

int fail(struct request *rq, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rq->err, sizeof(rq->err), fmt, ap);
	va_end(ap);
	return -1;
}

int fail_errno(struct request *rq, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rq->err, sizeof(rq->err), fmt, ap);
	va_end(ap);
	rq->err_errno = err < 0 ? -err : err;
	return -1;
}

/* ------------------------------------------------------------------ */
/* Request fields */

bool has_field(const struct request *rq, const char *key)
{
	return json_object_get(rq->obj, key) != NULL;
}

int get_str(struct request *rq, const char *key, bool required,
	    const char **out)
{
	json_t *v = json_object_get(rq->obj, key);

	if (!v)
		return required ? fail(rq, "missing field '%s'", key) : 1;
	if (!json_is_string(v))
		return fail(rq, "field '%s' must be a string", key);
	*out = json_string_value(v);
	return 0;
}

int get_name(struct request *rq, const char *key, const char **out)
{
	if (get_str(rq, key, true, out) < 0)
		return -1;
	if (!(*out)[0])
		return fail(rq, "field '%s' must not be empty", key);
	return 0;
}

int get_int(struct request *rq, const char *key, bool required,
	    long long min, long long max, long long *out)
{
	json_t *v = json_object_get(rq->obj, key);
	long long n;

	if (!v)
		return required ? fail(rq, "missing field '%s'", key) : 1;
	if (!json_is_integer(v))
		return fail(rq, "field '%s' must be an integer", key);
	n = json_integer_value(v);
	if (n < min || n > max)
		return fail(rq, "field '%s' must be in %lld..%lld", key, min,
			    max);
	*out = n;
	return 0;
}

int get_size(struct request *rq, const char *key, bool required, size_t max,
	     size_t *out)
{
	long long v = 0;
	int rc = get_int(rq, key, required, 0, (long long)max, &v);

	if (!rc)
		*out = (size_t)v;
	return rc;
}

int get_u64(struct request *rq, const char *key, bool required,
	    uint64_t *out)
{
	json_t *v = json_object_get(rq->obj, key);
	const char *s;
	unsigned long long n;
	char *end;

	if (!v)
		return required ? fail(rq, "missing field '%s'", key) : 1;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return fail(rq, "field '%s' must not be negative", key);
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return fail(rq, "field '%s' must be a decimal string", key);
	s = json_string_value(v);
	if (s[0] < '0' || s[0] > '9')
		return fail(rq, "field '%s' is not a decimal number", key);
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno || *end)
		return fail(rq, "field '%s' is not a decimal u64", key);
	*out = n;
	return 0;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int get_hex(struct request *rq, const char *key, bool required,
	    unsigned char **out, size_t *len)
{
	const char *s;
	unsigned char *bytes;
	size_t n, i;
	int rc = get_str(rq, key, required, &s), hi, lo;

	if (rc)
		return rc;
	*out = NULL;
	*len = 0;
	n = strlen(s);
	if (n % 2)
		goto bad;
	if (!n)
		return 0;
	bytes = malloc(n / 2);
	if (!bytes)
		return fail(rq, "out of memory decoding '%s'", key);
	for (i = 0; i < n / 2; i++) {
		hi = hex_digit(s[2 * i]);
		lo = hex_digit(s[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			free(bytes);
			goto bad;
		}
		bytes[i] = (unsigned char)(hi << 4 | lo);
	}
	*out = bytes;
	*len = n / 2;
	return 0;
bad:
	return fail(rq, "field '%s' is not an even-length hex string", key);
}

int get_bool(struct request *rq, const char *key, bool *out)
{
	json_t *v = json_object_get(rq->obj, key);

	if (!v)
		return 1;
	if (!json_is_boolean(v))
		return fail(rq, "field '%s' must be true or false", key);
	*out = json_is_true(v);
	return 0;
}

int word_value(struct request *rq, const char *key, const char *text,
	       const struct word *words, int *value)
{
	char choices[128] = "";
	const char *sep;
	size_t len = 0;
	int i;

	for (i = 0; words[i].text; i++) {
		if (!strcmp(words[i].text, text)) {
			*value = words[i].value;
			return 0;
		}
	}
	for (i = 0; words[i].text && len < sizeof(choices); i++) {
		sep = !i ? "" : words[i + 1].text ? ", " : " or ";
		len += (size_t)snprintf(choices + len, sizeof(choices) - len,
					"%s%s", sep, words[i].text);
	}
	return fail(rq, "field '%s' must be %s", key, choices);
}

const char *word_text(const struct word *words, int value)
{
	int i;

	for (i = 0; words[i].text; i++)
		if (words[i].value == value)
			return words[i].text;
	return "?";
}

int get_timeout(struct request *rq, long long *deadline)
{
	long long ms = DEFAULT_TIMEOUT_MS;

	if (get_int(rq, "timeout_ms", false, 0, MAX_TIMEOUT_MS, &ms) < 0)
		return -1;
	*deadline = now_ms() + ms;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Responses */

/* Adds value (taken over, NULL when its allocation failed) to r; a
 * failure anywhere spoils the whole response. */
static void reply_set(struct reply *r, const char *key, json_t *value)
{
	if (!r->obj) {
		json_decref(value);
		return;
	}
	if (!value || json_object_set_new(r->obj, key, value)) {
		json_decref(r->obj);
		r->obj = NULL;
	}
}

struct reply reply_new(const struct request *rq, bool ok)
{
	struct reply r = { .obj = json_object() };

	if (rq->has_id)
		reply_int(&r, "id", rq->id);
	reply_bool(&r, "ok", ok);
	return r;
}

void reply_int(struct reply *r, const char *key, long long v)
{
	reply_set(r, key, json_integer(v));
}

void reply_u64(struct reply *r, const char *key, uint64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
	reply_set(r, key, json_string(num));
}

void reply_bool(struct reply *r, const char *key, bool v)
{
	reply_set(r, key, json_boolean(v));
}

/* JSON strings are UTF-8, and jansson refuses anything else.  Ours may
 * fall short two ways, and go out readable either way, with U+FFFD for
 * what was lost: a message cut to its buffer's size inside a character
 * (the usual case: names in error messages), or a library message that
 * is not UTF-8 at all (then every non-ASCII byte is replaced). */
static json_t *json_text(const char *s)
{
	static const char replacement[] = "\xef\xbf\xbd";
	size_t len = strlen(s), cut, i;
	json_t *v = json_string(s);
	char *fixed, *o;

	if (v)
		return v;
	fixed = malloc(3 * len + 1);
	if (!fixed)
		return NULL;
	for (cut = 1; !v && cut <= 3 && cut <= len; cut++) {
		memcpy(fixed, s, len - cut);
		memcpy(fixed + len - cut, replacement, sizeof(replacement));
		v = json_string(fixed);
	}
	if (!v) {
		for (o = fixed, i = 0; i < len; i++) {
			if ((unsigned char)s[i] < 0x80) {
				*o++ = s[i];
			} else {
				memcpy(o, replacement, 3);
				o += 3;
			}
		}
		*o = '\0';
		v = json_string(fixed);
	}
	free(fixed);
	return v;
}

void reply_str(struct reply *r, const char *key, const char *s)
{
	reply_set(r, key, json_text(s));
}

void reply_hex(struct reply *r, const char *key, const void *data,
	       size_t len)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = data;
	char *hex = len < SIZE_MAX / 2 ? malloc(2 * len + 1) : NULL;
	size_t i;

	if (!hex) {
		reply_set(r, key, NULL);
		return;
	}
	for (i = 0; i < len; i++) {
		hex[2 * i] = digits[b[i] >> 4];
		hex[2 * i + 1] = digits[b[i] & 15];
	}
	reply_set(r, key, json_stringn_nocheck(hex, 2 * len));
	free(hex);
}

int reply_send(struct reply *r)
{
	/* Exactly one line per response, even without memory for it. */
	static const char nomem[] = "{\"ok\":false,"
		"\"error\":\"out of memory building the response\"}";
	char *line = r->obj ? json_dumps(r->obj, JSON_COMPACT) : NULL;

	if (fputs(line ? line : nomem, stdout) == EOF ||
	    putchar('\n') == EOF || fflush(stdout)) {
		fprintf(stderr, "tpt-client: cannot write stdout: %s\n",
			strerror(errno));
		exit(1);
	}
	free(line);
	json_decref(r->obj);
	r->obj = NULL;
	return 0;
}

int reply_ok(const struct request *rq)
{
	struct reply r = reply_new(rq, true);

	return reply_send(&r);
}

void reply_error(const struct request *rq)
{
	struct reply r = reply_new(rq, false);
	const char *name;

	reply_str(&r, "error", rq->err[0] ? rq->err : "unknown error");
	if (rq->err_errno) {
		name = strerrorname_np(rq->err_errno);
		reply_int(&r, "errno", rq->err_errno);
		reply_str(&r, "errno_name", name ? name : "?");
	}
	reply_send(&r);
}
