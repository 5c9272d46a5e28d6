/*
 * libFuzzer target for the TPT parameter lists (transfer list, peer list,
 * host key, slot table, endpoint report) held against docs/protocol.md
 * section 5 read on its own: each list has a spec model here, a validator
 * over the wire bytes written from the protocol's tables, not from the
 * codec.  fuzz_tpt_cdb.c already feeds every decoder raw bytes and checks
 * that what decodes re-encodes to the same bytes; this one checks that the
 * codec and the protocol agree, from both ends.
 *
 * The first input byte picks a mode.  Mode 0 gives the rest to every
 * decoder as wire bytes: a decoder accepts exactly what the model accepts;
 * a refusal is PARAMETER LIST LENGTH ERROR without a field pointer or
 * INVALID FIELD IN PARAMETER LIST with one inside the list, and builds
 * sense; what is accepted keeps the list invariants (count in range,
 * ascending peer ids, self listed as a target, at most one controller,
 * an array key).
 * The other modes build one list's structure from the rest (a list longer
 * than the input is completed with well-formed entries) and encode it: it
 * encodes exactly when the model accepts the spec's layout of the
 * structure, to exactly those bytes, and decodes back to the same
 * structure.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scsi/tpt_cdb.h"
#include "scsi/tpt_sense.h"
#include "test/fuzz/fuzz_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inline data beyond this is not materialised for a decode check. */
#define INLINE_CHECK_MAX	(1u << 20)
#define WIRE_MAX		(TPT_PEER_LIST_LEN(TPT_PEER_MAX))

/* Large structures live outside the stack that ASan inflates. */
static struct tpt_peer_list peer_list, peer_back;
static struct tpt_xfer_list xfer_list, xfer_back;
static struct tpt_slot_table slot_table, slot_back;
static uint8_t spec_wire[WIRE_MAX + INLINE_CHECK_MAX];
static uint8_t enc_wire[WIRE_MAX + INLINE_CHECK_MAX];

