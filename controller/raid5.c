/*
 * RAID-5 (controller/raid_level.h): md's left-symmetric layout, and how
 * the controller plans requests on it in TPT mode (the targets move data
 * and compute parity, paper III-C); Baseline mode's plans, where the
 * controller does both itself (III-E), are in raid5_baseline.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "controller/raid5.h"
#include "controller/tpt_plan.h"
#include "scsi/tpt_cdb.h"

/* ---- layout ---- */

/*
 * Left-symmetric RAID-5 as md places it: parity of stripe s on member
 * N-1 - (s mod N), walking backwards one member per stripe; data unit d
 * on the member d+1 places after the parity.  Stripe s covers member LBAs
 * [s * unit, (s + 1) * unit) on every member.
 */

static unsigned int r5_parity(const struct raid_geometry *g, uint64_t stripe)
{
	return g->members - 1 - (unsigned int)(stripe % g->members);
}

static unsigned int r5_nr_parity(const struct raid_geometry *g)
{
	(void)g;
	return 1;
}

static uint64_t r5_array_blocks(const struct raid_geometry *g)
{
	return (uint64_t)(g->members - 1) * g->member_blocks;
}

static unsigned int r5_parity_member(const struct raid_geometry *g,
				     uint64_t stripe, unsigned int i)
{
	(void)i;
	return r5_parity(g, stripe);
}

static unsigned int r5_data_member(const struct raid_geometry *g,
				   uint64_t stripe, unsigned int data_index)
{
	return (r5_parity(g, stripe) + 1 + data_index) % g->members;
}

static void r5_map(const struct raid_geometry *g, uint64_t array_lba,
		   struct raid_chunk *out)
{
	uint64_t stripe_blocks = (uint64_t)(g->members - 1) * g->unit_blocks;
	uint64_t in_stripe = array_lba % stripe_blocks;

	out->stripe = array_lba / stripe_blocks;
	out->data_index = (unsigned int)(in_stripe / g->unit_blocks);
	out->member = r5_data_member(g, out->stripe, out->data_index);
	out->member_lba = out->stripe * g->unit_blocks +
			  in_stripe % g->unit_blocks;
}

static int r5_unmap(const struct raid_geometry *g, unsigned int member,
		    uint64_t member_lba, uint64_t *array_lba)
{
	uint64_t stripe = member_lba / g->unit_blocks;
	unsigned int parity, data_index;

	if (member >= g->members || member_lba >= g->member_blocks)
		return -EINVAL;
	parity = r5_parity(g, stripe);
	if (member == parity)
		return -ENOENT;
	data_index = (member + g->members - parity - 1) % g->members;
	*array_lba = (stripe * (g->members - 1) + data_index) * g->unit_blocks +
		     member_lba % g->unit_blocks;
	return 0;
}

/* ---- members out of use ---- */

int r5_rebuild_check(const struct raid_geometry *g, uint64_t per_stripe,
		     uint32_t missing, uint64_t first, uint32_t nr,
		     unsigned int member)
{
	if (!nr || first > UINT64_MAX / per_stripe ||
	    (member != RAID_PARITY_MEMBER && member >= g->members))
		return -EINVAL;
	if (missing & ~(member < 32 ? 1u << member : 0))
		return -ENODATA;
	return 0;
}

int r5_missing(uint32_t missing, const struct raid_geometry *g, int *F)
{
	uint32_t m = missing & (g->members < 32 ? (1u << g->members) - 1 :
				UINT32_MAX);

	*F = -1;
	if (!m)
		return 0;
	if (m & (m - 1))
		return -ENODATA;
	*F = __builtin_ctz(m);
	return 0;
}

int r5_read_missing(uint32_t missing, const struct raid_level_ops *l,
		    const struct raid_geometry *g, uint64_t lba,
		    uint32_t blocks, int *F)
{
	uint64_t pos, end = lba + blocks;
	int err = r5_missing(missing, g, F);

	if (err != -ENODATA)
		return err;
	/* A stripe where two are gone (torn, or its parity unknown) still
	 * has the units of the boxes that are there. */
	for (pos = lba; pos < end;
	     pos += g->unit_blocks - pos % g->unit_blocks) {
		struct raid_chunk ch;

		l->map(g, pos, &ch);
		if (ch.member < 32 && (missing & (1u << ch.member)))
			return -ENODATA;
	}
	*F = -1;
	return 0;
}

/* The member that accumulates a reconstruction: any but @F, rotating with
 * the calculator so that degraded requests spread the work. */
static unsigned int r5_calculator(struct tpt_plan_ctx *c, unsigned int F)
{
	unsigned int n = c->geo->members;

	return (F + 1 + c->calculator_rr % (n - 1)) % n;
}

/*
 * A READ MEDIUM in @step of the blocks [@lba, @lba + @n) at every member
 * but @target and those in @skip, each exporting into a run of slots of
 * its own, in group @group: the sources of a rebuild, in @src.  Returns
 * how many, or an error.
 */
static int export_sources(struct tpt_plan_builder *b, uint32_t skip,
			  unsigned int target, uint64_t lba, uint32_t n,
			  unsigned int step, uint8_t group,
			  struct tpt_chain_source *src)
{
	const struct raid_geometry *g = b->c->geo;
	uint32_t pieces = (n + g->unit_blocks - 1) / g->unit_blocks;
	unsigned int nr = 0, m;
	struct tpt_plan_cmd *cmd;
	int err;

