/*
 * The Baseline planner (controller/bl_plan.c, the RAID-5 plans of
 * controller/raid5_baseline.c and RAID-1's of controller/raid1.c), checked by executing its plans on the simulated
 * members of plan_sim.h, against the same byte model as the TPT planner:
 * the paper's Table I and II counts, random requests, and the online
 * check.
 *
 * The executor runs a step's local operations in order, then its member
 * READs and WRITEs, and fails a plan whose I/O within one step depends on
 * an order the engine does not keep (the commands of a step are in flight
 * together).
 */
#include "controller/bl_plan.h"
#include "test/unit/controller/check_sim.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct bl_exec {
	struct world *w;
	const struct bl_plan *p;
	unsigned char *host;
	uint64_t host_len;
	unsigned char **temp;
	bool failed;
};

static void bl_fail(struct bl_exec *x, const struct bl_cmd *cmd,
		    const char *why)
{
	if (x->failed)
		return;
	x->failed = true;
	unit_failures++;
	if (cmd)
		fprintf(stderr, "baseline plan: op %d member %u lba %llu %u "
			"bytes: %s\n", cmd->op, cmd->member,
			(unsigned long long)cmd->lba, cmd->bytes, why);
	else
		fprintf(stderr, "baseline plan: %s\n", why);
}

/* The bytes @ref names, or NULL (and the plan failed) outside them. */
static unsigned char *bl_mem(struct bl_exec *x, const struct bl_cmd *cmd,
			     const struct bl_ref *ref)
{
	uint64_t size;
	unsigned char *base;

	if (ref->buf == BL_BUF_HOST) {
		base = x->host;
		size = x->host_len;
	} else if (ref->temp < x->p->nr_temps) {
		base = x->temp[ref->temp];
		size = x->p->temp_bytes[ref->temp];
	} else {
		bl_fail(x, cmd, "no such temporary buffer");
		return NULL;
	}
	if (ref->offset > size || cmd->bytes > size - ref->offset) {
		bl_fail(x, cmd, "outside its buffer");
		return NULL;
	}
	return base + ref->offset;
}

static unsigned char *bl_medium(struct bl_exec *x, const struct bl_cmd *cmd)
{
	const struct raid_geometry *g = &x->w->a.geo;
	uint32_t bs = x->w->s.bs;

	if (x->w->s.dead & (1u << cmd->member)) {
		bl_fail(x, cmd, "a command to a member that is gone");
		return NULL;
	}
	if (cmd->member >= g->members || cmd->bytes % bs ||
	    cmd->lba >= g->member_blocks ||
	    cmd->bytes / bs > g->member_blocks - cmd->lba) {
		bl_fail(x, cmd, "outside the member");
		return NULL;
	}
	return sim_medium(&x->w->s, cmd->member, cmd->lba);
}

static bool bytes_overlap(const unsigned char *a, uint32_t alen,
			  const unsigned char *b, uint32_t blen)
{
	return a < b + blen && b < a + alen;
}

/* The member I/O of one step is in flight together: no two commands may
 * touch one place where either writes it (a READ writes memory, a WRITE
 * the medium). */
static void bl_check_step(struct bl_exec *x, const struct plan_step *st)
{
	unsigned int i, j;

	for (i = 0; i < st->nr_cmds && !x->failed; i++) {
		const struct bl_cmd *a = &x->p->cmds[st->first_cmd + i];

		if (a->op != BL_READ && a->op != BL_WRITE)
			continue;
		for (j = i + 1; j < st->nr_cmds && !x->failed; j++) {
			const struct bl_cmd *b = &x->p->cmds[st->first_cmd + j];
			unsigned char *am, *bm, *ab, *bb;

			if (b->op != BL_READ && b->op != BL_WRITE)
				continue;
			if (a->op == BL_READ && b->op == BL_READ)
				continue;
			am = bl_medium(x, a);
			bm = bl_medium(x, b);
			ab = bl_mem(x, a, a->op == BL_READ ? &a->dst : &a->src);
			bb = bl_mem(x, b, b->op == BL_READ ? &b->dst : &b->src);
			if (!am || !bm || !ab || !bb)
				return;
			if (bytes_overlap(am, a->bytes, bm, b->bytes))
				bl_fail(x, b, "races another command of its "
					"step on the medium");
			else if ((a->op == BL_READ || b->op == BL_READ) &&
				 bytes_overlap(ab, a->bytes, bb, b->bytes))
				bl_fail(x, b, "races another command of its "
					"step in memory");
		}
	}
}

