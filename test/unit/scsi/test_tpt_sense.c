/*
 * Unit tests for scsi/tpt_sense: the table of docs/protocol.md, the
 * fixed-format bytes tpt_sense_build() writes, and parsing them back.
 */
#include <errno.h>

#include "scsi/tpt_sense.h"
#include "test/unit/unit.h"

/* The table as docs/protocol.md lists it. */
static const struct {
	enum tpt_sense_reason reason;
	uint8_t key, asc, ascq, fault;
} documented[] = {
	{ TPT_SENSE_INVALID_OPCODE, 0x5, 0x20, 0x00, TPT_FAULT_COMMAND },
	{ TPT_SENSE_INVALID_CDB_FIELD, 0x5, 0x24, 0x00, TPT_FAULT_COMMAND },
	{ TPT_SENSE_PARAM_LIST_LENGTH, 0x5, 0x1a, 0x00, TPT_FAULT_COMMAND },
	{ TPT_SENSE_INVALID_PARAM_FIELD, 0x5, 0x26, 0x00, TPT_FAULT_COMMAND },
	{ TPT_SENSE_LBA_OUT_OF_RANGE, 0x5, 0x21, 0x00, TPT_FAULT_COMMAND },
	{ TPT_SENSE_PEER_LIST_MISSING, 0x2, 0x80, 0x00, TPT_FAULT_STATE },
	{ TPT_SENSE_PEER_LIST_CONFLICT, 0x5, 0x80, 0x01, TPT_FAULT_COMMAND },
	{ TPT_SENSE_UNKNOWN_PEER, 0x5, 0x80, 0x02, TPT_FAULT_COMMAND },
	{ TPT_SENSE_UNKNOWN_GROUP, 0x5, 0x81, 0x00, TPT_FAULT_COMMAND },
	{ TPT_SENSE_GROUP_IN_USE, 0x5, 0x81, 0x01, TPT_FAULT_COMMAND },
	{ TPT_SENSE_GROUP_RANGE_MISSING, 0x5, 0x81, 0x02, TPT_FAULT_COMMAND },
	{ TPT_SENSE_SLOT_IN_USE, 0x5, 0x81, 0x03, TPT_FAULT_COMMAND },
	{ TPT_SENSE_RELEASED_BY_COMMAND, 0xb, 0x82, 0x00, TPT_FAULT_STATE },
	{ TPT_SENSE_RELEASED_BY_TASK_MGMT, 0xb, 0x82, 0x01, TPT_FAULT_STATE },
	{ TPT_SENSE_RELEASED_BY_TIMEOUT, 0xb, 0x82, 0x02, TPT_FAULT_STATE },
	{ TPT_SENSE_RELEASED_BY_NEXUS_LOSS, 0xb, 0x82, 0x03,
	  TPT_FAULT_STATE },
	{ TPT_SENSE_POOL_EXHAUSTED, 0xb, 0x55, 0x03, TPT_FAULT_BUSY },
	{ TPT_SENSE_PEER_XFER_FAILED, 0xb, 0x83, 0x00, TPT_FAULT_PEER },
	{ TPT_SENSE_PEER_XFER_TIMEOUT, 0xb, 0x83, 0x01, TPT_FAULT_PEER },
	{ TPT_SENSE_PEER_UNREACHABLE, 0xb, 0x83, 0x02, TPT_FAULT_PEER },
	{ TPT_SENSE_STAG_REJECTED, 0xb, 0x84, 0x00, TPT_FAULT_STATE },
	{ TPT_SENSE_PEER_REFUSED, 0xb, 0x84, 0x01, TPT_FAULT_STATE },
	{ TPT_SENSE_SLOT_STALE, 0xb, 0x84, 0x02, TPT_FAULT_STATE },
	{ TPT_SENSE_READ_ERROR, 0x3, 0x11, 0x00, TPT_FAULT_LOCAL },
	{ TPT_SENSE_WRITE_ERROR, 0x3, 0x0c, 0x00, TPT_FAULT_LOCAL },
	{ TPT_SENSE_INTERNAL_FAILURE, 0x4, 0x44, 0x00, TPT_FAULT_LOCAL },
	{ TPT_SENSE_HOST_KEY_MISSING, 0x2, 0x80, 0x03, TPT_FAULT_STATE },
};

