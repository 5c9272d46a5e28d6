/* jsonl.h: the small JSON-lines codec our co-process tools speak.
 *
 * Deliberately not a general JSON library.  A request is one flat object
 * per line whose values are strings, integers, true/false/null, or arrays
 * of strings; anything else (nested objects, fractions, exponents) is
 * refused with a message, never a crash.  Binary data travels as hex
 * strings, and 64-bit unsigned values as decimal strings because JSON
 * readers commonly hold numbers in doubles.
 *
 * Header-only (static inline) so single-file tools can include it without
 * the build knowing about it.  Nothing here aborts: allocation failures
 * come back as errors. */
#ifndef TPT_TOOLS_JSONL_H
#define TPT_TOOLS_JSONL_H

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds that keep a hostile line from costing more than its own size. */
#define JSONL_MAX_FIELDS 64
#define JSONL_MAX_ITEMS 4096

enum jsonl_type {
	JSONL_NULL,
	JSONL_BOOL,
	JSONL_INT,
	JSONL_STRING,
	JSONL_ARRAY,	/* of strings */
};

struct jsonl_value {
	enum jsonl_type type;
	bool boolean;
	long long integer;
	char *str;	/* NUL-terminated; embedded NULs are refused */
	size_t len;
	char **items;	/* JSONL_ARRAY: nitems NUL-terminated strings */
	size_t nitems;
};

struct jsonl_field {
	char *key;
	struct jsonl_value value;
};

struct jsonl_obj {
	struct jsonl_field fields[JSONL_MAX_FIELDS];
	size_t nfields;
};

/* ------------------------------------------------------------------ */
/* Reader */

struct jsonl_reader {
	const char *p, *end;
	char *err;
	size_t errlen;
};

static inline int jsonl_fail(struct jsonl_reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline int jsonl_fail(struct jsonl_reader *r, const char *fmt, ...)
{
	va_list ap;

	/* Keep the first, most specific message. */
	if (r->err[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(r->err, r->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static inline void jsonl_skip_ws(struct jsonl_reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' ||
				 *r->p == '\r' || *r->p == '\n'))
		r->p++;
}

static inline int jsonl_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static inline int jsonl_read_u16_escape(struct jsonl_reader *r, unsigned *out)
{
	unsigned v = 0;
	int i, d;

	if (r->end - r->p < 4)
		return jsonl_fail(r, "truncated \\u escape");
	for (i = 0; i < 4; i++) {
		d = jsonl_hex_digit(r->p[i]);
		if (d < 0)
			return jsonl_fail(r, "bad \\u escape");
		v = v << 4 | (unsigned)d;
	}
	r->p += 4;
	*out = v;
	return 0;
}

/* A \u escape, r->p just past the "\u"; a high surrogate takes the low
 * one that must follow, so *cp is one whole code point. */
static inline int jsonl_read_codepoint(struct jsonl_reader *r, unsigned *cp)
{
	unsigned lo = 0;

	if (jsonl_read_u16_escape(r, cp))
		return -1;
	if (*cp >= 0xdc00 && *cp <= 0xdfff)
		return jsonl_fail(r, "lone low surrogate in \\u escape");
	if (*cp < 0xd800 || *cp > 0xdbff)
		return *cp ? 0 : jsonl_fail(r, "NUL character in string");
	if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
		return jsonl_fail(r, "lone high surrogate in \\u escape");
	r->p += 2;
	if (jsonl_read_u16_escape(r, &lo))
		return -1;
	if (lo < 0xdc00 || lo > 0xdfff)
		return jsonl_fail(r, "bad surrogate pair in \\u escape");
	*cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
	return 0;
}

static inline size_t jsonl_put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* r->p is on the opening quote.  The decoded text is never longer than
 * its source (an escape shrinks or keeps its length), so one allocation
 * sized by a pre-scan to the closing quote is enough. */
static inline int jsonl_read_string(struct jsonl_reader *r, char **out,
				    size_t *outlen)
{
	const char *scan = r->p + 1;
	char *buf, *o;
	unsigned cp = 0;

	while (scan < r->end && *scan != '"')
		scan += *scan == '\\' ? 2 : 1;
	if (scan >= r->end)
		return jsonl_fail(r, "unterminated string");
	buf = malloc((size_t)(scan - r->p));
	if (!buf)
		return jsonl_fail(r, "out of memory");
	o = buf;
	r->p++;
	while (*r->p != '"') {
		unsigned char c = (unsigned char)*r->p++;

		if (c < 0x20) {
			jsonl_fail(r, "control character in string");
			goto bad;
		}
		if (c != '\\') {
			*o++ = (char)c;
			continue;
		}
		c = (unsigned char)*r->p++;
		switch (c) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (jsonl_read_codepoint(r, &cp))
				goto bad;
			o += jsonl_put_utf8(o, cp);
			break;
		default:
			jsonl_fail(r, "bad escape in string");
			goto bad;
		}
	}
	r->p++;
	*o = '\0';
	*out = buf;
	*outlen = (size_t)(o - buf);
	return 0;
bad:
	free(buf);
	return -1;
}

/* The whole JSON number grammar is read so that "1.5" is reported as "not
 * an integer" rather than as trailing garbage. */
static inline int jsonl_read_integer(struct jsonl_reader *r, long long *out)
{
	const char *start = r->p;
	bool negative = false, fraction = false;
	unsigned long long v = 0, limit;

	if (r->p < r->end && *r->p == '-') {
		negative = true;
		r->p++;
	}
	if (r->p >= r->end || *r->p < '0' || *r->p > '9')
		return jsonl_fail(r, "bad number");
	if (*r->p == '0' && r->end - r->p > 1 && r->p[1] >= '0' &&
	    r->p[1] <= '9')
		return jsonl_fail(r, "leading zero in number");
	limit = negative ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
		unsigned d = (unsigned)(*r->p++ - '0');

		if (v > (limit - d) / 10)
			return jsonl_fail(r, "integer out of range");
		v = v * 10 + d;
	}
	if (r->p < r->end && *r->p == '.') {
		fraction = true;
		r->p++;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		fraction = true;
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	if (fraction)
		return jsonl_fail(r, "number '%.*s' is not an integer",
				  (int)(r->p - start > 32 ? 32 : r->p - start),
				  start);
	*out = negative ? (long long)(0 - v) : (long long)v;
	return 0;
}

static inline bool jsonl_match_word(struct jsonl_reader *r, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n))
		return false;
	r->p += n;
	return true;
}

