/*
 * RAID-6's Baseline plans (paper III-C, III-E): the controller reads the
 * units a request needs, computes P, Q and lost units itself with
 * weighted XORs (BL_COPY and BL_XOR with a weight, ISA-L), and writes.
 * Every computed unit is one of raid6.h's weighted sums.  The layout and
 * the TPT plans are in raid6.c.
 */
#include <errno.h>
#include <string.h>

#include "controller/raid6.h"
#include "controller/tpt_plan.h"
#include "scsi/tpt_parity.h"

/* The members' READs of one range, in step 0, each into a temporary of
 * its own, shared by the sums over that range. */
struct bl_reads {
	uint64_t lba;
	uint32_t bytes;
	int temp[RAID_MAX_MEMBERS];	/* -1: not read */
};

static void reads_init(struct bl_reads *rd, uint64_t lba, uint32_t bytes)
{
	unsigned int m;

	rd->lba = lba;
	rd->bytes = bytes;
	for (m = 0; m < RAID_MAX_MEMBERS; m++)
		rd->temp[m] = -1;
}

static int read_unit(struct bl_plan_builder *b, struct bl_reads *rd,
		     unsigned int m)
{
	struct bl_cmd cmd = { .op = BL_READ, .member = m, .lba = rd->lba,
			      .bytes = rd->bytes };
	int t;

	if (rd->temp[m] >= 0)
		return 0;
	t = bl_plan_add_temp(b, rd->bytes);
	if (t < 0)
		return t;
	rd->temp[m] = t;
	cmd.dst = bl_temp((unsigned int)t, 0);
	return bl_plan_add(b, 0, &cmd);
}

/* One term of a weighted sum into @dst, in step 1: the first a COPY. */
static int add_term(struct bl_plan_builder *b, int dst, bool *first,
		    struct bl_ref src, uint32_t bytes, uint8_t weight)
{
	struct bl_cmd cmd = { .op = *first ? BL_COPY : BL_XOR, .bytes = bytes,
			      .dst = bl_temp((unsigned int)dst, 0), .src = src,
			      .gf_exp = tpt_gf_log2(weight) };

	*first = false;
	return bl_plan_add(b, 1, &cmd);
}

/*
 * A new temporary holding, after step 1's local operations, the sum of
 * the members' units over @rd's range weighted by @media and of the
 * host's pieces at @host_off weighted by @host (by data index, @nr_host
 * of them): its number, or an error.
 */
static int weighted_sum(struct bl_plan_builder *b, struct bl_reads *rd,
			const uint8_t *media, const uint64_t *host_off,
			const uint8_t *host, unsigned int nr_host)
{
	int dst = bl_plan_add_temp(b, rd->bytes), err = 0;
	bool first = true;
	unsigned int m, i;

	if (dst < 0)
		return dst;
	for (m = 0; m < b->c->geo->members && !err; m++) {
		if (!media[m])
			continue;
		err = read_unit(b, rd, m);
		if (!err)
			err = add_term(b, dst, &first,
				       bl_temp((unsigned int)rd->temp[m], 0),
				       rd->bytes, media[m]);
	}
	for (i = 0; i < nr_host && !err; i++)
		if (host[i])
			err = add_term(b, dst, &first, bl_host(host_off[i]),
				       rd->bytes, host[i]);
	if (!err && first)
		err = -EINVAL;		/* a sum of nothing never comes up */
	return err ? err : dst;
}

static bool usable(uint32_t unusable, unsigned int m)
{
	return m >= 32 || !(unusable & (1u << m));
}

/* One READ per piece of a unit, straight into the host's buffer; a piece
 * of a lost unit is its weighted sum (r6_solve()), copied there. */
int r6_bl_read(const struct bl_plan_ctx *c, uint64_t lba, uint32_t blocks,
	       struct bl_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t pos, end = lba + blocks, n;
	struct bl_plan_builder b;
	uint32_t missing;
	int err;

	r6_missing(g, c->missing, &missing);
	err = bl_plan_begin(&b, c, lba, blocks, out);
	if (err)
		return err;
	for (pos = lba; pos < end && !err; pos += n) {
		struct bl_cmd cmd = { .op = BL_READ };
		uint8_t w[RAID_MAX_MEMBERS];
		struct bl_reads rd;
		struct raid_chunk ch;
		int t;

		c->level->map(g, pos, &ch);
		n = g->unit_blocks - ch.member_lba % g->unit_blocks;
		if (n > end - pos)
			n = end - pos;
		cmd.bytes = (uint32_t)n * c->block_size;
		cmd.dst = bl_host((pos - lba) * c->block_size);
		if (usable(missing, ch.member)) {
			cmd.member = ch.member;
			cmd.lba = ch.member_lba;
			err = bl_plan_add(&b, 0, &cmd);
			continue;
		}
		err = r6_solve(g, ch.stripe, ch.member, missing, w);
		if (err)
			break;
		reads_init(&rd, ch.member_lba, cmd.bytes);
		t = weighted_sum(&b, &rd, w, NULL, NULL, 0);
		if (t < 0) {
			err = t;
			break;
		}
		cmd.op = BL_COPY;
		cmd.src = bl_temp((unsigned int)t, 0);
		err = bl_plan_add(&b, 1, &cmd);
	}
	return bl_plan_end(&b, err);
}

