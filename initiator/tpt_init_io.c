/* libtptinitiator I/O: a request is cut into pieces of at most max_io
 * bytes; at most queue_depth pieces are in flight, the rest wait in a
 * FIFO.  A direct piece takes a pool buffer (a fresh STag) when it is
 * sent and gives it back when its status arrives, which revokes the
 * STag: nothing of ours stays reachable after the request.
 *
 * Submitting only queues; the queue is sent when the caller is about to
 * sleep (tpt_init_get_fds) or services the context.  Direct pieces that
 * continue one another then go as one command naming each one's buffer
 * (merge_max), as a block layer merges adjacent requests: the
 * controller's cost is per command, and so is most of ours.
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
	ctx->nr_waiting++;
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
		ctx->nr_waiting--;
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

/* The pieces sent as @cmd's command, first included. */
static unsigned int pieces_of(const struct init_cmd *cmd)
{
	unsigned int n = 0;

	for (; cmd; cmd = cmd->merged)
		n++;
	return n;
}

/* Back to the pool, deregistered: their STags are dead. */
static void release_bufs(struct init_cmd *cmd)
{
	free(cmd->list);
	cmd->list = NULL;
	for (; cmd; cmd = cmd->merged) {
		if (cmd->buf)
			tpt_dm_buf_release(cmd->buf);
		cmd->buf = NULL;
	}
}

/* @cmd's pieces to the front of the wait queue, each on its own again
 * and in order: sent again, they merge as the queue then allows.  The
 * chain is already in order, so it is spliced in front whole. */
static void wait_push_pieces(struct tpt_init *ctx, struct init_cmd *cmd)
{
	struct init_cmd *last = cmd;

	for (;;) {
		ctx->nr_waiting++;
		last->next = last->merged;
		last->merged = NULL;
		if (!last->next)
			break;
		last = last->next;
	}
	last->next = ctx->wait_head;
	ctx->wait_head = cmd;
	if (!ctx->wait_tail)
		ctx->wait_tail = last;
}

/* Every piece of @cmd's command finished with @status. */
static void finish_pieces(struct tpt_init *ctx, struct init_cmd *cmd,
			  int status)
{
	while (cmd) {
		struct init_cmd *next = cmd->merged;

		cmd->merged = NULL;
		req_finish_cmd(ctx, cmd, status);
		cmd = next;
	}
}

/* A controller from before merged commands refuses a list of several
 * pieces at its DESCRIPTOR COUNT (protocol.md, version history). */
static bool merge_refused(const struct init_cmd *cmd,
			  const struct scsi_task *task)
{
	return cmd->merged &&
	       init_sense_is(task, TPT_SENSE_INVALID_PARAM_FIELD) &&
	       task->sense.sense_specific && !task->sense.ill_param_in_cdb &&
	       task->sense.field_pointer == 0;
}

/* A target could not move this command's data to or from our memory
 * (protocol.md 4.19, 9.1): a passive-peer sense naming the initiator,
 * as the controller passes it on.  The array is fine; the path between us and that target is
 * not (a route lost, a firewall), or it refuses our datamover. */
static bool host_path_failed(const struct scsi_task *task)
{
	struct tpt_sense sense;

	if (!init_task_sense(task, &sense))
		return false;
	return tpt_sense_peer_failed(&sense) &&
	       sense.info.information == TPT_PEER_ID_INITIATOR;
}

/*
 * A target could not reach @cmd's host buffers (host_path_failed()):
 * plain SCSI for now, direct again later, since a route comes back.  A
 * retry that finds it still lost waits twice as long, and so does one
 * lost again before direct has held a while (path_held_at): requests
 * that never touched the target that cannot reach us complete direct
 * meanwhile, and say nothing of its path.  A command sent before the
 * last retry says nothing about the path now.
 */
