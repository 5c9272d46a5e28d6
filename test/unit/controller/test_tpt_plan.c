/*
 * The TPT planner (controller/tpt_plan.c, the RAID-5 plans of
 * controller/raid5.c), checked by executing its plans on the simulated
 * targets of plan_sim.h: the shapes the paper's tables give.  Random
 * requests against the byte model, degraded plans, rebuild and resync are
 * in test_tpt_plan_model.c.
 */
#include "test/unit/controller/plan_world.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- plan shapes ---- */

static bool expect_cmd(const struct tpt_plan *p, unsigned int i,
		       enum tpt_plan_op op, unsigned int member, uint64_t lba,
		       uint32_t blocks)
{
	const struct tpt_plan_cmd *c = i < p->nr_cmds ? &p->cmds[i] : NULL;

	if (c && c->op == op && c->member == member && c->lba == lba &&
	    c->blocks == blocks)
		return true;
	fprintf(stderr, "command %u: want %s member %u lba %llu blocks %u",
		i, tpt_plan_op_name(op), member, (unsigned long long)lba,
		blocks);
	if (c)
		fprintf(stderr, ", got %s member %u lba %llu blocks %u",
			tpt_plan_op_name(c->op), c->member,
			(unsigned long long)c->lba, c->blocks);
	fprintf(stderr, "\n");
	unit_failures++;
	return false;
}

static const struct tpt_plan_ref *ref_of(const struct tpt_plan *p,
					 unsigned int cmd, unsigned int j)
{
	return &p->refs[p->cmds[cmd].first_ref + j];
}

/* Paper Tables I and II (III-E): operations are PDUs sent and one-sided
 * transfers started; data is counted in stripe units, a target-to-target
 * transfer at both ends. */
struct paper_counts {
	unsigned int host_ops, controller_ops, target_ops;
	uint64_t host_units, controller_units, target_units;
};

static void paper_counts(const struct tpt_plan *p, uint64_t unit_bytes,
			 struct paper_counts *pc)
{
	struct tpt_plan_counts c;
	uint64_t bytes = 0, in = 0, out = 0;
	unsigned int m, commands = 0, transfers = 0;

	tpt_plan_count(p, &c);
	for (m = 0; m < RAID_MAX_MEMBERS; m++) {
		const struct tpt_plan_member_counts *mc = &c.member[m];

		bytes += mc->host_in + mc->host_out + mc->peer_in + mc->peer_out;
		in += mc->peer_in;
		out += mc->peer_out;
		commands += mc->commands;
		transfers += mc->transfers;
	}
	CHECK_EQ(in, c.peer_bytes);
	CHECK_EQ(out, c.peer_bytes);
	CHECK_EQ(commands, c.commands);
	CHECK_EQ(transfers, c.transfers);
	pc->host_ops = 1;			/* its command */
	pc->controller_ops = c.commands + 1;	/* and the answer to the host */
	pc->target_ops = c.commands + c.transfers;	/* a response per command */
	pc->host_units = c.host_bytes / unit_bytes;
	pc->controller_units = 0;		/* no descriptor names the controller */
	pc->target_units = bytes / unit_bytes;
}

static void single_block_write(void)
{
	struct world w;
	struct tpt_plan p;
	struct paper_counts pc;
	unsigned char host[8 * 512];
	uint16_t delta;
	unsigned int blocks;

	/* N=5, unit 8: stripe 0 has parity on member 4, data unit 0 on
	 * member 0.  The paper's block is a stripe unit; one logical block
	 * plans the same way. */
	for (blocks = 1; blocks <= 8; blocks += 7) {
		world_init(&w, 5, 8, 4, 512, 64);
		CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 8 - blocks, blocks, ++w.group,
					&p), 0);
		CHECK_EQ(p.nr_cmds, 5);
		CHECK_EQ(p.nr_steps, 3);
		if (p.nr_cmds != 5 || p.nr_steps != 3)
			goto run;
		CHECK_EQ(p.steps[0].nr_cmds, 2);
		CHECK_EQ(p.steps[1].nr_cmds, 1);
		CHECK_EQ(p.steps[2].nr_cmds, 2);
		expect_cmd(&p, 0, TPT_PLAN_XDWRITE, 0, 8 - blocks, blocks);
		expect_cmd(&p, 1, TPT_PLAN_PRE_FETCH, 4, 8 - blocks, blocks);
		expect_cmd(&p, 2, TPT_PLAN_PART_BLOCK, 4, 8 - blocks, blocks);
		expect_cmd(&p, 3, TPT_PLAN_WRITE_NEW_DATA, 0, 8 - blocks, blocks);
		expect_cmd(&p, 4, TPT_PLAN_WRITE_NEW_DATA, 4, 8 - blocks, blocks);
		delta = p.cmds[0].result_slot;
		CHECK(delta != TPT_SLOT_NONE);
		CHECK_EQ(p.cmds[0].nr_refs, 1);
		CHECK_EQ(ref_of(&p, 0, 0)->kind, TPT_REF_HOST);
		CHECK_EQ(ref_of(&p, 0, 0)->host_offset, 0);
		CHECK_EQ(ref_of(&p, 0, 0)->length, blocks * 512);
		CHECK_EQ(p.cmds[2].parity_mode, TPT_PARITY_XOR_MEDIUM);
		CHECK_EQ(p.cmds[2].result_slot, TPT_SLOT_NONE);
		CHECK_EQ(p.cmds[2].nr_refs, 1);
		CHECK_EQ(ref_of(&p, 2, 0)->kind, TPT_REF_SLOT);
		CHECK_EQ(ref_of(&p, 2, 0)->member, 0);
		CHECK_EQ(ref_of(&p, 2, 0)->slot, delta);
		CHECK_EQ(p.nr_slots, 1);
		CHECK_EQ(p.slots[0].member, 0);
		CHECK_EQ(p.slots[0].n, 1);

		paper_counts(&p, blocks * 512, &pc);
		CHECK_EQ(pc.controller_ops, 6);
		CHECK_EQ(pc.target_ops, 7);
		CHECK_EQ(pc.host_ops + pc.controller_ops + pc.target_ops, 14);
		CHECK_EQ(pc.host_units, 1);
		CHECK_EQ(pc.target_units, 3);
		CHECK_EQ(pc.host_units + pc.controller_units + pc.target_units, 4);
run:
		rnd_fill(host, blocks * 512);
		world_run_write(&w, &p, 8 - blocks, host, blocks, false);
		world_destroy(&w);
	}
}

/* Without the PRE-FETCH hint (the array's default) a single-block write
 * is one command less, and the parity member reads its old parity itself
 * in PART BLOCK: the same data, parity and slots. */
static void single_block_write_without_prefetch(void)
{
	unsigned char host[512];
	struct tpt_plan p;
	struct world w;

	world_init(&w, 5, 8, 4, 512, 64);
	w.a.ctx.prefetch = false;
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 7, 1, ++w.group, &p), 0);
	CHECK_EQ(p.nr_cmds, 4);
	CHECK_EQ(p.nr_steps, 3);
	if (p.nr_cmds == 4 && p.nr_steps == 3) {
		expect_cmd(&p, 0, TPT_PLAN_XDWRITE, 0, 7, 1);
		expect_cmd(&p, 1, TPT_PLAN_PART_BLOCK, 4, 7, 1);
		expect_cmd(&p, 2, TPT_PLAN_WRITE_NEW_DATA, 0, 7, 1);
		expect_cmd(&p, 3, TPT_PLAN_WRITE_NEW_DATA, 4, 7, 1);
		CHECK_EQ(p.cmds[1].parity_mode, TPT_PARITY_XOR_MEDIUM);
	}
	rnd_fill(host, sizeof(host));
	world_run_write(&w, &p, 7, host, 1, false);
	world_destroy(&w);
}

