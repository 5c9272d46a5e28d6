/*
 * Unit tests for scsi/tpt_cdb: every CDB, parameter list, slot table and
 * slot header is written out byte by byte from the tables in
 * docs/protocol.md, decoded, and encoded back; every validation rule is
 * broken once and must name its field.  The transfer list has a file of
 * its own, test_tpt_xfer_list.c.
 */
#include <errno.h>

#include "scsi/tpt_cdb.h"
#include "test/unit/unit.h"
#include "test/unit/scsi/field_ptr.h"

static struct tpt_peer_list peers;
static uint8_t buf[TPT_PEER_LIST_LEN(TPT_PEER_MAX)];

/* ---------------------------------------------------------------------- */
/* Helpers */

static bool cdb_equal(const struct tpt_cdb *a, const struct tpt_cdb *b)
{
	return a->opcode == b->opcode && a->flags == b->flags &&
	       a->parity_mode == b->parity_mode && a->control == b->control &&
	       a->transfer_length == b->transfer_length &&
	       a->group == b->group && a->param_len == b->param_len &&
	       a->lba == b->lba &&
	       a->slot_payload_size == b->slot_payload_size &&
	       a->slot_count == b->slot_count;
}

/* @bytes must decode to @want, and @want must encode to @bytes. */
static void cdb_both_ways(const uint8_t *bytes, size_t n,
			  const struct tpt_cdb *want)
{
	struct tpt_field_ptr where;
	uint8_t enc[TPT_CDB_MAX_LEN + 4];
	struct tpt_cdb got;

	CHECK_EQ(tpt_cdb_decode(bytes, n, &got, &where), TPT_SENSE_NONE);
	CHECK(!where.valid);
	CHECK(cdb_equal(&got, want));
	memset(enc, 0xee, sizeof(enc));
	CHECK_EQ(tpt_cdb_encode(want, enc, sizeof(enc)), n);
	CHECK_MEM(enc, bytes, n);
	CHECK_EQ(enc[n], 0xee);
}

static void cdb_rejected(const uint8_t *bytes, size_t n,
			 enum tpt_sense_reason reason, int byte, int bit)
{
	struct tpt_field_ptr where;
	struct tpt_cdb got;

	CHECK_EQ(tpt_cdb_decode(bytes, n, &got, &where), reason);
	check_where(&where, true, byte, bit);
}

static int top_bit_of(uint8_t v)
{
	int bit = 7;

	while (!(v & 1u << bit))
		bit--;
	return bit;
}

/* A copy of @base with byte @at replaced by @value. */
static void copy_with(uint8_t *dst, const uint8_t *base, size_t n, size_t at,
		      uint8_t value)
{
	memcpy(dst, base, n);
	dst[at] = value;
}

/* ---------------------------------------------------------------------- */
/* Opcode table */

static void test_info(void)
{
	static const struct {
		uint8_t op;
		uint8_t dir, param;
	} ops[] = {
		{ 0x50, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0x90, TPT_DATA_NONE, TPT_PARAM_NONE },
		{ 0xc0, TPT_DATA_OUT, TPT_PARAM_PEER_LIST },
		{ 0xc1, TPT_DATA_OUT, TPT_PARAM_HOST_KEY },
		{ 0xc2, TPT_DATA_NONE, TPT_PARAM_NONE },
		{ 0xc3, TPT_DATA_IN, TPT_PARAM_NONE },
		{ 0xc4, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xc5, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xc6, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xc7, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xc8, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xc9, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xca, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xcb, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xcc, TPT_DATA_NONE, TPT_PARAM_NONE },
		{ 0xcd, TPT_DATA_IN, TPT_PARAM_NONE },
		{ 0xce, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xcf, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xd0, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
		{ 0xd1, TPT_DATA_OUT, TPT_PARAM_XFER_LIST },
	};
	static const uint8_t not_ours[] = { 0x00, 0x28, 0x53, 0x8a, 0xd2,
					    0xff };
	size_t i, known = 0;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		const struct tpt_cdb_info *info = tpt_cdb_info(ops[i].op);

		CHECK(info != NULL);
		if (!info)
			continue;
		CHECK(info->name && info->name[0]);
		CHECK_EQ(info->dir, ops[i].dir);
		CHECK_EQ(info->param, ops[i].param);
	}
	for (i = 0; i < sizeof(not_ours); i++)
		CHECK(tpt_cdb_info(not_ours[i]) == NULL);
	for (i = 0; i < 256; i++)
		known += tpt_cdb_info((uint8_t)i) != NULL;
	CHECK_EQ(known, sizeof(ops) / sizeof(ops[0]));
}

/* ---------------------------------------------------------------------- */
/* CDB layouts */

static void test_xdwrite10(void)
{
	static const uint8_t bytes[10] = {
		0x50, 0x1e,			/* DPO FUA DISABLE_WRITE FUA_NV */
		0x12, 0x34, 0x56, 0x78,		/* LBA */
		0x1f,				/* GROUP NUMBER */
		0x00, 0x08,			/* TRANSFER LENGTH */
		0x80,				/* CONTROL: vendor bit */
	};
	const struct tpt_cdb want = {
		.opcode = TPT_OP_XDWRITE_10,
		.flags = TPT_CDB_DPO | TPT_CDB_FUA | TPT_CDB_DISABLE_WRITE |
			 TPT_CDB_FUA_NV,
		.lba = 0x12345678, .group = 31, .transfer_length = 8,
		.control = 0x80,
	};
	uint8_t iscsi[16] = { 0 };

	cdb_both_ways(bytes, sizeof(bytes), &want);
	/* iSCSI carries 16 bytes; what follows a 10-byte CDB is ignored. */
	memcpy(iscsi, bytes, sizeof(bytes));
	iscsi[12] = 0xaa;
	{
		struct tpt_cdb got;

		CHECK_EQ(tpt_cdb_decode(iscsi, sizeof(iscsi), &got, NULL),
			 TPT_SENSE_NONE);
		CHECK(cdb_equal(&got, &want));
	}
}

static void test_prefetch16(void)
{
	static const uint8_t bytes[16] = {
		0x90, 0x02,					/* IMMED */
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,	/* LBA */
		0x00, 0x00, 0x00, 0x10,				/* length */
		0x05,						/* GROUP */
		0x00,
	};
	const struct tpt_cdb want = {
		.opcode = TPT_OP_PRE_FETCH_16, .flags = TPT_CDB_IMMED,
		.lba = 0x0102030405060708ull, .transfer_length = 16,
		.group = 5,
	};
	uint8_t zero_len[16];

	cdb_both_ways(bytes, sizeof(bytes), &want);
	/* SBC: PREFETCH LENGTH 0 means "to the end of the medium". */
	memcpy(zero_len, bytes, 16);
	zero_len[13] = 0;
	{
		struct tpt_cdb z = want;

		z.transfer_length = 0;
		cdb_both_ways(zero_len, 16, &z);
	}
}

/* The vendor data layout: bytes 2-7 LBA, 8-10 length, 11-14 group. */
static void vendor_io(uint8_t *b, uint8_t op, uint8_t byte1)
{
	static const uint8_t fields[16] = {
		0, 0,
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05,	/* LBA */
		0x00, 0x00, 0x08,			/* TRANSFER LENGTH */
		0xde, 0xad, 0xbe, 0xef,			/* GROUP NUMBER */
		0x40,					/* CONTROL */
	};

	memcpy(b, fields, 16);
	b[0] = op;
	b[1] = byte1;
}

