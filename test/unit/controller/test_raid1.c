/*
 * RAID-1 (controller/raid1.c): its layout, and the shapes of its TPT plans
 * - what the paper's V-A promises: a READ one contiguous PREP READ per
 * member it uses, a WRITE one PREP WRITE per copy, the host's bytes moved
 * by the targets.  Random requests against the byte model, degraded and
 * rebuilt, run in test_tpt_plan_model.c and test_bl_plan.c.
 */
#include "test/unit/controller/plan_world.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>

static void layout(void)
{
	const struct raid_level_ops *l = raid_level_find(1);
	struct raid_geometry g = { .members = 3, .unit_blocks = 16,
				   .member_blocks = 16 * 100 };
	struct raid_chunk ch;
	uint64_t lba, at;
	unsigned int m;

	CHECK(l == &raid1_level);
	if (!l)
		return;
	CHECK(l->copies);
	CHECK_EQ(l->nr_parity(&g), 2);
	CHECK_EQ(l->min_members, 2);
	CHECK_EQ(l->array_blocks(&g), 1600);
	CHECK_EQ(raid_stripe_data_blocks(l, &g), 16);
	CHECK_EQ(raid_geometry_check(l, &g), 0);
	g.members = 1;
	CHECK_EQ(raid_geometry_check(l, &g), -EINVAL);
	g.members = 3;
	for (lba = 0; lba < 1600; lba += 7) {
		l->map(&g, lba, &ch);
		CHECK_EQ(ch.stripe, lba / 16);
		CHECK_EQ(ch.member_lba, lba);
		CHECK_EQ(ch.data_index, 0);
		CHECK_EQ(ch.member, l->data_member(&g, ch.stripe, 0));
		for (m = 0; m < 3; m++) {
			int err = l->unmap(&g, m, lba, &at);

			if (m == ch.member) {
				CHECK_EQ(err, 0);
				CHECK_EQ(at, lba);
			} else {
				CHECK_EQ(err, -ENOENT);
			}
		}
		/* The copies are the members other than the data's. */
		CHECK(l->parity_member(&g, ch.stripe, 0) != ch.member);
		CHECK(l->parity_member(&g, ch.stripe, 1) != ch.member);
		CHECK(l->parity_member(&g, ch.stripe, 0) !=
		      l->parity_member(&g, ch.stripe, 1));
	}
	CHECK_EQ(l->unmap(&g, 3, 0, &at), -EINVAL);
	CHECK_EQ(l->unmap(&g, 0, 1600, &at), -EINVAL);
}

static unsigned int count_op(const struct tpt_plan *p, enum tpt_plan_op op)
{
	unsigned int i, n = 0;

	for (i = 0; i < p->nr_cmds; i++)
		n += p->cmds[i].op == op;
	return n;
}

/* A READ: one member for less than two units, chosen by the unit; a
 * longer one in one contiguous PREP READ per member in sync, at unit
 * boundaries, never at a missing member. */
static void read_shapes(void)
{
	struct world w;
	struct tpt_plan p;
	uint32_t seen = 0;
	unsigned int i, u;

	world_init_level(&w, &raid1_level, 3, 16, 30, 512, 16);
	for (u = 0; u < 6; u++) {
		CHECK_EQ(raid1_level.tpt_read(&w.a.ctx, u * 16 + 3, 20, 1, &p),
			 0);
		CHECK_EQ(p.nr_cmds, 1);
		CHECK_EQ(p.nr_steps, 1);
		CHECK_EQ(p.cmds[0].op, TPT_PLAN_PREP_READ);
		CHECK_EQ(p.cmds[0].lba, u * 16 + 3);
		CHECK_EQ(p.cmds[0].blocks, 20);
		CHECK(p.cmds[0].final);
		seen |= 1u << p.cmds[0].member;
		tpt_plan_free(&p);
	}
	/* Successive units spread over every copy. */
	CHECK_EQ(seen, 7);

	/* 100 blocks from 8: units 0-6, seven units in 3 pieces. */
	CHECK_EQ(raid1_level.tpt_read(&w.a.ctx, 8, 100, 1, &p), 0);
	CHECK_EQ(p.nr_cmds, 3);
	CHECK_EQ(p.cmds[0].lba, 8);
	CHECK_EQ(p.cmds[0].blocks, 3 * 16 - 8);
	CHECK_EQ(p.cmds[1].lba, 48);
	CHECK_EQ(p.cmds[1].blocks, 32);
	CHECK_EQ(p.cmds[2].lba, 80);
	CHECK_EQ(p.cmds[2].blocks, 28);
	CHECK(p.cmds[0].member != p.cmds[1].member);
	CHECK(p.cmds[1].member != p.cmds[2].member);
	CHECK(p.cmds[0].member != p.cmds[2].member);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(p.cmds[i].nr_refs, 1);
		CHECK_EQ(p.refs[p.cmds[i].first_ref].host_offset,
			 (p.cmds[i].lba - 8) * 512);
	}
	tpt_plan_free(&p);

	/* Two missing of three: everything from the one left. */
	w.a.ctx.missing = 0x5;
	CHECK_EQ(raid1_level.tpt_read(&w.a.ctx, 0, 480, 1, &p), 0);
	CHECK_EQ(p.nr_cmds, 1);
	CHECK_EQ(p.cmds[0].member, 1);
	tpt_plan_free(&p);
	world_read(&w, 5, 200);
	w.a.ctx.missing = 0x7;
	CHECK_EQ(raid1_level.tpt_read(&w.a.ctx, 0, 16, 1, &p), -ENODATA);
	CHECK_EQ(raid1_level.tpt_write(&w.a.ctx, 0, 16, 1, &p), -ENODATA);
	CHECK_EQ(raid1_level.tpt_rebuild(&w.a.ctx, 0, 1, 0, 1, &p), -ENODATA);
	world_destroy(&w);
}

