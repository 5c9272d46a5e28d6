/*
 * RAID-6 (controller/raid_level.h, raid6.h): md's left-symmetric layout
 * with P and Q, the field arithmetic every plan is made of, and the TPT
 * plans, where targets compute P, Q and lost units with weighted passes
 * (protocol.md 3.1, 7.8).  It survives the loss of any two members.
 * Baseline mode's plans are in raid6_baseline.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "controller/raid6.h"
#include "controller/tpt_plan.h"
#include "scsi/tpt_cdb.h"
#include "scsi/tpt_parity.h"

/* ---- layout ---- */

/*
 * Left-symmetric RAID-6 as md places it: P of stripe s on member N-1 -
 * (s mod N), walking backwards one member per stripe, Q on the member
 * after P, and data unit d on the member d+2 places after P.  A member
 * therefore holds data in N-2 consecutive stripes, then P, then Q.
 */
static unsigned int r6_p(const struct raid_geometry *g, uint64_t stripe)
{
	return g->members - 1 - (unsigned int)(stripe % g->members);
}

static unsigned int r6_nr_parity(const struct raid_geometry *g)
{
	(void)g;
	return 2;
}

static uint64_t r6_array_blocks(const struct raid_geometry *g)
{
	return (uint64_t)(g->members - 2) * g->member_blocks;
}

static unsigned int r6_parity_member(const struct raid_geometry *g,
				     uint64_t stripe, unsigned int i)
{
	return (r6_p(g, stripe) + i) % g->members;
}

static unsigned int r6_data_member(const struct raid_geometry *g,
				   uint64_t stripe, unsigned int data_index)
{
	return (r6_p(g, stripe) + 2 + data_index) % g->members;
}

int r6_data_index(const struct raid_geometry *g, uint64_t stripe,
			 unsigned int member)
{
	unsigned int n = g->members, d = (member + 2 * n - r6_p(g, stripe) - 2) % n;

	return d < n - 2 ? (int)d : -1;
}

static void r6_map(const struct raid_geometry *g, uint64_t array_lba,
		   struct raid_chunk *out)
{
	uint64_t stripe_blocks = (uint64_t)(g->members - 2) * g->unit_blocks;
	uint64_t in_stripe = array_lba % stripe_blocks;

	out->stripe = array_lba / stripe_blocks;
	out->data_index = (unsigned int)(in_stripe / g->unit_blocks);
	out->member = r6_data_member(g, out->stripe, out->data_index);
	out->member_lba = out->stripe * g->unit_blocks +
			  in_stripe % g->unit_blocks;
}

static int r6_unmap(const struct raid_geometry *g, unsigned int member,
		    uint64_t member_lba, uint64_t *array_lba)
{
	uint64_t stripe = member_lba / g->unit_blocks;
	int d;

	if (member >= g->members || member_lba >= g->member_blocks)
		return -EINVAL;
	d = r6_data_index(g, stripe, member);
	if (d < 0)
		return -ENOENT;
	*array_lba = (stripe * (g->members - 2) + (unsigned int)d) *
		     g->unit_blocks + member_lba % g->unit_blocks;
	return 0;
}

/* ---- the field arithmetic (raid6.h) ---- */

uint8_t r6_parity_coef(unsigned int par, unsigned int i)
{
	return par == R6_P ? 1 : tpt_gf_pow2(i);
}

/* The unit @member holds in @stripe, as weights over the k data units. */
static void unit_row(const struct raid_geometry *g, uint64_t stripe,
		     unsigned int member, uint8_t *row)
{
	unsigned int k = g->members - 2, i;
	int d = r6_data_index(g, stripe, member);

	memset(row, 0, k);
	if (d >= 0) {
		row[d] = 1;
		return;
	}
	for (i = 0; i < k; i++)
		row[i] = r6_parity_coef(member == r6_p(g, stripe) ? R6_P : R6_Q,
				     i);
}

static bool usable(uint32_t unusable, unsigned int m)
{
	return m >= 32 || !(unusable & (1u << m));
}

