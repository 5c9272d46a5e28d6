/*
 * The record of lost units: md's bad block log, per position.
 *
 * A recovery that cannot rebuild a stripe's unit for good - a survivor
 * cannot read its own unit there (a lost sector: the classic RAID-5
 * double fault), or another position's unit there is lost already - used
 * to step over the stripe and try it again every 5 s, forever: the
 * position stayed recovering and the array `rebuilding` until a host
 * wrote the stripe, and a RAID-5 that then lost any box was failed as a
 * whole.  Now the unit is recorded as lost, the recovery goes on and
 * finishes, and the position is in sync everywhere else.  A lost unit is
 * never read from its box (array_missing_at() counts its position
 * missing there): a READ of it is served from the others where they can
 * give it, and fails with MEDIUM ERROR where they cannot, as before.  A
 * host write of the whole stripe gives it back: the unit is then written
 * from the others, and the record drops it.
 *
 * The record is in the state file ("lost P STRIPE"), on disk before the
 * recovery that made it ends (recovery.c waits for it): only then does
 * the region record stop counting the stripes as missed by the box.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt_controller.h"

uint32_t array_lost_at(const struct tpt_array *a, uint64_t stripe)
{
	uint32_t lost = 0;
	unsigned int p;

	for (p = 0; a->nr_lost && p < a->nr_members; p++)
		if (stripe_set_has(&a->pos[p].lost, stripe))
			lost |= 1u << p;
	return lost;
}

bool array_lost_record(struct tpt_array *a, unsigned int p, uint64_t stripe,
		       uint32_t blockers)
{
	int ret;

	if (stripe_set_has(&a->pos[p].lost, stripe))
		return true;
	if (a->nr_lost >= TPT_STATE_LOST_MAX) {
		if (!a->lost_full_said)
			eprintf("tptraid: the record of lost units is full "
				"(%u): position %u's unit of stripe %" PRIu64
				" is stepped over and tried again instead\n",
				TPT_STATE_LOST_MAX, p, stripe);
		a->lost_full_said = true;
		return false;
	}
	ret = stripe_set_add(&a->pos[p].lost, stripe);
	if (ret < 0)
		return false;
	a->nr_lost++;
	a->lost_gen++;
	eprintf("tptraid: position %u: the unit of stripe %" PRIu64 " cannot "
		"be rebuilt (position mask 0x%x cannot give theirs there): "
		"recorded as lost, the recovery goes on; a host write of the "
		"whole stripe gives it back\n", p, stripe, blockers);
	array_save_state(a);
	return true;
}

void array_lost_done(struct tpt_array *a, unsigned int p, uint64_t first,
		     uint64_t end)
{
	unsigned int n;

	if (!a->nr_lost)
		return;
	n = stripe_set_remove(&a->pos[p].lost, first, end);
	if (!n)
		return;
	a->nr_lost -= n;
	a->lost_gen++;
	a->lost_full_said = false;
	eprintf("tptraid: position %u: %u lost unit%s of stripes %" PRIu64
		"-%" PRIu64 " written back from the others\n", p, n,
		n > 1 ? "s" : "", first, end - 1);
	array_save_state(a);
}

void array_lost_to_missed(struct tpt_array *a, unsigned int p)
{
	const struct stripe_set *lost = &a->pos[p].lost;
	unsigned int i;

	for (i = 0; i < lost->n; i++)
		if (lost->v[i] < a->nr_stripes)
			array_mark_missed(a, p, lost->v[i], lost->v[i]);
}

/* A write back of a lost unit ended: the record drops it if it was. */
static void lost_repair_done(struct tpt_span *s, int result)
{
	if (!result)
		array_lost_done(s->array, s->member, s->first_stripe,
				s->first_stripe + 1);
	free(s);
}

void array_lost_written(struct tpt_array *a, const struct tpt_span *s)
{
	uint64_t per_stripe = raid_stripe_data_blocks(a->level, &a->geo);
	uint64_t first = (s->lba + per_stripe - 1) / per_stripe;
	uint64_t end = (s->lba + s->blocks) / per_stripe, st;
	unsigned int p;

	/* Only a write of a whole stripe gives its lost units back: one
	 * of part of it needed the old units, and they were not there. */
	if (!a->nr_lost || first >= end)
		return;
	for (p = 0; p < a->nr_members; p++) {
		/* A position recovering gets them from its recovery. */
		if (a->pos[p].state != TPT_POS_IN_SYNC ||
		    !array_position_member(a, p) ||
		    !stripe_set_any(&a->pos[p].lost, first, end))
			continue;
		for (st = first; st < end; st++) {
			struct tpt_span *r;

			if (!stripe_set_has(&a->pos[p].lost, st))
				continue;
			r = array_background_span(a, TPT_SPAN_REBUILD, p, st,
						  1, lost_repair_done);
			if (!r)
				return;
			array_queue_span_first(a, r);
		}
	}
}

void array_lost_load(struct tpt_array *a, const struct tpt_state *st)
{
	unsigned int i;

	for (i = 0; i < st->nr_lost; i++) {
		const struct tpt_state_lost *l = &st->lost[i];

		if (l->position < a->nr_members &&
		    stripe_set_add(&a->pos[l->position].lost, l->stripe) > 0)
			a->nr_lost++;
	}
}

void array_lost_save(const struct tpt_array *a, struct tpt_state *st)
{
	unsigned int p, i;

	st->nr_lost = 0;
	for (p = 0; p < a->nr_members; p++)
		for (i = 0; i < a->pos[p].lost.n &&
			    st->nr_lost < TPT_STATE_LOST_MAX; i++) {
			st->lost[st->nr_lost].position = p;
			st->lost[st->nr_lost++].stripe = a->pos[p].lost.v[i];
		}
}

void array_lost_free(struct tpt_array *a)
{
	unsigned int p;

	for (p = 0; p < a->nr_members; p++)
		stripe_set_clear(&a->pos[p].lost);
	a->nr_lost = 0;
}