static void bl_exec_cmd(struct bl_exec *x, const struct bl_cmd *cmd)
{
	unsigned char *dst, *src, *med;

	switch (cmd->op) {
	case BL_READ:
		med = bl_medium(x, cmd);
		dst = bl_mem(x, cmd, &cmd->dst);
		if (med && dst)
			memcpy(dst, med, cmd->bytes);
		break;
	case BL_WRITE:
		med = bl_medium(x, cmd);
		src = bl_mem(x, cmd, &cmd->src);
		if (med && src)
			memcpy(med, src, cmd->bytes);
		break;
	case BL_COPY:
	case BL_XOR:
		dst = bl_mem(x, cmd, &cmd->dst);
		src = bl_mem(x, cmd, &cmd->src);
		if (!dst || !src)
			break;
		if (bytes_overlap(dst, cmd->bytes, src, cmd->bytes))
			bl_fail(x, cmd, "source and destination overlap");
		else if (cmd->op == BL_COPY) {
			memcpy(dst, src, cmd->bytes);
			weigh(dst, cmd->bytes, cmd->gf_exp);
		} else {
			weighted_xor_into(dst, src, cmd->bytes, cmd->gf_exp);
		}
		break;
	default:
		bl_fail(x, cmd, "unknown operation");
	}
}

/* Run @p with @host as the request's buffer; true when it ran through. */
static bool bl_run(struct world *w, const struct bl_plan *p,
		   unsigned char *host, uint64_t host_len)
{
	struct bl_exec x = { .w = w, .p = p, .host = host,
			     .host_len = host_len };
	unsigned int i, j;

	x.temp = xcalloc(p->nr_temps, sizeof(*x.temp));
	for (i = 0; i < p->nr_temps; i++) {
		x.temp[i] = malloc(p->temp_bytes[i] ? p->temp_bytes[i] : 1);
		/* Garbage, so that a plan relying on zeroed memory fails. */
		rnd_fill(x.temp[i], p->temp_bytes[i]);
	}
	for (i = 0; i < p->nr_steps && !x.failed; i++) {
		const struct plan_step *st = &p->steps[i];

		if (!st->nr_cmds)
			bl_fail(&x, NULL, "an empty step");
		bl_check_step(&x, st);
		for (j = 0; j < st->nr_cmds && !x.failed; j++) {
			const struct bl_cmd *cmd = &p->cmds[st->first_cmd + j];

			if (cmd->op == BL_COPY || cmd->op == BL_XOR)
				bl_exec_cmd(&x, cmd);
		}
		for (j = 0; j < st->nr_cmds && !x.failed; j++) {
			const struct bl_cmd *cmd = &p->cmds[st->first_cmd + j];

			if (cmd->op == BL_READ || cmd->op == BL_WRITE)
				bl_exec_cmd(&x, cmd);
		}
	}
	for (i = 0; i < p->nr_temps; i++)
		free(x.temp[i]);
	free(x.temp);
	return !x.failed;
}

static struct bl_plan_ctx bl_ctx(const struct world *w)
{
	return (struct bl_plan_ctx){ .geo = &w->a.geo, .level = w->a.ctx.level,
				     .block_size = w->s.bs,
				     .missing = w->a.ctx.missing };
}

