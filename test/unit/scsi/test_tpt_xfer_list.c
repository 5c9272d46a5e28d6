/*
 * Unit tests for the transfer list of scsi/tpt_cdb (docs/protocol.md 5.1,
 * 5.2, and the lists of READ MEDIUM, SEND RESULT and TPT HOST READ/WRITE
 * in 4.17-4.19, a PREP READ's skips, and weighted passes):
 * lists written out byte by byte from the tables, decoded and encoded
 * back, every rule of the validation table broken once, in the order the
 * table gives, with its field pointer.
 */
#include <errno.h>

#include "scsi/tpt_cdb.h"
#include "test/unit/unit.h"
#include "test/unit/scsi/field_ptr.h"

static struct tpt_xfer_list xfer;
static uint8_t buf[TPT_XFER_LIST_LEN(TPT_XFER_DESC_MAX) + 8192];

/*
 * Two descriptors: 4 KiB from peer 3's region and 4 KiB inline from the
 * controller, then the 4 KiB of inline data; the result goes to slot 5.
 */
static size_t build_xfer_bytes(uint8_t *b)
{
	static const uint8_t list[16 + 2 * 24] = {
		/* header */
		0x00, 0x02,				/* DESCRIPTOR COUNT */
		0x00, 0x05,				/* RESULT SLOT */
		0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0x20, 0x00,		/* TOTAL LENGTH */
		/* descriptor 0 */
		0x00, 0x03,				/* PASSIVE PEER ID */
		0x01,					/* FLAGS: VIRT_ADDR */
		0x00,
		0x00, 0x00, 0x10, 0x00,			/* LENGTH */
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, /* STAG */
		0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, /* OFFSET */
		/* descriptor 1: inline */
		0xff, 0xff,
		0x00,
		0x00,
		0x00, 0x00, 0x10, 0x00,
		0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
	};

	memcpy(b, list, sizeof(list));
	memset(b + sizeof(list), 0x5a, 4096);
	return sizeof(list) + 4096;
}

static void test_xfer_list_layout(void)
{
	struct tpt_field_ptr where;
	uint8_t enc[64];
	size_t n = build_xfer_bytes(buf);

	CHECK_EQ(tpt_xfer_list_decode(buf, n, &xfer, &where), TPT_SENSE_NONE);
	CHECK_EQ(xfer.count, 2);
	CHECK_EQ(xfer.result_slot, 5);
	CHECK_EQ(xfer.total_length, 8192);
	CHECK_EQ(xfer.desc[0].peer, 3);
	CHECK_EQ(xfer.desc[0].flags, TPT_XFER_VIRT_ADDR);
	CHECK_EQ(xfer.desc[0].length, 4096);
	CHECK(xfer.desc[0].stag == 0x1122334455667788ull);
	CHECK_EQ(xfer.desc[0].offset, 0x7f0000001000ll);
	CHECK_EQ(xfer.desc[1].peer, TPT_PEER_ID_CONTROLLER);
	CHECK_EQ(xfer.desc[1].offset, 0);
	CHECK_EQ(tpt_xfer_list_inline_len(&xfer), 4096);

	CHECK_EQ(tpt_xfer_list_encode(&xfer, enc, sizeof(enc)), 64);
	CHECK_MEM(enc, buf, 64);
	CHECK_EQ(tpt_xfer_list_encode(&xfer, enc, 63), -ENOSPC);
}

static void xfer_rejected(size_t n, enum tpt_sense_reason reason, int byte,
			  int bit)
{
	struct tpt_field_ptr where;

	CHECK_EQ(tpt_xfer_list_decode(buf, n, &xfer, &where), reason);
	check_where(&where, false, byte, bit);
}

static void test_xfer_list_lengths(void)
{
	size_t n = build_xfer_bytes(buf);

	xfer_rejected(15, TPT_SENSE_PARAM_LIST_LENGTH, NO_PTR, NO_BIT);
	xfer_rejected(16 + 24, TPT_SENSE_PARAM_LIST_LENGTH, NO_PTR, NO_BIT);
	xfer_rejected(n - 1, TPT_SENSE_PARAM_LIST_LENGTH, NO_PTR, NO_BIT);
	xfer_rejected(n + 1, TPT_SENSE_PARAM_LIST_LENGTH, NO_PTR, NO_BIT);
	buf[0] = 0x01;			/* DESCRIPTOR COUNT 257 */
	buf[1] = 0x01;
	xfer_rejected(n, TPT_SENSE_INVALID_PARAM_FIELD, 0, NO_BIT);
	/* A count of 0 is a header-only list: nothing may follow it. */
	buf[0] = 0x00;
	buf[1] = 0x00;
	xfer_rejected(n, TPT_SENSE_PARAM_LIST_LENGTH, NO_PTR, NO_BIT);
	xfer_rejected(17, TPT_SENSE_PARAM_LIST_LENGTH, NO_PTR, NO_BIT);
	CHECK_EQ(tpt_xfer_list_decode(buf, 16, &xfer, NULL), TPT_SENSE_NONE);
}