static inline void jsonl_value_free(struct jsonl_value *v)
{
	size_t i;

	free(v->str);
	for (i = 0; i < v->nitems; i++)
		free(v->items[i]);
	free(v->items);
	memset(v, 0, sizeof(*v));
}

static inline int jsonl_read_array(struct jsonl_reader *r,
				   struct jsonl_value *v)
{
	size_t cap = 0, len;
	char **bigger;

	v->type = JSONL_ARRAY;
	r->p++;
	jsonl_skip_ws(r);
	if (r->p < r->end && *r->p == ']') {
		r->p++;
		return 0;
	}
	for (;;) {
		jsonl_skip_ws(r);
		if (r->p >= r->end)
			return jsonl_fail(r, "unterminated array");
		if (*r->p != '"')
			return jsonl_fail(r, "arrays may hold only strings");
		if (v->nitems == JSONL_MAX_ITEMS)
			return jsonl_fail(r, "more than %d array items",
					  JSONL_MAX_ITEMS);
		if (v->nitems == cap) {
			cap = cap ? cap * 2 : 8;
			bigger = realloc(v->items, cap * sizeof(*v->items));
			if (!bigger)
				return jsonl_fail(r, "out of memory");
			v->items = bigger;
		}
		if (jsonl_read_string(r, &v->items[v->nitems], &len))
			return -1;
		v->nitems++;
		jsonl_skip_ws(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == ']') {
			r->p++;
			return 0;
		}
		return jsonl_fail(r, "expected ',' or ']' in array");
	}
}

static inline int jsonl_read_value(struct jsonl_reader *r,
				   struct jsonl_value *v)
{
	if (r->p >= r->end)
		return jsonl_fail(r, "missing value");
	switch (*r->p) {
	case '"':
		v->type = JSONL_STRING;
		return jsonl_read_string(r, &v->str, &v->len);
	case '[':
		return jsonl_read_array(r, v);
	case '{':
		return jsonl_fail(r, "nested objects are not supported");
	case 't':
	case 'f':
	case 'n':
		if (jsonl_match_word(r, "true")) {
			v->type = JSONL_BOOL;
			v->boolean = true;
			return 0;
		}
		if (jsonl_match_word(r, "false")) {
			v->type = JSONL_BOOL;
			return 0;
		}
		if (jsonl_match_word(r, "null")) {
			v->type = JSONL_NULL;
			return 0;
		}
		return jsonl_fail(r, "bad literal");
	default:
		v->type = JSONL_INT;
		return jsonl_read_integer(r, &v->integer);
	}
}

