/* libtptinitiator I/O: a request is cut into commands of at most max_io
 * bytes; at most queue_depth commands are in flight, the rest wait in a
 * FIFO.  A direct command takes a pool buffer (a fresh STag) when it is
 * sent and gives it back when its status arrives, which revokes the
 * STag: nothing of ours stays reachable after the request.
 *
 * Callbacks never run inside the call that submits: finished requests go
 * to a completion list that tpt_init_service() empties last. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/tpt_init_priv.h"

static void req_finish_cmd(struct tpt_init *ctx, struct init_cmd *cmd,
			   int status)
{
	struct init_req *req = cmd->req;

	if (status && !req->status)
		req->status = status;
	if (--req->left)
		return;
	req->next_done = NULL;
	if (ctx->done_tail)
		ctx->done_tail->next_done = req;
	else
		ctx->done_head = req;
	ctx->done_tail = req;
}

void init_io_run_done(struct tpt_init *ctx)
{
	struct init_req *req;

	while ((req = ctx->done_head)) {
		ctx->done_head = req->next_done;
		if (!ctx->done_head)
			ctx->done_tail = NULL;
		ctx->outstanding--;
		ctx->stats.requests++;
		if (req->status)
			ctx->stats.errors++;
		if (req->cb)
			req->cb(ctx, req->status, req->arg);
		free(req);
	}
}

static void wait_push(struct tpt_init *ctx, struct init_cmd *cmd, bool front)
{
	if (front) {
		cmd->next = ctx->wait_head;
		ctx->wait_head = cmd;
		if (!ctx->wait_tail)
			ctx->wait_tail = cmd;
		return;
	}
	cmd->next = NULL;
	if (ctx->wait_tail)
		ctx->wait_tail->next = cmd;
	else
		ctx->wait_head = cmd;
	ctx->wait_tail = cmd;
}

static struct init_cmd *wait_pop(struct tpt_init *ctx)
{
	struct init_cmd *cmd = ctx->wait_head;

	if (cmd) {
		ctx->wait_head = cmd->next;
		if (!ctx->wait_head)
			ctx->wait_tail = NULL;
	}
	return cmd;
}

void init_io_fail_waiting(struct tpt_init *ctx, int status)
{
	struct init_cmd *cmd;

	while ((cmd = wait_pop(ctx)))
		req_finish_cmd(ctx, cmd, status);
}

static const char *cmd_name(const struct init_cmd *cmd)
{
	switch (cmd->kind) {
	case CMD_READ:
		return cmd->direct ? "TPT HOST READ" : "READ(16)";
	case CMD_WRITE:
		return cmd->direct ? "TPT HOST WRITE" : "WRITE(16)";
	default:
		return "SYNCHRONIZE CACHE(16)";
	}
}

static void release_buf(struct init_cmd *cmd)
{
	if (cmd->buf) {
		/* Back to the pool, deregistered: its STag is dead. */
		tpt_dm_buf_release(cmd->buf);
		cmd->buf = NULL;
	}
}

static void cmd_cb(struct iscsi_context *iscsi, int status,
		   void *command_data, void *private_data)
{
	struct init_cmd *cmd = private_data;
	struct tpt_init *ctx = cmd->req->ctx;
	struct scsi_task *task = cmd->task;
	size_t bytes = (size_t)cmd->blocks * ctx->block_size;
	int err = 0;

	(void)iscsi;
	(void)command_data;
	ctx->inflight--;
	cmd->task = NULL;
	if (status == SCSI_STATUS_GOOD) {
		if (cmd->direct && cmd->kind == CMD_READ) {
			memcpy(cmd->data, tpt_dm_buf_addr(cmd->buf), bytes);
			ctx->stats.direct_bytes_in += bytes;
		} else if (cmd->direct && cmd->kind == CMD_WRITE) {
			ctx->stats.direct_bytes_out += bytes;
		} else if (cmd->kind == CMD_READ) {
			ctx->stats.plain_bytes_in += bytes;
		} else if (cmd->kind == CMD_WRITE) {
			ctx->stats.plain_bytes_out += bytes;
		}
		release_buf(cmd);
		scsi_free_scsi_task(task);
		req_finish_cmd(ctx, cmd, 0);
		return;
	}
	release_buf(cmd);
	if (status == SCSI_STATUS_CHECK_CONDITION &&
	    ctx->state == INIT_READY) {
		/* A new nexus's UNIT ATTENTIONs: send again. */
		if (task->sense.key == SCSI_SENSE_UNIT_ATTENTION &&
		    ++cmd->ua_retries < INIT_UA_RETRIES) {
			scsi_free_scsi_task(task);
			wait_push(ctx, cmd, true);
			return;
		}
		/* The controller no longer holds our key (TPT HOST KEY NOT
		 * REGISTERED, NOT READY 80h/03h) or no longer knows the
		 * command: go on through the controller rather than fail,
		 * unless the caller insisted on direct. */
		if (cmd->direct && ctx->cfg.direct == TPT_INIT_DIRECT_AUTO &&
		    (init_sense_is(task, TPT_SENSE_HOST_KEY_MISSING) ||
		     init_sense_is(task, TPT_SENSE_INVALID_OPCODE))) {
			init_status_error(ctx, cmd_name(cmd), status, task);
			init_log(ctx, TPT_INIT_LOG_WARNING, "%s: falling back "
				 "to plain SCSI", ctx->err);
			ctx->direct = false;
			scsi_free_scsi_task(task);
			wait_push(ctx, cmd, true);
			return;
		}
	}
	err = init_status_error(ctx, cmd_name(cmd), status, task);
	if (task)
		scsi_free_scsi_task(task);
	req_finish_cmd(ctx, cmd, err);
}