static void test_vendor_io(void)
{
	static const struct {
		uint8_t op, byte1;
		uint8_t flags, parity;
	} cases[] = {
		{ TPT_OP_PREP_READ, 0x01, TPT_CDB_FINAL, 0 },
		{ TPT_OP_PREP_READ, 0x00, 0, 0 },
		{ TPT_OP_PREP_WRITE, 0x01, TPT_CDB_FINAL, 0 },
		{ TPT_OP_READ_NEW_BLOCK, 0x00, 0, 0 },
		{ TPT_OP_XDWRITE_16, 0x04, TPT_CDB_DISABLE_WRITE, 0 },
		{ TPT_OP_XDWRITE_16, 0x0c, TPT_CDB_DISABLE_WRITE | TPT_CDB_FUA,
		  0 },
		{ TPT_OP_READ_PARITY_PART_TMP, 0x00, 0, TPT_PARITY_XOR_MEDIUM },
		{ TPT_OP_READ_PARITY_PART_TMP, 0x10, 0, TPT_PARITY_XOR_GROUP },
		{ TPT_OP_READ_PARITY_PART_BLOCK, 0x20, 0, TPT_PARITY_COPY },
		{ TPT_OP_READ_PARITY_COMP_TMP, 0x00, 0, 0 },
		{ TPT_OP_READ_PARITY_COMP_BLOCK, 0x00, 0, 0 },
		{ TPT_OP_WRITE_NEW_DATA, 0x08, TPT_CDB_FUA, 0 },
		{ TPT_OP_READ_MEDIUM, 0x00, 0, 0 },
		{ TPT_OP_SEND_RESULT, 0x00, 0, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tpt_cdb want = {
			.opcode = cases[i].op, .flags = cases[i].flags,
			.parity_mode = cases[i].parity,
			.lba = 0x000102030405ull, .transfer_length = 8,
			.group = 0xdeadbeef, .control = 0x40,
		};
		uint8_t b[16];

		vendor_io(b, cases[i].op, cases[i].byte1);
		cdb_both_ways(b, 16, &want);
	}
}

static void test_release(void)
{
	static const uint8_t one[16] = {
		0xc2, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x00, 0x00, 0x01, 0x00,		/* GROUP NUMBER 256 */
		0x00,
	};
	static const uint8_t all[16] = { 0xc2, 0x01 };
	const struct tpt_cdb want_one = {
		.opcode = TPT_OP_RELEASE, .group = 256,
	};
	const struct tpt_cdb want_all = {
		.opcode = TPT_OP_RELEASE, .flags = TPT_CDB_RELEASE_ALL,
	};

	cdb_both_ways(one, 16, &want_one);
	cdb_both_ways(all, 16, &want_all);
}

static void test_setup(void)
{
	static const uint8_t peer_list[16] = {
		0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x00, 0x00, 0x00, 0x98,		/* 32 + 3 * 40 */
		0x00, 0x00,
	};
	static const uint8_t host_key[16] = {
		0xc1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x00, 0x00, 0x00, 0x28,		/* 40 */
		0x00, 0x00,
	};
	const struct tpt_cdb want_peer = {
		.opcode = TPT_OP_SET_PEER_LIST, .param_len = 152,
	};
	const struct tpt_cdb want_key = {
		.opcode = TPT_OP_HOST_KEY, .param_len = 40,
	};

	cdb_both_ways(peer_list, 16, &want_peer);
	cdb_both_ways(host_key, 16, &want_key);
}

static const uint8_t report_slots[16] = {
	0xc3, 0x00,
	0x00, 0x01, 0x00, 0x00,		/* SLOT PAYLOAD SIZE: 64 KiB */
	0x00, 0x20,			/* SLOT COUNT: 32 */
	0x00, 0x00,
	0x00, 0x00, 0x02, 0x10,		/* ALLOCATION LENGTH: 16 + 32 * 16 */
	0x00,
	0x80,				/* CONTROL: vendor bit */
};

static void test_report_slots(void)
{
	const struct tpt_cdb want = {
		.opcode = TPT_OP_REPORT_SLOTS, .slot_payload_size = 65536,
		.slot_count = 32, .param_len = 528, .control = 0x80,
	};
	struct tpt_cdb any;
	uint8_t b[16];

	cdb_both_ways(report_slots, 16, &want);
	/* SPC: any ALLOCATION LENGTH, zero included, is legal. */
	copy_with(b, report_slots, 16, 12, 0x00);
	b[13] = 0x00;
	any = want;
	any.param_len = 0;
	cdb_both_ways(b, 16, &any);
	memset(&b[10], 0xff, 4);
	any.param_len = UINT32_MAX;
	cdb_both_ways(b, 16, &any);
}

/* READ MEDIUM and SEND RESULT, from the tables of protocol.md 4.17, 4.18. */
static void test_degraded_cdbs(void)
{
	static const uint8_t read_medium[16] = {
		0xce, 0x00,				/* no flags */
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00,	/* LBA 65536 */
		0x00, 0x00, 0x80,			/* TRANSFER LENGTH 128 */
		0x00, 0x00, 0x10, 0x01,			/* GROUP NUMBER */
		0x00,
	};
	static const uint8_t send_result[16] = {
		0xcf, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x20, 0x00,	/* LBA 8192 */
		0x00, 0x00, 0x08,			/* TRANSFER LENGTH 8 */
		0xff, 0xff, 0xff, 0xfe,			/* GROUP NUMBER */
		0x80,					/* CONTROL: vendor */
	};
	const struct tpt_cdb want_medium = {
		.opcode = TPT_OP_READ_MEDIUM, .lba = 65536,
		.transfer_length = 128, .group = 0x1001,
	};
	const struct tpt_cdb want_send = {
		.opcode = TPT_OP_SEND_RESULT, .lba = 8192,
		.transfer_length = 8, .group = 0xfffffffe, .control = 0x80,
	};
	uint8_t b[16];
	int bit;

	cdb_both_ways(read_medium, 16, &want_medium);
	cdb_both_ways(send_result, 16, &want_send);
	/* Byte 1 is reserved in both: every bit, PARITY MODE's included. */
	for (bit = 0; bit < 8; bit++) {
		copy_with(b, read_medium, 16, 1, (uint8_t)(1u << bit));
		cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, bit);
		copy_with(b, send_result, 16, 1, (uint8_t)(1u << bit));
		cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, bit);
	}
	/* Both move blocks: TRANSFER LENGTH 0 is refused. */
	copy_with(b, read_medium, 16, 10, 0x00);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 8, NO_BIT);
	copy_with(b, send_result, 16, 10, 0x00);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 8, NO_BIT);
	copy_with(b, send_result, 16, 15, 0x01);	/* LINK */
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 15, 0);
	cdb_rejected(read_medium, 15, TPT_SENSE_INVALID_CDB_FIELD, 0, NO_BIT);
}

