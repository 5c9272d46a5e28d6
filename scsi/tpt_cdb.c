/*
 * TPT-RAID command set codec.
 *
 * Table driven: each opcode names a CDB layout and the byte-1 flags it
 * defines, and one decoder, one validator and one encoder serve them all.
 * Decoders first reject reserved bits, then extract every field into a
 * structure and run the same validator the encoders run, so the two can
 * never disagree about what is well formed.
 */
#include <errno.h>
#include <string.h>

#include "scsi/tpt_cdb.h"

#define NO_BIT (-1)

/*
 * Where the fields of one CDB shape live.  Byte 1 holds flags in all of
 * them and the last byte is CONTROL; a field of zero bytes is absent.
 */
struct cdb_layout {
	uint8_t length;
	uint8_t lba_at, lba_bytes;
	uint8_t len_at, len_bytes;
	uint8_t group_at, group_bytes;
	uint32_t group_max;
	uint8_t param_len_at;		/* 4 bytes when present; 0: absent */
	uint8_t slot_size_at;		/* 4 bytes when present; 0: absent */
	uint8_t slot_count_at;		/* 2 bytes when present; 0: absent */
	uint8_t reserved[TPT_CDB_MAX_LEN];	/* bits that must be zero */
};

/* SBC-2 XDWRITE(10). */
static const struct cdb_layout xdwrite10_layout = {
	.length = 10,
	.lba_at = 2, .lba_bytes = 4,
	.len_at = 7, .len_bytes = 2,
	.group_at = 6, .group_bytes = 1, .group_max = 0x1f,
	.reserved = { [6] = 0xe0 },
};

/* SBC-3 PRE-FETCH(16). */
static const struct cdb_layout prefetch16_layout = {
	.length = 16,
	.lba_at = 2, .lba_bytes = 8,
	.len_at = 10, .len_bytes = 4,
	.group_at = 14, .group_bytes = 1, .group_max = 0x1f,
	.reserved = { [14] = 0xe0 },
};

/* Vendor data commands: 48-bit LBA, 24-bit length, 32-bit group. */
static const struct cdb_layout io16_layout = {
	.length = 16,
	.lba_at = 2, .lba_bytes = 6,
	.len_at = 8, .len_bytes = 3,
	.group_at = 11, .group_bytes = 4, .group_max = UINT32_MAX,
};

/* TPT HOST READ/WRITE: the vendor data layout; the controller numbers
 * the groups, so the host's GROUP NUMBER bytes are reserved. */
static const struct cdb_layout host16_layout = {
	.length = 16,
	.lba_at = 2, .lba_bytes = 6,
	.len_at = 8, .len_bytes = 3,
	.reserved = { [11] = 0xff, [12] = 0xff, [13] = 0xff, [14] = 0xff },
};

/* TPT RELEASE: the vendor data layout with no LBA and no length. */
static const struct cdb_layout release16_layout = {
	.length = 16,
	.group_at = 11, .group_bytes = 4, .group_max = UINT32_MAX,
	.reserved = {
		[2] = 0xff, [3] = 0xff, [4] = 0xff, [5] = 0xff, [6] = 0xff,
		[7] = 0xff, [8] = 0xff, [9] = 0xff, [10] = 0xff,
	},
};

/* Session setup commands: only a PARAMETER LIST LENGTH. */
static const struct cdb_layout setup16_layout = {
	.length = 16,
	.param_len_at = 10,
	.reserved = {
		[2] = 0xff, [3] = 0xff, [4] = 0xff, [5] = 0xff, [6] = 0xff,
		[7] = 0xff, [8] = 0xff, [9] = 0xff, [14] = 0xff,
	},
};

/* TPT REPORT SLOTS: the slot geometry and an ALLOCATION LENGTH. */
static const struct cdb_layout slots16_layout = {
	.length = 16,
	.slot_size_at = 2,
	.slot_count_at = 6,
	.param_len_at = 10,
	.reserved = {
		[1] = 0xff, [8] = 0xff, [9] = 0xff, [14] = 0xff,
	},
};

struct cdb_format {
	struct tpt_cdb_info info;
	const struct cdb_layout *layout;
	uint8_t flags;		/* single-bit flags the opcode defines */
	uint8_t required;	/* of those, the ones that must be set */
	bool parity;		/* PARITY MODE in byte 1 */
	bool empty_ok;		/* a TRANSFER LENGTH of zero means something */
	bool inline_ok;		/* the controller may be the data source */
	/*
	 * RMA-writes to its passive sides instead of reading them, so it has
	 * no slot to read and no result to export.
	 */
	bool writes_passive;
	/*
	 * Has no passive sides: its transfer list is the header alone,
	 * naming where the result goes and how long it is.
	 */
	bool header_only;
	/* A host's request to the controller: pieces of the host's buffer. */
	bool from_host;
	/* May leave bytes of its range unmoved (TPT_PEER_ID_NONE); with
	 * skip_blocks only whole blocks, as it stages what it moves. */
	bool skip_ok, skip_blocks;
	/* May cover its range several times over, to XOR the passes. */
	bool passes_ok;
	/*
	 * PARAMETER LIST LENGTH = param_base + param_unit * n, 1 <= n <= max.
	 * With param_unit 0 the field is an ALLOCATION LENGTH, which SPC
	 * lets be anything.
	 */
	uint16_t param_base, param_unit, param_max;
};

#define INFO(n, d, p) { .name = (n), .dir = (d), .param = (p) }
#define XFER_OUT(n) INFO(n, TPT_DATA_OUT, TPT_PARAM_XFER_LIST)