static void test_xfer_list_result_slot(void)
{
	static const struct {
		uint8_t slot[2];
		bool ok;
	} cases[] = {
		{ { 0x00, 0x00 }, true },
		{ { 0x03, 0xff }, true },	/* the last of 1024 */
		{ { 0x04, 0x00 }, false },
		{ { 0xff, 0xfe }, false },
		{ { 0xff, 0xff }, true },	/* TPT_SLOT_NONE */
	};
	struct tpt_xfer_list *l = &xfer;
	uint8_t enc[64];
	size_t i, n;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = build_xfer_bytes(buf);
		memcpy(&buf[2], cases[i].slot, 2);
		if (cases[i].ok) {
			CHECK_EQ(tpt_xfer_list_decode(buf, n, l, NULL),
				 TPT_SENSE_NONE);
			CHECK_EQ(l->result_slot,
				 cases[i].slot[0] << 8 | cases[i].slot[1]);
			CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)),
				 64);
			CHECK_MEM(enc, buf, 64);
		} else {
			xfer_rejected(n, TPT_SENSE_INVALID_PARAM_FIELD, 2,
				      NO_BIT);
		}
	}
	/* RESULT SLOT is judged before the list length. */
	build_xfer_bytes(buf);
	buf[2] = 0x04;
	xfer_rejected(16, TPT_SENSE_INVALID_PARAM_FIELD, 2, NO_BIT);
	/* Bytes 5-7 stay reserved (4 is OPERAND GF EXPONENT). */
	n = build_xfer_bytes(buf);
	buf[7] = 0x01;
	xfer_rejected(n, TPT_SENSE_INVALID_PARAM_FIELD, 7, 0);

	build_xfer_bytes(buf);
	CHECK_EQ(tpt_xfer_list_decode(buf, 64 + 4096, l, NULL),
		 TPT_SENSE_NONE);
	l->result_slot = TPT_SLOT_MAX;
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), -EINVAL);
}

static void test_xfer_list_fields(void)
{
	static const struct {
		size_t at;
		uint8_t value;
		int byte, bit;
	} cases[] = {
		{ 5, 0x02, 5, 1 },		/* header reserved */
		{ 4, 0xff, 4, NO_BIT },		/* OPERAND GF EXPONENT FFh */
		{ 15, 0x01, 8, NO_BIT },	/* TOTAL LENGTH != sum */
		{ 19, 0xff, 19, NO_BIT },	/* GF EXPONENT FFh */
		{ 18, 0x05, 18, 2 },		/* FLAGS reserved bit */
		{ 22, 0x00, 20, NO_BIT },	/* LENGTH 0 */
		{ 48, 0x01, 48, NO_BIT },	/* inline with an STag */
		{ 42, 0x01, 42, 0 },		/* inline with VIRT_ADDR */
		{ 63, 0x01, 56, NO_BIT },	/* inline not back to back */
	};
	size_t i, n;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = build_xfer_bytes(buf);
		buf[cases[i].at] = cases[i].value;
		xfer_rejected(n, TPT_SENSE_INVALID_PARAM_FIELD, cases[i].byte,
			      cases[i].bit);
	}
	/* PEER IDs fff0h-fffch are reserved; fffdh (a skip) has no
	 * memory, so no FLAGS (here VIRT ADDR). */
	n = build_xfer_bytes(buf);
	buf[16] = 0xff;
	buf[17] = 0xf0;
	xfer_rejected(n, TPT_SENSE_INVALID_PARAM_FIELD, 16, NO_BIT);
	buf[17] = 0xfc;
	xfer_rejected(n, TPT_SENSE_INVALID_PARAM_FIELD, 16, NO_BIT);
	buf[17] = 0xfd;
	xfer_rejected(n, TPT_SENSE_INVALID_PARAM_FIELD, 18, 0);
	buf[17] = 0xef;
	CHECK_EQ(tpt_xfer_list_decode(buf, n, &xfer, NULL), TPT_SENSE_NONE);
	/* OFFSET + LENGTH must not pass the end of the address space. */
	n = build_xfer_bytes(buf);
	memset(&buf[32], 0xff, 8);
	xfer_rejected(n, TPT_SENSE_INVALID_PARAM_FIELD, 32, NO_BIT);
	buf[22] = 0x00;			/* LENGTH 1: the very last byte */
	buf[23] = 0x01;
	buf[15] = 0x01;			/* TOTAL LENGTH 4097 */
	buf[14] = 0x10;
	CHECK_EQ(tpt_xfer_list_decode(buf, n, &xfer, NULL), TPT_SENSE_NONE);
}

static void test_xfer_list_encode_refuses(void)
{
	struct tpt_xfer_list *l = &xfer;
	uint8_t enc[64];

	build_xfer_bytes(buf);
	CHECK_EQ(tpt_xfer_list_decode(buf, 64 + 4096, l, NULL),
		 TPT_SENSE_NONE);
	l->total_length++;
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), -EINVAL);
	l->total_length--;
	l->desc[0].peer = 0xfffc;
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), -EINVAL);
	l->desc[0].peer = 3;
	/* No descriptors: the header alone, TOTAL LENGTH not a sum. */
	l->count = 0;
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), 16);
	CHECK_EQ(enc[1], 0);
	CHECK_EQ(enc[14], 0x20);
	CHECK_EQ(tpt_xfer_list_encode(l, enc, 15), -ENOSPC);
	l->count = TPT_XFER_DESC_MAX + 1;
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), -EINVAL);
}

