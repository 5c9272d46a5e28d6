/*
 * The online check's side of the simulated array of plan_world.h, shared by
 * test_tpt_plan_model.c and test_bl_plan.c: units scribbled over in a
 * world, its members' media kept to show that a check wrote nothing, and
 * a check's outcome read stripe by stripe.
 */
#ifndef TPT_TEST_UNIT_CONTROLLER_CHECK_SIM_H
#define TPT_TEST_UNIT_CONTROLLER_CHECK_SIM_H

#include "test/unit/controller/plan_world.h"

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

/* What a stripe of a world holds wrong: nothing (0), one unit on member
 * m (m + 1), or units on two members (CHECK_TWO_WRONG). */
typedef int8_t check_spoil_t;
#define CHECK_TWO_WRONG ((check_spoil_t)-1)

/* One unit of a random member scribbled over in about a third of the
 * stripes, a second member's too in a quarter of those, marked in @bad:
 * those stripes disagree with their redundancy whichever unit it is (a
 * mirror's copy or data, RAID-5's parity or data).  How many. */
static unsigned int world_spoil_some(struct world *w, check_spoil_t *bad)
{
	uint32_t unit_bytes = w->a.geo.unit_blocks * w->s.bs;
	unsigned int n = 0, members = w->a.geo.members, m, m2;
	uint64_t s;

	/* Random bytes over a unit: the same as before by chance never. */
	for (s = 0; s < world_stripes(w); s++) {
		bad[s] = 0;
		if (rnd_below(3))
			continue;
		m = (unsigned int)rnd_below(members);
		rnd_fill(unit_on_member(w, m, s), unit_bytes);
		bad[s] = (check_spoil_t)(m + 1);
		if (!rnd_below(4)) {
			m2 = (m + 1 + (unsigned int)rnd_below(members - 1)) %
			     members;
			rnd_fill(unit_on_member(w, m2, s), unit_bytes);
			bad[s] = CHECK_TWO_WRONG;
		}
		n++;
	}
	return n;
}

/* The stripes of a check's outcome @buf of stripes [@first, @first + @nr)
 * that disagree: exactly those @bad names, and where one unit is wrong
 * the level names its member if it can tell at all (RAID-6, a mirror of
 * 3 or more), never a member when two are.  How many. */
static unsigned int check_outcome(struct world *w, const unsigned char *buf,
				  uint64_t first, uint32_t nr,
				  const check_spoil_t *bad)
{
	const struct raid_level_ops *l = w->a.ctx.level;
	bool tells = l->check_locate &&
		     (!l->copies || w->a.geo.members >= 3);
	unsigned int n = 0;
	uint32_t i;

	for (i = 0; i < nr; i++) {
		check_spoil_t b = bad[first + i];
		bool m = raid_check_mismatch(l, &w->a.geo, w->s.bs, buf, nr, i);
		int wrong = m ? raid_check_locate(l, &w->a.geo, w->s.bs, buf,
						  nr, i, first + i) : -1;

		CHECK_EQ(m, b != 0);
		if (b > 0)
			CHECK_EQ(wrong, tells ? b - 1 : -1);
		else
			CHECK_EQ(wrong, -1);
		n += m;
	}
	return n;
}

#endif