static const struct cdb_format formats[256] = {
	[TPT_OP_XDWRITE_10] = {
		.info = XFER_OUT("XDWRITE(10)"),
		.layout = &xdwrite10_layout,
		.flags = TPT_CDB_DPO | TPT_CDB_FUA | TPT_CDB_DISABLE_WRITE |
			 TPT_CDB_FUA_NV,
		.required = TPT_CDB_DISABLE_WRITE,
		.inline_ok = true,
	},
	[TPT_OP_PRE_FETCH_16] = {
		.info = INFO("PRE-FETCH(16)", TPT_DATA_NONE, TPT_PARAM_NONE),
		.layout = &prefetch16_layout,
		.flags = TPT_CDB_IMMED,
		/* SBC: zero pre-fetches to the end of the medium. */
		.empty_ok = true,
	},
	[TPT_OP_SET_PEER_LIST] = {
		.info = INFO("TPT SET PEER LIST", TPT_DATA_OUT,
			     TPT_PARAM_PEER_LIST),
		.layout = &setup16_layout,
		.param_base = TPT_PEER_LIST_HDR_LEN,
		.param_unit = TPT_PEER_ENTRY_LEN,
		.param_max = TPT_PEER_MAX,
	},
	[TPT_OP_HOST_KEY] = {
		.info = INFO("TPT HOST KEY", TPT_DATA_OUT, TPT_PARAM_HOST_KEY),
		.layout = &setup16_layout,
		.param_unit = TPT_HOST_KEY_LEN,
		.param_max = 1,
	},
	[TPT_OP_RELEASE] = {
		.info = INFO("TPT RELEASE", TPT_DATA_NONE, TPT_PARAM_NONE),
		.layout = &release16_layout,
		.flags = TPT_CDB_RELEASE_ALL | TPT_CDB_RELEASE_UNBIND,
	},
	[TPT_OP_REPORT_SLOTS] = {
		.info = INFO("TPT REPORT SLOTS", TPT_DATA_IN, TPT_PARAM_NONE),
		.layout = &slots16_layout,
	},
	[TPT_OP_PREP_READ] = {
		.info = XFER_OUT("PREP READ"),
		.layout = &io16_layout,
		.flags = TPT_CDB_FINAL,
		.writes_passive = true,
		.skip_ok = true,
	},
	[TPT_OP_PREP_WRITE] = {
		.info = XFER_OUT("PREP WRITE"),
		.layout = &io16_layout,
		.flags = TPT_CDB_FINAL,
		.inline_ok = true,
		.skip_ok = true,
		.skip_blocks = true,
	},
	[TPT_OP_READ_NEW_BLOCK] = {
		.info = XFER_OUT("READ NEW BLOCK"),
		.layout = &io16_layout,
		.inline_ok = true,
	},
	[TPT_OP_XDWRITE_16] = {
		.info = XFER_OUT("XDWRITE(16)"),
		.layout = &io16_layout,
		.flags = TPT_CDB_FUA | TPT_CDB_DISABLE_WRITE,
		.required = TPT_CDB_DISABLE_WRITE,
		.inline_ok = true,
	},
	[TPT_OP_READ_PARITY_PART_TMP] = {
		.info = XFER_OUT("READ PARITY PART TMP"),
		.layout = &io16_layout,
		.parity = true,
		.passes_ok = true,
	},
	[TPT_OP_READ_PARITY_PART_BLOCK] = {
		.info = XFER_OUT("READ PARITY PART BLOCK"),
		.layout = &io16_layout,
		.parity = true,
		.passes_ok = true,
	},
	[TPT_OP_READ_PARITY_COMP_TMP] = {
		.info = XFER_OUT("READ PARITY COMP TMP"),
		.layout = &io16_layout,
		.passes_ok = true,
	},
	[TPT_OP_READ_PARITY_COMP_BLOCK] = {
		.info = XFER_OUT("READ PARITY COMP BLOCK"),
		.layout = &io16_layout,
		.passes_ok = true,
	},
	[TPT_OP_WRITE_NEW_DATA] = {
		.info = INFO("WRITE NEW DATA", TPT_DATA_NONE, TPT_PARAM_NONE),
		.layout = &io16_layout,
		.flags = TPT_CDB_FUA,
	},
	[TPT_OP_REPORT_ENDPOINT] = {
		.info = INFO("TPT REPORT ENDPOINT", TPT_DATA_IN,
			     TPT_PARAM_NONE),
		/* PARAMETER LIST LENGTH read as an ALLOCATION LENGTH. */
		.layout = &setup16_layout,
	},
	[TPT_OP_READ_MEDIUM] = {
		.info = XFER_OUT("READ MEDIUM"),
		.layout = &io16_layout,
		.header_only = true,
	},
	[TPT_OP_SEND_RESULT] = {
		.info = XFER_OUT("SEND RESULT"),
		.layout = &io16_layout,
		.writes_passive = true,
	},
	[TPT_OP_HOST_READ] = {
		.info = XFER_OUT("TPT HOST READ"),
		.layout = &host16_layout,
		.from_host = true,
	},
	[TPT_OP_HOST_WRITE] = {
		.info = XFER_OUT("TPT HOST WRITE"),
		.layout = &host16_layout,
		.flags = TPT_CDB_FUA,
		.from_host = true,
	},
};

static const struct cdb_format *format_of(uint8_t opcode)
{
	const struct cdb_format *f = &formats[opcode];

	return f->layout ? f : NULL;
}

const struct tpt_cdb_info *tpt_cdb_info(uint8_t opcode)
{
	const struct cdb_format *f = format_of(opcode);

	return f ? &f->info : NULL;
}

/* ---------------------------------------------------------------------- */
/* Field pointers */

static void clear_where(struct tpt_field_ptr *where)
{
	if (where)
		memset(where, 0, sizeof(*where));
}

static enum tpt_sense_reason bad_field(struct tpt_field_ptr *where,
				       enum tpt_sense_reason reason,
				       bool in_cdb, size_t byte, int bit)
{
	if (where) {
		where->valid = true;
		where->in_cdb = in_cdb;
		where->byte = (uint16_t)byte;
		where->bit_valid = bit >= 0;
		where->bit = bit >= 0 ? (uint8_t)bit : 0;
	}
	return reason;
}

static enum tpt_sense_reason bad_cdb(struct tpt_field_ptr *where,
				     size_t byte, int bit)
{
	return bad_field(where, TPT_SENSE_INVALID_CDB_FIELD, true, byte, bit);
}

static enum tpt_sense_reason bad_param(struct tpt_field_ptr *where,
				       size_t byte, int bit)
{
	return bad_field(where, TPT_SENSE_INVALID_PARAM_FIELD, false, byte,
			 bit);
}