static void full_stripe_write(void)
{
	unsigned int n, i, d, calc, parity, prep[MAX_MEMBERS];
	struct paper_counts pc;
	struct tpt_plan p;
	unsigned char *host;
	struct world w;
	uint16_t acc;

	for (n = 3; n <= MAX_MEMBERS; n++) {
		const struct raid_level_ops *l = &raid5_level;
		uint32_t unit = 16, blocks = (n - 1) * unit;
		uint64_t lba = blocks;		/* stripe 1 */

		world_init(&w, n, unit, 4, 512, 64);
		w.a.ctx.gather = TPT_GATHER_STAR;
		CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, lba, blocks, ++w.group, &p), 0);
		CHECK_EQ(p.nr_cmds, 3 * n - 2);
		CHECK_EQ(p.nr_steps, n + 1);
		if (p.nr_cmds != 3 * n - 2 || p.nr_steps != n + 1)
			goto run;
		parity = l->parity_member(&w.a.geo, 1, 0);
		calc = l->data_member(&w.a.geo, 1, 0);	/* calculator_rr 0 */

		/* Step 1: a PREP WRITE per block, each FINAL (one per member),
		 * all but the calculator's exported. */
		CHECK_EQ(p.steps[0].nr_cmds, n - 1);
		for (i = 0; i < n - 1; i++) {
			const struct tpt_plan_cmd *c = &p.cmds[i];

			for (d = 0; l->data_member(&w.a.geo, 1, d) != c->member &&
				    d < n - 1; d++)
				;
			expect_cmd(&p, i, TPT_PLAN_PREP_WRITE, c->member, unit,
				   unit);
			CHECK(d < n - 1);
			prep[d] = i;
			CHECK(c->final);
			CHECK_EQ(c->result_slot == TPT_SLOT_NONE, c->member == calc);
			CHECK_EQ(ref_of(&p, i, 0)->host_offset, d * unit * 512);
		}
		/* Then the COMP TMP chain at the calculator, one per step,
		 * accumulating in one slot. */
		acc = p.cmds[n - 1].result_slot;
		CHECK(acc != TPT_SLOT_NONE);
		for (i = 1; i <= n - 2; i++) {
			unsigned int ci = p.steps[i].first_cmd;

			CHECK_EQ(p.steps[i].nr_cmds, 1);
			expect_cmd(&p, ci, TPT_PLAN_COMP_TMP, calc, unit, unit);
			CHECK_EQ(p.cmds[ci].result_slot, acc);
			CHECK_EQ(ref_of(&p, ci, 0)->kind, TPT_REF_SLOT);
			CHECK_EQ(ref_of(&p, ci, 0)->member,
				 l->data_member(&w.a.geo, 1, i));
			CHECK_EQ(ref_of(&p, ci, 0)->slot,
				 p.cmds[prep[i]].result_slot);
		}
		i = p.steps[n - 1].first_cmd;
		CHECK_EQ(p.steps[n - 1].nr_cmds, 1);
		expect_cmd(&p, i, TPT_PLAN_COMP_BLOCK, parity, unit, unit);
		CHECK_EQ(ref_of(&p, i, 0)->member, calc);
		CHECK_EQ(ref_of(&p, i, 0)->slot, acc);
		CHECK_EQ(p.steps[n].nr_cmds, n);
		for (i = 0; i < n; i++)
			expect_cmd(&p, p.steps[n].first_cmd + i,
				   TPT_PLAN_WRITE_NEW_DATA, i, unit, unit);
		CHECK_EQ(p.nr_slots, n - 1);

		/* Table II: (N-1) PREP WRITE + (N-2) COMP TMP + COMP BLOCK
		 * + N WRITE NEW DATA = 3N-2, plus the host answer. */
		paper_counts(&p, unit * 512, &pc);
		CHECK_EQ(pc.controller_ops, 3 * n - 1);
		CHECK_EQ(pc.target_ops, 5 * n - 4);
		CHECK_EQ(pc.host_ops + pc.controller_ops + pc.target_ops,
			 8 * n - 4);
		CHECK_EQ(pc.host_units, n - 1);
		CHECK_EQ(pc.target_units, 3 * (n - 1));
		CHECK_EQ(pc.host_units + pc.controller_units + pc.target_units,
			 4 * (n - 1));
run:
		host = xcalloc(blocks, 512);
		rnd_fill(host, (uint64_t)blocks * 512);
		world_run_write(&w, &p, lba, host, blocks, false);
		CHECK_EQ(w.a.ctx.calculator_rr, 1);
		free(host);
		world_destroy(&w);
	}
}


/*
 * Flat gathering (protocol.md 7.4): a stripe's data members each export
 * their block with PREP WRITE, and the parity member's one COMP BLOCK
 * XORs all N-1 of them, a pass each (5.1): N-1 PREP WRITE, one COMP
 * BLOCK, N WRITE NEW DATA in 3 steps; 2N+1 controller operations with
 * the host answer against the star's or tree's 3N-1, the same N-1
 * transfers between targets.
 */
static void flat_full_stripe_write(void)
{
	const struct raid_level_ops *l = &raid5_level;
	unsigned int n, i, t, parity;
	struct paper_counts pc;
	struct tpt_plan p;
	unsigned char *host;
	struct world w;

	for (n = 3; n <= MAX_MEMBERS; n++) {
		uint32_t unit = 16, blocks = (n - 1) * unit;
		uint64_t lba = blocks;		/* stripe 1 */
		bool named[MAX_MEMBERS] = { false };

		world_init(&w, n, unit, 4, 512, 64);
		w.a.ctx.gather = TPT_GATHER_FLAT;
		CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, lba, blocks, ++w.group, &p), 0);
		CHECK_EQ(p.nr_cmds, 2 * n);
		CHECK_EQ(p.nr_steps, 3);
		paper_counts(&p, unit * 512, &pc);
		CHECK_EQ(pc.controller_ops, 2 * n + 1);
		CHECK_EQ(pc.target_ops, 4 * n - 2);
		CHECK_EQ(pc.target_units, 3 * (n - 1));
		parity = l->parity_member(&w.a.geo, 1, 0);
		for (i = 0; i < p.nr_cmds; i++) {
			const struct tpt_plan_cmd *c = &p.cmds[i];

			if (c->op == TPT_PLAN_PREP_WRITE)
				CHECK(c->result_slot != TPT_SLOT_NONE);
			if (c->op != TPT_PLAN_COMP_BLOCK)
				continue;
			expect_cmd(&p, i, TPT_PLAN_COMP_BLOCK, parity, unit, unit);
			CHECK_EQ(c->nr_refs, n - 1);
			for (t = 0; t < c->nr_refs; t++) {
				const struct tpt_plan_ref *r =
					&p.refs[c->first_ref + t];

				CHECK_EQ(r->kind, TPT_REF_SLOT);
				CHECK(r->member != parity && !named[r->member]);
				named[r->member] = true;
			}
		}
		host = xcalloc(blocks, 512);
		rnd_fill(host, (uint64_t)blocks * 512);
		world_run_write(&w, &p, lba, host, blocks, false);
		free(host);
		world_destroy(&w);
	}
}

/*
 * A full stripe's parity gathered in a binary tree: the same commands and
 * transfers as the star (Table II holds), in ceil(log2(N-1)) gathering
 * steps; no target takes in more than that many blocks, each receiver
 * accumulates in a slot of its own, and the parity reads the root's,
 * which is the calculator's.  Executed against the byte model, also
 * with several stripes side by side.
 */
static void full_stripe_write_tree(void)
{
	const struct raid_level_ops *l = &raid5_level;
	unsigned int n, i, rounds, in[MAX_MEMBERS];
	struct paper_counts pc;
	struct tpt_plan p;
	unsigned char *host;
	struct world w;

	for (n = 3; n <= MAX_MEMBERS; n++) {
		uint32_t unit = 16, blocks = (n - 1) * unit;
		uint64_t lba = blocks;		/* stripe 1 */
		unsigned int calc;

		for (rounds = 0; (1u << rounds) < n - 1; rounds++)
			;
		world_init(&w, n, unit, 4, 512, 64);
		w.a.ctx.gather = TPT_GATHER_TREE;
		w.a.ctx.calculator_rr = n;	/* a root other than index 0 */
		calc = l->data_member(&w.a.geo, 1, n % (n - 1));
		CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, lba, blocks, ++w.group, &p), 0);
		CHECK_EQ(p.nr_cmds, 3 * n - 2);
		CHECK_EQ(p.nr_steps, rounds + 3);
		memset(in, 0, sizeof(in));
		for (i = 0; i < p.nr_cmds; i++) {
			const struct tpt_plan_cmd *c = &p.cmds[i];

			if (c->op == TPT_PLAN_PREP_WRITE)
				/* a gathering's own block stays private */
				CHECK(c->result_slot == TPT_SLOT_NONE ||
				      c->member != calc);
			if (c->op == TPT_PLAN_COMP_TMP) {
				in[c->member]++;
				CHECK(c->result_slot != TPT_SLOT_NONE);
				CHECK(ref_of(&p, i, 0)->member != c->member);
			}
			if (c->op == TPT_PLAN_COMP_BLOCK)
				CHECK_EQ(ref_of(&p, i, 0)->member, calc);
		}
		for (i = 0; i < n; i++)
			CHECK(in[i] <= rounds);
		CHECK_EQ(in[calc], rounds);
		paper_counts(&p, unit * 512, &pc);
		CHECK_EQ(pc.controller_ops, 3 * n - 1);
		CHECK_EQ(pc.target_ops, 5 * n - 4);
		CHECK_EQ(pc.target_units, 3 * (n - 1));
		host = xcalloc(blocks, 512);
		rnd_fill(host, (uint64_t)blocks * 512);
		world_run_write(&w, &p, lba, host, blocks, false);
		free(host);

		/* Three stripes and a partial one, side by side. */
		blocks = 3 * (n - 1) * unit + 5;
		CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, blocks, ++w.group, &p), 0);
		host = xcalloc(blocks, 512);
		rnd_fill(host, (uint64_t)blocks * 512);
		world_run_write(&w, &p, 0, host, blocks, false);
		free(host);
		world_destroy(&w);
	}
}

