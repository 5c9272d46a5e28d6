/*
 * RAID-1: every member holds the whole array (paper V-A).  With third-party
 * transfer a mirror is the simplest case: a READ is one PREP READ of a
 * contiguous range at one member, a WRITE one PREP WRITE at each, and the
 * targets move the host's data themselves, with no parity to gather.
 *
 * Layout, in the terms of controller/raid_level.h: a stripe is one stripe
 * unit, at the same LBA on every member; its "data" unit is on member 0
 * and the N-1 others are its copies, which count as parity (each is the
 * XOR of the stripe's one data unit).  Which copy is called the data only
 * decides where a resync copies from, as md's first member does; reads
 * take any member in sync.  The stripe unit is the granularity reads are
 * spread at and a result slot's payload, as in every level.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/bl_plan.h"
#include "controller/raid_level.h"
#include "controller/tpt_plan.h"
#include "scsi/tpt_cdb.h"

static unsigned int r1_nr_parity(const struct raid_geometry *g)
{
	return g->members - 1;
}

static uint64_t r1_array_blocks(const struct raid_geometry *g)
{
	return g->member_blocks;
}

static unsigned int r1_data_member(const struct raid_geometry *g,
				   uint64_t stripe, unsigned int data_index)
{
	(void)g;
	(void)stripe;
	(void)data_index;
	return 0;
}

static unsigned int r1_parity_member(const struct raid_geometry *g,
				     uint64_t stripe, unsigned int i)
{
	(void)g;
	(void)stripe;
	return 1 + i;
}

static void r1_map(const struct raid_geometry *g, uint64_t array_lba,
		   struct raid_chunk *out)
{
	out->stripe = array_lba / g->unit_blocks;
	out->member = r1_data_member(g, out->stripe, 0);
	out->member_lba = array_lba;
	out->data_index = 0;
}

static int r1_unmap(const struct raid_geometry *g, unsigned int member,
		    uint64_t member_lba, uint64_t *array_lba)
{
	if (member >= g->members || member_lba >= g->member_blocks)
		return -EINVAL;
	if (member)
		return -ENOENT;
	*array_lba = member_lba;
	return 0;
}

/* The members not in @missing, in order: how many. */
static unsigned int r1_in_sync(const struct raid_geometry *g,
			       uint32_t missing, unsigned int *in_sync)
{
	unsigned int m, n = 0;

	for (m = 0; m < g->members; m++)
		if (m >= 32 || !(missing & (1u << m)))
			in_sync[n++] = m;
	return n;
}

/* The longest run one member command carries: whole units, so that the
 * cuts fall where tpt_plan_add_end_steps() cuts WRITE NEW DATA. */
static uint64_t r1_longest(const struct raid_geometry *g)
{
	return TPT_VENDOR_LENGTH_MAX / g->unit_blocks * g->unit_blocks;
}

/*
 * A READ's share of each member: [@lba, @lba + @blocks) in one contiguous
 * piece per member in sync, cut at unit boundaries as evenly as whole
 * units allow, so that a large read keeps every copy busy and each member
 * reads one range.  A request of less than two units goes whole to one
 * member, chosen by its first unit: random reads spread over the copies,
 * and a sequential stream of small reads stays on one member per unit.
 * Fills @member and @end (array LBAs, exclusive), returns how many pieces.
 */
static unsigned int r1_read_pieces(const struct raid_geometry *g,
				   const unsigned int *in_sync,
				   unsigned int nr_in_sync, uint64_t lba,
				   uint32_t blocks, unsigned int *member,
				   uint64_t *end)
{
	uint64_t unit = g->unit_blocks, first = lba / unit;
	uint64_t units = (lba + blocks - 1) / unit - first + 1, done = 0;
	unsigned int k = nr_in_sync, j;

	if (blocks / unit < k)
		k = blocks / unit ? (unsigned int)(blocks / unit) : 1;
	for (j = 0; j < k; j++) {
		done += units / k + (j < units % k);
		member[j] = in_sync[(first + j) % nr_in_sync];
		end[j] = (first + done) * unit;
		if (end[j] > lba + blocks)
			end[j] = lba + blocks;
	}
	return k;
}

/* ---- TPT mode (controller/tpt_plan.h) ---- */

/* @op over [@lba, @lba + @blocks) at @member in @step, data at @host_offset
 * of the host buffer, in commands of at most r1_longest() blocks. */