/* The most significant set bit of a non-zero byte, for BIT POINTER. */
static int top_bit(unsigned int x)
{
	int bit = 7;

	while (!(x & 1u << bit))
		bit--;
	return bit;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

/* INVALID FIELD IN PARAMETER LIST at the first set bit of p[from..from+n). */
static enum tpt_sense_reason check_reserved(const uint8_t *p, size_t from,
					    size_t n, size_t base,
					    struct tpt_field_ptr *where)
{
	size_t i;

	for (i = from; i < from + n; i++)
		if (p[i])
			return bad_param(where, base + i, top_bit(p[i]));
	return TPT_SENSE_NONE;
}

/* ---------------------------------------------------------------------- */
/* CDBs */

static uint64_t field_max(unsigned int bytes)
{
	return bytes >= 8 ? UINT64_MAX : (UINT64_C(1) << (8 * bytes)) - 1;
}

/* Whether blocks [lba, lba + count) all lie at or below @last. */
static bool lba_range_ok(uint64_t lba, uint64_t count, uint64_t last)
{
	return lba <= last && (count == 0 || count - 1 <= last - lba);
}

static bool param_len_ok(const struct cdb_format *f, uint32_t len)
{
	uint32_t body;

	if (len < (uint32_t)f->param_base + f->param_unit)
		return false;
	body = len - f->param_base;
	return body % f->param_unit == 0 &&
	       body / f->param_unit <= f->param_max;
}

static bool slot_payload_ok(uint32_t size)
{
	return size && size % TPT_SLOT_PAYLOAD_UNIT == 0 &&
	       size <= TPT_SLOT_PAYLOAD_MAX;
}

static bool slot_count_ok(uint32_t count)
{
	return count && count <= TPT_SLOT_MAX;
}

/* Shared by decoder and encoder: every rule about field values. */
static enum tpt_sense_reason check_cdb(const struct cdb_format *f,
				       const struct tpt_cdb *c,
				       struct tpt_field_ptr *where)
{
	const struct cdb_layout *l = f->layout;
	uint8_t max_mode = f->parity ? TPT_PARITY_COPY : TPT_PARITY_XOR_MEDIUM;

	if (c->flags & ~f->flags)
		return bad_cdb(where, 1, top_bit(c->flags & ~f->flags));
	if (~c->flags & f->required)
		return bad_cdb(where, 1, top_bit(~c->flags & f->required));
	if (c->parity_mode > max_mode)
		return bad_cdb(where, 1, TPT_CDB_PARITY_SHIFT + 1);
	if (c->control & ~TPT_CDB_CONTROL_VENDOR)
		return bad_cdb(where, l->length - 1,
			       top_bit(c->control & ~TPT_CDB_CONTROL_VENDOR));
	if (l->len_bytes && !c->transfer_length && !f->empty_ok)
		return bad_cdb(where, l->len_at, NO_BIT);
	if (!lba_range_ok(c->lba, c->transfer_length, field_max(l->lba_bytes)))
		return TPT_SENSE_LBA_OUT_OF_RANGE;
	/* RELEASE ALL names no group; a number there is a confused caller. */
	if (c->opcode == TPT_OP_RELEASE && (c->flags & TPT_CDB_RELEASE_ALL) &&
	    c->group)
		return bad_cdb(where, l->group_at, NO_BIT);
	/* Unbinding gives up the whole LU, so every group goes with it. */
	if (c->opcode == TPT_OP_RELEASE &&
	    (c->flags & TPT_CDB_RELEASE_UNBIND) &&
	    !(c->flags & TPT_CDB_RELEASE_ALL))
		return bad_cdb(where, 1, 1);
	if (l->param_len_at && f->param_unit && !param_len_ok(f, c->param_len))
		return bad_cdb(where, l->param_len_at, NO_BIT);
	if (l->slot_size_at && !slot_payload_ok(c->slot_payload_size))
		return bad_cdb(where, l->slot_size_at, NO_BIT);
	if (l->slot_count_at && !slot_count_ok(c->slot_count))
		return bad_cdb(where, l->slot_count_at, NO_BIT);
	return TPT_SENSE_NONE;
}

/* Whether every value has a home in the layout (the decoder's are). */
static bool cdb_fits(const struct cdb_layout *l, const struct tpt_cdb *c)
{
	return c->lba <= field_max(l->lba_bytes) &&
	       c->transfer_length <= field_max(l->len_bytes) &&
	       c->group <= l->group_max &&
	       (l->param_len_at || !c->param_len) &&
	       (l->slot_size_at || !c->slot_payload_size) &&
	       (l->slot_count_at || !c->slot_count);
}

enum tpt_sense_reason tpt_cdb_decode(const uint8_t *cdb, size_t len,
				     struct tpt_cdb *out,
				     struct tpt_field_ptr *where)
{
	const struct cdb_format *f;
	const struct cdb_layout *l;
	uint8_t parity_bits;
	size_t i;

	clear_where(where);
	if (len == 0)
		return bad_cdb(where, 0, NO_BIT);
	f = format_of(cdb[0]);
	if (!f)
		return bad_field(where, TPT_SENSE_INVALID_OPCODE, true, 0,
				 NO_BIT);
	l = f->layout;
	/* A short CDB is a transport bug; blame the opcode that needs more. */
	if (len < l->length)
		return bad_cdb(where, 0, NO_BIT);
	for (i = 0; i < l->length; i++) {
		uint8_t stray = cdb[i] & l->reserved[i];

		if (stray)
			return bad_cdb(where, i, top_bit(stray));
	}

	parity_bits = f->parity ? cdb[1] & (3u << TPT_CDB_PARITY_SHIFT) : 0;
	memset(out, 0, sizeof(*out));
	out->opcode = cdb[0];
	out->flags = cdb[1] & ~parity_bits;
	out->parity_mode = parity_bits >> TPT_CDB_PARITY_SHIFT;
	out->lba = tpt_get_be(&cdb[l->lba_at], l->lba_bytes);
	out->transfer_length =
		(uint32_t)tpt_get_be(&cdb[l->len_at], l->len_bytes);
	out->group = (uint32_t)tpt_get_be(&cdb[l->group_at], l->group_bytes);
	if (l->param_len_at)
		out->param_len = (uint32_t)tpt_get_be(&cdb[l->param_len_at], 4);
	if (l->slot_size_at)
		out->slot_payload_size =
			(uint32_t)tpt_get_be(&cdb[l->slot_size_at], 4);
	if (l->slot_count_at)
		out->slot_count =
			(uint16_t)tpt_get_be(&cdb[l->slot_count_at], 2);
	out->control = cdb[l->length - 1];
	return check_cdb(f, out, where);
}

int tpt_cdb_encode(const struct tpt_cdb *cdb, uint8_t *buf, size_t len)
{
	const struct cdb_format *f = format_of(cdb->opcode);
	const struct cdb_layout *l;

	if (!f)
		return -EINVAL;
	l = f->layout;
	if (!cdb_fits(l, cdb) || check_cdb(f, cdb, NULL) != TPT_SENSE_NONE)
		return -EINVAL;
	if (len < l->length)
		return -ENOSPC;

	memset(buf, 0, l->length);
	buf[0] = cdb->opcode;
	buf[1] = cdb->flags | cdb->parity_mode << TPT_CDB_PARITY_SHIFT;
	tpt_put_be(&buf[l->lba_at], cdb->lba, l->lba_bytes);
	tpt_put_be(&buf[l->len_at], cdb->transfer_length, l->len_bytes);
	tpt_put_be(&buf[l->group_at], cdb->group, l->group_bytes);
	if (l->param_len_at)
		tpt_put_be(&buf[l->param_len_at], cdb->param_len, 4);
	if (l->slot_size_at)
		tpt_put_be(&buf[l->slot_size_at], cdb->slot_payload_size, 4);
	if (l->slot_count_at)
		tpt_put_be(&buf[l->slot_count_at], cdb->slot_count, 2);
	buf[l->length - 1] = cdb->control;
	return l->length;
}

enum tpt_sense_reason tpt_cdb_check_capacity(const struct tpt_cdb *cdb,
					     uint64_t nr_blocks)
{
	const struct cdb_format *f = format_of(cdb->opcode);

	if (!f || !f->layout->lba_bytes)
		return TPT_SENSE_NONE;
	if (!nr_blocks ||
	    !lba_range_ok(cdb->lba, cdb->transfer_length, nr_blocks - 1))
		return TPT_SENSE_LBA_OUT_OF_RANGE;
	return TPT_SENSE_NONE;
}

/* ---------------------------------------------------------------------- */
/* Transfer list */

/* Header: 4-7 reserved. */
#define XH_COUNT	0
#define XH_RESULT_SLOT	2
#define XH_OPERAND_EXP	4
#define XH_RESERVED	5
#define XH_TOTAL	8
/* Descriptor: 3 reserved. */
#define XD_PEER		0
#define XD_FLAGS	2
#define XD_GF_EXP	3
#define XD_LENGTH	4
#define XD_STAG		8
#define XD_OFFSET	16

#define XD_FLAGS_DEFINED	(TPT_XFER_VIRT_ADDR | TPT_XFER_SLOT)

static enum tpt_sense_reason check_desc(const struct tpt_xfer_desc *d,
					size_t base,
					struct tpt_field_ptr *where)
{
	/* A slot is read with its header in front of the payload. */
	uint64_t span = d->flags & TPT_XFER_SLOT ?
			(uint64_t)TPT_SLOT_HDR_LEN + d->length : d->length;

	/* Inline data and skipped bytes have no memory at all. */
	bool no_memory = d->peer == TPT_PEER_ID_CONTROLLER ||
			 d->peer == TPT_PEER_ID_NONE;

	if (d->peer > TPT_PEER_ID_MAX && d->peer != TPT_PEER_ID_CONTROLLER &&
	    d->peer != TPT_PEER_ID_INITIATOR && d->peer != TPT_PEER_ID_NONE)
		return bad_param(where, base + XD_PEER, NO_BIT);
	if (d->flags & ~XD_FLAGS_DEFINED)
		return bad_param(where, base + XD_FLAGS,
				 top_bit(d->flags & ~XD_FLAGS_DEFINED));
	if (d->gf_exp > TPT_GF_EXP_MAX)
		return bad_param(where, base + XD_GF_EXP, NO_BIT);
	if (!d->length)
		return bad_param(where, base + XD_LENGTH, NO_BIT);
	if (no_memory && d->flags)
		return bad_param(where, base + XD_FLAGS, top_bit(d->flags));
	if (no_memory && d->stag)
		return bad_param(where, base + XD_STAG, NO_BIT);
	/* Inline data's OFFSET is its place in the data-out (checked with
	 * the list); a skip has none. */
	if (d->peer == TPT_PEER_ID_NONE && d->offset)
		return bad_param(where, base + XD_OFFSET, NO_BIT);
	if (span - 1 > UINT64_MAX - d->offset)
		return bad_param(where, base + XD_OFFSET, NO_BIT);
	return TPT_SENSE_NONE;
}

/*
 * The header fields a decoder can judge before it has the descriptors.  A
 * count of zero is a well-formed list (READ MEDIUM's); which commands take
 * one is tpt_xfer_list_check()'s to judge, as only it knows the opcode.
 */
static enum tpt_sense_reason
check_xfer_header(const struct tpt_xfer_list *list, struct tpt_field_ptr *where)
{
	if (list->count > TPT_XFER_DESC_MAX)
		return bad_param(where, XH_COUNT, NO_BIT);
	if (list->operand_gf_exp > TPT_GF_EXP_MAX)
		return bad_param(where, XH_OPERAND_EXP, NO_BIT);
	/* No slot table has this many slots: a number here is garbage. */
	if (list->result_slot >= TPT_SLOT_MAX &&
	    list->result_slot != TPT_SLOT_NONE)
		return bad_param(where, XH_RESULT_SLOT, NO_BIT);
	return TPT_SENSE_NONE;
}

static enum tpt_sense_reason check_xfer_list(const struct tpt_xfer_list *list,
					     struct tpt_field_ptr *where)
{
	uint64_t sum = 0, inline_at = 0;
	enum tpt_sense_reason r;
	size_t i;

	r = check_xfer_header(list, where);
	if (r)
		return r;
	for (i = 0; i < list->count; i++) {
		const struct tpt_xfer_desc *d = &list->desc[i];
		size_t base = TPT_XFER_LIST_LEN(i);

		r = check_desc(d, base, where);
		if (r)
			return r;
		/* Inline pieces follow the descriptors back to back. */
		if (d->peer == TPT_PEER_ID_CONTROLLER) {
			if (d->offset != inline_at)
				return bad_param(where, base + XD_OFFSET,
						 NO_BIT);
			inline_at += d->length;
		}
		sum += d->length;
	}
	/* Without descriptors TOTAL LENGTH is the result's length alone. */
	if (list->count && sum != list->total_length)
		return bad_param(where, XH_TOTAL, NO_BIT);
	return TPT_SENSE_NONE;
}

static void get_desc(const uint8_t *p, struct tpt_xfer_desc *d)
{
	d->peer = (uint16_t)tpt_get_be(&p[XD_PEER], 2);
	d->flags = p[XD_FLAGS];
	d->gf_exp = p[XD_GF_EXP];
	d->length = (uint32_t)tpt_get_be(&p[XD_LENGTH], 4);
	d->stag = tpt_get_be(&p[XD_STAG], 8);
	d->offset = tpt_get_be(&p[XD_OFFSET], 8);
}

static void put_desc(uint8_t *p, const struct tpt_xfer_desc *d)
{
	memset(p, 0, TPT_XFER_DESC_LEN);
	tpt_put_be(&p[XD_PEER], d->peer, 2);
	p[XD_FLAGS] = d->flags;
	p[XD_GF_EXP] = d->gf_exp;
	tpt_put_be(&p[XD_LENGTH], d->length, 4);
	tpt_put_be(&p[XD_STAG], d->stag, 8);
	tpt_put_be(&p[XD_OFFSET], d->offset, 8);
}

uint64_t tpt_xfer_list_inline_len(const struct tpt_xfer_list *list)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < list->count && i < TPT_XFER_DESC_MAX; i++)
		if (list->desc[i].peer == TPT_PEER_ID_CONTROLLER)
			sum += list->desc[i].length;
	return sum;
}