static void bl_world_write(struct world *w, uint64_t lba, uint32_t blocks)
{
	struct bl_plan_ctx c = bl_ctx(w);
	uint64_t len = (uint64_t)blocks * w->s.bs;
	unsigned char *host = xcalloc(1, len);
	struct bl_plan p;
	int err;

	rnd_fill(host, len);
	err = w->a.ctx.level->bl_write(&c, lba, blocks, &p);
	CHECK_EQ(err, 0);
	if (!err) {
		if (bl_run(w, &p, host, len))
			memcpy(w->data + lba * w->s.bs, host, len);
		bl_plan_free(&p);
	}
	CHECK(world_consistent(w));
	free(host);
}

static void bl_world_read(struct world *w, uint64_t lba, uint32_t blocks)
{
	struct bl_plan_ctx c = bl_ctx(w);
	uint64_t len = (uint64_t)blocks * w->s.bs;
	unsigned char *host = xcalloc(1, len);
	struct bl_plan p;
	int err;

	memset(host, 0xa5, len);
	err = w->a.ctx.level->bl_read(&c, lba, blocks, &p);
	CHECK_EQ(err, 0);
	if (!err) {
		if (!w->a.ctx.missing) {
			CHECK_EQ(p.nr_temps, 0);
			CHECK_EQ(p.nr_steps, 1);
		}
		if (bl_run(w, &p, host, len))
			CHECK_MEM(host, w->data + lba * w->s.bs, len);
		bl_plan_free(&p);
	}
	free(host);
}

/* ---- the paper's counts (Tables I, II; III-E) ---- */

static void counts_of(struct world *w, bool write, uint64_t lba,
		      uint32_t blocks, struct bl_plan_counts *out)
{
	struct bl_plan_ctx c = bl_ctx(w);
	struct bl_plan p;

	memset(out, 0, sizeof(*out));
	if (write)
		CHECK_EQ(raid5_level.bl_write(&c, lba, blocks, &p), 0);
	else
		CHECK_EQ(raid5_level.bl_read(&c, lba, blocks, &p), 0);
	bl_plan_count(&p, out);
	bl_plan_free(&p);
}

static void table_counts(void)
{
	unsigned int n;

	for (n = 3; n <= MAX_MEMBERS; n++) {
		struct world w;
		struct bl_plan_counts k;
		uint64_t unit = 16, ub = unit * 512;

		world_init(&w, n, (uint32_t)unit, 4, 512, 16);
		/* Single-block WRITE: old data and old parity in, new data
		 * and new parity out, plus the host's block: 5 blocks, and
		 * 4 commands to targets (Table II: 6 with the host's). */
		counts_of(&w, true, unit, (uint32_t)unit, &k);
		CHECK_EQ(k.commands, 4);
		CHECK_EQ(k.member_in, 2 * ub);
		CHECK_EQ(k.member_out, 2 * ub);
		/* Full-stripe WRITE: N-1 units from the host, N out. */
		counts_of(&w, true, 0, (uint32_t)((n - 1) * unit), &k);
		CHECK_EQ(k.commands, n);
		CHECK_EQ(k.member_in, 0);
		CHECK_EQ(k.member_out, n * ub);
		CHECK_EQ(k.xored, (n - 2) * ub);
		/* Single-block and full-stripe READ. */
		counts_of(&w, false, 0, (uint32_t)unit, &k);
		CHECK_EQ(k.commands, 1);
		CHECK_EQ(k.member_in, ub);
		counts_of(&w, false, 0, (uint32_t)((n - 1) * unit), &k);
		CHECK_EQ(k.commands, n - 1);
		CHECK_EQ(k.member_in, (n - 1) * ub);
		CHECK_EQ(k.member_out, 0);
		world_destroy(&w);
	}
}