static void test_xfer_list_against_cdb(void)
{
	struct tpt_cdb cdb = { .opcode = TPT_OP_PREP_WRITE, .lba = 8,
			       .transfer_length = 2, .group = 1 };
	struct tpt_field_ptr where;

	build_xfer_bytes(buf);
	CHECK_EQ(tpt_xfer_list_decode(buf, 64 + 4096, &xfer, NULL),
		 TPT_SENSE_NONE);
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 4096, &where),
		 TPT_SENSE_NONE);
	CHECK(!where.valid);
	/* Descriptors must cover exactly the blocks the CDB names. */
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 8, NO_BIT);
	cdb.transfer_length = 3;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 4096, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 8, NO_BIT);
	cdb.transfer_length = 16;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, NULL), TPT_SENSE_NONE);

	/* A READ PARITY source is a target buffer, never inline data. */
	cdb = (struct tpt_cdb){ .opcode = TPT_OP_READ_PARITY_PART_TMP,
				.transfer_length = 2 };
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 4096, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 40, NO_BIT);
	cdb.opcode = TPT_OP_PREP_READ;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 4096, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	cdb.opcode = TPT_OP_XDWRITE_10;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 4096, NULL), TPT_SENSE_NONE);

	/* A command without a transfer list cannot have one checked. */
	cdb.opcode = TPT_OP_WRITE_NEW_DATA;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 4096, &where),
		 TPT_SENSE_INVALID_CDB_FIELD);
	check_where(&where, true, 0, NO_BIT);
}

/*
 * Peer 3's 512 bytes, then 3584 bytes from slot 7 of peer 4 (a SLOT
 * descriptor: OFFSET names the slot's header); the result stays private.
 */
static const uint8_t slot_list[16 + 2 * 24] = {
	0x00, 0x02,				/* DESCRIPTOR COUNT */
	0xff, 0xff,				/* RESULT SLOT: none */
	0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0x10, 0x00,		/* TOTAL LENGTH */
	/* descriptor 0 */
	0x00, 0x03, 0x00, 0x00,
	0x00, 0x00, 0x02, 0x00,			/* LENGTH 512 */
	0, 0, 0, 0, 0, 0, 0, 0x09,		/* STAG */
	0, 0, 0, 0, 0, 0, 0x40, 0x00,		/* OFFSET */
	/* descriptor 1: slot 7 of peer 4 */
	0x00, 0x04,
	0x03,					/* FLAGS: SLOT VIRT_ADDR */
	0x00,
	0x00, 0x00, 0x0e, 0x00,			/* LENGTH 3584 */
	0, 0, 0, 0, 0, 0, 0x12, 0x34,		/* STAG */
	0, 0, 0x7f, 0, 0, 0x07, 0x00, 0x00,	/* OFFSET: header */
};

static void test_xfer_list_slot_desc(void)
{
	struct tpt_field_ptr where;
	struct tpt_xfer_list *l = &xfer;
	uint8_t enc[64];

	memcpy(buf, slot_list, sizeof(slot_list));
	CHECK_EQ(tpt_xfer_list_decode(buf, 64, l, &where), TPT_SENSE_NONE);
	CHECK_EQ(l->result_slot, TPT_SLOT_NONE);
	CHECK_EQ(l->desc[1].flags, TPT_XFER_SLOT | TPT_XFER_VIRT_ADDR);
	CHECK_EQ(l->desc[1].length, 3584);
	CHECK(l->desc[1].offset == 0x7f0000070000ull);
	CHECK_EQ(tpt_xfer_list_inline_len(l), 0);
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), 64);
	CHECK_MEM(enc, slot_list, 64);

	/* SLOT alone, without VIRT_ADDR, is as good. */
	buf[42] = TPT_XFER_SLOT;
	CHECK_EQ(tpt_xfer_list_decode(buf, 64, l, NULL), TPT_SENSE_NONE);
	/* Bits 7-2 stay reserved. */
	buf[42] = 0x06;
	xfer_rejected(64, TPT_SENSE_INVALID_PARAM_FIELD, 42, 2);

	/* The controller's inline data is not a slot. */
	memcpy(buf, slot_list, sizeof(slot_list));
	buf[40] = buf[41] = 0xff;
	memset(&buf[48], 0, 16);
	buf[42] = TPT_XFER_SLOT;
	xfer_rejected(64 + 3584, TPT_SENSE_INVALID_PARAM_FIELD, 42, 1);

	/* Header and payload must both lie below 2^64. */
	memcpy(buf, slot_list, sizeof(slot_list));
	memset(&buf[56], 0xff, 8);		/* 2^64 - 64 - 3584: fits */
	buf[62] = 0xf1;
	buf[63] = 0xc0;
	CHECK_EQ(tpt_xfer_list_decode(buf, 64, l, NULL), TPT_SENSE_NONE);
	buf[63] = 0xc1;
	xfer_rejected(64, TPT_SENSE_INVALID_PARAM_FIELD, 56, NO_BIT);
	/* Without SLOT there is no header to fit in. */
	buf[42] = TPT_XFER_VIRT_ADDR;
	CHECK_EQ(tpt_xfer_list_decode(buf, 64, l, NULL), TPT_SENSE_NONE);
}