enum tpt_sense_reason tpt_xfer_list_decode(const uint8_t *buf, size_t len,
					   struct tpt_xfer_list *out,
					   struct tpt_field_ptr *where)
{
	enum tpt_sense_reason r;
	size_t i, list_len;

	clear_where(where);
	if (len < TPT_XFER_HDR_LEN)
		return TPT_SENSE_PARAM_LIST_LENGTH;
	r = check_reserved(buf, XH_RESERVED, XH_TOTAL - XH_RESERVED, 0, where);
	if (r)
		return r;
	out->count = (uint16_t)tpt_get_be(&buf[XH_COUNT], 2);
	out->result_slot = (uint16_t)tpt_get_be(&buf[XH_RESULT_SLOT], 2);
	out->operand_gf_exp = buf[XH_OPERAND_EXP];
	r = check_xfer_header(out, where);
	if (r)
		return r;
	list_len = TPT_XFER_LIST_LEN(out->count);
	if (len < list_len)
		return TPT_SENSE_PARAM_LIST_LENGTH;
	out->total_length = tpt_get_be(&buf[XH_TOTAL], 8);

	for (i = 0; i < out->count; i++) {
		get_desc(&buf[TPT_XFER_LIST_LEN(i)], &out->desc[i]);
	}
	r = check_xfer_list(out, where);
	if (r)
		return r;
	if (len - list_len != tpt_xfer_list_inline_len(out))
		return TPT_SENSE_PARAM_LIST_LENGTH;
	return TPT_SENSE_NONE;
}

