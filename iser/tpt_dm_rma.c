/* Put_Data / Get_Data: one RMA operation of any length, split into
 * chunk_bytes pieces with at most max_inflight of them posted per peer.
 * Ops queue FIFO per peer; each completion frees a slot and posts the
 * next chunk, which keeps the pipe full without a burst of posts (paper
 * 001's chunked pipelining, 004's many operations in flight).
 *
 * Operation descriptors come from a table sized at open: an owner that
 * outruns the network gets -EAGAIN, never unbounded queues. */
#include "iser/tpt_dm_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

/* Enough for every pool buffer to be in a few transfers at once, and
 * plenty for owners that register their own memory. */
#define DM_MIN_OPS 1024
#define DM_OPS_PER_POOL_BUF 4
#define DM_CQ_BATCH 32
/* Batches per dm_cq_progress call before the round loop takes over. */
#define DM_CQ_MAX_BATCHES 64

int dm_ops_open(struct tpt_dm *dm)
{
	size_t i, count = dm->pool_count * DM_OPS_PER_POOL_BUF;

	if (count < DM_MIN_OPS)
		count = DM_MIN_OPS;
	dm->ops = calloc(count, sizeof(*dm->ops));
	if (!dm->ops)
		return dm_error(dm, -ENOMEM, "out of memory");
	dm->op_count = count;
	for (i = count; i-- > 0;) {
		dm_list_init(&dm->ops[i].link);
		dm->ops[i].next_free = dm->op_free;
		dm->op_free = &dm->ops[i];
	}
	return 0;
}

void dm_ops_close(struct tpt_dm *dm)
{
	free(dm->ops);
	dm->ops = NULL;
	dm->op_free = NULL;
}

static void dm_op_finish(struct tpt_dm *dm, struct dm_op *op, int status)
{
	tpt_dm_done_cb cb = op->cb;
	void *arg = op->arg;

	/* Back to the table before the callback, which may well start the
	 * next transfer. */
	dm_list_del(&op->link);
	op->in_use = false;
	op->peer = NULL;
	op->local = NULL;
	op->next_free = dm->op_free;
	dm->op_free = op;
	if (cb) {
		dm->callbacks_run++;
		cb(status, arg);
	}
}

void dm_peer_fail_ops(struct tpt_dm_peer *peer, int status)
{
	struct tpt_dm *dm = peer->dm;
	struct dm_list doomed;
	unsigned int i;

	/* Orphan the chunks first: the callbacks below recycle op slots,
	 * and a late completion must not find one through a chunk. */
	for (i = 0; i < dm->cfg.max_inflight; i++)
		peer->chunks[i].op = NULL;
	dm_list_init(&doomed);
	dm_list_splice_tail(&doomed, &peer->posted);
	dm_list_splice_tail(&doomed, &peer->queued);
	while (!dm_list_empty(&doomed)) {
		struct dm_op *op =
			dm_container_of(doomed.next, struct dm_op, link);

		dm_op_finish(dm, op, op->status ? op->status : status);
	}
}

static ssize_t dm_post_chunk(struct tpt_dm_peer *peer, struct dm_op *op,
			     struct dm_chunk *chunk, size_t len)
{
	struct tpt_dm *dm = peer->dm;
	size_t done = op->posted_bytes;
	char *local = (char *)op->local->addr + op->local_off + done;
	void *desc = fi_mr_desc(op->local->mr);
	uint64_t remote = op->rma_addr + done;
	struct iovec iov = { .iov_base = local, .iov_len = len };
	struct fi_rma_iov rma_iov = {
		.addr = remote,
		.len = len,
		.key = op->stag,
	};
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = 0,
		.rma_iov = &rma_iov,
		.rma_iov_count = 1,
		.context = chunk,
		.data = 0,
	};

	if (dm->inject_post_eagain) {
		dm->inject_post_eagain--;
		return -FI_EAGAIN;
	}
	if (op->is_put)
		/* fi_write would give the provider's default completion
		 * semantics; tcp's is "left our socket", we want "landed". */
		return fi_writemsg(peer->ep, &msg,
				   done + len == op->len ?
				   dm->fab.write_flags : dm->early_write_flags);
	return fi_read(peer->ep, local, len, desc, 0, remote, op->stag, chunk);
}