/* TPT HOST READ/WRITE: the vendor layout with the group bytes reserved. */
static void test_host_cdbs(void)
{
	static const uint8_t host_write[16] = {
		0xd1, 0x08,				/* FUA */
		0x00, 0x00, 0x00, 0x00, 0x01, 0x00,	/* LBA 256 */
		0x00, 0x20, 0x00,			/* TRANSFER LENGTH 8192 */
		0x00, 0x00, 0x00, 0x00,			/* reserved */
		0x00,
	};
	const struct tpt_cdb want = {
		.opcode = TPT_OP_HOST_WRITE, .flags = TPT_CDB_FUA, .lba = 256,
		.transfer_length = 8192,
	};
	struct tpt_cdb with_group = want;
	uint8_t b[16], enc[16];
	int bit, at;

	cdb_both_ways(host_write, 16, &want);
	/* READ has no flag at all, WRITE only FUA. */
	for (bit = 0; bit < 8; bit++) {
		copy_with(b, host_write, 16, 1, (uint8_t)(1u << bit));
		b[0] = 0xd0;
		cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, bit);
		if (bit == 3)
			continue;
		b[0] = 0xd1;
		cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, bit);
	}
	/* The controller numbers groups; a host's number is refused. */
	for (at = 11; at <= 14; at++) {
		copy_with(b, host_write, 16, (size_t)at, 0x01);
		cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, at, 0);
	}
	with_group.group = 1;
	CHECK_EQ(tpt_cdb_encode(&with_group, enc, sizeof(enc)), -EINVAL);
	copy_with(b, host_write, 16, 9, 0x00);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 8, NO_BIT);
}

/* ---------------------------------------------------------------------- */
/* CDB validation */

static void test_cdb_opcode_and_length(void)
{
	static const uint8_t unknown[16] = { 0xd2 };
	static const uint8_t read16[16] = { 0x88 };
	uint8_t x10[10];

	cdb_rejected(unknown, 16, TPT_SENSE_INVALID_OPCODE, 0, NO_BIT);
	cdb_rejected(read16, 16, TPT_SENSE_INVALID_OPCODE, 0, NO_BIT);
	cdb_rejected(unknown, 0, TPT_SENSE_INVALID_CDB_FIELD, 0, NO_BIT);
	/* XDWRITE(10) needs ten bytes, the vendor CDBs sixteen. */
	memset(x10, 0, sizeof(x10));
	x10[0] = 0x50;
	x10[1] = 0x04;
	x10[8] = 1;
	cdb_rejected(x10, 9, TPT_SENSE_INVALID_CDB_FIELD, 0, NO_BIT);
	CHECK_EQ(tpt_cdb_decode(x10, 10, &(struct tpt_cdb){ 0 }, NULL),
		 TPT_SENSE_NONE);
	{
		uint8_t b[16];

		vendor_io(b, TPT_OP_PREP_READ, 0);
		cdb_rejected(b, 15, TPT_SENSE_INVALID_CDB_FIELD, 0, NO_BIT);
	}
}

static void test_cdb_reserved_bits(void)
{
	static const uint8_t x10[10] = { 0x50, 0x04, 0, 0, 0, 1, 0, 0, 1, 0 };
	static const uint8_t pf[16] = { 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					0, 0, 0, 1, 0, 0 };
	static const uint8_t rel[16] = { 0xc2 };
	static const uint8_t setup[16] = { 0xc1, [13] = 40 };
	uint8_t b[16];

	/* XDWRITE(10): WRPROTECT, reserved bit 0, GROUP NUMBER bits 7-5. */
	copy_with(b, x10, 10, 1, 0x84);
	cdb_rejected(b, 10, TPT_SENSE_INVALID_CDB_FIELD, 1, 7);
	copy_with(b, x10, 10, 1, 0x25);
	cdb_rejected(b, 10, TPT_SENSE_INVALID_CDB_FIELD, 1, 5);
	copy_with(b, x10, 10, 1, 0x05);
	cdb_rejected(b, 10, TPT_SENSE_INVALID_CDB_FIELD, 1, 0);
	copy_with(b, x10, 10, 6, 0x3f);
	cdb_rejected(b, 10, TPT_SENSE_INVALID_CDB_FIELD, 6, 5);

	/* PRE-FETCH(16): byte 1 bits 7-2 and 0, byte 14 bits 7-5. */
	copy_with(b, pf, 16, 1, 0x04);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 2);
	copy_with(b, pf, 16, 1, 0x01);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 0);
	copy_with(b, pf, 16, 14, 0x80);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 14, 7);

	/* Vendor data CDBs: only the flags the opcode defines. */
	vendor_io(b, TPT_OP_PREP_READ, 0x40);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 6);
	vendor_io(b, TPT_OP_PREP_READ, 0x10);	/* no PARITY MODE here */
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 4);
	vendor_io(b, TPT_OP_READ_NEW_BLOCK, TPT_CDB_FINAL);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 0);
	vendor_io(b, TPT_OP_READ_PARITY_COMP_TMP, 0x20);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 5);
	vendor_io(b, TPT_OP_WRITE_NEW_DATA, 0x02);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 1);
	vendor_io(b, TPT_OP_READ_PARITY_PART_TMP, 0x80);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 7);

	/* TPT RELEASE: bytes 2-10; setup commands: 1-9 and 14. */
	copy_with(b, rel, 16, 5, 0x10);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 5, 4);
	copy_with(b, rel, 16, 1, 0x02);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 1);
	copy_with(b, setup, 16, 14, 0x01);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 14, 0);
	copy_with(b, setup, 16, 2, 0xff);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 2, 7);
	copy_with(b, setup, 16, 1, 0x01);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 0);
}

static void test_cdb_control(void)
{
	uint8_t b[16];

	vendor_io(b, TPT_OP_PREP_WRITE, 0);
	b[15] = 0xc0;			/* vendor bits pass */
	CHECK_EQ(tpt_cdb_decode(b, 16, &(struct tpt_cdb){ 0 }, NULL),
		 TPT_SENSE_NONE);
	b[15] = 0x04;			/* NACA */
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 15, 2);
	b[15] = 0x01;			/* LINK */
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 15, 0);
	b[15] = 0x38;			/* reserved */
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 15, 5);
	{
		static const uint8_t x10[10] = { 0x50, 0x04, 0, 0, 0, 0, 0,
						 0, 1, 0x04 };

		cdb_rejected(x10, 10, TPT_SENSE_INVALID_CDB_FIELD, 9, 2);
	}
}

static void test_cdb_semantics(void)
{
	uint8_t b[16];

	/* DISABLE WRITE is mandatory: TPT never writes on XDWRITE. */
	{
		static const uint8_t x10[10] = { 0x50, 0x08, 0, 0, 0, 0, 0,
						 0, 1, 0 };

		cdb_rejected(x10, 10, TPT_SENSE_INVALID_CDB_FIELD, 1, 2);
	}
	vendor_io(b, TPT_OP_XDWRITE_16, TPT_CDB_FUA);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 2);

	/* PARITY MODE 3 is reserved. */
	vendor_io(b, TPT_OP_READ_PARITY_PART_BLOCK, 0x30);
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 1, 5);

	/* TRANSFER LENGTH 0 moves nothing and is refused. */
	vendor_io(b, TPT_OP_PREP_READ, 0);
	b[10] = 0;
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 8, NO_BIT);
	vendor_io(b, TPT_OP_WRITE_NEW_DATA, 0);
	b[10] = 0;
	cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 8, NO_BIT);
	{
		static const uint8_t x10[10] = { 0x50, 0x04 };

		cdb_rejected(x10, 10, TPT_SENSE_INVALID_CDB_FIELD, 7, NO_BIT);
	}

	/* RELEASE ALL takes no group number. */
	{
		static const uint8_t rel[16] = { 0xc2, 0x01, [14] = 0x07 };

		cdb_rejected(rel, 16, TPT_SENSE_INVALID_CDB_FIELD, 11, NO_BIT);
	}
}