int r6_solve(const struct raid_geometry *g, uint64_t stripe,
	     unsigned int target, uint32_t unusable,
	     uint8_t w[RAID_MAX_MEMBERS])
{
	unsigned int k = g->members - 2, chosen[RAID_MAX_MEMBERS];
	unsigned char a[RAID_MAX_MEMBERS * RAID_MAX_MEMBERS];
	unsigned char inv[RAID_MAX_MEMBERS * RAID_MAX_MEMBERS];
	uint8_t t[RAID_MAX_MEMBERS];
	unsigned int nc = 0, i, j, m;

	memset(w, 0, RAID_MAX_MEMBERS);
	unusable |= target < 32 ? 1u << target : 0;
	for (i = 0; i < k + 2 && nc < k; i++) {
		m = i < k ? r6_data_member(g, stripe, i) :
			    r6_parity_member(g, stripe, i - k);
		if (usable(unusable, m))
			chosen[nc++] = m;
	}
	if (nc < k)
		return -ENODATA;
	/* w A = t, where row j of A is chosen unit j: w = t A^-1. */
	for (j = 0; j < k; j++)
		unit_row(g, stripe, chosen[j], &a[j * k]);
	if (gf_invert_matrix(a, inv, (int)k))
		return -ENODATA;	/* any k units of P+Q are independent */
	unit_row(g, stripe, target, t);
	for (j = 0; j < k; j++) {
		uint8_t s = 0;

		for (i = 0; i < k; i++)
			s ^= (uint8_t)gf_mul(t[i], inv[i * k + j]);
		w[chosen[j]] = s;
	}
	return 0;
}

/* @media += @c times the old contents of data unit @i: the member's own
 * unit, or lost, its solution. */
static int add_old_data(const struct raid_geometry *g, uint64_t stripe,
			unsigned int i, uint8_t c, uint32_t unusable,
			uint8_t *media)
{
	unsigned int m = r6_data_member(g, stripe, i), j;
	uint8_t w[RAID_MAX_MEMBERS];
	int err;

	if (usable(unusable, m)) {
		media[m] ^= c;
		return 0;
	}
	err = r6_solve(g, stripe, m, unusable, w);
	for (j = 0; j < g->members && !err; j++)
		media[j] ^= (uint8_t)gf_mul(c, w[j]);
	return err;
}

static unsigned int nr_used(const uint8_t *media, unsigned int n)
{
	unsigned int m, used = 0;

	for (m = 0; m < n; m++)
		used += media[m] != 0;
	return used;
}

int r6_new_parity(const struct raid_geometry *g, uint64_t stripe,
		  unsigned int par, uint32_t written, uint32_t unusable,
		  struct r6_weights *out)
{
	struct r6_weights rmw, rcw;
	unsigned int pm = r6_parity_member(g, stripe, par), k = g->members - 2;
	bool rmw_ok = usable(unusable, pm);
	unsigned int i;
	int err = 0;

	memset(&rmw, 0, sizeof(rmw));
	memset(&rcw, 0, sizeof(rcw));
	for (i = 0; i < k && !err; i++) {
		uint8_t c = r6_parity_coef(par, i);

		if (!(written & (1u << i))) {
			err = add_old_data(g, stripe, i, c, unusable,
					   rcw.media);
			continue;
		}
		rcw.host[i] = rmw.host[i] = c;
		if (rmw_ok)
			err = add_old_data(g, stripe, i, c, unusable,
					   rmw.media);
	}
	if (err)
		return err;
	if (rmw_ok)
		rmw.media[pm] ^= 1;
	*out = rmw_ok && nr_used(rmw.media, g->members) <=
			 nr_used(rcw.media, g->members) ? rmw : rcw;
	return 0;
}

int r6_stripes_check(const struct raid_geometry *g, uint64_t first,
		     uint32_t nr)
{
	uint64_t stripes = g->member_blocks / g->unit_blocks;

	return !nr || first > stripes || nr > stripes - first ? -EINVAL : 0;
}

int r6_missing(const struct raid_geometry *g, uint32_t missing,
	       uint32_t *out)
{
	*out = missing & (g->members < 32 ? (1u << g->members) - 1 :
			  UINT32_MAX);
	return __builtin_popcount(*out) > 2 ? -ENODATA : 0;
}

