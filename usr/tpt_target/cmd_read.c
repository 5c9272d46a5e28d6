/*
 * The commands that Put_Data to their passive sides.
 *
 * PREP READ (paper III-C, III-G 1): record each block's range and where its
 * data goes; on the FINAL one of a group, read the medium once, in LBA
 * order, and Put_Data every piece to its passive side.
 *
 * SEND RESULT (III-D 5 step 2): Put_Data the group's result for a range,
 * a rebuilt block of a failed target, to the host, then let it go.
 *
 * The read is pipelined in 1 MiB pieces (seed 001, synchronized sends): a
 * piece goes out on the network as soon as it is off the disk while the
 * next ones are being read, with at most PREP_READ_DEPTH pieces in flight
 * so a large request cannot drain the buffer pool.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "tpt_target.h"

#define PREP_READ_DEPTH 4

struct prep_read_run {
	struct tpt_prep *cur;		/* record whose pieces come next */
	unsigned int piece;
	unsigned int inflight;
	bool pumping;
	bool repump;
	enum tpt_sense_reason failure;
};

struct prep_read_unit {
	struct tpt_prep *p;
	unsigned int piece;
};

static void prep_read_pump(struct tpt_cmd *tc);

static void prep_read_unit_end(struct tpt_cmd *tc, struct prep_read_unit *u,
			       enum tpt_sense_reason r)
{
	struct prep_read_run *run = tc->priv;

	if (r && !run->failure)
		run->failure = r;
	tpt_piece_put(u->p->range, u->piece);
	free(u);
	run->inflight--;
	prep_read_pump(tc);
}

static void prep_read_pushed(struct tpt_cmd *tc, void *ctx,
			     enum tpt_sense_reason r)
{
	prep_read_unit_end(tc, ctx, r);
}

static void prep_read_read(struct tpt_cmd *tc, void *ctx,
			   enum tpt_sense_reason r)
{
	struct prep_read_unit *u = ctx;
	struct prep_read_run *run = tc->priv;

	if (r || run->failure || tc->aborted) {
		prep_read_unit_end(tc, u, r);
		return;
	}
	tpt_xfer_pieces(tc, u->p->range, u->piece, 1, u->p->xl, NULL,
			TPT_XFER_PUSH, prep_read_pushed, u);
}

/* The next piece to read, or false when every record is done. */
static bool prep_read_next(struct tpt_cmd *tc, struct prep_read_unit *u)
{
	struct prep_read_run *run = tc->priv;
	struct list_head *preps = &tc->group->preps;

	while (run->cur && run->piece >= run->cur->range->nr_pieces) {
		run->cur = run->cur->link.next == preps ? NULL :
			list_entry(run->cur->link.next, struct tpt_prep, link);
		run->piece = 0;
	}
	if (!run->cur)
		return false;
	u->p = run->cur;
	u->piece = run->piece;
	return true;
}

static void prep_read_pump(struct tpt_cmd *tc)
{
	struct prep_read_run *run = tc->priv;
	struct prep_read_unit next, *u;

	if (run->pumping) {
		run->repump = true;
		return;
	}
	run->pumping = true;
	do {
		run->repump = false;
		while (!run->failure && !tc->aborted &&
		       run->inflight < PREP_READ_DEPTH && prep_read_next(tc, &next)) {
			if (tpt_piece_get(next.p->range, next.piece)) {
				/* Pool dry: wait for our own pieces to come
				 * back, unless we hold none. */
				if (!run->inflight)
					run->failure = TPT_SENSE_POOL_EXHAUSTED;
				break;
			}
			u = malloc(sizeof(*u));
			if (!u) {
				tpt_piece_put(next.p->range, next.piece);
				run->failure = TPT_SENSE_POOL_EXHAUSTED;
				break;
			}
			*u = next;
			run->piece++;
			run->inflight++;
			tpt_disk_pieces(tc, u->p->range, u->piece, 1, false,
					false, prep_read_read, u);
		}
	} while (run->repump);
	run->pumping = false;

	if (run->inflight || (!run->failure && !tc->aborted && run->cur))
		return;
	/* The FINAL PREP READ ends the request at this target. */
	tpt_group_release(tc->group, TPT_RELEASE_DONE);
	tpt_cmd_complete(tc, run->failure);
}

