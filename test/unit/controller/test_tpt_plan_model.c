/*
 * The TPT planner (controller/tpt_plan.c, the RAID-5 plans of
 * controller/raid5.c, RAID-1's of controller/raid1.c and RAID-6's of
 * controller/raid6.c) against the byte model of plan_sim.h: random
 * requests on whole and degraded arrays, degraded plans, and the plans of
 * rebuild, resync and the online check, executed on the simulated
 * targets.  The shapes the
 * paper's tables give are in test_tpt_plan.c.
 */
#include "test/unit/controller/check_sim.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- random requests against the reference ---- */

/* Execute a plan that moves no host data (rebuild, resync) and check the
 * targets are idle afterwards; gives the slots back, frees the plan. */
static void world_run_plan(struct world *w, struct tpt_plan *p)
{
	check_plan_shape(&w->a, p, p->group);
	sim_begin(&w->s, p, NULL, 0);
	sim_steps(&w->s, 0, p->nr_steps);
	sim_end(&w->s);
	sim_check_idle(&w->s);
	tpt_plan_return_slots(p);
	CHECK(all_slots_free(&w->a));
	tpt_plan_free(p);
}

/* Rebuild every unit of @member, and of the members of @also from the
 * same reads, in runs of up to @run stripes. */
static void world_rebuild(struct world *w, unsigned int member,
			  uint32_t also, uint32_t run)
{
	uint64_t stripes = w->a.geo.member_blocks / w->a.geo.unit_blocks, s;
	struct tpt_plan p;
	uint32_t n;
	int err;

	/* Members still gone stay so: RAID-6 rebuilds one of two lost
	 * members while the other is missing. */
	w->a.ctx.missing = member == RAID_PARITY_MEMBER ? 0 :
			   w->s.dead | 1u << member;
	if (member != RAID_PARITY_MEMBER)
		w->s.dead &= ~(1u << member | also);
	w->a.ctx.rebuild_also = also;
	for (s = 0; s < stripes && !w->s.failed; s += n) {
		n = (uint32_t)(stripes - s < run ? stripes - s : run);
		w->group += TPT_PLAN_MAX_GROUPS;
		err = w->a.ctx.level->tpt_rebuild(&w->a.ctx, s, n, member,
						  w->group, &p);
		CHECK_EQ(err, 0);
		if (err)
			break;
		world_run_plan(w, &p);
	}
	w->a.ctx.missing = w->s.dead;
	w->a.ctx.rebuild_also = 0;
}

/*
 * Random requests against the byte model; the members in @dead are gone
 * for all of them - their disks scrambled, no command may reach them -
 * and afterwards they are rebuilt one by one, after which the whole
 * array must be consistent again.
 */
static unsigned int together_toggle;

static void level_requests_dead(const struct raid_level_ops *level,
				unsigned int members, uint32_t unit,
				uint64_t stripes, uint32_t block_size,
				unsigned int n, uint32_t dead)
{
	uint64_t stripe_blocks, lba = 0, blocks = 0;
	int before = unit_failures;
	struct world w;
	unsigned int i, kind, m;

	world_init_level(&w, level, members, unit, stripes, block_size, 256);
	stripe_blocks = raid_stripe_data_blocks(level, &w.a.geo);
	w.s.dead = dead;
	w.a.ctx.missing = dead;
	for (m = 0; m < members; m++)
		if (dead & (1u << m))
			rnd_fill(w.s.t[m].disk,
				 w.a.geo.member_blocks * block_size);
	for (i = 0; i < n && unit_failures == before; i++) {
		switch (rnd_below(3)) {
		case 0:
			blocks = 1 + rnd_below(unit);
			break;
		case 1:
			blocks = 1 + rnd_below(stripe_blocks);
			break;
		default:
			blocks = 1 + rnd_below(3 * stripe_blocks + unit);
			break;
		}
		lba = rnd_below(w.array_blocks - blocks + 1);
		/* Aligned requests often, so whole units and stripes come
		 * up as much as ragged ones. */
		switch (rnd_below(4)) {
		case 0:
			lba -= lba % stripe_blocks;
			break;
		case 1:
			lba -= lba % unit;
			break;
		}
		kind = (unsigned int)rnd_below(20);
		/* Half the requests as an unmodified host's, whose data the
		 * controller holds. */
		w.a.ctx.host_held = i % 2;
		if (kind < 9)
			world_write(&w, lba, (uint32_t)blocks, false);
		else if (kind < 17)
			world_read(&w, lba, (uint32_t)blocks);
		else
			world_write(&w, lba, (uint32_t)blocks, true);
	}
	if (unit_failures != before)
		fprintf(stderr, "random: %s N=%u unit=%u dead=%#x: request %u "
			"(lba %llu, %llu blocks) failed\n", level->name,
			members, unit, dead,
			i - 1, (unsigned long long)lba,
			(unsigned long long)blocks);
	/* Two lost: every other time both from the same reads. */
	if (__builtin_popcount(dead) == 2 && together_toggle++ % 2 &&
	    unit_failures == before) {
		m = (unsigned int)__builtin_ctz(dead);
		world_rebuild(&w, m, dead & ~(1u << m), 5);
	}
	for (m = 0; m < members && unit_failures == before; m++)
		if (w.s.dead & (1u << m))
			world_rebuild(&w, m, 0, 5);
	if (dead && unit_failures == before)
		CHECK(world_consistent(&w));
	world_destroy(&w);
}