int r6_rebuild_check(const struct raid_geometry *g, uint32_t missing,
		     uint64_t first, uint32_t nr, unsigned int member,
		     uint32_t *out)
{
	int err = r6_stripes_check(g, first, nr);

	if (!err && member != RAID_PARITY_MEMBER && member >= g->members)
		err = -EINVAL;
	if (!err)
		err = r6_missing(g, missing, out);
	if (!err && member == RAID_PARITY_MEMBER && *out)
		err = -ENODATA;
	return err;
}

int r6_rebuild_targets(uint32_t missing, unsigned int member, uint32_t also,
		       unsigned int target[RAID_MAX_MEMBERS])
{
	int err = raid_rebuild_also_check(also, missing, member), n = 0;
	unsigned int p;

	if (err || member == RAID_PARITY_MEMBER)
		return err;
	/* @also lies within @missing, which r6_missing() kept to the
	 * members. */
	for (p = 0; p < RAID_MAX_MEMBERS; p++)
		if (p == member || (also & (1u << p)))
			target[n++] = p;
	return n;
}

/* ---- TPT plans ---- */

/* The members' READ MEDIUM exports of one range in one group: a
 * member's unit is exported once, whichever sums read it. */
struct r6_exports {
	uint64_t lba;
	uint32_t n;
	uint8_t group;
	unsigned int step;
	bool have[RAID_MAX_MEMBERS];
	uint16_t ordinal[RAID_MAX_MEMBERS];
};

static void exports_init(struct r6_exports *ex, uint64_t lba, uint32_t n,
			 uint8_t group, unsigned int step)
{
	memset(ex, 0, sizeof(*ex));
	ex->lba = lba;
	ex->n = n;
	ex->group = group;
	ex->step = step;
}

static int export_unit(struct tpt_plan_builder *b, struct r6_exports *ex,
		       unsigned int m)
{
	struct tpt_plan_cmd *cmd;
	int err;

	if (ex->have[m])
		return 0;
	err = tpt_plan_want_slot(b, m, &ex->ordinal[m]);
	if (err)
		return err;
	cmd = tpt_plan_add_cmd(b, ex->step, TPT_PLAN_READ_MEDIUM, m, ex->lba,
			       ex->n);
	if (!cmd)
		return -ENOMEM;
	cmd->result_slot = ex->ordinal[m];
	cmd->group_offset = ex->group;
	ex->have[m] = true;
	return 0;
}

/*
 * At @target, over the range of @ex: the sum of the members' units
 * weighted by @media - @target's own as the operand (XOR MEDIUM), or none
 * (COPY) - and of the host's pieces at @host_off weighted by @host (by
 * data index, @nr_host of them), as one weighted chain
 * (tpt_plan_add_weighted_chain()) after the exports it reads, in the
 * exports' group.  With @stage the sum is staged for WRITE NEW DATA.
 * Returns the last step used, or an error.
 */
static int plan_weighted_sum(struct tpt_plan_builder *b, struct r6_exports *ex,
			     unsigned int target, const uint8_t *media,
			     const uint64_t *host_off, const uint8_t *host,
			     unsigned int nr_host, bool stage)
{
	struct tpt_chain_source src[2 * RAID_MAX_MEMBERS];
	unsigned int nr = 0, m, i;
	int err;

	for (m = 0; m < b->c->geo->members; m++) {
		if (m == target || !media[m])
			continue;
		err = export_unit(b, ex, m);
		if (err)
			return err;
		src[nr++] = (struct tpt_chain_source){
			.member = (int)m, .ordinal = ex->ordinal[m],
			.gf_exp = tpt_gf_log2(media[m]),
		};
	}
	for (i = 0; i < nr_host; i++)
		if (host[i])
			src[nr++] = (struct tpt_chain_source){
				.member = -1, .host_offset = host_off[i],
				.gf_exp = tpt_gf_log2(host[i]),
			};
	/* A sum of nothing but @target's own unit never comes up: every
	 * write changes a parity, every lost unit has sources. */
	if (!nr)
		return -EINVAL;
	return tpt_plan_add_weighted_chain(b, ex->step + 1, target, ex->lba,
					   ex->n, ex->group,
					   media[target] ? TPT_PARITY_XOR_MEDIUM :
							   TPT_PARITY_COPY,
					   tpt_gf_log2(media[target] ?
						       media[target] : 1),
					   stage, src, nr);
}