#define NR_DOCUMENTED (sizeof(documented) / sizeof(documented[0]))

static void test_table_matches_document(void)
{
	size_t i;

	/* One row per reason between NONE and OTHER, none forgotten. */
	CHECK_EQ(NR_DOCUMENTED, TPT_SENSE_OTHER - 1);
	for (i = 0; i < NR_DOCUMENTED; i++) {
		const struct tpt_sense_code *c =
			tpt_sense_code(documented[i].reason);

		CHECK(c != NULL);
		if (!c)
			continue;
		CHECK(c->name && c->name[0]);
		CHECK_EQ(c->key, documented[i].key);
		CHECK_EQ(c->asc, documented[i].asc);
		CHECK_EQ(c->ascq, documented[i].ascq);
		CHECK_EQ(c->fault, documented[i].fault);
		CHECK_EQ(tpt_sense_reason_of(c->key, c->asc, c->ascq),
			 documented[i].reason);
		/* Vendor ASCs carry the TPT-only conditions, and only them. */
		CHECK_EQ(c->asc >= 0x80, strncmp(c->name, "TPT ", 4) == 0);
	}
	CHECK(tpt_sense_code(TPT_SENSE_NONE) == NULL);
	CHECK(tpt_sense_code(TPT_SENSE_OTHER) == NULL);
	CHECK(tpt_sense_code((enum tpt_sense_reason)-1) == NULL);
	CHECK(tpt_sense_code((enum tpt_sense_reason)1000) == NULL);
	CHECK_EQ(tpt_sense_reason_of(0x6, 0x29, 0x00), TPT_SENSE_OTHER);
	CHECK_EQ(tpt_sense_reason_of(0x5, 0x83, 0x00), TPT_SENSE_OTHER);
	CHECK_EQ(tpt_sense_reason_of(0xb, 0x84, 0x03), TPT_SENSE_OTHER);
	CHECK_EQ(tpt_sense_reason_of(0x5, 0x81, 0x04), TPT_SENSE_OTHER);
}

/* III-D: a dead passive peer must never look like a local fault. */
static void test_peer_failure_is_distinct(void)
{
	size_t i, peer = 0;

	for (i = 0; i < NR_DOCUMENTED; i++) {
		const struct tpt_sense_code *c =
			tpt_sense_code(documented[i].reason);

		if (c->fault != TPT_FAULT_PEER)
			continue;
		peer++;
		CHECK_EQ(c->asc, 0x83);
		CHECK_EQ(c->key, TPT_SK_ABORTED_COMMAND);
	}
	CHECK_EQ(peer, 3);
	CHECK_EQ(tpt_sense_code(TPT_SENSE_READ_ERROR)->fault, TPT_FAULT_LOCAL);
	CHECK_EQ(tpt_sense_code(TPT_SENSE_POOL_EXHAUSTED)->fault,
		 TPT_FAULT_BUSY);
}

static void test_build_field_pointer(void)
{
	/* INVALID FIELD IN CDB, byte 1 bit 2 (XDWRITE without DISABLE WRITE) */
	static const uint8_t want[18] = {
		0x70, 0x00, 0x05, 0, 0, 0, 0, 0x0a,
		0, 0, 0, 0, 0x24, 0x00, 0x00,
		0xca, 0x00, 0x01,	/* SKSV C/D BPV bit 2, byte 1 */
	};
	const struct tpt_sense_info info = {
		.field = { .valid = true, .in_cdb = true, .bit_valid = true,
			   .bit = 2, .byte = 1 },
	};
	uint8_t b[32];

	memset(b, 0xee, sizeof(b));
	CHECK_EQ(tpt_sense_build(b, sizeof(b), TPT_SENSE_INVALID_CDB_FIELD,
				 &info), 18);
	CHECK_MEM(b, want, 18);
	CHECK_EQ(b[18], 0xee);
}