static void level_requests_on(const struct raid_level_ops *level,
			      unsigned int members, uint32_t unit,
			      uint64_t stripes, uint32_t block_size,
			      unsigned int n, int dead)
{
	level_requests_dead(level, members, unit, stripes, block_size, n,
			    dead >= 0 ? 1u << dead : 0);
}

static void random_requests_on(unsigned int members, uint32_t unit,
			       uint64_t stripes, uint32_t block_size,
			       unsigned int n, int dead)
{
	level_requests_on(&raid5_level, members, unit, stripes, block_size, n,
			  dead);
}

static void random_requests(void)
{
	unsigned int n;

	for (n = 3; n <= 6; n++) {
		random_requests_on(n, 8, 24, 64, 600, -1);
		random_requests_on(n, 128, 6, 64, 600, -1);
	}
	random_requests_on(8, 16, 12, 512, 150, -1);
}

/* RAID-1 (controller/raid1.c) on the same model, whole and with each
 * member gone, then rebuilt; copies scribbled over made equal again. */
static void mirror_requests(void)
{
	unsigned int n, dead;
	struct world w;
	uint64_t s;

	for (n = 2; n <= 4; n++) {
		level_requests_on(&raid1_level, n, 8, 24, 512, 400, -1);
		level_requests_on(&raid1_level, n, 64, 6, 512, 200, -1);
		for (dead = 0; dead < n; dead++)
			level_requests_on(&raid1_level, n, 8, 24, 512, 150,
					  (int)dead);
	}
	/* Two of four copies lost, rebuilt one by one and together. */
	level_requests_dead(&raid1_level, 4, 8, 24, 512, 150, 0x5);
	level_requests_dead(&raid1_level, 4, 8, 24, 512, 150, 0x6);
	for (n = 2; n <= 4; n++) {
		world_init_level(&w, &raid1_level, n, 16, 10, 512, 64);
		for (s = 0; s < 10; s += 3)
			rnd_fill(unit_on_member(&w, raid1_level.parity_member(
					&w.a.geo, s, (unsigned int)(s % (n - 1))),
					s), 16 * 512);
		CHECK(!world_consistent(&w));
		world_rebuild(&w, RAID_PARITY_MEMBER, 0, 4);
		CHECK(world_consistent(&w));
		world_destroy(&w);
	}
}

/* ---- a member gone (paper III-D 5; protocol.md 7.5) ---- */

static void degraded_requests(void)
{
	unsigned int n, dead;

	for (n = 3; n <= 6; n++)
		for (dead = 0; dead < n; dead++) {
			random_requests_on(n, 8, 12, 64, 200, (int)dead);
			random_requests_on(n, 32, 6, 64, 100, (int)dead);
		}
	random_requests_on(8, 16, 12, 512, 100, 5);
}

/* A unit of the missing member, read: N-2 READ MEDIUM, one PART TMP at
 * the calculator with a pass per source, one SEND RESULT, and a release
 * of the exporters' slots beside it. */
