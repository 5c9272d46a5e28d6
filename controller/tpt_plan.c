/*
 * TPT plans and their builder (controller/tpt_plan.h).
 *
 * Plans are built in two passes.  The first lays the commands out, each
 * tagged with its step, and names the result slots by a per-member
 * ordinal.  The second sorts the commands into steps, marks FINAL and only
 * then takes real slots and patches them in, so that a request that cannot
 * be planned takes nothing: the one allocation that can fail for lack of
 * slots comes last and is undone as a whole.
 */
#include "controller/tpt_plan.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "controller/plan_steps.h"
#include "scsi/tpt_cdb.h"

static const struct {
	uint8_t opcode;
	const char *name;
} plan_ops[] = {
	[TPT_PLAN_PREP_READ] = { TPT_OP_PREP_READ, "PREP READ" },
	[TPT_PLAN_PREP_WRITE] = { TPT_OP_PREP_WRITE, "PREP WRITE" },
	[TPT_PLAN_READ_NEW_BLOCK] = { TPT_OP_READ_NEW_BLOCK, "READ NEW BLOCK" },
	/* XDWRITE(10) can only name groups 0-31 (protocol.md 2.3). */
	[TPT_PLAN_XDWRITE] = { TPT_OP_XDWRITE_16, "XDWRITE(16)" },
	[TPT_PLAN_PRE_FETCH] = { TPT_OP_PRE_FETCH_16, "PRE-FETCH(16)" },
	[TPT_PLAN_PART_TMP] = { TPT_OP_READ_PARITY_PART_TMP,
				"READ PARITY PART TMP" },
	[TPT_PLAN_PART_BLOCK] = { TPT_OP_READ_PARITY_PART_BLOCK,
				  "READ PARITY PART BLOCK" },
	[TPT_PLAN_COMP_TMP] = { TPT_OP_READ_PARITY_COMP_TMP,
				"READ PARITY COMP TMP" },
	[TPT_PLAN_COMP_BLOCK] = { TPT_OP_READ_PARITY_COMP_BLOCK,
				  "READ PARITY COMP BLOCK" },
	[TPT_PLAN_WRITE_NEW_DATA] = { TPT_OP_WRITE_NEW_DATA, "WRITE NEW DATA" },
	[TPT_PLAN_RELEASE] = { TPT_OP_RELEASE, "TPT RELEASE" },
	[TPT_PLAN_READ_MEDIUM] = { TPT_OP_READ_MEDIUM, "READ MEDIUM" },
	[TPT_PLAN_SEND_RESULT] = { TPT_OP_SEND_RESULT, "SEND RESULT" },
	[TPT_PLAN_WRITE] = { TPT_OP_WRITE_16, "WRITE(16)" },
};

uint8_t tpt_plan_opcode(enum tpt_plan_op op)
{
	return plan_ops[op].opcode;
}

const char *tpt_plan_op_name(enum tpt_plan_op op)
{
	return plan_ops[op].name;
}

/* Commands that leave staged data for WRITE NEW DATA (protocol.md 8.2). */
static bool op_stages(enum tpt_plan_op op)
{
	return op == TPT_PLAN_PREP_WRITE || op == TPT_PLAN_READ_NEW_BLOCK ||
	       op == TPT_PLAN_XDWRITE || op == TPT_PLAN_PART_BLOCK ||
	       op == TPT_PLAN_COMP_BLOCK;
}

/* ---- building ---- */

unsigned int tpt_plan_refs_max(const struct tpt_plan_ctx *c)
{
	return c->host_pieces > 1 ? TPT_XFER_DESC_MAX - (c->host_pieces - 1) :
				    TPT_XFER_DESC_MAX;
}

struct tpt_plan_cmd *tpt_plan_add_cmd(struct tpt_plan_builder *b, unsigned int step,
				    enum tpt_plan_op op, unsigned int member,
				    uint64_t lba, uint32_t blocks)
{
	struct tpt_plan *p = b->p;
	struct tpt_plan_cmd *cmd;

	/* Two arrays of one length: grow the second first, so that a
	 * failure leaves them the same size. */
	unsigned int cap = b->cap_cmds;

	if (plan_grow((void **)&b->cmd_step, p->nr_cmds, &cap,
		      sizeof(*b->cmd_step)) ||
	    plan_grow((void **)&p->cmds, p->nr_cmds, &b->cap_cmds,
		      sizeof(*p->cmds)))
		return NULL;
	if (step > b->last_step)
		b->last_step = step;
	b->cmd_step[p->nr_cmds] = step;
	cmd = &p->cmds[p->nr_cmds++];
	memset(cmd, 0, sizeof(*cmd));
	cmd->op = op;
	cmd->member = member;
	cmd->lba = lba;
	cmd->blocks = blocks;
	cmd->result_slot = TPT_SLOT_NONE;
	cmd->first_ref = p->nr_refs;
	return cmd;
}

