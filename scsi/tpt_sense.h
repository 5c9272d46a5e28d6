/*
 * TPT-RAID sense data: one reason for every failure a TPT target reports,
 * the sense key / ASC / ASCQ each travels as, and the 18-byte fixed-format
 * sense builder and parser.  docs/protocol.md, "Sense data", is the
 * normative table; keep the two in step.
 *
 * A sense reason is not an errno.  Functions that judge wire data (the
 * decoders in tpt_cdb.h) return enum tpt_sense_reason; functions that fail
 * because of their caller (short buffer, impossible value) return -errno.
 */
#ifndef TPT_SCSI_TPT_SENSE_H
#define TPT_SCSI_TPT_SENSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the fixed-format sense data tpt_sense_build() produces. */
#define TPT_SENSE_FIXED_LEN 18

/* SPC sense keys used by the TPT table. */
enum tpt_sense_key {
	TPT_SK_NOT_READY = 0x2,
	TPT_SK_MEDIUM_ERROR = 0x3,
	TPT_SK_HARDWARE_ERROR = 0x4,
	TPT_SK_ILLEGAL_REQUEST = 0x5,
	TPT_SK_ABORTED_COMMAND = 0xb,
};

/*
 * Why a TPT command failed.  TPT_SENSE_NONE is success.  Every value up to
 * TPT_SENSE_OTHER has a row in the table; TPT_SENSE_OTHER only comes out of
 * tpt_sense_parse() for sense data that is not ours (a UNIT ATTENTION, say).
 */
enum tpt_sense_reason {
	TPT_SENSE_NONE = 0,
	/* The command itself is malformed (standard ILLEGAL REQUEST codes). */
	TPT_SENSE_INVALID_OPCODE,
	TPT_SENSE_INVALID_CDB_FIELD,
	TPT_SENSE_PARAM_LIST_LENGTH,
	TPT_SENSE_INVALID_PARAM_FIELD,
	TPT_SENSE_LBA_OUT_OF_RANGE,
	/* Peer list state (vendor ASC 80h). */
	TPT_SENSE_PEER_LIST_MISSING,
	TPT_SENSE_PEER_LIST_CONFLICT,
	TPT_SENSE_UNKNOWN_PEER,
	/* Group (request id) and result slot state (vendor ASC 81h). */
	TPT_SENSE_UNKNOWN_GROUP,
	TPT_SENSE_GROUP_IN_USE,
	TPT_SENSE_GROUP_RANGE_MISSING,
	TPT_SENSE_SLOT_IN_USE,
	/* The group's buffers are gone, and why (vendor ASC 82h). */
	TPT_SENSE_RELEASED_BY_COMMAND,
	TPT_SENSE_RELEASED_BY_TASK_MGMT,
	TPT_SENSE_RELEASED_BY_TIMEOUT,
	TPT_SENSE_RELEASED_BY_NEXUS_LOSS,
	/* Back-pressure: retry later (standard INSUFFICIENT RESOURCES). */
	TPT_SENSE_POOL_EXHAUSTED,
	/* The passive peer may be down (vendor ASC 83h). */
	TPT_SENSE_PEER_XFER_FAILED,
	TPT_SENSE_PEER_XFER_TIMEOUT,
	TPT_SENSE_PEER_UNREACHABLE,
	/*
	 * The passive peer is up but refused us, or its slot no longer holds
	 * what the controller meant (vendor ASC 84h).
	 */
	TPT_SENSE_STAG_REJECTED,
	TPT_SENSE_PEER_REFUSED,
	TPT_SENSE_SLOT_STALE,
	/* This box failed (standard codes). */
	TPT_SENSE_READ_ERROR,
	TPT_SENSE_WRITE_ERROR,
	TPT_SENSE_INTERNAL_FAILURE,
	/* From the controller to a host: TPT HOST READ/WRITE before TPT HOST
	 * KEY on this I_T nexus (vendor ASC 80h). */
	TPT_SENSE_HOST_KEY_MISSING,
	TPT_SENSE_OTHER,
};

