/*
 * TPT-RAID sense table and fixed-format sense data (SPC-4 4.5.3).
 */
#include <errno.h>
#include <string.h>

#include "scsi/tpt_sense.h"

#define SENSE_CURRENT		0x70
#define SENSE_DEFERRED		0x71
#define SENSE_VALID		0x80
#define SENSE_ADDL_LEN		(TPT_SENSE_FIXED_LEN - 8)
/* Enough to reach ASCQ; shorter sense cannot be classified. */
#define SENSE_MIN_PARSE		14

#define SKS_SKSV		0x80
#define SKS_CD			0x40
#define SKS_BPV			0x08
#define SKS_BIT			0x07

/*
 * Vendor-specific ASCs (80h-FFh) for the conditions only TPT has; standard
 * codes wherever SPC/SBC already name the condition.
 */
#define ROW(n, k, a, q, f) \
	{ .name = (n), .key = (k), .asc = (a), .ascq = (q), .fault = (f) }

static const struct tpt_sense_code sense_table[] = {
	[TPT_SENSE_INVALID_OPCODE] = ROW(
		"INVALID COMMAND OPERATION CODE",
		TPT_SK_ILLEGAL_REQUEST, 0x20, 0x00, TPT_FAULT_COMMAND),
	[TPT_SENSE_INVALID_CDB_FIELD] = ROW(
		"INVALID FIELD IN CDB",
		TPT_SK_ILLEGAL_REQUEST, 0x24, 0x00, TPT_FAULT_COMMAND),
	[TPT_SENSE_PARAM_LIST_LENGTH] = ROW(
		"PARAMETER LIST LENGTH ERROR",
		TPT_SK_ILLEGAL_REQUEST, 0x1a, 0x00, TPT_FAULT_COMMAND),
	[TPT_SENSE_INVALID_PARAM_FIELD] = ROW(
		"INVALID FIELD IN PARAMETER LIST",
		TPT_SK_ILLEGAL_REQUEST, 0x26, 0x00, TPT_FAULT_COMMAND),
	[TPT_SENSE_LBA_OUT_OF_RANGE] = ROW(
		"LOGICAL BLOCK ADDRESS OUT OF RANGE",
		TPT_SK_ILLEGAL_REQUEST, 0x21, 0x00, TPT_FAULT_COMMAND),
	[TPT_SENSE_PEER_LIST_MISSING] = ROW(
		"TPT PEER LIST NOT DELIVERED",
		TPT_SK_NOT_READY, 0x80, 0x00, TPT_FAULT_STATE),
	[TPT_SENSE_PEER_LIST_CONFLICT] = ROW(
		"TPT PEER LIST GENERATION OR ARRAY CONFLICT",
		TPT_SK_ILLEGAL_REQUEST, 0x80, 0x01, TPT_FAULT_COMMAND),
	[TPT_SENSE_UNKNOWN_PEER] = ROW(
		"TPT UNKNOWN PEER ID",
		TPT_SK_ILLEGAL_REQUEST, 0x80, 0x02, TPT_FAULT_COMMAND),
	[TPT_SENSE_UNKNOWN_GROUP] = ROW(
		"TPT UNKNOWN GROUP NUMBER",
		TPT_SK_ILLEGAL_REQUEST, 0x81, 0x00, TPT_FAULT_COMMAND),
	[TPT_SENSE_GROUP_IN_USE] = ROW(
		"TPT GROUP NUMBER IN USE",
		TPT_SK_ILLEGAL_REQUEST, 0x81, 0x01, TPT_FAULT_COMMAND),
	[TPT_SENSE_GROUP_RANGE_MISSING] = ROW(
		"TPT LBA RANGE NOT BUFFERED IN GROUP",
		TPT_SK_ILLEGAL_REQUEST, 0x81, 0x02, TPT_FAULT_COMMAND),
	[TPT_SENSE_SLOT_IN_USE] = ROW(
		"TPT SLOT IN USE",
		TPT_SK_ILLEGAL_REQUEST, 0x81, 0x03, TPT_FAULT_COMMAND),
	[TPT_SENSE_RELEASED_BY_COMMAND] = ROW(
		"TPT GROUP RELEASED BY TPT RELEASE",
		TPT_SK_ABORTED_COMMAND, 0x82, 0x00, TPT_FAULT_STATE),
	[TPT_SENSE_RELEASED_BY_TASK_MGMT] = ROW(
		"TPT GROUP RELEASED BY TASK MANAGEMENT",
		TPT_SK_ABORTED_COMMAND, 0x82, 0x01, TPT_FAULT_STATE),
	[TPT_SENSE_RELEASED_BY_TIMEOUT] = ROW(
		"TPT GROUP RELEASED AFTER HOLD TIME",
		TPT_SK_ABORTED_COMMAND, 0x82, 0x02, TPT_FAULT_STATE),
	[TPT_SENSE_RELEASED_BY_NEXUS_LOSS] = ROW(
		"TPT GROUP RELEASED BY I_T NEXUS LOSS",
		TPT_SK_ABORTED_COMMAND, 0x82, 0x03, TPT_FAULT_STATE),
	[TPT_SENSE_POOL_EXHAUSTED] = ROW(
		"INSUFFICIENT RESOURCES",
		TPT_SK_ABORTED_COMMAND, 0x55, 0x03, TPT_FAULT_BUSY),
	[TPT_SENSE_PEER_XFER_FAILED] = ROW(
		"TPT PASSIVE PEER TRANSFER FAILED",
		TPT_SK_ABORTED_COMMAND, 0x83, 0x00, TPT_FAULT_PEER),
	[TPT_SENSE_PEER_XFER_TIMEOUT] = ROW(
		"TPT PASSIVE PEER TRANSFER TIMED OUT",
		TPT_SK_ABORTED_COMMAND, 0x83, 0x01, TPT_FAULT_PEER),
	[TPT_SENSE_PEER_UNREACHABLE] = ROW(
		"TPT PASSIVE PEER UNREACHABLE",
		TPT_SK_ABORTED_COMMAND, 0x83, 0x02, TPT_FAULT_PEER),
	[TPT_SENSE_STAG_REJECTED] = ROW(
		"TPT STAG REJECTED BY PASSIVE PEER",
		TPT_SK_ABORTED_COMMAND, 0x84, 0x00, TPT_FAULT_STATE),
	[TPT_SENSE_PEER_REFUSED] = ROW(
		"TPT CONNECTION REFUSED BY PASSIVE PEER",
		TPT_SK_ABORTED_COMMAND, 0x84, 0x01, TPT_FAULT_STATE),
	[TPT_SENSE_SLOT_STALE] = ROW(
		"TPT SLOT STALE",
		TPT_SK_ABORTED_COMMAND, 0x84, 0x02, TPT_FAULT_STATE),
	[TPT_SENSE_READ_ERROR] = ROW(
		"UNRECOVERED READ ERROR",
		TPT_SK_MEDIUM_ERROR, 0x11, 0x00, TPT_FAULT_LOCAL),
	[TPT_SENSE_WRITE_ERROR] = ROW(
		"WRITE ERROR",
		TPT_SK_MEDIUM_ERROR, 0x0c, 0x00, TPT_FAULT_LOCAL),
	[TPT_SENSE_INTERNAL_FAILURE] = ROW(
		"INTERNAL TARGET FAILURE",
		TPT_SK_HARDWARE_ERROR, 0x44, 0x00, TPT_FAULT_LOCAL),
	[TPT_SENSE_HOST_KEY_MISSING] = ROW(
		"TPT HOST KEY NOT REGISTERED",
		TPT_SK_NOT_READY, 0x80, 0x03, TPT_FAULT_STATE),
};