static int add_ref(struct tpt_plan_builder *b, enum tpt_plan_ref_kind kind,
		   uint64_t host_offset, unsigned int member, uint16_t slot,
		   uint32_t length)
{
	struct tpt_plan *p = b->p;
	struct tpt_plan_ref *ref;

	if (plan_grow((void **)&p->refs, p->nr_refs, &b->cap_refs,
		      sizeof(*p->refs)))
		return -ENOMEM;
	ref = &p->refs[p->nr_refs++];
	memset(ref, 0, sizeof(*ref));
	ref->kind = kind;
	ref->host_offset = host_offset;
	ref->member = member;
	ref->slot = slot;
	ref->length = length;
	p->cmds[p->nr_cmds - 1].nr_refs++;
	return 0;
}

int tpt_plan_add_host_ref(struct tpt_plan_builder *b, uint64_t host_offset,
			  uint32_t length)
{
	return add_ref(b, TPT_REF_HOST, host_offset, 0, 0, length);
}

int tpt_plan_add_skip_ref(struct tpt_plan_builder *b, uint32_t length)
{
	struct tpt_plan *p = b->p;
	const struct tpt_plan_cmd *cmd = &p->cmds[p->nr_cmds - 1];

	/* Skips side by side (a RAID-6 member's P and Q units) are one. */
	if (cmd->nr_refs && p->refs[p->nr_refs - 1].kind == TPT_REF_SKIP) {
		p->refs[p->nr_refs - 1].length += length;
		return 0;
	}
	return add_ref(b, TPT_REF_SKIP, 0, 0, 0, length);
}

uint64_t tpt_plan_run_over(uint64_t s, uint64_t end, uint64_t max_run,
			   enum tpt_plan_run_stripe (*kind)(const void *ctx,
							    uint64_t stripe),
			   const void *ctx, uint64_t *taken)
{
	uint64_t len = 1, gap;
	enum tpt_plan_run_stripe k;

	*taken = 1;
	while (s + len < end && len < max_run) {
		k = kind(ctx, s + len);
		if (k == TPT_RUN_TAKE) {
			len++;
			++*taken;
			continue;
		}
		if (k == TPT_RUN_STOP)
			break;
		/* Skipped stripes only where one taken follows within the
		 * run's bounds: a run never ends in a skip. */
		for (gap = 1; s + len + gap < end && len + gap < max_run &&
		     (k = kind(ctx, s + len + gap)) == TPT_RUN_SKIP; gap++)
			;
		if (s + len + gap >= end || len + gap >= max_run ||
		    k != TPT_RUN_TAKE)
			break;
		len += gap;
	}
	return len;
}

int tpt_plan_add_parity_ref(struct tpt_plan_builder *b, uint64_t host_offset,
			    uint32_t length, uint32_t nr_sources)
{
	int err = add_ref(b, TPT_REF_PARITY, host_offset, 0, 0, length);

	if (!err)
		b->p->refs[b->p->nr_refs - 1].nr_sources = nr_sources;
	return err;
}

int tpt_plan_add_slot_ref(struct tpt_plan_builder *b, unsigned int member,
			  uint16_t ordinal, uint32_t length)
{
	return add_ref(b, TPT_REF_SLOT, 0, member, ordinal, length);
}

/* A request that needs more than the member's whole table could never be
 * served, however long it waited. */
int tpt_plan_want_slots(struct tpt_plan_builder *b, unsigned int member,
			uint16_t n, uint16_t *first)
{
	struct tpt_plan_slot_run *run;

	if (!n || b->slots_wanted[member] + n > b->c->slots[member]->count)
		return -E2BIG;
	if (plan_grow((void **)&b->runs, b->nr_runs, &b->cap_runs,
		      sizeof(*b->runs)))
		return -ENOMEM;
	run = &b->runs[b->nr_runs++];
	run->member = member;
	run->first = (uint16_t)b->slots_wanted[member];
	run->n = n;
	*first = run->first;
	b->slots_wanted[member] += n;
	return 0;
}

