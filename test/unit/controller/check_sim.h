/*
 * The online check's side of the simulated array of plan_sim.h, shared by
 * test_tpt_plan_model.c and test_bl_plan.c: units scribbled over in a
 * world, its members' media kept to show that a check wrote nothing, and
 * a check's outcome read stripe by stripe.
 */
#ifndef TPT_TEST_UNIT_CONTROLLER_CHECK_SIM_H
#define TPT_TEST_UNIT_CONTROLLER_CHECK_SIM_H

#include "test/unit/controller/plan_sim.h"

/* Stripes in a world. */
static uint64_t world_stripes(const struct world *w)
{
	return w->a.geo.member_blocks / w->a.geo.unit_blocks;
}

/* A copy of every member's medium, for media_unchanged(). */
static unsigned char **media_snapshot(const struct world *w)
{
	uint64_t len = w->a.geo.member_blocks * w->s.bs;
	unsigned char **snap = xcalloc(w->a.geo.members, sizeof(*snap));
	unsigned int m;

	for (m = 0; m < w->a.geo.members; m++) {
		snap[m] = xcalloc(1, len);
		memcpy(snap[m], w->s.t[m].disk, len);
	}
	return snap;
}

/* Whether every medium is as media_snapshot() found it; frees @snap. */
static bool media_unchanged(const struct world *w, unsigned char **snap)
{
	uint64_t len = w->a.geo.member_blocks * w->s.bs;
	bool same = true;
	unsigned int m;

	for (m = 0; m < w->a.geo.members; m++) {
		same &= !memcmp(snap[m], w->s.t[m].disk, len);
		free(snap[m]);
	}
	free(snap);
	return same;
}

/* One unit of a random member scribbled over in about a third of the
 * stripes, marked in @bad: those stripes disagree with their redundancy
 * whichever unit it is (a mirror's copy or data, RAID-5's parity or
 * data).  How many. */
static unsigned int world_spoil_some(struct world *w, bool *bad)
{
	uint32_t unit_bytes = w->a.geo.unit_blocks * w->s.bs;
	unsigned int n = 0;
	uint64_t s;

	/* Random bytes over a unit: the same as before by chance never. */
	for (s = 0; s < world_stripes(w); s++) {
		unsigned char *u;

		bad[s] = !rnd_below(3);
		if (!bad[s])
			continue;
		u = unit_on_member(w, (unsigned int)rnd_below(w->a.geo.members),
				   s);
		rnd_fill(u, unit_bytes);
		n++;
	}
	return n;
}

/* The stripes of a check's outcome @buf of stripes [@first, @first + @nr)
 * that disagree: exactly those @bad names.  How many. */
static unsigned int check_outcome(struct world *w, const unsigned char *buf,
				  uint64_t first, uint32_t nr, const bool *bad)
{
	unsigned int n = 0;
	uint32_t i;

	for (i = 0; i < nr; i++) {
		bool m = raid_check_mismatch(w->a.ctx.level, &w->a.geo,
					     w->s.bs, buf, nr, i);

		CHECK_EQ(m, bad[first + i]);
		n += m;
	}
	return n;
}

#endif
