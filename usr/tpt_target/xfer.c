/*
 * One-sided transfers between a transfer list and a range's pieces.
 *
 * The descriptors of a transfer list cover a byte stream in order; a
 * range's pieces cover the same stream in fixed-size granules.  Every
 * intersection of a descriptor with a piece becomes one Get_Data or
 * Put_Data (the datamover pipelines large ones in chunks).  Inline pieces
 * (peer FFFFh) are copied from the data-out; a PREP READ's skipped bytes
 * (peer FFFDh) are read with the rest of the range and go nowhere.
 * Descriptors naming another target's slot also fetch the slot's header,
 * which is checked once all data arrived: a slot released or reused since
 * the controller named it fails the command with TPT SLOT STALE instead of
 * feeding it wrong data.
 */
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt_target.h"

struct tpt_xfer {
	struct tpt_cmd *tc;
	struct tpt_range *r;
	const struct tpt_xfer_list *xl;
	const uint8_t *inline_data;
	enum tpt_xfer_dir dir;
	tpt_xfer_done done;
	void *ctx;
	unsigned int first_piece, end_piece;
	unsigned int next_desc;
	uint64_t next_desc_pos;		/* stream offset of next_desc */
	unsigned int pending;
	bool issuing;
	enum tpt_sense_reason failure;
	/* Slot headers of SLOT descriptors, one TPT_SLOT_HDR_LEN each. */
	uint8_t *headers;
	struct tpt_dm_buf *headers_mr;
};

struct tpt_xfer_op {
	struct tpt_xfer *x;
	unsigned int desc;
	/* The local bytes registered in a host link's scope, for this
	 * transfer only (tpt_xfer_post). */
	struct tpt_dm_buf *alias;
};

static void tpt_xfer_fail(struct tpt_xfer *x, enum tpt_sense_reason reason,
			  unsigned int desc)
{
	if (x->failure)
		return;
	x->failure = reason;
	tpt_cmd_fail(x->tc, reason, desc < x->xl->count,
		     desc < x->xl->count ? x->xl->desc[desc].peer : 0, desc);
}

static enum tpt_sense_reason tpt_xfer_check_headers(struct tpt_xfer *x)
{
	uint32_t bs = tpt_lu_block_size(x->tc->tlu);
	/* A READ PARITY command's list may cover its range several times
	 * over (protocol.md 5.1): each pass starts at the range's LBA. */
	uint64_t range = (uint64_t)x->tc->cdb.transfer_length * bs;
	uint64_t pos = 0;
	unsigned int i;

	for (i = 0; i < x->xl->count; pos += x->xl->desc[i].length, i++) {
		const struct tpt_xfer_desc *d = &x->xl->desc[i];
		enum tpt_sense_reason reason;

		if (!(d->flags & TPT_XFER_SLOT))
			continue;
		reason = tpt_slot_header_check(x->headers + i * TPT_SLOT_HDR_LEN,
					       x->tc->cdb.group,
					       x->r->lba + pos % range / bs,
					       d->length);
		if (reason) {
			tpt_xfer_fail(x, reason, i);
			return reason;
		}
	}
	return TPT_SENSE_NONE;
}

static void tpt_xfer_finish(struct tpt_xfer *x)
{
	enum tpt_sense_reason reason = x->failure;

	if (!reason && x->tc->aborted)
		reason = x->tc->abort_reason;
	if (!reason && x->headers && x->dir == TPT_XFER_FETCH)
		reason = tpt_xfer_check_headers(x);
	if (x->headers_mr)
		tpt_dm_buf_release(x->headers_mr);
	free(x->headers);
	x->done(x->tc, x->ctx, reason);
	free(x);
}

static void tpt_xfer_op_done(int status, void *arg)
{
	struct tpt_xfer_op *op = arg;
	struct tpt_xfer *x = op->x;

	if (status)
		tpt_xfer_fail(x, tpt_dm_status_reason(status), op->desc);
	if (op->alias)
		tpt_dm_buf_release(op->alias);
	free(op);
	if (!--x->pending && !x->issuing)
		tpt_xfer_finish(x);
}