static void test_build_param_pointer(void)
{
	/* INVALID FIELD IN PARAMETER LIST at byte 0x0110, no bit */
	static const uint8_t want[18] = {
		0x70, 0x00, 0x05, 0, 0, 0, 0, 0x0a,
		0, 0, 0, 0, 0x26, 0x00, 0x00,
		0x80, 0x01, 0x10,
	};
	const struct tpt_sense_info info = {
		.field = { .valid = true, .byte = 0x110 },
	};
	uint8_t b[18];

	CHECK_EQ(tpt_sense_build(b, sizeof(b), TPT_SENSE_INVALID_PARAM_FIELD,
				 &info), 18);
	CHECK_MEM(b, want, 18);
}

static void test_build_peer_failure(void)
{
	/* Peer 7 timed out on transfer descriptor 2. */
	static const uint8_t want[18] = {
		0xf0, 0x00, 0x0b, 0x00, 0x00, 0x00, 0x07, 0x0a,
		0x00, 0x00, 0x00, 0x02, 0x83, 0x01, 0x00,
		0x00, 0x00, 0x00,
	};
	const struct tpt_sense_info info = {
		.info_valid = true, .information = 7, .cmd_specific = 2,
	};
	uint8_t b[18];

	CHECK_EQ(tpt_sense_build(b, sizeof(b), TPT_SENSE_PEER_XFER_TIMEOUT,
				 &info), 18);
	CHECK_MEM(b, want, 18);
}

/* Slot 7 of peer 4, read by transfer descriptor 1, was not the result. */
static void test_build_slot_stale(void)
{
	static const uint8_t want[18] = {
		0xf0, 0x00, 0x0b, 0x00, 0x00, 0x00, 0x04, 0x0a,
		0x00, 0x00, 0x00, 0x01, 0x84, 0x02, 0x00,
		0x00, 0x00, 0x00,
	};
	const struct tpt_sense_info info = {
		.info_valid = true, .information = 4, .cmd_specific = 1,
	};
	struct tpt_sense got;
	uint8_t b[18];

	CHECK_EQ(tpt_sense_build(b, sizeof(b), TPT_SENSE_SLOT_STALE, &info),
		 18);
	CHECK_MEM(b, want, 18);
	CHECK_EQ(tpt_sense_parse(want, sizeof(want), &got), 0);
	CHECK_EQ(got.reason, TPT_SENSE_SLOT_STALE);
	/* Out of step, not a dead peer: re-plan, do not check the box. */
	CHECK_EQ(tpt_sense_code(got.reason)->fault, TPT_FAULT_STATE);
}

static void test_build_slot_in_use(void)
{
	static const uint8_t want[18] = {
		0x70, 0x00, 0x05, 0, 0, 0, 0, 0x0a,
		0, 0, 0, 0, 0x81, 0x03, 0x00,
		0x00, 0x00, 0x00,
	};
	struct tpt_sense got;
	uint8_t b[18];

	CHECK_EQ(tpt_sense_build(b, sizeof(b), TPT_SENSE_SLOT_IN_USE, NULL),
		 18);
	CHECK_MEM(b, want, 18);
	CHECK_EQ(tpt_sense_parse(want, sizeof(want), &got), 0);
	CHECK_EQ(got.reason, TPT_SENSE_SLOT_IN_USE);
	CHECK_EQ(tpt_sense_code(got.reason)->fault, TPT_FAULT_COMMAND);
}