static bool all_zero(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

/* Whether @span bytes from @offset stay below 2^64. */
static bool fits_2_64(uint64_t offset, uint64_t span)
{
	return offset <= UINT64_MAX - span + 1;
}

/* ---------------------------------------------------------------------- */
/* The models: protocol.md section 5, over wire bytes. */

/* Bytes 3-23 of a peer entry, host key or endpoint report (5.5-5.7). */
static bool spec_endpoint_ok(const uint8_t *e)
{
	if (e[3] != TPT_AF_IPV4 && e[3] != TPT_AF_IPV6)
		return false;
	if (e[3] == TPT_AF_IPV4 && !all_zero(&e[12], 12))
		return false;
	return tpt_get_be(&e[4], 2) && all_zero(&e[6], 2) &&
	       !all_zero(&e[8], 16);
}

/* 5.5 */
static bool spec_peer_list_ok(const uint8_t *b, size_t len)
{
	size_t count, i;
	unsigned int controllers = 0;
	bool self_listed = false;

	if (len < 32)
		return false;
	count = tpt_get_be(&b[14], 2);
	if (!count || count > 1024 || len != 32 + 40 * count)
		return false;
	if (!tpt_get_be(&b[0], 8) || !tpt_get_be(&b[8], 4) ||
	    all_zero(&b[16], 16))
		return false;
	for (i = 0; i < count; i++) {
		const uint8_t *e = &b[32 + 40 * i];
		uint64_t id = tpt_get_be(e, 2);

		if (id > 0xffef || e[2] < 1 || e[2] > 3 ||
		    !spec_endpoint_ok(e) || all_zero(&e[24], 16))
			return false;
		if (i && id <= tpt_get_be(e - 40, 2))
			return false;
		controllers += e[2] == 2;
		if (id == tpt_get_be(&b[12], 2)) {
			if (e[2] != 1)
				return false;
			self_listed = true;
		}
	}
	return self_listed && controllers <= 1;
}

/* 5.6 */
static bool spec_host_key_ok(const uint8_t *b, size_t len)
{
	return len == 40 && all_zero(b, 3) && spec_endpoint_ok(b) &&
	       !all_zero(&b[24], 16);
}

/* 5.7 */
static bool spec_endpoint_report_ok(const uint8_t *b, size_t len)
{
	size_t n, i;

	if (len != 32 || b[0] != 1 || !all_zero(&b[1], 2) ||
	    !spec_endpoint_ok(b))
		return false;
	n = strnlen((const char *)&b[24], 8);
	if (!n || !all_zero(&b[24 + n], 8 - n))
		return false;
	for (i = 0; i < n; i++)
		if (b[24 + i] < 0x21 || b[24 + i] > 0x7e)
			return false;
	return true;
}

/* 5.3 */
static bool spec_slot_table_ok(const uint8_t *b, size_t len)
{
	uint64_t count, payload, i;

	if (len < 16 || !all_zero(&b[9], 7) || tpt_get_be(&b[2], 2) != 64 ||
	    (b[8] & 0xfe))
		return false;
	count = tpt_get_be(&b[0], 2);
	payload = tpt_get_be(&b[4], 4);
	if (!count || count > 1024 || !payload || payload % 512 ||
	    payload > (16u << 20) || len != 16 + 16 * count)
		return false;
	for (i = 0; i < count; i++)
		if (!fits_2_64(tpt_get_be(&b[16 + 16 * i + 8], 8), 64 + payload))
			return false;
	return true;
}

/* 5.1 and 5.2, the checks that need no CDB. */
static bool spec_xfer_list_ok(const uint8_t *b, size_t len)
{
	uint64_t count, slot, sum = 0, inline_len = 0, i;

	if (len < 16 || b[4] == 0xff || !all_zero(&b[5], 3))
		return false;
	count = tpt_get_be(&b[0], 2);
	slot = tpt_get_be(&b[2], 2);
	if (count > 256 || (slot > 1023 && slot != 0xffff) ||
	    len < 16 + 24 * count)
		return false;
	for (i = 0; i < count; i++) {
		const uint8_t *d = &b[16 + 24 * i];
		uint64_t peer = tpt_get_be(&d[0], 2);
		uint64_t length = tpt_get_be(&d[4], 4);
		uint64_t stag = tpt_get_be(&d[8], 8);
		uint64_t offset = tpt_get_be(&d[16], 8);
		uint8_t flags = d[2];

		if (d[3] == 0xff || (peer > 0xffef && peer != 0xffff &&
			      peer != 0xfffe && peer != 0xfffd) ||
		    (flags & 0xfc) || !length)
			return false;
		/* A skip (FFFDh) names no memory: no flags, STAG or OFFSET. */
		if (peer == 0xfffd && (flags || stag || offset))
			return false;
		if (peer == 0xffff) {
			if (flags || stag || offset != inline_len)
				return false;
			inline_len += length;
		}
		if (!fits_2_64(offset, length + (flags & 0x02 ? 64 : 0)))
			return false;
		sum += length;
	}
	if (count && sum != tpt_get_be(&b[8], 8))
		return false;
	return len - (16 + 24 * count) == inline_len;
}

/* ---------------------------------------------------------------------- */
/* Mode 0: wire bytes into every decoder. */

/* A refusal is one of the two parameter-list reasons, pointing into the
 * list when it is a field, and makes sense data. */
static void check_refusal(enum tpt_sense_reason r,
			  const struct tpt_field_ptr *where, size_t len)
{
	struct tpt_sense_info info = { .field = *where };
	uint8_t sense[TPT_SENSE_FIXED_LEN];

	if (r == TPT_SENSE_PARAM_LIST_LENGTH) {
		if (where->valid)
			abort();
	} else if (r == TPT_SENSE_INVALID_PARAM_FIELD) {
		if (!where->valid || where->in_cdb || where->byte >= len ||
		    (where->bit_valid && where->bit > 7))
			abort();
	} else {
		abort();
	}
	if (tpt_sense_build(sense, sizeof(sense), r, &info) !=
	    TPT_SENSE_FIXED_LEN)
		abort();
}

static void check_decoded_peer_list(const struct tpt_peer_list *l)
{
	unsigned int controllers = 0;
	const struct tpt_peer *self;
	uint16_t i;

	if (!l->count || l->count > TPT_PEER_MAX || !l->array_id ||
	    !l->generation || all_zero(l->array_key, TPT_ARRAY_KEY_LEN))
		abort();
	for (i = 0; i < l->count; i++) {
		if (i && l->peer[i].id <= l->peer[i - 1].id)
			abort();
		if (l->peer[i].id > TPT_PEER_ID_MAX)
			abort();
		controllers += l->peer[i].role == TPT_ROLE_CONTROLLER;
	}
	self = tpt_peer_list_find(l, l->self_id);
	if (controllers > 1 || !self || self->role != TPT_ROLE_TARGET)
		abort();
}

static void fuzz_wire(const uint8_t *b, size_t len)
{
	struct tpt_endpoint_report report;
	struct tpt_field_ptr where;
	struct tpt_host_key key;
	enum tpt_sense_reason r;

	r = tpt_peer_list_decode(b, len, &peer_list, &where);
	if (!r != spec_peer_list_ok(b, len))
		abort();
	if (r)
		check_refusal(r, &where, len);
	else
		check_decoded_peer_list(&peer_list);

	r = tpt_xfer_list_decode(b, len, &xfer_list, &where);
	if (!r != spec_xfer_list_ok(b, len))
		abort();
	if (r)
		check_refusal(r, &where, len);
	else if (xfer_list.count > TPT_XFER_DESC_MAX)
		abort();

	r = tpt_slot_table_decode(b, len, &slot_table, &where);
	if (!r != spec_slot_table_ok(b, len))
		abort();
	if (r)
		check_refusal(r, &where, len);
	else if (!slot_table.count || slot_table.count > TPT_SLOT_MAX)
		abort();

	r = tpt_host_key_decode(b, len, &key, &where);
	if (!r != spec_host_key_ok(b, len))
		abort();
	if (r)
		check_refusal(r, &where, len);

	r = tpt_endpoint_report_decode(b, len, &report, &where);
	if (!r != spec_endpoint_report_ok(b, len))
		abort();
	if (r)
		check_refusal(r, &where, len);
	else if (!report.provider[0] ||
		 strlen(report.provider) > TPT_PROVIDER_LEN)
		abort();
}

/* ---------------------------------------------------------------------- */
/* Modes 1-5: a structure built from the input, encoded. */

static void take_endpoint(struct reader *r, struct tpt_endpoint *ep)
{
	ep->family = (uint8_t)take(r, 1);
	ep->port = (uint16_t)take(r, 2);
	take_bytes(r, ep->addr, TPT_ADDR_LEN);
}

/* A well-formed endpoint, for entries past the end of the input. */
static void good_endpoint(struct tpt_endpoint *ep)
{
	static const uint8_t loopback[TPT_ADDR_LEN] = { 127, 0, 0, 1 };

	ep->family = TPT_AF_IPV4;
	ep->port = 4400;
	memcpy(ep->addr, loopback, TPT_ADDR_LEN);
}

/* The spec's layout of bytes 3-23 of an entry. */
static void put_endpoint(uint8_t *e, const struct tpt_endpoint *ep)
{
	e[3] = ep->family;
	tpt_put_be(&e[4], ep->port, 2);
	memcpy(&e[8], ep->addr, TPT_ADDR_LEN);
}

static bool endpoint_equal(const struct tpt_endpoint *a,
			   const struct tpt_endpoint *b)
{
	return a->family == b->family && a->port == b->port &&
	       !memcmp(a->addr, b->addr, TPT_ADDR_LEN);
}

/*
 * Encoded by the codec into enc_wire (@n bytes, or an error) and by the
 * spec's layout into spec_wire (@spec_len bytes): the codec encodes
 * exactly what the model accepts, to the same bytes.
 */
static void check_encoding(int n, size_t spec_len, bool spec_ok)
{
	if (n == -ENOSPC || (n >= 0) != spec_ok ||
	    (n < 0 && n != -EINVAL))
		abort();
	if (n >= 0 && ((size_t)n != spec_len ||
		       memcmp(enc_wire, spec_wire, spec_len)))
		abort();
}

static void fuzz_peer_list(struct reader *r)
{
	struct tpt_peer_list *l = &peer_list, *back = &peer_back;
	struct tpt_field_ptr where;
	size_t len = TPT_PEER_LIST_LEN(0), i;
	int n;

	memset(l, 0, sizeof(*l));
	l->count = (uint16_t)(take(r, 2) % (TPT_PEER_MAX + 2));
	l->array_id = take(r, 8);
	l->generation = (uint32_t)take(r, 4);
	/* An index into the list, so that the self entry is usually there. */
	l->self_id = (uint16_t)take(r, 2);
	take_bytes(r, l->array_key, TPT_ARRAY_KEY_LEN);
	for (i = 0; i < l->count && i < TPT_PEER_MAX; i++) {
		struct tpt_peer *p = &l->peer[i];

		if (!r->left) {
			p->id = (uint16_t)(i ? l->peer[i - 1].id + 1 : 0);
			p->role = TPT_ROLE_TARGET;
			good_endpoint(&p->ep);
			memset(p->token, 0x5a, TPT_AUTH_TOKEN_LEN);
			continue;
		}
		/* A signed step: ascending, repeated or descending ids. */
		p->id = (uint16_t)(i ? l->peer[i - 1].id +
				       (int8_t)take(r, 1) : take(r, 2));
		p->role = (uint8_t)take(r, 1);
		take_endpoint(r, &p->ep);
		take_bytes(r, p->token, TPT_AUTH_TOKEN_LEN);
	}
	if (l->self_id < l->count && l->self_id < TPT_PEER_MAX)
		l->self_id = l->peer[l->self_id].id;

	n = tpt_peer_list_encode(l, enc_wire, sizeof(enc_wire));
	if (l->count > TPT_PEER_MAX) {
		/* Not even representable in the structure. */
		if (n != -EINVAL)
			abort();
		return;
	}
	len = TPT_PEER_LIST_LEN(l->count);
	memset(spec_wire, 0, len);
	tpt_put_be(&spec_wire[0], l->array_id, 8);
	tpt_put_be(&spec_wire[8], l->generation, 4);
	tpt_put_be(&spec_wire[12], l->self_id, 2);
	tpt_put_be(&spec_wire[14], l->count, 2);
	memcpy(&spec_wire[16], l->array_key, TPT_ARRAY_KEY_LEN);
	for (i = 0; i < l->count; i++) {
		uint8_t *e = &spec_wire[TPT_PEER_LIST_LEN(i)];

		tpt_put_be(e, l->peer[i].id, 2);
		e[2] = l->peer[i].role;
		put_endpoint(e, &l->peer[i].ep);
		memcpy(&e[24], l->peer[i].token, TPT_AUTH_TOKEN_LEN);
	}
	check_encoding(n, len, spec_peer_list_ok(spec_wire, len));
	if (n < 0)
		return;
	if (tpt_peer_list_encode(l, enc_wire, len - 1) != -ENOSPC ||
	    tpt_peer_list_decode(enc_wire, len, back, &where) ||
	    back->array_id != l->array_id ||
	    back->generation != l->generation ||
	    back->self_id != l->self_id || back->count != l->count ||
	    memcmp(back->array_key, l->array_key, TPT_ARRAY_KEY_LEN))
		abort();
	for (i = 0; i < l->count; i++)
		if (back->peer[i].id != l->peer[i].id ||
		    back->peer[i].role != l->peer[i].role ||
		    !endpoint_equal(&back->peer[i].ep, &l->peer[i].ep) ||
		    memcmp(back->peer[i].token, l->peer[i].token,
			   TPT_AUTH_TOKEN_LEN))
			abort();
	check_decoded_peer_list(back);
}

static void fuzz_xfer_list(struct reader *r)
{
	struct tpt_xfer_list *l = &xfer_list, *back = &xfer_back;
	uint64_t inline_len = 0, sum = 0;
	struct tpt_field_ptr where;
	bool raw_total;
	size_t len, i;
	int n;

	memset(l, 0, sizeof(*l));
	l->count = (uint16_t)(take(r, 2) % (TPT_XFER_DESC_MAX + 2));
	l->result_slot = (uint16_t)take(r, 2);
	l->operand_gf_exp = (uint8_t)take(r, 1);
	/* Usually the sum of the lengths, so that the rest gets a chance. */
	raw_total = take(r, 1) & 1;
	l->total_length = raw_total ? take(r, 8) : 0;
	for (i = 0; i < l->count && i < TPT_XFER_DESC_MAX; i++) {
		struct tpt_xfer_desc *d = &l->desc[i];
		uint8_t shape = (uint8_t)take(r, 1);

		if (!r->left) {
			d->peer = 1;
			d->length = 4096;
			d->stag = 7;
			d->offset = i * 4096;
		} else if (shape & 1) {
			/* Inline data, as a controller lays it out. */
			d->peer = TPT_PEER_ID_CONTROLLER;
			d->length = (uint32_t)take(r, 2) + 1;
			d->offset = inline_len;
		} else {
			d->peer = (uint16_t)take(r, 2);
			d->flags = (uint8_t)take(r, 1);
			d->gf_exp = (uint8_t)take(r, 1);
			d->length = (uint32_t)take(r, 4);
			d->stag = take(r, 8);
			d->offset = take(r, 8);
		}
		if (d->peer == TPT_PEER_ID_CONTROLLER)
			inline_len += d->length;
		sum += d->length;
	}
	if (!raw_total)
		l->total_length = sum;
	if (tpt_xfer_list_inline_len(l) != inline_len)
		abort();

	if (l->count > TPT_XFER_DESC_MAX) {
		if (tpt_xfer_list_encode(l, enc_wire, sizeof(enc_wire)) !=
		    -EINVAL)
			abort();
		return;
	}
	len = TPT_XFER_LIST_LEN(l->count);
	memset(spec_wire, 0, len);
	tpt_put_be(&spec_wire[0], l->count, 2);
	tpt_put_be(&spec_wire[2], l->result_slot, 2);
	spec_wire[4] = l->operand_gf_exp;
	tpt_put_be(&spec_wire[8], l->total_length, 8);
	for (i = 0; i < l->count; i++) {
		uint8_t *d = &spec_wire[TPT_XFER_LIST_LEN(i)];

		tpt_put_be(&d[0], l->desc[i].peer, 2);
		d[2] = l->desc[i].flags;
		d[3] = l->desc[i].gf_exp;
		tpt_put_be(&d[4], l->desc[i].length, 4);
		tpt_put_be(&d[8], l->desc[i].stag, 8);
		tpt_put_be(&d[16], l->desc[i].offset, 8);
	}
	/* The model judges the data-out: list plus its inline data.  The
	 * encoder writes the list; the caller appends the data. */
	if (inline_len > INLINE_CHECK_MAX)
		return;
	memset(&spec_wire[len], 0xc3, inline_len);
	n = tpt_xfer_list_encode(l, enc_wire, sizeof(enc_wire));
	if (n >= 0)
		memcpy(&enc_wire[n], &spec_wire[len], inline_len);
	check_encoding(n < 0 ? n : n + (int)inline_len, len + inline_len,
		       spec_xfer_list_ok(spec_wire, len + inline_len));
	if (n < 0)
		return;
	if (tpt_xfer_list_encode(l, enc_wire, len - 1) != -ENOSPC ||
	    tpt_xfer_list_decode(enc_wire, len + inline_len, back, &where) ||
	    back->count != l->count || back->result_slot != l->result_slot ||
	    back->total_length != l->total_length)
		abort();
	for (i = 0; i < l->count; i++)
		if (back->desc[i].peer != l->desc[i].peer ||
		    back->desc[i].flags != l->desc[i].flags ||
		    back->desc[i].length != l->desc[i].length ||
		    back->desc[i].stag != l->desc[i].stag ||
		    back->desc[i].offset != l->desc[i].offset)
			abort();
}

static void fuzz_slot_table(struct reader *r)
{
	struct tpt_slot_table *t = &slot_table, *back = &slot_back;
	struct tpt_field_ptr where;
	size_t len, i;
	int n;

	memset(t, 0, sizeof(*t));
	t->count = (uint16_t)(take(r, 2) % (TPT_SLOT_MAX + 2));
	t->flags = (uint8_t)take(r, 1);
	t->payload_size = (uint32_t)take(r, 4);
	for (i = 0; i < t->count && i < TPT_SLOT_MAX; i++) {
		if (!r->left) {
			t->slot[i].stag = 9;
			t->slot[i].offset = i * ((uint64_t)TPT_SLOT_HDR_LEN +
						 t->payload_size);
			continue;
		}
		t->slot[i].stag = take(r, 8);
		t->slot[i].offset = take(r, 8);
	}

	n = tpt_slot_table_encode(t, enc_wire, sizeof(enc_wire));
	if (t->count > TPT_SLOT_MAX) {
		if (n != -EINVAL)
			abort();
		return;
	}
	len = TPT_SLOT_TABLE_LEN(t->count);
	memset(spec_wire, 0, len);
	tpt_put_be(&spec_wire[0], t->count, 2);
	tpt_put_be(&spec_wire[2], TPT_SLOT_HDR_LEN, 2);
	tpt_put_be(&spec_wire[4], t->payload_size, 4);
	spec_wire[8] = t->flags;
	for (i = 0; i < t->count; i++) {
		tpt_put_be(&spec_wire[TPT_SLOT_TABLE_LEN(i)], t->slot[i].stag, 8);
		tpt_put_be(&spec_wire[TPT_SLOT_TABLE_LEN(i) + 8],
			   t->slot[i].offset, 8);
	}
	check_encoding(n, len, spec_slot_table_ok(spec_wire, len));
	if (n < 0)
		return;
	if (tpt_slot_table_decode(enc_wire, len, back, &where) ||
	    back->count != t->count || back->flags != t->flags ||
	    back->payload_size != t->payload_size ||
	    memcmp(back->slot, t->slot, t->count * sizeof(t->slot[0])))
		abort();
}

static void fuzz_host_key(struct reader *r)
{
	struct tpt_host_key key, back;
	struct tpt_field_ptr where;
	int n;

	memset(&key, 0, sizeof(key));
	take_endpoint(r, &key.ep);
	take_bytes(r, key.key, TPT_AUTH_TOKEN_LEN);

	n = tpt_host_key_encode(&key, enc_wire, sizeof(enc_wire));
	memset(spec_wire, 0, TPT_HOST_KEY_LEN);
	put_endpoint(spec_wire, &key.ep);
	memcpy(&spec_wire[24], key.key, TPT_AUTH_TOKEN_LEN);
	check_encoding(n, TPT_HOST_KEY_LEN,
		       spec_host_key_ok(spec_wire, TPT_HOST_KEY_LEN));
	if (n < 0)
		return;
	if (tpt_host_key_encode(&key, enc_wire, TPT_HOST_KEY_LEN - 1) !=
		    -ENOSPC ||
	    tpt_host_key_decode(enc_wire, TPT_HOST_KEY_LEN, &back, &where) ||
	    !endpoint_equal(&back.ep, &key.ep) ||
	    memcmp(back.key, key.key, TPT_AUTH_TOKEN_LEN))
		abort();
}

static void fuzz_endpoint_report(struct reader *r)
{
	struct tpt_endpoint_report report, back;
	struct tpt_field_ptr where;
	size_t name_len;
	int n;

	memset(&report, 0, sizeof(report));
	take_endpoint(r, &report.ep);
	/* All of the array, so that a name without its NUL is tried too. */
	take_bytes(r, (uint8_t *)report.provider, sizeof(report.provider));

	n = tpt_endpoint_report_encode(&report, enc_wire, sizeof(enc_wire));
	name_len = strnlen(report.provider, sizeof(report.provider));
	if (name_len > TPT_PROVIDER_LEN) {
		if (n != -EINVAL)
			abort();
		return;
	}
	memset(spec_wire, 0, TPT_ENDPOINT_REPORT_LEN);
	spec_wire[0] = TPT_ENDPOINT_VERSION;
	put_endpoint(spec_wire, &report.ep);
	memcpy(&spec_wire[24], report.provider, name_len);
	check_encoding(n, TPT_ENDPOINT_REPORT_LEN,
		       spec_endpoint_report_ok(spec_wire,
					       TPT_ENDPOINT_REPORT_LEN));
	if (n < 0)
		return;
	if (tpt_endpoint_report_decode(enc_wire, TPT_ENDPOINT_REPORT_LEN,
				       &back, &where) ||
	    !endpoint_equal(&back.ep, &report.ep) ||
	    strcmp(back.provider, report.provider))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct reader r = { .p = data + 1, .left = size ? size - 1 : 0 };

	if (!size)
		return 0;
	switch (data[0] % 6) {
	case 0: fuzz_wire(data + 1, size - 1); break;
	case 1: fuzz_peer_list(&r); break;
	case 2: fuzz_xfer_list(&r); break;
	case 3: fuzz_slot_table(&r); break;
	case 4: fuzz_host_key(&r); break;
	default: fuzz_endpoint_report(&r); break;
	}
	return 0;
}