static int tpt_xfer_post(struct tpt_xfer *x, struct tpt_dm_peer *peer,
			 unsigned int desc, struct tpt_dm_buf *local,
			 size_t local_off, uint64_t rma_addr, size_t len)
{
	const struct tpt_xfer_desc *d = &x->xl->desc[desc];
	struct tpt_xfer_op *op = malloc(sizeof(*op));
	int err;

	if (!op)
		return -ENOMEM;
	op->x = x;
	op->desc = desc;
	op->alias = NULL;
	/*
	 * A host's link lives in the host's own scope (peer_link.c), where
	 * our buffers are not: the bytes this transfer moves are registered
	 * there, for local access only, until it completes.  The host never
	 * learns a key for them and finds nothing else in its scope.
	 */
	if (tpt_dm_peer_scope(peer) != x->tc->session->scope) {
		err = tpt_dm_register(tpt_datamover(), tpt_dm_peer_scope(peer),
				      (char *)tpt_dm_buf_addr(local) + local_off,
				      len, 0, &op->alias);
		if (err) {
			free(op);
			return err;
		}
		local = op->alias;
		local_off = 0;
	}
	x->pending++;
	if (x->dir == TPT_XFER_FETCH)
		err = tpt_dm_get(peer, local, local_off, d->stag, rma_addr, len,
				 tpt_xfer_op_done, op);
	else
		err = tpt_dm_put(peer, local, local_off, d->stag, rma_addr, len,
				 tpt_xfer_op_done, op);
	if (err) {
		x->pending--;
		if (op->alias)
			tpt_dm_buf_release(op->alias);
		free(op);
	}
	return err;
}

/* The data of descriptor @desc at stream offset @pos, piece by piece. */
static void tpt_xfer_desc(struct tpt_xfer *x, struct tpt_dm_peer *peer,
			  unsigned int desc, uint64_t pos)
{
	const struct tpt_xfer_desc *d = &x->xl->desc[desc];
	struct tpt_range *r = x->r;
	uint64_t end = pos + d->length;
	unsigned int i;

	if (peer && (d->flags & TPT_XFER_SLOT)) {
		/* The header sits right before the payload it describes. */
		if (tpt_xfer_post(x, peer, desc, x->headers_mr,
				  desc * TPT_SLOT_HDR_LEN, d->offset,
				  TPT_SLOT_HDR_LEN)) {
			tpt_xfer_fail(x, TPT_SENSE_POOL_EXHAUSTED, desc);
			return;
		}
	}
	for (i = x->first_piece; i < x->end_piece; i++) {
		uint64_t pstart = (uint64_t)i * r->piece_bytes;
		uint64_t pend = pstart + r->piece[i].len;
		uint64_t from = pos > pstart ? pos : pstart;
		uint64_t to = end < pend ? end : pend;
		uint64_t rma;
		size_t local_off;

		if (from >= to)
			continue;
		local_off = (r->piece[i].slot < 0 ? 0 : TPT_SLOT_HDR_LEN) +
			    (from - pstart);
		if (!peer) {
			/* Inline data: OFFSET is the piece's place in it. */
			memcpy((char *)tpt_piece_data(r, i) + (from - pstart),
			       x->inline_data + d->offset + (from - pos),
			       to - from);
			continue;
		}
		rma = d->offset + (from - pos);
		if (d->flags & TPT_XFER_SLOT)
			rma += TPT_SLOT_HDR_LEN;
		if (tpt_xfer_post(x, peer, desc, r->piece[i].dmb, local_off,
				  rma, to - from)) {
			tpt_xfer_fail(x, TPT_SENSE_POOL_EXHAUSTED, desc);
			return;
		}
	}
}

static void tpt_xfer_issue(struct tpt_xfer *x);

