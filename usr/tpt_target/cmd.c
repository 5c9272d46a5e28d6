/*
 * Entry point of every TPT command on a LU in TPT mode: decoding and
 * validation through the scsi/ codec, dispatch to one handler per command,
 * and the single exit that turns a tpt_sense_reason into CHECK CONDITION.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "scsi.h"
#include "spc.h"
#include "target.h"
#include "tpt.h"
#include "disk_io.h"
#include "tpt_target.h"

static LIST_HEAD(tpt_cmds);

typedef int (*tpt_handler)(struct tpt_cmd *tc);

static const tpt_handler handlers[256] = {
	[TPT_OP_REPORT_ENDPOINT] = tpt_exec_report_endpoint,
	[TPT_OP_SET_PEER_LIST] = tpt_exec_set_peer_list,
	[TPT_OP_REPORT_SLOTS] = tpt_exec_report_slots,
	[TPT_OP_RELEASE] = tpt_exec_release,
	[TPT_OP_PREP_READ] = tpt_exec_prep_read,
	[TPT_OP_PREP_WRITE] = tpt_exec_prep_write,
	[TPT_OP_READ_NEW_BLOCK] = tpt_exec_new_data,
	[TPT_OP_XDWRITE_10] = tpt_exec_new_data,
	[TPT_OP_XDWRITE_16] = tpt_exec_new_data,
	[TPT_OP_READ_PARITY_PART_TMP] = tpt_exec_read_parity,
	[TPT_OP_READ_PARITY_PART_BLOCK] = tpt_exec_read_parity,
	[TPT_OP_READ_PARITY_COMP_TMP] = tpt_exec_read_parity,
	[TPT_OP_READ_PARITY_COMP_BLOCK] = tpt_exec_read_parity,
	[TPT_OP_WRITE_NEW_DATA] = tpt_exec_write_new_data,
	[TPT_OP_READ_MEDIUM] = tpt_exec_read_medium,
	[TPT_OP_SEND_RESULT] = tpt_exec_send_result,
};

static const enum data_direction wire_dir[] = {
	[TPT_DATA_NONE] = DATA_NONE,
	[TPT_DATA_OUT] = DATA_WRITE,
	[TPT_DATA_IN] = DATA_READ,
};

enum tpt_sense_reason tpt_dm_status_reason(int status)
{
	switch (status) {
	case 0:
		return TPT_SENSE_NONE;
	case -ETIMEDOUT:
		return TPT_SENSE_PEER_XFER_TIMEOUT;
	case -ECONNREFUSED:
		return TPT_SENSE_PEER_REFUSED;
	case -EACCES:
	case -EPERM:
		return TPT_SENSE_STAG_REJECTED;
	case -EAGAIN:
	case -ENOMEM:
		return TPT_SENSE_POOL_EXHAUSTED;
	case -ECANCELED:
		return TPT_SENSE_RELEASED_BY_TASK_MGMT;
	default:
		/* Anything else the passive side or the path to it did:
		 * the controller must check whether that peer is down. */
		return TPT_SENSE_PEER_XFER_FAILED;
	}
}

void tpt_cmd_fail(struct tpt_cmd *tc, enum tpt_sense_reason reason,
		  bool info_valid, uint32_t information, uint32_t desc_index)
{
	if (tc->failure)
		return;
	tc->failure = reason;
	tc->failure_info.info_valid = info_valid;
	tc->failure_info.information = information;
	tc->failure_info.cmd_specific = desc_index;
}

bool tpt_cmd_step_done(struct tpt_cmd *tc, enum tpt_sense_reason r)
{
	if (r)
		tpt_cmd_fail(tc, r, false, 0, 0);
	return !--tc->pending;
}