int tpt_plan_want_slot(struct tpt_plan_builder *b, unsigned int member,
		       uint16_t *ordinal)
{
	return tpt_plan_want_slots(b, member, 1, ordinal);
}

static int plan_check(const struct tpt_plan_ctx *c, uint64_t lba,
		      uint32_t blocks)
{
	const struct raid_geometry *g = c->geo;
	uint64_t payload, array_blocks;

	if (!g || !c->level || raid_geometry_check(c->level, g))
		return -EINVAL;
	/* Member commands carry 48-bit LBAs and 24-bit lengths (protocol.md
	 * 2.2): a unit must fit in one, and the levels cut longer runs to
	 * that length. */
	if (g->member_blocks - 1 > TPT_VENDOR_LBA_MAX ||
	    g->unit_blocks > TPT_VENDOR_LENGTH_MAX)
		return -EINVAL;
	/* The slot payload is the stripe unit, so that a result is named by
	 * one slot (protocol.md 2.6, 7.4); REPORT SLOTS bounds it. */
	payload = (uint64_t)g->unit_blocks * c->block_size;
	if (!c->block_size || payload % TPT_SLOT_PAYLOAD_UNIT ||
	    payload > TPT_SLOT_PAYLOAD_MAX)
		return -EINVAL;
	array_blocks = c->level->array_blocks(g);
	if (!blocks || lba > array_blocks || blocks > array_blocks - lba)
		return -EINVAL;
	return 0;
}

/* ---- finishing ---- */

/* Stable, so that commands keep the order they were laid out in within
 * their step: the per-member order the engine sends them in. */
static int sort_into_steps(struct tpt_plan_builder *b)
{
	struct tpt_plan *p = b->p;

	p->nr_steps = b->last_step + 1;
	return plan_sort_steps((void **)&p->cmds, p->nr_cmds, sizeof(*p->cmds),
			       b->cmd_step, &p->nr_steps, &p->steps);
}

/* FINAL on each member's last PREP READ and last PREP WRITE, which all
 * sit in the first step: the target reads its disk, or the host, once
 * after FINAL (paper III-C; protocol.md 4.4, 4.5). */
static void mark_final(struct tpt_plan *p)
{
	unsigned int last[2][RAID_MAX_MEMBERS], i, m, kind;

	for (m = 0; m < RAID_MAX_MEMBERS; m++)
		last[0][m] = last[1][m] = UINT_MAX;
	for (i = 0; i < p->nr_cmds; i++)
		if (p->cmds[i].op == TPT_PLAN_PREP_READ ||
		    p->cmds[i].op == TPT_PLAN_PREP_WRITE)
			last[p->cmds[i].op == TPT_PLAN_PREP_WRITE]
			    [p->cmds[i].member] = i;
	for (kind = 0; kind < 2; kind++)
		for (m = 0; m < RAID_MAX_MEMBERS; m++)
			if (last[kind][m] != UINT_MAX)
				p->cmds[last[kind][m]].final = true;
}

/* Replace slot ordinals by slots taken from the members' allocators, a
 * run of consecutive slots per run of ordinals; all or nothing. */
static int take_slots(struct tpt_plan_builder *b)
{
	struct tpt_plan *p = b->p;
	struct tpt_plan_ctx *c = b->c;
	unsigned int base[RAID_MAX_MEMBERS], total = 0, m, i, k;
	uint16_t *slot, first;
	int err = 0;

	/* Every index a plan may name, not only the geometry's (a copy's
	 * source: tpt_plan_copy()). */
	for (m = 0; m < RAID_MAX_MEMBERS; m++) {
		base[m] = total;
		total += b->slots_wanted[m];
	}
	if (!total)
		return 0;
	slot = malloc(total * sizeof(*slot));
	p->slots = malloc(b->nr_runs * sizeof(*p->slots));
	if (!slot || !p->slots) {
		free(slot);
		return -ENOMEM;
	}
	for (i = 0; i < b->nr_runs; i++) {
		const struct tpt_plan_slot_run *run = &b->runs[i];

		struct slot_alloc *alloc = c->slots[run->member];

		err = slot_alloc_get(alloc, run->n, &first);
		if (err) {
			while (i--)
				slot_alloc_put(p->slots[i].alloc,
					       p->slots[i].first,
					       p->slots[i].n);
			free(slot);
			return err;
		}
		for (k = 0; k < run->n; k++)
			slot[base[run->member] + run->first + k] = first + k;
		p->slots[i].member = run->member;
		p->slots[i].first = first;
		p->slots[i].n = run->n;
		p->slots[i].alloc = alloc;
		p->slots[i].generation = alloc->generation;
	}
	p->nr_slots = b->nr_runs;

	for (i = 0; i < p->nr_cmds; i++) {
		struct tpt_plan_cmd *cmd = &p->cmds[i];

		if (cmd->result_slot != TPT_SLOT_NONE)
			cmd->result_slot =
				slot[base[cmd->member] + cmd->result_slot];
	}
	for (i = 0; i < p->nr_refs; i++) {
		struct tpt_plan_ref *ref = &p->refs[i];

		if (ref->kind == TPT_REF_SLOT)
			ref->slot = slot[base[ref->member] + ref->slot];
	}
	free(slot);
	return 0;
}