static void test_xfer_list_slots_against_cdb(void)
{
	struct tpt_cdb cdb = { .opcode = TPT_OP_READ_PARITY_COMP_TMP,
			       .lba = 64, .transfer_length = 8, .group = 2 };
	struct tpt_field_ptr where;
	struct tpt_xfer_list *l = &xfer;

	memcpy(buf, slot_list, sizeof(slot_list));
	CHECK_EQ(tpt_xfer_list_decode(buf, 64, l, NULL), TPT_SENSE_NONE);
	/* The slot's piece starts at the second 512-byte block. */
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 512, &where), TPT_SENSE_NONE);
	CHECK(!where.valid);
	/* With 4 KiB blocks it would start inside the first one. */
	cdb.transfer_length = 1;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 42, 1);

	/* PREP READ writes to its passive sides: no slots there. */
	cdb = (struct tpt_cdb){ .opcode = TPT_OP_PREP_READ,
				.transfer_length = 8 };
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 512, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 42, 1);
	/* Nor a result to export. */
	l->desc[1].flags = TPT_XFER_VIRT_ADDR;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 512, NULL), TPT_SENSE_NONE);
	l->result_slot = 0;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 512, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 2, NO_BIT);
	/* Every command that reads its passive sides may export one. */
	cdb.opcode = TPT_OP_READ_PARITY_COMP_BLOCK;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 512, NULL), TPT_SENSE_NONE);
}

/* ---------------------------------------------------------------------- */
/* READ MEDIUM: the header alone (4.17) */

/* 128 KiB of the medium as the result, into the slots from slot 3. */
static const uint8_t header_only[16] = {
	0x00, 0x00,				/* DESCRIPTOR COUNT: 0 */
	0x00, 0x03,				/* RESULT SLOT */
	0, 0, 0, 0,
	0, 0, 0, 0, 0, 0x02, 0x00, 0x00,	/* TOTAL LENGTH: 128 KiB */
};

static void check_rejected(const struct tpt_cdb *cdb, uint32_t block_size,
			   int byte, int bit)
{
	struct tpt_field_ptr where;

	CHECK_EQ(tpt_xfer_list_check(&xfer, cdb, block_size, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, byte, bit);
}

static void test_read_medium_list(void)
{
	struct tpt_cdb cdb = { .opcode = TPT_OP_READ_MEDIUM, .lba = 512,
			       .transfer_length = 256, .group = 7 };
	struct tpt_field_ptr where;
	uint8_t enc[16];

	memcpy(buf, header_only, sizeof(header_only));
	CHECK_EQ(tpt_xfer_list_decode(buf, 16, &xfer, &where), TPT_SENSE_NONE);
	CHECK(!where.valid);
	CHECK_EQ(xfer.count, 0);
	CHECK_EQ(xfer.result_slot, 3);
	CHECK_EQ(xfer.total_length, 131072);
	CHECK_EQ(tpt_xfer_list_inline_len(&xfer), 0);
	CHECK_EQ(tpt_xfer_list_encode(&xfer, enc, sizeof(enc)), 16);
	CHECK_MEM(enc, header_only, 16);

	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, &where),
		 TPT_SENSE_NONE);
	CHECK(!where.valid);
	/* TOTAL LENGTH = TRANSFER LENGTH x block size, nothing else. */
	cdb.transfer_length = 32;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 4096, NULL), TPT_SENSE_NONE);
	cdb.transfer_length = 255;
	check_rejected(&cdb, 512, 8, NO_BIT);
	cdb.transfer_length = 256;

	/* The header's own rules hold as for any list. */
	buf[3] = 0x00;
	buf[2] = 0x04;				/* RESULT SLOT 0400h */
	xfer_rejected(16, TPT_SENSE_INVALID_PARAM_FIELD, 2, NO_BIT);
	buf[2] = buf[3] = 0xff;			/* private */
	CHECK_EQ(tpt_xfer_list_decode(buf, 16, &xfer, NULL), TPT_SENSE_NONE);
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, NULL), TPT_SENSE_NONE);
	buf[7] = 0x20;
	xfer_rejected(16, TPT_SENSE_INVALID_PARAM_FIELD, 7, 5);
	xfer_rejected(15, TPT_SENSE_PARAM_LIST_LENGTH, NO_PTR, NO_BIT);

	/* Descriptors are refused at DESCRIPTOR COUNT before anything the
	 * CDB could find wrong with them (TOTAL LENGTH, inline data). */
	build_xfer_bytes(buf);
	CHECK_EQ(tpt_xfer_list_decode(buf, 64 + 4096, &xfer, NULL),
		 TPT_SENSE_NONE);
	check_rejected(&cdb, 512, 0, NO_BIT);
	memcpy(buf, slot_list, sizeof(slot_list));
	CHECK_EQ(tpt_xfer_list_decode(buf, 64, &xfer, NULL), TPT_SENSE_NONE);
	cdb.transfer_length = 8;
	check_rejected(&cdb, 512, 0, NO_BIT);
}

/* Every other command with a transfer list needs 1-256 descriptors. */
static void test_header_only_elsewhere(void)
{
	unsigned int op, seen = 0;

	memcpy(buf, header_only, sizeof(header_only));
	CHECK_EQ(tpt_xfer_list_decode(buf, 16, &xfer, NULL), TPT_SENSE_NONE);
	/* Even with TOTAL LENGTH wrong too, the count is what is reported. */
	xfer.total_length = 1;
	for (op = 0; op < 256; op++) {
		const struct tpt_cdb_info *info = tpt_cdb_info((uint8_t)op);
		struct tpt_cdb cdb = { .opcode = (uint8_t)op,
				       .transfer_length = 256 };

		if (!info || info->param != TPT_PARAM_XFER_LIST ||
		    op == TPT_OP_READ_MEDIUM)
			continue;
		check_rejected(&cdb, 512, 0, NO_BIT);
		seen++;
	}
	/* XDWRITE(10) and (16), PREP READ/WRITE, READ NEW BLOCK, the four
	 * READ PARITY commands, SEND RESULT and TPT HOST READ/WRITE. */
	CHECK_EQ(seen, 12);
}