/*
 * READ (protocol.md 7.1, 7.8): PREP READs of the pieces on members that
 * are there; a piece of a lost unit is the weighted sum of the stripe's
 * units r6_solve() names, computed at one of them (the calculator,
 * rotating) over the others' READ MEDIUM exports, and SEND RESULT puts
 * it in the host's buffer.  The first lost unit of a stripe takes group
 * 1, the second group 2 (TPT_PLAN_MAX_GROUPS).
 */
static int r6_tpt_read(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
		       uint32_t group, struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t pos, end = lba + blocks, last_stripe = UINT64_MAX;
	struct tpt_read_piece *piece;
	struct tpt_plan_builder b;
	unsigned int nr = 0, lost_here = 0;
	uint32_t missing, n;
	bool lost = false;
	int err;

	r6_missing(g, c->missing, &missing);
	err = tpt_plan_begin(&b, c, lba, blocks, group, out);
	if (err)
		return err;
	piece = calloc(blocks / g->unit_blocks + 2, sizeof(*piece));
	if (!piece)
		return tpt_plan_end(&b, -ENOMEM);
	for (pos = lba; pos < end && !err; pos += n) {
		uint8_t w[RAID_MAX_MEMBERS];
		unsigned int calc[RAID_MAX_MEMBERS], nc = 0, m, at;
		struct r6_exports ex;
		struct tpt_plan_cmd *cmd;
		struct raid_chunk ch;
		int last;

		c->level->map(g, pos, &ch);
		n = g->unit_blocks - (uint32_t)(ch.member_lba % g->unit_blocks);
		if (n > end - pos)
			n = (uint32_t)(end - pos);
		if (usable(missing, ch.member)) {
			piece[nr++] = (struct tpt_read_piece){
				.member = ch.member, .member_lba = ch.member_lba,
				.blocks = n,
				.host_offset = (pos - lba) * c->block_size,
			};
			continue;
		}
		lost_here = ch.stripe == last_stripe ? lost_here + 1 : 0;
		last_stripe = ch.stripe;
		err = r6_solve(g, ch.stripe, ch.member, missing, w);
		if (err)
			break;
		for (m = 0; m < g->members; m++)
			if (w[m])
				calc[nc++] = m;
		at = calc[c->calculator_rr % nc];
		exports_init(&ex, ch.member_lba, n, (uint8_t)(1 + lost_here), 0);
		if (out->nr_groups < 2u + lost_here)
			out->nr_groups = 2 + lost_here;
		last = plan_weighted_sum(&b, &ex, at, w, NULL, NULL, 0, false);
		if (last < 0) {
			err = last;
			break;
		}
		cmd = tpt_plan_add_cmd(&b, (unsigned int)last + 1,
				       TPT_PLAN_SEND_RESULT, at, ch.member_lba,
				       n);
		if (!cmd) {
			err = -ENOMEM;
			break;
		}
		cmd->group_offset = ex.group;
		err = tpt_plan_add_host_ref(&b, (pos - lba) * c->block_size,
					    n * c->block_size);
		lost = true;
	}
	if (!err)
		err = tpt_plan_add_prep_reads(&b, piece, nr);
	free(piece);
	if (!err && lost)
		err = tpt_plan_add_end_steps(&b);
	err = tpt_plan_end(&b, err);
	if (!err && lost)
		c->calculator_rr++;
	return err;
}

/*
 * Read-modify-write of the interval [x, x + len) of a stripe's units with
 * every member there (protocol.md 7.8): each data member written XDWRITEs
 * its new data and exports the delta; P folds the deltas into its old
 * unit as they are, Q weighted 2^i by the writer's data index: one PART
 * BLOCK each with XOR MEDIUM, in the same step.
 */