static void test_cdb_lba_overflow(void)
{
	uint8_t b[16];

	/* Vendor: the last block must be at or below 2^48 - 1. */
	vendor_io(b, TPT_OP_PREP_READ, 0);
	memset(&b[2], 0xff, 6);
	b[8] = 0;
	b[9] = 0;
	b[10] = 1;
	CHECK_EQ(tpt_cdb_decode(b, 16, &(struct tpt_cdb){ 0 }, NULL),
		 TPT_SENSE_NONE);
	b[10] = 2;
	cdb_rejected(b, 16, TPT_SENSE_LBA_OUT_OF_RANGE, NO_PTR, NO_BIT);
	b[2] = 0x00;		/* LBA ffffffffff, length 2^24 - 1 */
	b[8] = b[9] = b[10] = 0xff;
	CHECK_EQ(tpt_cdb_decode(b, 16, &(struct tpt_cdb){ 0 }, NULL),
		 TPT_SENSE_NONE);

	/* XDWRITE(10): 32-bit LBA. */
	{
		uint8_t x10[10] = { 0x50, 0x04, 0xff, 0xff, 0xff, 0xff, 0,
				    0, 1, 0 };

		CHECK_EQ(tpt_cdb_decode(x10, 10, &(struct tpt_cdb){ 0 },
					NULL), TPT_SENSE_NONE);
		x10[8] = 2;
		cdb_rejected(x10, 10, TPT_SENSE_LBA_OUT_OF_RANGE, NO_PTR,
			     NO_BIT);
	}

	/* PRE-FETCH(16): 64-bit LBA, so the sum itself must not wrap. */
	{
		uint8_t pf[16] = { 0x90, 0 };

		memset(&pf[2], 0xff, 8);
		pf[13] = 1;
		CHECK_EQ(tpt_cdb_decode(pf, 16, &(struct tpt_cdb){ 0 }, NULL),
			 TPT_SENSE_NONE);
		pf[13] = 2;
		cdb_rejected(pf, 16, TPT_SENSE_LBA_OUT_OF_RANGE, NO_PTR,
			     NO_BIT);
		pf[13] = 0;
		CHECK_EQ(tpt_cdb_decode(pf, 16, &(struct tpt_cdb){ 0 }, NULL),
			 TPT_SENSE_NONE);
	}
}

static void test_cdb_param_len(void)
{
	static const struct {
		uint8_t op;
		uint32_t len;
		bool ok;
	} cases[] = {
		{ TPT_OP_SET_PEER_LIST, 0, false },
		{ TPT_OP_SET_PEER_LIST, 32, false },	/* no entries */
		{ TPT_OP_SET_PEER_LIST, 56, false },	/* version 1's header */
		{ TPT_OP_SET_PEER_LIST, 72, true },
		{ TPT_OP_SET_PEER_LIST, 73, false },
		{ TPT_OP_SET_PEER_LIST, 32 + 40 * 1024, true },
		{ TPT_OP_SET_PEER_LIST, 32 + 40 * 1025, false },
		{ TPT_OP_HOST_KEY, 0, false },
		{ TPT_OP_HOST_KEY, 39, false },
		{ TPT_OP_HOST_KEY, 40, true },
		{ TPT_OP_HOST_KEY, 80, false },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t b[16] = { cases[i].op };

		b[10] = (uint8_t)(cases[i].len >> 24);
		b[11] = (uint8_t)(cases[i].len >> 16);
		b[12] = (uint8_t)(cases[i].len >> 8);
		b[13] = (uint8_t)cases[i].len;
		if (cases[i].ok)
			CHECK_EQ(tpt_cdb_decode(b, 16, &(struct tpt_cdb){ 0 },
						NULL), TPT_SENSE_NONE);
		else
			cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 10,
				     NO_BIT);
	}
}

static void test_cdb_report_slots_fields(void)
{
	static const struct {
		size_t at;
		uint8_t value;
		int byte, bit;
	} reserved[] = {
		{ 1, 0x01, 1, 0 }, { 8, 0x40, 8, 6 }, { 9, 0x01, 9, 0 },
		{ 14, 0x80, 14, 7 }, { 15, 0x04, 15, 2 },
	};
	static const struct {
		uint8_t size[4];
		bool ok;
	} sizes[] = {
		{ { 0x00, 0x00, 0x00, 0x00 }, false },
		{ { 0x00, 0x00, 0x02, 0x00 }, true },	/* 512 */
		{ { 0x00, 0x00, 0x02, 0x01 }, false },
		{ { 0x00, 0x00, 0x10, 0x80 }, false },	/* 4224 */
		{ { 0x01, 0x00, 0x00, 0x00 }, true },	/* 16 MiB */
		{ { 0x01, 0x00, 0x02, 0x00 }, false },
		{ { 0x80, 0x00, 0x00, 0x00 }, false },
	};
	static const struct {
		uint8_t count[2];
		bool ok;
	} counts[] = {
		{ { 0x00, 0x00 }, false },
		{ { 0x00, 0x01 }, true },
		{ { 0x04, 0x00 }, true },		/* 1024 */
		{ { 0x04, 0x01 }, false },
		{ { 0xff, 0xff }, false },
	};
	uint8_t b[16];
	size_t i;

	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		copy_with(b, report_slots, 16, reserved[i].at,
			  reserved[i].value);
		cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD,
			     reserved[i].byte, reserved[i].bit);
	}
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memcpy(b, report_slots, 16);
		memcpy(&b[2], sizes[i].size, 4);
		if (sizes[i].ok)
			CHECK_EQ(tpt_cdb_decode(b, 16, &(struct tpt_cdb){ 0 },
						NULL), TPT_SENSE_NONE);
		else
			cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 2,
				     NO_BIT);
	}
	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		memcpy(b, report_slots, 16);
		memcpy(&b[6], counts[i].count, 2);
		if (counts[i].ok)
			CHECK_EQ(tpt_cdb_decode(b, 16, &(struct tpt_cdb){ 0 },
						NULL), TPT_SENSE_NONE);
		else
			cdb_rejected(b, 16, TPT_SENSE_INVALID_CDB_FIELD, 6,
				     NO_BIT);
	}
	cdb_rejected(report_slots, 15, TPT_SENSE_INVALID_CDB_FIELD, 0, NO_BIT);
}

