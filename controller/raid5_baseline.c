/*
 * RAID-5's Baseline plans (paper III-C, III-E): the controller reads what
 * a request needs from the members, computes parity and lost blocks
 * itself, and writes.  The layout and the TPT plans are in raid5.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "controller/raid5.h"

/* One member's share of a stripe: a piece of one unit. */
struct bl_piece {
	unsigned int member;
	uint64_t member_lba;
	uint32_t bytes;
	uint32_t unit_off;		/* bytes into the unit */
	uint64_t host_offset;		/* bytes into the request's buffer */
};

/* The request's part of @stripe as unit pieces; returns how many, and the
 * byte range within the unit that their parity covers. */
static unsigned int bl_stripe_pieces(const struct bl_plan_ctx *c,
				     uint64_t req_lba, uint64_t lo, uint64_t hi,
				     struct bl_piece *piece, uint32_t *p_off,
				     uint32_t *p_end)
{
	const struct raid_geometry *g = c->geo;
	uint32_t unit = g->unit_blocks, bs = c->block_size;
	unsigned int n = 0;
	uint64_t lba, len;

	*p_off = UINT32_MAX;
	*p_end = 0;
	for (lba = lo; lba < hi; lba += len) {
		struct raid_chunk ch;
		uint32_t in_unit;
		struct bl_piece *p = &piece[n++];

		c->level->map(g, lba, &ch);
		in_unit = (uint32_t)(ch.member_lba % unit);
		len = unit - in_unit;
		if (len > hi - lba)
			len = hi - lba;
		p->member = ch.member;
		p->member_lba = ch.member_lba;
		p->bytes = (uint32_t)len * bs;
		p->unit_off = in_unit * bs;
		p->host_offset = (lba - req_lba) * bs;
		if (p->unit_off < *p_off)
			*p_off = p->unit_off;
		if (p->unit_off + p->bytes > *p_end)
			*p_end = p->unit_off + p->bytes;
	}
	return n;
}

/* @dst (@bytes) = XOR of the temporaries @t[0..n), in @step, in order. */
static int bl_xor_of(struct bl_plan_builder *b, unsigned int step,
		     struct bl_ref dst, const int *t, unsigned int n,
		     uint32_t bytes)
{
	struct bl_cmd cmd = { .op = BL_COPY, .bytes = bytes, .dst = dst,
			      .src = bl_temp((unsigned int)t[0], 0) };
	unsigned int i;
	int err = bl_plan_add(b, step, &cmd);

	cmd.op = BL_XOR;
	for (i = 1; i < n && !err; i++) {
		cmd.src = bl_temp((unsigned int)t[i], 0);
		err = bl_plan_add(b, step, &cmd);
	}
	return err;
}

/*
 * The blocks [@lba, @lba + @n) of member @target rebuilt into @dst from
 * the same blocks of every other member: READs into temporaries in step
 * 0, their XOR in step 1.
 */
static int bl_rebuild_into(struct bl_plan_builder *b, unsigned int target,
			   uint64_t lba, uint32_t n, struct bl_ref dst)
{
	const struct bl_plan_ctx *c = b->c;
	uint32_t bytes = n * c->block_size;
	int t[RAID_MAX_MEMBERS], err = 0;
	unsigned int m, k = 0;

	for (m = 0; m < c->geo->members && !err; m++) {
		struct bl_cmd rd = { .op = BL_READ, .member = m, .lba = lba,
				     .bytes = bytes };

		if (m == target)
			continue;
		t[k] = bl_plan_add_temp(b, bytes);
		if (t[k] < 0)
			return t[k];
		rd.dst = bl_temp((unsigned int)t[k++], 0);
		err = bl_plan_add(b, 0, &rd);
	}
	return err ? err : bl_xor_of(b, 1, dst, t, k, bytes);
}