/*
 * auto: the star while it is as short (up to 3 data blocks), the tree
 * from 4 on - unless flat, the parity member fetching every data block
 * in its COMP BLOCK, ends first: (k - G - 1) units over its link against
 * G steps of 128 KiB each (raid5.c, gather_of()).  So flat up to 4
 * members at any unit, up to 256 KiB units at 5, 6 members, 96 KiB at 9.
 */
static void parity_gather_auto(void)
{
	static const uint32_t units[] = { 8, 512, 2048 };	/* 4k, 256k, 1m */
	unsigned int n, i, u, comp_steps, comp_block_refs;
	struct tpt_plan p;
	struct world w;

	for (u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		for (n = 3; n <= MAX_MEMBERS; n++) {
			uint32_t unit = units[u];
			unsigned int k = n - 1, steps = k >= 4 ?
				(k > 4 ? 3 : 2) : k - 1;
			bool flat = (uint64_t)(k - steps - 1) * unit * 512 <=
				    steps * (128u << 10);

			world_init(&w, n, unit, 2, 512, 16);
			CHECK_EQ(w.a.ctx.gather, TPT_GATHER_AUTO);
			CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, k * unit,
						       ++w.group, &p), 0);
			comp_steps = 0;
			comp_block_refs = 0;
			for (i = 0; i < p.nr_steps; i++)
				if (p.cmds[p.steps[i].first_cmd].op ==
				    TPT_PLAN_COMP_TMP)
					comp_steps++;
			for (i = 0; i < p.nr_cmds; i++)
				if (p.cmds[i].op == TPT_PLAN_COMP_BLOCK)
					comp_block_refs += p.cmds[i].nr_refs;
			CHECK_EQ(comp_steps, flat ? 0 : steps);
			CHECK_EQ(comp_block_refs, flat ? k : 1);
			if ((n == 5 && unit == 2048) || (n == 7 && unit == 512))
				CHECK(!flat);
			if (n <= 4 || (n <= 6 && unit <= 512) || unit == 8)
				CHECK(flat);
			tpt_plan_return_slots(&p);
			tpt_plan_free(&p);
			world_destroy(&w);
		}
	}
}

/* Tables I and II up to the widest array, without executing: the
 * simulator stops at MAX_MEMBERS. */
static void wide_arrays_count_like_the_paper(void)
{
	struct slot_alloc *slots = xcalloc(RAID_MAX_MEMBERS, sizeof(*slots));
	struct slot_alloc **slot_of = xcalloc(RAID_MAX_MEMBERS, sizeof(*slot_of));
	struct raid_geometry g = { .unit_blocks = 8, .member_blocks = 8 * 64 };
	struct tpt_plan_ctx c = {
		.geo = &g, .level = &raid5_level, .block_size = 512,
		.slots = slot_of, .prefetch = true,
		.gather = TPT_GATHER_TREE,	/* the paper's counts */
	};
	struct paper_counts pc;
	struct tpt_plan p;
	unsigned int n, m, rounds;

	for (m = 0; m < RAID_MAX_MEMBERS; m++)
		slot_of[m] = &slots[m];
	for (n = MAX_MEMBERS + 1; n <= RAID_MAX_MEMBERS; n++) {
		g.members = n;
		for (m = 0; m < n; m++)
			CHECK_EQ(slot_alloc_init(&slots[m], 8), 0);
		CHECK_EQ(raid5_level.tpt_write(&c, 3 * 8 * (n - 1), 8 * (n - 1), 1, &p),
			 0);
		paper_counts(&p, 8 * 512, &pc);
		CHECK_EQ(pc.controller_ops, 3 * n - 1);
		CHECK_EQ(pc.target_ops, 5 * n - 4);
		CHECK_EQ(pc.target_units, 3 * (n - 1));
		/* The tree: ceil(log2(N-1)) gathering steps. */
		for (rounds = 0; (1u << rounds) < n - 1; rounds++)
			;
		CHECK_EQ(p.nr_steps, rounds + 3);
		tpt_plan_return_slots(&p);
		tpt_plan_free(&p);

		CHECK_EQ(raid5_level.tpt_write(&c, 8 * (n - 1) + 8 * (n - 2), 8, 2, &p),
			 0);
		paper_counts(&p, 8 * 512, &pc);
		CHECK_EQ(pc.controller_ops, 6);
		CHECK_EQ(pc.target_ops, 7);
		tpt_plan_return_slots(&p);
		tpt_plan_free(&p);
		for (m = 0; m < n; m++)
			CHECK_EQ(slot_alloc_free_count(&slots[m]), 8);
	}
	free(slots);
	free(slot_of);
}

static void reads_match_table(void)
{
	struct paper_counts pc;
	struct tpt_plan p;
	struct world w;
	unsigned int n, i;

	for (n = 3; n <= MAX_MEMBERS; n++) {
		world_init(&w, n, 8, 4, 512, 16);
		CHECK_EQ(raid5_level.tpt_read(&w.a.ctx, 8 * (n - 1) + 8, 8, 1, &p), 0);
		CHECK_EQ(p.nr_cmds, 1);
		CHECK(p.cmds[0].final);
		paper_counts(&p, 8 * 512, &pc);
		CHECK_EQ(pc.controller_ops, 2);
		CHECK_EQ(pc.target_ops, 2);
		CHECK_EQ(pc.host_units, 1);
		CHECK_EQ(pc.target_units, 1);
		tpt_plan_free(&p);

		CHECK_EQ(raid5_level.tpt_read(&w.a.ctx, 8 * (n - 1), 8 * (n - 1), 1,
				       &p), 0);
		CHECK_EQ(p.nr_cmds, n - 1);
		for (i = 0; i < p.nr_cmds; i++) {
			CHECK(p.cmds[i].final);
			CHECK_EQ(p.cmds[i].result_slot, TPT_SLOT_NONE);
			CHECK_EQ(ref_of(&p, i, 0)->host_offset, i * 8 * 512);
		}
		paper_counts(&p, 8 * 512, &pc);
		CHECK_EQ(pc.controller_ops, n);
		CHECK_EQ(pc.target_ops, 2 * (n - 1));
		CHECK_EQ(pc.host_ops + pc.controller_ops + pc.target_ops,
			 3 * n - 1);
		CHECK_EQ(pc.host_units, n - 1);
		CHECK_EQ(pc.target_units, n - 1);
		tpt_plan_free(&p);
		world_destroy(&w);
	}
}

/* N=4, unit 8: stripe 0 has parity on member 3 and data units on members
 * 0, 1, 2; stripe 1 parity on 2 and data on 3, 0, 1. */
