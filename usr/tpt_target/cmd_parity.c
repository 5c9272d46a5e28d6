/*
 * The commands that compute parity-chain results: the READ PARITY
 * commands (paper III-G 4-7) Get_Data blocks from other targets (normally
 * their slots) and XOR them into a local operand; READ MEDIUM gives a
 * chain its sources, a surviving block as it is on the medium (III-D 5).
 *
 *   PART TMP     operand by PARITY MODE, outcome = the group's result
 *   PART BLOCK   operand by PARITY MODE, outcome = staged (new parity)
 *                and result
 *   COMP TMP     operand = the group's result (full stripes), outcome =
 *                the group's result
 *   COMP BLOCK   no operand (a copy), outcome = staged (new parity)
 *                and result
 *   READ MEDIUM  nothing fetched, outcome = the medium's blocks as the
 *                group's result
 *
 * A READ PARITY command's list may cover its range several times over
 * (protocol.md 5.1): each pass is one more block XORed in, so a stripe's
 * parity can be gathered from all its data blocks in one command.
 *
 * Fetched data lands in a private scratch range first, every pass of it:
 * it is only used once the whole transfer arrived and every slot header
 * checked out, so a stale or failed source never half-modifies the
 * operand.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "tpt_target.h"

struct parity_run {
	struct tpt_range *fetched;
	struct tpt_range *operand;	/* existing result folded in, or NULL */
	struct tpt_range *dest;
	bool in_place;			/* dest is operand */
	bool medium;			/* dest starts as the medium */
	unsigned int outcome;		/* TPT_RANGE_* flags of the outcome */
};

static bool is_tmp(uint8_t opcode)
{
	return opcode == TPT_OP_READ_PARITY_PART_TMP ||
	       opcode == TPT_OP_READ_PARITY_COMP_TMP;
}

/* The outcome @dest replaces the group's previous result (and, for BLOCK,
 * its previous staged data) for the same blocks. */
static void replace_outcome(struct tpt_cmd *tc, struct tpt_range *dest,
			    unsigned int outcome)
{
	unsigned int flag;

	for (flag = TPT_RANGE_STAGED; flag <= TPT_RANGE_RESULT; flag <<= 1) {
		struct tpt_range *old;

		if (!(outcome & flag))
			continue;
		old = tpt_range_find(tc->group, tc->cdb.lba,
				     tc->cdb.transfer_length, flag);
		if (!old || old == dest)
			continue;
		old->flags &= ~flag;
		if (!old->flags)
			tpt_range_free(old);
	}
}

/* dest = its operand (an existing result, the medium, or nothing) XOR
 * every pass fetched, each weighted by its GF EXPONENT: fetched holds
 * dest's blocks that many times over.  Folded in one pass over memory
 * (tpt_range_fold()). */
static enum tpt_sense_reason fold_passes(struct tpt_cmd *tc,
					 struct parity_run *run)
{
	unsigned int passes = run->fetched->nr_blocks / run->dest->nr_blocks;
	uint64_t pass_bytes = (uint64_t)tc->cdb.transfer_length *
			      tpt_lu_block_size(tc->tlu);
	struct tpt_fold_src src[TPT_XOR_PASSES_MAX + 1];
	unsigned int n = 0, pass;

	if (passes > TPT_XOR_PASSES_MAX)	/* the list's check refused it */
		return TPT_SENSE_INTERNAL_FAILURE;
	/* In place, and over the medium, dest holds its operand already. */
	if (run->operand && !run->in_place)
		src[n++] = (struct tpt_fold_src){
			.range = run->operand,
			.gf_exp = tc->xl->operand_gf_exp,
		};
	for (pass = 0; pass < passes; pass++)
		src[n++] = (struct tpt_fold_src){
			.range = run->fetched,
			.pos = tpt_range_pass_pos(run->dest, pass),
			.gf_exp = tpt_xfer_list_pass_gf_exp(tc->xl, pass_bytes,
							    pass),
		};
	if (tpt_range_fold(run->dest, src, n, run->in_place || run->medium,
			   tc->xl->operand_gf_exp))
		return TPT_SENSE_INTERNAL_FAILURE;
	return TPT_SENSE_NONE;
}

static void parity_finish(struct tpt_cmd *tc)
{
	struct parity_run *run = tc->priv;
	enum tpt_sense_reason r = tc->failure;

	if (!r && tc->aborted)
		r = tc->abort_reason;
	/* Another command of the group released our operand while we
	 * fetched, or works with the result we would change in place
	 * (protocol.md 8.3, "a buffer in use"). */
	if (!r && run->operand && run->operand->released)
		r = TPT_SENSE_GROUP_RANGE_MISSING;
	if (!r && run->in_place && run->operand->holders > 1)
		r = TPT_SENSE_GROUP_IN_USE;
	if (!r)
		r = fold_passes(tc, run);
	tpt_range_free(run->fetched);
	if (r) {
		if (!run->in_place)
			tpt_range_free(run->dest);
	} else {
		if (!run->in_place) {
			replace_outcome(tc, run->dest, run->outcome);
			tpt_range_attach(run->dest, run->outcome);
		}
		tpt_range_publish(run->dest);
	}
	/* After replace_outcome(), which may have released it. */
	if (run->operand)
		tpt_range_unhold(run->operand);
	tpt_cmd_complete(tc, r);
}