static int plan_rmw_interval(struct tpt_plan_builder *b, uint64_t stripe,
			     const struct tpt_stripe_piece *piece,
			     unsigned int nr, uint32_t x, uint32_t len)
{
	const struct raid_geometry *g = b->c->geo;
	uint64_t base = stripe * g->unit_blocks;
	struct tpt_chain_source delta[RAID_MAX_MEMBERS];
	int k = tpt_plan_add_xdwrites(b, base, piece, nr, x, len, delta), err;
	unsigned int j, par;

	if (k < 0)
		return k;
	for (par = R6_P; par <= R6_Q; par++) {
		for (j = 0; j < (unsigned int)k; j++)
			delta[j].gf_exp = par == R6_P ? 0 :
				(uint8_t)r6_data_index(g, stripe,
						       (unsigned int)delta[j].member);
		err = tpt_plan_add_chain(b, 1, r6_parity_member(g, stripe, par),
					 base + x, len, 0,
					 TPT_PARITY_XOR_MEDIUM, true, delta,
					 (unsigned int)k);
		if (err < 0)
			return err;
	}
	return 0;
}

/*
 * The interval [x, x + len) of a stripe with members missing (protocol.md
 * 7.8): each data member there that is written stages its new data with
 * PREP WRITE; each parity member there computes its new unit as
 * r6_new_parity() weighs it, from the host's new data and the READ
 * MEDIUM exports of the units it needs, P in group 1 and Q in group 2,
 * since one may read the other's old unit while computing its own.
 */
static int plan_degraded_interval(struct tpt_plan_builder *b, uint64_t stripe,
				  const struct tpt_stripe_piece *piece,
				  unsigned int nr, uint32_t x, uint32_t len,
				  uint32_t written, uint32_t missing)
{
	const struct raid_geometry *g = b->c->geo;
	uint32_t bs = b->c->block_size;
	uint64_t base = stripe * g->unit_blocks, host_off[RAID_MAX_MEMBERS];
	unsigned int j, par, pm;
	struct r6_weights w;
	struct r6_exports ex;
	int err;

	for (j = 0; j < nr; j++) {
		const struct tpt_stripe_piece *pc = &piece[j];
		int d = r6_data_index(g, stripe, pc->member);

		if (pc->first > x || pc->end < x + len)
			continue;
		host_off[d] = pc->host_offset + (uint64_t)(x - pc->first) * bs;
		if (!usable(missing, pc->member))
			continue;
		if (!tpt_plan_add_cmd(b, 0, TPT_PLAN_PREP_WRITE, pc->member,
				      base + x, len) ||
		    tpt_plan_add_host_ref(b, host_off[d], len * bs))
			return -ENOMEM;
	}
	b->p->nr_groups = TPT_PLAN_MAX_GROUPS;
	for (par = R6_P; par <= R6_Q; par++) {
		pm = r6_parity_member(g, stripe, par);
		if (!usable(missing, pm))
			continue;
		err = r6_new_parity(g, stripe, par, written, missing, &w);
		if (err)
			return err;
		exports_init(&ex, base + x, len, (uint8_t)(1 + par), 0);
		err = plan_weighted_sum(b, &ex, pm, w.media, host_off, w.host,
					g->members - 2, true);
		if (err < 0)
			return err;
	}
	return 0;
}

/* A write of array blocks [@first, @end) of @stripe, less than the whole
 * stripe or with members missing, cut into elementary intervals
 * (tpt_stripe_cut()), each planned on its own. */