	for (m = 0; m < g->members; m++) {
		if (m == target || (skip & (1u << m)))
			continue;
		src[nr] = (struct tpt_chain_source){ .member = (int)m };
		err = tpt_plan_want_slots(b, m, (uint16_t)pieces,
					  &src[nr].ordinal);
		if (err)
			return err;
		cmd = tpt_plan_add_cmd(b, step, TPT_PLAN_READ_MEDIUM, m, lba, n);
		if (!cmd)
			return -ENOMEM;
		cmd->result_slot = src[nr].ordinal;
		cmd->group_offset = group;
		nr++;
	}
	return (int)nr;
}

/*
 * The blocks [@lba, @lba + @n) of member @target, rebuilt from every other
 * member's same blocks into a result at @target, in group @group
 * (protocol.md 7.5): a READ MEDIUM at each source, exporting into slots,
 * in @step; then the parity chain at @target (tpt_plan_add_chain()), a
 * pass per source naming its slots piece by piece.  @first_mode
 * is the first link's PARITY MODE: XOR MEDIUM when @target's own blocks
 * take part (a degraded read's calculator), COPY when they are what is
 * rebuilt.  With @stage the last link is PART BLOCK: the result becomes
 * staged data for WRITE NEW DATA.  Returns the last step used, or an
 * error.
 */
static int plan_rebuild_chain(struct tpt_plan_builder *b, uint32_t skip,
			      unsigned int target, uint64_t lba, uint32_t n,
			      unsigned int step, uint8_t group,
			      uint8_t first_mode, bool stage)
{
	struct tpt_chain_source src[RAID_MAX_MEMBERS];
	int nr = export_sources(b, skip, target, lba, n, step, group, src);

	if (nr < 0)
		return nr;
	return tpt_plan_add_chain(b, step + 1, target, lba, n, group,
				  first_mode, stage, src, (unsigned int)nr);
}

/* ---- TPT READ (paper III-C, III-D 5; protocol.md 7.1, 7.5) ---- */

static int r5_tpt_read(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
		       uint32_t group, struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t pos, end = lba + blocks;
	struct tpt_plan_builder b;
	struct tpt_plan_cmd *cmd;
	struct tpt_read_piece *piece;
	unsigned int calc = 0, nr = 0;
	uint32_t n;
	int err, F, last;

	err = r5_read_missing(c->missing, c->level, g, lba, blocks, &F);
	if (!err)
		err = tpt_plan_begin(&b, c, lba, blocks, group, out);
	if (err)
		return err;
	/* At most one piece per unit the request touches. */
	piece = calloc(blocks / g->unit_blocks + 2, sizeof(*piece));
	if (!piece) {
		tpt_plan_abandon(&b);
		return -ENOMEM;
	}
	if (F >= 0)
		calc = r5_calculator(c, (unsigned int)F);
	/* The host buffer is contiguous, member blocks are not: PREP READs
	 * of the pieces of stripe units, each naming where in the host
	 * buffer its blocks go, all in one step, FINAL last per member.  A
	 * piece of the missing member is rebuilt at the calculator and sent
	 * to the host from there, in a group of its own. */
	for (pos = lba; pos < end && !err; pos += n) {
		struct raid_chunk ch;
		uint32_t off;

		c->level->map(g, pos, &ch);
		off = (uint32_t)(ch.member_lba % g->unit_blocks);
		n = g->unit_blocks - off;
		if (n > end - pos)
			n = (uint32_t)(end - pos);
		if ((int)ch.member != F) {
			piece[nr++] = (struct tpt_read_piece){
				.member = ch.member, .member_lba = ch.member_lba,
				.blocks = n,
				.host_offset = (pos - lba) * c->block_size,
			};
			continue;
		}
		out->nr_groups = 2;
		last = plan_rebuild_chain(&b, c->missing | (1u << calc), calc,
					  ch.member_lba, n, 0, 1,
					  TPT_PARITY_XOR_MEDIUM, false);
		if (last < 0) {
			err = last;
			break;
		}
		cmd = tpt_plan_add_cmd(&b, (unsigned int)last + 1,
				       TPT_PLAN_SEND_RESULT, calc,
				       ch.member_lba, n);
		if (!cmd) {
			err = -ENOMEM;
			break;
		}
		cmd->group_offset = 1;
		err = tpt_plan_add_host_ref(&b, (pos - lba) * c->block_size,
					    n * c->block_size);
	}
	if (!err)
		err = tpt_plan_add_prep_reads(&b, piece, nr);
	free(piece);
	if (!err && out->nr_groups > 1)
		err = tpt_plan_add_end_steps(&b);
	err = tpt_plan_end(&b, err);
	if (!err && F >= 0)
		c->calculator_rr++;
	return err;
}

/* ---- TPT WRITE (paper III-C, protocol.md 7.2-7.4) ---- */