static void read_pieces_and_final(void)
{
	struct tpt_plan p;
	struct world w;

	world_init(&w, 4, 8, 6, 512, 16);
	/* Unit 0 from block 6, unit 1, unit 2 up to block 2. */
	CHECK_EQ(raid5_level.tpt_read(&w.a.ctx, 6, 12, 7, &p), 0);
	CHECK_EQ(p.nr_cmds, 3);
	expect_cmd(&p, 0, TPT_PLAN_PREP_READ, 0, 6, 2);
	expect_cmd(&p, 1, TPT_PLAN_PREP_READ, 1, 0, 8);
	expect_cmd(&p, 2, TPT_PLAN_PREP_READ, 2, 0, 2);
	CHECK_EQ(ref_of(&p, 0, 0)->host_offset, 0);
	CHECK_EQ(ref_of(&p, 1, 0)->host_offset, 2 * 512);
	CHECK_EQ(ref_of(&p, 2, 0)->host_offset, 10 * 512);
	CHECK_EQ(ref_of(&p, 2, 0)->length, 2 * 512);
	CHECK(p.cmds[0].final && p.cmds[1].final && p.cmds[2].final);
	tpt_plan_free(&p);

	/* Two whole stripes: the units of members 0 and 1 are contiguous on
	 * them (rows 0 and 1), so each member gets one PREP READ of 16
	 * blocks with a host descriptor per unit: array units 0 and 4, 1 and
	 * 5.  One command per member, so every one is FINAL. */
	CHECK_EQ(raid5_level.tpt_read(&w.a.ctx, 0, 48, 8, &p), 0);
	CHECK_EQ(p.nr_cmds, 4);
	expect_cmd(&p, 0, TPT_PLAN_PREP_READ, 0, 0, 16);
	expect_cmd(&p, 1, TPT_PLAN_PREP_READ, 1, 0, 16);
	expect_cmd(&p, 2, TPT_PLAN_PREP_READ, 2, 0, 8);
	expect_cmd(&p, 3, TPT_PLAN_PREP_READ, 3, 8, 8);
	CHECK_EQ(p.cmds[0].nr_refs, 2);
	CHECK_EQ(ref_of(&p, 0, 0)->host_offset, 0);
	CHECK_EQ(ref_of(&p, 0, 1)->host_offset, 4 * 8 * 512);
	CHECK_EQ(ref_of(&p, 1, 1)->host_offset, 5 * 8 * 512);
	CHECK_EQ(ref_of(&p, 3, 0)->host_offset, 3 * 8 * 512);
	CHECK(p.cmds[0].final && p.cmds[1].final && p.cmds[2].final &&
	      p.cmds[3].final);
	tpt_plan_free(&p);

	world_read(&w, 6, 12);
	world_read(&w, 0, 48);
	world_destroy(&w);
}

/*
 * N=4, unit 8, a write from block 4 of unit 0 to block 5 of unit 1: the
 * pieces sit at unit offsets [4,8) and [0,6), so the parity's offsets
 * split into [0,4) (unit 1's delta), [4,6) (both) and [6,8) (unit 0's).
 */
static void partial_pieces_at_different_offsets(void)
{
	unsigned char host[10 * 512];
	struct tpt_plan p;
	struct world w;
	unsigned int i;

	world_init(&w, 4, 8, 6, 512, 16);
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 4, 10, ++w.group, &p), 0);
	CHECK_EQ(p.nr_steps, 3);
	CHECK_EQ(p.nr_cmds, 11);
	if (p.nr_steps != 3 || p.nr_cmds != 11)
		goto run_first;
	CHECK_EQ(p.steps[0].nr_cmds, 5);
	expect_cmd(&p, 0, TPT_PLAN_XDWRITE, 1, 0, 4);
	expect_cmd(&p, 1, TPT_PLAN_XDWRITE, 0, 4, 2);
	expect_cmd(&p, 2, TPT_PLAN_XDWRITE, 1, 4, 2);
	expect_cmd(&p, 3, TPT_PLAN_XDWRITE, 0, 6, 2);
	expect_cmd(&p, 4, TPT_PLAN_PRE_FETCH, 3, 0, 8);
	CHECK_EQ(ref_of(&p, 0, 0)->host_offset, 4 * 512);
	CHECK_EQ(ref_of(&p, 1, 0)->host_offset, 0);
	CHECK_EQ(ref_of(&p, 2, 0)->host_offset, 8 * 512);
	CHECK_EQ(ref_of(&p, 3, 0)->host_offset, 2 * 512);
	for (i = 0; i < 4; i++)
		CHECK(p.cmds[i].result_slot != TPT_SLOT_NONE);
	CHECK(p.cmds[1].result_slot != p.cmds[3].result_slot);

	/* One PART BLOCK per interval, both deltas of [4,6) in one, a pass
	 * each (protocol.md 5.1). */
	CHECK_EQ(p.steps[1].nr_cmds, 3);
	expect_cmd(&p, 5, TPT_PLAN_PART_BLOCK, 3, 0, 4);
	expect_cmd(&p, 6, TPT_PLAN_PART_BLOCK, 3, 4, 2);
	expect_cmd(&p, 7, TPT_PLAN_PART_BLOCK, 3, 6, 2);
	CHECK_EQ(p.cmds[5].parity_mode, TPT_PARITY_XOR_MEDIUM);
	CHECK_EQ(p.cmds[6].parity_mode, TPT_PARITY_XOR_MEDIUM);
	CHECK_EQ(p.cmds[7].parity_mode, TPT_PARITY_XOR_MEDIUM);
	CHECK_EQ(p.cmds[6].nr_refs, 2);
	CHECK_EQ(ref_of(&p, 6, 0)->member, 0);
	CHECK_EQ(ref_of(&p, 6, 0)->slot, p.cmds[1].result_slot);
	CHECK_EQ(ref_of(&p, 6, 1)->member, 1);
	CHECK_EQ(ref_of(&p, 6, 1)->slot, p.cmds[2].result_slot);

	/* One WRITE NEW DATA per member over its contiguous staged run. */
	CHECK_EQ(p.steps[2].nr_cmds, 3);
	expect_cmd(&p, 8, TPT_PLAN_WRITE_NEW_DATA, 0, 4, 4);
	expect_cmd(&p, 9, TPT_PLAN_WRITE_NEW_DATA, 1, 0, 6);
	expect_cmd(&p, 10, TPT_PLAN_WRITE_NEW_DATA, 3, 0, 8);
run_first:
	rnd_fill(host, sizeof(host));
	world_run_write(&w, &p, 4, host, 10, false);

	/* Tail of unit 0 and head of unit 1 that do not overlap: no cut,
	 * and the parity's two intervals leave a gap, so it gets two WRITE
	 * NEW DATA. */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 6, 4, ++w.group, &p), 0);
	CHECK_EQ(p.nr_cmds, 9);
	CHECK_EQ(p.nr_steps, 3);
	expect_cmd(&p, 0, TPT_PLAN_XDWRITE, 1, 0, 2);
	expect_cmd(&p, 1, TPT_PLAN_XDWRITE, 0, 6, 2);
	expect_cmd(&p, 2, TPT_PLAN_PRE_FETCH, 3, 0, 8);
	expect_cmd(&p, 3, TPT_PLAN_PART_BLOCK, 3, 0, 2);
	expect_cmd(&p, 4, TPT_PLAN_PART_BLOCK, 3, 6, 2);
	expect_cmd(&p, 5, TPT_PLAN_WRITE_NEW_DATA, 0, 6, 2);
	expect_cmd(&p, 6, TPT_PLAN_WRITE_NEW_DATA, 1, 0, 2);
	expect_cmd(&p, 7, TPT_PLAN_WRITE_NEW_DATA, 3, 0, 2);
	expect_cmd(&p, 8, TPT_PLAN_WRITE_NEW_DATA, 3, 6, 2);
	rnd_fill(host, 4 * 512);
	world_run_write(&w, &p, 6, host, 4, false);
	world_destroy(&w);
}

/*
 * N=4, unit 8 (24 blocks a stripe): blocks 5..75 are a head partial in
 * stripe 0, full stripes 1 and 2, and a tail partial of 4 blocks in
 * stripe 3, whose parity is on member 0 and unit 0 on member 1.
 */