/* Keep records in LBA order so the medium is read front to back. */
static void prep_insert_sorted(struct tpt_group *g, struct tpt_prep *p)
{
	struct tpt_prep *q;

	list_for_each_entry(q, &g->preps, link) {
		if (q->lba > p->lba) {
			list_add_tail(&p->link, &q->link);
			return;
		}
	}
	list_add_tail(&p->link, &g->preps);
}

int tpt_exec_prep_read(struct tpt_cmd *tc)
{
	struct prep_read_run *run;
	struct tpt_prep *p;
	int r;

	r = tpt_cmd_use_group(tc, TPT_GROUP_READ, true);
	if (r)
		return r;
	/* The FINAL's reads cover the records it found (protocol.md 8.1). */
	if (tc->group->final_seen)
		return TPT_SENSE_GROUP_IN_USE;
	p = calloc(1, sizeof(*p));
	if (!p)
		return TPT_SENSE_POOL_EXHAUSTED;
	p->lba = tc->cdb.lba;
	p->nr_blocks = tc->cdb.transfer_length;
	r = tpt_range_alloc(tc->group, p->lba, p->nr_blocks, TPT_SLOT_NONE,
			    true, &p->range);
	if (r) {
		free(p);
		return r;
	}
	p->xl = tc->xl;
	tc->xl = NULL;
	prep_insert_sorted(tc->group, p);
	if (!(tc->cdb.flags & TPT_CDB_FINAL))
		return TPT_SENSE_NONE;
	tc->group->final_seen = true;

	run = calloc(1, sizeof(*run));
	if (!run)
		return TPT_SENSE_POOL_EXHAUSTED;
	run->cur = list_first_entry(&tc->group->preps, struct tpt_prep, link);
	tc->priv = run;
	prep_read_pump(tc);
	return TPT_EXEC_ASYNC;
}

/* ---- SEND RESULT ---- */

static void send_result_pushed(struct tpt_cmd *tc, void *ctx,
			       enum tpt_sense_reason r)
{
	struct tpt_range *result = ctx;
	struct tpt_group *g = tc->group;

	if (!r && tc->aborted)
		r = tc->abort_reason;
	/* On failure the result stays, for another SEND RESULT or for the
	 * controller to release with the group.  A sent result is done
	 * with, as written data is after WRITE NEW DATA; staged data that
	 * was also the result still waits for it. */
	if (r && !result->released && list_empty(&result->link))
		tpt_range_attach(result, result->flags);
	if (!r && !result->released) {
		if (result->flags & TPT_RANGE_STAGED)
			result->flags &= ~TPT_RANGE_RESULT;
		else
			tpt_range_free(result);
	}
	tpt_range_unhold(result);
	if (!r && list_empty(&g->ranges) && list_empty(&g->preps))
		tpt_group_release(g, TPT_RELEASE_DONE);
	tpt_cmd_complete(tc, r);
}

int tpt_exec_send_result(struct tpt_cmd *tc)
{
	struct tpt_range *result;
	int r;

	r = tpt_cmd_use_group(tc, TPT_GROUP_WRITE, false);
	if (r)
		return r;
	/* One result for exactly the range, as COMP TMP's operand: the
	 * controller sends what one chain computed, never a patchwork. */
	result = tpt_range_find(tc->group, tc->cdb.lba,
				tc->cdb.transfer_length, TPT_RANGE_RESULT);
	if (!result)
		return TPT_SENSE_GROUP_RANGE_MISSING;
	/* A result that is nothing else leaves the group's list while it is
	 * sent, so it is sent once; staged data stays where WRITE NEW DATA
	 * looks for it, and may be released under the transfer (protocol.md
	 * 8.3).  The group itself waits for this command. */
	tpt_range_hold(result);
	if (!(result->flags & TPT_RANGE_STAGED))
		list_del_init(&result->link);
	tpt_xfer_range(tc, result, tc->xl, NULL, TPT_XFER_PUSH,
		       send_result_pushed, result);
	return TPT_EXEC_ASYNC;
}