static void test_round_trip_every_reason(void)
{
	size_t i;

	for (i = 0; i < NR_DOCUMENTED; i++) {
		const struct tpt_sense_code *c =
			tpt_sense_code(documented[i].reason);
		struct tpt_sense_info info = {
			.info_valid = true,
			.information = 0x01020304u + (uint32_t)i,
			.cmd_specific = (uint32_t)i,
		};
		struct tpt_sense got;
		uint8_t b[18];

		if (c->key == TPT_SK_ILLEGAL_REQUEST)
			info.field = (struct tpt_field_ptr){
				.valid = true, .in_cdb = i & 1,
				.bit_valid = true, .bit = (uint8_t)(i % 8),
				.byte = (uint16_t)(0x100 + i),
			};
		CHECK_EQ(tpt_sense_build(b, sizeof(b), documented[i].reason,
					 &info), 18);
		CHECK_EQ(tpt_sense_parse(b, sizeof(b), &got), 0);
		CHECK_EQ(got.reason, documented[i].reason);
		CHECK_EQ(got.key, c->key);
		CHECK_EQ(got.asc, c->asc);
		CHECK_EQ(got.ascq, c->ascq);
		CHECK(!got.deferred);
		CHECK(got.info.info_valid);
		CHECK_EQ(got.info.information, info.information);
		CHECK_EQ(got.info.cmd_specific, info.cmd_specific);
		CHECK_MEM(&got.info.field, &info.field, sizeof(info.field));

		/* Without the optional fields. */
		CHECK_EQ(tpt_sense_build(b, sizeof(b), documented[i].reason,
					 NULL), 18);
		CHECK_EQ(b[0], 0x70);
		CHECK_EQ(tpt_sense_parse(b, sizeof(b), &got), 0);
		CHECK_EQ(got.reason, documented[i].reason);
		CHECK(!got.info.info_valid && !got.info.field.valid);
	}
}

static void test_build_refuses(void)
{
	const struct tpt_sense_info pointer = {
		.field = { .valid = true, .byte = 3 },
	};
	struct tpt_sense_info bad_bit = pointer;
	uint8_t b[18];

	CHECK_EQ(tpt_sense_build(b, 18, TPT_SENSE_NONE, NULL), -EINVAL);
	CHECK_EQ(tpt_sense_build(b, 18, TPT_SENSE_OTHER, NULL), -EINVAL);
	CHECK_EQ(tpt_sense_build(b, 17, TPT_SENSE_READ_ERROR, NULL), -ENOSPC);
	/* SPC defines the field pointer only for ILLEGAL REQUEST. */
	CHECK_EQ(tpt_sense_build(b, 18, TPT_SENSE_PEER_XFER_FAILED, &pointer),
		 -EINVAL);
	CHECK_EQ(tpt_sense_build(b, 18, TPT_SENSE_UNKNOWN_PEER, &pointer), 18);
	bad_bit.field.bit_valid = true;
	bad_bit.field.bit = 8;
	CHECK_EQ(tpt_sense_build(b, 18, TPT_SENSE_UNKNOWN_PEER, &bad_bit),
		 -EINVAL);
}