static void multi_stripe_write(void)
{
	unsigned int counts[TPT_PLAN_RELEASE + 1] = { 0 }, i;
	unsigned char *host = xcalloc(5 * 24, 512);
	unsigned int wnd[4] = { 0 };
	uint64_t wnd_blocks[4] = { 0 };
	struct tpt_plan_counts c;
	struct tpt_plan p;
	struct world w;

	world_init(&w, 4, 8, 6, 512, 64);
	w.a.ctx.gather = TPT_GATHER_STAR;	/* flat_full_stripe_write: flat */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 5, 71, ++w.group, &p), 0);
	for (i = 0; i < p.nr_cmds; i++)
		counts[p.cmds[i].op]++;
	/* Head pieces [5,8), [0,8), [0,8): the parity's offsets split at 5,
	 * so units 1 and 2 XDWRITE twice; [0,5) folds 2 deltas, [5,8) 3,
	 * each interval in one PART BLOCK.  Tail: one piece, one delta. */
	CHECK_EQ(counts[TPT_PLAN_XDWRITE], 5 + 1);
	CHECK_EQ(counts[TPT_PLAN_PRE_FETCH], 2);
	CHECK_EQ(counts[TPT_PLAN_PART_TMP], 0);
	CHECK_EQ(counts[TPT_PLAN_PART_BLOCK], 1 + 1 + 1);
	/* Full stripes 1 and 2 (parity on members 2 and 1), star from root
	 * member 3 (stripe 1's data index 0): member 3 gathers both stripes
	 * (one PREP WRITE, one COMP TMP per step), member 0 sends both, and
	 * members 1 and 2 send one each. */
	CHECK_EQ(counts[TPT_PLAN_PREP_WRITE], 4);
	CHECK_EQ(counts[TPT_PLAN_COMP_TMP], 2);
	CHECK_EQ(counts[TPT_PLAN_COMP_BLOCK], 2);
	/* The parts share steps: host reads, the star's two COMP TMP steps
	 * (the PART BLOCKs beside the first), COMP BLOCK, WRITE NEW DATA. */
	CHECK_EQ(p.nr_steps, 5);
	if (p.nr_steps != 5)
		goto run_first;
	for (i = 0; i < p.nr_cmds; i++)
		CHECK_EQ(p.cmds[i].op == TPT_PLAN_WRITE_NEW_DATA,
			 i >= p.steps[p.nr_steps - 1].first_cmd);
	/* Staged runs continue from one part into the next, so every member
	 * writes one contiguous run: member 0 [5,28) (unit 0 tail, stripes
	 * 1-2, stripe 3's parity), member 1 [0,28), members 2 and 3 [0,24). */
	for (i = p.steps[p.nr_steps - 1].first_cmd; i < p.nr_cmds; i++) {
		wnd[p.cmds[i].member]++;
		wnd_blocks[p.cmds[i].member] += p.cmds[i].blocks;
	}
	for (i = 0; i < 4; i++)
		CHECK_EQ(wnd[i], 1);
	CHECK_EQ(wnd_blocks[0], 3 + 16 + 4);
	CHECK_EQ(wnd_blocks[1], 8 + 16 + 4);
	CHECK_EQ(wnd_blocks[2], 24);
	CHECK_EQ(wnd_blocks[3], 24);
run_first:
	rnd_fill(host, 71 * 512);
	world_run_write(&w, &p, 5, host, 71, false);

	/* Five full stripes: rows are contiguous on each member, so one
	 * WRITE NEW DATA per member covers all five.  Root member 1 (stripe
	 * 0's data index 1, calculator_rr 1), parity on 3, 2, 1, 0, 3; index
	 * 0 is member 1 but in stripe 2, where it is member 2.  Runs of one
	 * role: member 1 gathers [0,2) and [3,5); member 2 sends [0], gathers
	 * [2], sends [3,5); member 3 sends [1,4); member 0 sends [0,5),
	 * skipping its parity unit in stripe 3: 7 PREP WRITEs (15 with one
	 * per block) and 3 receiver runs of 2 COMP TMPs each (10 with one
	 * per stripe and step). */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, 5 * 24, ++w.group, &p), 0);
	memset(counts, 0, sizeof(counts));
	for (i = 0; i < p.nr_cmds; i++)
		counts[p.cmds[i].op]++;
	CHECK_EQ(counts[TPT_PLAN_PREP_WRITE], 7);
	CHECK_EQ(counts[TPT_PLAN_COMP_TMP], 6);
	CHECK_EQ(counts[TPT_PLAN_COMP_BLOCK], 5);
	CHECK_EQ(counts[TPT_PLAN_WRITE_NEW_DATA], 4);
	CHECK_EQ(p.nr_cmds, 22);
	CHECK_EQ(p.nr_steps, 5);
	if (p.nr_steps != 5)
		goto run_second;
	for (i = p.steps[4].first_cmd; i < p.nr_cmds; i++) {
		CHECK_EQ(p.cmds[i].lba, 0);
		CHECK_EQ(p.cmds[i].blocks, 40);
	}
	/* Both COMP TMP steps serve all five stripes side by side, a
	 * command per receiver run. */
	CHECK_EQ(p.steps[1].nr_cmds, 3);
	CHECK_EQ(p.steps[2].nr_cmds, 3);
	CHECK_EQ(p.steps[3].nr_cmds, 5);
	for (i = p.steps[1].first_cmd; i < p.steps[3].first_cmd; i++) {
		CHECK_EQ(p.cmds[i].member == 2 ? 1u : 2u,
			 p.cmds[i].blocks / 8);
		CHECK_EQ(p.cmds[i].nr_refs, p.cmds[i].blocks / 8);
	}
	tpt_plan_count(&p, &c);
	CHECK_EQ(c.commands, 22);
	CHECK_EQ(c.host_bytes, 5 * 24 * 512);
	CHECK_EQ(c.peer_bytes, 5 * 3 * 8 * 512);
run_second:
	rnd_fill(host, 5 * 24 * 512);
	world_run_write(&w, &p, 0, host, 5 * 24, false);
	free(host);
	world_destroy(&w);
}

/*
 * Data the controller holds (an unmodified host's): full stripes go as a
 * WRITE(16) per member of its run of units, data and parity, with no
 * group; a request's partial stripes keep their TPT commands, and the
 * WRITEs go in the step of their WRITE NEW DATA.
 */
static void held_full_stripes_are_written_whole(void)
{
	unsigned int counts[TPT_PLAN_WRITE + 1] = { 0 }, parity = 0, i, j;
	unsigned char *host = xcalloc(5 * 24, 512);
	struct tpt_plan_counts c;
	struct tpt_plan p;
	struct world w;

	world_init(&w, 4, 8, 6, 512, 64);
	w.a.ctx.host_held = true;
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, 5 * 24, ++w.group, &p), 0);
	CHECK_EQ(p.nr_cmds, 4);
	CHECK_EQ(p.nr_steps, 1);
	CHECK_EQ(p.nr_slots, 0);
	for (i = 0; i < p.nr_cmds; i++) {
		const struct tpt_plan_cmd *pc = &p.cmds[i];

		CHECK_EQ(pc->op, TPT_PLAN_WRITE);
		CHECK_EQ(pc->member, i);
		CHECK_EQ(pc->lba, 0);
		CHECK_EQ(pc->blocks, 5 * 8);
		CHECK_EQ(pc->nr_refs, 5);
		for (j = 0; j < pc->nr_refs; j++) {
			const struct tpt_plan_ref *ref = &p.refs[pc->first_ref + j];

			CHECK_EQ(ref->length, 8 * 512);
			if (ref->kind != TPT_REF_PARITY)
				continue;
			parity++;
			CHECK_EQ(ref->nr_sources, 3);
			CHECK_EQ(ref->host_offset, j * 24 * 512);
		}
	}
	CHECK_EQ(parity, 5);
	tpt_plan_count(&p, &c);
	CHECK_EQ(c.commands, 4);
	CHECK_EQ(c.peer_bytes, 0);
	CHECK_EQ(c.host_bytes, 5 * 32 * 512);
	rnd_fill(host, 5 * 24 * 512);
	world_run_write(&w, &p, 0, host, 5 * 24, false);

	/* A head and a tail piece around 3 full stripes. */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 20, 4 + 3 * 24 + 5, ++w.group,
				       &p), 0);
	for (i = 0; i < p.nr_cmds; i++)
		counts[p.cmds[i].op]++;
	CHECK_EQ(counts[TPT_PLAN_WRITE], 4);
	CHECK_EQ(counts[TPT_PLAN_PREP_WRITE], 0);
	CHECK(counts[TPT_PLAN_XDWRITE] > 0);
	CHECK(counts[TPT_PLAN_WRITE_NEW_DATA] > 0);
	for (i = 0; i < p.nr_cmds; i++)
		if (p.cmds[i].op == TPT_PLAN_WRITE)
			CHECK(i >= p.steps[p.nr_steps - 1].first_cmd);
	rnd_fill(host, (4 + 3 * 24 + 5) * 512);
	world_run_write(&w, &p, 20, host, 4 + 3 * 24 + 5, false);
	free(host);
	world_destroy(&w);
}

/* The calculator rotates over requests to one stripe among its data
 * members; within a request it is one member, never a stripe's parity. */