static int r1_host_cmds(struct tpt_plan_builder *b, unsigned int step,
			enum tpt_plan_op op, unsigned int member, uint64_t lba,
			uint64_t blocks, uint64_t host_offset)
{
	uint64_t longest = r1_longest(b->c->geo), at, next, end = lba + blocks;
	uint32_t bs = b->c->block_size, unit = b->c->geo->unit_blocks;

	for (at = lba; at < end; at = next) {
		next = end;
		if (next - at > longest)
			next = (at + longest) / unit * unit;
		if (!tpt_plan_add_cmd(b, step, op, member, at,
				      (uint32_t)(next - at)) ||
		    tpt_plan_add_host_ref(b, host_offset + (at - lba) * bs,
					  (uint32_t)((next - at) * bs)))
			return -ENOMEM;
	}
	return 0;
}

/* READ (protocol.md 7.1): a PREP READ per piece of r1_read_pieces(). */
static int r1_tpt_read(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
		       uint32_t group, struct tpt_plan *out)
{
	unsigned int in_sync[RAID_MAX_MEMBERS], member[RAID_MAX_MEMBERS];
	uint64_t end[RAID_MAX_MEMBERS], at = lba;
	unsigned int n, k, j;
	struct tpt_plan_builder b;
	int err;

	n = r1_in_sync(c->geo, c->missing, in_sync);
	if (!n)
		return -ENODATA;
	err = tpt_plan_begin(&b, c, lba, blocks, group, out);
	if (err)
		return err;
	k = r1_read_pieces(c->geo, in_sync, n, lba, blocks, member, end);
	for (j = 0; j < k && !err; at = end[j++])
		err = r1_host_cmds(&b, 0, TPT_PLAN_PREP_READ, member[j], at,
				   end[j] - at, (at - lba) * c->block_size);
	return tpt_plan_end(&b, err);
}

/*
 * WRITE: every member in sync takes the whole range from the host.  An
 * extended host's data is pulled by each member with PREP WRITE, staged
 * and written by WRITE NEW DATA once all hold it (protocol.md 4.5, 4.11);
 * an unmodified host's data is in the controller's memory and goes as a
 * plain WRITE(16) to each, as a full RAID-5 stripe does.  A member that is
 * missing gets nothing: the controller records what it missed.
 */
static int r1_tpt_write(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
			uint32_t group, struct tpt_plan *out)
{
	unsigned int in_sync[RAID_MAX_MEMBERS], n, j;
	struct tpt_plan_builder b;
	int err;

	n = r1_in_sync(c->geo, c->missing, in_sync);
	if (!n)
		return -ENODATA;
	err = tpt_plan_begin(&b, c, lba, blocks, group, out);
	if (err)
		return err;
	for (j = 0; j < n && !err; j++)
		err = r1_host_cmds(&b, 0, c->host_held ? TPT_PLAN_WRITE :
				   TPT_PLAN_PREP_WRITE, in_sync[j], lba,
				   blocks, 0);
	if (!err && !c->host_held)
		err = tpt_plan_add_end_steps(&b);
	return tpt_plan_end(&b, err);
}

/*
 * Rebuild (protocol.md 7.5): one member in sync exports the stripes'
 * units with READ MEDIUM, a slot per unit, and each member being written
 * copies them with PART BLOCK in COPY mode, staged for WRITE NEW DATA.
 * @member is rebuilt from a member in sync, rotating with the batch so
 * that a long rebuild reads every copy.  For RAID_PARITY_MEMBER (a
 * resync) every member in sync takes the blocks of the first one in
 * sync, the data member while it is there; any would do: where copies
 * differ a write was torn by a crash, never acknowledged, and either
 * version is the array's.  The positions of @also (c->rebuild_also) are
 * written from the same source.
 */
static int r1_sources(const struct raid_geometry *g, uint32_t missing,
		      uint32_t also, uint64_t first, uint32_t nr,
		      unsigned int member, unsigned int *src,
		      uint32_t *targets)
{
	unsigned int in_sync[RAID_MAX_MEMBERS], n, j;

	if (member != RAID_PARITY_MEMBER && member >= g->members)
		return -EINVAL;
	if (raid_rebuild_also_check(also, missing, member) ||
	    (g->members < 32 && (also >> g->members)))
		return -EINVAL;
	if (member != RAID_PARITY_MEMBER)
		missing |= 1u << member;
	n = r1_in_sync(g, missing, in_sync);
	if (!n || (member == RAID_PARITY_MEMBER && n < 2))
		return -ENODATA;
	/* By batch (runs of @nr stripes), not by stripe: batches start at
	 * multiples of their length, which may share factors with n. */
	*src = in_sync[member == RAID_PARITY_MEMBER ? 0 : first / nr % n];
	*targets = 0;
	for (j = 0; j < n; j++)
		if (in_sync[j] != *src)
			*targets |= 1u << in_sync[j];
	if (member != RAID_PARITY_MEMBER)
		*targets = 1u << member | also;
	return 0;
}