/*
 * Read-modify-write of the interval [x, x + len) of a stripe's units
 * (paper III-C, Fig. 4; protocol.md 7.2): the XDWRITEs' deltas
 * (tpt_plan_add_xdwrites()) folded into the old parity by the parity
 * member: one PART BLOCK with XOR MEDIUM and a pass per delta
 * (tpt_plan_add_chain()), which stages the new parity.
 */
static int plan_rmw_interval(struct tpt_plan_builder *b, uint64_t base,
			     unsigned int parity,
			     const struct tpt_stripe_piece *piece, unsigned int nr,
			     uint32_t x, uint32_t len)
{
	struct tpt_chain_source delta[RAID_MAX_MEMBERS];
	int k = tpt_plan_add_xdwrites(b, base, piece, nr, x, len, delta), err;

	if (k < 0)
		return k;
	err = tpt_plan_add_chain(b, 1, parity, base + x, len, 0,
				 TPT_PARITY_XOR_MEDIUM, true, delta,
				 (unsigned int)k);
	return err < 0 ? err : 0;
}

/*
 * Reconstruct-write of the interval [x, x + len) where the missing data
 * member @F is written (protocol.md 7.3, 7.5): its old blocks are gone, so
 * the new parity is the XOR of the new data where the request writes and
 * of the medium elsewhere.  Every other data member exports its part of
 * that sum into a slot - READ NEW BLOCK of its new data (also staged) or
 * READ MEDIUM of its blocks - and the parity member's PART BLOCK with COPY
 * takes @F's new data from the host and the others' slots, a pass each
 * (tpt_plan_add_chain()).  All in group 1, apart from the
 * read-modify-write intervals of the same stripe.
 */
static int plan_rcw_interval(struct tpt_plan_builder *b, uint64_t stripe,
			     unsigned int parity, unsigned int F,
			     const struct tpt_stripe_piece *piece, unsigned int nr,
			     uint32_t x, uint32_t len)
{
	const struct raid_geometry *g = b->c->geo;
	uint32_t bs = b->c->block_size;
	uint64_t base = stripe * g->unit_blocks;
	struct tpt_chain_source part[RAID_MAX_MEMBERS];
	const struct tpt_stripe_piece *pc;
	struct tpt_plan_cmd *cmd;
	unsigned int d, k = 1, m;
	int err;

	b->p->nr_groups = 2;
	/* @F's new data, from the host, is the first pass. */
	pc = tpt_stripe_piece_over(piece, nr, F, x, len);
	part[0] = (struct tpt_chain_source){
		.member = -1,
		.host_offset = pc->host_offset + (uint64_t)(x - pc->first) * bs,
	};
	for (d = 0; d < g->members - 1; d++) {
		m = b->c->level->data_member(g, stripe, d);
		if (m == F)
			continue;
		pc = tpt_stripe_piece_over(piece, nr, m, x, len);
		part[k] = (struct tpt_chain_source){ .member = (int)m };
		err = tpt_plan_want_slot(b, m, &part[k].ordinal);
		if (err)
			return err;
		cmd = tpt_plan_add_cmd(b, 0, pc ? TPT_PLAN_READ_NEW_BLOCK :
				       TPT_PLAN_READ_MEDIUM, m, base + x, len);
		if (!cmd)
			return -ENOMEM;
		cmd->result_slot = part[k].ordinal;
		cmd->group_offset = 1;
		if (pc && tpt_plan_add_host_ref(b, pc->host_offset +
						(uint64_t)(x - pc->first) * bs,
						len * bs))
			return -ENOMEM;
		k++;
	}
	err = tpt_plan_add_chain(b, 1, parity, base + x, len, 1,
				 TPT_PARITY_COPY, true, part, k);
	return err < 0 ? err : 0;
}

/*
 * A write of array blocks [@first, @end) of @stripe, less than the whole
 * stripe or with member @F missing (-1: none), cut into elementary
 * intervals (tpt_stripe_cut()), each planned on its own:
 * read-modify-write, or reconstruct-write where the missing member is
 * written.  With the parity member missing there is no parity to keep:
 * the new data is only staged, with READ NEW BLOCK.
 */