static void degraded_read_shape(void)
{
	unsigned int n, i, counts[TPT_PLAN_SEND_RESULT + 1];

	for (n = 3; n <= MAX_MEMBERS; n++) {
		struct world w;
		struct tpt_plan p;
		struct raid_chunk ch;

		world_init(&w, n, 8, 4, 512, 16);
		raid5_level.map(&w.a.geo, 8, &ch);
		w.a.ctx.missing = 1u << ch.member;
		CHECK_EQ(raid5_level.tpt_read(&w.a.ctx, 8, 8, 10, &p), 0);
		memset(counts, 0, sizeof(counts));
		for (i = 0; i < p.nr_cmds; i++)
			counts[p.cmds[i].op]++;
		CHECK_EQ(p.nr_groups, 2);
		CHECK_EQ(counts[TPT_PLAN_PREP_READ], 0);
		CHECK_EQ(counts[TPT_PLAN_READ_MEDIUM], n - 2);
		CHECK_EQ(counts[TPT_PLAN_PART_TMP], 1);
		CHECK_EQ(counts[TPT_PLAN_SEND_RESULT], 1);
		CHECK_EQ(counts[TPT_PLAN_RELEASE], n - 2);
		CHECK_EQ(p.nr_steps, 3);
		for (i = 0; i < p.nr_cmds; i++)
			CHECK(p.cmds[i].member != ch.member);
		tpt_plan_return_slots(&p);
		tpt_plan_free(&p);
		world_destroy(&w);
	}
}

/* Two members gone: nothing can be planned that needs either; a read of
 * the others' units can. */
static void two_missing_is_no_data(void)
{
	struct world w;
	struct tpt_plan p;

	world_init(&w, 5, 8, 4, 512, 16);
	w.a.ctx.missing = 0x3;
	world_read(&w, 16, 16);
	CHECK_EQ(raid5_level.tpt_read(&w.a.ctx, 0, 8, 1, &p), -ENODATA);
	CHECK_EQ(raid5_level.tpt_read(&w.a.ctx, 16, 32, 1, &p), -ENODATA);
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, 8, 1, &p), -ENODATA);
	CHECK_EQ(raid5_level.tpt_rebuild(&w.a.ctx, 0, 1, 0, 1, &p), -ENODATA);
	CHECK_EQ(raid5_level.tpt_rebuild(&w.a.ctx, 0, 1, RAID_PARITY_MEMBER, 1,
					 &p), -ENODATA);
	CHECK(all_slots_free(&w.a));
	world_destroy(&w);
}

/* Parity units scribbled over (a write torn by a crash) come back from
 * the data, stripe by stripe. */
static void resync_recomputes_parity(void)
{
	unsigned int n;

	for (n = 3; n <= 6; n++) {
		struct world w;
		uint64_t s;

		world_init(&w, n, 16, 10, 512, 64);
		for (s = 0; s < 10; s += 3)
			rnd_fill(unit_on_member(&w, raid5_level.parity_member(
					&w.a.geo, s, 0), s), 16 * 512);
		CHECK(!world_consistent(&w));
		world_rebuild(&w, RAID_PARITY_MEMBER, 0, 4);
		CHECK(world_consistent(&w));
		world_destroy(&w);
	}
}

/*
 * A rebuild chain's passes (protocol.md 5.1, 7.5): one PART BLOCK with a
 * pass per survivor while its list holds them, and where a long run on a
 * wide array would pass 256 descriptors (a descriptor per unit and
 * survivor) a PART TMP COPY of as many passes as fit, then XOR GROUP
 * commands, PART BLOCK last, one per step - the same bytes either way.
 */
static void rebuild_passes_fit_the_list(void)
{
	static const uint32_t runs[] = { 16, 64 };
	unsigned int r, i, part_tmp, part_block, refs;
	struct tpt_plan p;
	struct world w;

	for (r = 0; r < 2; r++) {
		world_init(&w, 8, 8, 64, 512, 128);
		w.a.ctx.rebuild_gather = TPT_REBUILD_FLAT;
		w.a.ctx.missing = 1u << 2;
		CHECK_EQ(raid5_level.tpt_rebuild(&w.a.ctx, 0, runs[r], 2, 100,
						 &p), 0);
		part_tmp = part_block = refs = 0;
		for (i = 0; i < p.nr_cmds; i++) {
			if (p.cmds[i].op == TPT_PLAN_PART_TMP)
				part_tmp++;
			if (p.cmds[i].op == TPT_PLAN_PART_BLOCK)
				part_block++;
			if (p.cmds[i].op == TPT_PLAN_PART_TMP ||
			    p.cmds[i].op == TPT_PLAN_PART_BLOCK) {
				CHECK(p.cmds[i].nr_refs <= TPT_XFER_DESC_MAX);
				CHECK_EQ(p.cmds[i].nr_refs % runs[r], 0);
				refs += p.cmds[i].nr_refs;
			}
		}
		/* 7 survivors: 7 x 16 descriptors fit; 7 x 64 take 4 passes,
		 * then 3. */
		CHECK_EQ(part_block, 1);
		CHECK_EQ(part_tmp, r ? 1 : 0);
		CHECK_EQ(refs, 7 * runs[r]);
		CHECK_EQ(p.nr_steps, r ? 4 : 3);
		tpt_plan_return_slots(&p);
		tpt_plan_free(&p);
		w.a.ctx.missing = 0;
		world_rebuild(&w, 2, 0, runs[r]);
		CHECK(world_consistent(&w));
		world_destroy(&w);
	}
}