int r5_bl_read(const struct bl_plan_ctx *c, uint64_t lba,
	       uint32_t blocks, struct bl_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t pos, end = lba + blocks, n;
	struct bl_plan_builder b;
	int err, F;

	err = r5_read_missing(c->missing, c->level, g, lba, blocks, &F);
	if (!err)
		err = bl_plan_begin(&b, c, lba, blocks, out);
	if (err)
		return err;
	/* One READ per piece of a unit, straight into the host's buffer; a
	 * piece of the missing member is the XOR of the others' blocks. */
	for (pos = lba; pos < end && !err; pos += n) {
		struct raid_chunk ch;
		struct bl_cmd cmd = { .op = BL_READ };

		c->level->map(g, pos, &ch);
		n = g->unit_blocks - ch.member_lba % g->unit_blocks;
		if (n > end - pos)
			n = end - pos;
		if ((int)ch.member == F) {
			err = bl_rebuild_into(&b, ch.member, ch.member_lba,
					      (uint32_t)n,
					      bl_host((pos - lba) *
						      c->block_size));
			continue;
		}
		cmd.member = ch.member;
		cmd.lba = ch.member_lba;
		cmd.bytes = (uint32_t)n * c->block_size;
		cmd.dst = bl_host((pos - lba) * c->block_size);
		err = bl_plan_add(&b, 0, &cmd);
	}
	return bl_plan_end(&b, err);
}

static const struct bl_piece *bl_piece_of(const struct bl_piece *piece,
					   unsigned int nr, int member)
{
	unsigned int i;

	for (i = 0; i < nr; i++)
		if ((int)piece[i].member == member)
			return &piece[i];
	return NULL;
}

/*
 * A stripe write with member @F missing.  Without the parity member the
 * new data is just written.  Without a data member the write touches,
 * its old blocks are first rebuilt over the parity's range - the XOR of
 * every other member's - and then the read-modify-write goes on as if it
 * were there: new parity = old parity ^ old ^ new for every piece, @F's
 * included; everything is written but @F's piece.
 */
static int bl_write_degraded(struct bl_plan_builder *b, uint64_t stripe,
			     const struct bl_piece *piece, unsigned int nr,
			     uint32_t p_off, uint32_t p_len, int F)
{
	const struct bl_plan_ctx *c = b->c;
	const struct raid_geometry *g = c->geo;
	unsigned int parity = c->level->parity_member(g, stripe, 0), m, i, k = 0;
	uint64_t lba = stripe * g->unit_blocks + p_off / c->block_size;
	int t[RAID_MAX_MEMBERS], by_member[RAID_MAX_MEMBERS], tf, err = 0;

	if (F == (int)parity) {
		for (i = 0; i < nr && !err; i++) {
			struct bl_cmd wr = { .op = BL_WRITE,
					     .member = piece[i].member,
					     .lba = piece[i].member_lba,
					     .bytes = piece[i].bytes,
					     .src = bl_host(piece[i].host_offset) };

			err = bl_plan_add(b, 0, &wr);
		}
		return err;
	}
	for (m = 0; m < g->members && !err; m++) {
		struct bl_cmd rd = { .op = BL_READ, .member = m, .lba = lba,
				     .bytes = p_len };

		if ((int)m == F)
			continue;
		t[k] = bl_plan_add_temp(b, p_len);
		if (t[k] < 0)
			return t[k];
		by_member[m] = t[k];
		rd.dst = bl_temp((unsigned int)t[k++], 0);
		err = bl_plan_add(b, 0, &rd);
	}
	tf = bl_plan_add_temp(b, p_len);
	if (tf < 0)
		return tf;
	by_member[F] = tf;
	if (!err)
		err = bl_xor_of(b, 1, bl_temp((unsigned int)tf, 0), t, k, p_len);
	for (i = 0; i < nr && !err; i++) {
		uint32_t at = piece[i].unit_off - p_off;
		struct bl_cmd x = { .op = BL_XOR, .bytes = piece[i].bytes,
				    .dst = bl_temp((unsigned int)by_member[parity], at),
				    .src = bl_temp((unsigned int)by_member[piece[i].member], at) };

		err = bl_plan_add(b, 1, &x);
		x.src = bl_host(piece[i].host_offset);
		if (!err)
			err = bl_plan_add(b, 1, &x);
	}
	for (i = 0; i < nr && !err; i++) {
		struct bl_cmd wr = { .op = BL_WRITE, .member = piece[i].member,
				     .lba = piece[i].member_lba,
				     .bytes = piece[i].bytes,
				     .src = bl_host(piece[i].host_offset) };

		if ((int)piece[i].member != F)
			err = bl_plan_add(b, 1, &wr);
	}
	if (!err) {
		struct bl_cmd wp = { .op = BL_WRITE, .member = parity,
				     .lba = lba, .bytes = p_len,
				     .src = bl_temp((unsigned int)by_member[parity], 0) };

		err = bl_plan_add(b, 1, &wp);
	}
	return err;
}