static int plan_stripe_write(struct tpt_plan_builder *b, uint64_t req_lba,
			     uint64_t stripe, uint64_t first, uint64_t end,
			     int F)
{
	const struct raid_geometry *g = b->c->geo;
	const struct raid_level_ops *l = b->c->level;
	uint32_t bs = b->c->block_size, unit = g->unit_blocks;
	uint32_t bound[2 * RAID_MAX_MEMBERS], lo = unit, hi = 0;
	struct tpt_stripe_piece piece[RAID_MAX_MEMBERS];
	unsigned int parity = l->parity_member(g, stripe, 0);
	unsigned int nr_pieces, nr_bounds, i, j;
	uint64_t base = stripe * unit;
	struct tpt_plan_cmd *cmd;
	int err = 0;

	tpt_stripe_cut(g, l, bs, req_lba, stripe, first, end, piece,
		       &nr_pieces, bound, &nr_bounds);
	if (F == (int)parity) {
		for (j = 0; j < nr_pieces; j++) {
			const struct tpt_stripe_piece *pc = &piece[j];

			if (!tpt_plan_add_cmd(b, 0, TPT_PLAN_READ_NEW_BLOCK,
					      pc->member, base + pc->first,
					      pc->end - pc->first) ||
			    tpt_plan_add_host_ref(b, pc->host_offset,
						  (pc->end - pc->first) * bs))
				return -ENOMEM;
		}
		return 0;
	}
	for (i = 0; i + 1 < nr_bounds && !err; i++) {
		uint32_t x = bound[i], len = bound[i + 1] - bound[i];

		if (F >= 0 &&
		    tpt_stripe_piece_over(piece, nr_pieces, (unsigned int)F, x, len)) {
			err = plan_rcw_interval(b, stripe, parity,
						(unsigned int)F, piece,
						nr_pieces, x, len);
			continue;
		}
		err = plan_rmw_interval(b, base, parity, piece, nr_pieces, x,
					len);
		if (x < lo)
			lo = x;
		if (x + len > hi)
			hi = x + len;
	}
	/* The hint saves the parity member a read after the XDWRITEs, at the
	 * price of a command, which is what the controller pays most for
	 * small writes: only when the array asks for it. */
	if (err || lo >= hi || !b->c->prefetch)
		return err;
	/* One cache hint over the read-modify-write range keeps Table II's
	 * single PRE-FETCH; gaps between intervals cost a little extra
	 * reading. */
	cmd = tpt_plan_add_cmd(b, 0, TPT_PLAN_PRE_FETCH, parity, base + lo,
			       hi - lo);
	return cmd ? 0 : -ENOMEM;
}

/* One COMP TMP of a full stripe's parity gathering: in @step, the data
 * block of tree index @to folds in the one of index @from. */
struct gather_edge {
	unsigned int step, to, from;
};

/*
 * How a full stripe's @k data blocks gather into one, by tree index: 0 is
 * the calculator, index t is data index (calculator + t) mod k.  Returns
 * the number of steps; the k-1 edges are in @e, in step order.
 *
 * Star (paper III-A): the calculator folds in every other block, one per
 * step, k-1 steps, all k-1 blocks crossing its link.  Binary tree: in
 * step r (s = 2^(r-1)) every t that is a multiple of 2s folds in t + s,
 * ceil(log2 k) steps, at most that many blocks into any one target.  Both
 * are k-1 commands and k-1 transfers: the tree shortens the chain and
 * spreads it over the links.
 */
static unsigned int gather_edges(enum tpt_parity_gather how, unsigned int k,
				 struct gather_edge *e)
{
	unsigned int n = 0, step = 0, s, t;

	if (how == TPT_GATHER_FLAT)
		return 0;	/* the parity target takes every block at once */
	if (how == TPT_GATHER_STAR) {
		for (t = 1; t < k; t++)
			e[n++] = (struct gather_edge){ t, 0, t };
		return k - 1;
	}
	for (s = 1; s < k; s *= 2) {
		step++;
		for (t = 0; t + s < k; t += 2 * s)
			e[n++] = (struct gather_edge){ step, t, t + s };
	}
	return step;
}

/* What a link moves in about one command round trip (10 Gb/s, ~100 us):
 * the price of a gathering step, in bytes. */
#define GATHER_STEP_BYTES	(128u << 10)

/*
 * The gathering @c plans for an array of @members.  Between the tree and
 * the star: the tree is shorter from 4 data blocks on (2 steps against
 * 3), and the same below.  Flat against that one: after the PREP WRITEs,
 * flat is one COMP BLOCK that brings all k data blocks over the parity
 * target's link; star or tree is G steps of one block per receiver and a
 * COMP BLOCK of one.  With t a block's time on a link and r a command's
 * round trip, flat ends first where k t + r <= (G + 1)(t + r), that is
 * (k - G - 1) t <= G r: always below 5 members, up to 256 KiB units at
 * 5, up to 96 KiB at 9.  Flat also costs the controller k - 1 fewer
 * commands per stripe, which is what it pays for on any link.
 */
static enum tpt_parity_gather gather_of(const struct tpt_plan_ctx *c,
					unsigned int members)
{
	unsigned int k = members - 1, steps;
	struct gather_edge edge[RAID_MAX_MEMBERS];
	enum tpt_parity_gather how;
	uint64_t unit_bytes;

	if (c->gather != TPT_GATHER_AUTO)
		return c->gather;
	how = k >= 4 ? TPT_GATHER_TREE : TPT_GATHER_STAR;
	steps = gather_edges(how, k, edge);
	unit_bytes = (uint64_t)c->geo->unit_blocks * c->block_size;
	if ((k - steps - 1) * unit_bytes <=
	    (uint64_t)steps * GATHER_STEP_BYTES)
		return TPT_GATHER_FLAT;
	return how;
}

/*
 * Where member @m stands in full stripe @s's parity gathering: its tree
 * index (gather_edges()), counting the stripe's data members in member
 * order from @root on, or -1 for the stripe's parity member.  Counting by
 * member rather than by data index keeps a member's index from one stripe
 * to the next until the parity member passes it or @root, so a member
 * has the same role in runs of up to N-1 consecutive stripes - which lie
 * back to back on it.
 */