/* ---------------------------------------------------------------------- */
/* SEND RESULT: descriptors it RMA-writes to, as PREP READ's (4.18) */

static void test_send_result_list(void)
{
	struct tpt_cdb cdb = { .opcode = TPT_OP_SEND_RESULT, .lba = 64,
			       .transfer_length = 8, .group = 2 };

	/* Two plain descriptors: peer 3's 512 bytes, then peer 4's. */
	memcpy(buf, slot_list, sizeof(slot_list));
	buf[42] = TPT_XFER_VIRT_ADDR;
	CHECK_EQ(tpt_xfer_list_decode(buf, 64, &xfer, NULL), TPT_SENSE_NONE);
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, NULL), TPT_SENSE_NONE);
	/* It keeps no result, so it names no slot to put one in... */
	xfer.result_slot = 0;
	check_rejected(&cdb, 512, 2, NO_BIT);
	/* ...nor reads one: a slot is not a place to write to. */
	memcpy(buf, slot_list, sizeof(slot_list));
	CHECK_EQ(tpt_xfer_list_decode(buf, 64, &xfer, NULL), TPT_SENSE_NONE);
	check_rejected(&cdb, 512, 16 + 24 + 2, 1);
	/* The controller's inline data is a source, never a destination. */
	build_xfer_bytes(buf);
	CHECK_EQ(tpt_xfer_list_decode(buf, 64 + 4096, &xfer, NULL),
		 TPT_SENSE_NONE);
	xfer.result_slot = TPT_SLOT_NONE;
	cdb.transfer_length = 16;
	check_rejected(&cdb, 512, 16 + 24, NO_BIT);
	/* And, as everywhere but READ MEDIUM, at least one descriptor. */
	memcpy(buf, header_only, sizeof(header_only));
	buf[2] = buf[3] = 0xff;
	CHECK_EQ(tpt_xfer_list_decode(buf, 16, &xfer, NULL), TPT_SENSE_NONE);
	check_rejected(&cdb, 512, 0, NO_BIT);
}

/* TPT HOST READ/WRITE name the host's own buffer, in pieces (4.19). */
/*
 * PASSIVE PEER ID FFFDh: LENGTH bytes of the range that are not moved.
 * No memory (FLAGS, STAG and OFFSET zero); only in PREP READ and PREP
 * WRITE (whole blocks there), and only between descriptors that move
 * data.
 */
static void test_skip_list(void)
{
	struct tpt_cdb cdb = { .opcode = TPT_OP_PREP_READ, .lba = 64,
			       .transfer_length = 3, .group = 9 };
	struct tpt_field_ptr where;
	struct tpt_xfer_list *l = &xfer;
	uint8_t enc[16 + 3 * 24];
	unsigned int i;

	memset(l, 0, sizeof(*l));
	l->count = 3;
	l->result_slot = TPT_SLOT_NONE;
	l->total_length = 3 * 4096;
	for (i = 0; i < 3; i++) {
		l->desc[i].peer = 7;
		l->desc[i].length = 4096;
		l->desc[i].stag = 0x1234;
		l->desc[i].offset = 0x10000 * (i + 1);
	}
	l->desc[1] = (struct tpt_xfer_desc){ .peer = TPT_PEER_ID_NONE,
					     .length = 4096 };
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), 16 + 3 * 24);
	CHECK_EQ(enc[40], 0xff);
	CHECK_EQ(enc[41], 0xfd);
	CHECK_EQ(tpt_xfer_list_decode(enc, sizeof(enc), l, &where),
		 TPT_SENSE_NONE);
	CHECK_EQ(l->desc[1].peer, TPT_PEER_ID_NONE);
	CHECK_EQ(tpt_xfer_list_inline_len(l), 0);
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, &where), TPT_SENSE_NONE);
	CHECK(!where.valid);

	/* No memory: FLAGS, STAG, OFFSET zero (decoder). */
	enc[42] = TPT_XFER_VIRT_ADDR;
	CHECK_EQ(tpt_xfer_list_decode(enc, sizeof(enc), l, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 42, 0);
	enc[42] = 0;
	enc[55] = 1;
	CHECK_EQ(tpt_xfer_list_decode(enc, sizeof(enc), l, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 48, NO_BIT);
	enc[55] = 0;
	enc[63] = 1;
	CHECK_EQ(tpt_xfer_list_decode(enc, sizeof(enc), l, &where),
		 TPT_SENSE_INVALID_PARAM_FIELD);
	check_where(&where, false, 56, NO_BIT);
	enc[63] = 0;
	CHECK_EQ(tpt_xfer_list_decode(enc, sizeof(enc), l, NULL),
		 TPT_SENSE_NONE);

	/* PREP WRITE too, in whole blocks: its runs between skips are
	 * buffers of their own (4.5).  A skip starting or ending inside a
	 * block: its LENGTH. */
	cdb.opcode = TPT_OP_PREP_WRITE;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, &where), TPT_SENSE_NONE);
	l->desc[1].length = 2048;
	l->desc[2].length = 6144;
	check_rejected(&cdb, 4096, 44, NO_BIT);
	l->desc[0].length = 2048;
	l->desc[1].length = 4096;
	l->desc[2].length = 6144;
	check_rejected(&cdb, 4096, 44, NO_BIT);
	CHECK_EQ(tpt_xfer_list_check(l, &(struct tpt_cdb){
			.opcode = TPT_OP_PREP_READ, .lba = 64,
			.transfer_length = 3, .group = 9 }, 4096, &where),
		 TPT_SENSE_NONE);
	l->desc[0].length = 4096;
	l->desc[2].length = 4096;

	/* Any other command: the PEER ID of the skip. */
	cdb.opcode = TPT_OP_SEND_RESULT;
	check_rejected(&cdb, 4096, 40, NO_BIT);
	cdb.opcode = TPT_OP_READ_PARITY_PART_TMP;
	check_rejected(&cdb, 4096, 40, NO_BIT);
	cdb.opcode = TPT_OP_PREP_READ;

	/* First or last: a skip must lie between moved bytes. */
	l->desc[0] = l->desc[1];
	check_rejected(&cdb, 4096, 16, NO_BIT);
	l->desc[0] = l->desc[2];
	l->desc[2] = l->desc[1];
	check_rejected(&cdb, 4096, 64, NO_BIT);
}