void tpt_plan_abandon(struct tpt_plan_builder *b)
{
	free(b->cmd_step);
	free(b->runs);
	b->cmd_step = NULL;
	b->runs = NULL;
	tpt_plan_free(b->p);
}

int tpt_plan_begin(struct tpt_plan_builder *b, struct tpt_plan_ctx *c,
		   uint64_t lba, uint32_t blocks, uint32_t group,
		   struct tpt_plan *out)
{
	int err = plan_check(c, lba, blocks);

	memset(out, 0, sizeof(*out));
	memset(b, 0, sizeof(*b));
	if (err)
		return err;
	b->c = c;
	b->p = out;
	out->group = group;
	out->nr_groups = 1;
	return 0;
}

int tpt_plan_begin_stripes(struct tpt_plan_builder *b, struct tpt_plan_ctx *c,
			   uint64_t first, uint32_t nr, uint32_t group,
			   struct tpt_plan *out)
{
	uint64_t per_stripe = raid_stripe_data_blocks(c->level, c->geo);
	uint64_t blocks = (uint64_t)nr * per_stripe;

	if (!nr || first > UINT64_MAX / per_stripe)
		return -EINVAL;
	/* A run longer than a request can be (0 blocks) is refused there. */
	return tpt_plan_begin(b, c, first * per_stripe,
			      (uint32_t)(blocks < UINT32_MAX ? blocks : 0),
			      group, out);
}

int tpt_plan_finish(struct tpt_plan_builder *b)
{
	int err = sort_into_steps(b);

	if (!err) {
		mark_final(b->p);
		err = take_slots(b);
	}
	if (err) {
		tpt_plan_abandon(b);
		return err;
	}
	free(b->cmd_step);
	free(b->runs);
	b->cmd_step = NULL;
	b->runs = NULL;
	return 0;
}

int tpt_plan_end(struct tpt_plan_builder *b, int err)
{
	if (!err)
		return tpt_plan_finish(b);
	tpt_plan_abandon(b);
	return err;
}

/* A range a command leaves in its group on its member. */
struct group_range {
	unsigned int member, group;
	uint64_t lba, end;
};

static int cmp_group_range(const void *a, const void *b)
{
	const struct group_range *x = a, *y = b;

	if (x->member != y->member)
		return x->member < y->member ? -1 : 1;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return x->lba < y->lba ? -1 : x->lba > y->lba;
}

/* Commands that leave a result for their range (protocol.md 8.2). */
static bool op_results(enum tpt_plan_op op)
{
	return op_stages(op) || op == TPT_PLAN_PART_TMP ||
	       op == TPT_PLAN_COMP_TMP || op == TPT_PLAN_READ_MEDIUM;
}

/* Whether [lba, end) lies within the union of the sorted ranges @r[0..n)
 * of one member and group. */
static bool covered(const struct group_range *r, unsigned int n,
		    uint64_t lba, uint64_t end)
{
	unsigned int i;

	for (i = 0; i < n && lba < end; i++) {
		if (r[i].lba > lba)
			return false;
		if (r[i].end > lba)
			lba = r[i].end;
	}
	return lba >= end;
}

/* What one command has a target fetch at most: its passes land in
 * scratch before they are XORed (protocol.md 5.1), within the target's
 * bound per group (tpt_group_mb, 128 MiB by default) with room for the
 * outcome. */
#define CHAIN_FETCH_BYTES_MAX	(32u << 20)