_Static_assert(sizeof(sense_table) / sizeof(sense_table[0]) == TPT_SENSE_OTHER,
	       "every reason before TPT_SENSE_OTHER needs a row");

const struct tpt_sense_code *tpt_sense_code(enum tpt_sense_reason reason)
{
	if (reason <= TPT_SENSE_NONE || reason >= TPT_SENSE_OTHER)
		return NULL;
	return &sense_table[reason];
}

bool tpt_sense_peer_failed(const struct tpt_sense *s)
{
	const struct tpt_sense_code *c = tpt_sense_code(s->reason);

	return c && s->info.info_valid &&
	       (c->fault == TPT_FAULT_PEER ||
		s->reason == TPT_SENSE_STAG_REJECTED ||
		s->reason == TPT_SENSE_PEER_REFUSED);
}

enum tpt_sense_reason tpt_sense_reason_of(uint8_t key, uint8_t asc,
					  uint8_t ascq)
{
	enum tpt_sense_reason r;

	for (r = TPT_SENSE_NONE + 1; r < TPT_SENSE_OTHER; r++) {
		const struct tpt_sense_code *c = &sense_table[r];

		if (c->key == key && c->asc == asc && c->ascq == ascq)
			return r;
	}
	return TPT_SENSE_OTHER;
}