static int r1_tpt_rebuild(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
			  unsigned int member, uint32_t group,
			  struct tpt_plan *out)
{
	uint32_t targets;
	unsigned int from;
	int err;

	/* r1_sources() divides by it. */
	if (!nr)
		return -EINVAL;
	err = r1_sources(c->geo, c->missing, c->rebuild_also, first, nr,
			 member, &from, &targets);
	return err ? err : tpt_plan_copy(c, first, nr, from, targets, group,
					 out);
}

/*
 * The check of stripes [@first, @first + @nr): the first copy exports its
 * run with READ MEDIUM, every other member XORs it into its own run (PART
 * TMP in XOR MEDIUM mode) and sends the outcome to the controller, zero
 * where the copies agree (raid_check_bytes(): copy i+1's run is
 * syndrome i).  N-1 units per stripe reach the controller: an XOR of
 * two differences could cancel (copies 1 and 2 spoiled alike), so they
 * are not folded together first.
 */
static int r1_tpt_check(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
			uint32_t group, struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint32_t unit = g->unit_blocks, n = nr * unit;
	uint64_t run_bytes = (uint64_t)n * c->block_size;
	struct tpt_chain_source src = { 0 };
	struct tpt_plan_builder b;
	struct tpt_plan_cmd *cmd;
	unsigned int m;
	int err;

	if (!raid_stripes_in_range(g, first, nr) ||
	    (uint64_t)nr * unit > TPT_VENDOR_LENGTH_MAX)
		return -EINVAL;
	if (c->missing & (g->members < 32 ? (1u << g->members) - 1 :
			  UINT32_MAX))
		return -ENODATA;
	err = tpt_plan_begin(&b, c, first * unit, n, group, out);
	if (err)
		return err;
	err = tpt_plan_want_slots(&b, 0, (uint16_t)nr, &src.ordinal);
	cmd = err ? NULL : tpt_plan_add_cmd(&b, 0, TPT_PLAN_READ_MEDIUM, 0,
					    first * unit, n);
	if (!err && !cmd)
		err = -ENOMEM;
	if (cmd)
		cmd->result_slot = src.ordinal;
	for (m = 1; m < g->members && !err; m++) {
		int last = tpt_plan_add_chain(&b, 1, m, first * unit, n, 0,
					      TPT_PARITY_XOR_MEDIUM, false,
					      &src, 1);

		err = last < 0 ? last : 0;
		cmd = err ? NULL : tpt_plan_add_cmd(&b, (unsigned int)last + 1,
						    TPT_PLAN_SEND_RESULT, m,
						    first * unit, n);
		if (!err && !cmd)
			err = -ENOMEM;
		if (!err)
			err = tpt_plan_add_host_ref(&b, (m - 1) * run_bytes,
						    (uint32_t)run_bytes);
	}
	if (!err)
		err = tpt_plan_add_end_steps(&b);
	return tpt_plan_end(&b, err);
}

/* ---- Baseline mode (controller/bl_plan.h) ---- */

static int r1_bl_read(const struct bl_plan_ctx *c, uint64_t lba,
		      uint32_t blocks, struct bl_plan *out)
{
	unsigned int in_sync[RAID_MAX_MEMBERS], member[RAID_MAX_MEMBERS];
	uint64_t end[RAID_MAX_MEMBERS], at = lba;
	struct bl_plan_builder b;
	unsigned int n, k, j;
	int err;

	n = r1_in_sync(c->geo, c->missing, in_sync);
	if (!n)
		return -ENODATA;
	err = bl_plan_begin(&b, c, lba, blocks, out);
	if (err)
		return err;
	k = r1_read_pieces(c->geo, in_sync, n, lba, blocks, member, end);
	for (j = 0; j < k && !err; at = end[j++]) {
		struct bl_cmd rd = {
			.op = BL_READ, .member = member[j], .lba = at,
			.bytes = (uint32_t)((end[j] - at) * c->block_size),
			.dst = bl_host((at - lba) * c->block_size),
		};

		err = bl_plan_add(&b, 0, &rd);
	}
	return bl_plan_end(&b, err);
}