static void path_lost(struct tpt_init *ctx, const struct init_cmd *cmd)
{
	bool again = ctx->path_lost || init_now() < ctx->path_held_at;

	if (!ctx->direct || cmd->direct_try != ctx->direct_tries)
		return;
	if (!again)
		ctx->direct_retry_wait = ctx->cfg.direct_retry_s;
	else if (ctx->direct_retry_wait < 16 * ctx->cfg.direct_retry_s)
		ctx->direct_retry_wait *= 2;
	init_log(ctx, TPT_INIT_LOG_WARNING, "%s: %s plain SCSI; direct again "
		 "in %u s", ctx->err, ctx->path_lost ? "still lost, back to" :
		 again ? "lost again, back to" : "falling back to",
		 ctx->direct_retry_wait);
	ctx->path_lost = true;
	ctx->direct = false;
	ctx->direct_retry_at = init_now() + ctx->direct_retry_wait;
	ctx->stats.path_fallbacks++;
}

/* Plain since a target could not reach us, and the wait is over. */
static void retry_direct(struct tpt_init *ctx)
{
	if (ctx->direct || !ctx->path_lost ||
	    init_now() < ctx->direct_retry_at)
		return;
	init_log(ctx, TPT_INIT_LOG_INFO, "trying host-direct again");
	ctx->direct = true;
	ctx->direct_tries++;
}

static void cmd_cb(struct iscsi_context *iscsi, int status,
		   void *command_data, void *private_data)
{
	struct init_cmd *cmd = private_data, *p;
	struct tpt_init *ctx = cmd->req->ctx;
	struct scsi_task *task = cmd->task;
	int err = 0;

	(void)iscsi;
	(void)command_data;
	ctx->inflight -= pieces_of(cmd);
	ctx->inflight_cmds--;
	cmd->task = NULL;
	if (status == SCSI_STATUS_GOOD) {
		/* Not one sent before the path was lost: it says nothing of
		 * the path now. */
		if (cmd->direct && ctx->path_lost && ctx->direct &&
		    cmd->direct_try == ctx->direct_tries) {
			init_log(ctx, TPT_INIT_LOG_WARNING, "host-direct again");
			ctx->path_lost = false;
			ctx->path_held_at = init_now() +
					    ctx->direct_retry_wait +
					    INIT_PATH_HOLD_S;
		}
		for (p = cmd; p; p = p->merged) {
			size_t bytes = (size_t)p->blocks * ctx->block_size;

			if (p->direct && p->kind == CMD_READ) {
				memcpy(p->data, tpt_dm_buf_addr(p->buf), bytes);
				ctx->stats.direct_bytes_in += bytes;
			} else if (p->direct && p->kind == CMD_WRITE) {
				ctx->stats.direct_bytes_out += bytes;
			} else if (p->kind == CMD_READ) {
				ctx->stats.plain_bytes_in += bytes;
			} else if (p->kind == CMD_WRITE) {
				ctx->stats.plain_bytes_out += bytes;
			}
		}
		release_bufs(cmd);
		scsi_free_scsi_task(task);
		finish_pieces(ctx, cmd, 0);
		return;
	}
	release_bufs(cmd);
	if (status == SCSI_STATUS_CHECK_CONDITION &&
	    ctx->state == INIT_READY) {
		/* A new nexus's UNIT ATTENTIONs: send again. */
		if (task->sense.key == SCSI_SENSE_UNIT_ATTENTION &&
		    ++cmd->ua_retries < INIT_UA_RETRIES) {
			scsi_free_scsi_task(task);
			wait_push_pieces(ctx, cmd);
			return;
		}
		if (merge_refused(cmd, task)) {
			init_log(ctx, TPT_INIT_LOG_INFO, "the controller takes "
				 "one buffer per command: requests are no "
				 "longer merged");
			ctx->cfg.merge_max = 1;
			scsi_free_scsi_task(task);
			wait_push_pieces(ctx, cmd);
			return;
		}
		/* The controller no longer holds our key (TPT HOST KEY NOT
		 * REGISTERED, NOT READY 80h/03h), no longer knows the
		 * command, or a target cannot reach us: go on through the
		 * controller rather than fail, unless the caller insisted on
		 * direct.  Sending again is safe: the plain WRITE writes the
		 * same data over whatever the failed one left. */
		if (cmd->direct && ctx->cfg.direct == TPT_INIT_DIRECT_AUTO &&
		    (init_sense_is(task, TPT_SENSE_HOST_KEY_MISSING) ||
		     init_sense_is(task, TPT_SENSE_INVALID_OPCODE) ||
		     host_path_failed(task))) {
			init_status_error(ctx, cmd_name(cmd), status, task);
			if (host_path_failed(task)) {
				path_lost(ctx, cmd);
			} else {
				init_log(ctx, TPT_INIT_LOG_WARNING, "%s: "
					 "falling back to plain SCSI",
					 ctx->err);
				ctx->direct = false;
			}
			scsi_free_scsi_task(task);
			wait_push_pieces(ctx, cmd);
			return;
		}
	}
	err = init_status_error(ctx, cmd_name(cmd), status, task);
	if (task)
		scsi_free_scsi_task(task);
	finish_pieces(ctx, cmd, err);
}