static int gather_index(const struct raid_geometry *g,
			const struct raid_level_ops *l, uint64_t s,
			unsigned int root, unsigned int m)
{
	unsigned int n = g->members, parity = l->parity_member(g, s, 0);
	unsigned int q = (m + n - root) % n, p = (parity + n - root) % n;

	if (m == parity)
		return -1;
	return (int)(q - (p < q));
}

/* The member at tree index @t of full stripe @s (gather_index()'s
 * inverse). */
static unsigned int gather_member(const struct raid_geometry *g,
				  const struct raid_level_ops *l, uint64_t s,
				  unsigned int root, unsigned int t)
{
	unsigned int n = g->members, parity = l->parity_member(g, s, 0);
	unsigned int p = (parity + n - root) % n;

	return (root + t + (t >= p)) % n;
}

/* What a member does in a full stripe, for cutting its stripes into
 * runs: a receiver's commands depend on its tree index, a sender's and
 * the parity member's do not. */
#define GATHER_SENDS	(-2)

static int gather_role(const struct raid_geometry *g,
		       const struct raid_level_ops *l, uint64_t s,
		       unsigned int root, unsigned int m, const bool *receives)
{
	int t = gather_index(g, l, s, root, m);

	return t >= 0 && !receives[t] ? GATHER_SENDS : t;
}

/* A member's full stripes as one of its PREP WRITEs covers them: a run
 * of the stripes it has @role in. */
struct gather_member {
	const struct raid_geometry *g;
	const struct raid_level_ops *l;
	unsigned int root, m;
	const bool *receives;
	int role;
};

/*
 * A sender's PREP WRITE goes on over a stripe it holds the parity of when
 * it sends again in the next, with a skip there that the stripe's COMP
 * BLOCK fills (protocol.md 4.5, 7.4).  A receiver's runs stay cut there,
 * as its COMP TMP's operand must be one result.
 */
static enum tpt_plan_run_stripe gather_stripe(const void *ctx, uint64_t s)
{
	const struct gather_member *gm = ctx;
	int role = gather_role(gm->g, gm->l, s, gm->root, gm->m, gm->receives);

	if (role == gm->role)
		return TPT_RUN_TAKE;
	return gm->role == GATHER_SENDS && role == -1 ? TPT_RUN_SKIP :
							TPT_RUN_STOP;
}

/* A receiver's run of stripes: one PREP WRITE, then a COMP TMP per
 * gathering step it receives in. */
struct gather_run {
	unsigned int member, index;
	uint64_t stripe, len;
	uint16_t acc;			/* ordinal of its first accumulator slot */
};

/*
 * Full stripes @first_stripe.. (@nr of them), their parity gathered among
 * the data members in a star or a binary tree (paper III-A, III-C;
 * protocol.md 7.4; gather_edges()) or flat by the parity member, with
 * commands that cover several stripes each: the paper's "single
 * command" per target.
 *
 * Tree indices count each stripe's data members in member order from a
 * root member on (gather_index()), so a member keeps its role over runs
 * of consecutive stripes, contiguous on it.  Per run, step 1 is one PREP
 * WRITE: a sender's exports its blocks into a run of slots, one per
 * stripe; a receiver's stays private (the gathering never touches staged
 * data) and the receiver takes a run of slots for its accumulator.  Each
 * gathering step is then one COMP TMP per receiver run, its operand the
 * run's result (the PREP WRITE's, then the accumulator, in place), its
 * list a SLOT descriptor per stripe, naming whichever member has the
 * sending index in that stripe.  Finally each stripe's parity member
 * reads the finished parity from the root's accumulator with COMP BLOCK,
 * one per stripe: no member is parity of two stripes in a row.  Flat has
 * no receivers and no gathering steps: every data member exports, and
 * each COMP BLOCK XORs all k of its stripe's blocks, one pass each.
 *
 * The root is the first stripe's data member at data index calculator_rr
 * mod (N-1), and calculator_rr advances once per request: requests to
 * one stripe rotate it among that stripe's data members, and with it the
 * links the gathering loads (the paper's ad hoc choice of the calculator,
 * for balance).  Where the root is a later stripe's parity member, the
 * member after it is index 0 there.  For a single stripe the indices are
 * its data indices from the root's on, and it costs the paper's 3N-1
 * operations (Table II) in either topology.
 */
