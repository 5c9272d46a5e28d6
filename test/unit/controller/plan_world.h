/*
 * The planners' tests' world (see plan_sim.h for the target model it runs
 * plans on): a plan's static checks - steps, slots - and an array with a
 * plain byte array holding what the RAID should contain, written and read
 * through the planners and checked against the members' media.
 */
#ifndef TPT_TEST_UNIT_CONTROLLER_PLAN_WORLD_H
#define TPT_TEST_UNIT_CONTROLLER_PLAN_WORLD_H

#include "test/unit/controller/plan_sim.h"

/* ---- static checks of a plan ---- */

/* The slots @cmd's RESULT SLOT claims: a piece per @payload bytes of
 * each run between its skips (PREP WRITE, protocol.md 4.5), or of its
 * range. */
static unsigned int cmd_result_pieces(const struct tpt_plan *p,
				      const struct tpt_plan_cmd *cmd,
				      uint32_t bs, uint64_t payload)
{
	uint64_t run = 0, total = 0;
	unsigned int j, pieces = 0;

	for (j = 0; cmd->op == TPT_PLAN_PREP_WRITE && j < cmd->nr_refs; j++) {
		const struct tpt_plan_ref *ref = &p->refs[cmd->first_ref + j];

		total += ref->length;
		if (ref->kind != TPT_REF_SKIP) {
			run += ref->length;
			continue;
		}
		pieces += (unsigned int)((run + payload - 1) / payload);
		run = 0;
	}
	if (cmd->op != TPT_PLAN_PREP_WRITE || !total)
		run = (uint64_t)cmd->blocks * bs;
	return pieces + (unsigned int)((run + payload - 1) / payload);
}

/* Steps tile the commands, and the slots a plan records are exactly the
 * ones its commands name as RESULT SLOT, each once. */
static void check_plan_shape(const struct array *a, const struct tpt_plan *p,
			     uint32_t group)
{
	static unsigned char taken[MAX_MEMBERS][TPT_SLOT_MAX];
	unsigned int i, j, next = 0;

	CHECK_EQ(p->group, group);
	for (i = 0; i < p->nr_steps; i++) {
		CHECK_EQ(p->steps[i].first_cmd, next);
		CHECK(p->steps[i].nr_cmds > 0);
		next += p->steps[i].nr_cmds;
	}
	CHECK_EQ(next, p->nr_cmds);

	memset(taken, 0, sizeof(taken));
	for (i = 0; i < p->nr_slots; i++) {
		CHECK(p->slots[i].member < a->geo.members);
		CHECK(p->slots[i].n > 0);
		for (j = 0; j < p->slots[i].n; j++) {
			unsigned int sl = p->slots[i].first + j;

			CHECK(sl < a->nr_slots);
			if (sl >= a->nr_slots || p->slots[i].member >= MAX_MEMBERS)
				continue;
			CHECK_EQ(taken[p->slots[i].member][sl], 0);
			taken[p->slots[i].member][sl] = 1;
		}
	}
	for (i = 0; i < p->nr_cmds; i++) {
		const struct tpt_plan_cmd *cmd = &p->cmds[i];

		uint64_t payload = (uint64_t)a->geo.unit_blocks *
				   a->ctx.block_size;
		unsigned int k, pieces = cmd_result_pieces(p, cmd,
							   a->ctx.block_size,
							   payload);

		if (cmd->result_slot == TPT_SLOT_NONE)
			continue;
		CHECK(cmd->result_slot + pieces <= a->nr_slots);
		if (cmd->result_slot + pieces > a->nr_slots)
			continue;
		for (k = 0; k < pieces; k++) {
			CHECK(taken[cmd->member][cmd->result_slot + k]);
			taken[cmd->member][cmd->result_slot + k] = 2;
		}
	}
	for (i = 0; i < a->geo.members; i++)
		for (j = 0; j < a->nr_slots; j++)
			CHECK(taken[i][j] != 1);
}

/* ---- a world: an array, its targets and what it should hold ---- */

struct world {
	struct array a;
	struct sim s;
	unsigned char *data;		/* the array's contents, as the host sees them */
	uint64_t array_blocks;
	uint32_t group;
};

static unsigned char *unit_on_member(struct world *w, unsigned int member,
				     uint64_t stripe)
{
	return sim_medium(&w->s, member, stripe * w->a.geo.unit_blocks);
}

