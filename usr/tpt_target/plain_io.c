/*
 * Plain SBC commands on a LU that belongs to an array.
 *
 * Once a LU is bound to an array (its first peer list, protocol.md 5.5),
 * its blocks are one column of the array's stripes: a write by anyone but
 * the array's controller tears a stripe, and a read hands out array data.
 * So, besides the TPT commands (cmd.c), the LU executes plain SBC
 * commands that touch the medium or its reservations only for nexuses
 * that delivered the array's key; every other nexus gets ACCESS DENIED -
 * NO ACCESS RIGHTS.  Reservations alone cannot do this: their key is
 * shown to anyone by PERSISTENT RESERVE IN, so a stranger could preempt.
 *
 * What stays open to everyone is what an initiator needs to see the LU
 * and what reveals no data: INQUIRY, REPORT LUNS, capacity, mode pages,
 * TEST UNIT READY, REQUEST SENSE, PERSISTENT RESERVE IN and SYNCHRONIZE
 * CACHE.  The operator may open more with the LU parameter tpt_plain_io:
 * "read" lets anyone read (tpt-scrub on a live array), "allow" restores
 * plain tgt behaviour.  An unbound LU is plain tgt in any case.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "scsi.h"
#include "target.h"
#include "tpt_target.h"

/* ACCESS DENIED - NO ACCESS RIGHTS (SPC-4) */
#define TPT_ASC_ACCESS_DENIED 0x2002

static const char *const plain_io_name[] = {
	[TPT_PLAIN_IO_REFUSE] = "refuse",
	[TPT_PLAIN_IO_READ] = "read",
	[TPT_PLAIN_IO_ALLOW] = "allow",
};

/* The least tpt_plain_io under which a stranger may send @opcode. */
static enum tpt_plain_io plain_io_needed(uint8_t opcode)
{
	switch (opcode) {
	case TEST_UNIT_READY:
	case REQUEST_SENSE:
	case INQUIRY:
	case MODE_SENSE:
	case MODE_SENSE_10:
	case READ_CAPACITY:
	case SERVICE_ACTION_IN:		/* READ CAPACITY(16) and kin */
	case REPORT_LUNS:
	case MAINT_PROTOCOL_IN:		/* REPORT SUPPORTED OPCODES */
	case PERSISTENT_RESERVE_IN:
	case SYNCHRONIZE_CACHE:
	case SYNCHRONIZE_CACHE_16:
		return TPT_PLAIN_IO_REFUSE;
	case READ_6:
	case READ_10:
	case READ_12:
	case READ_16:
	case VERIFY_10:
	case VERIFY_12:
	case VERIFY_16:
		return TPT_PLAIN_IO_READ;
	default:
		return TPT_PLAIN_IO_ALLOW;
	}
}

static int tpt_plain_perform(int host_no, struct scsi_cmd *cmd)
{
	struct tpt_lu *tlu = tpt_lu_of(cmd->dev);
	uint8_t opcode = cmd->scb[0];
	struct tpt_session *s;

	/* Only LUs in TPT mode have this in their table; a command racing
	 * tpt=off cannot reach it. */
	if (!tlu->bound || plain_io_needed(opcode) <= tlu->plain_io)
		return tlu->plain_ops[opcode](host_no, cmd);
	s = tpt_session_get(cmd->c_target->tid, cmd->cmd_itn_id);
	if (s && tpt_lu_serves(tlu, s))
		return tlu->plain_ops[opcode](host_no, cmd);
	tlu->stats.plain_refused++;
	if (s && !s->refused_plain) {
		s->refused_plain = true;
		eprintf("tpt: nexus %" PRIu64 " of target %d sent opcode %02xh "
			"to LU %" PRIu64 ", which belongs to array %" PRIx64
			", without the array's key: refused (tpt_plain_io=%s)\n",
			s->itn_id, s->tid, opcode, tlu->lu->lun, tlu->array_id,
			plain_io_name[tlu->plain_io]);
	}
	sense_data_build(cmd, ILLEGAL_REQUEST, TPT_ASC_ACCESS_DENIED);
	return SAM_STAT_CHECK_CONDITION;
}

void tpt_plain_io_attach(struct tpt_lu *tlu, const uint8_t *tpt_ops,
			 size_t nr_tpt_ops)
{
	struct device_type_operations *ops = tlu->lu->dev_type_template.ops;
	bool is_tpt[NR_SCSI_OPCODES] = { false };
	size_t i;

	for (i = 0; i < nr_tpt_ops; i++)
		is_tpt[tpt_ops[i]] = true;
	for (i = 0; i < NR_SCSI_OPCODES; i++) {
		tlu->plain_ops[i] = ops[i].cmd_perform;
		if (!is_tpt[i] && ops[i].cmd_perform)
			ops[i].cmd_perform = tpt_plain_perform;
	}
}

void tpt_plain_io_detach(struct tpt_lu *tlu)
{
	struct device_type_operations *ops = tlu->lu->dev_type_template.ops;
	size_t i;

	for (i = 0; i < NR_SCSI_OPCODES; i++)
		if (ops[i].cmd_perform == tpt_plain_perform)
			ops[i].cmd_perform = tlu->plain_ops[i];
}

int tpt_plain_io_parse(const char *value, enum tpt_plain_io *out)
{
	size_t i;

	for (i = 0; i < sizeof(plain_io_name) / sizeof(plain_io_name[0]); i++) {
		if (!strcmp(value, plain_io_name[i])) {
			*out = i;
			return 0;
		}
	}
	return -1;
}

const char *tpt_plain_io_name(enum tpt_plain_io p)
{
	return plain_io_name[p];
}