static int plan_full_stripes(struct tpt_plan_builder *b, uint64_t req_lba,
			     uint64_t first_stripe, uint64_t nr)
{
	const struct raid_geometry *g = b->c->geo;
	const struct raid_level_ops *l = b->c->level;
	uint32_t bs = b->c->block_size, unit = g->unit_blocks;
	unsigned int n = g->members, k = n - 1;
	unsigned int root = l->data_member(g, first_stripe,
					   b->c->calculator_rr % k);
	uint64_t max_run = tpt_plan_refs_max(b->c);
	struct gather_edge edge[RAID_MAX_MEMBERS];
	bool receives[RAID_MAX_MEMBERS] = { false };
	enum tpt_parity_gather how = gather_of(b->c, n);
	unsigned int steps, e, m, r, t, nr_runs = 0;
	/* Flat has no receivers: every data block goes to the parity. */
	unsigned int nr_edges = how == TPT_GATHER_FLAT ? 0 : k - 1;
	uint64_t s, end = first_stripe + nr, i, len, units;
	struct gather_member gm = {
		.g = g, .l = l, .root = root, .receives = receives,
	};
	struct tpt_plan_cmd *cmd;
	/* Per member and stripe: the slot of its export or accumulator. */
	uint16_t *slot = calloc(n * nr, sizeof(*slot));
	struct gather_run *run = calloc(n * nr, sizeof(*run));
	int role, err = 0;

	if (!slot || !run) {
		err = -ENOMEM;
		goto out;
	}
	if (max_run > TPT_VENDOR_LENGTH_MAX / unit)
		max_run = TPT_VENDOR_LENGTH_MAX / unit;
	steps = gather_edges(how, k, edge);
	for (e = 0; e < nr_edges; e++)
		receives[edge[e].to] = true;

	/* Step 1: a PREP WRITE per run of a member's stripes in one role. */
	for (m = 0; m < n && !err; m++) {
		for (s = first_stripe; s < end && !err; s += len) {
			uint16_t first;

			role = gather_role(g, l, s, root, m, receives);
			gm.m = m;
			gm.role = role;
			len = tpt_plan_run_over(s, end, max_run, gather_stripe,
						&gm, &units);
			if (role == -1)
				continue;	/* the parity member */
			err = tpt_plan_want_slots(b, m, (uint16_t)units,
						  &first);
			if (err)
				break;
			cmd = tpt_plan_add_cmd(b, 0, TPT_PLAN_PREP_WRITE, m,
					       s * unit, (uint32_t)(len * unit));
			if (!cmd) {
				err = -ENOMEM;
				break;
			}
			if (role == GATHER_SENDS)
				cmd->result_slot = first;
			else
				run[nr_runs++] = (struct gather_run){
					.member = m, .index = (unsigned int)role,
					.stripe = s, .len = len, .acc = first,
				};
			/* Its units in the run, a slot each; a sender's
			 * parity units skipped (protocol.md 4.5). */
			for (i = 0; i < len && !err; i++) {
				uint64_t at;

				if (l->parity_member(g, s + i, 0) == m) {
					err = tpt_plan_add_skip_ref(b,
								    unit * bs);
					continue;
				}
				slot[m * nr + (s + i - first_stripe)] = first++;
				err = l->unmap(g, m, (s + i) * unit, &at);
				if (!err)
					err = tpt_plan_add_host_ref(b, (at - req_lba) * bs,
								    unit * bs);
			}
		}
	}
	/* The gathering: per edge, a COMP TMP per run of its receiver,
	 * naming per stripe the slot of the member that sends there. */
	for (e = 0; e < nr_edges && !err; e++) {
		const struct gather_edge *x = &edge[e];

		for (r = 0; r < nr_runs && !err; r++) {
			if (run[r].index != x->to)
				continue;
			cmd = tpt_plan_add_cmd(b, x->step, TPT_PLAN_COMP_TMP,
					       run[r].member, run[r].stripe * unit,
					       (uint32_t)(run[r].len * unit));
			if (!cmd) {
				err = -ENOMEM;
				break;
			}
			cmd->result_slot = run[r].acc;
			for (i = 0; i < run[r].len && !err; i++) {
				s = run[r].stripe + i;
				m = gather_member(g, l, s, root, x->from);
				err = tpt_plan_add_slot_ref(b, m,
							    slot[m * nr + (s - first_stripe)],
							    unit * bs);
			}
		}
	}
	/* Each parity from the root's accumulator, or flat, from every data
	 * block, one pass each (protocol.md 5.1). */
	for (s = first_stripe; s < end && !err; s++) {
		if (!tpt_plan_add_cmd(b, steps + 1, TPT_PLAN_COMP_BLOCK,
				      l->parity_member(g, s, 0), s * unit, unit)) {
			err = -ENOMEM;
			break;
		}
		for (t = 0; t < (how == TPT_GATHER_FLAT ? k : 1) && !err; t++) {
			m = gather_member(g, l, s, root, t);
			err = tpt_plan_add_slot_ref(b, m,
						    slot[m * nr + (s - first_stripe)],
						    unit * bs);
		}
	}
out:
	free(slot);
	free(run);
	return err;
}

/*
 * Full stripes @first_stripe.. (@nr of them) of data the controller holds
 * (c->host_held, an unmodified host's): it computes each parity from the
 * data in its memory in one pass, where gathering it among the targets
 * would cost it N-2 more commands per stripe (paper III-E: the proxied
 * host pays TPT-RAID's commands and the relay both).  Each member gets a
 * WRITE(16) per run of its units in these stripes, which are contiguous
 * on it, data and parity units alike: a 1 MiB write over 5 members and
 * 64 KiB units is 5 commands, not Baseline's 20 or the gathering's 37.
 * Nothing is staged: the data and the parity arrive together, so the
 * write is as atomic as WRITE NEW DATA would make it, and the
 * write-intent record covers a crash between the members' writes.  The
 * WRITEs go in the plan's last step, with any WRITE NEW DATA of its
 * partial stripes.
 */