/* Data units per stripe. */
static unsigned int world_data_units(const struct world *w)
{
	return w->a.geo.members - w->a.ctx.level->nr_parity(&w->a.geo);
}

static unsigned char *unit_in_array(struct world *w, uint64_t stripe,
				    unsigned int d)
{
	return w->data + (stripe * world_data_units(w) + d) *
			 w->a.geo.unit_blocks * w->s.bs;
}

/* The weight of data unit @d in parity unit @i, as an exponent of 2:
 * every parity unit is the XOR of its stripe's data units (a mirror's
 * copies too) but RAID-6's Q, which weights data unit d 2^d. */
static uint8_t world_weight(const struct raid_level_ops *l, unsigned int i,
			    unsigned int d)
{
	return l->level == 6 && i == 1 ? (uint8_t)d : 0;
}

/* A world of @level whose every parity unit is its weighted sum of the
 * stripe's data units (world_weight()). */
static void world_init_level(struct world *w,
			     const struct raid_level_ops *l,
			     unsigned int members, uint32_t unit,
			     uint64_t stripes, uint32_t block_size,
			     uint16_t nr_slots)
{
	uint64_t s, unit_bytes = (uint64_t)unit * block_size;
	unsigned int d, i;

	memset(w, 0, sizeof(*w));
	array_init(&w->a, members, unit, stripes, block_size, nr_slots);
	w->a.ctx.level = l;
	sim_init(&w->s, &w->a);
	w->array_blocks = l->array_blocks(&w->a.geo);
	w->data = xcalloc(w->array_blocks, block_size);
	rnd_fill(w->data, w->array_blocks * block_size);
	for (s = 0; s < stripes; s++) {
		for (d = 0; d < world_data_units(w); d++) {
			memcpy(unit_on_member(w, l->data_member(&w->a.geo, s, d), s),
			       unit_in_array(w, s, d), unit_bytes);
			for (i = 0; i < l->nr_parity(&w->a.geo); i++)
				weighted_xor_into(unit_on_member(w, l->parity_member(
						&w->a.geo, s, i), s),
					 unit_in_array(w, s, d), unit_bytes,
					 world_weight(l, i, d));
		}
	}
}

static void world_init(struct world *w, unsigned int members, uint32_t unit,
		       uint64_t stripes, uint32_t block_size, uint16_t nr_slots)
{
	world_init_level(w, &raid5_level, members, unit, stripes, block_size,
			 nr_slots);
}

static void world_destroy(struct world *w)
{
	sim_destroy(&w->s);
	array_destroy(&w->a);
	free(w->data);
}

/*
 * Every data unit holds what the array should and every parity unit is
 * its weighted sum of its stripe's data (world_weight()).  A member that is gone (s.dead) holds
 * nothing that counts: its data units must follow from the others, and
 * its parity units are not kept.
 */
static bool world_consistent(struct world *w)
{
	const struct raid_level_ops *l = w->a.ctx.level;
	const struct raid_geometry *g = &w->a.geo;
	uint64_t unit_bytes = (uint64_t)g->unit_blocks * w->s.bs, s;
	unsigned char *acc = xcalloc(1, unit_bytes);
	bool ok = true;
	unsigned int d, i, m;

	for (s = 0; s < g->member_blocks / g->unit_blocks && ok; s++) {
		for (d = 0; d < world_data_units(w); d++) {
			m = l->data_member(g, s, d);
			if (w->s.dead & (1u << m))
				continue;
			if (memcmp(unit_on_member(w, m, s),
				   unit_in_array(w, s, d), unit_bytes)) {
				fprintf(stderr, "stripe %llu unit %u: wrong data\n",
					(unsigned long long)s, d);
				ok = false;
			}
		}
		for (i = 0; i < l->nr_parity(g) && ok; i++) {
			memset(acc, 0, unit_bytes);
			for (d = 0; d < world_data_units(w); d++)
				weighted_xor_into(acc, unit_in_array(w, s, d),
						  unit_bytes,
						  world_weight(l, i, d));
			m = l->parity_member(g, s, i);
			if (!(w->s.dead & (1u << m)) &&
			    memcmp(unit_on_member(w, m, s), acc, unit_bytes)) {
				fprintf(stderr, "stripe %llu: wrong parity on "
					"member %u\n", (unsigned long long)s, m);
				ok = false;
			}
		}
	}
	free(acc);
	return ok;
}

/* How many members a write puts each host byte on: one, or for copies
 * every member that is not missing. */