static int tpt_build_sense(struct tpt_cmd *tc, enum tpt_sense_reason reason)
{
	struct scsi_cmd *cmd = tc->scmd;
	const struct tpt_sense_info *info =
		reason == tc->failure ? &tc->failure_info : NULL;
	int len;

	len = tpt_sense_build(cmd->sense_buffer, sizeof(cmd->sense_buffer),
			      reason, info);
	if (len < 0) {
		/* A field pointer on a reason that cannot carry one. */
		len = tpt_sense_build(cmd->sense_buffer,
				      sizeof(cmd->sense_buffer), reason, NULL);
	}
	cmd->sense_len = len > 0 ? len : 0;
	tc->tlu->stats.check_conditions++;
	return SAM_STAT_CHECK_CONDITION;
}

static void tpt_cmd_free(struct tpt_cmd *tc)
{
	list_del(&tc->link);
	free(tc->xl);
	free(tc->priv);
	free(tc);
}

/* Let go of the command's group.  One it opened and that got nothing
 * because it failed goes too, so that a refused command leaves nothing
 * to wait out the hold time (protocol.md 8.1, 8.4). */
static void tpt_cmd_put_group(struct tpt_cmd *tc, int reason)
{
	if (!reason || !tc->opened_group ||
	    !tpt_group_forget_unused(tc->group))
		tpt_group_unhold(tc->group);
	tc->group = NULL;
}

void tpt_cmd_complete(struct tpt_cmd *tc, enum tpt_sense_reason reason)
{
	int result = SAM_STAT_GOOD;

	if (!reason && tc->aborted)
		reason = tc->abort_reason;
	if (reason)
		result = tpt_build_sense(tc, reason);
	if (tc->group)
		tpt_cmd_put_group(tc, reason);
	if (tc->in_perform) {
		/* Finished before tpt_cmd_perform() returned: it reports. */
		tc->sync_result = result;
		tc->completed = true;
		return;
	}
	target_cmd_io_done(tc->scmd, result);
	tpt_cmd_free(tc);
}

/* Take the group for the rest of the command; released ones answer why. */
int tpt_cmd_use_group(struct tpt_cmd *tc, enum tpt_group_kind kind,
		      bool create)
{
	struct tpt_group *g;
	enum tpt_sense_reason r;

	tc->opened_group = create &&
		!tpt_group_find(tc->session, tc->tlu, tc->cdb.group);
	r = tpt_group_get(tc->session, tc->tlu, tc->cdb.group, kind, create, &g);
	if (r)
		return r;
	tpt_group_hold(g);
	tc->group = g;
	return TPT_SENSE_NONE;
}

static enum tpt_sense_reason tpt_decode_data_out(struct tpt_cmd *tc,
						 const struct tpt_cdb_info *info,
						 struct tpt_field_ptr *where)
{
	struct scsi_cmd *cmd = tc->scmd;
	const uint8_t *buf = scsi_get_out_buffer(cmd);
	uint32_t len = scsi_get_out_length(cmd);
	enum tpt_sense_reason r;

	if (info->param != TPT_PARAM_XFER_LIST)
		return TPT_SENSE_NONE;
	tc->xl = malloc(sizeof(*tc->xl));
	if (!tc->xl)
		return TPT_SENSE_POOL_EXHAUSTED;
	r = tpt_xfer_list_decode(buf, len, tc->xl, where);
	if (!r)
		r = tpt_xfer_list_check(tc->xl, &tc->cdb,
					tpt_lu_block_size(tc->tlu), where);
	if (r)
		return r;
	tc->inline_data = buf + TPT_XFER_LIST_LEN(tc->xl->count);
	return TPT_SENSE_NONE;
}

static enum tpt_sense_reason tpt_check_peers(struct tpt_cmd *tc,
					     struct tpt_field_ptr *where)
{
	const struct tpt_peer_list *pl = tc->session->peers;
	unsigned int i;