static int plan_full_stripes_held(struct tpt_plan_builder *b,
				  uint64_t req_lba, uint64_t first_stripe,
				  uint64_t nr, unsigned int step)
{
	const struct raid_geometry *g = b->c->geo;
	const struct raid_level_ops *l = b->c->level;
	uint32_t bs = b->c->block_size, unit = g->unit_blocks;
	unsigned int k = g->members - 1, m;
	uint64_t s, at, end = first_stripe + nr;
	struct tpt_plan_cmd *cmd;

	for (m = 0; m < g->members; m++) {
		cmd = NULL;
		for (s = first_stripe; s < end; s++) {
			uint64_t first_data = (s * k * unit - req_lba) * bs;

			if (!cmd || cmd->blocks + unit > TPT_VENDOR_LENGTH_MAX) {
				cmd = tpt_plan_add_cmd(b, step, TPT_PLAN_WRITE,
						       m, s * unit, 0);
				if (!cmd)
					return -ENOMEM;
			}
			cmd->blocks += unit;
			if (m == l->parity_member(g, s, 0)) {
				if (tpt_plan_add_parity_ref(b, first_data,
							    unit * bs, k))
					return -ENOMEM;
				continue;
			}
			if (l->unmap(g, m, s * unit, &at))
				return -EINVAL;
			if (tpt_plan_add_host_ref(b, (at - req_lba) * bs,
						  unit * bs))
				return -ENOMEM;
		}
	}
	return 0;
}

/*
 * A request is 0-2 partial stripes, at its head and tail, and at most one
 * multiple-full-stripe part between them (paper III-C, protocol.md 7.4).
 * The parts touch different stripes, hence different member ranges and
 * slots, so they share steps: everything that reads the host in the first
 * step, the parity chains side by side after it, WRITE NEW DATA last.
 * With a member missing every stripe is planned on its own
 * (plan_stripe_write), full ones included.
 */
static int r5_tpt_write(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
			uint32_t group, struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t stripe_blocks, pos, end = lba + blocks, s, seg, nr;
	uint64_t held_first = 0, held_nr = 0;
	struct tpt_plan_builder b;
	bool full = false;
	int err, F;

	err = r5_missing(c->missing, g, &F);
	if (!err && !c->slots)
		err = -EINVAL;
	if (!err)
		err = tpt_plan_begin(&b, c, lba, blocks, group, out);
	if (err)
		return err;
	stripe_blocks = raid_stripe_data_blocks(c->level, g);
	for (pos = lba; pos < end && !err; pos = seg) {
		s = pos / stripe_blocks;
		nr = (end - pos) / stripe_blocks;
		if (pos % stripe_blocks == 0 && nr && F < 0 && c->host_held) {
			held_first = s;
			held_nr = nr;
			seg = pos + nr * stripe_blocks;
		} else if (pos % stripe_blocks == 0 && nr && F < 0) {
			err = plan_full_stripes(&b, lba, s, nr);
			seg = pos + nr * stripe_blocks;
			full = true;
		} else {
			seg = (s + 1) * stripe_blocks;
			if (seg > end)
				seg = end;
			err = plan_stripe_write(&b, lba, s, pos, seg, F);
		}
	}
	if (!err)
		err = tpt_plan_add_end_steps(&b);
	if (!err && held_nr)
		err = plan_full_stripes_held(&b, lba, held_first, held_nr,
					     b.last_step);
	err = tpt_plan_end(&b, err);
	if (!err && full)
		c->calculator_rr++;
	return err;
}

/* ---- TPT rebuild and resync (protocol.md 7.5) ---- */

/*
 * The blocks [@lba, @lba + @n) of member @target rebuilt as
 * plan_rebuild_chain() does, but gathered among the sources first, in the
 * binary tree of gather_edges(): every source exports its blocks with
 * READ MEDIUM, in round r the source of tree index t (a multiple of 2^r)
 * folds in the export of t + 2^(r-1) with COMP TMP in place, and @target
 * takes the root's sum with one PART command in @mode, staged with
 * @stage.  The flat chain brings all N-1 exports over @target's link;
 * here no box takes in more than ceil(log2(N-1)) of them and @target one,
 * for N-2 more commands and as many more steps.  Returns the last step
 * used, or an error.
 */
static int plan_rebuild_tree(struct tpt_plan_builder *b, unsigned int target,
			     uint64_t lba, uint32_t n, uint8_t mode,
			     bool stage)
{
	uint32_t bs = b->c->block_size, unit = b->c->geo->unit_blocks;
	uint32_t pieces = (n + unit - 1) / unit, len, i;
	struct tpt_chain_source src[RAID_MAX_MEMBERS];
	struct gather_edge edge[RAID_MAX_MEMBERS];
	unsigned int nr, e, steps;
	struct tpt_plan_cmd *cmd;
	int err = export_sources(b, 0, target, lba, n, 0, 0, src);

	if (err < 0)
		return err;
	nr = (unsigned int)err;
	steps = gather_edges(TPT_GATHER_TREE, nr, edge);
	for (e = 0; e + 1 < nr; e++) {
		const struct tpt_chain_source *to = &src[edge[e].to];
		const struct tpt_chain_source *from = &src[edge[e].from];

		cmd = tpt_plan_add_cmd(b, edge[e].step, TPT_PLAN_COMP_TMP,
				       (unsigned int)to->member, lba, n);
		if (!cmd)
			return -ENOMEM;
		cmd->result_slot = to->ordinal;
		for (i = 0; i < pieces; i++) {
			len = n - i * unit < unit ? n - i * unit : unit;
			err = tpt_plan_add_slot_ref(b, (unsigned int)from->member,
						    (uint16_t)(from->ordinal + i),
						    len * bs);
			if (err)
				return err;
		}
	}
	return tpt_plan_add_chain(b, steps + 1, target, lba, n, 0, mode, stage,
				  src, 1);
}