static void test_cdb_encode_refuses(void)
{
	const struct tpt_cdb good = {
		.opcode = TPT_OP_PREP_READ, .lba = 1, .transfer_length = 1,
		.group = 9,
	};
	struct tpt_cdb c;
	uint8_t b[16];

	CHECK_EQ(tpt_cdb_encode(&good, b, 16), 16);
	CHECK_EQ(tpt_cdb_encode(&good, b, 15), -ENOSPC);

	c = good;
	c.opcode = 0xcd;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	/* Slot geometry only where TPT REPORT SLOTS has a home for it. */
	c = good;
	c.slot_count = 1;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c = good;
	c.slot_payload_size = 512;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	/* The vendor field limits, exactly. */
	c = good;
	c.lba = TPT_VENDOR_LBA_MAX;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), 16);
	c.lba = TPT_VENDOR_LBA_MAX + 1;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c = good;
	c.transfer_length = TPT_VENDOR_LENGTH_MAX;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), 16);
	c.transfer_length = TPT_VENDOR_LENGTH_MAX + 1;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c = good;
	c.transfer_length = 0;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c = good;
	c.flags = TPT_CDB_FUA;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c = good;
	c.parity_mode = TPT_PARITY_XOR_GROUP;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c = good;
	c.param_len = 40;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c = good;
	c.control = 0x04;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);

	c = (struct tpt_cdb){ .opcode = TPT_OP_XDWRITE_10,
			      .flags = TPT_CDB_DISABLE_WRITE,
			      .transfer_length = 1, .group = 32 };
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c.group = 31;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), 10);
	c.lba = UINT64_C(1) << 32;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c.lba = 0;
	c.flags = 0;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);

	c = (struct tpt_cdb){ .opcode = TPT_OP_RELEASE, .lba = 1 };
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c = (struct tpt_cdb){ .opcode = TPT_OP_HOST_KEY, .param_len = 41 };
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);

	c = (struct tpt_cdb){ .opcode = TPT_OP_REPORT_SLOTS,
			      .slot_payload_size = TPT_SLOT_PAYLOAD_MAX,
			      .slot_count = TPT_SLOT_MAX };
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), 16);
	c.slot_count = TPT_SLOT_MAX + 1;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c.slot_count = 1;
	c.slot_payload_size = TPT_SLOT_PAYLOAD_UNIT + 1;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c.slot_payload_size = TPT_SLOT_PAYLOAD_UNIT;
	c.group = 1;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
	c.group = 0;
	c.transfer_length = 1;
	CHECK_EQ(tpt_cdb_encode(&c, b, 16), -EINVAL);
}

static void test_cdb_capacity(void)
{
	struct tpt_cdb c = { .opcode = TPT_OP_PREP_READ, .lba = 90,
			     .transfer_length = 10 };

	CHECK_EQ(tpt_cdb_check_capacity(&c, 100), TPT_SENSE_NONE);
	CHECK_EQ(tpt_cdb_check_capacity(&c, 99), TPT_SENSE_LBA_OUT_OF_RANGE);
	CHECK_EQ(tpt_cdb_check_capacity(&c, 0), TPT_SENSE_LBA_OUT_OF_RANGE);
	c = (struct tpt_cdb){ .opcode = TPT_OP_PRE_FETCH_16, .lba = 99 };
	CHECK_EQ(tpt_cdb_check_capacity(&c, 100), TPT_SENSE_NONE);
	c.lba = 100;
	CHECK_EQ(tpt_cdb_check_capacity(&c, 100), TPT_SENSE_LBA_OUT_OF_RANGE);
	c = (struct tpt_cdb){ .opcode = TPT_OP_RELEASE, .group = 3 };
	CHECK_EQ(tpt_cdb_check_capacity(&c, 0), TPT_SENSE_NONE);
	c = (struct tpt_cdb){ .opcode = TPT_OP_REPORT_SLOTS, .slot_count = 1,
			      .slot_payload_size = 512 };
	CHECK_EQ(tpt_cdb_check_capacity(&c, 0), TPT_SENSE_NONE);
}

/* ---------------------------------------------------------------------- */
/* Slot table */

/* Two 64 KiB slots of one region, virtual addresses. */
static const uint8_t slot_table[16 + 2 * 16] = {
	0x00, 0x02,				/* SLOT COUNT */
	0x00, 0x40,				/* SLOT HEADER LENGTH */
	0x00, 0x01, 0x00, 0x00,			/* SLOT PAYLOAD SIZE */
	0x01,					/* FLAGS: VIRT_ADDR */
	0, 0, 0, 0, 0, 0, 0,
	/* slot 0 */
	0, 0, 0, 0, 0xab, 0xcd, 0x12, 0x34,	/* STAG */
	0, 0, 0x7f, 0, 0, 0, 0, 0,		/* OFFSET */
	/* slot 1: right after slot 0's header and payload */
	0, 0, 0, 0, 0xab, 0xcd, 0x12, 0x34,
	0, 0, 0x7f, 0, 0, 0x01, 0x00, 0x40,
};

static struct tpt_slot_table slots;

static void test_slot_table_layout(void)
{
	struct tpt_field_ptr where;
	uint8_t enc[64];
	size_t i;

	CHECK_EQ(tpt_slot_table_decode(slot_table, 48, &slots, &where),
		 TPT_SENSE_NONE);
	CHECK(!where.valid);
	CHECK_EQ(slots.count, 2);
	CHECK_EQ(slots.payload_size, 65536);
	CHECK_EQ(slots.flags, TPT_XFER_VIRT_ADDR);
	CHECK(slots.slot[0].stag == 0xabcd1234ull);
	CHECK(slots.slot[0].offset == 0x7f0000000000ull);
	CHECK(slots.slot[1].offset == 0x7f0000010040ull);

	memset(enc, 0xee, sizeof(enc));
	CHECK_EQ(tpt_slot_table_encode(&slots, enc, sizeof(enc)), 48);
	CHECK_MEM(enc, slot_table, 48);
	CHECK_EQ(enc[48], 0xee);

	/* SPC allocation length: the whole length, and only what fits. */
	for (i = 0; i <= 48; i += 7) {
		memset(enc, 0xee, sizeof(enc));
		CHECK_EQ(tpt_slot_table_encode(&slots, enc, i), 48);
		CHECK_MEM(enc, slot_table, i);
		CHECK_EQ(enc[i], 0xee);
	}
	CHECK_EQ(tpt_slot_table_encode(&slots, NULL, 0), 48);
}

static void slot_table_rejected(const uint8_t *b, size_t n,
				enum tpt_sense_reason reason, int byte,
				int bit)
{
	struct tpt_field_ptr where;

	CHECK_EQ(tpt_slot_table_decode(b, n, &slots, &where), reason);
	check_where(&where, false, byte, bit);
}

static void test_slot_table_errors(void)
{
	static const struct {
		size_t at;
		uint8_t value;
		int byte, bit;
	} cases[] = {
		{ 9, 0x01, 9, 0 },		/* reserved */
		{ 15, 0x80, 15, 7 },
		{ 3, 0x20, 2, NO_BIT },		/* SLOT HEADER LENGTH 32 */
		{ 2, 0x01, 2, NO_BIT },
		{ 8, 0x03, 8, 1 },		/* FLAGS bit 1 */
		{ 8, 0x80, 8, 7 },
		{ 1, 0x00, 0, NO_BIT },		/* SLOT COUNT 0 */
		{ 0, 0x04, 0, NO_BIT },		/* 1026 */
		{ 5, 0x00, 4, NO_BIT },		/* SLOT PAYLOAD SIZE 0 */
		{ 7, 0x01, 4, NO_BIT },		/* 65537 */
		{ 4, 0x01, 4, NO_BIT },		/* 16 MiB + 64 KiB */
	};
	uint8_t b[48];
	size_t i;

	slot_table_rejected(slot_table, 15, TPT_SENSE_PARAM_LIST_LENGTH,
			    NO_PTR, NO_BIT);
	/* Cut short by the ALLOCATION LENGTH, or padded. */
	slot_table_rejected(slot_table, 16, TPT_SENSE_PARAM_LIST_LENGTH,
			    NO_PTR, NO_BIT);
	slot_table_rejected(slot_table, 47, TPT_SENSE_PARAM_LIST_LENGTH,
			    NO_PTR, NO_BIT);
	memcpy(b, slot_table, 48);
	b[1] = 1;
	slot_table_rejected(b, 48, TPT_SENSE_PARAM_LIST_LENGTH, NO_PTR,
			    NO_BIT);
	CHECK_EQ(tpt_slot_table_decode(b, 32, &slots, NULL), TPT_SENSE_NONE);

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		copy_with(b, slot_table, 48, cases[i].at, cases[i].value);
		slot_table_rejected(b, 48, TPT_SENSE_INVALID_PARAM_FIELD,
				    cases[i].byte, cases[i].bit);
	}
	/* 16 MiB is the largest payload. */
	memcpy(b, slot_table, 48);
	memcpy(&b[4], (const uint8_t[]){ 0x01, 0x00, 0x00, 0x00 }, 4);
	CHECK_EQ(tpt_slot_table_decode(b, 48, &slots, NULL), TPT_SENSE_NONE);

	/* A slot's header and payload must lie below 2^64. */
	memcpy(b, slot_table, 48);
	memset(&b[40], 0xff, 8);		/* 2^64 - 64 - 64 KiB: fits */
	b[45] = 0xfe;
	b[46] = 0xff;
	b[47] = 0xc0;
	CHECK_EQ(tpt_slot_table_decode(b, 48, &slots, NULL), TPT_SENSE_NONE);
	b[47] = 0xc1;
	slot_table_rejected(b, 48, TPT_SENSE_INVALID_PARAM_FIELD, 40, NO_BIT);
}