	if (!tc->xl)
		return TPT_SENSE_NONE;
	for (i = 0; i < tc->xl->count; i++) {
		uint16_t peer = tc->xl->desc[i].peer;

		if (peer == TPT_PEER_ID_CONTROLLER || peer == TPT_PEER_ID_NONE ||
		    (pl && tpt_peer_list_find(pl, peer)))
			continue;
		where->valid = true;
		where->in_cdb = false;
		where->bit_valid = false;
		where->byte = TPT_XFER_LIST_LEN(i);
		tpt_cmd_fail(tc, TPT_SENSE_UNKNOWN_PEER, true, peer, i);
		return TPT_SENSE_UNKNOWN_PEER;
	}
	return TPT_SENSE_NONE;
}

static enum tpt_sense_reason tpt_cmd_prepare(struct tpt_cmd *tc,
					     struct tpt_field_ptr *where)
{
	struct scsi_cmd *cmd = tc->scmd;
	const struct tpt_cdb_info *info;
	enum tpt_sense_reason r;

	r = tpt_cdb_decode(cmd->scb, cmd->scb_len, &tc->cdb, where);
	if (r)
		return r;
	info = tpt_cdb_info(tc->cdb.opcode);
	if (!info || !handlers[tc->cdb.opcode])
		return TPT_SENSE_INVALID_OPCODE;
	if (scsi_get_data_dir(cmd) != wire_dir[info->dir]) {
		/* The iSCSI R/W bits disagree with what the opcode moves. */
		where->valid = true;
		where->in_cdb = true;
		where->bit_valid = false;
		where->byte = 0;
		return TPT_SENSE_INVALID_CDB_FIELD;
	}
	r = tpt_cdb_check_capacity(&tc->cdb, tpt_lu_nr_blocks(tc->tlu));
	if (r)
		return r;
	tc->session = tpt_session_get(cmd->c_target->tid, cmd->cmd_itn_id);
	if (!tc->session)
		return TPT_SENSE_POOL_EXHAUSTED;
	tpt_session_heard(tc->session);
	if (tc->session->superseded)
		return TPT_SENSE_PEER_LIST_CONFLICT;
	/* A LU in an array executes nothing for a nexus without the
	 * array's key; a peer list may bring it, and where the datamover
	 * listens is no secret. */
	if (tc->cdb.opcode != TPT_OP_SET_PEER_LIST &&
	    tc->cdb.opcode != TPT_OP_REPORT_ENDPOINT &&
	    !tpt_lu_serves(tc->tlu, tc->session)) {
		tpt_session_log_unbound(tc->session, tc->tlu);
		return TPT_SENSE_PEER_LIST_CONFLICT;
	}
	r = tpt_decode_data_out(tc, info, where);
	if (r)
		return r;
	if (tc->xl && !tc->session->peers)
		return TPT_SENSE_PEER_LIST_MISSING;
	return tpt_check_peers(tc, where);
}

int tpt_cmd_perform(int host_no, struct scsi_cmd *cmd)
{
	struct tpt_field_ptr where = { 0 };
	struct tpt_cmd *tc;
	int r, result;

	(void)host_no;
	tc = calloc(1, sizeof(*tc));
	if (!tc) {
		sense_data_build(cmd, ABORTED_COMMAND, 0x5503);
		return SAM_STAT_CHECK_CONDITION;
	}
	tc->scmd = cmd;
	tc->tlu = tpt_lu_of(cmd->dev);
	list_add_tail(&tc->link, &tpt_cmds);
	tc->in_perform = true;
	if (!tc->tlu) {
		r = TPT_SENSE_INVALID_OPCODE;
	} else {
		tc->tlu->stats.cmds[cmd->scb[0]]++;
		r = tpt_cmd_prepare(tc, &where);
		if (!r)
			r = handlers[tc->cdb.opcode](tc);
	}
	tc->in_perform = false;

	if (r == TPT_EXEC_ASYNC) {
		if (!tc->completed) {
			set_cmd_async(cmd);
			return SAM_STAT_GOOD;
		}
		result = tc->sync_result;
	} else {
		if (r && where.valid && !tc->failure) {
			tc->failure = r;
			tc->failure_info.field = where;
		}
		if (tc->group)
			tpt_cmd_put_group(tc, r);
		result = r ? tpt_build_sense(tc, r) : SAM_STAT_GOOD;
	}
	tpt_cmd_free(tc);
	return result;
}