/*
 * Passes (protocol.md 5.1): a READ PARITY command's list may cover its
 * range 1-31 times, each descriptor within one pass; any other command's
 * covers it once.  Refused at TOTAL LENGTH (byte 8), or at the LENGTH of
 * the descriptor that crosses a pass boundary.
 */
static void test_passes_list(void)
{
	static const uint8_t parity_ops[] = {
		TPT_OP_READ_PARITY_PART_TMP, TPT_OP_READ_PARITY_PART_BLOCK,
		TPT_OP_READ_PARITY_COMP_TMP, TPT_OP_READ_PARITY_COMP_BLOCK,
	};
	struct tpt_cdb cdb = { .lba = 64, .transfer_length = 2, .group = 9 };
	struct tpt_xfer_list *l = &xfer;
	unsigned int i, o;

	for (o = 0; o < sizeof(parity_ops); o++) {
		cdb.opcode = parity_ops[o];
		memset(l, 0, sizeof(*l));
		l->result_slot = TPT_SLOT_NONE;
		/* Four sources of two blocks each, the second in two pieces. */
		l->count = 5;
		for (i = 0; i < l->count; i++) {
			l->desc[i].peer = (uint16_t)i;
			l->desc[i].length = 2 * 4096;
			l->desc[i].flags = TPT_XFER_SLOT;
		}
		l->desc[1].length = 4096;
		l->desc[2].length = 4096;
		l->desc[2].flags = 0;	/* a slot holds whole pieces */
		l->total_length = 4 * 2 * 4096;
		CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, NULL),
			 TPT_SENSE_NONE);
		CHECK_EQ(tpt_xfer_list_passes(l, &cdb, 4096), 4);
		l->count = 1;
		l->total_length = 2 * 4096;
		CHECK_EQ(tpt_xfer_list_passes(l, &cdb, 4096), 1);

		/* Not whole passes. */
		l->count = 5;
		l->desc[4].length = 4096;
		l->total_length = 7 * 4096;
		check_rejected(&cdb, 4096, 8, NO_BIT);
		/* Across a boundary: 1 block, then 2 from the middle of
		 * pass 0 into pass 1. */
		l->count = 3;
		l->desc[0].length = 4096;
		l->desc[1].length = 2 * 4096;
		l->desc[1].flags = 0;
		l->desc[2].length = 4096;
		l->total_length = 4 * 4096;
		check_rejected(&cdb, 4096, 16 + 24 + 4, NO_BIT);
		/* 31 passes, not 32. */
		l->count = 31;
		for (i = 0; i < 32; i++)
			l->desc[i] = (struct tpt_xfer_desc){ .peer = 1,
				.length = 2 * 4096, .flags = TPT_XFER_SLOT };
		l->total_length = 31 * 2 * 4096;
		CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, NULL),
			 TPT_SENSE_NONE);
		CHECK_EQ(tpt_xfer_list_passes(l, &cdb, 4096), 31);
		l->count = 32;
		l->total_length = 32 * 2 * 4096;
		check_rejected(&cdb, 4096, 8, NO_BIT);
	}

	/* Every other transfer-list command covers its range once. */
	l->count = 2;
	for (i = 0; i < 2; i++)
		l->desc[i] = (struct tpt_xfer_desc){ .peer = 1,
						     .length = 2 * 4096 };
	l->total_length = 2 * 2 * 4096;
	cdb.opcode = TPT_OP_PREP_WRITE;
	check_rejected(&cdb, 4096, 8, NO_BIT);
	cdb.opcode = TPT_OP_XDWRITE_16;
	cdb.flags = TPT_CDB_DISABLE_WRITE;
	check_rejected(&cdb, 4096, 8, NO_BIT);
	cdb.flags = 0;
	cdb.opcode = TPT_OP_SEND_RESULT;
	check_rejected(&cdb, 4096, 8, NO_BIT);
	cdb.opcode = TPT_OP_PREP_READ;
	check_rejected(&cdb, 4096, 8, NO_BIT);
}

/*
 * GF EXPONENT (byte 3): decoded and encoded back as it is; a READ PARITY
 * pass is weighted as a whole, and no other command has weights.
 */