static int send_direct(struct tpt_init *ctx, struct init_cmd *cmd)
{
	size_t bytes = (size_t)cmd->blocks * ctx->block_size;
	struct tpt_xfer_list list;
	struct tpt_cdb hc = { 0 };
	struct iscsi_data data;
	uint64_t base;
	uint8_t cdb[16];
	int ret;

	ret = tpt_dm_buf_get(ctx->dm, 0, bytes, cmd->kind == CMD_READ ?
			     TPT_DM_ACCESS_REMOTE_WRITE :
			     TPT_DM_ACCESS_REMOTE_READ, &cmd->buf);
	if (ret) {
		cmd->buf = NULL;
		return ret;
	}
	if (cmd->kind == CMD_WRITE)
		memcpy(tpt_dm_buf_addr(cmd->buf), cmd->data, bytes);
	base = tpt_dm_buf_rma_base(cmd->buf);
	memset(&list, 0, offsetof(struct tpt_xfer_list, desc[1]));
	list.count = 1;
	list.result_slot = TPT_SLOT_NONE;
	list.total_length = bytes;
	list.desc[0].peer = TPT_PEER_ID_INITIATOR;
	list.desc[0].flags = base ? TPT_XFER_VIRT_ADDR : 0;
	list.desc[0].length = (uint32_t)bytes;
	list.desc[0].stag = tpt_dm_buf_stag(cmd->buf);
	list.desc[0].offset = base;
	ret = tpt_xfer_list_encode(&list, cmd->list, sizeof(cmd->list));
	if (ret < 0) {
		init_seterr(ctx, "cannot encode the transfer list of %s",
			    cmd_name(cmd));
		release_buf(cmd);
		return -EINVAL;
	}
	hc.opcode = cmd->kind == CMD_WRITE ? TPT_OP_HOST_WRITE :
		TPT_OP_HOST_READ;
	hc.flags = cmd->kind == CMD_WRITE && cmd->fua ? TPT_CDB_FUA : 0;
	hc.lba = cmd->lba;
	hc.transfer_length = cmd->blocks;
	if (tpt_cdb_encode(&hc, cdb, sizeof(cdb)) != (int)sizeof(cdb)) {
		init_seterr(ctx, "cannot encode %s of %u blocks at %llu",
			    cmd_name(cmd), cmd->blocks,
			    (unsigned long long)cmd->lba);
		release_buf(cmd);
		return -EINVAL;
	}
	cmd->task = scsi_create_task(16, cdb, SCSI_XFER_WRITE,
				     (int)sizeof(cmd->list));
	if (!cmd->task) {
		release_buf(cmd);
		return -ENOMEM;
	}
	data.size = sizeof(cmd->list);
	data.data = cmd->list;
	if (iscsi_scsi_command_async(ctx->iscsi, ctx->lun, cmd->task, cmd_cb,
				     &data, cmd)) {
		scsi_free_scsi_task(cmd->task);
		cmd->task = NULL;
		release_buf(cmd);
		return -EIO;
	}
	return 0;
}

static int send_plain(struct tpt_init *ctx, struct init_cmd *cmd)
{
	uint32_t bs = ctx->block_size;
	uint32_t bytes = cmd->blocks * bs;

	switch (cmd->kind) {
	case CMD_READ:
		cmd->task = iscsi_read16_task(ctx->iscsi, ctx->lun, cmd->lba,
					      bytes, (int)bs, 0, 0, 0, 0, 0,
					      cmd_cb, cmd);
		/* Straight into the caller's buffer: libiscsi fills it as
		 * Data-In arrives, which is after this returns. */
		if (cmd->task && scsi_task_add_data_in_buffer(cmd->task,
							      (int)bytes,
							      cmd->data)) {
			/* Queued already: its callback finishes it. */
			init_seterr(ctx, "out of memory");
			iscsi_scsi_cancel_task(ctx->iscsi, cmd->task);
			return 1;
		}
		break;
	case CMD_WRITE:
		cmd->task = iscsi_write16_task(ctx->iscsi, ctx->lun, cmd->lba,
					       cmd->data, bytes, (int)bs, 0, 0,
					       cmd->fua, 0, 0, cmd_cb, cmd);
		break;
	case CMD_FLUSH:
		cmd->task = iscsi_synchronizecache16_task(ctx->iscsi, ctx->lun,
							  0, 0, 0, 0, cmd_cb,
							  cmd);
		break;
	}
	return cmd->task ? 0 : -EIO;
}