static inline void jsonl_obj_free(struct jsonl_obj *obj)
{
	size_t i;

	for (i = 0; i < obj->nfields; i++) {
		free(obj->fields[i].key);
		jsonl_value_free(&obj->fields[i].value);
	}
	obj->nfields = 0;
}

static inline const struct jsonl_value *jsonl_get(const struct jsonl_obj *obj,
						  const char *key)
{
	size_t i;

	for (i = 0; i < obj->nfields; i++)
		if (!strcmp(obj->fields[i].key, key))
			return &obj->fields[i].value;
	return NULL;
}

/* Parse one line (no trailing newline needed; surrounding whitespace is
 * fine).  On failure obj is left empty and err holds the reason. */
static inline int jsonl_parse(const char *line, size_t len,
			      struct jsonl_obj *obj, char *err, size_t errlen)
{
	struct jsonl_reader r = { line, line + len, err, errlen };
	struct jsonl_field *f;
	size_t keylen;

	err[0] = '\0';
	memset(obj, 0, sizeof(*obj));
	jsonl_skip_ws(&r);
	if (r.p >= r.end || *r.p != '{') {
		jsonl_fail(&r, "a request must be a JSON object");
		goto bad;
	}
	r.p++;
	jsonl_skip_ws(&r);
	if (r.p < r.end && *r.p == '}') {
		r.p++;
		goto done;
	}
	for (;;) {
		jsonl_skip_ws(&r);
		if (r.p >= r.end || *r.p != '"') {
			jsonl_fail(&r, "expected a quoted key");
			goto bad;
		}
		if (obj->nfields == JSONL_MAX_FIELDS) {
			jsonl_fail(&r, "more than %d fields", JSONL_MAX_FIELDS);
			goto bad;
		}
		f = &obj->fields[obj->nfields];
		if (jsonl_read_string(&r, &f->key, &keylen))
			goto bad;
		obj->nfields++;
		if (jsonl_get(obj, f->key) != &f->value) {
			jsonl_fail(&r, "duplicate key '%.40s'", f->key);
			goto bad;
		}
		jsonl_skip_ws(&r);
		if (r.p >= r.end || *r.p != ':') {
			jsonl_fail(&r, "expected ':' after key");
			goto bad;
		}
		r.p++;
		jsonl_skip_ws(&r);
		if (jsonl_read_value(&r, &f->value))
			goto bad;
		jsonl_skip_ws(&r);
		if (r.p < r.end && *r.p == ',') {
			r.p++;
			continue;
		}
		if (r.p < r.end && *r.p == '}') {
			r.p++;
			break;
		}
		jsonl_fail(&r, "expected ',' or '}' after value");
		goto bad;
	}
done:
	jsonl_skip_ws(&r);
	if (r.p != r.end) {
		jsonl_fail(&r, "trailing characters after the object");
		goto bad;
	}
	return 0;
bad:
	jsonl_obj_free(obj);
	return -1;
}

/* ------------------------------------------------------------------ */
/* Hex */

/* Upper or lower case in, exactly two digits per byte.  *out is NULL for
 * the empty string. */