/*
 * What the controller should conclude from a reason: whom to blame and
 * whether a retry can help.  III-D of the paper needs PEER and LOCAL kept
 * apart so that the controller knows which box to check.
 */
enum tpt_fault {
	TPT_FAULT_COMMAND,	/* bad command, a controller bug: no retry */
	TPT_FAULT_STATE,	/* request state lost or out of step: re-plan */
	TPT_FAULT_BUSY,		/* transient shortage: retry the same command */
	TPT_FAULT_PEER,		/* the passive peer may be down: check it */
	TPT_FAULT_LOCAL,	/* the reporting target itself failed */
};

struct tpt_sense_code {
	const char *name;
	uint8_t key;		/* enum tpt_sense_key */
	uint8_t asc;
	uint8_t ascq;
	uint8_t fault;		/* enum tpt_fault */
};

/*
 * Where a decoder found the field it rejects: becomes the sense-key
 * specific field pointer (SKSV=1) of ILLEGAL REQUEST sense.
 */
struct tpt_field_ptr {
	bool valid;
	bool in_cdb;		/* C/D: the CDB, else the parameter list */
	bool bit_valid;		/* BPV */
	uint8_t bit;		/* 0-7, meaningful when bit_valid */
	uint16_t byte;
};

/* Optional fields of fixed-format sense. */
struct tpt_sense_info {
	bool info_valid;	/* VALID bit: INFORMATION holds a value */
	uint32_t information;	/* peer id, or the failing LBA */
	uint32_t cmd_specific;	/* index of the failing transfer descriptor */
	struct tpt_field_ptr field;
};

/* Parsed sense data. */
struct tpt_sense {
	enum tpt_sense_reason reason;
	uint8_t key;
	uint8_t asc;
	uint8_t ascq;
	bool deferred;		/* response code 71h */
	struct tpt_sense_info info;
};

/* Table row of @reason, or NULL for TPT_SENSE_NONE, _OTHER and bad values. */
const struct tpt_sense_code *tpt_sense_code(enum tpt_sense_reason reason);

/* Whether @s says that the active target could not move data to or from
 * the passive peer named in INFORMATION: a peer fault (83h), or the peer
 * refused the STag or the connection (84h/00h-01h; protocol.md 9.1). */
bool tpt_sense_peer_failed(const struct tpt_sense *s);

/* The reason whose row has these codes, or TPT_SENSE_OTHER. */
enum tpt_sense_reason tpt_sense_reason_of(uint8_t key, uint8_t asc,
					  uint8_t ascq);

/*
 * Build fixed-format sense (response code 70h) for @reason into @buf.
 * @info may be NULL.  A field pointer is only allowed with ILLEGAL REQUEST
 * reasons, since SPC defines that sense-key specific format only for them.
 * Returns TPT_SENSE_FIXED_LEN, -ENOSPC if @len is too small, or -EINVAL.
 */
int tpt_sense_build(uint8_t *buf, size_t len, enum tpt_sense_reason reason,
		    const struct tpt_sense_info *info);

/*
 * Parse fixed-format sense (70h current, 71h deferred).  Sense that is not
 * in the table parses with reason TPT_SENSE_OTHER.  Returns 0, -EBADMSG if
 * the data is too short to hold ASC and ASCQ, or -EPROTONOSUPPORT for
 * descriptor-format and unknown response codes.
 */
int tpt_sense_parse(const uint8_t *buf, size_t len, struct tpt_sense *out);

/*
 * Big-endian field access for the TPT codecs: @n bytes (1-8) at @p.
 * Wire fields are unaligned and of odd widths (24, 48 bits), hence bytes.
 */
static inline uint64_t tpt_get_be(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

static inline void tpt_put_be(uint8_t *p, uint64_t v, unsigned int n)
{
	while (n--) {
		p[n] = (uint8_t)v;
		v >>= 8;
	}
}

#endif