static void bad_requests(void)
{
	struct world w;
	struct bl_plan_ctx c;
	struct bl_plan p;

	world_init(&w, 4, 8, 4, 512, 16);
	c = bl_ctx(&w);
	CHECK_EQ(raid5_level.bl_read(&c, 0, 0, &p), -EINVAL);
	CHECK_EQ(raid5_level.bl_write(&c, w.array_blocks, 1, &p), -EINVAL);
	CHECK_EQ(raid5_level.bl_write(&c, w.array_blocks - 1, 2, &p), -EINVAL);
	CHECK_EQ(raid5_level.bl_read(&c, UINT64_MAX, 2, &p), -EINVAL);
	CHECK_EQ(p.nr_cmds, 0);
	world_destroy(&w);
}

/* ---- random requests against the byte model ---- */

/* Rebuild every unit of @member (or every parity), and of the members of
 * @also from the same reads, in runs of @run. */
static void bl_world_rebuild(struct world *w, unsigned int member,
			     uint32_t also, uint32_t run)
{
	uint64_t stripes = w->a.geo.member_blocks / w->a.geo.unit_blocks, s;
	struct bl_plan_ctx c;
	struct bl_plan p;
	uint32_t n;
	int err;

	/* Members still gone stay so (RAID-6, two lost). */
	w->a.ctx.missing = member == RAID_PARITY_MEMBER ? 0 :
			   w->s.dead | 1u << member;
	if (member != RAID_PARITY_MEMBER)
		w->s.dead &= ~(1u << member | also);
	c = bl_ctx(w);
	c.rebuild_also = also;
	for (s = 0; s < stripes; s += n) {
		n = (uint32_t)(stripes - s < run ? stripes - s : run);
		err = w->a.ctx.level->bl_rebuild(&c, s, n, member, &p);
		CHECK_EQ(err, 0);
		if (err)
			break;
		bl_run(w, &p, NULL, 0);
		bl_plan_free(&p);
	}
	w->a.ctx.missing = w->s.dead;
}

static unsigned int together_toggle;

/* Random requests against the byte model; the members in @dead are
 * gone for all of them, then rebuilt one by one or two together. */
static void level_requests_dead(const struct raid_level_ops *level,
				unsigned int members, uint32_t unit,
				uint32_t block_size, unsigned int rounds,
				uint32_t dead)
{
	struct world w;
	unsigned int i, m;

	world_init_level(&w, level, members, unit, 12, block_size, 16);
	w.s.dead = dead;
	w.a.ctx.missing = dead;
	for (m = 0; m < members; m++)
		if (dead & (1u << m))
			rnd_fill(w.s.t[m].disk,
				 w.a.geo.member_blocks * block_size);
	for (i = 0; i < rounds && !unit_failures; i++) {
		uint64_t lba = rnd_below(w.array_blocks);
		uint32_t max = (uint32_t)(w.array_blocks - lba), blocks;

		/* Mostly small, sometimes several stripes. */
		blocks = 1 + (uint32_t)rnd_below(rnd_below(4) ? unit * 2 : max);
		if (blocks > max)
			blocks = max;
		if (rnd_below(3))
			bl_world_write(&w, lba, blocks);
		else
			bl_world_read(&w, lba, blocks);
	}
	/* Two lost: every other time both from the same reads. */
	if (__builtin_popcount(dead) == 2 && together_toggle++ % 2 &&
	    !unit_failures) {
		m = (unsigned int)__builtin_ctz(dead);
		bl_world_rebuild(&w, m, dead & ~(1u << m), 5);
	}
	for (m = 0; m < members && !unit_failures; m++)
		if (w.s.dead & (1u << m))
			bl_world_rebuild(&w, m, 0, 5);
	if (dead && !unit_failures)
		CHECK(world_consistent(&w));
	world_destroy(&w);
}

static void level_requests_on(const struct raid_level_ops *level,
			      unsigned int members, uint32_t unit,
			      uint32_t block_size, unsigned int rounds,
			      int dead)
{
	level_requests_dead(level, members, unit, block_size, rounds,
			    dead >= 0 ? 1u << dead : 0);
}

/* RAID-6 (controller/raid6_baseline.c): whole, each member gone, every
 * pair gone and both rebuilt, and P and Q recomputed by a resync. */