/*
 * One stripe of a write, cut into elementary intervals (tpt_stripe_cut());
 * per interval each parity member there gets its new unit as
 * r6_new_parity() weighs it (read-modify-write or reconstruct-write,
 * whichever reads less; a full stripe is computed from the host's data
 * alone), and the data members there get the host's new data.
 */
static int bl_write_stripe(struct bl_plan_builder *b, uint64_t req_lba,
			   uint64_t stripe, uint64_t lo, uint64_t hi,
			   uint32_t missing)
{
	const struct bl_plan_ctx *c = b->c;
	const struct raid_geometry *g = c->geo;
	uint32_t bs = c->block_size, bound[2 * RAID_MAX_MEMBERS];
	uint64_t base = stripe * g->unit_blocks, host_off[RAID_MAX_MEMBERS];
	struct tpt_stripe_piece piece[RAID_MAX_MEMBERS];
	unsigned int nr, nr_bounds, i, j, par, pm;
	int err = 0;

	tpt_stripe_cut(g, c->level, bs, req_lba, stripe, lo, hi, piece, &nr,
		       bound, &nr_bounds);
	for (i = 0; i + 1 < nr_bounds && !err; i++) {
		uint32_t x = bound[i], len = bound[i + 1] - bound[i];
		uint32_t written = 0;
		struct r6_weights w;
		struct bl_reads rd;

		for (j = 0; j < nr; j++) {
			int d = r6_data_index(g, stripe, piece[j].member);

			if (piece[j].first > x || piece[j].end < x + len)
				continue;
			written |= 1u << d;
			host_off[d] = piece[j].host_offset +
				      (uint64_t)(x - piece[j].first) * bs;
		}
		if (!written)
			continue;
		reads_init(&rd, base + x, len * bs);
		for (par = R6_P; par <= R6_Q && !err; par++) {
			struct bl_cmd wr = { .op = BL_WRITE, .lba = base + x,
					     .bytes = len * bs };
			int t;

			pm = c->level->parity_member(g, stripe, par);
			if (!usable(missing, pm))
				continue;
			err = r6_new_parity(g, stripe, par, written, missing,
					    &w);
			if (err)
				break;
			t = weighted_sum(b, &rd, w.media, host_off, w.host,
					 g->members - 2);
			if (t < 0)
				return t;
			wr.member = pm;
			wr.src = bl_temp((unsigned int)t, 0);
			err = bl_plan_add(b, 1, &wr);
		}
	}
	for (j = 0; j < nr && !err; j++) {
		struct bl_cmd wr = { .op = BL_WRITE, .member = piece[j].member,
				     .lba = base + piece[j].first,
				     .bytes = (piece[j].end - piece[j].first) * bs,
				     .src = bl_host(piece[j].host_offset) };

		if (usable(missing, piece[j].member))
			err = bl_plan_add(b, 1, &wr);
	}
	return err;
}

int r6_bl_write(const struct bl_plan_ctx *c, uint64_t lba, uint32_t blocks,
		struct bl_plan *out)
{
	uint64_t per_stripe, pos, end = lba + blocks, seg;
	struct bl_plan_builder b;
	uint32_t missing;
	int err;

	err = r6_missing(c->geo, c->missing, &missing);
	if (!err)
		err = bl_plan_begin(&b, c, lba, blocks, out);
	if (err)
		return err;
	per_stripe = raid_stripe_data_blocks(c->level, c->geo);
	for (pos = lba; pos < end && !err; pos = seg) {
		seg = (pos / per_stripe + 1) * per_stripe;
		if (seg > end)
			seg = end;
		err = bl_write_stripe(&b, lba, pos / per_stripe, pos, seg,
				      missing);
	}
	return bl_plan_end(&b, err);
}