void dm_peer_kick(struct tpt_dm_peer *peer)
{
	struct tpt_dm *dm = peer->dm;

	if (peer->state != DM_PEER_UP || peer->fail_pending)
		return;
	peer->kick_pending = false;
	while (!dm_list_empty(&peer->queued) && peer->free_chunks) {
		struct dm_op *op =
			dm_container_of(peer->queued.next, struct dm_op, link);
		struct dm_chunk *chunk = peer->free_chunks;
		size_t len = op->len - op->posted_bytes;
		ssize_t ret;

		if (len > dm->cfg.chunk_bytes)
			len = dm->cfg.chunk_bytes;
		ret = dm_post_chunk(peer, op, chunk, len);
		if (ret == -FI_EAGAIN) {
			/* The provider's queue is full: its completions will
			 * make room.  With none of ours outstanding no
			 * completion of ours will call us back, so ask
			 * progress to retry. */
			peer->kick_pending = true;
			if (!peer->chunks_posted)
				dm_wake(dm);
			return;
		}
		if (ret) {
			/* Never run callbacks from inside the owner's call:
			 * progress tears the peer down. */
			dm_log(dm, "posting %s of %zu bytes to %s: %s",
			       op->is_put ? "write" : "read", len,
			       peer->addr_str, fi_strerror((int)-ret));
			peer->fail_pending = tpt_dm_fabric_errno(ret);
			dm_wake(dm);
			return;
		}
		peer->free_chunks = chunk->next_free;
		chunk->next_free = NULL;
		chunk->op = op;
		chunk->len = len;
		peer->chunks_posted++;
		op->chunks_out++;
		op->posted_bytes += len;
		dm->stats.rma_ops++;
		if (op->posted_bytes == op->len) {
			dm_list_del(&op->link);
			dm_list_add_tail(&peer->posted, &op->link);
		}
	}
}

static int dm_rma_start(struct tpt_dm_peer *peer, bool is_put,
			struct tpt_dm_buf *local, size_t local_off,
			uint64_t stag, uint64_t rma_addr, size_t len,
			tpt_dm_done_cb cb, void *arg)
{
	const char *what = is_put ? "put" : "get";
	struct tpt_dm *dm;
	struct dm_op *op;

	if (!peer || !local)
		return -EINVAL;
	dm = peer->dm;
	if (peer->released)
		return dm_error(dm, -EINVAL, "%s: peer handle released", what);
	if (peer->state != DM_PEER_UP || peer->fail_pending)
		return dm_error(dm, -ENOTCONN, "%s: peer %s not connected",
				what, peer->addr_str);
	if (local->dm != dm || !local->in_use || !local->mr)
		return dm_error(dm, -EINVAL, "%s: local buffer not registered "
				"with this context", what);
	/* An endpoint reaches only its own domain's registrations (verbs
	 * would fail the local side too): the scopes must be the same. */
	if (local->scope != peer->scope)
		return dm_error(dm, -EINVAL, "%s: local buffer is in another "
				"scope than peer %s", what, peer->addr_str);
	if (!len || local_off > local->len || len > local->len - local_off)
		return dm_error(dm, -EINVAL, "%s: %zu bytes at offset %zu do "
				"not fit a %zu byte buffer", what, len,
				local_off, local->len);
	if (rma_addr + len < rma_addr)
		return dm_error(dm, -EINVAL, "%s: remote range wraps", what);
	op = dm->op_free;
	if (!op)
		return dm_error(dm, -EAGAIN, "%s: all %zu operation slots in "
				"use", what, dm->op_count);
	dm->op_free = op->next_free;
	op->next_free = NULL;
	op->in_use = true;
	op->peer = peer;
	op->is_put = is_put;
	op->local = local;
	op->local_off = local_off;
	op->stag = stag;
	op->rma_addr = rma_addr;
	op->len = len;
	op->posted_bytes = 0;
	op->chunks_out = 0;
	op->status = 0;
	op->cb = cb;
	op->arg = arg;
	/* An idle peer's stall clock starts with its first operation. */
	if (dm_list_empty(&peer->queued) && dm_list_empty(&peer->posted))
		peer->last_progress = dm_now_ms();
	dm_list_add_tail(&peer->queued, &op->link);
	if (is_put)
		dm->stats.puts++;
	else
		dm->stats.gets++;
	dm_peer_kick(peer);
	return 0;
}

int tpt_dm_put(struct tpt_dm_peer *peer, struct tpt_dm_buf *local,
	       size_t local_off, uint64_t stag, uint64_t rma_addr, size_t len,
	       tpt_dm_done_cb cb, void *arg)
{
	return dm_rma_start(peer, true, local, local_off, stag, rma_addr, len,
			    cb, arg);
}