static void raid6_requests(void)
{
	unsigned int n, a, b;
	struct world w;
	uint64_t s;

	for (n = 4; n <= 7; n++)
		level_requests_on(&raid6_level, n, 8, 512, 300, -1);
	level_requests_on(&raid6_level, 6, 8, 4096, 150, -1);
	for (n = 4; n <= 6; n++)
		for (a = 0; a < n; a++) {
			level_requests_on(&raid6_level, n, 8, 512, 80, (int)a);
			for (b = a + 1; b < n; b++)
				level_requests_dead(&raid6_level, n, 8, 512, 50,
						    1u << a | 1u << b);
		}
	for (n = 4; n <= 6; n++) {
		world_init_level(&w, &raid6_level, n, 8, 12, 512, 16);
		for (s = 0; s < 12; s += 2)
			rnd_fill(unit_on_member(&w, raid6_level.parity_member(
					&w.a.geo, s, (unsigned int)(s / 2 % 2)),
					s), 8 * 512);
		CHECK(!world_consistent(&w));
		bl_world_rebuild(&w, RAID_PARITY_MEMBER, 0, 5);
		CHECK(world_consistent(&w));
		world_destroy(&w);
	}
}

static void random_requests_on(unsigned int members, uint32_t unit,
			       uint32_t block_size, unsigned int rounds,
			       int dead)
{
	level_requests_on(&raid5_level, members, unit, block_size, rounds,
			  dead);
}

static void random_requests(void)
{
	random_requests_on(3, 8, 512, 400, -1);
	random_requests_on(4, 16, 512, 400, -1);
	random_requests_on(5, 8, 4096, 300, -1);
	random_requests_on(8, 4, 512, 300, -1);
}

static void degraded_requests(void)
{
	unsigned int n, dead;

	for (n = 3; n <= 6; n++)
		for (dead = 0; dead < n; dead++)
			random_requests_on(n, 8, 512, 150, (int)dead);
}

static void resync_recomputes_parity(void)
{
	struct world w;
	uint64_t s;

	world_init(&w, 5, 16, 10, 512, 16);
	for (s = 0; s < 10; s += 3)
		rnd_fill(unit_on_member(&w, raid5_level.parity_member(
				&w.a.geo, s, 0), s), 16 * 512);
	CHECK(!world_consistent(&w));
	bl_world_rebuild(&w, RAID_PARITY_MEMBER, 0, 4);
	CHECK(world_consistent(&w));
	world_destroy(&w);
}

/* RAID-1 on the same byte model: random requests whole and with each
 * member gone then rebuilt, and copies scribbled over made equal again. */
static void mirror_requests(void)
{
	unsigned int n, dead;
	struct world w;
	uint64_t s;

	for (n = 2; n <= 4; n++) {
		level_requests_on(&raid1_level, n, 8, 512, 200, -1);
		for (dead = 0; dead < n; dead++)
			level_requests_on(&raid1_level, n, 8, 512, 100,
					  (int)dead);
	}
	/* Two of four copies lost, rebuilt one by one and together. */
	level_requests_dead(&raid1_level, 4, 8, 512, 100, 0x5);
	level_requests_dead(&raid1_level, 4, 8, 512, 100, 0x6);
	world_init_level(&w, &raid1_level, 3, 16, 10, 512, 16);
	for (s = 0; s < 10; s += 3)
		rnd_fill(unit_on_member(&w, raid1_level.parity_member(
				&w.a.geo, s, (unsigned int)s % 2), s), 16 * 512);
	CHECK(!world_consistent(&w));
	bl_world_rebuild(&w, RAID_PARITY_MEMBER, 0, 4);
	CHECK(world_consistent(&w));
	world_destroy(&w);
}