void init_io_pump(struct tpt_init *ctx)
{
	struct init_cmd *cmd;
	int ret;

	while (ctx->state == INIT_READY &&
	       ctx->inflight < ctx->cfg.queue_depth &&
	       (cmd = wait_pop(ctx))) {
		cmd->direct = ctx->direct && cmd->kind != CMD_FLUSH;
		/* Counted in flight first: a send that fails after libiscsi
		 * queued it ends in cmd_cb, which counts it out. */
		ctx->inflight++;
		ret = cmd->direct ? send_direct(ctx, cmd) :
			send_plain(ctx, cmd);
		if (ret > 0)
			continue;
		if (ret == -EAGAIN) {
			/* Pool dry (cannot happen while every command
			 * holds at most one buffer; kept as back-pressure). */
			ctx->inflight--;
			wait_push(ctx, cmd, true);
			return;
		}
		if (ret) {
			ctx->inflight--;
			if (ret != -EINVAL)
				init_seterr(ctx, "cannot send %s: %s",
					    cmd_name(cmd),
					    iscsi_get_error(ctx->iscsi));
			req_finish_cmd(ctx, cmd, ret);
			continue;
		}
		ctx->stats.commands++;
	}
}

/* Allocates a request of @len bytes cut into commands, queues them. */
static int submit(struct tpt_init *ctx, enum cmd_kind kind, uint8_t *buf,
		  size_t len, uint64_t offset, bool fua, tpt_init_cb cb,
		  void *arg)
{
	uint32_t bs = ctx->block_size;
	unsigned int n, i;
	struct init_req *req;
	size_t done = 0;

	if (ctx->state != INIT_READY) {
		init_seterr(ctx, "not connected%s", ctx->state == INIT_DEAD ?
			    " (session lost or connect failed)" : "");
		return -ENOTCONN;
	}
	if (kind == CMD_FLUSH) {
		n = 1;
	} else {
		if (!len || len % bs || offset % bs) {
			init_seterr(ctx, "offset %llu length %zu: not whole "
				    "blocks of %u bytes",
				    (unsigned long long)offset, len, bs);
			return -EINVAL;
		}
		if (offset / bs > ctx->nr_blocks ||
		    len / bs > ctx->nr_blocks - offset / bs) {
			init_seterr(ctx, "offset %llu length %zu: past the "
				    "end of the LUN (%llu bytes)",
				    (unsigned long long)offset, len,
				    (unsigned long long)tpt_init_size(ctx));
			return -EINVAL;
		}
		n = (unsigned int)((len + ctx->max_io - 1) / ctx->max_io);
	}
	req = calloc(1, sizeof(*req) + n * sizeof(req->cmd[0]));
	if (!req) {
		init_seterr(ctx, "out of memory");
		return -ENOMEM;
	}
	req->ctx = ctx;
	req->cb = cb;
	req->arg = arg;
	req->ncmds = req->left = n;
	for (i = 0; i < n; i++) {
		struct init_cmd *cmd = &req->cmd[i];
		size_t piece = len - done < ctx->max_io ? len - done :
			ctx->max_io;

		cmd->req = req;
		cmd->kind = kind;
		cmd->fua = fua;
		cmd->data = buf ? buf + done : NULL;
		cmd->lba = (offset + done) / bs;
		cmd->blocks = (uint32_t)(piece / bs);
		done += piece;
		wait_push(ctx, cmd, false);
	}
	ctx->outstanding++;
	init_io_pump(ctx);
	return 0;
}

int tpt_init_pread_async(struct tpt_init *ctx, void *buf, size_t len,
			 uint64_t offset, tpt_init_cb cb, void *arg)
{
	return submit(ctx, CMD_READ, buf, len, offset, false, cb, arg);
}

int tpt_init_pwrite_async(struct tpt_init *ctx, const void *buf, size_t len,
			  uint64_t offset, unsigned int flags, tpt_init_cb cb,
			  void *arg)
{
	if (flags & ~TPT_INIT_FUA) {
		init_seterr(ctx, "pwrite: unknown flags 0x%x", flags);
		return -EINVAL;
	}
	/* libiscsi's WRITE(16) takes a non-const pointer but only reads. */
	return submit(ctx, CMD_WRITE, (uint8_t *)(uintptr_t)buf, len, offset,
		      flags & TPT_INIT_FUA, cb, arg);
}

int tpt_init_flush_async(struct tpt_init *ctx, tpt_init_cb cb, void *arg)
{
	return submit(ctx, CMD_FLUSH, NULL, 0, 0, false, cb, arg);
}
