/*
 * Commands that bring new data into a target, and the one that writes it.
 *
 *   XDWRITE (DISABLE WRITE)  Get_Data the new data (staged), read the old
 *                            data, keep old ^ new as the result (III-C,
 *                            Fig. 4 steps 2-4)
 *   READ NEW BLOCK           Get_Data the new data: staged and result
 *   PREP WRITE               the same for full stripes, deferred to FINAL
 *   WRITE NEW DATA           write the staged data, release the buffers
 *
 * Nothing reaches the medium before WRITE NEW DATA (III-D 4): every other
 * command only fills buffers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "tpt_target.h"

/* ---- XDWRITE and READ NEW BLOCK ---- */

struct new_data_run {
	struct tpt_range *staged;	/* the new data */
	struct tpt_range *result;	/* old ^ new for XDWRITE */
};

static bool is_xdwrite(const struct tpt_cmd *tc)
{
	return tc->cdb.opcode == TPT_OP_XDWRITE_10 ||
	       tc->cdb.opcode == TPT_OP_XDWRITE_16;
}

static void new_data_finish(struct tpt_cmd *tc)
{
	struct new_data_run *run = tc->priv;
	enum tpt_sense_reason r = tc->failure;

	if (!r && tc->aborted)
		r = tc->abort_reason;
	if (!r && run->result &&
	    tpt_range_fold(run->result, &(struct tpt_fold_src){
				   .range = run->staged }, 1, true, 0))
		r = TPT_SENSE_INTERNAL_FAILURE;
	if (r) {
		if (run->result)
			tpt_range_free(run->result);
		tpt_range_free(run->staged);
		tpt_cmd_complete(tc, r);
		return;
	}
	if (run->result) {
		tpt_range_attach(run->staged, TPT_RANGE_STAGED);
		tpt_range_attach(run->result, TPT_RANGE_RESULT);
		tpt_range_publish(run->result);
	} else {
		tpt_range_attach(run->staged, TPT_RANGE_STAGED | TPT_RANGE_RESULT);
		tpt_range_publish(run->staged);
	}
	tpt_cmd_complete(tc, TPT_SENSE_NONE);
}

/* The command's write group, which must not buffer its blocks yet: a
 * second command bringing data for them would make WRITE NEW DATA
 * ambiguous. */
static int use_fresh_group(struct tpt_cmd *tc)
{
	int r = tpt_cmd_use_group(tc, TPT_GROUP_WRITE, true);

	if (r)
		return r;
	return tpt_range_overlapping(tc->group, tc->cdb.lba,
				     tc->cdb.transfer_length,
				     TPT_RANGE_STAGED) ?
		TPT_SENSE_GROUP_IN_USE : TPT_SENSE_NONE;
}

int tpt_exec_new_data(struct tpt_cmd *tc)
{
	uint16_t slot = tc->xl->result_slot;
	struct new_data_run *run;
	int r;

	r = use_fresh_group(tc);
	if (r)
		return r;
	run = calloc(1, sizeof(*run));
	if (!run)
		return TPT_SENSE_POOL_EXHAUSTED;
	tc->priv = run;
	/* XDWRITE's new data stays private; its result, new ^ old, is what
	 * the RESULT SLOT names.  READ NEW BLOCK's data is both. */
	r = tpt_cmd_alloc_ranges(tc, is_xdwrite(tc) ? TPT_SLOT_NONE : slot,
				 &run->staged, slot,
				 is_xdwrite(tc) ? &run->result : NULL);
	if (r)
		return r;
	tpt_cmd_fetch_and_read(tc, run->staged, run->result, new_data_finish);
	return TPT_EXEC_ASYNC;
}

/* ---- PREP WRITE ---- */

static void prep_write_fetched(struct tpt_cmd *tc, void *ctx,
			       enum tpt_sense_reason r)
{
	struct tpt_prep *p, *tmp;

	(void)ctx;
	if (!tpt_cmd_step_done(tc, r))
		return;
	r = tc->failure;
	if (!r && tc->aborted)
		r = tc->abort_reason;
	if (r) {
		/* The request cannot complete: the controller releases or
		 * re-plans it, the buffers stay until then. */
		tpt_cmd_complete(tc, r);
		return;
	}
	list_for_each_entry_safe(p, tmp, &tc->group->preps, link) {
		struct tpt_range *range = p->range;

		p->range = NULL;
		tpt_prep_free(p);
		tpt_range_attach(range, TPT_RANGE_STAGED | TPT_RANGE_RESULT);
		tpt_range_publish(range);
	}
	tpt_cmd_complete(tc, TPT_SENSE_NONE);
}