/* Runs once the link for descriptor next_desc is known; synchronously
 * from tpt_link_get() when the link already exists. */
static void tpt_xfer_linked(struct tpt_dm_peer *peer, int status, void *arg)
{
	struct tpt_xfer *x = arg;
	unsigned int desc = x->next_desc;

	if (status)
		tpt_xfer_fail(x, status == -ENOENT ? TPT_SENSE_UNKNOWN_PEER :
			      TPT_SENSE_PEER_UNREACHABLE, desc);
	else
		tpt_xfer_desc(x, peer, desc, x->next_desc_pos);
	x->next_desc_pos += x->xl->desc[desc].length;
	x->next_desc++;
	x->pending--;		/* the link wait */
	if (!x->issuing)
		tpt_xfer_issue(x);
}

/* Issue descriptors in order; a link still connecting suspends this until
 * tpt_xfer_linked() resumes it. */
static void tpt_xfer_issue(struct tpt_xfer *x)
{
	x->issuing = true;
	while (x->next_desc < x->xl->count && !x->failure && !x->tc->aborted) {
		const struct tpt_xfer_desc *d = &x->xl->desc[x->next_desc];
		unsigned int before = x->next_desc;

		if (d->peer == TPT_PEER_ID_CONTROLLER ||
		    d->peer == TPT_PEER_ID_NONE) {
			/* Inline data is copied; a skip's bytes stay put. */
			if (d->peer == TPT_PEER_ID_CONTROLLER)
				tpt_xfer_desc(x, NULL, x->next_desc,
					      x->next_desc_pos);
			x->next_desc_pos += d->length;
			x->next_desc++;
			continue;
		}
		/* The wait for the link counts as an outstanding step, so
		 * completions meanwhile do not finish the transfer early. */
		x->pending++;
		tpt_link_get(x->tc->session, d->peer, tpt_xfer_linked, x);
		if (x->next_desc == before) {
			x->issuing = false;
			return;
		}
	}
	x->issuing = false;
	if (!x->pending)
		tpt_xfer_finish(x);
}

void tpt_xfer_pieces(struct tpt_cmd *tc, struct tpt_range *r,
		     unsigned int first, unsigned int count,
		     const struct tpt_xfer_list *xl, const uint8_t *inline_data,
		     enum tpt_xfer_dir dir, tpt_xfer_done done, void *ctx)
{
	struct tpt_xfer *x = calloc(1, sizeof(*x));
	unsigned int i;

	if (!x) {
		done(tc, ctx, TPT_SENSE_POOL_EXHAUSTED);
		return;
	}
	x->tc = tc;
	x->r = r;
	x->xl = xl;
	x->inline_data = inline_data;
	x->dir = dir;
	x->done = done;
	x->ctx = ctx;
	x->first_piece = first;
	x->end_piece = first + count;
	for (i = 0; i < xl->count; i++) {
		if (!(xl->desc[i].flags & TPT_XFER_SLOT))
			continue;
		x->headers = aligned_alloc(64, (size_t)xl->count * TPT_SLOT_HDR_LEN);
		if (!x->headers ||
		    tpt_dm_register(tpt_datamover(), tc->session->scope,
				    x->headers,
				    (size_t)xl->count * TPT_SLOT_HDR_LEN, 0,
				    &x->headers_mr)) {
			free(x->headers);
			free(x);
			done(tc, ctx, TPT_SENSE_POOL_EXHAUSTED);
			return;
		}
		break;
	}
	tpt_xfer_issue(x);
}

void tpt_xfer_range(struct tpt_cmd *tc, struct tpt_range *r,
		    const struct tpt_xfer_list *xl, const uint8_t *inline_data,
		    enum tpt_xfer_dir dir, tpt_xfer_done done, void *ctx)
{
	tpt_xfer_pieces(tc, r, 0, r->nr_pieces, xl, inline_data, dir, done,
			ctx);
}