/* A parity chain: controller/tpt_plan.h. */
int tpt_plan_add_chain(struct tpt_plan_builder *b, unsigned int step,
		       unsigned int target, uint64_t lba, uint32_t n,
		       uint8_t group, uint8_t first_mode, bool stage,
		       const struct tpt_chain_source *src, unsigned int nr)
{
	return tpt_plan_add_weighted_chain(b, step, target, lba, n, group,
					   first_mode, 0, stage, src, nr);
}

void tpt_plan_weigh_last_ref(struct tpt_plan_builder *b, uint8_t gf_exp)
{
	b->p->refs[b->p->nr_refs - 1].gf_exp = gf_exp;
}

int tpt_plan_add_weighted_chain(struct tpt_plan_builder *b, unsigned int step,
				unsigned int target, uint64_t lba, uint32_t n,
				uint8_t group, uint8_t first_mode,
				uint8_t operand_gf_exp, bool stage,
				const struct tpt_chain_source *src,
				unsigned int nr)
{
	uint32_t bs = b->c->block_size, unit = b->c->geo->unit_blocks;
	uint32_t pieces = (n + unit - 1) / unit, len, i;
	uint64_t bytes = (uint64_t)n * bs;
	unsigned int per = nr, k, j, end;
	struct tpt_plan_cmd *cmd;

	if (per > TPT_XOR_PASSES_MAX)
		per = TPT_XOR_PASSES_MAX;
	if ((uint64_t)per * pieces > tpt_plan_refs_max(b->c))
		per = tpt_plan_refs_max(b->c) / pieces;
	if ((uint64_t)per * bytes > CHAIN_FETCH_BYTES_MAX)
		per = (unsigned int)(CHAIN_FETCH_BYTES_MAX / bytes);
	if (!per)
		per = 1;
	for (k = 0; k < nr; k = end, step++) {
		end = nr - k > per ? k + per : nr;
		cmd = tpt_plan_add_cmd(b, step, end == nr && stage ?
				       TPT_PLAN_PART_BLOCK : TPT_PLAN_PART_TMP,
				       target, lba, n);
		if (!cmd)
			return -ENOMEM;
		cmd->parity_mode = k ? TPT_PARITY_XOR_GROUP : first_mode;
		cmd->group_offset = group;
		/* Later links fold into the result as it is. */
		if (!k && first_mode != TPT_PARITY_COPY)
			cmd->operand_gf_exp = operand_gf_exp;
		for (j = k; j < end; j++) {
			if (src[j].member < 0) {
				if (tpt_plan_add_host_ref(b, src[j].host_offset,
							  (uint32_t)bytes))
					return -ENOMEM;
				tpt_plan_weigh_last_ref(b, src[j].gf_exp);
				continue;
			}
			for (i = 0; i < pieces; i++) {
				len = n - i * unit < unit ? n - i * unit : unit;
				if (tpt_plan_add_slot_ref(b, (unsigned int)src[j].member,
							  (uint16_t)(src[j].ordinal + i),
							  len * bs))
					return -ENOMEM;
				tpt_plan_weigh_last_ref(b, src[j].gf_exp);
			}
		}
	}
	return (int)step - 1;
}


int tpt_plan_add_prep_reads(struct tpt_plan_builder *b,
			    struct tpt_read_piece *piece, unsigned int nr)
{
	const struct raid_geometry *g = b->c->geo;
	uint32_t unit = g->unit_blocks, bs = b->c->block_size;
	uint32_t parity_units = b->c->level->nr_parity(g);
	unsigned int refs_max = tpt_plan_refs_max(b->c), i, j;
	bool skip_parity = !b->c->host_held;