static int plan_stripe_write(struct tpt_plan_builder *b, uint64_t req_lba,
			     uint64_t stripe, uint64_t first, uint64_t end,
			     uint32_t missing)
{
	const struct raid_geometry *g = b->c->geo;
	uint32_t bound[2 * RAID_MAX_MEMBERS];
	struct tpt_stripe_piece piece[RAID_MAX_MEMBERS];
	unsigned int nr_pieces, nr_bounds, i, j;
	int err = 0;

	tpt_stripe_cut(g, b->c->level, b->c->block_size, req_lba, stripe,
		       first, end, piece, &nr_pieces, bound, &nr_bounds);
	for (i = 0; i + 1 < nr_bounds && !err; i++) {
		uint32_t x = bound[i], len = bound[i + 1] - bound[i];
		uint32_t written = 0;

		for (j = 0; j < nr_pieces; j++)
			if (piece[j].first <= x && piece[j].end >= x + len)
				written |= 1u << r6_data_index(g, stripe,
							       piece[j].member);
		if (!written)
			continue;	/* between two pieces' offsets */
		if (missing)
			err = plan_degraded_interval(b, stripe, piece,
						     nr_pieces, x, len,
						     written, missing);
		else
			err = plan_rmw_interval(b, stripe, piece, nr_pieces,
						x, len);
	}
	return err;
}

/* A member's full stripes as its PREP WRITE covers them. */
struct data_member {
	const struct raid_geometry *g;
	unsigned int m;
};

/* Its PREP WRITE goes over the P and Q units it holds where it holds
 * data again after them, with skips there that those stripes' COMP
 * BLOCKs fill (protocol.md 4.5). */
static enum tpt_plan_run_stripe data_stripe(const void *ctx, uint64_t s)
{
	const struct data_member *dm = ctx;

	return r6_data_index(dm->g, s, dm->m) >= 0 ? TPT_RUN_TAKE :
						     TPT_RUN_SKIP;
}

/*
 * Full stripes @first_stripe.. (@nr of them) with every member there
 * (protocol.md 7.8): each data member stages and exports its units with
 * one PREP WRITE, skipping its P and Q units (data_stripe()), and each
 * stripe's P and Q members take all N-2 exports with one COMP BLOCK, a
 * pass per data unit, Q's weighted 2^i: the flat gathering of RAID-5
 * (raid5.c), twice.
 */
static int plan_full_stripes(struct tpt_plan_builder *b, uint64_t req_lba,
			     uint64_t first_stripe, uint64_t nr)
{
	const struct raid_geometry *g = b->c->geo;
	uint32_t bs = b->c->block_size, unit = g->unit_blocks;
	unsigned int n = g->members, k = n - 2, m, d, par;
	uint64_t max_run = tpt_plan_refs_max(b->c), s, len, i, at, units;
	uint64_t end = first_stripe + nr;
	uint16_t *slot = calloc(n * nr, sizeof(*slot)), first;
	struct data_member dm = { .g = g };
	struct tpt_plan_cmd *cmd;
	int err = 0;

	if (!slot)
		return -ENOMEM;
	if (max_run > TPT_VENDOR_LENGTH_MAX / unit)
		max_run = TPT_VENDOR_LENGTH_MAX / unit;
	for (m = 0; m < n && !err; m++) {
		dm.m = m;
		for (s = first_stripe; s < end && !err; s += len) {
			if (r6_data_index(g, s, m) < 0) {
				len = 1;
				continue;
			}
			len = tpt_plan_run_over(s, end, max_run, data_stripe,
						&dm, &units);
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
			cmd->result_slot = first;
			for (i = 0; i < len && !err; i++) {
				if (r6_data_index(g, s + i, m) < 0) {
					err = tpt_plan_add_skip_ref(b,
								    unit * bs);
					continue;
				}
				slot[m * nr + (s + i - first_stripe)] = first++;
				err = r6_unmap(g, m, (s + i) * unit, &at);
				if (!err)
					err = tpt_plan_add_host_ref(b, (at - req_lba) * bs,
								    unit * bs);
			}
		}
	}
	for (s = first_stripe; s < end && !err; s++) {
		for (par = R6_P; par <= R6_Q && !err; par++) {
			if (!tpt_plan_add_cmd(b, 1, TPT_PLAN_COMP_BLOCK,
					      r6_parity_member(g, s, par),
					      s * unit, unit)) {
				err = -ENOMEM;
				break;
			}
			for (d = 0; d < k && !err; d++) {
				m = r6_data_member(g, s, d);
				err = tpt_plan_add_slot_ref(b, m,
							    slot[m * nr + (s - first_stripe)],
							    unit * bs);
				if (!err && par == R6_Q)
					tpt_plan_weigh_last_ref(b, (uint8_t)d);
			}
		}
	}
	free(slot);
	return err;
}