static void two_missing_is_no_data(void)
{
	struct world w;
	struct bl_plan_ctx c;
	struct bl_plan p;

	world_init(&w, 5, 8, 4, 512, 16);
	w.a.ctx.missing = 0x6;
	c = bl_ctx(&w);
	/* Stripe 0: data units on members 0-3, parity on 4.  A read of
	 * the units of boxes that are there needs neither. */
	bl_world_read(&w, 0, 8);
	bl_world_read(&w, 24, 8);
	CHECK_EQ(raid5_level.bl_read(&c, 8, 8, &p), -ENODATA);
	CHECK_EQ(raid5_level.bl_read(&c, 0, 16, &p), -ENODATA);
	CHECK_EQ(raid5_level.bl_write(&c, 0, 8, &p), -ENODATA);
	CHECK_EQ(raid5_level.bl_rebuild(&c, 0, 1, 1, &p), -ENODATA);
	CHECK_EQ(raid5_level.bl_rebuild(&c, 0, 1, RAID_PARITY_MEMBER, &p),
		 -ENODATA);
	world_destroy(&w);
}

/* The online check run on the simulated members in runs of up to @run:
 * no medium changes, and the stripes found disagreeing are exactly those
 * in @bad.  How many. */
static unsigned int bl_world_check(struct world *w, uint32_t run,
				   const check_spoil_t *bad)
{
	const struct raid_level_ops *l = w->a.ctx.level;
	struct bl_plan_ctx c = bl_ctx(w);
	unsigned char **snap = media_snapshot(w);
	unsigned int found = 0;
	struct bl_plan p;
	uint64_t s, len;
	uint32_t n;
	int err;

	for (s = 0; s < world_stripes(w); s += n) {
		unsigned char *buf;

		n = (uint32_t)(world_stripes(w) - s < run ?
			       world_stripes(w) - s : run);
		len = raid_check_bytes(l, &w->a.geo, w->s.bs, n);
		buf = xcalloc(1, len);
		rnd_fill(buf, len);
		err = l->bl_check(&c, s, n, &p);
		CHECK_EQ(err, 0);
		if (!err) {
			CHECK(bl_run(w, &p, buf, len));
			bl_plan_free(&p);
			found += check_outcome(w, buf, s, n, bad);
		}
		free(buf);
	}
	CHECK(media_unchanged(w, snap));
	return found;
}

/* As the TPT check's test (test_tpt_plan_model.c), the controller
 * reading every unit itself. */
static void check_counts_spoiled_stripes(void)
{
	static const struct {
		const struct raid_level_ops *level;
		unsigned int members;
	} arrays[] = {
		{ &raid1_level, 2 }, { &raid1_level, 3 },
		{ &raid5_level, 3 }, { &raid5_level, 5 },
		{ &raid6_level, 4 }, { &raid6_level, 6 },
	};
	struct bl_plan_ctx c;
	struct bl_plan p;
	struct world w;
	unsigned int i, spoiled;
	check_spoil_t bad[30];

	for (i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
		const struct raid_level_ops *l = arrays[i].level;

		world_init_level(&w, l, arrays[i].members, 8, 30, 512, 16);
		memset(bad, 0, sizeof(bad));
		CHECK_EQ(bl_world_check(&w, 16, bad), 0);
		spoiled = world_spoil_some(&w, bad);
		CHECK(spoiled > 0);
		CHECK_EQ(bl_world_check(&w, 16, bad), spoiled);
		CHECK_EQ(bl_world_check(&w, 7, bad), spoiled);
		w.a.ctx.missing = 1u;
		c = bl_ctx(&w);
		CHECK_EQ(l->bl_check(&c, 0, 4, &p), -ENODATA);
		world_destroy(&w);
	}
}

int main(void)
{
	RUN(table_counts);
	RUN(bad_requests);
	RUN(random_requests);
	RUN(degraded_requests);
	RUN(resync_recomputes_parity);
	RUN(two_missing_is_no_data);
	RUN(mirror_requests);
	RUN(check_counts_spoiled_stripes);
	RUN(raid6_requests);
	return unit_failures ? 1 : 0;
}