/* A WRITE: every copy pulls the host's data itself (PREP WRITE, then
 * WRITE NEW DATA), or for an unmodified host gets it in a WRITE; a
 * missing member gets nothing. */
static void write_shapes(void)
{
	struct tpt_plan_counts n;
	struct world w;
	struct tpt_plan p;

	world_init_level(&w, &raid1_level, 3, 16, 30, 512, 16);
	CHECK_EQ(raid1_level.tpt_write(&w.a.ctx, 5, 40, 1, &p), 0);
	CHECK_EQ(count_op(&p, TPT_PLAN_PREP_WRITE), 3);
	CHECK_EQ(count_op(&p, TPT_PLAN_WRITE_NEW_DATA), 3);
	CHECK_EQ(p.nr_cmds, 6);
	CHECK_EQ(p.nr_steps, 2);
	CHECK_EQ(p.nr_slots, 0);
	tpt_plan_count(&p, &n);
	CHECK_EQ(n.host_bytes, 3 * 40 * 512);
	CHECK_EQ(n.peer_bytes, 0);
	tpt_plan_free(&p);

	w.a.ctx.host_held = true;
	CHECK_EQ(raid1_level.tpt_write(&w.a.ctx, 5, 40, 1, &p), 0);
	CHECK_EQ(count_op(&p, TPT_PLAN_WRITE), 3);
	CHECK_EQ(p.nr_cmds, 3);
	CHECK_EQ(p.nr_steps, 1);
	tpt_plan_free(&p);

	w.a.ctx.host_held = false;
	w.a.ctx.missing = 0x2;
	CHECK_EQ(raid1_level.tpt_write(&w.a.ctx, 5, 40, 1, &p), 0);
	CHECK_EQ(count_op(&p, TPT_PLAN_PREP_WRITE), 2);
	CHECK_EQ(count_op(&p, TPT_PLAN_WRITE_NEW_DATA), 2);
	CHECK(p.cmds[0].member != 1 && p.cmds[1].member != 1);
	tpt_plan_free(&p);
	world_destroy(&w);
}

/*
 * The rebuild of @member (or a resync) of stripes [@first, @first + @nr)
 * with w's missing members: a READ MEDIUM at one source, a PART BLOCK
 * COPY at each member written, nothing at a missing member.  Returns the
 * source, and how many members are written in *@written.
 */