void tpt_cmd_abort(struct scsi_cmd *cmd)
{
	struct tpt_cmd *tc;

	list_for_each_entry(tc, &tpt_cmds, link) {
		if (tc->scmd != cmd)
			continue;
		eprintf("tpt: aborting opcode 0x%02x of group %u\n",
			tc->cdb.opcode, tc->cdb.group);
		/* The request is dead: its buffers go as soon as nothing is
		 * moving into or out of them any more. */
		if (tc->group) {
			tpt_group_abort_cmds(tc->group,
					     TPT_SENSE_RELEASED_BY_TASK_MGMT);
			tpt_group_release(tc->group, TPT_RELEASE_TASK_MGMT);
		} else {
			tc->aborted = true;
			tc->abort_reason = TPT_SENSE_RELEASED_BY_TASK_MGMT;
		}
		return;
	}
}

/* The commands of group @g, or of session @s, end with @reason. */
static void tpt_abort_cmds(const struct tpt_group *g,
			   const struct tpt_session *s,
			   enum tpt_sense_reason reason)
{
	struct tpt_cmd *tc;

	list_for_each_entry(tc, &tpt_cmds, link) {
		if ((g && tc->group != g) || (s && tc->session != s) ||
		    tc->aborted)
			continue;
		tc->aborted = true;
		tc->abort_reason = reason;
	}
}

void tpt_group_abort_cmds(struct tpt_group *g, enum tpt_sense_reason reason)
{
	tpt_abort_cmds(g, NULL, reason);
}

void tpt_session_abort_cmds(struct tpt_session *s,
			    enum tpt_sense_reason reason)
{
	tpt_abort_cmds(NULL, s, reason);
}

bool tpt_lu_busy(const struct tpt_lu *tlu)
{
	struct tpt_cmd *tc;

	list_for_each_entry(tc, &tpt_cmds, link)
		if (tc->tlu == tlu)
			return true;
	return false;
}

/* ---- disk I/O of whole ranges ---- */

struct tpt_disk {
	struct tpt_cmd *tc;
	struct tpt_range *r;
	tpt_disk_done done;
	void *ctx;
	unsigned int pending;
	enum tpt_sense_reason failure;
	bool write;
	struct tpt_io io[];
};

static void tpt_disk_piece_done(struct tpt_io *io)
{
	struct tpt_disk *d = io->owner;

	if (io->result < 0 && !d->failure) {
		d->failure = d->write ? TPT_SENSE_WRITE_ERROR :
					TPT_SENSE_READ_ERROR;
		eprintf("tpt: %s of %zu bytes at %" PRIu64 " failed: %s\n",
			d->write ? "write" : "read", io->len, io->offset,
			strerror((int)-io->result));
	} else if (io->result >= 0) {
		if (d->write)
			d->tc->tlu->stats.bytes_written_disk += io->len;
		else
			d->tc->tlu->stats.bytes_read_disk += io->len;
	}
	if (--d->pending)
		return;
	if (d->failure)
		tpt_cmd_fail(d->tc, d->failure, false, 0, 0);
	d->done(d->tc, d->ctx, d->failure);
	free(d);
}