static void test_parse_foreign_and_short(void)
{
	/* UNIT ATTENTION, POWER ON OR RESET, from stock tgt: not ours. */
	static const uint8_t ua[18] = {
		0x70, 0, 0x06, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x29, 0x00,
	};
	/* Deferred, truncated before the sense-key specific bytes. */
	static const uint8_t deferred[14] = {
		0x71, 0, 0x0b, 0, 0, 0, 0, 0x06, 0, 0, 0, 0, 0x83, 0x02,
	};
	static const uint8_t descriptor[8] = { 0x72, 0x05, 0x24, 0x00 };
	struct tpt_sense s;
	uint8_t b[18];

	CHECK_EQ(tpt_sense_parse(ua, sizeof(ua), &s), 0);
	CHECK_EQ(s.reason, TPT_SENSE_OTHER);
	CHECK_EQ(s.key, 0x6);
	CHECK_EQ(s.asc, 0x29);

	CHECK_EQ(tpt_sense_parse(deferred, sizeof(deferred), &s), 0);
	CHECK(s.deferred);
	CHECK_EQ(s.reason, TPT_SENSE_PEER_UNREACHABLE);
	CHECK(!s.info.field.valid);

	CHECK_EQ(tpt_sense_parse(descriptor, sizeof(descriptor), &s),
		 -EPROTONOSUPPORT);
	CHECK_EQ(tpt_sense_parse(ua, 0, &s), -EBADMSG);
	CHECK_EQ(tpt_sense_parse(ua, 7, &s), -EBADMSG);
	CHECK_EQ(tpt_sense_parse(ua, 13, &s), -EBADMSG);
	/* ADDITIONAL SENSE LENGTH short of ASCQ: unusable. */
	memcpy(b, ua, 18);
	b[7] = 5;
	CHECK_EQ(tpt_sense_parse(b, 18, &s), -EBADMSG);

	/* SKSV outside ILLEGAL REQUEST is not a field pointer. */
	CHECK_EQ(tpt_sense_build(b, 18, TPT_SENSE_POOL_EXHAUSTED, NULL), 18);
	b[15] = 0x80;
	b[17] = 0x10;
	CHECK_EQ(tpt_sense_parse(b, 18, &s), 0);
	CHECK_EQ(s.reason, TPT_SENSE_POOL_EXHAUSTED);
	CHECK(!s.info.field.valid);
}

static void test_be_helpers(void)
{
	static const uint8_t lba48[6] = { 0x80, 0x01, 0x02, 0x03, 0x04, 0xff };
	uint8_t b[8];

	CHECK(tpt_get_be(lba48, 6) == 0x8001020304ffull);
	CHECK_EQ(tpt_get_be(lba48, 3), 0x800102);
	CHECK_EQ(tpt_get_be(lba48, 0), 0);
	memset(b, 0xee, sizeof(b));
	tpt_put_be(b, 0x8001020304ffull, 6);
	CHECK_MEM(b, lba48, 6);
	CHECK_EQ(b[6], 0xee);
	tpt_put_be(b, 0x0102030405060708ull, 8);
	CHECK(tpt_get_be(b, 8) == 0x0102030405060708ull);
}

/* tpt_sense_peer_failed(): the passive-peer faults and refusals that
 * name a peer, and nothing else. */
static void test_peer_failed(void)
{
	static const enum tpt_sense_reason yes[] = {
		TPT_SENSE_PEER_XFER_FAILED, TPT_SENSE_PEER_XFER_TIMEOUT,
		TPT_SENSE_PEER_UNREACHABLE, TPT_SENSE_STAG_REJECTED,
		TPT_SENSE_PEER_REFUSED,
	};
	static const enum tpt_sense_reason no[] = {
		TPT_SENSE_SLOT_STALE, TPT_SENSE_POOL_EXHAUSTED,
		TPT_SENSE_READ_ERROR, TPT_SENSE_NONE, TPT_SENSE_OTHER,
	};
	struct tpt_sense s = { .info = { .info_valid = true,
					 .information = 0xfffe } };
	unsigned int i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		s.reason = yes[i];
		s.info.info_valid = true;
		CHECK(tpt_sense_peer_failed(&s));
		s.info.info_valid = false;	/* no peer named */
		CHECK(!tpt_sense_peer_failed(&s));
	}
	s.info.info_valid = true;
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		s.reason = no[i];
		CHECK(!tpt_sense_peer_failed(&s));
	}
}

int main(void)
{
	RUN(test_table_matches_document);
	RUN(test_peer_failure_is_distinct);
	RUN(test_build_field_pointer);
	RUN(test_build_param_pointer);
	RUN(test_build_peer_failure);
	RUN(test_build_slot_stale);
	RUN(test_build_slot_in_use);
	RUN(test_round_trip_every_reason);
	RUN(test_build_refuses);
	RUN(test_parse_foreign_and_short);
	RUN(test_be_helpers);
	RUN(test_peer_failed);
	UNIT_EXIT();
}