/*
 * A request is 0-2 partial stripes, at its head and tail, and at most one
 * multiple-full-stripe part between them; with members missing every
 * stripe is planned on its own.  The parts touch different stripes, so
 * they share steps, and WRITE NEW DATA ends the plan.
 */
static int r6_tpt_write(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
			uint32_t group, struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t stripe_blocks, pos, end = lba + blocks, s, seg, nr;
	struct tpt_plan_builder b;
	uint32_t missing;
	int err;

	err = r6_missing(g, c->missing, &missing);
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
		if (pos % stripe_blocks == 0 && nr && !missing) {
			err = plan_full_stripes(&b, lba, s, nr);
			seg = pos + nr * stripe_blocks;
		} else {
			seg = (s + 1) * stripe_blocks;
			if (seg > end)
				seg = end;
			err = plan_stripe_write(&b, lba, s, pos, seg, missing);
		}
	}
	if (!err)
		err = tpt_plan_add_end_steps(&b);
	return tpt_plan_end(&b, err);
}

/*
 * Rebuild (protocol.md 7.5, 7.8): @member's unit of each stripe is the
 * weighted sum r6_solve() gives, without the positions in c->missing,
 * computed at @member in COPY mode over the sources' READ MEDIUM exports
 * and staged for WRITE NEW DATA; one stripe at a time, since a unit's
 * weights change with its stripe.  The positions of c->rebuild_also (the
 * other of two lost boxes) are computed from the same exports.  For
 * RAID_PARITY_MEMBER (a resync) each stripe's P and Q are computed again
 * from its data, both from the same exports.
 */
static int r6_tpt_rebuild(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
			  unsigned int member, uint32_t group,
			  struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t s;
	uint32_t unit = g->unit_blocks, missing;
	uint8_t w[RAID_MAX_MEMBERS];
	struct tpt_plan_builder b;
	struct r6_exports ex;
	unsigned int target[RAID_MAX_MEMBERS], par, d;
	int err, last, nr_targets = 0, i;

	err = r6_rebuild_check(g, c->missing, first, nr, member, &missing);
	if (!err) {
		nr_targets = r6_rebuild_targets(missing, member,
						c->rebuild_also, target);
		err = nr_targets < 0 ? nr_targets : 0;
	}
	if (!err)
		err = tpt_plan_begin_stripes(&b, c, first, nr, group, out);
	if (err)
		return err;
	for (s = first; s < first + nr && !err; s++) {
		exports_init(&ex, s * unit, unit, 0, 0);
		if (member != RAID_PARITY_MEMBER) {
			for (i = 0; i < nr_targets && !err; i++) {
				err = r6_solve(g, s, target[i], missing, w);
				last = err ? err :
				       plan_weighted_sum(&b, &ex, target[i], w,
							 NULL, NULL, 0, true);
				if (last < 0)
					err = last;
			}
			continue;
		}
		for (par = R6_P; par <= R6_Q && !err; par++) {
			memset(w, 0, sizeof(w));
			for (d = 0; d < g->members - 2; d++)
				w[r6_data_member(g, s, d)] = r6_parity_coef(par, d);
			last = plan_weighted_sum(&b, &ex,
						 r6_parity_member(g, s, par), w,
						 NULL, NULL, 0, true);
			if (last < 0)
				err = last;
		}
	}
	if (!err)
		err = tpt_plan_add_end_steps(&b);
	return tpt_plan_end(&b, err);
}

/*
 * The check of stripes [@first, @first + @nr) (raid_level.h): per stripe
 * P and Q each fold the data units into their own with PART TMP in XOR
 * MEDIUM mode, Q's passes weighted as Q weights them, staging nothing,
 * and SEND RESULT brings both syndromes to the controller: two units per
 * stripe, zero where P and Q agree with the data.
 */