static void calculator_rotation(void)
{
	const struct raid_level_ops *l = &raid5_level;
	unsigned int seen[MAX_MEMBERS] = { 0 }, i, j, m;
	unsigned char *host = xcalloc(5 * 32, 512);
	struct tpt_plan p;
	struct world w;

	world_init(&w, 5, 8, 10, 512, 64);
	w.a.ctx.gather = TPT_GATHER_TREE;	/* flat has no calculator */
	for (i = 0; i < 8; i++) {
		CHECK_EQ(w.a.ctx.calculator_rr, i);
		CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 2 * 32, 32, ++w.group, &p), 0);
		for (j = 0; j < p.nr_cmds; j++)
			if (p.cmds[j].op == TPT_PLAN_COMP_TMP)
				break;
		m = p.cmds[j].member;
		CHECK_EQ(m, l->data_member(&w.a.geo, 2, i % 4));
		CHECK(m != l->parity_member(&w.a.geo, 2, 0));
		seen[m]++;
		rnd_fill(host, 32 * 512);
		world_run_write(&w, &p, 2 * 32, host, 32, false);
	}
	for (m = 0; m < 5; m++)
		CHECK_EQ(seen[m], m == l->parity_member(&w.a.geo, 2, 0) ? 0 : 2);

	/* Partial stripes have no calculator and leave the rotation be. */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 1, 30, ++w.group, &p), 0);
	rnd_fill(host, 30 * 512);
	world_run_write(&w, &p, 1, host, 30, false);
	CHECK_EQ(w.a.ctx.calculator_rr, 8);

	/* Five stripes in one request (parity on 4, 3, 2, 1, 0): the root,
	 * member 0 (stripe 0's data index 0 at calculator_rr 8), gathers
	 * stripes 0-3 with one COMP TMP per step over all four; in stripe 4
	 * it is the parity member and member 1 gathers.  No COMP TMP covers
	 * a stripe of which its member is the parity. */
	memset(seen, 0, sizeof(seen));
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, 5 * 32, ++w.group, &p), 0);
	for (j = 0; j < p.nr_cmds; j++) {
		const struct tpt_plan_cmd *c = &p.cmds[j];
		uint64_t s;

		if (c->op == TPT_PLAN_COMP_BLOCK)
			CHECK_EQ(ref_of(&p, j, 0)->member, c->lba / 8 == 4 ? 1u : 0u);
		if (c->op != TPT_PLAN_COMP_TMP)
			continue;
		for (s = c->lba / 8; s < (c->lba + c->blocks) / 8; s++)
			CHECK(c->member != l->parity_member(&w.a.geo, s, 0));
		if (c->member == 0)
			CHECK(c->lba == 0 && c->blocks == 4 * 8);
		seen[c->member]++;
	}
	CHECK_EQ(seen[0], 2);		/* the tree's two steps at the root */
	rnd_fill(host, 5 * 32 * 512);
	world_run_write(&w, &p, 0, host, 5 * 32, false);
	CHECK_EQ(w.a.ctx.calculator_rr, 9);
	free(host);
	world_destroy(&w);
}

/*
 * Many full stripes, every root and all topologies, against the byte
 * model: a COMP TMP never covers a stripe of which its member is the
 * parity, a PREP WRITE only with a skip there (a sender's, inside its
 * run), both name a block per stripe, and a request of
 * 2N+1 stripes takes fewer of each than one per block (PREP WRITE) or
 * per stripe and edge (COMP TMP) - at most half as many from N = 5 on
 * (N = 5: 10-11 PREP WRITEs in the star, 18-19 in the tree, 5 flat,
 * against 44; 15 COMP TMPs against 33).
 */
static void multi_stripe_runs(void)
{
	const struct raid_level_ops *l = &raid5_level;
	enum tpt_parity_gather how;
	unsigned int n, rr, i, j, counts[TPT_PLAN_RELEASE + 1];
	unsigned char *host;
	struct tpt_plan p;
	struct world w;

	for (n = 3; n <= MAX_MEMBERS; n++) {
		uint32_t unit = 4, nr = 2 * n + 1, blocks = nr * (n - 1) * unit;
		uint64_t lba = (n - 1) * unit;		/* stripe 1 on */

		host = xcalloc(blocks, 512);
		for (how = TPT_GATHER_STAR; how <= TPT_GATHER_FLAT; how++) {
			for (rr = 0; rr < n; rr++) {
				world_init(&w, n, unit, nr + 2, 512, 256);
				w.a.ctx.gather = how;
				w.a.ctx.calculator_rr = rr;
				CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, lba, blocks,
							       ++w.group, &p), 0);
				memset(counts, 0, sizeof(counts));
				for (i = 0; i < p.nr_cmds; i++) {
					const struct tpt_plan_cmd *c = &p.cmds[i];
					uint64_t s;

					counts[c->op]++;
					if (c->op == TPT_PLAN_COMP_BLOCK)
						CHECK_EQ(c->nr_refs,
							 how == TPT_GATHER_FLAT ?
							 n - 1 : 1);
					if (c->op != TPT_PLAN_PREP_WRITE &&
					    c->op != TPT_PLAN_COMP_TMP)
						continue;
					CHECK_EQ(c->blocks % unit, 0);
					CHECK_EQ(c->nr_refs, c->blocks / unit);
					for (s = c->lba / unit;
					     s < (c->lba + c->blocks) / unit; s++) {
						j = (unsigned int)(s - c->lba / unit);
						CHECK_EQ(c->member ==
							 l->parity_member(&w.a.geo, s, 0),
							 ref_of(&p, i, j)->kind ==
							 TPT_REF_SKIP);
						CHECK(c->member !=
						      l->parity_member(&w.a.geo, s, 0) ||
						      (c->op == TPT_PLAN_PREP_WRITE &&
						       j && j + 1 < c->nr_refs));
					}
				}
				CHECK(counts[TPT_PLAN_PREP_WRITE] < nr * (n - 1));
				CHECK(counts[TPT_PLAN_COMP_TMP] < nr * (n - 2));
				if (n >= 5) {
					CHECK(2 * counts[TPT_PLAN_PREP_WRITE] <=
					      nr * (n - 1));
					CHECK(2 * counts[TPT_PLAN_COMP_TMP] <=
					      nr * (n - 2));
				}
				CHECK_EQ(counts[TPT_PLAN_COMP_BLOCK], nr);
				/* Flat: every data block a sender, so one
				 * PREP WRITE per member, over its parity
				 * units. */
				if (how == TPT_GATHER_FLAT) {
					CHECK_EQ(counts[TPT_PLAN_COMP_TMP], 0);
					CHECK_EQ(counts[TPT_PLAN_PREP_WRITE], n);
				}
				rnd_fill(host, (uint64_t)blocks * 512);
				world_run_write(&w, &p, lba, host, blocks, false);
				world_destroy(&w);
			}
		}
		free(host);
	}
}

/*
 * An extended host's READ of 2N stripes and a ragged head: one PREP READ
 * per member, stepping over each parity unit inside its run with a skip
 * descriptor (protocol.md 7.1); an unmodified host's PREP READs, sent as
 * plain READs, stop at the parity instead.  Both read back the data.
 */
static void reads_step_over_parity(void)
{
	unsigned int n, i, j, skips, preps;
	struct tpt_plan p;
	struct world w;

	for (n = 3; n <= MAX_MEMBERS; n++) {
		uint32_t unit = 8, blocks = 2 * n * (n - 1) * unit - 3;

		world_init(&w, n, unit, 2 * n + 2, 512, 64);
		w.a.ctx.host_held = false;
		CHECK_EQ(raid5_level.tpt_read(&w.a.ctx, 3, blocks, ++w.group, &p), 0);
		preps = skips = 0;
		for (i = 0; i < p.nr_cmds; i++) {
			const struct tpt_plan_cmd *c = &p.cmds[i];

			CHECK_EQ(c->op, TPT_PLAN_PREP_READ);
			preps++;
			for (j = 0; j < c->nr_refs; j++) {
				const struct tpt_plan_ref *r = ref_of(&p, i, j);

				if (r->kind != TPT_REF_SKIP)
					continue;
				skips++;
				CHECK(j > 0 && j + 1 < c->nr_refs);
				CHECK_EQ(r->length, unit * 512);
			}
		}
		CHECK_EQ(preps, n);
		/* Every member's parity units between its first and last
		 * data unit: 2 per member, less the ends of the range. */
		CHECK(skips >= 2 * n - 2 && skips <= 2 * n);
		tpt_plan_free(&p);
		world_read(&w, 3, blocks);

		w.a.ctx.host_held = true;
		CHECK_EQ(raid5_level.tpt_read(&w.a.ctx, 3, blocks, ++w.group, &p), 0);
		CHECK(p.nr_cmds >= 2 * n);
		for (i = 0; i < p.nr_refs; i++)
			CHECK(p.refs[i].kind == TPT_REF_HOST);
		tpt_plan_free(&p);
		world_read(&w, 3, blocks);
		world_destroy(&w);
	}
}