static void test_weighted_passes_list(void)
{
	struct tpt_cdb cdb = { .opcode = TPT_OP_READ_PARITY_COMP_BLOCK,
			       .lba = 64, .transfer_length = 2, .group = 9 };
	struct tpt_xfer_list *l = &xfer;
	uint8_t enc[TPT_XFER_LIST_LEN(4)];
	size_t n;
	unsigned int i;

	n = build_xfer_bytes(buf);
	buf[16 + 3] = 0xfe;
	CHECK_EQ(tpt_xfer_list_decode(buf, n, l, NULL), TPT_SENSE_NONE);
	CHECK_EQ(l->desc[0].gf_exp, 0xfe);
	CHECK_EQ(l->desc[1].gf_exp, 0);
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), 64);
	CHECK_MEM(enc, buf, 64);
	l->desc[0].gf_exp = 0xff;
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), -EINVAL);

	/* Three passes of two blocks: 0 plain, 1 in two pieces weighted
	 * 2^7, 2 weighted 2^200. */
	memset(l, 0, sizeof(*l));
	l->result_slot = TPT_SLOT_NONE;
	l->count = 4;
	for (i = 0; i < l->count; i++)
		l->desc[i] = (struct tpt_xfer_desc){ .peer = (uint16_t)i,
						     .length = 4096 };
	l->desc[0].length = l->desc[3].length = 2 * 4096;
	l->desc[1].gf_exp = l->desc[2].gf_exp = 7;
	l->desc[3].gf_exp = 200;
	l->total_length = 3 * 2 * 4096;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, NULL), TPT_SENSE_NONE);
	CHECK_EQ(tpt_xfer_list_pass_gf_exp(l, 2 * 4096, 0), 0);
	CHECK_EQ(tpt_xfer_list_pass_gf_exp(l, 2 * 4096, 1), 7);
	CHECK_EQ(tpt_xfer_list_pass_gf_exp(l, 2 * 4096, 2), 200);
	/* One pass's pieces disagree: the second piece is named. */
	l->desc[2].gf_exp = 8;
	check_rejected(&cdb, 4096, 16 + 2 * 24 + 3, NO_BIT);
	l->desc[2].gf_exp = 0;
	check_rejected(&cdb, 4096, 16 + 2 * 24 + 3, NO_BIT);
	l->desc[2].gf_exp = 7;
	/* A single pass may be weighted (a RAID-6 Q's read-modify-write). */
	l->count = 1;
	l->total_length = 2 * 4096;
	l->desc[0].gf_exp = 9;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, NULL), TPT_SENSE_NONE);
	/* Nothing else XORs passes. */
	cdb.opcode = TPT_OP_PREP_WRITE;
	check_rejected(&cdb, 4096, 16 + 3, NO_BIT);
	cdb.opcode = TPT_OP_SEND_RESULT;
	check_rejected(&cdb, 4096, 16 + 3, NO_BIT);
	l->desc[0].gf_exp = 0;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, NULL), TPT_SENSE_NONE);

	/* OPERAND GF EXPONENT (header byte 4) weights a local operand:
	 * PART's XOR MEDIUM and XOR GROUP, COMP TMP's result. */
	n = build_xfer_bytes(buf);
	buf[4] = 0x21;
	CHECK_EQ(tpt_xfer_list_decode(buf, n, l, NULL), TPT_SENSE_NONE);
	CHECK_EQ(l->operand_gf_exp, 0x21);
	CHECK_EQ(tpt_xfer_list_encode(l, enc, sizeof(enc)), 64);
	CHECK_MEM(enc, buf, 64);
	memset(l, 0, sizeof(*l));
	l->result_slot = TPT_SLOT_NONE;
	l->count = 1;
	l->desc[0] = (struct tpt_xfer_desc){ .peer = 1, .length = 2 * 4096 };
	l->total_length = 2 * 4096;
	l->operand_gf_exp = 3;
	cdb.opcode = TPT_OP_READ_PARITY_PART_TMP;
	cdb.parity_mode = TPT_PARITY_XOR_MEDIUM;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, NULL), TPT_SENSE_NONE);
	cdb.parity_mode = TPT_PARITY_XOR_GROUP;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, NULL), TPT_SENSE_NONE);
	cdb.opcode = TPT_OP_READ_PARITY_COMP_TMP;
	CHECK_EQ(tpt_xfer_list_check(l, &cdb, 4096, NULL), TPT_SENSE_NONE);
	/* No operand to weight: COPY, COMP BLOCK, anything else. */
	cdb.opcode = TPT_OP_READ_PARITY_PART_BLOCK;
	cdb.parity_mode = TPT_PARITY_COPY;
	check_rejected(&cdb, 4096, 4, NO_BIT);
	cdb.parity_mode = 0;
	cdb.opcode = TPT_OP_READ_PARITY_COMP_BLOCK;
	check_rejected(&cdb, 4096, 4, NO_BIT);
	cdb.opcode = TPT_OP_PREP_WRITE;
	check_rejected(&cdb, 4096, 4, NO_BIT);
}