static int r6_tpt_check(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
			uint32_t group, struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t s;
	uint32_t unit = g->unit_blocks, missing;
	uint64_t unit_bytes = (uint64_t)unit * c->block_size;
	uint8_t w[RAID_MAX_MEMBERS];
	struct tpt_plan_builder b;
	struct tpt_plan_cmd *cmd;
	struct r6_exports ex;
	unsigned int par, d, pm;
	int err, last;

	err = r6_stripes_check(g, first, nr);
	if (err)
		return err;
	r6_missing(g, c->missing, &missing);
	if (missing)
		return -ENODATA;
	err = tpt_plan_begin_stripes(&b, c, first, nr, group, out);
	if (err)
		return err;
	for (s = first; s < first + nr && !err; s++) {
		exports_init(&ex, s * unit, unit, 0, 0);
		for (par = R6_P; par <= R6_Q && !err; par++) {
			pm = r6_parity_member(g, s, par);
			memset(w, 0, sizeof(w));
			for (d = 0; d < g->members - 2; d++)
				w[r6_data_member(g, s, d)] = r6_parity_coef(par, d);
			w[pm] = 1;
			last = plan_weighted_sum(&b, &ex, pm, w, NULL, NULL, 0,
						 false);
			if (last < 0) {
				err = last;
				break;
			}
			cmd = tpt_plan_add_cmd(&b, (unsigned int)last + 1,
					       TPT_PLAN_SEND_RESULT, pm, s * unit,
					       unit);
			if (!cmd)
				err = -ENOMEM;
			else
				err = tpt_plan_add_host_ref(&b,
					((uint64_t)par * nr + (s - first)) *
					unit_bytes, (uint32_t)unit_bytes);
		}
	}
	if (!err)
		err = tpt_plan_add_end_steps(&b);
	return tpt_plan_end(&b, err);
}

/*
 * A single wrong unit, from the check's syndromes SP = P + sum(D_i) and
 * SQ = Q + sum(2^i D_i) (raid_level.h): data unit z off by E gives SP = E
 * and SQ = 2^z E at every byte, P off gives SQ = 0, Q off SP = 0.  Any
 * other pair is more than one unit wrong (md's raid6check reads it so).
 */
static int r6_check_locate(const struct raid_geometry *g, uint64_t stripe,
			   const uint8_t *const *syn, uint64_t unit_bytes)
{
	const uint8_t *sp = syn[R6_P], *sq = syn[R6_Q];
	bool p_zero = raid_unit_zero(sp, unit_bytes);
	bool q_zero = raid_unit_zero(sq, unit_bytes);
	uint64_t i = 0;
	unsigned int z;
	uint8_t coef;

	if (p_zero || q_zero)
		return p_zero && q_zero ? -1 :
		       (int)r6_parity_member(g, stripe, p_zero ? R6_Q : R6_P);
	while (!sp[i])
		i++;
	if (!sq[i])
		return -1;
	z = (255u + tpt_gf_log2(sq[i]) - tpt_gf_log2(sp[i])) % 255u;
	if (z >= g->members - 2)
		return -1;
	coef = tpt_gf_pow2(z);
	for (i = 0; i < unit_bytes; i++)
		if (gf_mul(coef, sp[i]) != sq[i])
			return -1;
	return (int)r6_data_member(g, stripe, z);
}

const struct raid_level_ops raid6_level = {
	.name = "raid6",
	.level = 6,
	.min_members = 4,
	.max_members = RAID_MAX_MEMBERS,
	.nr_parity = r6_nr_parity,
	.array_blocks = r6_array_blocks,
	.map = r6_map,
	.parity_member = r6_parity_member,
	.data_member = r6_data_member,
	.unmap = r6_unmap,
	.check_locate = r6_check_locate,
	.tpt_read = r6_tpt_read,
	.tpt_write = r6_tpt_write,
	.tpt_rebuild = r6_tpt_rebuild,
	.tpt_check = r6_tpt_check,
	.bl_read = r6_bl_read,
	.bl_write = r6_bl_write,
	.bl_rebuild = r6_bl_rebuild,
	.bl_check = r6_bl_check,
};