/*
 * One stripe of a write.  Full: parity from the host's data, then WRITE
 * of every unit (but a missing member's).  Partial: READ the old data and old parity, fold
 * old ^ new into the parity, then WRITE the new data and parity.  The
 * parity covers the union of the pieces' places in the unit.
 */
static int bl_write_stripe(struct bl_plan_builder *b, uint64_t req_lba,
			   uint64_t stripe, uint64_t lo, uint64_t hi, int F)
{
	const struct bl_plan_ctx *c = b->c;
	const struct raid_geometry *g = c->geo;
	uint64_t first = stripe * raid_stripe_data_blocks(c->level, g);
	bool full = lo == first && hi == first + raid_stripe_data_blocks(c->level, g);
	struct bl_piece piece[RAID_MAX_MEMBERS];
	uint32_t p_off, p_end, p_len;
	unsigned int nr, i, parity = c->level->parity_member(g, stripe, 0);
	int ptemp, old[RAID_MAX_MEMBERS], err = 0;
	unsigned int local = full ? 0 : 1;	/* the step that computes */

	nr = bl_stripe_pieces(c, req_lba, lo, hi, piece, &p_off, &p_end);
	p_len = p_end - p_off;
	/* A full stripe needs no old unit: its lost one is not written. */
	if (F == (int)parity ||
	    (F >= 0 && !full && bl_piece_of(piece, nr, F)))
		return bl_write_degraded(b, stripe, piece, nr, p_off, p_len, F);
	ptemp = bl_plan_add_temp(b, p_len);
	if (ptemp < 0)
		return ptemp;
	if (full) {
		struct bl_cmd cp = { .op = BL_COPY, .bytes = p_len,
				     .dst = bl_temp(ptemp, 0),
				     .src = bl_host(piece[0].host_offset) };

		err = bl_plan_add(b, 0, &cp);
		for (i = 1; i < nr && !err; i++) {
			struct bl_cmd x = { .op = BL_XOR, .bytes = p_len,
					    .dst = bl_temp(ptemp, 0),
					    .src = bl_host(piece[i].host_offset) };

			err = bl_plan_add(b, 0, &x);
		}
	} else {
		struct bl_cmd rp = { .op = BL_READ, .member = parity,
				     .lba = stripe * g->unit_blocks +
					    p_off / c->block_size,
				     .bytes = p_len, .dst = bl_temp(ptemp, 0) };

		err = bl_plan_add(b, 0, &rp);
		for (i = 0; i < nr && !err; i++) {
			struct bl_cmd rd = { .op = BL_READ };

			old[i] = bl_plan_add_temp(b, piece[i].bytes);
			if (old[i] < 0)
				return old[i];
			rd.member = piece[i].member;
			rd.lba = piece[i].member_lba;
			rd.bytes = piece[i].bytes;
			rd.dst = bl_temp(old[i], 0);
			err = bl_plan_add(b, 0, &rd);
		}
		/* New parity = old parity ^ old data ^ new data. */
		for (i = 0; i < nr && !err; i++) {
			struct bl_ref at = bl_temp(ptemp, piece[i].unit_off - p_off);
			struct bl_cmd x1 = { .op = BL_XOR, .bytes = piece[i].bytes,
					     .dst = at, .src = bl_temp(old[i], 0) };
			struct bl_cmd x2 = { .op = BL_XOR, .bytes = piece[i].bytes,
					     .dst = at,
					     .src = bl_host(piece[i].host_offset) };

			err = bl_plan_add(b, 1, &x1);
			if (!err)
				err = bl_plan_add(b, 1, &x2);
		}
	}
	for (i = 0; i < nr && !err; i++) {
		struct bl_cmd wr = { .op = BL_WRITE, .member = piece[i].member,
				     .lba = piece[i].member_lba,
				     .bytes = piece[i].bytes,
				     .src = bl_host(piece[i].host_offset) };

		if ((int)piece[i].member != F)
			err = bl_plan_add(b, local, &wr);
	}
	if (!err) {
		struct bl_cmd wp = { .op = BL_WRITE, .member = parity,
				     .lba = stripe * g->unit_blocks +
					    p_off / c->block_size,
				     .bytes = p_len, .src = bl_temp(ptemp, 0) };

		err = bl_plan_add(b, local, &wp);
	}
	return err;
}