/* The COMP TMPs of a rebuild of member 1's first 16 stripes on @w. */
static unsigned int rebuild_comp_tmps(struct world *w, struct tpt_plan *p)
{
	unsigned int i, n = 0;

	w->a.ctx.missing = 1u << 1;
	CHECK_EQ(raid5_level.tpt_rebuild(&w->a.ctx, 0, 16, 1, 100, p), 0);
	w->a.ctx.missing = 0;
	for (i = 0; i < p->nr_cmds; i++)
		n += p->cmds[i].op == TPT_PLAN_COMP_TMP;
	return n;
}

/*
 * A rebuild gathered in a binary tree (protocol.md 7.5): a READ MEDIUM
 * per source, N-2 COMP TMPs in ceil(log2(N-1)) rounds, no source taking
 * in more units than there are rounds, and the rebuilt member one PART
 * BLOCK of one pass; flat has none.  Whatever member is lost, its
 * rebuild by the tree makes the array consistent.
 */
static void rebuild_tree_spreads_the_gathering(void)
{
	static const unsigned int widths[] = { 3, 5, 8 };	/* the sim's widest */
	unsigned int wi, i, m, k, rounds, medium, part_block;
	unsigned int taken[RAID_MAX_MEMBERS];
	struct tpt_plan p;
	struct world w;

	for (wi = 0; wi < 3; wi++) {
		unsigned int n = widths[wi];

		k = n - 1;
		for (rounds = 0; (1u << rounds) < k; rounds++)
			;
		world_init(&w, n, 8, 32, 512, 128);
		w.a.ctx.rebuild_gather = TPT_REBUILD_FLAT;
		CHECK_EQ(rebuild_comp_tmps(&w, &p), 0);
		tpt_plan_return_slots(&p);
		tpt_plan_free(&p);

		w.a.ctx.rebuild_gather = TPT_REBUILD_TREE;
		CHECK_EQ(rebuild_comp_tmps(&w, &p), k - 1);
		medium = part_block = 0;
		memset(taken, 0, sizeof(taken));
		for (i = 0; i < p.nr_cmds; i++) {
			const struct tpt_plan_cmd *cmd = &p.cmds[i];

			if (cmd->op == TPT_PLAN_READ_MEDIUM) {
				medium++;
				CHECK(cmd->member != 1);
			}
			if (cmd->op == TPT_PLAN_COMP_TMP) {
				CHECK(cmd->member != 1);
				CHECK_EQ(cmd->nr_refs, 16);
				taken[cmd->member]++;
			}
			if (cmd->op == TPT_PLAN_PART_BLOCK) {
				part_block++;
				CHECK_EQ(cmd->member, 1);
				CHECK_EQ(cmd->nr_refs, 16);
			}
		}
		CHECK_EQ(medium, k);
		CHECK_EQ(part_block, 1);
		for (m = 0; m < n; m++)
			CHECK(taken[m] <= rounds);
		/* READ MEDIUM, the rounds, PART BLOCK, WRITE NEW DATA */
		CHECK_EQ(p.nr_steps, rounds + 3);
		tpt_plan_return_slots(&p);
		tpt_plan_free(&p);
		CHECK(all_slots_free(&w.a));

		for (m = 0; m < n; m++) {
			rnd_fill(w.s.t[m].disk,
				 w.a.geo.member_blocks * w.s.bs);
			CHECK(!world_consistent(&w));
			world_rebuild(&w, m, 0, 5);
			CHECK(world_consistent(&w));
		}
		world_destroy(&w);
	}
}

/* ---- the online check (check=yes) ---- */

/*
 * Check every stripe of @w in runs of up to @run on the simulated
 * targets: each plan moves every byte of its outcome to the controller
 * once and leaves the targets idle, no medium changes, and the stripes
 * found disagreeing are exactly those in @bad.  How many.
 */