static inline int jsonl_hex_decode(const char *hex, size_t len,
				   unsigned char **out, size_t *outlen)
{
	unsigned char *buf;
	size_t i;
	int hi, lo;

	*out = NULL;
	*outlen = 0;
	if (len % 2)
		return -EINVAL;
	if (!len)
		return 0;
	buf = malloc(len / 2);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < len / 2; i++) {
		hi = jsonl_hex_digit(hex[2 * i]);
		lo = jsonl_hex_digit(hex[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			free(buf);
			return -EINVAL;
		}
		buf[i] = (unsigned char)(hi << 4 | lo);
	}
	*out = buf;
	*outlen = len / 2;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Writer: builds one object in memory, then writes it as one line. */

struct jsonl_writer {
	char *buf;
	size_t len, cap;
	bool fields;	/* a field was written: the next needs a comma */
	bool nomem;
};

static inline bool jsonl_reserve(struct jsonl_writer *w, size_t more)
{
	size_t want;
	char *bigger;

	if (w->nomem)
		return false;
	if (more <= w->cap - w->len)
		return true;
	want = w->cap ? w->cap : 256;
	while (want - w->len < more) {
		if (want > SIZE_MAX / 2) {
			w->nomem = true;
			return false;
		}
		want *= 2;
	}
	bigger = realloc(w->buf, want);
	if (!bigger) {
		w->nomem = true;
		return false;
	}
	w->buf = bigger;
	w->cap = want;
	return true;
}

static inline void jsonl_raw(struct jsonl_writer *w, const char *s, size_t n)
{
	if (!jsonl_reserve(w, n))
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one.
 * Bytes that are not valid UTF-8 are written as U+FFFD so the line always
 * decodes, whatever a library error message contains. */
static inline size_t jsonl_utf8_seq(const unsigned char *s, size_t n)
{
	size_t need, i;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		need = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		need = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		need = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n < need)
		return 0;
	for (i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (need == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return need;
}

static inline void jsonl_quoted(struct jsonl_writer *w, const char *s,
				size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	char esc[8];
	size_t i = 0, seq;

	jsonl_raw(w, "\"", 1);
	while (i < n) {
		unsigned char c = u[i];

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			jsonl_raw(w, esc, 2);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			jsonl_raw(w, esc, 6);
			i++;
		} else if ((seq = jsonl_utf8_seq(u + i, n - i)) != 0) {
			jsonl_raw(w, s + i, seq);
			i += seq;
		} else {
			jsonl_raw(w, "\\ufffd", 6);
			i++;
		}
	}
	jsonl_raw(w, "\"", 1);
}

static inline void jsonl_begin(struct jsonl_writer *w)
{
	w->len = 0;
	w->fields = false;
	w->nomem = false;
	jsonl_raw(w, "{", 1);
}

static inline void jsonl_key(struct jsonl_writer *w, const char *key)
{
	if (w->fields)
		jsonl_raw(w, ",", 1);
	w->fields = true;
	jsonl_quoted(w, key, strlen(key));
	jsonl_raw(w, ":", 1);
}

static inline void jsonl_strn(struct jsonl_writer *w, const char *key,
			      const char *s, size_t n)
{
	jsonl_key(w, key);
	jsonl_quoted(w, s, n);
}

static inline void jsonl_str(struct jsonl_writer *w, const char *key,
			     const char *s)
{
	jsonl_strn(w, key, s, strlen(s));
}

static inline void jsonl_int(struct jsonl_writer *w, const char *key,
			     long long v)
{
	char num[32];

	jsonl_key(w, key);
	jsonl_raw(w, num, (size_t)snprintf(num, sizeof(num), "%lld", v));
}

/* u64 values as decimal strings: see the top of this file. */
static inline void jsonl_u64(struct jsonl_writer *w, const char *key,
			     uint64_t v)
{
	char num[32];

	jsonl_key(w, key);
	jsonl_raw(w, num, (size_t)snprintf(num, sizeof(num), "\"%" PRIu64 "\"",
					   v));
}

static inline void jsonl_bool(struct jsonl_writer *w, const char *key, bool v)
{
	jsonl_key(w, key);
	jsonl_raw(w, v ? "true" : "false", v ? 4 : 5);
}

static inline void jsonl_hex(struct jsonl_writer *w, const char *key,
			     const void *data, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = data;
	char *o;
	size_t i;

	jsonl_key(w, key);
	if (n > (SIZE_MAX - 2) / 2 || !jsonl_reserve(w, 2 * n + 2)) {
		w->nomem = true;
		return;
	}
	o = w->buf + w->len;
	*o++ = '"';
	for (i = 0; i < n; i++) {
		*o++ = digits[b[i] >> 4];
		*o++ = digits[b[i] & 15];
	}
	*o++ = '"';
	w->len += 2 * n + 2;
}

/* Finish the object and write it as one line, flushed.  A line that could
 * not be built for lack of memory is replaced by a short error object so
 * the reader still gets exactly one line.  Returns -1 when f fails. */
static inline int jsonl_end(struct jsonl_writer *w, FILE *f)
{
	static const char nomem[] = "{\"ok\":false,"
		"\"error\":\"out of memory building the response\"}\n";

	jsonl_raw(w, "}\n", 2);
	if (w->nomem) {
		if (fputs(nomem, f) == EOF)
			return -1;
	} else if (fwrite(w->buf, 1, w->len, f) != w->len) {
		return -1;
	}
	return fflush(f) ? -1 : 0;
}

static inline void jsonl_writer_free(struct jsonl_writer *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

#endif