int tpt_dm_get(struct tpt_dm_peer *peer, struct tpt_dm_buf *local,
	       size_t local_off, uint64_t stag, uint64_t rma_addr, size_t len,
	       tpt_dm_done_cb cb, void *arg)
{
	return dm_rma_start(peer, false, local, local_off, stag, rma_addr,
			    len, cb, arg);
}

/* What a failed RMA means to the owner: the passive side went away
 * (-ECONNRESET; the tcp provider reports its flushed queue as cancelled),
 * did not answer (-ETIMEDOUT), refused the STag (-EACCES: verbs' remote
 * access error; tcp drops the connection instead), or failed otherwise
 * (-EIO). */
static int dm_rma_errno(const struct tpt_dm *dm,
			const struct fi_cq_err_entry *err)
{
	/* The verbs provider reports every work completion error but a
	 * flush as EIO; the reason is in prov_errno, an ibv_wc_status. */
	if (dm->provider_is_verbs) {
		switch (err->prov_errno) {
		case IBV_WC_REM_ACCESS_ERR:
			return -EACCES;
		case IBV_WC_RETRY_EXC_ERR:
		case IBV_WC_RNR_RETRY_EXC_ERR:
			return -ETIMEDOUT;
		default:
			break;
		}
	}
	/* libfabric's codes below FI_ERRNO_OFFSET are errno values. */
	switch (err->err) {
	case ECANCELED:
	case ECONNRESET:
	case ECONNABORTED:
	case ENOTCONN:
	case EPIPE:
	case ESHUTDOWN:
		return -ECONNRESET;
	case ETIMEDOUT:
		return -ETIMEDOUT;
	case EACCES:
	case EPERM:
		return -EACCES;
	default:
		return -EIO;
	}
}

static void dm_chunk_done(struct tpt_dm *dm, struct dm_chunk *chunk,
			  const struct fi_cq_err_entry *err)
{
	struct tpt_dm_peer *peer = chunk->peer;
	struct dm_op *op = chunk->op;

	chunk->op = NULL;
	chunk->next_free = peer->free_chunks;
	peer->free_chunks = chunk;
	peer->chunks_posted--;
	if (!op)
		return;	/* orphan of a failed or cancelled op */
	op->chunks_out--;
	if (err) {
		op->status = dm_rma_errno(dm, err);
		dm_log(dm, "%s of %zu bytes with %s failed: %s%s%s%s",
		       op->is_put ? "write" : "read", chunk->len,
		       peer->addr_str, fi_strerror(err->err),
		       err->prov_errno ? " (" : "",
		       err->prov_errno ? fi_cq_strerror(peer->scope->dom.cq,
							err->prov_errno,
							err->err_data,
							NULL, 0) : "",
		       err->prov_errno ? ")" : "");
		/* A connected endpoint does not survive a transport error:
		 * fail everything on it and tell the owner. */
		dm_peer_teardown(peer, -ECONNRESET, true);
		return;
	}
	peer->last_progress = dm_now_ms();
	if (op->is_put)
		dm->stats.bytes_put += chunk->len;
	else
		dm->stats.bytes_got += chunk->len;
	if (!op->chunks_out && op->posted_bytes == op->len)
		dm_op_finish(dm, op, 0);
	dm_peer_kick(peer);
}

int dm_cq_progress(struct tpt_dm *dm, struct dm_scope *scope, bool *more)
{
	struct fid_cq *cq = scope->dom.cq;
	struct fi_cq_entry entries[DM_CQ_BATCH];
	struct fi_cq_err_entry err;
	int batch, handled = 0;
	ssize_t ret, i;

	*more = true;
	for (batch = 0; batch < DM_CQ_MAX_BATCHES; batch++) {
		ret = fi_cq_read(cq, entries, DM_CQ_BATCH);
		if (ret == -FI_EAGAIN) {
			*more = false;
			break;
		}
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			ret = fi_cq_readerr(cq, &err, 0);
			if (ret == -FI_EAGAIN)
				continue;
			if (ret < 0)
				return dm_error(dm, tpt_dm_fabric_errno(ret),
						"fi_cq_readerr: %s",
						fi_strerror((int)-ret));
			if (err.op_context)
				dm_chunk_done(dm, err.op_context, &err);
			handled++;
			continue;
		}
		if (ret < 0)
			return dm_error(dm, tpt_dm_fabric_errno(ret), "fi_cq_read: %s",
					fi_strerror((int)-ret));
		for (i = 0; i < ret; i++)
			if (entries[i].op_context)
				dm_chunk_done(dm, entries[i].op_context, NULL);
		handled += (int)ret;
	}
	return handled;
}