	for (i = 0; i < nr; i++) {
		struct tpt_plan_cmd *cmd;
		uint32_t run = piece[i].blocks;

		/* Taken by an earlier run of its member. */
		if (!piece[i].blocks)
			continue;
		cmd = tpt_plan_add_cmd(b, 0, TPT_PLAN_PREP_READ,
				       piece[i].member, piece[i].member_lba, run);
		if (!cmd || tpt_plan_add_host_ref(b, piece[i].host_offset,
						  run * bs))
			return -ENOMEM;
		for (j = i + 1; j < nr; j++) {
			struct tpt_read_piece *p = &piece[j];
			uint64_t end = piece[i].member_lba + run, gap;

			if (p->member != piece[i].member)
				continue;
			/* The member's next data unit in the request: right
			 * after the run, or after its parity units. */
			if (p->member_lba < end)
				break;
			gap = p->member_lba - end;
			if ((gap && (!skip_parity || end % unit ||
				     gap % unit || gap / unit > parity_units)) ||
			    cmd->nr_refs + 1 + !!gap > refs_max ||
			    run + gap + p->blocks > TPT_VENDOR_LENGTH_MAX)
				break;
			if (gap && tpt_plan_add_skip_ref(b, (uint32_t)gap * bs))
				return -ENOMEM;
			if (tpt_plan_add_host_ref(b, p->host_offset,
						  p->blocks * bs))
				return -ENOMEM;
			run += (uint32_t)gap + p->blocks;
			cmd->blocks = run;
			p->blocks = 0;		/* planned, in this run */
		}
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void tpt_stripe_cut(const struct raid_geometry *g,
		    const struct raid_level_ops *l, uint32_t block_size,
		    uint64_t req_lba, uint64_t stripe, uint64_t first,
		    uint64_t end, struct tpt_stripe_piece *piece,
		    unsigned int *nr_pieces, uint32_t *bound,
		    unsigned int *nr_bounds)
{
	uint32_t unit = g->unit_blocks, n;
	uint64_t base = stripe * unit, pos;
	unsigned int nb = 0, i, j;

	*nr_pieces = 0;
	for (pos = first; pos < end; pos += n) {
		struct raid_chunk ch;
		struct tpt_stripe_piece *pc = &piece[(*nr_pieces)++];

		l->map(g, pos, &ch);
		pc->member = ch.member;
		pc->first = (uint32_t)(ch.member_lba - base);
		n = unit - pc->first;
		if (n > end - pos)
			n = (uint32_t)(end - pos);
		pc->end = pc->first + n;
		pc->host_offset = (pos - req_lba) * block_size;
		bound[nb++] = pc->first;
		bound[nb++] = pc->end;
	}
	qsort(bound, nb, sizeof(bound[0]), cmp_u32);
	for (i = 1, j = 1; i < nb; i++)
		if (bound[i] != bound[j - 1])
			bound[j++] = bound[i];
	*nr_bounds = nb ? j : 0;
}

int tpt_plan_add_xdwrites(struct tpt_plan_builder *b, uint64_t base,
			  const struct tpt_stripe_piece *piece, unsigned int nr,
			  uint32_t x, uint32_t len,
			  struct tpt_chain_source *delta)
{
	uint32_t bs = b->c->block_size;
	struct tpt_plan_cmd *cmd;
	unsigned int j, k = 0;
	int err;

	for (j = 0; j < nr; j++) {
		const struct tpt_stripe_piece *pc = &piece[j];

		if (pc->first > x || pc->end < x + len)
			continue;
		delta[k] = (struct tpt_chain_source){ .member = (int)pc->member };
		err = tpt_plan_want_slot(b, pc->member, &delta[k].ordinal);
		if (err)
			return err;
		cmd = tpt_plan_add_cmd(b, 0, TPT_PLAN_XDWRITE, pc->member,
				       base + x, len);
		if (!cmd)
			return -ENOMEM;
		cmd->result_slot = delta[k].ordinal;
		if (tpt_plan_add_host_ref(b, pc->host_offset +
					  (uint64_t)(x - pc->first) * bs,
					  len * bs))
			return -ENOMEM;
		k++;
	}
	return (int)k;
}

const struct tpt_stripe_piece *
tpt_stripe_piece_over(const struct tpt_stripe_piece *piece, unsigned int nr,
		      unsigned int member, uint32_t x, uint32_t len)
{
	unsigned int j;

	for (j = 0; j < nr; j++)
		if (piece[j].member == member && piece[j].first <= x &&
		    piece[j].end >= x + len)
			return &piece[j];
	return NULL;
}

/* WRITE NEW DATA of the staged runs of member @m, group @g, in @step:
 * ranges that touch or overlap make one (a PREP WRITE with skips spans
 * the parity its stripes' COMP BLOCKs stage, protocol.md 4.5).  A run
 * longer than a CDB can say is cut at unit boundaries, which no staged
 * range starts or ends inside. */
static int add_wnd_runs(struct tpt_plan_builder *b, const struct group_range *r,
			unsigned int n, unsigned int step)
{
	uint32_t unit = b->c->geo->unit_blocks;
	uint64_t longest = TPT_VENDOR_LENGTH_MAX / unit * unit, lba, end, next;
	struct tpt_plan_cmd *cmd;
	unsigned int i, j;

	for (i = 0; i < n; i = j) {
		end = r[i].end;
		for (j = i + 1; j < n && r[j].lba <= end; j++)
			if (r[j].end > end)
				end = r[j].end;
		for (lba = r[i].lba; lba < end; lba = next) {
			next = end;
			if (next - lba > longest)
				next = (lba + longest) / unit * unit;
			cmd = tpt_plan_add_cmd(b, step, TPT_PLAN_WRITE_NEW_DATA,
					       r[i].member, lba,
					       (uint32_t)(next - lba));
			if (!cmd)
				return -ENOMEM;
			cmd->group_offset = (uint8_t)r[i].group;
		}
	}
	return 0;
}

int tpt_plan_add_end_steps(struct tpt_plan_builder *b)
{
	struct tpt_plan *p = b->p;
	unsigned int nr = p->nr_cmds, ns = 0, nc = 0, i, j, k, r, step, m, g;
	struct group_range *staged, *cover, *res;
	bool any_staged = false, busy;
	int err = 0;

	staged = malloc((nr ? nr : 1) * sizeof(*staged));
	cover = malloc((nr ? nr : 1) * sizeof(*cover));
	res = malloc((nr ? nr : 1) * sizeof(*res));
	if (!staged || !cover || !res) {
		err = -ENOMEM;
		goto out;
	}
	/* What each member and group will hold, and what releases it. */
	for (i = 0; i < nr; i++) {
		const struct tpt_plan_cmd *c = &p->cmds[i];
		struct group_range gr = { c->member, c->group_offset, c->lba,
					  c->lba + c->blocks };

		if (op_stages(c->op)) {
			staged[ns++] = gr;
			cover[nc++] = gr;
			any_staged = true;
		} else if (c->op == TPT_PLAN_SEND_RESULT) {
			cover[nc++] = gr;
		}
	}
	qsort(staged, ns, sizeof(*staged), cmp_group_range);
	qsort(cover, nc, sizeof(*cover), cmp_group_range);
	step = any_staged ? b->last_step + 1 : b->last_step;
	for (i = 0; i < ns && !err; i = j) {
		for (j = i + 1; j < ns && staged[j].member == staged[i].member &&
		     staged[j].group == staged[i].group; j++)
			;
		err = add_wnd_runs(b, &staged[i], j - i, step);
	}

	/* Results nothing of the plan releases: TPT RELEASE of that group. */
	for (i = 0, k = 0; i < nr; i++) {
		const struct tpt_plan_cmd *c = &p->cmds[i];

		if (op_results(c->op))
			res[k++] = (struct group_range){ c->member,
				c->group_offset, c->lba, c->lba + c->blocks };
	}
	qsort(res, k, sizeof(*res), cmp_group_range);
	for (i = 0; i < k && !err; i = j) {
		unsigned int first = 0, n = 0;
		bool leftover = false;

		m = res[i].member;
		g = res[i].group;
		for (j = i; j < k && res[j].member == m && res[j].group == g; j++)
			;
		while (first < nc && (cover[first].member < m ||
				      (cover[first].member == m &&
				       cover[first].group < g)))
			first++;
		while (first + n < nc && cover[first + n].member == m &&
		       cover[first + n].group == g)
			n++;
		for (r = i; r < j; r++)
			if (!covered(&cover[first], n, res[r].lba, res[r].end))
				leftover = true;
		if (!leftover)
			continue;
		busy = false;
		for (r = 0; r < p->nr_cmds; r++)
			if (b->cmd_step[r] == step && p->cmds[r].member == m &&
			    p->cmds[r].group_offset == g)
				busy = true;
		if (!tpt_plan_add_cmd(b, busy ? step + 1 : step,
				      TPT_PLAN_RELEASE, m, 0, 0)) {
			err = -ENOMEM;
			break;
		}
		p->cmds[p->nr_cmds - 1].group_offset = (uint8_t)g;
	}
out:
	free(staged);
	free(cover);
	free(res);
	return err;
}

int tpt_plan_copy(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
		  unsigned int from, uint32_t to, uint32_t group,
		  struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint32_t unit = g->unit_blocks;
	struct tpt_chain_source src = { 0 };
	struct tpt_plan_builder b;
	struct tpt_plan_cmd *cmd;
	unsigned int m;
	int err;

	if (!raid_stripes_in_range(g, first, nr) ||
	    (uint64_t)nr * unit > TPT_VENDOR_LENGTH_MAX ||
	    from >= RAID_MAX_MEMBERS || !to || (to & (1u << from)))
		return -EINVAL;
	err = tpt_plan_begin_stripes(&b, c, first, nr, group, out);
	if (err)
		return err;
	src.member = (int)from;
	err = tpt_plan_want_slots(&b, from, (uint16_t)nr, &src.ordinal);
	cmd = err ? NULL : tpt_plan_add_cmd(&b, 0, TPT_PLAN_READ_MEDIUM, from,
					    first * unit, nr * unit);
	if (!err && !cmd)
		err = -ENOMEM;
	if (cmd)
		cmd->result_slot = src.ordinal;
	for (m = 0; m < RAID_MAX_MEMBERS && !err; m++) {
		int last;

		if (!(to & (1u << m)))
			continue;
		last = tpt_plan_add_chain(&b, 1, m, first * unit, nr * unit,
					  0, TPT_PARITY_COPY, true, &src, 1);
		if (last < 0)
			err = last;
	}
	if (!err)
		err = tpt_plan_add_end_steps(&b);
	return tpt_plan_end(&b, err);
}

/* ---- abort, teardown, counting ---- */

int tpt_plan_release(const struct tpt_plan *p, struct tpt_plan *out)
{
	bool got[RAID_MAX_MEMBERS][TPT_PLAN_MAX_GROUPS] = { { false } };
	unsigned int i, m, g, n = 0;

	memset(out, 0, sizeof(*out));
	out->group = p->group;
	out->nr_groups = p->nr_groups;
	for (i = 0; i < p->nr_cmds; i++) {
		const struct tpt_plan_cmd *c = &p->cmds[i];

		/* A cache hint leaves nothing to release. */
		if (c->op == TPT_PLAN_PRE_FETCH)
			continue;
		if (!got[c->member][c->group_offset])
			n++;
		got[c->member][c->group_offset] = true;
	}
	if (!n)
		return 0;
	out->cmds = calloc(n, sizeof(*out->cmds));
	out->steps = calloc(1, sizeof(*out->steps));
	if (!out->cmds || !out->steps) {
		tpt_plan_free(out);
		return -ENOMEM;
	}
	for (m = 0; m < RAID_MAX_MEMBERS; m++) {
		for (g = 0; g < TPT_PLAN_MAX_GROUPS; g++) {
			struct tpt_plan_cmd *cmd;

			if (!got[m][g])
				continue;
			cmd = &out->cmds[out->nr_cmds++];
			cmd->op = TPT_PLAN_RELEASE;
			cmd->member = m;
			cmd->group_offset = (uint8_t)g;
			cmd->result_slot = TPT_SLOT_NONE;
		}
	}
	out->steps[0].nr_cmds = n;
	out->nr_steps = 1;
	return 0;
}

void tpt_plan_free(struct tpt_plan *p)
{
	free(p->cmds);
	free(p->refs);
	free(p->steps);
	free(p->slots);
	memset(p, 0, sizeof(*p));
}

void tpt_plan_return_slots(const struct tpt_plan *p)
{
	unsigned int i;

	for (i = 0; i < p->nr_slots; i++)
		if (p->slots[i].alloc->generation == p->slots[i].generation)
			slot_alloc_put(p->slots[i].alloc, p->slots[i].first,
				       p->slots[i].n);
}

void tpt_plan_count(const struct tpt_plan *p, struct tpt_plan_counts *out)
{
	unsigned int i, j;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < p->nr_cmds; i++) {
		const struct tpt_plan_cmd *cmd = &p->cmds[i];
		struct tpt_plan_member_counts *mc = &out->member[cmd->member];

		mc->commands++;
		out->commands++;
		for (j = 0; j < cmd->nr_refs; j++) {
			const struct tpt_plan_ref *ref = &p->refs[cmd->first_ref + j];

			if (ref->kind == TPT_REF_SKIP)
				continue;	/* moves nothing */
			mc->transfers++;
			out->transfers++;
			if (ref->kind == TPT_REF_SLOT) {
				mc->peer_in += ref->length;
				out->member[ref->member].peer_out += ref->length;
				out->peer_bytes += ref->length;
				continue;
			}
			/* PREP READ and SEND RESULT write to their passive
			 * side, every other command reads it. */
			if (cmd->op == TPT_PLAN_PREP_READ ||
			    cmd->op == TPT_PLAN_SEND_RESULT)
				mc->host_out += ref->length;
			else
				mc->host_in += ref->length;
			out->host_bytes += ref->length;
		}
	}
}