void tpt_disk_pieces(struct tpt_cmd *tc, struct tpt_range *r,
		     unsigned int first, unsigned int count, bool write,
		     bool sync, tpt_disk_done done, void *ctx)
{
	uint64_t base = r->lba * tpt_lu_block_size(tc->tlu);
	struct tpt_disk *d;
	unsigned int i;

	/* Nothing to do is done: with no I/O submitted no completion
	 * would ever come, and the command would wait forever. */
	if (!count) {
		done(tc, ctx, TPT_SENSE_NONE);
		return;
	}
	d = calloc(1, sizeof(*d) + count * sizeof(d->io[0]));
	if (!d) {
		done(tc, ctx, TPT_SENSE_POOL_EXHAUSTED);
		return;
	}
	d->tc = tc;
	d->r = r;
	d->done = done;
	d->ctx = ctx;
	d->write = write;
	d->pending = count;
	for (i = 0; i < count; i++) {
		struct tpt_io *io = &d->io[i];
		unsigned int p = first + i;

		io->fd = tpt_lu_fd(tc->tlu);
		io->read_inline = write ? TPT_INLINE_READ_NEVER :
					  tpt_lu_read_inline(tc->tlu);
		io->write = write;
		io->sync = sync;
		io->buf = tpt_piece_data(r, p);
		io->len = r->piece[p].len;
		io->offset = base + (uint64_t)p * r->piece_bytes;
		io->done = tpt_disk_piece_done;
		io->owner = d;
		tpt_io_submit(io);
	}
}

void tpt_disk_range(struct tpt_cmd *tc, struct tpt_range *r, bool write,
		    bool sync, tpt_disk_done done, void *ctx)
{
	tpt_disk_pieces(tc, r, 0, r->nr_pieces, write, sync, done, ctx);
}

/* Where RESULT SLOT sits in the transfer list header (protocol.md 5.1). */
#define TPT_XFER_RESULT_SLOT_BYTE 2

int tpt_cmd_result_slot_sense(struct tpt_cmd *tc, int r)
{
	/* Slot allocation refuses only the slot geometry this way: slots
	 * that do not exist, or a payload that splits a block. */
	if (r == TPT_SENSE_INVALID_PARAM_FIELD && !tc->failure) {
		tc->failure = TPT_SENSE_INVALID_PARAM_FIELD;
		tc->failure_info.field.valid = true;
		tc->failure_info.field.in_cdb = false;
		tc->failure_info.field.bit_valid = false;
		tc->failure_info.field.byte = TPT_XFER_RESULT_SLOT_BYTE;
	}
	return r;
}

int tpt_cmd_alloc_ranges(struct tpt_cmd *tc, uint16_t slot_a,
			 struct tpt_range **a, uint16_t slot_b,
			 struct tpt_range **b)
{
	unsigned int passes = tpt_xfer_list_passes(tc->xl, &tc->cdb,
						   tpt_lu_block_size(tc->tlu));
	int r;

	r = tpt_range_alloc(tc->group, tc->cdb.lba,
			    passes * tc->cdb.transfer_length, slot_a, false, a);
	if (r || !b)
		return tpt_cmd_result_slot_sense(tc, r);
	r = tpt_range_alloc(tc->group, tc->cdb.lba, tc->cdb.transfer_length,
			    slot_b, false, b);
	if (r) {
		tpt_range_free(*a);
		*a = NULL;
	}
	return tpt_cmd_result_slot_sense(tc, r);
}

static void fetch_and_read_step(struct tpt_cmd *tc, void *ctx,
				enum tpt_sense_reason r)
{
	(void)ctx;
	if (tpt_cmd_step_done(tc, r))
		tc->stage_finish(tc);
}

void tpt_cmd_fetch_and_read(struct tpt_cmd *tc, struct tpt_range *fetched,
			    struct tpt_range *medium,
			    void (*finish)(struct tpt_cmd *tc))
{
	tc->stage_finish = finish;
	tc->pending = medium ? 2 : 1;
	tpt_xfer_range(tc, fetched, tc->xl, tc->inline_data, TPT_XFER_FETCH,
		       fetch_and_read_step, NULL);
	if (medium)
		tpt_disk_range(tc, medium, false, false, fetch_and_read_step,
			       NULL);
}