static unsigned int world_copies_written(const struct world *w)
{
	uint32_t all = (1u << w->a.geo.members) - 1;

	if (!w->a.ctx.level->copies)
		return 1;
	return w->a.geo.members -
	       (unsigned int)__builtin_popcount(w->a.ctx.missing & all);
}

/*
 * Execute a write plan for @host's data at @lba, or abort it after a
 * random number of steps short of WRITE NEW DATA and release its groups;
 * then check the targets are idle, the array holds what it should, and
 * give the slots back.  Frees the plan.
 */
static void world_run_write(struct world *w, struct tpt_plan *p, uint64_t lba,
			    unsigned char *host, uint32_t blocks, bool abort)
{
	uint64_t len = (uint64_t)blocks * w->s.bs;
	struct tpt_plan rel;

	check_plan_shape(&w->a, p, w->group);
	sim_begin(&w->s, p, host, len);
	if (!abort) {
		sim_steps(&w->s, 0, p->nr_steps);
		if (w->a.ctx.level->nr_parity(&w->a.geo) > 1 &&
		    !w->a.ctx.level->copies && w->a.ctx.missing)
			sim_check_host_moved(&w->s);
		else
			sim_check_host_used(&w->s, world_copies_written(w));
		memcpy(w->data + lba * w->s.bs, host, len);
	} else {
		/* Anywhere short of WRITE NEW DATA or WRITE, which change
		 * media. */
		unsigned int wnd = 0, i;

		while (wnd < p->nr_steps) {
			for (i = 0; i < p->steps[wnd].nr_cmds; i++)
				if (p->cmds[p->steps[wnd].first_cmd + i].op ==
				    TPT_PLAN_WRITE_NEW_DATA ||
				    p->cmds[p->steps[wnd].first_cmd + i].op ==
				    TPT_PLAN_WRITE)
					break;
			if (i < p->steps[wnd].nr_cmds)
				break;
			wnd++;
		}
		sim_steps(&w->s, 0, wnd ? (unsigned int)rnd_below(wnd) : 0);
		CHECK_EQ(tpt_plan_release(p, &rel), 0);
		CHECK_EQ(rel.group, p->group);
		sim_end(&w->s);
		sim_begin(&w->s, &rel, host, len);
		sim_steps(&w->s, 0, rel.nr_steps);
		tpt_plan_free(&rel);
	}
	sim_end(&w->s);
	sim_check_idle(&w->s);
	CHECK(world_consistent(w));
	tpt_plan_return_slots(p);
	CHECK(all_slots_free(&w->a));
	tpt_plan_free(p);
}

static void world_write(struct world *w, uint64_t lba, uint32_t blocks,
			bool abort)
{
	unsigned char *host = xcalloc(blocks, w->s.bs);
	struct tpt_plan p;
	int err;

	rnd_fill(host, (uint64_t)blocks * w->s.bs);
	w->group += TPT_PLAN_MAX_GROUPS;
	err = w->a.ctx.level->tpt_write(&w->a.ctx, lba, blocks, w->group,
					  &p);
	CHECK_EQ(err, 0);
	if (!err)
		world_run_write(w, &p, lba, host, blocks, abort);
	free(host);
}

static void world_read(struct world *w, uint64_t lba, uint32_t blocks)
{
	uint64_t len = (uint64_t)blocks * w->s.bs;
	unsigned char *host = xcalloc(1, len);
	struct tpt_plan p;
	int err;

	memset(host, 0xa5, len);
	w->group += TPT_PLAN_MAX_GROUPS;
	err = w->a.ctx.level->tpt_read(&w->a.ctx, lba, blocks, w->group, &p);
	CHECK_EQ(err, 0);
	if (!err) {
		check_plan_shape(&w->a, &p, w->group);
		if (!w->a.ctx.missing) {
			CHECK_EQ(p.nr_slots, 0);
			CHECK_EQ(p.nr_steps, 1);
		}
		sim_begin(&w->s, &p, host, len);
		sim_steps(&w->s, 0, p.nr_steps);
		sim_check_host_used_once(&w->s);
		sim_end(&w->s);
		sim_check_idle(&w->s);
		CHECK_MEM(host, w->data + lba * w->s.bs, len);
		tpt_plan_return_slots(&p);
		CHECK(all_slots_free(&w->a));
		tpt_plan_free(&p);
	}
	free(host);
}

#endif