static void bad_requests(void)
{
	struct tpt_plan p;
	struct world w;
	struct tpt_plan_ctx c;

	world_init(&w, 4, 8, 6, 512, 16);
	c = w.a.ctx;
	CHECK_EQ(raid5_level.tpt_read(&c, 0, 0, 1, &p), -EINVAL);
	CHECK_EQ(raid5_level.tpt_write(&c, 0, 0, 1, &p), -EINVAL);
	CHECK_EQ(raid5_level.tpt_read(&c, w.array_blocks - 3, 4, 1, &p), -EINVAL);
	CHECK_EQ(raid5_level.tpt_write(&c, w.array_blocks, 1, 1, &p), -EINVAL);
	CHECK_EQ(raid5_level.tpt_write(&c, UINT64_MAX, 2, 1, &p), -EINVAL);
	CHECK_EQ(raid5_level.tpt_read(&c, w.array_blocks - 4, 4, 1, &p), 0);
	tpt_plan_free(&p);

	c.block_size = 0;
	CHECK_EQ(raid5_level.tpt_read(&c, 0, 1, 1, &p), -EINVAL);
	/* A slot payload that is no multiple of 512. */
	c.block_size = 32;
	CHECK_EQ(raid5_level.tpt_write(&c, 0, 1, 1, &p), -EINVAL);
	c = w.a.ctx;
	c.slots = NULL;
	CHECK_EQ(raid5_level.tpt_write(&c, 0, 1, 1, &p), -EINVAL);
	c = w.a.ctx;
	w.a.geo.members = 2;
	CHECK_EQ(raid5_level.tpt_read(&c, 0, 1, 1, &p), -EINVAL);
	w.a.geo.members = 4;
	/* Member LBAs beyond 48 bits, a unit beyond a 24-bit length. */
	w.a.geo.member_blocks = (UINT64_C(1) << 48) + 8;
	CHECK_EQ(raid5_level.tpt_read(&c, 0, 1, 1, &p), -EINVAL);
	w.a.geo.member_blocks = UINT64_C(1) << 48;
	CHECK_EQ(raid5_level.tpt_read(&c, 0, 1, 1, &p), 0);
	tpt_plan_free(&p);
	w.a.geo.unit_blocks = 1 << 24;
	w.a.geo.member_blocks = 1 << 24;
	c.block_size = 1;
	CHECK_EQ(raid5_level.tpt_read(&c, 0, 1, 1, &p), -EINVAL);
	w.a.geo.unit_blocks = 8;
	w.a.geo.member_blocks = 6 * 8;
	CHECK(all_slots_free(&w.a));
	CHECK_EQ(w.a.ctx.calculator_rr, 0);
	world_destroy(&w);
}

static void back_pressure(void)
{
	unsigned int m, free_before[MAX_MEMBERS];
	unsigned char host[24 * 512];
	uint16_t held[4];
	struct tpt_plan p;
	struct world w;

	world_init(&w, 4, 8, 6, 512, 4);
	/* Member 3 is out of slots; a full stripe needs slots on members
	 * 0-2 first, which must not stay taken. */
	for (m = 0; m < 4; m++)
		CHECK_EQ(slot_alloc_get(&w.a.slots[3], 1, &held[m]), 0);
	for (m = 0; m < 4; m++)
		free_before[m] = slot_alloc_free_count(&w.a.slots[m]);
	/* Stripe 1: parity on member 2, data on 3, 0, 1. */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 24, 24, ++w.group, &p), -EAGAIN);
	CHECK_EQ(p.nr_cmds, 0);
	for (m = 0; m < 4; m++)
		CHECK_EQ(slot_alloc_free_count(&w.a.slots[m]), free_before[m]);
	CHECK_EQ(w.a.ctx.calculator_rr, 0);
	/* Unit 0 of stripe 1 is on member 3 too. */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 24, 1, ++w.group, &p), -EAGAIN);
	/* Stripe 0 needs nothing of member 3 (its parity). */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, 24, ++w.group, &p), 0);
	rnd_fill(host, sizeof(host));
	for (m = 0; m < 4; m++)
		slot_alloc_put(&w.a.slots[3], held[m], 1);
	world_run_write(&w, &p, 0, host, 24, false);
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 24, 24, ++w.group, &p), 0);
	world_run_write(&w, &p, 24, host, 24, false);

	/* Six full stripes need more than four slots on some member, which
	 * no amount of waiting provides. */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, 6 * 24, ++w.group, &p), -E2BIG);
	CHECK(all_slots_free(&w.a));
	world_destroy(&w);

	/* One slot per member: a full stripe of N=3 needs one on each data
	 * member (block, accumulator), two on one member is too many; so
	 * are two deltas from one member in a partial stripe. */
	world_init(&w, 3, 8, 6, 512, 1);
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, 16, ++w.group, &p), 0);
	world_run_write(&w, &p, 0, host, 16, false);
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, 32, ++w.group, &p), -E2BIG);
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 4, 10, ++w.group, &p), -E2BIG);
	CHECK_EQ(w.a.ctx.calculator_rr, 1);
	CHECK(all_slots_free(&w.a));
	world_destroy(&w);
}

static void release_plan(void)
{
	struct tpt_plan p, rel;
	struct world w;
	unsigned int i;

	world_init(&w, 5, 8, 6, 512, 16);
	/* Stripe 0 unit 1 only: XDWRITE to member 1, parity on member 4. */
	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 8, 8, 77, &p), 0);
	CHECK_EQ(tpt_plan_release(&p, &rel), 0);
	CHECK_EQ(rel.group, 77);
	CHECK_EQ(rel.nr_steps, 1);
	CHECK_EQ(rel.nr_cmds, 2);
	CHECK_EQ(rel.nr_refs, 0);
	CHECK_EQ(rel.nr_slots, 0);
	expect_cmd(&rel, 0, TPT_PLAN_RELEASE, 1, 0, 0);
	expect_cmd(&rel, 1, TPT_PLAN_RELEASE, 4, 0, 0);
	tpt_plan_free(&rel);
	tpt_plan_return_slots(&p);
	tpt_plan_free(&p);

	CHECK_EQ(raid5_level.tpt_write(&w.a.ctx, 0, 64, 78, &p), 0);
	CHECK_EQ(tpt_plan_release(&p, &rel), 0);
	CHECK_EQ(rel.nr_cmds, 5);
	for (i = 0; i < 5; i++) {
		expect_cmd(&rel, i, TPT_PLAN_RELEASE, i, 0, 0);
		CHECK_EQ(rel.cmds[i].result_slot, TPT_SLOT_NONE);
	}
	tpt_plan_free(&rel);
	tpt_plan_return_slots(&p);
	tpt_plan_free(&p);
	CHECK(all_slots_free(&w.a));

	/* Nothing sent, nothing to release. */
	CHECK_EQ(tpt_plan_release(&p, &rel), 0);
	CHECK_EQ(rel.nr_cmds, 0);
	CHECK_EQ(rel.nr_steps, 0);
	tpt_plan_free(&rel);
	world_destroy(&w);
}

/* A member run longer than a CDB's 24-bit TRANSFER LENGTH is cut into
 * several WRITE NEW DATA at unit boundaries, also when the run starts
 * inside a unit (a head partial stripe). */
static void long_runs_are_cut(void)
{
	const uint32_t unit = 32768;		/* 16 MiB slots at 512 B */
	const uint64_t stripes = 520;
	/* Member 0 holds unit 0's tail; members 1 and 2 unit 1 and the
	 * parity, from block 0. */
	uint64_t next[3] = { unit / 2, 0, 0 };
	unsigned int i, nr_wnd = 0;
	struct tpt_plan p;
	struct array a;

	array_init(&a, 3, unit, 600, 512, TPT_SLOT_MAX);
	/* Stripe 0 from the middle of unit 0, which is on member 0. */
	CHECK_EQ(raid5_level.tpt_write(&a.ctx, unit / 2,
				(uint32_t)(stripes * 2 * unit - unit / 2), 1,
				&p), 0);
	CHECK_EQ(p.cmds[0].member, 1);
	for (i = 0; i < p.nr_cmds; i++) {
		const struct tpt_plan_cmd *c = &p.cmds[i];

		CHECK(c->blocks <= TPT_VENDOR_LENGTH_MAX);
		if (c->op != TPT_PLAN_WRITE_NEW_DATA)
			continue;
		nr_wnd++;
		CHECK_EQ(c->lba, next[c->member]);
		next[c->member] = c->lba + c->blocks;
		CHECK(next[c->member] % unit == 0);
	}
	CHECK_EQ(nr_wnd, 6);
	for (i = 0; i < 3; i++)
		CHECK_EQ(next[i], stripes * unit);
	tpt_plan_return_slots(&p);
	tpt_plan_free(&p);
	CHECK(all_slots_free(&a));
	array_destroy(&a);
}