int tpt_xfer_list_encode(const struct tpt_xfer_list *list, uint8_t *buf,
			 size_t len)
{
	size_t i, list_len;

	if (check_xfer_list(list, NULL) != TPT_SENSE_NONE)
		return -EINVAL;
	list_len = TPT_XFER_LIST_LEN(list->count);
	if (len < list_len)
		return -ENOSPC;

	memset(buf, 0, TPT_XFER_HDR_LEN);
	tpt_put_be(&buf[XH_COUNT], list->count, 2);
	tpt_put_be(&buf[XH_RESULT_SLOT], list->result_slot, 2);
	buf[XH_OPERAND_EXP] = list->operand_gf_exp;
	tpt_put_be(&buf[XH_TOTAL], list->total_length, 8);
	for (i = 0; i < list->count; i++)
		put_desc(&buf[TPT_XFER_LIST_LEN(i)], &list->desc[i]);
	return (int)list_len;
}

/*
 * TPT HOST READ/WRITE: the host's own buffer, in up to TPT_HOST_DESC_MAX
 * pieces of whole blocks, all addressed alike (4.19).  Whole blocks keep
 * a piece boundary off the middle of a block, and the cap keeps the
 * commands the controller derives within TPT_XFER_DESC_MAX descriptors.
 */
static enum tpt_sense_reason check_host_list(const struct tpt_xfer_list *list,
					     const struct tpt_cdb *cdb,
					     uint32_t block_size,
					     struct tpt_field_ptr *where)
{
	size_t i;

	if (!list->count || list->count > TPT_HOST_DESC_MAX)
		return bad_param(where, XH_COUNT, NO_BIT);
	if (list->result_slot != TPT_SLOT_NONE)
		return bad_param(where, XH_RESULT_SLOT, NO_BIT);
	for (i = 0; i < list->count; i++) {
		const struct tpt_xfer_desc *d = &list->desc[i];
		size_t base = TPT_XFER_LIST_LEN(i);

		if (d->peer != TPT_PEER_ID_INITIATOR)
			return bad_param(where, base + XD_PEER, NO_BIT);
		if (d->flags & TPT_XFER_SLOT)
			return bad_param(where, base + XD_FLAGS,
					 top_bit(TPT_XFER_SLOT));
		if ((d->flags ^ list->desc[0].flags) & TPT_XFER_VIRT_ADDR)
			return bad_param(where, base + XD_FLAGS,
					 top_bit(TPT_XFER_VIRT_ADDR));
		if (!block_size || d->length % block_size)
			return bad_param(where, base + XD_LENGTH, NO_BIT);
	}
	if (list->total_length != (uint64_t)cdb->transfer_length * block_size)
		return bad_param(where, XH_TOTAL, NO_BIT);
	return TPT_SENSE_NONE;
}

/* A READ PARITY command folds its passes into a local operand, except
 * COMP BLOCK and the COPY mode (3.1). */
static bool has_operand(const struct tpt_cdb *cdb)
{
	if (cdb->opcode == TPT_OP_READ_PARITY_COMP_BLOCK)
		return false;
	if (cdb->opcode == TPT_OP_READ_PARITY_COMP_TMP)
		return true;
	return cdb->parity_mode != TPT_PARITY_COPY;
}

enum tpt_sense_reason tpt_xfer_list_check(const struct tpt_xfer_list *list,
					  const struct tpt_cdb *cdb,
					  uint32_t block_size,
					  struct tpt_field_ptr *where)
{
	const struct cdb_format *f = format_of(cdb->opcode);
	uint64_t at = 0, range;
	size_t i;

	clear_where(where);
	if (!f || f->info.param != TPT_PARAM_XFER_LIST)
		return bad_cdb(where, 0, NO_BIT);
	if (f->from_host)
		return check_host_list(list, cdb, block_size, where);
	if (f->header_only ? list->count != 0 : list->count == 0)
		return bad_param(where, XH_COUNT, NO_BIT);
	/* Only a READ PARITY command with a local operand can weight it. */
	if (list->operand_gf_exp && (!f->passes_ok || !has_operand(cdb)))
		return bad_param(where, XH_OPERAND_EXP, NO_BIT);
	range = (uint64_t)cdb->transfer_length * block_size;
	if (list->total_length != range &&
	    (!f->passes_ok || !range || list->total_length % range ||
	     list->total_length / range > TPT_XOR_PASSES_MAX))
		return bad_param(where, XH_TOTAL, NO_BIT);
	for (i = 0; i < list->count && i < TPT_XFER_DESC_MAX; i++) {
		const struct tpt_xfer_desc *d = &list->desc[i];
		size_t base = TPT_XFER_LIST_LEN(i);

		/* Each pass is one source's blocks for the whole range. */
		if (list->total_length != range &&
		    at / range != (at + d->length - 1) / range)
			return bad_param(where, base + XD_LENGTH, NO_BIT);
		/* A pass is weighted as a whole (3.1); other commands XOR
		 * nothing to weight. */
		if ((d->gf_exp && !f->passes_ok) ||
		    (at % range && d->gf_exp != list->desc[i - 1].gf_exp))
			return bad_param(where, base + XD_GF_EXP, NO_BIT);

		if ((d->peer == TPT_PEER_ID_CONTROLLER && !f->inline_ok) ||
		    d->peer == TPT_PEER_ID_INITIATOR)
			return bad_param(where, base + XD_PEER, NO_BIT);
		/* A skip lies between moved bytes: a range that began or
		 * ended with one would just be a longer command. */
		if (d->peer == TPT_PEER_ID_NONE &&
		    (!f->skip_ok || !i || i + 1 == list->count))
			return bad_param(where, base + XD_PEER, NO_BIT);
		/* PREP WRITE's runs between skips are buffers of blocks. */
		if (d->peer == TPT_PEER_ID_NONE && f->skip_blocks &&
		    (!block_size || at % block_size || d->length % block_size))
			return bad_param(where, base + XD_LENGTH, NO_BIT);
		/*
		 * A slot header carries the LBA of its first block, which
		 * a piece starting inside a block does not have.
		 */
		if ((d->flags & TPT_XFER_SLOT) &&
		    (f->writes_passive || !block_size || at % block_size))
			return bad_param(where, base + XD_FLAGS,
					 top_bit(TPT_XFER_SLOT));
		at += d->length;
	}
	if (list->result_slot != TPT_SLOT_NONE && f->writes_passive)
		return bad_param(where, XH_RESULT_SLOT, NO_BIT);
	return TPT_SENSE_NONE;
}