static void test_slot_table_encode_refuses(void)
{
	uint8_t enc[48];

	CHECK_EQ(tpt_slot_table_decode(slot_table, 48, &slots, NULL),
		 TPT_SENSE_NONE);
	slots.count = 0;
	CHECK_EQ(tpt_slot_table_encode(&slots, enc, sizeof(enc)), -EINVAL);
	slots.count = TPT_SLOT_MAX + 1;
	CHECK_EQ(tpt_slot_table_encode(&slots, enc, sizeof(enc)), -EINVAL);
	slots.count = 2;
	slots.payload_size = 1000;
	CHECK_EQ(tpt_slot_table_encode(&slots, enc, sizeof(enc)), -EINVAL);
	slots.payload_size = 65536;
	slots.flags = TPT_XFER_SLOT;
	CHECK_EQ(tpt_slot_table_encode(&slots, enc, sizeof(enc)), -EINVAL);
	slots.flags = 0;
	slots.slot[1].offset = UINT64_MAX - 64;
	CHECK_EQ(tpt_slot_table_encode(&slots, enc, sizeof(enc)), -EINVAL);
	slots.slot[1].offset = 0;
	CHECK_EQ(tpt_slot_table_encode(&slots, enc, sizeof(enc)), 48);
	/* The largest table. */
	slots.count = TPT_SLOT_MAX;
	CHECK_EQ(tpt_slot_table_encode(&slots, NULL, 0),
		 TPT_SLOT_TABLE_LEN(TPT_SLOT_MAX));
}

/* ---------------------------------------------------------------------- */
/* In-slot header */

/* 64 KiB of group deadbeefh from LBA 0102030405h, valid. */
static const uint8_t slot_header[64] = {
	0x54, 0x50, 0x54, 0x53,			/* MAGIC "TPTS" */
	0x01,					/* VERSION */
	0x01,					/* STATE: valid */
	0x00, 0x00,
	0xde, 0xad, 0xbe, 0xef,			/* GROUP NUMBER */
	0x00, 0x01, 0x00, 0x00,			/* LENGTH */
	0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05,	/* LBA */
};

static void test_slot_header(void)
{
	const struct tpt_slot_header h = {
		.state = TPT_SLOT_STATE_VALID, .group = 0xdeadbeef,
		.length = 65536, .lba = 0x0102030405ull,
	};
	struct tpt_slot_header freed = h;
	uint8_t enc[TPT_SLOT_HDR_LEN], want[TPT_SLOT_HDR_LEN];

	memset(enc, 0xee, sizeof(enc));
	tpt_slot_header_encode(&h, enc);
	CHECK_MEM(enc, slot_header, 64);
	CHECK_EQ(tpt_slot_header_check(slot_header, 0xdeadbeef,
				       0x0102030405ull, 65536),
		 TPT_SENSE_NONE);

	/* Releasing rewrites STATE free. */
	freed.state = TPT_SLOT_STATE_FREE;
	tpt_slot_header_encode(&freed, enc);
	copy_with(want, slot_header, 64, 5, 0x00);
	CHECK_MEM(enc, want, 64);
}

static void test_slot_header_stale(void)
{
	static const struct {
		size_t at;
		uint8_t value;
	} damage[] = {
		{ 0, 0x55 },		/* MAGIC */
		{ 3, 0x00 },
		{ 4, 0x02 },		/* VERSION */
		{ 5, 0x00 },		/* STATE free */
		{ 5, 0x02 },
		{ 6, 0x01 },		/* reserved */
		{ 7, 0x80 },
		{ 11, 0xee },		/* GROUP NUMBER */
		{ 15, 0x01 },		/* LENGTH */
		{ 16, 0x01 },		/* LBA */
		{ 23, 0x06 },
		{ 24, 0x01 },		/* reserved */
		{ 63, 0x01 },
	};
	uint8_t b[TPT_SLOT_HDR_LEN];
	size_t i;

	for (i = 0; i < sizeof(damage) / sizeof(damage[0]); i++) {
		copy_with(b, slot_header, 64, damage[i].at, damage[i].value);
		CHECK_EQ(tpt_slot_header_check(b, 0xdeadbeef, 0x0102030405ull,
					       65536),
			 TPT_SENSE_SLOT_STALE);
	}
	/* The reader expects another group, piece or length. */
	CHECK_EQ(tpt_slot_header_check(slot_header, 0xdeadbeee,
				       0x0102030405ull, 65536),
		 TPT_SENSE_SLOT_STALE);
	CHECK_EQ(tpt_slot_header_check(slot_header, 0xdeadbeef,
				       0x0102030485ull, 65536),
		 TPT_SENSE_SLOT_STALE);
	CHECK_EQ(tpt_slot_header_check(slot_header, 0xdeadbeef,
				       0x0102030405ull, 32768),
		 TPT_SENSE_SLOT_STALE);
	memset(b, 0, sizeof(b));
	CHECK_EQ(tpt_slot_header_check(b, 0, 0, 0), TPT_SENSE_SLOT_STALE);
}

/* ---------------------------------------------------------------------- */
/* Peer list and host key */

/* Array 0102030405060708h, generation 7, we are peer 2 of 3. */
static size_t build_peer_bytes(uint8_t *b)
{
	static const uint8_t list[32 + 3 * 40] = {
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* ARRAY ID */
		0x00, 0x00, 0x00, 0x07,			/* GENERATION */
		0x00, 0x02,				/* SELF PEER ID */
		0x00, 0x03,				/* PEER COUNT */
		0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, /* ARRAY KEY */
		0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
		/* peer 1: the controller, 10.0.0.1:7471 */
		0x00, 0x01, 0x02, 0x01, 0x1d, 0x2f, 0x00, 0x00,
		10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
		/* peer 2: this target, [fd00::2]:7471 */
		0x00, 0x02, 0x01, 0x02, 0x1d, 0x2f, 0x00, 0x00,
		0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
		2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
		/* peer 9: a host, 10.0.0.9:7472 */
		0x00, 0x09, 0x03, 0x01, 0x1d, 0x30, 0x00, 0x00,
		10, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 0x99,
	};

	memcpy(b, list, sizeof(list));
	return sizeof(list);
}