/* TPT HOST READ/WRITE of @cmd and the pieces merged after it: each piece
 * in a pool buffer of its own, under its own STag, named by a descriptor
 * of the transfer list in LBA order (protocol.md 4.19). */
static int send_direct(struct tpt_init *ctx, struct init_cmd *cmd)
{
	unsigned int n = pieces_of(cmd), i;
	size_t list_len = TPT_XFER_LIST_LEN(n);
	struct tpt_xfer_list *list;
	struct tpt_cdb hc = { 0 };
	struct iscsi_data data;
	struct init_cmd *p;
	uint32_t blocks = 0;
	uint8_t cdb[16];
	int ret;

	/* Zeroed: every field this does not set (weights, reserved) is 0. */
	list = calloc(1, offsetof(struct tpt_xfer_list, desc[n]));
	cmd->list = malloc(list_len);
	if (!list || !cmd->list) {
		free(list);
		free(cmd->list);
		cmd->list = NULL;
		return -ENOMEM;
	}
	list->count = (uint16_t)n;
	list->result_slot = TPT_SLOT_NONE;
	list->total_length = 0;
	for (p = cmd, i = 0; p; p = p->merged, i++) {
		size_t bytes = (size_t)p->blocks * ctx->block_size;
		struct tpt_xfer_desc *d = &list->desc[i];
		uint64_t base;

		ret = tpt_dm_buf_get(ctx->dm, 0, bytes, p->kind == CMD_READ ?
				     TPT_DM_ACCESS_REMOTE_WRITE :
				     TPT_DM_ACCESS_REMOTE_READ, &p->buf);
		if (ret) {
			p->buf = NULL;
			free(list);
			release_bufs(cmd);
			return ret;
		}
		if (p->kind == CMD_WRITE)
			memcpy(tpt_dm_buf_addr(p->buf), p->data, bytes);
		base = tpt_dm_buf_rma_base(p->buf);
		d->peer = TPT_PEER_ID_INITIATOR;
		d->flags = base ? TPT_XFER_VIRT_ADDR : 0;
		d->length = (uint32_t)bytes;
		d->stag = tpt_dm_buf_stag(p->buf);
		d->offset = base;
		list->total_length += bytes;
		blocks += p->blocks;
	}
	ret = tpt_xfer_list_encode(list, cmd->list, list_len);
	free(list);
	if (ret < 0) {
		init_seterr(ctx, "cannot encode the transfer list of %s",
			    cmd_name(cmd));
		release_bufs(cmd);
		return -EINVAL;
	}
	hc.opcode = cmd->kind == CMD_WRITE ? TPT_OP_HOST_WRITE :
		TPT_OP_HOST_READ;
	hc.flags = cmd->kind == CMD_WRITE && cmd->fua ? TPT_CDB_FUA : 0;
	hc.lba = cmd->lba;
	hc.transfer_length = blocks;
	if (tpt_cdb_encode(&hc, cdb, sizeof(cdb)) != (int)sizeof(cdb)) {
		init_seterr(ctx, "cannot encode %s of %u blocks at %llu",
			    cmd_name(cmd), blocks,
			    (unsigned long long)cmd->lba);
		release_bufs(cmd);
		return -EINVAL;
	}
	cmd->task = scsi_create_task(16, cdb, SCSI_XFER_WRITE, (int)list_len);
	if (!cmd->task) {
		release_bufs(cmd);
		return -ENOMEM;
	}
	data.size = list_len;
	data.data = cmd->list;
	if (iscsi_scsi_command_async(ctx->iscsi, ctx->lun, cmd->task, cmd_cb,
				     &data, cmd)) {
		scsi_free_scsi_task(cmd->task);
		cmd->task = NULL;
		release_bufs(cmd);
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

/* Whether @next, first in the wait queue, continues @last's command
 * (@blocks so far, @n pieces of at most @max) so that it can go in it. */
static bool merges(const struct tpt_init *ctx, const struct init_cmd *last,
		   const struct init_cmd *next, uint32_t blocks, unsigned int n,
		   unsigned int max)
{
	return next && n < max &&
	       ctx->inflight < ctx->cfg.queue_depth &&
	       next->kind == last->kind && next->kind != CMD_FLUSH &&
	       next->fua == last->fua &&
	       next->lba == last->lba + last->blocks &&
	       (uint64_t)blocks + next->blocks <=
			INIT_MERGE_BYTES / ctx->block_size;
}

void init_io_pump(struct tpt_init *ctx)
{
	struct init_cmd *cmd, *last;
	int ret;

	while (ctx->state == INIT_READY &&
	       ctx->inflight < ctx->cfg.queue_depth &&
	       (cmd = wait_pop(ctx))) {
		unsigned int n = 1, max = ctx->cfg.merge_max;
		uint32_t blocks = cmd->blocks;

		/*
		 * With nothing in flight, half of what waits at most: all of
		 * it in one command would leave the array idle while the
		 * host handles its completion, and a queue that completed
		 * at once would go on as one command, in lock-step.  Two
		 * commands overlap and drift apart.
		 */
		if (!ctx->inflight_cmds && max > (ctx->nr_waiting + 2) / 2)
			max = (ctx->nr_waiting + 2) / 2;
		retry_direct(ctx);
		cmd->direct = ctx->direct && cmd->kind != CMD_FLUSH;
		cmd->direct_try = ctx->direct_tries;
		/* Counted in flight first: a send that fails after libiscsi
		 * queued it ends in cmd_cb, which counts it out. */
		ctx->inflight++;
		ctx->inflight_cmds++;
		/* Requests that continue this one go with it: the
		 * controller's cost is per command, not per byte. */
		for (last = cmd; cmd->direct &&
		     merges(ctx, last, ctx->wait_head, blocks, n, max); n++) {
			last->merged = wait_pop(ctx);
			last = last->merged;
			last->direct = true;
			blocks += last->blocks;
			ctx->inflight++;
		}
		ret = cmd->direct ? send_direct(ctx, cmd) :
			send_plain(ctx, cmd);
		if (ret > 0)
			continue;
		if (ret == -EAGAIN) {
			/* Pool dry (cannot happen while every piece holds
			 * at most one buffer; kept as back-pressure). */
			ctx->inflight -= n;
			ctx->inflight_cmds--;
			wait_push_pieces(ctx, cmd);
			return;
		}
		if (ret) {
			ctx->inflight -= n;
			ctx->inflight_cmds--;
			if (ret != -EINVAL)
				init_seterr(ctx, "cannot send %s: %s",
					    cmd_name(cmd),
					    iscsi_get_error(ctx->iscsi));
			finish_pieces(ctx, cmd, ret);
			continue;
		}
		ctx->stats.commands++;
		ctx->stats.merged += n - 1;
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
	/* Sent by the next tpt_init_get_fds() or tpt_init_service(). */
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