static unsigned int world_check(struct world *w, uint32_t run, const check_spoil_t *bad)
{
	const struct raid_level_ops *l = w->a.ctx.level;
	unsigned char **snap = media_snapshot(w);
	unsigned int found = 0;
	struct tpt_plan p;
	uint64_t s, len;
	uint32_t n;
	int err;

	for (s = 0; s < world_stripes(w) && !w->s.failed; s += n) {
		unsigned char *buf;

		n = (uint32_t)(world_stripes(w) - s < run ?
			       world_stripes(w) - s : run);
		len = raid_check_bytes(l, &w->a.geo, w->s.bs, n);
		buf = xcalloc(1, len);
		memset(buf, 0xa5, len);
		w->group += TPT_PLAN_MAX_GROUPS;
		err = l->tpt_check(&w->a.ctx, s, n, w->group, &p);
		CHECK_EQ(err, 0);
		if (!err) {
			check_plan_shape(&w->a, &p, w->group);
			sim_begin(&w->s, &p, buf, len);
			sim_steps(&w->s, 0, p.nr_steps);
			sim_check_host_used_once(&w->s);
			sim_end(&w->s);
			sim_check_idle(&w->s);
			tpt_plan_return_slots(&p);
			CHECK(all_slots_free(&w->a));
			tpt_plan_free(&p);
			found += check_outcome(w, buf, s, n, bad);
		}
		free(buf);
	}
	CHECK(media_unchanged(w, snap));
	return found;
}

/* RAID-5 of 3 to 8 members, gathered in a tree and flat, and mirrors of
 * 2 to 4: a consistent array checks clean, then units scribbled over in
 * about a third of the stripes are found, each stripe once, in runs of
 * any length, and nothing is written; RAID-6 and mirrors of 3 or more
 * name the one member wrong where one is (check_outcome()).  A check
 * needs every member. */
static void check_counts_spoiled_stripes(void)
{
	static const struct {
		const struct raid_level_ops *level;
		unsigned int members;
	} arrays[] = {
		{ &raid1_level, 2 }, { &raid1_level, 3 }, { &raid1_level, 4 },
		{ &raid5_level, 3 }, { &raid5_level, 4 }, { &raid5_level, 5 },
		{ &raid5_level, MAX_MEMBERS },
		{ &raid6_level, 4 }, { &raid6_level, 6 },
	};
	static const enum tpt_rebuild_gather how[] = { TPT_REBUILD_TREE,
						       TPT_REBUILD_FLAT };
	check_spoil_t bad[40];
	struct tpt_plan p;
	struct world w;
	unsigned int i, h, spoiled;

	for (i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
		const struct raid_level_ops *l = arrays[i].level;

		for (h = 0; h < 2; h++) {
			world_init_level(&w, l, arrays[i].members, 8, 40, 512,
					 128);
			w.a.ctx.rebuild_gather = how[h];
			memset(bad, 0, sizeof(bad));
			CHECK_EQ(world_check(&w, 16, bad), 0);
			spoiled = world_spoil_some(&w, bad);
			CHECK(spoiled > 0);
			CHECK_EQ(world_check(&w, 16, bad), spoiled);
			CHECK_EQ(world_check(&w, 7, bad), spoiled);
			w.a.ctx.missing = 1u << (arrays[i].members - 1);
			CHECK_EQ(l->tpt_check(&w.a.ctx, 0, 4, 1, &p), -ENODATA);
			w.a.ctx.missing = 0;
			CHECK_EQ(l->tpt_check(&w.a.ctx, 0, 0, 1, &p), -EINVAL);
			CHECK(all_slots_free(&w.a));
			world_destroy(&w);
		}
	}
}

/*
 * RAID-6 (controller/raid6.c) on the same model: whole, with each member
 * gone, with every pair gone (then both rebuilt, one while the other is
 * still missing), and three gone refused; P and Q scribbled over come
 * back from the data.
 */