static void test_peer_list_layout(void)
{
	static const uint8_t v6[16] = { 0xfd, [15] = 2 };
	struct tpt_field_ptr where;
	uint8_t enc[32 + 3 * 40];
	size_t n = build_peer_bytes(buf);
	const struct tpt_peer *p;

	CHECK_EQ(tpt_peer_list_decode(buf, n, &peers, &where), TPT_SENSE_NONE);
	CHECK(peers.array_id == 0x0102030405060708ull);
	CHECK_EQ(peers.generation, 7);
	CHECK_EQ(peers.self_id, 2);
	CHECK_EQ(peers.count, 3);
	CHECK_EQ(peers.array_key[0], 0xa0);
	CHECK_EQ(peers.array_key[15], 0xaf);
	CHECK_EQ(peers.peer[0].role, TPT_ROLE_CONTROLLER);
	CHECK_EQ(peers.peer[0].ep.family, TPT_AF_IPV4);
	CHECK_EQ(peers.peer[0].ep.port, 7471);
	CHECK_EQ(peers.peer[0].ep.addr[3], 1);
	CHECK_EQ(peers.peer[1].ep.family, TPT_AF_IPV6);
	CHECK_MEM(peers.peer[1].ep.addr, v6, 16);
	CHECK_EQ(peers.peer[2].id, 9);
	CHECK_EQ(peers.peer[2].role, TPT_ROLE_HOST);
	CHECK_EQ(peers.peer[2].token[15], 0x99);

	p = tpt_peer_list_find(&peers, 9);
	CHECK(p == &peers.peer[2]);
	CHECK(tpt_peer_list_find(&peers, 1) == &peers.peer[0]);
	CHECK(tpt_peer_list_find(&peers, 3) == NULL);
	CHECK(tpt_peer_list_find(&peers, 0) == NULL);
	CHECK(tpt_peer_list_find(&peers, 0xffff) == NULL);

	CHECK_EQ(tpt_peer_list_encode(&peers, enc, sizeof(enc)), n);
	CHECK_MEM(enc, buf, n);
	CHECK_EQ(tpt_peer_list_encode(&peers, enc, n - 1), -ENOSPC);
}

static void peer_rejected(size_t at, uint8_t value,
			  enum tpt_sense_reason reason, int byte, int bit)
{
	struct tpt_field_ptr where;
	size_t n = build_peer_bytes(buf);

	buf[at] = value;
	CHECK_EQ(tpt_peer_list_decode(buf, n, &peers, &where), reason);
	check_where(&where, false, byte, bit);
}

static void test_peer_list_errors(void)
{
	struct tpt_field_ptr where;
	size_t n = build_peer_bytes(buf);

	CHECK_EQ(tpt_peer_list_decode(buf, 31, &peers, &where),
		 TPT_SENSE_PARAM_LIST_LENGTH);
	CHECK_EQ(tpt_peer_list_decode(buf, n - 1, &peers, &where),
		 TPT_SENSE_PARAM_LIST_LENGTH);
	CHECK_EQ(tpt_peer_list_decode(buf, n + 40, &peers, &where),
		 TPT_SENSE_PARAM_LIST_LENGTH);

	peer_rejected(15, 0, TPT_SENSE_INVALID_PARAM_FIELD, 14, NO_BIT);
	peer_rejected(14, 0x04, TPT_SENSE_INVALID_PARAM_FIELD, 14, NO_BIT);
	/* ARRAY ID and GENERATION 0 are never issued. */
	{
		uint8_t keep[32 + 3 * 40];

		build_peer_bytes(keep);
		memset(keep, 0, 8);
		CHECK_EQ(tpt_peer_list_decode(keep, n, &peers, &where),
			 TPT_SENSE_INVALID_PARAM_FIELD);
		check_where(&where, false, 0, NO_BIT);
		build_peer_bytes(keep);
		memset(&keep[8], 0, 4);
		CHECK_EQ(tpt_peer_list_decode(keep, n, &peers, &where),
			 TPT_SENSE_INVALID_PARAM_FIELD);
		check_where(&where, false, 8, NO_BIT);
		/* An all-zero ARRAY KEY binds nothing. */
		build_peer_bytes(keep);
		memset(&keep[16], 0, 16);
		CHECK_EQ(tpt_peer_list_decode(keep, n, &peers, &where),
			 TPT_SENSE_INVALID_PARAM_FIELD);
		check_where(&where, false, 16, NO_BIT);
	}
	/* SELF PEER ID must be listed, as a target. */
	peer_rejected(13, 0x05, TPT_SENSE_INVALID_PARAM_FIELD, 12, NO_BIT);
	peer_rejected(13, 0x09, TPT_SENSE_INVALID_PARAM_FIELD, 114, NO_BIT);
	/* Entries: ids ascending and not reserved. */
	peer_rejected(73, 0x01, TPT_SENSE_INVALID_PARAM_FIELD, 72, NO_BIT);
	/* ROLE 0 and 4 are not roles; one controller at most. */
	peer_rejected(34, 0x00, TPT_SENSE_INVALID_PARAM_FIELD, 34, NO_BIT);
	peer_rejected(34, 0x04, TPT_SENSE_INVALID_PARAM_FIELD, 34, NO_BIT);
	peer_rejected(114, 0x02, TPT_SENSE_INVALID_PARAM_FIELD, 114, NO_BIT);
	/* Endpoint. */
	peer_rejected(35, 0x03, TPT_SENSE_INVALID_PARAM_FIELD, 35, NO_BIT);
	peer_rejected(46, 0x01, TPT_SENSE_INVALID_PARAM_FIELD, 44, NO_BIT);
	{
		uint8_t keep[32 + 3 * 40];

		build_peer_bytes(keep);
		keep[112] = 0xff;		/* id fff0h: reserved */
		keep[113] = 0xf0;
		CHECK_EQ(tpt_peer_list_decode(keep, n, &peers, &where),
			 TPT_SENSE_INVALID_PARAM_FIELD);
		check_where(&where, false, 112, NO_BIT);

		build_peer_bytes(keep);
		keep[36] = keep[37] = 0;	/* port 0 */
		CHECK_EQ(tpt_peer_list_decode(keep, n, &peers, &where),
			 TPT_SENSE_INVALID_PARAM_FIELD);
		check_where(&where, false, 36, NO_BIT);
		build_peer_bytes(keep);
		keep[40] = 0;			/* 0.0.0.0 */
		keep[43] = 0;
		CHECK_EQ(tpt_peer_list_decode(keep, n, &peers, &where),
			 TPT_SENSE_INVALID_PARAM_FIELD);
		check_where(&where, false, 40, NO_BIT);
		build_peer_bytes(keep);
		memset(&keep[96], 0, 16);	/* all-zero token */
		CHECK_EQ(tpt_peer_list_decode(keep, n, &peers, &where),
			 TPT_SENSE_INVALID_PARAM_FIELD);
		check_where(&where, false, 96, NO_BIT);
	}
	/* Reserved bytes 6-7 of an entry. */
	peer_rejected(39, 0x20, TPT_SENSE_INVALID_PARAM_FIELD, 39, 5);
}