unsigned int tpt_xfer_list_passes(const struct tpt_xfer_list *list,
				  const struct tpt_cdb *cdb,
				  uint32_t block_size)
{
	uint64_t range = (uint64_t)cdb->transfer_length * block_size;

	return range && list->total_length > range ?
		(unsigned int)(list->total_length / range) : 1;
}

uint8_t tpt_xfer_list_pass_gf_exp(const struct tpt_xfer_list *list,
				  uint64_t pass_bytes, unsigned int pass)
{
	uint64_t at = 0, first = (uint64_t)pass * pass_bytes;
	size_t i;

	for (i = 0; i < list->count && i < TPT_XFER_DESC_MAX; i++) {
		if (at == first)
			return list->desc[i].gf_exp;
		at += list->desc[i].length;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Slot table and in-slot header */

/* Table header: 9-15 reserved; entries follow. */
#define SH_COUNT	0
#define SH_HDR_LEN	2
#define SH_PAYLOAD	4
#define SH_FLAGS	8
#define SH_RESERVED	9
#define SE_STAG		0
#define SE_OFFSET	8

/* In-slot header: 6-7 and 24-63 reserved. */
#define SL_MAGIC	0
#define SL_VERSION	4
#define SL_STATE	5
#define SL_GROUP	8
#define SL_LENGTH	12
#define SL_LBA		16

/* The header fields a decoder can judge before it has the entries. */
static enum tpt_sense_reason
check_slot_geometry(const struct tpt_slot_table *t, struct tpt_field_ptr *where)
{
	if (t->flags & ~TPT_XFER_VIRT_ADDR)
		return bad_param(where, SH_FLAGS,
				 top_bit(t->flags & ~TPT_XFER_VIRT_ADDR));
	if (!slot_count_ok(t->count))
		return bad_param(where, SH_COUNT, NO_BIT);
	if (!slot_payload_ok(t->payload_size))
		return bad_param(where, SH_PAYLOAD, NO_BIT);
	return TPT_SENSE_NONE;
}

static enum tpt_sense_reason check_slot_table(const struct tpt_slot_table *t,
					      struct tpt_field_ptr *where)
{
	uint64_t span = (uint64_t)TPT_SLOT_HDR_LEN + t->payload_size;
	enum tpt_sense_reason r;
	size_t i;

	r = check_slot_geometry(t, where);
	if (r)
		return r;
	/* A reader fetches header and payload from OFFSET on. */
	for (i = 0; i < t->count; i++)
		if (span - 1 > UINT64_MAX - t->slot[i].offset)
			return bad_param(where,
					 TPT_SLOT_TABLE_LEN(i) + SE_OFFSET,
					 NO_BIT);
	return TPT_SENSE_NONE;
}

/* Copy what fits of @n bytes meant for @buf[@at..] into @buf[0..@len). */
static void put_clipped(uint8_t *buf, size_t len, size_t at,
			const uint8_t *src, size_t n)
{
	if (at < len)
		memcpy(&buf[at], src, n < len - at ? n : len - at);
}

int tpt_slot_table_encode(const struct tpt_slot_table *t, uint8_t *buf,
			  size_t len)
{
	uint8_t hdr[TPT_SLOT_TABLE_HDR_LEN], entry[TPT_SLOT_ENTRY_LEN];
	size_t i;

	if (check_slot_table(t, NULL) != TPT_SENSE_NONE)
		return -EINVAL;

	memset(hdr, 0, sizeof(hdr));
	tpt_put_be(&hdr[SH_COUNT], t->count, 2);
	tpt_put_be(&hdr[SH_HDR_LEN], TPT_SLOT_HDR_LEN, 2);
	tpt_put_be(&hdr[SH_PAYLOAD], t->payload_size, 4);
	hdr[SH_FLAGS] = t->flags;
	put_clipped(buf, len, 0, hdr, sizeof(hdr));
	for (i = 0; i < t->count && TPT_SLOT_TABLE_LEN(i) < len; i++) {
		tpt_put_be(&entry[SE_STAG], t->slot[i].stag, 8);
		tpt_put_be(&entry[SE_OFFSET], t->slot[i].offset, 8);
		put_clipped(buf, len, TPT_SLOT_TABLE_LEN(i), entry,
			    sizeof(entry));
	}
	return (int)TPT_SLOT_TABLE_LEN(t->count);
}

enum tpt_sense_reason tpt_slot_table_decode(const uint8_t *buf, size_t len,
					    struct tpt_slot_table *out,
					    struct tpt_field_ptr *where)
{
	enum tpt_sense_reason r;
	size_t i;

	clear_where(where);
	if (len < TPT_SLOT_TABLE_HDR_LEN)
		return TPT_SENSE_PARAM_LIST_LENGTH;
	r = check_reserved(buf, SH_RESERVED,
			   TPT_SLOT_TABLE_HDR_LEN - SH_RESERVED, 0, where);
	if (r)
		return r;
	/* Version 1 readers know no other header layout. */
	if (tpt_get_be(&buf[SH_HDR_LEN], 2) != TPT_SLOT_HDR_LEN)
		return bad_param(where, SH_HDR_LEN, NO_BIT);
	out->count = (uint16_t)tpt_get_be(&buf[SH_COUNT], 2);
	out->payload_size = (uint32_t)tpt_get_be(&buf[SH_PAYLOAD], 4);
	out->flags = buf[SH_FLAGS];
	r = check_slot_geometry(out, where);
	if (r)
		return r;
	/* Short means the ALLOCATION LENGTH cut it: ask again for more. */
	if (len != TPT_SLOT_TABLE_LEN(out->count))
		return TPT_SENSE_PARAM_LIST_LENGTH;
	for (i = 0; i < out->count; i++) {
		const uint8_t *p = &buf[TPT_SLOT_TABLE_LEN(i)];

		out->slot[i].stag = tpt_get_be(&p[SE_STAG], 8);
		out->slot[i].offset = tpt_get_be(&p[SE_OFFSET], 8);
	}
	return check_slot_table(out, where);
}

void tpt_slot_header_encode(const struct tpt_slot_header *h,
			    uint8_t buf[TPT_SLOT_HDR_LEN])
{
	memset(buf, 0, TPT_SLOT_HDR_LEN);
	tpt_put_be(&buf[SL_MAGIC], TPT_SLOT_MAGIC, 4);
	buf[SL_VERSION] = TPT_SLOT_VERSION;
	buf[SL_STATE] = h->state;
	tpt_put_be(&buf[SL_GROUP], h->group, 4);
	tpt_put_be(&buf[SL_LENGTH], h->length, 4);
	tpt_put_be(&buf[SL_LBA], h->lba, 8);
}

/*
 * The only header a reader accepts is the one the producer wrote for
 * exactly this data, reserved bytes included: anything else is a slot
 * that was released, reused or never filled.
 */
enum tpt_sense_reason
tpt_slot_header_check(const uint8_t buf[TPT_SLOT_HDR_LEN], uint32_t group,
		      uint64_t lba, uint32_t length)
{
	const struct tpt_slot_header want = {
		.state = TPT_SLOT_STATE_VALID,
		.group = group,
		.length = length,
		.lba = lba,
	};
	uint8_t expect[TPT_SLOT_HDR_LEN];

	tpt_slot_header_encode(&want, expect);
	if (memcmp(buf, expect, TPT_SLOT_HDR_LEN))
		return TPT_SENSE_SLOT_STALE;
	return TPT_SENSE_NONE;
}

/* ---------------------------------------------------------------------- */
/* Peer list and host key */

/* Header. */
#define PH_ARRAY_ID	0
#define PH_GENERATION	8
#define PH_SELF_ID	12
#define PH_COUNT	14
#define PH_ARRAY_KEY	16
/* Entry; the host key uses the same layout with bytes 0-2 reserved. */
#define PE_ID		0
#define PE_ROLE		2
#define PE_FAMILY	3
#define PE_PORT		4
#define PE_RESERVED	6
#define PE_ADDR		8
#define PE_TOKEN	24

static enum tpt_sense_reason check_endpoint(const struct tpt_endpoint *ep,
					    size_t base,
					    struct tpt_field_ptr *where)
{
	switch (ep->family) {
	case TPT_AF_IPV4:
		if (!all_zero(&ep->addr[4], TPT_ADDR_LEN - 4))
			return bad_param(where, base + PE_ADDR + 4, NO_BIT);
		break;
	case TPT_AF_IPV6:
		break;
	default:
		return bad_param(where, base + PE_FAMILY, NO_BIT);
	}
	/* A peer must be somewhere one can connect to. */
	if (all_zero(ep->addr, TPT_ADDR_LEN))
		return bad_param(where, base + PE_ADDR, NO_BIT);
	if (!ep->port)
		return bad_param(where, base + PE_PORT, NO_BIT);
	return TPT_SENSE_NONE;
}

static void get_endpoint(const uint8_t *p, struct tpt_endpoint *ep)
{
	ep->family = p[PE_FAMILY];
	ep->port = (uint16_t)tpt_get_be(&p[PE_PORT], 2);
	memcpy(ep->addr, &p[PE_ADDR], TPT_ADDR_LEN);
}

static void put_endpoint(uint8_t *p, const struct tpt_endpoint *ep)
{
	p[PE_FAMILY] = ep->family;
	tpt_put_be(&p[PE_PORT], ep->port, 2);
	memcpy(&p[PE_ADDR], ep->addr, TPT_ADDR_LEN);
}

static enum tpt_sense_reason check_peer(const struct tpt_peer *p, size_t base,
					struct tpt_field_ptr *where)
{
	enum tpt_sense_reason r;

	if (p->id > TPT_PEER_ID_MAX)
		return bad_param(where, base + PE_ID, NO_BIT);
	if (p->role < TPT_ROLE_TARGET || p->role > TPT_ROLE_HOST)
		return bad_param(where, base + PE_ROLE, NO_BIT);
	r = check_endpoint(&p->ep, base, where);
	if (r)
		return r;
	/* An all-zero token would be a forgotten one, not a secret. */
	if (all_zero(p->token, TPT_AUTH_TOKEN_LEN))
		return bad_param(where, base + PE_TOKEN, NO_BIT);
	return TPT_SENSE_NONE;
}

static enum tpt_sense_reason check_peer_list(const struct tpt_peer_list *l,
					     struct tpt_field_ptr *where)
{
	bool have_controller = false, have_self = false;
	enum tpt_sense_reason r;
	size_t i;

	if (!l->array_id)
		return bad_param(where, PH_ARRAY_ID, NO_BIT);
	if (!l->generation)
		return bad_param(where, PH_GENERATION, NO_BIT);
	if (all_zero(l->array_key, TPT_ARRAY_KEY_LEN))
		return bad_param(where, PH_ARRAY_KEY, NO_BIT);
	if (!l->count || l->count > TPT_PEER_MAX)
		return bad_param(where, PH_COUNT, NO_BIT);
	for (i = 0; i < l->count; i++) {
		const struct tpt_peer *p = &l->peer[i];
		size_t base = TPT_PEER_LIST_LEN(i);

		r = check_peer(p, base, where);
		if (r)
			return r;
		/* Ascending ids: unique, canonical, and searchable. */
		if (i && p->id <= l->peer[i - 1].id)
			return bad_param(where, base + PE_ID, NO_BIT);
		if (p->role == TPT_ROLE_CONTROLLER) {
			if (have_controller)
				return bad_param(where, base + PE_ROLE, NO_BIT);
			have_controller = true;
		}
		if (p->id == l->self_id) {
			if (p->role != TPT_ROLE_TARGET)
				return bad_param(where, base + PE_ROLE, NO_BIT);
			have_self = true;
		}
	}
	if (!have_self)
		return bad_param(where, PH_SELF_ID, NO_BIT);
	return TPT_SENSE_NONE;
}

enum tpt_sense_reason tpt_peer_list_decode(const uint8_t *buf, size_t len,
					   struct tpt_peer_list *out,
					   struct tpt_field_ptr *where)
{
	enum tpt_sense_reason r;
	size_t i;

	clear_where(where);
	if (len < TPT_PEER_LIST_HDR_LEN)
		return TPT_SENSE_PARAM_LIST_LENGTH;
	out->count = (uint16_t)tpt_get_be(&buf[PH_COUNT], 2);
	if (!out->count || out->count > TPT_PEER_MAX)
		return bad_param(where, PH_COUNT, NO_BIT);
	if (len != TPT_PEER_LIST_LEN(out->count))
		return TPT_SENSE_PARAM_LIST_LENGTH;
	out->array_id = tpt_get_be(&buf[PH_ARRAY_ID], 8);
	out->generation = (uint32_t)tpt_get_be(&buf[PH_GENERATION], 4);
	out->self_id = (uint16_t)tpt_get_be(&buf[PH_SELF_ID], 2);
	memcpy(out->array_key, &buf[PH_ARRAY_KEY], TPT_ARRAY_KEY_LEN);

	for (i = 0; i < out->count; i++) {
		size_t base = TPT_PEER_LIST_LEN(i);
		const uint8_t *p = &buf[base];
		struct tpt_peer *peer = &out->peer[i];

		r = check_reserved(p, PE_RESERVED, PE_ADDR - PE_RESERVED,
				   base, where);
		if (r)
			return r;
		peer->id = (uint16_t)tpt_get_be(&p[PE_ID], 2);
		peer->role = p[PE_ROLE];
		get_endpoint(p, &peer->ep);
		memcpy(peer->token, &p[PE_TOKEN], TPT_AUTH_TOKEN_LEN);
	}
	return check_peer_list(out, where);
}

int tpt_peer_list_encode(const struct tpt_peer_list *list, uint8_t *buf,
			 size_t len)
{
	size_t i, list_len;

	if (check_peer_list(list, NULL) != TPT_SENSE_NONE)
		return -EINVAL;
	list_len = TPT_PEER_LIST_LEN(list->count);
	if (len < list_len)
		return -ENOSPC;

	memset(buf, 0, list_len);
	tpt_put_be(&buf[PH_ARRAY_ID], list->array_id, 8);
	tpt_put_be(&buf[PH_GENERATION], list->generation, 4);
	tpt_put_be(&buf[PH_SELF_ID], list->self_id, 2);
	tpt_put_be(&buf[PH_COUNT], list->count, 2);
	memcpy(&buf[PH_ARRAY_KEY], list->array_key, TPT_ARRAY_KEY_LEN);
	for (i = 0; i < list->count; i++) {
		uint8_t *p = &buf[TPT_PEER_LIST_LEN(i)];
		const struct tpt_peer *peer = &list->peer[i];

		tpt_put_be(&p[PE_ID], peer->id, 2);
		p[PE_ROLE] = peer->role;
		put_endpoint(p, &peer->ep);
		memcpy(&p[PE_TOKEN], peer->token, TPT_AUTH_TOKEN_LEN);
	}
	return (int)list_len;
}

const struct tpt_peer *tpt_peer_list_find(const struct tpt_peer_list *list,
					  uint16_t id)
{
	size_t lo = 0, hi = list->count;

	if (hi > TPT_PEER_MAX)
		hi = TPT_PEER_MAX;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct tpt_peer *p = &list->peer[mid];

		if (p->id == id)
			return p;
		if (p->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static enum tpt_sense_reason check_host_key(const struct tpt_host_key *key,
					    struct tpt_field_ptr *where)
{
	enum tpt_sense_reason r = check_endpoint(&key->ep, 0, where);

	if (r)
		return r;
	if (all_zero(key->key, TPT_AUTH_TOKEN_LEN))
		return bad_param(where, PE_TOKEN, NO_BIT);
	return TPT_SENSE_NONE;
}

enum tpt_sense_reason tpt_host_key_decode(const uint8_t *buf, size_t len,
					  struct tpt_host_key *out,
					  struct tpt_field_ptr *where)
{
	enum tpt_sense_reason r;

	clear_where(where);
	if (len != TPT_HOST_KEY_LEN)
		return TPT_SENSE_PARAM_LIST_LENGTH;
	/* The peer-entry id and role belong to the controller to assign. */
	r = check_reserved(buf, PE_ID, PE_FAMILY - PE_ID, 0, where);
	if (!r)
		r = check_reserved(buf, PE_RESERVED, PE_ADDR - PE_RESERVED, 0,
				   where);
	if (r)
		return r;
	get_endpoint(buf, &out->ep);
	memcpy(out->key, &buf[PE_TOKEN], TPT_AUTH_TOKEN_LEN);
	return check_host_key(out, where);
}

int tpt_host_key_encode(const struct tpt_host_key *key, uint8_t *buf,
			size_t len)
{
	if (check_host_key(key, NULL) != TPT_SENSE_NONE)
		return -EINVAL;
	if (len < TPT_HOST_KEY_LEN)
		return -ENOSPC;
	memset(buf, 0, TPT_HOST_KEY_LEN);
	put_endpoint(buf, &key->ep);
	memcpy(&buf[PE_TOKEN], key->key, TPT_AUTH_TOKEN_LEN);
	return TPT_HOST_KEY_LEN;
}

/* ---------------------------------------------------------------------- */
/* Endpoint report (data-in of TPT REPORT ENDPOINT) */

/* Bytes 3-23 sit where a peer-list entry has its endpoint. */
#define ER_VERSION	0
#define ER_PROVIDER	24

static enum tpt_sense_reason check_provider(const char *name, size_t len,
					    struct tpt_field_ptr *where)
{
	size_t i, n = strnlen(name, len);

	if (!n)
		return bad_param(where, ER_PROVIDER, NO_BIT);
	for (i = 0; i < n; i++)
		if (name[i] < 0x21 || name[i] > 0x7e)
			return bad_param(where, ER_PROVIDER + i, NO_BIT);
	return TPT_SENSE_NONE;
}

int tpt_endpoint_report_encode(const struct tpt_endpoint_report *r,
			       uint8_t *buf, size_t len)
{
	uint8_t out[TPT_ENDPOINT_REPORT_LEN];

	if (check_endpoint(&r->ep, 0, NULL) != TPT_SENSE_NONE ||
	    strnlen(r->provider, sizeof(r->provider)) > TPT_PROVIDER_LEN ||
	    check_provider(r->provider, TPT_PROVIDER_LEN, NULL) !=
		    TPT_SENSE_NONE)
		return -EINVAL;
	memset(out, 0, sizeof(out));
	out[ER_VERSION] = TPT_ENDPOINT_VERSION;
	put_endpoint(out, &r->ep);
	memcpy(&out[ER_PROVIDER], r->provider,
	       strnlen(r->provider, TPT_PROVIDER_LEN));
	put_clipped(buf, len, 0, out, sizeof(out));
	return TPT_ENDPOINT_REPORT_LEN;
}

enum tpt_sense_reason tpt_endpoint_report_decode(const uint8_t *buf,
						 size_t len,
						 struct tpt_endpoint_report *out,
						 struct tpt_field_ptr *where)
{
	struct tpt_endpoint_report r;
	enum tpt_sense_reason reason;
	size_t n;

	clear_where(where);
	if (len != TPT_ENDPOINT_REPORT_LEN)
		return TPT_SENSE_PARAM_LIST_LENGTH;
	if (buf[ER_VERSION] != TPT_ENDPOINT_VERSION)
		return bad_param(where, ER_VERSION, NO_BIT);
	reason = check_reserved(buf, 1, 2, 0, where);
	if (!reason)
		reason = check_reserved(buf, PE_RESERVED, 2, 0, where);
	if (reason)
		return reason;
	memset(&r, 0, sizeof(r));
	get_endpoint(buf, &r.ep);
	reason = check_endpoint(&r.ep, 0, where);
	if (reason)
		return reason;
	n = strnlen((const char *)&buf[ER_PROVIDER], TPT_PROVIDER_LEN);
	memcpy(r.provider, &buf[ER_PROVIDER], n);
	/* NUL padding only: nothing may follow the name. */
	if (!all_zero(&buf[ER_PROVIDER + n], TPT_PROVIDER_LEN - n))
		return bad_param(where, ER_PROVIDER + n, NO_BIT);
	reason = check_provider(r.provider, TPT_PROVIDER_LEN, where);
	if (reason)
		return reason;
	*out = r;
	return TPT_SENSE_NONE;
}