static void raid6_requests(void)
{
	unsigned int n, a, b;
	struct tpt_plan p;
	struct world w;
	uint64_t s;

	for (n = 4; n <= 7; n++) {
		level_requests_on(&raid6_level, n, 8, 24, 512, 300, -1);
		level_requests_on(&raid6_level, n, 64, 6, 512, 150, -1);
	}
	for (n = 4; n <= 6; n++)
		for (a = 0; a < n; a++) {
			level_requests_on(&raid6_level, n, 8, 12, 512, 100,
					  (int)a);
			for (b = a + 1; b < n; b++)
				level_requests_dead(&raid6_level, n, 8, 12,
						    512, 60,
						    1u << a | 1u << b);
		}
	level_requests_dead(&raid6_level, 8, 16, 12, 512, 100, 0x81);
	/* Eight full stripes at N = 6: one PREP WRITE per member, skipping
	 * its P and Q units (protocol.md 4.5, 7.8), a COMP BLOCK per
	 * parity, and the data and parity on the members. */
	for (n = 5; n <= 7; n++) {
		unsigned int i, preps = 0, skips = 0, j;
		uint32_t blocks = 8 * (n - 2) * 8;
		unsigned char *host = xcalloc(blocks, 512);

		world_init_level(&w, &raid6_level, n, 8, 10, 512, 64);
		w.a.ctx.host_held = false;
		CHECK_EQ(raid6_level.tpt_write(&w.a.ctx, 0, blocks, ++w.group,
					       &p), 0);
		for (i = 0; i < p.nr_cmds; i++) {
			const struct tpt_plan_cmd *c = &p.cmds[i];

			if (c->op != TPT_PLAN_PREP_WRITE)
				continue;
			preps++;
			for (j = 0; j < c->nr_refs; j++) {
				if (p.refs[c->first_ref + j].kind !=
				    TPT_REF_SKIP)
					continue;
				skips++;
				/* P and Q side by side: one skip. */
				CHECK(p.refs[c->first_ref + j - 1].kind !=
				      TPT_REF_SKIP);
			}
		}
		CHECK_EQ(preps, n);
		CHECK(skips > 0);
		rnd_fill(host, (uint64_t)blocks * 512);
		world_run_write(&w, &p, 0, host, blocks, false);
		CHECK(world_consistent(&w));
		free(host);
		world_destroy(&w);
	}
	for (n = 4; n <= 6; n++) {
		world_init_level(&w, &raid6_level, n, 16, 10, 512, 64);
		for (s = 0; s < 10; s += 2)
			rnd_fill(unit_on_member(&w, raid6_level.parity_member(
					&w.a.geo, s, (unsigned int)(s / 2 % 2)),
					s), 16 * 512);
		CHECK(!world_consistent(&w));
		world_rebuild(&w, RAID_PARITY_MEMBER, 0, 4);
		CHECK(world_consistent(&w));
		w.a.ctx.missing = 0x7;
		CHECK_EQ(raid6_level.tpt_read(&w.a.ctx, 0, 64, 1, &p),
			 -ENODATA);
		CHECK_EQ(raid6_level.tpt_write(&w.a.ctx, 0, 8, 1, &p),
			 -ENODATA);
		CHECK_EQ(raid6_level.tpt_rebuild(&w.a.ctx, 0, 1, 0, 1, &p),
			 -ENODATA);
		/* What a rebuild takes along must be missing, and not the
		 * member itself nor the parity's resync. */
		w.a.ctx.missing = 0x3;
		w.a.ctx.rebuild_also = 0x4;
		CHECK_EQ(raid6_level.tpt_rebuild(&w.a.ctx, 0, 1, 0, 1, &p),
			 -EINVAL);
		w.a.ctx.rebuild_also = 0x1;
		CHECK_EQ(raid6_level.tpt_rebuild(&w.a.ctx, 0, 1, 0, 1, &p),
			 -EINVAL);
		w.a.ctx.rebuild_also = 0x2;
		CHECK_EQ(raid6_level.tpt_rebuild(&w.a.ctx, 0, 1,
						 RAID_PARITY_MEMBER, 1, &p),
			 -ENODATA);
		w.a.ctx.missing = 0;
		CHECK_EQ(raid6_level.tpt_rebuild(&w.a.ctx, 0, 1,
						 RAID_PARITY_MEMBER, 1, &p),
			 -EINVAL);
		w.a.ctx.rebuild_also = 0;
		CHECK(all_slots_free(&w.a));
		world_destroy(&w);
	}
}

int main(void)
{
	RUN(raid6_requests);
	RUN(random_requests);
	RUN(mirror_requests);
	RUN(degraded_read_shape);
	RUN(two_missing_is_no_data);
	RUN(degraded_requests);
	RUN(resync_recomputes_parity);
	RUN(rebuild_passes_fit_the_list);
	RUN(rebuild_tree_spreads_the_gathering);
	RUN(check_counts_spoiled_stripes);
	UNIT_EXIT();
}