static void put_field_ptr(uint8_t *sks, const struct tpt_field_ptr *f)
{
	sks[0] = SKS_SKSV;
	if (f->in_cdb)
		sks[0] |= SKS_CD;
	if (f->bit_valid)
		sks[0] |= SKS_BPV | f->bit;
	tpt_put_be(&sks[1], f->byte, 2);
}

int tpt_sense_build(uint8_t *buf, size_t len, enum tpt_sense_reason reason,
		    const struct tpt_sense_info *info)
{
	const struct tpt_sense_code *code = tpt_sense_code(reason);
	static const struct tpt_sense_info none;

	if (!code)
		return -EINVAL;
	if (!info)
		info = &none;
	if (info->field.valid &&
	    (code->key != TPT_SK_ILLEGAL_REQUEST || info->field.bit > 7))
		return -EINVAL;
	if (len < TPT_SENSE_FIXED_LEN)
		return -ENOSPC;

	memset(buf, 0, TPT_SENSE_FIXED_LEN);
	buf[0] = SENSE_CURRENT | (info->info_valid ? SENSE_VALID : 0);
	buf[2] = code->key;
	tpt_put_be(&buf[3], info->information, 4);
	buf[7] = SENSE_ADDL_LEN;
	tpt_put_be(&buf[8], info->cmd_specific, 4);
	buf[12] = code->asc;
	buf[13] = code->ascq;
	if (info->field.valid)
		put_field_ptr(&buf[15], &info->field);
	return TPT_SENSE_FIXED_LEN;
}

/* Only ILLEGAL REQUEST sense-key specific bytes are a field pointer. */
static void get_field_ptr(const uint8_t *sks, uint8_t key,
			  struct tpt_field_ptr *f)
{
	memset(f, 0, sizeof(*f));
	if (key != TPT_SK_ILLEGAL_REQUEST || !(sks[0] & SKS_SKSV))
		return;
	f->valid = true;
	f->in_cdb = sks[0] & SKS_CD;
	f->bit_valid = sks[0] & SKS_BPV;
	f->bit = f->bit_valid ? (sks[0] & SKS_BIT) : 0;
	f->byte = (uint16_t)tpt_get_be(&sks[1], 2);
}

int tpt_sense_parse(const uint8_t *buf, size_t len, struct tpt_sense *out)
{
	uint8_t code;
	size_t avail;

	if (len < 1)
		return -EBADMSG;
	code = buf[0] & 0x7f;
	if (code != SENSE_CURRENT && code != SENSE_DEFERRED)
		return -EPROTONOSUPPORT;
	if (len < 8)
		return -EBADMSG;
	/* Trust neither side alone: sense may be truncated or padded. */
	avail = 8 + (size_t)buf[7];
	if (avail > len)
		avail = len;
	if (avail < SENSE_MIN_PARSE)
		return -EBADMSG;

	memset(out, 0, sizeof(*out));
	out->deferred = code == SENSE_DEFERRED;
	out->key = buf[2] & 0x0f;
	out->asc = buf[12];
	out->ascq = buf[13];
	out->reason = tpt_sense_reason_of(out->key, out->asc, out->ascq);
	out->info.info_valid = buf[0] & SENSE_VALID;
	out->info.information = (uint32_t)tpt_get_be(&buf[3], 4);
	out->info.cmd_specific = (uint32_t)tpt_get_be(&buf[8], 4);
	if (avail >= TPT_SENSE_FIXED_LEN)
		get_field_ptr(&buf[15], out->key, &out->info.field);
	return 0;
}