/* Whether the command's operand is the group's result: only then does it
 * need earlier state, and so only then may it not open the group
 * (protocol.md 8.1). */
static bool operand_is_result(const struct tpt_cdb *cdb)
{
	if (cdb->opcode == TPT_OP_READ_PARITY_COMP_BLOCK)
		return false;
	if (cdb->opcode == TPT_OP_READ_PARITY_COMP_TMP)
		return true;
	return cdb->parity_mode == TPT_PARITY_XOR_GROUP;
}

/* Pick the local operand; a sense reason if the group lacks it. */
static int parity_operand(struct tpt_cmd *tc, struct parity_run *run)
{
	if (!operand_is_result(&tc->cdb)) {
		run->medium = tc->cdb.opcode != TPT_OP_READ_PARITY_COMP_BLOCK &&
			      tc->cdb.parity_mode == TPT_PARITY_XOR_MEDIUM;
		return TPT_SENSE_NONE;
	}
	run->operand = tpt_range_find(tc->group, tc->cdb.lba,
				      tc->cdb.transfer_length,
				      TPT_RANGE_RESULT);
	return run->operand ? TPT_SENSE_NONE : TPT_SENSE_GROUP_RANGE_MISSING;
}

int tpt_exec_read_parity(struct tpt_cmd *tc)
{
	uint16_t slot = tc->xl->result_slot;
	struct parity_run *run;
	int r;

	r = tpt_cmd_use_group(tc, TPT_GROUP_WRITE,
			      !operand_is_result(&tc->cdb));
	if (r)
		return r;
	run = calloc(1, sizeof(*run));
	if (!run)
		return TPT_SENSE_POOL_EXHAUSTED;
	tc->priv = run;
	/* A BLOCK outcome is the new parity to write and, unchanged, the
	 * group's result for its blocks (protocol.md 8.2). */
	run->outcome = is_tmp(tc->cdb.opcode) ? TPT_RANGE_RESULT :
				TPT_RANGE_STAGED | TPT_RANGE_RESULT;
	r = parity_operand(tc, run);
	if (r)
		return r;
	/* Accumulating into our own result where it already lives (the
	 * controller names the same slot, or none for a private result)
	 * needs no copy; staged data is never modified in place. */
	if (run->operand && !(run->outcome & TPT_RANGE_STAGED) &&
	    !(run->operand->flags & TPT_RANGE_STAGED) &&
	    run->operand->piece[0].slot == (slot == TPT_SLOT_NONE ? -1 : slot)) {
		run->in_place = true;
		run->dest = run->operand;
	}
	if ((run->outcome & TPT_RANGE_STAGED) &&
	    tpt_range_overlapping(tc->group, tc->cdb.lba,
				  tc->cdb.transfer_length, TPT_RANGE_STAGED))
		return TPT_SENSE_GROUP_IN_USE;

	r = tpt_cmd_alloc_ranges(tc, TPT_SLOT_NONE, &run->fetched, slot,
				 run->in_place ? NULL : &run->dest);
	if (r)
		return r;
	if (run->operand)
		tpt_range_hold(run->operand);
	tpt_cmd_fetch_and_read(tc, run->fetched,
			       run->medium ? run->dest : NULL, parity_finish);
	return TPT_EXEC_ASYNC;
}

/* ---- READ MEDIUM ---- */

static void read_medium_done(struct tpt_cmd *tc, void *ctx,
			     enum tpt_sense_reason r)
{
	struct tpt_range *blocks = ctx;

	if (!r && tc->aborted)
		r = tc->abort_reason;
	if (r) {
		/* The group keeps whatever result it had for the range. */
		tpt_range_free(blocks);
		tpt_cmd_complete(tc, r);
		return;
	}
	replace_outcome(tc, blocks, TPT_RANGE_RESULT);
	tpt_range_attach(blocks, TPT_RANGE_RESULT);
	tpt_range_publish(blocks);
	tpt_cmd_complete(tc, TPT_SENSE_NONE);
}

int tpt_exec_read_medium(struct tpt_cmd *tc)
{
	struct tpt_range *blocks;
	int r;

	r = tpt_cmd_use_group(tc, TPT_GROUP_WRITE, true);
	if (r)
		return r;
	/* Read straight into the result's slots (or private buffers): there
	 * is no operand to keep apart from them. */
	r = tpt_cmd_alloc_ranges(tc, tc->xl->result_slot, &blocks, 0, NULL);
	if (r)
		return r;
	tpt_disk_range(tc, blocks, false, false, read_medium_done, blocks);
	return TPT_EXEC_ASYNC;
}