/*
 * Baseline rebuild: per stripe, @member's unit (and those of
 * c->rebuild_also) as its weighted sum of the others (r6_solve()), from
 * one read of each, or for RAID_PARITY_MEMBER both P and Q computed from
 * the data, then written.
 */
int r6_bl_rebuild(const struct bl_plan_ctx *c, uint64_t first, uint32_t nr,
		  unsigned int member, struct bl_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t per_stripe = raid_stripe_data_blocks(c->level, g), s;
	uint32_t unit = g->unit_blocks, missing;
	uint8_t w[RAID_MAX_MEMBERS];
	unsigned int target[RAID_MAX_MEMBERS], d;
	struct bl_plan_builder b;
	int err, nr_targets = 0, i;

	err = r6_rebuild_check(g, c->missing, first, nr, member, &missing);
	if (!err) {
		nr_targets = r6_rebuild_targets(missing, member,
						c->rebuild_also, target);
		err = nr_targets < 0 ? nr_targets : 0;
	}
	if (!err)
		err = bl_plan_begin(&b, c, first * per_stripe,
				    (uint32_t)((uint64_t)nr * per_stripe), out);
	if (err)
		return err;
	/* The positions written: r6_rebuild_targets()'s, or P and Q (per
	 * stripe, below). */
	if (member == RAID_PARITY_MEMBER)
		nr_targets = 2;
	for (s = first; s < first + nr && !err; s++) {
		struct bl_cmd wr = { .op = BL_WRITE, .lba = s * unit,
				     .bytes = unit * c->block_size };
		struct bl_reads rd;
		int t;

		reads_init(&rd, s * unit, wr.bytes);
		for (i = 0; i < nr_targets && !err; i++) {
			if (member != RAID_PARITY_MEMBER) {
				wr.member = target[i];
				err = r6_solve(g, s, target[i], missing, w);
			} else {
				wr.member = c->level->parity_member(g, s, i);
				memset(w, 0, sizeof(w));
				for (d = 0; d < g->members - 2; d++)
					w[c->level->data_member(g, s, d)] =
						r6_parity_coef(i, d);
			}
			t = err ? err : weighted_sum(&b, &rd, w, NULL, NULL, 0);
			if (t < 0) {
				err = t;
				break;
			}
			wr.src = bl_temp((unsigned int)t, 0);
			err = bl_plan_add(&b, 1, &wr);
		}
	}
	return bl_plan_end(&b, err);
}

/*
 * The check (raid_level.h): per stripe each parity unit is read, the
 * data units once, and each syndrome is the parity XOR its weighted sum
 * of the data, computed into its place in the outcome buffer.
 */
int r6_bl_check(const struct bl_plan_ctx *c, uint64_t first, uint32_t nr,
		struct bl_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t per_stripe = raid_stripe_data_blocks(c->level, g), s;
	uint32_t unit = g->unit_blocks, missing;
	uint32_t unit_bytes = unit * c->block_size;
	struct bl_plan_builder b;
	unsigned int par, d, m;
	int err;

	if (r6_stripes_check(g, first, nr) ||
	    (uint64_t)nr * unit_bytes * 2 > UINT32_MAX)
		return -EINVAL;
	r6_missing(g, c->missing, &missing);
	if (missing)
		return -ENODATA;
	err = bl_plan_begin(&b, c, first * per_stripe,
			    (uint32_t)((uint64_t)nr * per_stripe), out);
	if (err)
		return err;
	for (s = first; s < first + nr && !err; s++) {
		struct bl_reads rd;

		reads_init(&rd, s * unit, unit_bytes);
		for (par = R6_P; par <= R6_Q && !err; par++) {
			struct bl_ref at = bl_host(((uint64_t)par * nr +
						    (s - first)) * unit_bytes);
			struct bl_cmd x = { .op = BL_COPY, .bytes = unit_bytes,
					    .dst = at };

			m = c->level->parity_member(g, s, par);
			err = read_unit(&b, &rd, m);
			x.src = bl_temp((unsigned int)rd.temp[m], 0);
			if (!err)
				err = bl_plan_add(&b, 1, &x);
			x.op = BL_XOR;
			for (d = 0; d < g->members - 2 && !err; d++) {
				m = c->level->data_member(g, s, d);
				err = read_unit(&b, &rd, m);
				x.src = bl_temp((unsigned int)rd.temp[m], 0);
				x.gf_exp = tpt_gf_log2(r6_parity_coef(par, d));
				if (!err)
					err = bl_plan_add(&b, 1, &x);
			}
		}
	}
	return bl_plan_end(&b, err);
}