/*
 * The units of @member in stripes [@first, @first + @nr), rebuilt from
 * the other members and written to @member - a spare taking over, or a
 * returning member catching up - or, for RAID_PARITY_MEMBER, each
 * stripe's parity recomputed from its data (resync after a crash).
 * Stripes whose rebuilt unit lies on one member are one chain: a READ
 * MEDIUM of all their units at each source, then at the member a PART
 * BLOCK with a pass per source, naming its slots stripe by stripe
 * (tpt_plan_add_chain()).
 */
static int r5_tpt_rebuild(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
			  unsigned int member, uint32_t group,
			  struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t per_stripe = raid_stripe_data_blocks(c->level, g), s, run;
	uint32_t unit = g->unit_blocks;
	struct tpt_plan_builder b;
	unsigned int target;
	int err, last;

	err = r5_rebuild_check(g, per_stripe, c->missing, first, nr, member);
	if (err)
		return err;
	err = tpt_plan_begin_stripes(&b, c, first, nr, group, out);
	if (err)
		return err;
	for (s = first; s < first + nr && !err; s += run) {
		target = member == RAID_PARITY_MEMBER ?
			 c->level->parity_member(g, s, 0) : member;
		run = member == RAID_PARITY_MEMBER ? 1 : first + nr - s;
		if (c->rebuild_gather == TPT_REBUILD_TREE)
			last = plan_rebuild_tree(&b, target, s * unit,
						 (uint32_t)(run * unit),
						 TPT_PARITY_COPY, true);
		else
			last = plan_rebuild_chain(&b, 0, target, s * unit,
						  (uint32_t)(run * unit), 0, 0,
						  TPT_PARITY_COPY, true);
		if (last < 0)
			err = last;
	}
	if (!err)
		err = tpt_plan_add_end_steps(&b);
	return tpt_plan_end(&b, err);
}

/*
 * The check of stripes [@first, @first + @nr): a stripe is consistent
 * when the XOR of all its N units, parity included, is zero, whichever
 * member sums them.  So one member sums the whole run as a rebuild of its
 * units would (the same tree or chain), but in XOR MEDIUM mode - its own
 * units are the operand - and staging nothing; then SEND RESULT brings
 * the sums, one unit per stripe, to the controller, which looks for
 * anything but zeroes.  The member rotates with the batch (runs of @nr
 * stripes), so that a long check spreads the summing over every box.
 */
static int r5_tpt_check(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
			uint32_t group, struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint32_t unit = g->unit_blocks, n = nr * unit;
	struct tpt_plan_builder b;
	struct tpt_plan_cmd *cmd;
	unsigned int target;
	int err, last;

	if (!nr)
		return -EINVAL;
	if (c->missing & (g->members < 32 ? (1u << g->members) - 1 :
			  UINT32_MAX))
		return -ENODATA;
	if ((uint64_t)nr * unit > TPT_VENDOR_LENGTH_MAX)
		return -EINVAL;
	err = tpt_plan_begin_stripes(&b, c, first, nr, group, out);
	if (err)
		return err;
	target = (unsigned int)(first / nr % g->members);
	if (c->rebuild_gather == TPT_REBUILD_TREE)
		last = plan_rebuild_tree(&b, target, first * unit, n,
					 TPT_PARITY_XOR_MEDIUM, false);
	else
		last = plan_rebuild_chain(&b, 0, target, first * unit, n, 0, 0,
					  TPT_PARITY_XOR_MEDIUM, false);
	err = last < 0 ? last : 0;
	cmd = err ? NULL : tpt_plan_add_cmd(&b, (unsigned int)last + 1,
					    TPT_PLAN_SEND_RESULT, target,
					    first * unit, n);
	if (!err && !cmd)
		err = -ENOMEM;
	if (!err)
		err = tpt_plan_add_host_ref(&b, 0, n * c->block_size);
	if (!err)
		err = tpt_plan_add_end_steps(&b);
	return tpt_plan_end(&b, err);
}

const struct raid_level_ops raid5_level = {
	.name = "raid5",
	.level = 5,
	.min_members = 3,
	.max_members = RAID_MAX_MEMBERS,
	.nr_parity = r5_nr_parity,
	.array_blocks = r5_array_blocks,
	.map = r5_map,
	.parity_member = r5_parity_member,
	.data_member = r5_data_member,
	.unmap = r5_unmap,
	.tpt_read = r5_tpt_read,
	.tpt_write = r5_tpt_write,
	.tpt_rebuild = r5_tpt_rebuild,
	.tpt_check = r5_tpt_check,
	.bl_read = r5_bl_read,
	.bl_write = r5_bl_write,
	.bl_rebuild = r5_bl_rebuild,
	.bl_check = r5_bl_check,
};