int tpt_exec_prep_write(struct tpt_cmd *tc)
{
	size_t inline_len = tpt_xfer_list_inline_len(tc->xl);
	struct tpt_prep *p, *q;
	unsigned int n = 0;
	int r;

	r = use_fresh_group(tc);
	if (r)
		return r;
	/* The FINAL's fetch covers the records it found; a PREP after it
	 * would be swept in with its buffer unfilled (protocol.md 8.1). */
	if (tc->group->final_seen)
		return TPT_SENSE_GROUP_IN_USE;
	list_for_each_entry(q, &tc->group->preps, link)
		if (q->lba < tc->cdb.lba + tc->cdb.transfer_length &&
		    tc->cdb.lba < q->lba + q->nr_blocks)
			return TPT_SENSE_GROUP_IN_USE;

	p = calloc(1, sizeof(*p));
	if (!p)
		return TPT_SENSE_POOL_EXHAUSTED;
	INIT_LIST_HEAD(&p->link);
	p->lba = tc->cdb.lba;
	p->nr_blocks = tc->cdb.transfer_length;
	if (inline_len) {
		/* The data-out goes when this command completes. */
		p->inline_data = malloc(inline_len);
		if (!p->inline_data) {
			free(p);
			return TPT_SENSE_POOL_EXHAUSTED;
		}
		memcpy(p->inline_data, tc->inline_data, inline_len);
	}
	r = tpt_range_alloc(tc->group, p->lba, p->nr_blocks,
			    tc->xl->result_slot, false, &p->range);
	if (r) {
		free(p->inline_data);
		free(p);
		return tpt_cmd_result_slot_sense(tc, r);
	}
	p->xl = tc->xl;
	tc->xl = NULL;
	list_add_tail(&p->link, &tc->group->preps);
	if (!(tc->cdb.flags & TPT_CDB_FINAL))
		return TPT_SENSE_NONE;
	tc->group->final_seen = true;

	list_for_each_entry(q, &tc->group->preps, link)
		n++;
	/* Hold completion until every record's fetch has been started. */
	tc->pending = n + 1;
	list_for_each_entry(q, &tc->group->preps, link)
		tpt_xfer_range(tc, q->range, q->xl, q->inline_data,
			       TPT_XFER_FETCH, prep_write_fetched, NULL);
	prep_write_fetched(tc, NULL, TPT_SENSE_NONE);
	return TPT_EXEC_ASYNC;
}

/* ---- WRITE NEW DATA ---- */

static bool in_cmd_range(const struct tpt_cmd *tc, const struct tpt_range *r)
{
	return r->lba < tc->cdb.lba + tc->cdb.transfer_length &&
	       tc->cdb.lba < r->lba + r->nr_blocks;
}

static void wnd_written(struct tpt_cmd *tc, void *ctx, enum tpt_sense_reason r)
{
	struct tpt_range *range, *tmp;

	if (ctx)
		tpt_range_unhold(ctx);
	if (!tpt_cmd_step_done(tc, r))
		return;
	if (tc->failure) {
		/* A torn write is this box's fault: the controller recovers
		 * it from its write-intent record and the other members. */
		tpt_cmd_complete(tc, tc->failure);
		return;
	}
	list_for_each_entry_safe(range, tmp, &tc->group->ranges, link)
		if (in_cmd_range(tc, range))
			tpt_range_free(range);
	if (list_empty(&tc->group->ranges) && list_empty(&tc->group->preps))
		tpt_group_release(tc->group, TPT_RELEASE_DONE);
	tpt_cmd_complete(tc, TPT_SENSE_NONE);
}

int tpt_exec_write_new_data(struct tpt_cmd *tc)
{
	uint64_t lba = tc->cdb.lba, end = lba + tc->cdb.transfer_length;
	struct tpt_range *r;
	uint64_t covered = 0;
	unsigned int n = 0;
	int err;

	err = tpt_cmd_use_group(tc, TPT_GROUP_WRITE, false);
	if (err)
		return err;
	/* All or nothing: every staged range touching the command's range
	 * lies inside it, and together they cover it. */
	list_for_each_entry(r, &tc->group->ranges, link) {
		if (!(r->flags & TPT_RANGE_STAGED) || !in_cmd_range(tc, r))
			continue;
		if (r->lba < lba || r->lba + r->nr_blocks > end)
			return TPT_SENSE_GROUP_RANGE_MISSING;
		covered += r->nr_blocks;
		n++;
	}
	if (covered != tc->cdb.transfer_length)
		return TPT_SENSE_GROUP_RANGE_MISSING;

	/* Held while on their way to the medium: another command of the
	 * group may release them meanwhile (protocol.md 8.3).  Completion
	 * waits for the loop, as a write may fail before it starts. */
	tc->pending = n + 1;
	list_for_each_entry(r, &tc->group->ranges, link) {
		if (!(r->flags & TPT_RANGE_STAGED) || !in_cmd_range(tc, r))
			continue;
		tpt_range_hold(r);
		tpt_disk_range(tc, r, true, tc->cdb.flags & TPT_CDB_FUA,
			       wnd_written, r);
	}
	wnd_written(tc, NULL, TPT_SENSE_NONE);
	return TPT_EXEC_ASYNC;
}
