/*
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

#include "scsi/tpt_cdb.h"

struct plan_builder {
	struct tpt_plan_ctx *c;
	struct tpt_plan *p;
	unsigned int *cmd_step;		/* step of each command, until sorted */
	unsigned int cap_cmds, cap_refs;
	unsigned int last_step;
	/* Ordinals handed out per member; ordinals stay below TPT_SLOT_MAX,
	 * so they never collide with TPT_SLOT_NONE. */
	unsigned int slots_wanted[RAID_MAX_MEMBERS];
};

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

/* The new command, valid until the next add_cmd(); NULL without memory.
 * Its descriptors are the add_ref() calls that follow. */
static struct tpt_plan_cmd *add_cmd(struct plan_builder *b, unsigned int step,
				    enum tpt_plan_op op, unsigned int member,
				    uint64_t lba, uint32_t blocks)
{
	struct tpt_plan *p = b->p;
	struct tpt_plan_cmd *cmd;

	if (p->nr_cmds == b->cap_cmds) {
		unsigned int cap = b->cap_cmds ? 2 * b->cap_cmds : 16;
		struct tpt_plan_cmd *cmds;
		unsigned int *steps;

		if (b->cap_cmds > UINT_MAX / 2)
			return NULL;
		cmds = realloc(p->cmds, cap * sizeof(*cmds));
		if (!cmds)
			return NULL;
		p->cmds = cmds;
		steps = realloc(b->cmd_step, cap * sizeof(*steps));
		if (!steps)
			return NULL;
		b->cmd_step = steps;
		b->cap_cmds = cap;
	}
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

static int add_ref(struct plan_builder *b, enum tpt_plan_ref_kind kind,
		   uint64_t host_offset, unsigned int member, uint16_t slot,
		   uint32_t length)
{
	struct tpt_plan *p = b->p;
	struct tpt_plan_ref *ref;

	if (p->nr_refs == b->cap_refs) {
		unsigned int cap = b->cap_refs ? 2 * b->cap_refs : 16;
		struct tpt_plan_ref *refs;

		if (b->cap_refs > UINT_MAX / 2)
			return -ENOMEM;
		refs = realloc(p->refs, cap * sizeof(*refs));
		if (!refs)
			return -ENOMEM;
		p->refs = refs;
		b->cap_refs = cap;
	}
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

static int add_host_ref(struct plan_builder *b, uint64_t host_offset,
			uint32_t length)
{
	return add_ref(b, TPT_REF_HOST, host_offset, 0, 0, length);
}

static int add_slot_ref(struct plan_builder *b, unsigned int member,
			uint16_t ordinal, uint32_t length)
{
	return add_ref(b, TPT_REF_SLOT, 0, member, ordinal, length);
}

/* A slot on @member for one result; a request that needs more than the
 * member's whole table could never be served, however long it waited. */
static int want_slot(struct plan_builder *b, unsigned int member,
		     uint16_t *ordinal)
{
	if (b->slots_wanted[member] >= b->c->slots[member].count)
		return -E2BIG;
	*ordinal = (uint16_t)b->slots_wanted[member]++;
	return 0;
}

static int plan_check(const struct tpt_plan_ctx *c, uint64_t lba,
		      uint32_t blocks)
{
	const struct raid_geometry *g = c->geo;
	uint64_t payload, array_blocks;

	/* One XOR parity per stripe is what the READ PARITY commands
	 * compute; other codes need plans of their own. */
	if (!g || !c->layout || c->layout->nr_parity != 1 ||
	    raid_geometry_check(c->layout, g))
		return -EINVAL;
	/* Member commands carry 48-bit LBAs and 24-bit lengths, and every
	 * command but WRITE NEW DATA covers at most one unit (protocol.md
	 * 2.2). */
	if (g->member_blocks - 1 > TPT_VENDOR_LBA_MAX ||
	    g->unit_blocks > TPT_VENDOR_LENGTH_MAX)
		return -EINVAL;
	/* The slot payload is the stripe unit, so that a result is named by
	 * one slot (protocol.md 2.6, 7.4); REPORT SLOTS bounds it. */
	payload = (uint64_t)g->unit_blocks * c->block_size;
	if (!c->block_size || payload % TPT_SLOT_PAYLOAD_UNIT ||
	    payload > TPT_SLOT_PAYLOAD_MAX)
		return -EINVAL;
	array_blocks = c->layout->array_blocks(g);
	if (!blocks || lba > array_blocks || blocks > array_blocks - lba)
		return -EINVAL;
	return 0;
}

/* ---- finishing ---- */

/* Stable, so that commands keep the order they were laid out in within
 * their step: the per-member order the engine sends them in. */
static int sort_into_steps(struct plan_builder *b)
{
	struct tpt_plan *p = b->p;
	unsigned int nr_steps = b->last_step + 1, i;
	struct tpt_plan_cmd *sorted;

	p->steps = calloc(nr_steps, sizeof(*p->steps));
	sorted = malloc(p->nr_cmds * sizeof(*sorted));
	if (!p->steps || !sorted) {
		free(sorted);
		return -ENOMEM;
	}
	p->nr_steps = nr_steps;
	for (i = 0; i < p->nr_cmds; i++)
		p->steps[b->cmd_step[i]].nr_cmds++;
	for (i = 1; i < nr_steps; i++)
		p->steps[i].first_cmd = p->steps[i - 1].first_cmd +
					p->steps[i - 1].nr_cmds;
	/* nr_cmds doubles as the fill count while placing. */
	for (i = 0; i < nr_steps; i++)
		p->steps[i].nr_cmds = 0;
	for (i = 0; i < p->nr_cmds; i++) {
		struct tpt_plan_step *st = &p->steps[b->cmd_step[i]];

		sorted[st->first_cmd + st->nr_cmds++] = p->cmds[i];
	}
	free(p->cmds);
	p->cmds = sorted;
	return 0;
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

/* Replace slot ordinals by slots taken from the members' allocators;
 * all or nothing. */
static int take_slots(struct plan_builder *b)
{
	struct tpt_plan *p = b->p;
	struct tpt_plan_ctx *c = b->c;
	unsigned int base[RAID_MAX_MEMBERS], total = 0, m, o, i;
	unsigned int *owner;
	uint16_t *slot;
	int err = 0;

	for (m = 0; m < c->geo->members; m++) {
		base[m] = total;
		total += b->slots_wanted[m];
	}
	if (!total)
		return 0;
	slot = malloc(total * sizeof(*slot));
	owner = malloc(total * sizeof(*owner));
	p->slots = malloc(total * sizeof(*p->slots));
	if (!slot || !owner || !p->slots) {
		err = -ENOMEM;
		goto out;
	}
	for (m = 0; m < c->geo->members; m++)
		for (o = 0; o < b->slots_wanted[m]; o++)
			owner[base[m] + o] = m;
	for (i = 0; i < total; i++) {
		err = slot_alloc_get(&c->slots[owner[i]], 1, &slot[i]);
		if (err) {
			while (i--)
				slot_alloc_put(&c->slots[owner[i]], slot[i], 1);
			goto out;
		}
	}

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
	for (i = 0; i < total; i++) {
		struct tpt_plan_slot_run *run = p->slots + p->nr_slots;

		if (p->nr_slots && run[-1].member == owner[i] &&
		    run[-1].first + run[-1].n == slot[i]) {
			run[-1].n++;
			continue;
		}
		run->member = owner[i];
		run->first = slot[i];
		run->n = 1;
		p->nr_slots++;
	}
out:
	free(owner);
	free(slot);
	return err;
}

static void plan_abandon(struct plan_builder *b)
{
	free(b->cmd_step);
	tpt_plan_free(b->p);
}

static int plan_begin(struct plan_builder *b, struct tpt_plan_ctx *c,
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
	return 0;
}

static int plan_finish(struct plan_builder *b)
{
	int err = sort_into_steps(b);

	if (!err) {
		mark_final(b->p);
		err = take_slots(b);
	}
	if (err) {
		plan_abandon(b);
		return err;
	}
	free(b->cmd_step);
	return 0;
}

/* ---- READ (paper III-C, protocol.md 7.1) ---- */

int tpt_plan_read(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
		  uint32_t group, struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t pos, end = lba + blocks;
	struct plan_builder b;
	uint32_t n;
	int err;

	err = plan_begin(&b, c, lba, blocks, group, out);
	if (err)
		return err;
	/* The host buffer is contiguous, member blocks are not: one PREP
	 * READ per piece of a stripe unit, each naming where in the host
	 * buffer its blocks go.  All in one step, FINAL last per member. */
	for (pos = lba; pos < end; pos += n) {
		struct raid_chunk ch;
		uint32_t off;

		c->layout->map(g, pos, &ch);
		off = (uint32_t)(ch.member_lba % g->unit_blocks);
		n = g->unit_blocks - off;
		if (n > end - pos)
			n = (uint32_t)(end - pos);
		if (!add_cmd(&b, 0, TPT_PLAN_PREP_READ, ch.member,
			     ch.member_lba, n) ||
		    add_host_ref(&b, (pos - lba) * c->block_size,
				 n * c->block_size)) {
			plan_abandon(&b);
			return -ENOMEM;
		}
	}
	return plan_finish(&b);
}

/* ---- WRITE (paper III-C, protocol.md 7.2, 7.4) ---- */

/* One data member's share of a partial stripe. */
struct stripe_piece {
	unsigned int member;
	uint32_t first, end;		/* blocks within the unit */
	uint64_t host_offset;		/* bytes, of block @first */
};

struct stripe_delta {
	unsigned int member;
	uint16_t ordinal;
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Read-modify-write of array blocks [@first, @end) of @stripe (paper
 * III-C, Fig. 4; protocol.md 7.2).  Each data member XDWRITEs its new
 * data and exports the delta new XOR old; the parity member folds the
 * deltas into its old parity, PRE-FETCHed while the XDWRITEs run.
 *
 * The pieces may sit at different offsets of the unit (a write covering
 * the tail of one unit and the head of the next), so one parity block
 * range can take deltas from some members and not others.  A SLOT
 * descriptor takes a slot's whole payload and the reader checks the
 * piece's LBA and length (protocol.md 5.1), so a delta can only be read
 * over exactly the range it was produced for.  The unit's offsets are
 * therefore cut at every piece boundary into elementary intervals, and
 * each piece XDWRITEs one command, with a slot of its own, per interval
 * it covers.  Pieces that do not overlap need no cut.
 *
 * Per interval with k deltas the parity member runs a chain, one command
 * per step since a target does not order a group's commands: PART TMP
 * with XOR MEDIUM on the first delta, PART TMP with XOR GROUP on each next
 * one, accumulating in its private result, and PART BLOCK with XOR GROUP
 * on the last, which stages the new parity; a single delta is one PART
 * BLOCK with XOR MEDIUM (protocol.md 7.2, star).
 */
static int plan_partial_stripe(struct plan_builder *b, uint64_t req_lba,
			       uint64_t stripe, uint64_t first, uint64_t end)
{
	const struct raid_geometry *g = b->c->geo;
	const struct raid_layout_ops *l = b->c->layout;
	uint32_t bs = b->c->block_size, unit = g->unit_blocks;
	uint32_t bound[2 * RAID_MAX_MEMBERS], lo = unit, hi = 0, n;
	struct stripe_piece piece[RAID_MAX_MEMBERS];
	struct stripe_delta delta[RAID_MAX_MEMBERS];
	unsigned int parity = l->parity_member(g, stripe, 0);
	unsigned int nr_pieces = 0, nr_bounds = 0, i, j, k;
	uint64_t base = stripe * unit, pos;
	struct tpt_plan_cmd *cmd;
	int err;

	for (pos = first; pos < end; pos += n) {
		struct raid_chunk ch;
		struct stripe_piece *pc = &piece[nr_pieces++];

		l->map(g, pos, &ch);
		pc->member = ch.member;
		pc->first = (uint32_t)(ch.member_lba - base);
		n = unit - pc->first;
		if (n > end - pos)
			n = (uint32_t)(end - pos);
		pc->end = pc->first + n;
		pc->host_offset = (pos - req_lba) * bs;
		bound[nr_bounds++] = pc->first;
		bound[nr_bounds++] = pc->end;
		if (pc->first < lo)
			lo = pc->first;
		if (pc->end > hi)
			hi = pc->end;
	}
	qsort(bound, nr_bounds, sizeof(bound[0]), cmp_u32);
	for (i = 1, j = 1; i < nr_bounds; i++)
		if (bound[i] != bound[j - 1])
			bound[j++] = bound[i];
	nr_bounds = j;

	for (i = 0; i + 1 < nr_bounds; i++) {
		uint32_t x = bound[i], len = bound[i + 1] - bound[i];

		k = 0;
		for (j = 0; j < nr_pieces; j++) {
			struct stripe_piece *pc = &piece[j];

			if (pc->first > x || pc->end < x + len)
				continue;
			delta[k].member = pc->member;
			err = want_slot(b, pc->member, &delta[k].ordinal);
			if (err)
				return err;
			cmd = add_cmd(b, 0, TPT_PLAN_XDWRITE, pc->member,
				      base + x, len);
			if (!cmd)
				return -ENOMEM;
			cmd->result_slot = delta[k].ordinal;
			if (add_host_ref(b, pc->host_offset +
					 (uint64_t)(x - pc->first) * bs,
					 len * bs))
				return -ENOMEM;
			k++;
		}
		for (j = 0; j < k; j++) {
			cmd = add_cmd(b, 1 + j, j + 1 < k ? TPT_PLAN_PART_TMP :
				      TPT_PLAN_PART_BLOCK, parity, base + x, len);
			if (!cmd)
				return -ENOMEM;
			cmd->parity_mode = j ? TPT_PARITY_XOR_GROUP :
					       TPT_PARITY_XOR_MEDIUM;
			if (add_slot_ref(b, delta[j].member, delta[j].ordinal,
					 len * bs))
				return -ENOMEM;
		}
	}
	/* One cache hint over the whole parity range keeps Table II's single
	 * PRE-FETCH; gaps between intervals cost a little extra reading. */
	if (!add_cmd(b, 0, TPT_PLAN_PRE_FETCH, parity, base + lo, hi - lo))
		return -ENOMEM;
	return 0;
}

/*
 * Full stripes @first_stripe.. (@nr of them): star topology with a
 * calculator per stripe (paper III-A, III-C; protocol.md 7.4).
 *
 * Step 1 PREP WRITEs every block to its data member, each but the
 * calculator's exporting its block into a slot.  Then the calculator C
 * folds the other data members' blocks into its own with COMP TMP, one
 * per step, all naming one slot c of C so the target accumulates in place
 * (4.9); C's own block stays private so that the chain never touches its
 * staged data (8.2).  Stripes are independent, so the chains of all the
 * stripes run side by side, step j of each in one plan step.  Finally the
 * parity member reads the finished parity from slot c with COMP BLOCK.
 *
 * The calculator is the data member at data index calculator_rr mod
 * (N-1) of each stripe, and calculator_rr advances once per request.
 * Being a data member, it is never the stripe's parity member, so no
 * stripe needs a fallback and each stripe costs the paper's 3N-1
 * operations.  Left-symmetric puts a fixed data index on the next lower
 * member from one stripe to the next, so a multi-stripe request spreads
 * its calculators over all members, and repeated requests to one stripe
 * rotate among its data members: the load balancing the paper wants from
 * choosing the calculator ad hoc.
 */
static int plan_full_stripes(struct plan_builder *b, uint64_t req_lba,
			     uint64_t first_stripe, uint64_t nr)
{
	const struct raid_geometry *g = b->c->geo;
	const struct raid_layout_ops *l = b->c->layout;
	uint32_t bs = b->c->block_size, unit = g->unit_blocks;
	unsigned int data = g->members - 1;
	unsigned int calc_index = b->c->calculator_rr % data;
	uint16_t ordinal[RAID_MAX_MEMBERS], acc;
	struct tpt_plan_cmd *cmd;
	uint64_t i, s, base;
	unsigned int d, m, calc, step;
	int err;

	for (i = 0; i < nr; i++) {
		s = first_stripe + i;
		base = s * unit;
		for (d = 0; d < data; d++) {
			m = l->data_member(g, s, d);
			if (d != calc_index) {
				err = want_slot(b, m, &ordinal[d]);
				if (err)
					return err;
			}
			cmd = add_cmd(b, 0, TPT_PLAN_PREP_WRITE, m, base, unit);
			if (!cmd)
				return -ENOMEM;
			if (d != calc_index)
				cmd->result_slot = ordinal[d];
			if (add_host_ref(b, ((s * data + d) * unit - req_lba) * bs,
					 unit * bs))
				return -ENOMEM;
		}
		calc = l->data_member(g, s, calc_index);
		err = want_slot(b, calc, &acc);
		if (err)
			return err;
		step = 1;
		for (d = 0; d < data; d++) {
			if (d == calc_index)
				continue;
			cmd = add_cmd(b, step++, TPT_PLAN_COMP_TMP, calc, base,
				      unit);
			if (!cmd)
				return -ENOMEM;
			cmd->result_slot = acc;
			if (add_slot_ref(b, l->data_member(g, s, d), ordinal[d],
					 unit * bs))
				return -ENOMEM;
		}
		if (!add_cmd(b, step, TPT_PLAN_COMP_BLOCK,
			     l->parity_member(g, s, 0), base, unit) ||
		    add_slot_ref(b, calc, acc, unit * bs))
			return -ENOMEM;
	}
	return 0;
}

struct staged_range {
	unsigned int member;
	uint64_t lba, end;
};

static int cmp_staged(const void *a, const void *b)
{
	const struct staged_range *x = a, *y = b;

	if (x->member != y->member)
		return x->member < y->member ? -1 : 1;
	return x->lba < y->lba ? -1 : x->lba > y->lba;
}

/*
 * WRITE NEW DATA to every member with staged data, all in one last step:
 * the targets write simultaneously and the host is answered when all are
 * done (paper III-D 4; protocol.md 4.11, 9.2).  A WRITE NEW DATA must
 * cover every staged range it touches in full and its own range is
 * contiguous, so each member gets one per contiguous run of staged
 * ranges; a run longer than a CDB can say is cut at unit boundaries,
 * which no staged range crosses.
 */
static int add_write_new_data(struct plan_builder *b)
{
	struct tpt_plan *p = b->p;
	uint32_t unit = b->c->geo->unit_blocks;
	uint64_t longest = TPT_VENDOR_LENGTH_MAX / unit * unit, lba, end, next;
	unsigned int step = b->last_step + 1, n = 0, i, j;
	struct staged_range *r;

	r = malloc(p->nr_cmds * sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (i = 0; i < p->nr_cmds; i++) {
		if (!op_stages(p->cmds[i].op))
			continue;
		r[n].member = p->cmds[i].member;
		r[n].lba = p->cmds[i].lba;
		r[n].end = p->cmds[i].lba + p->cmds[i].blocks;
		n++;
	}
	qsort(r, n, sizeof(*r), cmp_staged);
	for (i = 0; i < n; i = j) {
		end = r[i].end;
		for (j = i + 1; j < n && r[j].member == r[i].member &&
		     r[j].lba == end; j++)
			end = r[j].end;
		for (lba = r[i].lba; lba < end; lba = next) {
			next = end;
			if (next - lba > longest)
				next = (lba + longest) / unit * unit;
			if (!add_cmd(b, step, TPT_PLAN_WRITE_NEW_DATA,
				     r[i].member, lba, (uint32_t)(next - lba))) {
				free(r);
				return -ENOMEM;
			}
		}
	}
	free(r);
	return 0;
}

/*
 * A request is 0-2 partial stripes, at its head and tail, and at most one
 * multiple-full-stripe part between them (paper III-C, protocol.md 7.4).
 * The parts touch different stripes, hence different member ranges and
 * slots, so they share steps: everything that reads the host in the first
 * step, the parity chains side by side after it, WRITE NEW DATA last.
 */
int tpt_plan_write(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
		   uint32_t group, struct tpt_plan *out)
{
	const struct raid_geometry *g = c->geo;
	uint64_t stripe_blocks, pos, end = lba + blocks, s, seg, nr;
	struct plan_builder b;
	bool full = false;
	int err;

	err = plan_begin(&b, c, lba, blocks, group, out);
	if (err)
		return err;
	if (!c->slots)
		return -EINVAL;
	stripe_blocks = (uint64_t)(g->members - 1) * g->unit_blocks;
	for (pos = lba; pos < end && !err; pos = seg) {
		s = pos / stripe_blocks;
		nr = (end - pos) / stripe_blocks;
		if (pos % stripe_blocks == 0 && nr) {
			err = plan_full_stripes(&b, lba, s, nr);
			seg = pos + nr * stripe_blocks;
			full = true;
		} else {
			seg = (s + 1) * stripe_blocks;
			if (seg > end)
				seg = end;
			err = plan_partial_stripe(&b, lba, s, pos, seg);
		}
	}
	if (!err)
		err = add_write_new_data(&b);
	if (err) {
		plan_abandon(&b);
		return err;
	}
	err = plan_finish(&b);
	if (!err && full)
		c->calculator_rr++;
	return err;
}

/* ---- abort, teardown, counting ---- */

int tpt_plan_release(const struct tpt_plan *p, struct tpt_plan *out)
{
	bool got[RAID_MAX_MEMBERS] = { false };
	unsigned int i, m, n = 0;

	memset(out, 0, sizeof(*out));
	out->group = p->group;
	for (i = 0; i < p->nr_cmds; i++) {
		if (!got[p->cmds[i].member])
			n++;
		got[p->cmds[i].member] = true;
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
		struct tpt_plan_cmd *cmd;

		if (!got[m])
			continue;
		cmd = &out->cmds[out->nr_cmds++];
		cmd->op = TPT_PLAN_RELEASE;
		cmd->member = m;
		cmd->result_slot = TPT_SLOT_NONE;
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

void tpt_plan_return_slots(struct tpt_plan_ctx *c, const struct tpt_plan *p)
{
	unsigned int i;

	for (i = 0; i < p->nr_slots; i++)
		slot_alloc_put(&c->slots[p->slots[i].member],
			       p->slots[i].first, p->slots[i].n);
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

			mc->transfers++;
			out->transfers++;
			if (ref->kind == TPT_REF_SLOT) {
				mc->peer_in += ref->length;
				out->member[ref->member].peer_out += ref->length;
				out->peer_bytes += ref->length;
				continue;
			}
			/* PREP READ is the only command that writes to its
			 * passive side. */
			if (cmd->op == TPT_PLAN_PREP_READ)
				mc->host_out += ref->length;
			else
				mc->host_in += ref->length;
			out->host_bytes += ref->length;
		}
	}
}