static int r1_bl_write(const struct bl_plan_ctx *c, uint64_t lba,
		       uint32_t blocks, struct bl_plan *out)
{
	unsigned int in_sync[RAID_MAX_MEMBERS], n, j;
	struct bl_plan_builder b;
	int err;

	n = r1_in_sync(c->geo, c->missing, in_sync);
	if (!n)
		return -ENODATA;
	if ((uint64_t)blocks * c->block_size > UINT32_MAX)
		return -EINVAL;
	err = bl_plan_begin(&b, c, lba, blocks, out);
	if (err)
		return err;
	for (j = 0; j < n && !err; j++) {
		struct bl_cmd wr = {
			.op = BL_WRITE, .member = in_sync[j], .lba = lba,
			.bytes = blocks * c->block_size, .src = bl_host(0),
		};

		err = bl_plan_add(&b, 0, &wr);
	}
	return bl_plan_end(&b, err);
}

/* The source's run to each member being rebuilt (r1_sources()). */
static int r1_bl_rebuild(const struct bl_plan_ctx *c, uint64_t first,
			 uint32_t nr, unsigned int member, struct bl_plan *out)
{
	uint32_t targets;
	unsigned int from;
	int err;

	/* r1_sources() divides by it. */
	if (!nr)
		return -EINVAL;
	err = r1_sources(c->geo, c->missing, c->rebuild_also, first, nr,
			 member, &from, &targets);
	return err ? err : bl_plan_copy(c, first, nr, from, targets, out);
}

/* The controller reads the first copy's run into a buffer and every
 * other copy's into its syndrome, and XORs the first into each. */
static int r1_bl_check(const struct bl_plan_ctx *c, uint64_t first,
		       uint32_t nr, struct bl_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint32_t unit = g->unit_blocks;
	uint64_t run = (uint64_t)nr * unit * c->block_size;
	struct bl_cmd rd = { .op = BL_READ }, x = { .op = BL_XOR };
	struct bl_plan_builder b;
	unsigned int m;
	int err, t;

	if (!raid_stripes_in_range(g, first, nr) || run > UINT32_MAX)
		return -EINVAL;
	if (c->missing & (g->members < 32 ? (1u << g->members) - 1 :
			  UINT32_MAX))
		return -ENODATA;
	err = bl_plan_begin(&b, c, first * unit, nr * unit, out);
	if (err)
		return err;
	rd.lba = first * unit;
	rd.bytes = x.bytes = (uint32_t)run;
	t = bl_plan_add_temp(&b, rd.bytes);
	err = t < 0 ? t : 0;
	if (!err) {
		rd.dst = x.src = bl_temp((unsigned int)t, 0);
		err = bl_plan_add(&b, 0, &rd);
	}
	for (m = 1; m < g->members && !err; m++) {
		rd.member = m;
		rd.dst = x.dst = bl_host((m - 1) * run);
		err = bl_plan_add(&b, 0, &rd);
		if (!err)
			err = bl_plan_add(&b, 1, &x);
	}
	return bl_plan_end(&b, err);
}

/*
 * A single wrong copy, by majority, from the syndromes copy i+1 XOR the
 * first copy (raid_level.h): only copy i+1's not zero, or all of them
 * alike (the first copy is the odd one).  A mirror of two cannot tell
 * which of its copies is wrong.
 */
static int r1_check_locate(const struct raid_geometry *g, uint64_t stripe,
			   const uint8_t *const *syn, uint64_t unit_bytes)
{
	unsigned int i, nonzero = 0, which = 0;

	(void)stripe;
	if (g->members < 3)
		return -1;
	for (i = 0; i + 1 < g->members; i++)
		if (!raid_unit_zero(syn[i], unit_bytes)) {
			nonzero++;
			which = i + 1;
		}
	if (nonzero == 1)
		return (int)which;
	if (nonzero + 1 < g->members)
		return -1;
	for (i = 1; i + 1 < g->members; i++)
		if (memcmp(syn[i], syn[0], unit_bytes))
			return -1;
	return 0;
}

const struct raid_level_ops raid1_level = {
	.name = "raid1",
	.level = 1,
	.min_members = 2,
	.max_members = RAID_MAX_MEMBERS,
	.nr_parity = r1_nr_parity,
	.copies = true,
	.array_blocks = r1_array_blocks,
	.map = r1_map,
	.parity_member = r1_parity_member,
	.data_member = r1_data_member,
	.unmap = r1_unmap,
	.check_locate = r1_check_locate,
	.tpt_read = r1_tpt_read,
	.tpt_write = r1_tpt_write,
	.tpt_rebuild = r1_tpt_rebuild,
	.tpt_check = r1_tpt_check,
	.bl_read = r1_bl_read,
	.bl_write = r1_bl_write,
	.bl_rebuild = r1_bl_rebuild,
	.bl_check = r1_bl_check,
};