static void test_peer_list_encode_refuses(void)
{
	uint8_t enc[32 + 3 * 40];

	build_peer_bytes(buf);
	CHECK_EQ(tpt_peer_list_decode(buf, 152, &peers, NULL), TPT_SENSE_NONE);
	peers.peer[2].id = 1;
	CHECK_EQ(tpt_peer_list_encode(&peers, enc, sizeof(enc)), -EINVAL);
	peers.peer[2].id = 9;
	peers.self_id = 1;
	CHECK_EQ(tpt_peer_list_encode(&peers, enc, sizeof(enc)), -EINVAL);
	peers.self_id = 2;
	peers.count = TPT_PEER_MAX + 1;
	CHECK_EQ(tpt_peer_list_encode(&peers, enc, sizeof(enc)), -EINVAL);
}

static void test_host_key(void)
{
	static const uint8_t bytes[40] = {
		0x00, 0x00, 0x00,			/* id and role: reserved */
		0x01, 0x1d, 0x30, 0x00, 0x00,		/* IPv4, port 7472 */
		192, 168, 1, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
	};
	static const struct {
		size_t at;
		uint8_t value;
		int byte;
	} bad[] = {
		{ 0, 0x01, 0 }, { 2, 0x03, 2 }, { 7, 0x01, 7 },
		{ 3, 0x07, 3 },
	};
	struct tpt_field_ptr where;
	struct tpt_host_key key;
	uint8_t b[40], enc[40];
	size_t i;

	CHECK_EQ(tpt_host_key_decode(bytes, 40, &key, &where), TPT_SENSE_NONE);
	CHECK_EQ(key.ep.family, TPT_AF_IPV4);
	CHECK_EQ(key.ep.port, 7472);
	CHECK_EQ(key.ep.addr[0], 192);
	CHECK_EQ(key.key[15], 0xef);
	CHECK_EQ(tpt_host_key_encode(&key, enc, sizeof(enc)), 40);
	CHECK_MEM(enc, bytes, 40);
	CHECK_EQ(tpt_host_key_encode(&key, enc, 39), -ENOSPC);

	CHECK_EQ(tpt_host_key_decode(bytes, 39, &key, &where),
		 TPT_SENSE_PARAM_LIST_LENGTH);
	CHECK_EQ(tpt_host_key_decode(bytes, 41, &key, &where),
		 TPT_SENSE_PARAM_LIST_LENGTH);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		copy_with(b, bytes, 40, bad[i].at, bad[i].value);
		CHECK_EQ(tpt_host_key_decode(b, 40, &key, &where),
			 TPT_SENSE_INVALID_PARAM_FIELD);
		check_where(&where, false, bad[i].byte,
			    bad[i].at == 3 ? NO_BIT : top_bit_of(bad[i].value));
	}
	memcpy(b, bytes, 40);
	memset(&b[24], 0, 16);
	CHECK_EQ(tpt_host_key_decode(b, 40, &key, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 24, NO_BIT);
	memset(key.key, 0, sizeof(key.key));
	CHECK_EQ(tpt_host_key_encode(&key, enc, sizeof(enc)), -EINVAL);
}

/* ---------------------------------------------------------------------- */
/* TPT REPORT ENDPOINT, built from protocol.md 4.16 and 5.7 */

static void test_endpoint_report(void)
{
	static const uint8_t cdb[16] = {
		0xcd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x20, 0, 0,
	};
	static const uint8_t wire[TPT_ENDPOINT_REPORT_LEN] = {
		1, 0, 0, 1, 0x11, 0x30, 0, 0,
		127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		't', 'c', 'p', 0, 0, 0, 0, 0,
	};
	struct tpt_endpoint_report r, back;
	struct tpt_field_ptr where;
	struct tpt_cdb c;
	uint8_t out[TPT_ENDPOINT_REPORT_LEN], bad[TPT_ENDPOINT_REPORT_LEN];

	CHECK_EQ(tpt_cdb_decode(cdb, sizeof(cdb), &c, &where), TPT_SENSE_NONE);
	CHECK_EQ(c.opcode, TPT_OP_REPORT_ENDPOINT);
	CHECK_EQ(c.param_len, 32);
	CHECK_EQ(tpt_cdb_info(0xcd)->dir, TPT_DATA_IN);

	CHECK_EQ(tpt_endpoint_report_decode(wire, sizeof(wire), &r, &where),
		 TPT_SENSE_NONE);
	CHECK_EQ(r.ep.family, TPT_AF_IPV4);
	CHECK_EQ(r.ep.port, 0x1130);
	CHECK_EQ(r.ep.addr[0], 127);
	CHECK(!strcmp(r.provider, "tcp"));
	CHECK_EQ(tpt_endpoint_report_encode(&r, out, sizeof(out)),
		 TPT_ENDPOINT_REPORT_LEN);
	CHECK_MEM(out, wire, sizeof(wire));
	/* Allocation length: a short buffer gets what fits. */
	memset(out, 0xee, sizeof(out));
	CHECK_EQ(tpt_endpoint_report_encode(&r, out, 4), TPT_ENDPOINT_REPORT_LEN);
	CHECK_MEM(out, wire, 4);
	CHECK_EQ(out[4], 0xee);

	CHECK_EQ(tpt_endpoint_report_decode(wire, 31, &back, &where),
		 TPT_SENSE_PARAM_LIST_LENGTH);
	memcpy(bad, wire, sizeof(bad));
	bad[0] = 2;
	CHECK_EQ(tpt_endpoint_report_decode(bad, sizeof(bad), &back, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	CHECK_EQ(where.byte, 0);
	memcpy(bad, wire, sizeof(bad));
	bad[6] = 1;
	CHECK_EQ(tpt_endpoint_report_decode(bad, sizeof(bad), &back, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	CHECK_EQ(where.byte, 6);
	memcpy(bad, wire, sizeof(bad));
	bad[4] = bad[5] = 0;
	CHECK_EQ(tpt_endpoint_report_decode(bad, sizeof(bad), &back, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	CHECK_EQ(where.byte, 4);
	memcpy(bad, wire, sizeof(bad));
	bad[28] = 'x';
	CHECK_EQ(tpt_endpoint_report_decode(bad, sizeof(bad), &back, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	CHECK_EQ(where.byte, 27);
	memcpy(bad, wire, sizeof(bad));
	bad[24] = 0;
	CHECK_EQ(tpt_endpoint_report_decode(bad, sizeof(bad), &back, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	strcpy(r.provider, "has sp");
	CHECK_EQ(tpt_endpoint_report_encode(&r, out, sizeof(out)), -EINVAL);
}

int main(void)
{
	RUN(test_info);
	RUN(test_xdwrite10);
	RUN(test_prefetch16);
	RUN(test_vendor_io);
	RUN(test_release);
	RUN(test_setup);
	RUN(test_report_slots);
	RUN(test_degraded_cdbs);
	RUN(test_host_cdbs);
	RUN(test_cdb_opcode_and_length);
	RUN(test_cdb_reserved_bits);
	RUN(test_cdb_control);
	RUN(test_cdb_semantics);
	RUN(test_cdb_lba_overflow);
	RUN(test_cdb_param_len);
	RUN(test_cdb_report_slots_fields);
	RUN(test_cdb_encode_refuses);
	RUN(test_cdb_capacity);
	RUN(test_slot_table_layout);
	RUN(test_slot_table_errors);
	RUN(test_slot_table_encode_refuses);
	RUN(test_slot_header);
	RUN(test_slot_header_stale);
	RUN(test_peer_list_layout);
	RUN(test_peer_list_errors);
	RUN(test_peer_list_encode_refuses);
	RUN(test_host_key);
	RUN(test_endpoint_report);
	UNIT_EXIT();
}