static void test_host_list(void)
{
	static const uint8_t host_list[16 + 24] = {
		0x00, 0x01,				/* DESCRIPTOR COUNT */
		0xff, 0xff,				/* RESULT SLOT: none */
		0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0x10, 0x00,		/* TOTAL LENGTH 4096 */
		0xff, 0xfe,				/* the initiator */
		0x00,					/* FLAGS */
		0x00,
		0x00, 0x00, 0x10, 0x00,			/* LENGTH */
		0, 0, 0, 0, 0x9a, 0xbc, 0xde, 0xf0,	/* STAG */
		0, 0, 0, 0, 0, 0, 0, 0,			/* OFFSET */
	};
	struct tpt_cdb cdb = { .opcode = TPT_OP_HOST_READ, .lba = 8,
			       .transfer_length = 8 };
	struct tpt_cdb prep = { .opcode = TPT_OP_PREP_READ, .lba = 8,
				.transfer_length = 8, .group = 1 };
	uint8_t enc[sizeof(host_list)], enc2[16 + 2 * 24];
	unsigned int i;

	memcpy(buf, host_list, sizeof(host_list));
	CHECK_EQ(tpt_xfer_list_decode(buf, sizeof(host_list), &xfer, NULL),
		 TPT_SENSE_NONE);
	CHECK_EQ(xfer.desc[0].peer, TPT_PEER_ID_INITIATOR);
	CHECK_EQ(xfer.desc[0].stag, 0x9abcdef0);
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, NULL), TPT_SENSE_NONE);
	cdb.opcode = TPT_OP_HOST_WRITE;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, NULL), TPT_SENSE_NONE);
	CHECK_EQ(tpt_xfer_list_encode(&xfer, enc, sizeof(enc)),
		 (int)sizeof(host_list));
	CHECK(!memcmp(enc, host_list, sizeof(host_list)));
	/* No other command may name the initiator: it has no peer entry. */
	check_rejected(&prep, 512, 16, NO_BIT);
	/* Pieces of whole blocks, addressed alike, in LBA order. */
	xfer.count = 2;
	xfer.desc[0].length = 3072;
	xfer.desc[1] = xfer.desc[0];
	xfer.desc[1].length = 1024;
	xfer.desc[1].stag = 0x1234;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, NULL), TPT_SENSE_NONE);
	CHECK_EQ(tpt_xfer_list_encode(&xfer, enc2, sizeof(enc2)),
		 (int)sizeof(enc2));
	CHECK_EQ(tpt_xfer_list_decode(enc2, sizeof(enc2), &xfer, NULL),
		 TPT_SENSE_NONE);
	CHECK_EQ(xfer.desc[1].stag, 0x1234);
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, NULL), TPT_SENSE_NONE);
	/* A piece ending inside a block, in the second descriptor. */
	check_rejected(&cdb, 1536, 16 + 24 + 4, NO_BIT);
	xfer.desc[1].peer = 2;
	check_rejected(&cdb, 512, 16 + 24, NO_BIT);
	xfer.desc[1].peer = TPT_PEER_ID_INITIATOR;
	xfer.desc[1].flags = TPT_XFER_VIRT_ADDR;
	check_rejected(&cdb, 512, 16 + 24 + 2, 0);
	xfer.desc[1].flags = 0;
	/* Up to TPT_HOST_DESC_MAX pieces: a one-block piece each. */
	for (i = 0; i < TPT_HOST_DESC_MAX + 1; i++) {
		xfer.desc[i] = xfer.desc[0];
		xfer.desc[i].length = 512;
	}
	xfer.count = TPT_HOST_DESC_MAX;
	xfer.total_length = 512 * TPT_HOST_DESC_MAX;
	cdb.transfer_length = TPT_HOST_DESC_MAX;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, NULL), TPT_SENSE_NONE);
	xfer.count = TPT_HOST_DESC_MAX + 1;
	xfer.total_length += 512;
	cdb.transfer_length++;
	check_rejected(&cdb, 512, 0, NO_BIT);
	memcpy(buf, host_list, sizeof(host_list));
	CHECK_EQ(tpt_xfer_list_decode(buf, sizeof(host_list), &xfer, NULL),
		 TPT_SENSE_NONE);
	cdb.transfer_length = 8;
	/* In the table's order: the count, the result, the peer, a slot,
	 * the total. */
	xfer.count = 1;
	xfer.result_slot = 0;
	check_rejected(&cdb, 512, 2, NO_BIT);
	xfer.result_slot = TPT_SLOT_NONE;
	xfer.desc[0].peer = 3;
	check_rejected(&cdb, 512, 16, NO_BIT);
	xfer.desc[0].peer = TPT_PEER_ID_CONTROLLER;
	check_rejected(&cdb, 512, 16, NO_BIT);
	xfer.desc[0].peer = TPT_PEER_ID_INITIATOR;
	xfer.desc[0].flags = TPT_XFER_SLOT;
	check_rejected(&cdb, 512, 18, 1);
	xfer.desc[0].flags = TPT_XFER_VIRT_ADDR;
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 512, NULL), TPT_SENSE_NONE);
	cdb.transfer_length = 16;
	check_rejected(&cdb, 512, 8, NO_BIT);
	CHECK_EQ(tpt_xfer_list_check(&xfer, &cdb, 256, NULL), TPT_SENSE_NONE);
	/* The header alone is not a buffer. */
	xfer.count = 0;
	check_rejected(&cdb, 256, 0, NO_BIT);
}

int main(void)
{
	RUN(test_xfer_list_layout);
	RUN(test_xfer_list_lengths);
	RUN(test_xfer_list_result_slot);
	RUN(test_xfer_list_fields);
	RUN(test_xfer_list_encode_refuses);
	RUN(test_xfer_list_against_cdb);
	RUN(test_xfer_list_slot_desc);
	RUN(test_xfer_list_slots_against_cdb);
	RUN(test_read_medium_list);
	RUN(test_header_only_elsewhere);
	RUN(test_send_result_list);
	RUN(test_host_list);
	RUN(test_skip_list);
	RUN(test_passes_list);
	RUN(test_weighted_passes_list);
	UNIT_EXIT();
}