int r5_bl_write(const struct bl_plan_ctx *c, uint64_t lba,
		uint32_t blocks, struct bl_plan *out)
{
	uint64_t per_stripe, pos, end = lba + blocks, seg;
	struct bl_plan_builder b;
	int err, F;

	err = r5_missing(c->missing, c->geo, &F);
	if (!err)
		err = bl_plan_begin(&b, c, lba, blocks, out);
	if (err)
		return err;
	per_stripe = raid_stripe_data_blocks(c->level, c->geo);
	for (pos = lba; pos < end && !err; pos = seg) {
		seg = (pos / per_stripe + 1) * per_stripe;
		if (seg > end)
			seg = end;
		err = bl_write_stripe(&b, lba, pos / per_stripe, pos, seg, F);
	}
	return bl_plan_end(&b, err);
}

/*
 * Baseline rebuild: each run of stripes whose rebuilt unit lies on one
 * member is read from every other member, XORed here and written.
 */
int r5_bl_rebuild(const struct bl_plan_ctx *c, uint64_t first,
		  uint32_t nr, unsigned int member, struct bl_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t per_stripe = raid_stripe_data_blocks(c->level, g), s, run;
	uint32_t unit = g->unit_blocks;
	struct bl_plan_builder b;
	unsigned int target;
	int err, t;

	/* The controller holds each member's run in one buffer. */
	if ((uint64_t)nr * unit * c->block_size > UINT32_MAX)
		return -EINVAL;
	err = r5_rebuild_check(g, per_stripe, c->missing, first, nr, member);
	if (err)
		return err;
	err = bl_plan_begin(&b, c, first * per_stripe,
			    (uint32_t)((uint64_t)nr * per_stripe), out);
	if (err)
		return err;
	for (s = first; s < first + nr && !err; s += run) {
		struct bl_cmd wr = { .op = BL_WRITE };

		target = member == RAID_PARITY_MEMBER ?
			 c->level->parity_member(g, s, 0) : member;
		run = member == RAID_PARITY_MEMBER ? 1 : first + nr - s;
		wr.member = target;
		wr.lba = s * unit;
		wr.bytes = (uint32_t)(run * unit * c->block_size);
		t = bl_plan_add_temp(&b, wr.bytes);
		if (t < 0) {
			err = t;
			break;
		}
		wr.src = bl_temp((unsigned int)t, 0);
		err = bl_rebuild_into(&b, target, s * unit,
				      (uint32_t)(run * unit), wr.src);
		if (!err)
			err = bl_plan_add(&b, 1, &wr);
	}
	return bl_plan_end(&b, err);
}

/*
 * Baseline check: the controller reads every member's run of the stripes,
 * the first into the outcome, the others into a buffer each, and XORs
 * them all into the outcome: a stripe's sum of all N units, zero where
 * its parity agrees with its data (raid_check_bytes()).
 */
int r5_bl_check(const struct bl_plan_ctx *c, uint64_t first, uint32_t nr,
		struct bl_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t per_stripe = raid_stripe_data_blocks(c->level, g);
	uint64_t run = (uint64_t)nr * g->unit_blocks * c->block_size;
	struct bl_plan_builder b;
	unsigned int m;
	int err, t;

	if (run > UINT32_MAX)
		return -EINVAL;
	err = r5_rebuild_check(g, per_stripe, c->missing, first, nr,
			       RAID_PARITY_MEMBER);
	if (!err)
		err = bl_plan_begin(&b, c, first * per_stripe,
				    (uint32_t)((uint64_t)nr * per_stripe), out);
	if (err)
		return err;
	for (m = 0; m < g->members && !err; m++) {
		struct bl_cmd rd = {
			.op = BL_READ, .member = m,
			.lba = first * g->unit_blocks, .bytes = (uint32_t)run,
			.dst = bl_host(0),
		};
		struct bl_cmd x = {
			.op = BL_XOR, .bytes = (uint32_t)run, .dst = bl_host(0),
		};

		if (m) {
			t = bl_plan_add_temp(&b, (uint32_t)run);
			if (t < 0) {
				err = t;
				break;
			}
			rd.dst = x.src = bl_temp((unsigned int)t, 0);
			err = bl_plan_add(&b, 1, &x);
		}
		if (!err)
			err = bl_plan_add(&b, 0, &rd);
	}
	return bl_plan_end(&b, err);
}
