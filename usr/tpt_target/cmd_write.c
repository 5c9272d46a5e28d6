/*
 * Commands that bring new data into a target, and the one that writes it.
 *
 *   XDWRITE (DISABLE WRITE)  Get_Data the new data (staged), read the old
 *                            data, keep old ^ new as the result (III-C,
 *                            Fig. 4 steps 2-4)
 *   READ NEW BLOCK           Get_Data the new data: staged and result
 *   PREP WRITE               the same for full stripes, deferred to FINAL;
 *                            the runs between its skips each on their own
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

/*
 * The record of the moved run of @tc's list in descriptors [@first, @end),
 * at byte @pos of its range and @len long: a list of its own, holding
 * only its inline bytes, and a buffer claiming @slot's slots on.
 */
static int prep_record(struct tpt_cmd *tc, unsigned int first,
		       unsigned int end, uint64_t pos, uint64_t len,
		       uint16_t slot, struct tpt_prep **out)
{
	uint32_t bs = tpt_lu_block_size(tc->tlu);
	uint64_t inline_at = UINT64_MAX, inline_len = 0;
	struct tpt_prep *p = calloc(1, sizeof(*p));
	unsigned int i;
	int r;

	if (!p)
		return TPT_SENSE_POOL_EXHAUSTED;
	INIT_LIST_HEAD(&p->link);
	p->lba = tc->cdb.lba + pos / bs;
	p->nr_blocks = (uint32_t)(len / bs);
	p->xl = malloc(sizeof(*p->xl));
	if (!p->xl)
		goto nomem;
	*p->xl = (struct tpt_xfer_list){
		.count = (uint16_t)(end - first),
		.result_slot = slot,
		.total_length = len,
	};
	memcpy(p->xl->desc, tc->xl->desc + first,
	       (end - first) * sizeof(p->xl->desc[0]));
	/* Inline descriptors lie back to back in the data-out (5.1): the
	 * run's are one stretch of it, which goes when @tc completes. */
	for (i = 0; i < p->xl->count; i++) {
		struct tpt_xfer_desc *d = &p->xl->desc[i];

		if (d->peer != TPT_PEER_ID_CONTROLLER)
			continue;
		if (inline_at == UINT64_MAX)
			inline_at = d->offset;
		d->offset -= inline_at;
		inline_len += d->length;
	}
	if (inline_len) {
		p->inline_data = malloc(inline_len);
		if (!p->inline_data)
			goto nomem;
		memcpy(p->inline_data, tc->inline_data + inline_at, inline_len);
	}
	r = tpt_range_alloc(tc->group, p->lba, p->nr_blocks, slot, false,
			    &p->range);
	if (r) {
		tpt_prep_free(p);
		return tpt_cmd_result_slot_sense(tc, r);
	}
	*out = p;
	return TPT_SENSE_NONE;
nomem:
	tpt_prep_free(p);
	return TPT_SENSE_POOL_EXHAUSTED;
}

static bool prep_overlaps(struct tpt_group *g, const struct tpt_prep *p)
{
	struct tpt_prep *q;

	list_for_each_entry(q, &g->preps, link)
		if (q->lba < p->lba + p->nr_blocks &&
		    p->lba < q->lba + q->nr_blocks)
			return true;
	return false;
}

/*
 * Records the command's moved runs, those between its skips (protocol.md
 * 4.5): each is a PREP WRITE of its own to the group, its slots after
 * the previous run's.  All or none.
 */
static int prep_records(struct tpt_cmd *tc)
{
	const struct tpt_xfer_list *xl = tc->xl;
	uint64_t pos = 0, run_pos = 0;
	uint32_t slot = xl->result_slot;
	unsigned int i, run_first = 0;
	struct tpt_prep *p = NULL, *tmp;
	LIST_HEAD(mine);
	int r = TPT_SENSE_NONE;

	for (i = 0; i <= xl->count && !r; i++) {
		bool skip = i < xl->count &&
			    xl->desc[i].peer == TPT_PEER_ID_NONE;

		if (i < xl->count && !skip) {
			pos += xl->desc[i].length;
			continue;
		}
		/* A run ends here; skips side by side leave none between
		 * them. */
		if (skip && pos == run_pos) {
			pos += xl->desc[i].length;
			run_first = i + 1;
			run_pos = pos;
			continue;
		}
		if (slot != TPT_SLOT_NONE && slot >= TPT_SLOT_MAX) {
			r = tpt_cmd_result_slot_sense(tc,
					TPT_SENSE_INVALID_PARAM_FIELD);
			break;
		}
		r = prep_record(tc, run_first, i, run_pos, pos - run_pos,
				(uint16_t)slot, &p);
		if (r)
			break;
		if (prep_overlaps(tc->group, p)) {
			tpt_prep_free(p);
			r = TPT_SENSE_GROUP_IN_USE;
			break;
		}
		list_add_tail(&p->link, &mine);
		if (slot != TPT_SLOT_NONE)
			slot += p->range->nr_pieces;
		if (skip)
			pos += xl->desc[i].length;
		run_first = i + 1;
		run_pos = pos;
	}
	list_for_each_entry_safe(p, tmp, &mine, link) {
		if (r)
			tpt_prep_free(p);
		else {
			list_del(&p->link);
			list_add_tail(&p->link, &tc->group->preps);
		}
	}
	return r;
}

int tpt_exec_prep_write(struct tpt_cmd *tc)
{
	struct tpt_prep *q;
	unsigned int n = 0;
	int r;

	r = use_fresh_group(tc);
	if (r)
		return r;
	/* The FINAL's fetch covers the records it found; a PREP after it
	 * would be swept in with its buffer unfilled (protocol.md 8.1). */
	if (tc->group->final_seen)
		return TPT_SENSE_GROUP_IN_USE;
	r = prep_records(tc);
	if (r)
		return r;
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