/* A host buffer in pieces splits a command's host references at the
 * piece boundaries: the planner leaves room for every boundary. */
static void refs_max_leaves_room_for_host_pieces(void)
{
	struct tpt_plan_ctx c = { 0 };

	CHECK_EQ(tpt_plan_refs_max(&c), TPT_XFER_DESC_MAX);
	c.host_pieces = 1;
	CHECK_EQ(tpt_plan_refs_max(&c), TPT_XFER_DESC_MAX);
	c.host_pieces = TPT_HOST_DESC_MAX;
	CHECK_EQ(tpt_plan_refs_max(&c),
		 TPT_XFER_DESC_MAX - TPT_HOST_DESC_MAX + 1);
}

static void opcodes(void)
{
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_PREP_READ), TPT_OP_PREP_READ);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_PREP_WRITE), TPT_OP_PREP_WRITE);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_READ_NEW_BLOCK), TPT_OP_READ_NEW_BLOCK);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_XDWRITE), TPT_OP_XDWRITE_16);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_PRE_FETCH), TPT_OP_PRE_FETCH_16);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_PART_TMP), TPT_OP_READ_PARITY_PART_TMP);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_PART_BLOCK),
		 TPT_OP_READ_PARITY_PART_BLOCK);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_COMP_TMP), TPT_OP_READ_PARITY_COMP_TMP);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_COMP_BLOCK),
		 TPT_OP_READ_PARITY_COMP_BLOCK);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_WRITE_NEW_DATA), TPT_OP_WRITE_NEW_DATA);
	CHECK_EQ(tpt_plan_opcode(TPT_PLAN_RELEASE), TPT_OP_RELEASE);
	CHECK(!strcmp(tpt_plan_op_name(TPT_PLAN_COMP_TMP), "READ PARITY COMP TMP"));
}

/* A member's stripes as a string: T taken, S skippable, X a stop. */
static enum tpt_plan_run_stripe stripe_of(const void *ctx, uint64_t s)
{
	char c = ((const char *)ctx)[s];

	return c == 'T' ? TPT_RUN_TAKE :
	       c == 'S' ? TPT_RUN_SKIP : TPT_RUN_STOP;
}

/* tpt_plan_run_over(): a run steps over skippable stripes only where it
 * takes one again within its bounds, and never ends in a skip. */
static void runs_over_skips(void)
{
	static const struct {
		const char *stripes;
		uint64_t end, max_run, len, taken;
	} cases[] = {
		{ "TTTT", 4, 16, 4, 4 },
		{ "TSTT", 4, 16, 4, 3 },
		{ "TSST", 4, 16, 4, 2 },	/* RAID-6: P and Q side by side */
		{ "TTSS", 4, 16, 2, 2 },	/* skips at the end: cut */
		{ "TSXT", 4, 16, 1, 1 },	/* a stop behind the skip */
		{ "TXTT", 4, 16, 1, 1 },
		{ "TSTT", 4, 2, 1, 1 },		/* no room for the take after */
		{ "TSTT", 4, 3, 3, 2 },
		{ "TSTS", 3, 16, 3, 2 },	/* @end cuts, not the string */
		{ "T", 1, 16, 1, 1 },
	};
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t taken = 0;

		CHECK_EQ(tpt_plan_run_over(0, cases[i].end, cases[i].max_run,
					   stripe_of, cases[i].stripes, &taken),
			 cases[i].len);
		CHECK_EQ(taken, cases[i].taken);
	}
}

/*
 * A copy (tpt_plan_copy()) from an index past the geometry's, as a
 * replace names the box leaving a position: one READ MEDIUM there and
 * the RELEASE of its export, a PART BLOCK COPY and its WRITE NEW DATA at
 * the member written, and the run arrives whole; every slot comes back.  Refused: no stripes, past
 * the members' end, no member written, the source among them, an index
 * no plan can name.
 */
static void copy_from_past_the_geometry(void)
{
	const uint32_t unit = 16, bs = 512;
	const size_t at = 3 * unit * bs, len = 8 * unit * bs;
	unsigned int i, ops[TPT_PLAN_WRITE + 1] = { 0 };
	struct tpt_plan p;
	struct array a;
	struct sim s;

	/* Five boxes to the simulator, four positions to the planner. */
	array_init(&a, 5, unit, 30, bs, 64);
	sim_init(&s, &a);
	for (i = 0; i < len; i++)
		s.t[4].disk[at + i] = (unsigned char)(i * 7 + 1);
	a.geo.members = 4;
	CHECK_EQ(tpt_plan_copy(&a.ctx, 3, 8, 4, 1u << 1, 1, &p), 0);
	tpt_plan_return_slots(&p);
	tpt_plan_free(&p);
	CHECK_EQ(tpt_plan_copy(&a.ctx, 3, 0, 4, 1u << 1, 1, &p), -EINVAL);
	CHECK_EQ(tpt_plan_copy(&a.ctx, 25, 8, 4, 1u << 1, 1, &p), -EINVAL);
	CHECK_EQ(tpt_plan_copy(&a.ctx, 3, 8, 4, 0, 1, &p), -EINVAL);
	CHECK_EQ(tpt_plan_copy(&a.ctx, 3, 8, 1, 1u << 1, 1, &p), -EINVAL);
	CHECK_EQ(tpt_plan_copy(&a.ctx, 3, 8, RAID_MAX_MEMBERS, 1u << 1, 1,
			       &p), -EINVAL);
	/* Planned for four, run on five. */
	a.geo.members = 4;
	CHECK_EQ(tpt_plan_copy(&a.ctx, 3, 8, 4, 1u << 1, 1, &p), 0);
	a.geo.members = 5;
	for (i = 0; i < p.nr_cmds; i++) {
		const struct tpt_plan_cmd *c = &p.cmds[i];

		ops[c->op]++;
		CHECK_EQ(c->member, (c->op == TPT_PLAN_READ_MEDIUM ||
				     c->op == TPT_PLAN_RELEASE ? 4u : 1u));
	}
	CHECK_EQ(ops[TPT_PLAN_READ_MEDIUM], 1);
	CHECK_EQ(ops[TPT_PLAN_PART_BLOCK], 1);
	CHECK_EQ(ops[TPT_PLAN_WRITE_NEW_DATA], 1);
	CHECK_EQ(ops[TPT_PLAN_RELEASE], 1);
	sim_begin(&s, &p, NULL, 0);
	sim_steps(&s, 0, p.nr_steps);
	sim_end(&s);
	sim_check_idle(&s);
	CHECK(!memcmp(s.t[1].disk + at, s.t[4].disk + at, len));
	tpt_plan_return_slots(&p);
	tpt_plan_free(&p);
	CHECK(all_slots_free(&a));
	sim_destroy(&s);
	array_destroy(&a);
}

int main(void)
{
	RUN(opcodes);
	RUN(single_block_write);
	RUN(single_block_write_without_prefetch);
	RUN(full_stripe_write);
	RUN(flat_full_stripe_write);
	RUN(full_stripe_write_tree);
	RUN(parity_gather_auto);
	RUN(wide_arrays_count_like_the_paper);
	RUN(reads_match_table);
	RUN(read_pieces_and_final);
	RUN(partial_pieces_at_different_offsets);
	RUN(multi_stripe_write);
	RUN(held_full_stripes_are_written_whole);
	RUN(calculator_rotation);
	RUN(multi_stripe_runs);
	RUN(reads_step_over_parity);
	RUN(bad_requests);
	RUN(back_pressure);
	RUN(release_plan);
	RUN(long_runs_are_cut);
	RUN(refs_max_leaves_room_for_host_pieces);
	RUN(runs_over_skips);
	RUN(copy_from_past_the_geometry);
	UNIT_EXIT();
}