static unsigned int rebuild_source(struct world *w, uint64_t first,
				   uint32_t nr, unsigned int member,
				   unsigned int *written)
{
	unsigned int i, from = UINT_MAX;
	struct tpt_plan p;

	*written = 0;
	CHECK_EQ(raid1_level.tpt_rebuild(&w->a.ctx, first, nr, member, 1, &p),
		 0);
	CHECK_EQ(count_op(&p, TPT_PLAN_READ_MEDIUM), 1);
	CHECK_EQ(count_op(&p, TPT_PLAN_PART_BLOCK),
		 count_op(&p, TPT_PLAN_WRITE_NEW_DATA));
	for (i = 0; i < p.nr_cmds; i++) {
		CHECK(!(w->a.ctx.missing & (1u << p.cmds[i].member)) ||
		      p.cmds[i].member == member);
		if (p.cmds[i].op == TPT_PLAN_READ_MEDIUM)
			from = p.cmds[i].member;
		if (p.cmds[i].op != TPT_PLAN_PART_BLOCK)
			continue;
		(*written)++;
		CHECK(p.cmds[i].member != from);
		CHECK_EQ(p.cmds[i].lba, first * 16);
		CHECK_EQ(p.cmds[i].blocks, nr * 16);
		CHECK_EQ(p.cmds[i].nr_refs, nr);	/* a slot per unit */
	}
	tpt_plan_return_slots(&p);
	tpt_plan_free(&p);
	return from;
}

/* Rebuild: a READ MEDIUM at one source and a PART BLOCK COPY at each
 * member written; a resync writes every copy but the first in sync. */
static void rebuild_shapes(void)
{
	unsigned int written, i;
	struct world w;
	struct tpt_plan p;

	world_init_level(&w, &raid1_level, 3, 16, 30, 512, 16);
	w.a.ctx.missing = 0x4;
	CHECK(rebuild_source(&w, 4, 8, 2, &written) != 2);
	CHECK_EQ(written, 1);
	/* Batch after batch, the source moves round the copies in sync,
	 * whatever the batch length (16 is even, like the copies here). */
	for (i = 0; i < 2; i++)
		CHECK_EQ(rebuild_source(&w, 8 * i, 8, 2, &written), i);

	w.a.ctx.missing = 0;
	CHECK_EQ(rebuild_source(&w, 0, 4, RAID_PARITY_MEMBER, &written), 0);
	CHECK_EQ(written, 2);
	/* The data member gone: the first copy in sync is the source. */
	w.a.ctx.missing = 0x1;
	CHECK_EQ(rebuild_source(&w, 0, 4, RAID_PARITY_MEMBER, &written), 1);
	CHECK_EQ(written, 1);
	/* One in sync: nothing to make equal. */
	w.a.ctx.missing = 0x3;
	CHECK_EQ(raid1_level.tpt_rebuild(&w.a.ctx, 0, 4, RAID_PARITY_MEMBER, 1,
					 &p), -ENODATA);
	CHECK(all_slots_free(&w.a));
	world_destroy(&w);
}

/* A three-way mirror that loses two members keeps serving from the one
 * left, and both come back by rebuild, one after the other. */
static void two_lost_of_three(void)
{
	uint64_t s, stripes = 24;
	struct world w;
	struct tpt_plan p;
	unsigned int i, m;

	world_init_level(&w, &raid1_level, 3, 8, stripes, 512, 64);
	w.s.dead = w.a.ctx.missing = 0x6;
	for (m = 1; m < 3; m++)
		rnd_fill(w.s.t[m].disk, w.a.geo.member_blocks * 512);
	for (i = 0; i < 200 && !unit_failures; i++) {
		uint64_t lba = rnd_below(w.array_blocks);
		uint32_t blocks = 1 + (uint32_t)rnd_below(
			w.array_blocks - lba < 40 ? w.array_blocks - lba : 40);

		w.a.ctx.host_held = i % 2;
		if (i % 3)
			world_write(&w, lba, blocks, i % 7 == 0);
		else
			world_read(&w, lba, blocks);
	}
	for (m = 1; m < 3; m++) {
		/* Back, but holding nothing yet: written, never read. */
		w.s.dead &= ~(1u << m);
		for (s = 0; s < stripes; s += 4) {
			w.group += TPT_PLAN_MAX_GROUPS;
			CHECK_EQ(raid1_level.tpt_rebuild(&w.a.ctx, s, 4, m,
							 w.group, &p), 0);
			sim_begin(&w.s, &p, NULL, 0);
			sim_steps(&w.s, 0, p.nr_steps);
			sim_end(&w.s);
			sim_check_idle(&w.s);
			tpt_plan_return_slots(&p);
			tpt_plan_free(&p);
		}
		w.a.ctx.missing &= ~(1u << m);
	}
	CHECK(world_consistent(&w));
	world_destroy(&w);
}

int main(void)
{
	RUN(layout);
	RUN(read_shapes);
	RUN(write_shapes);
	RUN(rebuild_shapes);
	RUN(two_lost_of_three);
	return unit_failures ? 1 : 0;
}
