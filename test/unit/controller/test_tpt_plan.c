/*
 * The planner, checked by executing its plans.
 *
 * The simulator below is a model of N member targets following
 * docs/protocol.md: media, groups with staged data and results (8.1, 8.2),
 * result slots with headers (5.1, 5.4), and the commands' semantics
 * (section 4).  It runs a plan step by step and fails it where a real
 * target would fail a command, and also where the plan relies on
 * something a target does not promise: order among the commands of one
 * step, or a slot read before the step that filled it has completed.
 * Random requests are then checked against a plain byte array holding
 * what the RAID should contain.
 */
#include "controller/tpt_plan.h"
#include "scsi/tpt_cdb.h"
#include "test/unit/unit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMBERS 8

static uint64_t rng = 0x13198a2e03707344;

/* splitmix64: fixed seed, so a failure replays. */
static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
	return z ^ (z >> 31);
}

static uint64_t rnd_below(uint64_t n)
{
	return rnd() % n;
}

static void rnd_fill(unsigned char *p, uint64_t len)
{
	uint64_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)rnd();
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(UNIT_SKIP);
	}
	return p;
}

/* ---- the controller side: geometry, slot records, planner context ---- */

struct array {
	struct raid_geometry geo;
	struct slot_alloc slots[MAX_MEMBERS];
	struct tpt_plan_ctx ctx;
	uint16_t nr_slots;
};

static void array_init(struct array *a, unsigned int members, uint32_t unit,
		       uint64_t stripes, uint32_t block_size, uint16_t nr_slots)
{
	unsigned int m;

	memset(a, 0, sizeof(*a));
	a->geo.members = members;
	a->geo.unit_blocks = unit;
	a->geo.member_blocks = stripes * unit;
	a->nr_slots = nr_slots;
	for (m = 0; m < members; m++)
		CHECK_EQ(slot_alloc_init(&a->slots[m], nr_slots), 0);
	a->ctx.geo = &a->geo;
	a->ctx.layout = &raid5_left_symmetric;
	a->ctx.block_size = block_size;
	a->ctx.slots = a->slots;
}

static void array_destroy(struct array *a)
{
	unsigned int m;

	for (m = 0; m < a->geo.members; m++)
		slot_alloc_destroy(&a->slots[m]);
}

static bool all_slots_free(const struct array *a)
{
	unsigned int m;

	for (m = 0; m < a->geo.members; m++)
		if (slot_alloc_free_count(&a->slots[m]) != a->nr_slots)
			return false;
	return true;
}

/* ---- the target side: the simulator ---- */

enum { SIM_STAGED = 1, SIM_RESULT = 2 };

struct sim_range {			/* one buffer of a group (8.2) */
	struct sim_range *next;
	uint64_t lba;
	uint32_t blocks;
	unsigned int flags;		/* SIM_STAGED, SIM_RESULT */
	int slot;			/* first slot, or -1: private */
	unsigned int step;		/* last written in this step */
	unsigned char *data;
};

struct sim_prep {			/* a recorded PREP READ or PREP WRITE */
	struct sim_prep *next;
	const struct tpt_plan_cmd *cmd;
	struct sim_range *range;	/* PREP WRITE's buffer */
};

struct sim_slot {
	struct sim_range *owner;	/* live buffer, or NULL */
	bool valid;			/* header STATE valid */
	uint32_t group;
	uint64_t lba;
	uint32_t length;
	unsigned int step;		/* header made valid, or payload changed */
	unsigned char *payload;
};

enum sim_group { SIM_NO_GROUP, SIM_READ_GROUP, SIM_WRITE_GROUP };

struct sim_target {
	unsigned char *disk;
	enum sim_group group;
	bool final_seen;		/* a FINAL PREP arrived for the group */
	struct sim_range *ranges;
	struct sim_prep *preps;		/* in arrival order */
	struct sim_slot slot[TPT_SLOT_MAX];
};

enum sim_domain { SIM_DOM_STATE, SIM_DOM_DISK, SIM_DOM_SLOT };

/* What one command of the current step touched. */
struct sim_access {
	unsigned int cmd;
	unsigned int member;
	enum sim_domain domain;
	bool write;
	uint64_t first, end;		/* blocks, or slot numbers */
};

struct sim {
	const struct array *a;
	uint32_t bs, payload;
	struct sim_target t[MAX_MEMBERS];
	const struct tpt_plan *plan;
	unsigned char *host;
	uint64_t host_len;
	unsigned int *host_use;		/* transfers per host byte */
	unsigned int step;
	struct sim_access *acc;
	unsigned int nr_acc, cap_acc;
	bool failed;
};

static void sim_init(struct sim *s, const struct array *a)
{
	unsigned int m;

	memset(s, 0, sizeof(*s));
	s->a = a;
	s->bs = a->ctx.block_size;
	s->payload = a->geo.unit_blocks * s->bs;
	for (m = 0; m < a->geo.members; m++)
		s->t[m].disk = xcalloc(a->geo.member_blocks, s->bs);
}

static void sim_destroy(struct sim *s)
{
	unsigned int m;

	for (m = 0; m < s->a->geo.members; m++)
		free(s->t[m].disk);
	free(s->acc);
}

static void sim_fail(struct sim *s, const struct tpt_plan_cmd *cmd,
		     const char *why)
{
	if (s->failed)
		return;
	s->failed = true;
	unit_failures++;
	if (cmd)
		fprintf(stderr, "sim: step %u: %s to member %u, lba %llu, "
			"%u blocks: %s\n", s->step, tpt_plan_op_name(cmd->op),
			cmd->member, (unsigned long long)cmd->lba, cmd->blocks,
			why);
	else
		fprintf(stderr, "sim: step %u: %s\n", s->step, why);
}

static void sim_touch(struct sim *s, const struct tpt_plan_cmd *cmd,
		      unsigned int member, enum sim_domain domain, bool write,
		      uint64_t first, uint64_t end)
{
	struct sim_access *x;

	if (s->nr_acc == s->cap_acc) {
		s->cap_acc = s->cap_acc ? 2 * s->cap_acc : 64;
		s->acc = realloc(s->acc, s->cap_acc * sizeof(*s->acc));
		if (!s->acc) {
			fprintf(stderr, "out of memory\n");
			exit(UNIT_SKIP);
		}
	}
	x = &s->acc[s->nr_acc++];
	x->cmd = (unsigned int)(cmd - s->plan->cmds);
	x->member = member;
	x->domain = domain;
	x->write = write;
	x->first = first;
	x->end = end;
}

/* Within a step nothing is ordered: no command may read or write what
 * another command of the same step writes. */
static void sim_check_step_accesses(struct sim *s)
{
	unsigned int i, j;

	for (i = 0; i < s->nr_acc; i++) {
		for (j = i + 1; j < s->nr_acc; j++) {
			const struct sim_access *x = &s->acc[i], *y = &s->acc[j];

			if (x->cmd == y->cmd || x->member != y->member ||
			    x->domain != y->domain || !(x->write || y->write) ||
			    x->end <= y->first || y->end <= x->first)
				continue;
			fprintf(stderr, "sim: commands %u and %u conflict\n",
				x->cmd, y->cmd);
			sim_fail(s, &s->plan->cmds[y->cmd],
				 "touches what another command of its step writes");
			return;
		}
	}
	s->nr_acc = 0;
}

static unsigned int sim_pieces(const struct sim *s, uint32_t blocks)
{
	uint64_t bytes = (uint64_t)blocks * s->bs;

	return (unsigned int)((bytes + s->payload - 1) / s->payload);
}

/* Releasing a buffer frees its slots and rewrites their headers free
 * (8.3). */
static void sim_range_free(struct sim *s, struct sim_target *t,
			   struct sim_range *r)
{
	struct sim_range **pp;
	unsigned int i;

	for (pp = &t->ranges; *pp != r; pp = &(*pp)->next)
		;
	*pp = r->next;
	for (i = 0; r->slot >= 0 && i < sim_pieces(s, r->blocks); i++) {
		t->slot[r->slot + i].owner = NULL;
		t->slot[r->slot + i].valid = false;
	}
	free(r->data);
	free(r);
}

static struct sim_range *sim_find(struct sim_target *t, uint64_t lba,
				  uint32_t blocks, unsigned int flag,
				  const struct sim_range *except)
{
	struct sim_range *r;

	for (r = t->ranges; r; r = r->next)
		if (r != except && r->lba == lba && r->blocks == blocks &&
		    (r->flags & flag))
			return r;
	return NULL;
}

static bool sim_overlaps(const struct sim_target *t, uint64_t lba,
			 uint32_t blocks, unsigned int flag)
{
	const struct sim_range *r;

	for (r = t->ranges; r; r = r->next)
		if ((r->flags & flag) && r->lba < lba + blocks &&
		    lba < r->lba + r->blocks)
			return true;
	return false;
}

/* A buffer for the command's range, claiming its RESULT SLOT's slots as
 * a target does before any transfer (8.2). */
static struct sim_range *sim_range_new(struct sim *s,
				       const struct tpt_plan_cmd *cmd,
				       unsigned int flags, uint16_t slot)
{
	struct sim_target *t = &s->t[cmd->member];
	unsigned int n = sim_pieces(s, cmd->blocks), i;
	struct sim_range *r;

	if (slot != TPT_SLOT_NONE) {
		if ((unsigned int)slot + n > s->a->nr_slots) {
			sim_fail(s, cmd, "RESULT SLOT beyond the slot table");
			return NULL;
		}
		for (i = 0; i < n; i++) {
			if (t->slot[slot + i].owner) {
				sim_fail(s, cmd, "TPT SLOT IN USE");
				return NULL;
			}
		}
	}
	r = xcalloc(1, sizeof(*r));
	r->lba = cmd->lba;
	r->blocks = cmd->blocks;
	r->flags = flags;
	r->slot = slot == TPT_SLOT_NONE ? -1 : slot;
	r->step = s->step;
	r->data = xcalloc(cmd->blocks, s->bs);
	for (i = 0; slot != TPT_SLOT_NONE && i < n; i++) {
		t->slot[slot + i].owner = r;
		sim_touch(s, cmd, cmd->member, SIM_DOM_SLOT, true, slot + i,
			  slot + i + 1);
	}
	r->next = t->ranges;
	t->ranges = r;
	return r;
}

/* Payload first, then a valid header per piece (5.4). */
static void sim_publish(struct sim *s, struct sim_target *t,
			struct sim_range *r)
{
	uint64_t bytes = (uint64_t)r->blocks * s->bs;
	unsigned int i;

	for (i = 0; r->slot >= 0 && i < sim_pieces(s, r->blocks); i++) {
		struct sim_slot *sl = &t->slot[r->slot + i];
		uint64_t at = (uint64_t)i * s->payload;

		sl->valid = true;
		sl->group = s->plan->group;
		sl->lba = r->lba + at / s->bs;
		sl->length = (uint32_t)(bytes - at < s->payload ? bytes - at :
					s->payload);
		sl->payload = r->data + at;
		sl->step = s->step;
	}
}

static bool sim_use_group(struct sim *s, const struct tpt_plan_cmd *cmd,
			  enum sim_group kind, bool opens)
{
	struct sim_target *t = &s->t[cmd->member];

	if (t->group == SIM_NO_GROUP) {
		if (!opens) {
			sim_fail(s, cmd, "TPT UNKNOWN GROUP NUMBER");
			return false;
		}
		t->group = kind;
		t->final_seen = false;
		return true;
	}
	if (t->group != kind) {
		sim_fail(s, cmd, "TPT GROUP NUMBER IN USE: read and write group");
		return false;
	}
	return true;
}

static void sim_end_group_if_empty(struct sim_target *t)
{
	if (!t->ranges && !t->preps) {
		t->group = SIM_NO_GROUP;
		t->final_seen = false;
	}
}

static void sim_use_host(struct sim *s, uint64_t offset, uint32_t length)
{
	uint64_t i;

	for (i = 0; i < length; i++)
		s->host_use[offset + i]++;
}

/* The 5.1 header check of a SLOT descriptor at byte @pos of the range. */
static bool sim_read_slot(struct sim *s, const struct tpt_plan_cmd *cmd,
			  const struct tpt_plan_ref *ref, uint64_t pos,
			  unsigned char *dst)
{
	const struct sim_slot *sl;

	if (ref->member >= s->a->geo.members || ref->member == cmd->member) {
		sim_fail(s, cmd, "SLOT descriptor names no other member");
		return false;
	}
	if (ref->slot >= s->a->nr_slots || pos % s->bs) {
		sim_fail(s, cmd, "SLOT descriptor beyond the table or off a "
			 "block boundary");
		return false;
	}
	sl = &s->t[ref->member].slot[ref->slot];
	if (!sl->valid || sl->group != s->plan->group ||
	    sl->lba != cmd->lba + pos / s->bs || sl->length != ref->length) {
		sim_fail(s, cmd, "TPT SLOT STALE");
		return false;
	}
	if (sl->step >= s->step) {
		sim_fail(s, cmd, "reads a slot filled in its own step");
		return false;
	}
	memcpy(dst, sl->payload, ref->length);
	sim_touch(s, cmd, ref->member, SIM_DOM_SLOT, false, ref->slot,
		  ref->slot + 1);
	return true;
}

/* RMA-read the command's passive sides, in descriptor order. */
static bool sim_fetch(struct sim *s, const struct tpt_plan_cmd *cmd,
		      unsigned char *dst)
{
	uint64_t pos = 0, want = (uint64_t)cmd->blocks * s->bs;
	unsigned int j;

	for (j = 0; j < cmd->nr_refs; j++) {
		const struct tpt_plan_ref *ref = &s->plan->refs[cmd->first_ref + j];

		if (!ref->length || pos + ref->length > want) {
			sim_fail(s, cmd, "descriptors exceed TRANSFER LENGTH");
			return false;
		}
		if (ref->kind == TPT_REF_HOST) {
			if (ref->host_offset + ref->length > s->host_len) {
				sim_fail(s, cmd, "host descriptor outside the "
					 "host buffer");
				return false;
			}
			memcpy(dst + pos, s->host + ref->host_offset,
			       ref->length);
			sim_use_host(s, ref->host_offset, ref->length);
		} else if (!sim_read_slot(s, cmd, ref, pos, dst + pos)) {
			return false;
		}
		pos += ref->length;
	}
	if (pos != want) {
		sim_fail(s, cmd, "TOTAL LENGTH is not TRANSFER LENGTH");
		return false;
	}
	return true;
}

static void xor_into(unsigned char *dst, const unsigned char *src,
		     uint64_t len)
{
	uint64_t i;

	for (i = 0; i < len; i++)
		dst[i] ^= src[i];
}

static unsigned char *sim_medium(struct sim *s, unsigned int member,
				 uint64_t lba)
{
	return s->t[member].disk + lba * s->bs;
}

/* Field rules of sections 3 and 5.1, and what this planner promises on
 * top: PREP and XDWRITE read the host, READ PARITY reads other targets'
 * slots. */
static bool sim_check_cmd(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	const struct raid_geometry *g = &s->a->geo;
	enum tpt_plan_op op = cmd->op;
	bool part = op == TPT_PLAN_PART_TMP || op == TPT_PLAN_PART_BLOCK;
	bool prep = op == TPT_PLAN_PREP_READ || op == TPT_PLAN_PREP_WRITE;
	bool host_src = prep || op == TPT_PLAN_XDWRITE ||
			op == TPT_PLAN_READ_NEW_BLOCK;
	bool has_list = op != TPT_PLAN_PRE_FETCH &&
			op != TPT_PLAN_WRITE_NEW_DATA && op != TPT_PLAN_RELEASE;
	unsigned int j;

	if (cmd->member >= g->members) {
		sim_fail(s, cmd, "no such member");
		return false;
	}
	if (op == TPT_PLAN_RELEASE) {
		if (cmd->lba || cmd->blocks || cmd->nr_refs || cmd->final ||
		    cmd->result_slot != TPT_SLOT_NONE)
			sim_fail(s, cmd, "TPT RELEASE with fields set");
		return !s->failed;
	}
	if (!cmd->blocks || cmd->blocks > TPT_VENDOR_LENGTH_MAX)
		sim_fail(s, cmd, "TRANSFER LENGTH out of range");
	else if (cmd->lba + cmd->blocks > g->member_blocks)
		sim_fail(s, cmd, "LOGICAL BLOCK ADDRESS OUT OF RANGE");
	else if (cmd->final && !prep)
		sim_fail(s, cmd, "FINAL on a command without the flag");
	else if ((cmd->parity_mode && !part) ||
		 cmd->parity_mode > TPT_PARITY_COPY)
		sim_fail(s, cmd, "bad PARITY MODE");
	else if (!has_list && (cmd->nr_refs ||
			       cmd->result_slot != TPT_SLOT_NONE))
		sim_fail(s, cmd, "transfer list on a command without one");
	else if (has_list && (!cmd->nr_refs ||
			      cmd->nr_refs > TPT_XFER_DESC_MAX))
		sim_fail(s, cmd, "DESCRIPTOR COUNT out of range");
	else if (op == TPT_PLAN_PREP_READ && cmd->result_slot != TPT_SLOT_NONE)
		sim_fail(s, cmd, "RESULT SLOT in PREP READ");
	else if (cmd->first_ref + cmd->nr_refs > s->plan->nr_refs)
		sim_fail(s, cmd, "descriptors beyond the plan's");
	for (j = 0; !s->failed && j < cmd->nr_refs; j++) {
		const struct tpt_plan_ref *ref = &s->plan->refs[cmd->first_ref + j];

		if ((ref->kind == TPT_REF_HOST) != host_src)
			sim_fail(s, cmd, "descriptor of the wrong kind");
	}
	return !s->failed;
}

/* PREP READ (4.4): record; on FINAL read every record of the group and
 * RMA-write it to the host. */
static void sim_prep_read(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	struct sim_prep *p, **tail;
	unsigned int j;

	if (!sim_use_group(s, cmd, SIM_READ_GROUP, true))
		return;
	if (t->final_seen) {
		sim_fail(s, cmd, "PREP READ after its group's FINAL");
		return;
	}
	for (tail = &t->preps; *tail; tail = &(*tail)->next)
		;
	p = xcalloc(1, sizeof(*p));
	p->cmd = cmd;
	*tail = p;
	sim_touch(s, cmd, cmd->member, SIM_DOM_DISK, false, cmd->lba,
		  cmd->lba + cmd->blocks);
	if (!cmd->final)
		return;
	t->final_seen = true;
	while ((p = t->preps)) {
		const struct tpt_plan_cmd *rc = p->cmd;
		uint64_t pos = 0;

		for (j = 0; j < rc->nr_refs; j++) {
			const struct tpt_plan_ref *ref =
				&s->plan->refs[rc->first_ref + j];

			if (ref->host_offset + ref->length > s->host_len ||
			    pos + ref->length > (uint64_t)rc->blocks * s->bs) {
				sim_fail(s, rc, "host descriptor out of range");
				return;
			}
			memcpy(s->host + ref->host_offset,
			       sim_medium(s, rc->member, rc->lba) + pos,
			       ref->length);
			sim_use_host(s, ref->host_offset, ref->length);
			pos += ref->length;
		}
		if (pos != (uint64_t)rc->blocks * s->bs) {
			sim_fail(s, rc, "TOTAL LENGTH is not TRANSFER LENGTH");
			return;
		}
		t->preps = p->next;
		free(p);
	}
	sim_end_group_if_empty(t);
}

/* PREP WRITE (4.5): stage, claim the slots; on FINAL fetch every record
 * of the group from the host and make the slots valid. */
static void sim_prep_write(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	struct sim_prep *p, **tail;
	struct sim_range *r;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, true))
		return;
	if (t->final_seen) {
		sim_fail(s, cmd, "PREP WRITE after its group's FINAL");
		return;
	}
	if (sim_overlaps(t, cmd->lba, cmd->blocks, SIM_STAGED)) {
		sim_fail(s, cmd, "TPT GROUP NUMBER IN USE: staged twice");
		return;
	}
	r = sim_range_new(s, cmd, SIM_STAGED | SIM_RESULT, cmd->result_slot);
	if (!r)
		return;
	for (tail = &t->preps; *tail; tail = &(*tail)->next)
		;
	p = xcalloc(1, sizeof(*p));
	p->cmd = cmd;
	p->range = r;
	*tail = p;
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, cmd->lba,
		  cmd->lba + cmd->blocks);
	if (!cmd->final)
		return;
	t->final_seen = true;
	while ((p = t->preps)) {
		if (!sim_fetch(s, p->cmd, p->range->data))
			return;
		sim_publish(s, t, p->range);
		t->preps = p->next;
		free(p);
	}
}

/* XDWRITE (4.1): stage the new data, export new XOR old. */
static void sim_xdwrite(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	uint64_t bytes = (uint64_t)cmd->blocks * s->bs;
	struct sim_range *staged, *result;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, true))
		return;
	if (sim_overlaps(t, cmd->lba, cmd->blocks, SIM_STAGED)) {
		sim_fail(s, cmd, "TPT GROUP NUMBER IN USE: staged twice");
		return;
	}
	result = sim_range_new(s, cmd, SIM_RESULT, cmd->result_slot);
	if (!result || !sim_fetch(s, cmd, result->data))
		return;
	staged = sim_range_new(s, cmd, SIM_STAGED, TPT_SLOT_NONE);
	memcpy(staged->data, result->data, bytes);
	xor_into(result->data, sim_medium(s, cmd->member, cmd->lba), bytes);
	sim_publish(s, t, result);
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, cmd->lba,
		  cmd->lba + cmd->blocks);
	sim_touch(s, cmd, cmd->member, SIM_DOM_DISK, false, cmd->lba,
		  cmd->lba + cmd->blocks);
}

/* The four READ PARITY commands (4.7-4.10, 8.2), with the target's
 * rule for accumulating in place: only into a result that is not staged
 * data, named by the same slot (or none, for a private one). */
static void sim_read_parity(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	enum tpt_plan_op op = cmd->op;
	bool part = op == TPT_PLAN_PART_TMP || op == TPT_PLAN_PART_BLOCK;
	bool tmp = op == TPT_PLAN_PART_TMP || op == TPT_PLAN_COMP_TMP;
	bool medium = part && cmd->parity_mode == TPT_PARITY_XOR_MEDIUM;
	bool group = (part && cmd->parity_mode == TPT_PARITY_XOR_GROUP) ||
		     op == TPT_PLAN_COMP_TMP;
	unsigned int outcome = tmp ? SIM_RESULT : SIM_STAGED | SIM_RESULT;
	int named = cmd->result_slot == TPT_SLOT_NONE ? -1 : cmd->result_slot;
	uint64_t bytes = (uint64_t)cmd->blocks * s->bs;
	struct sim_range *operand = NULL, *dest, *old;
	unsigned char *fetched;
	unsigned int flag, i;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, !group))
		return;
	if (group) {
		operand = sim_find(t, cmd->lba, cmd->blocks, SIM_RESULT, NULL);
		if (!operand) {
			sim_fail(s, cmd, "TPT LBA RANGE NOT BUFFERED IN GROUP");
			return;
		}
		if (operand->step >= s->step) {
			sim_fail(s, cmd, "its operand is written in its own step");
			return;
		}
		sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, false, cmd->lba,
			  cmd->lba + cmd->blocks);
	}
	if (medium)
		sim_touch(s, cmd, cmd->member, SIM_DOM_DISK, false, cmd->lba,
			  cmd->lba + cmd->blocks);
	if ((outcome & SIM_STAGED) &&
	    sim_overlaps(t, cmd->lba, cmd->blocks, SIM_STAGED)) {
		sim_fail(s, cmd, "TPT GROUP NUMBER IN USE: staged twice");
		return;
	}
	fetched = xcalloc(cmd->blocks, s->bs);
	if (!sim_fetch(s, cmd, fetched)) {
		free(fetched);
		return;
	}
	if (operand && !(outcome & SIM_STAGED) &&
	    !(operand->flags & SIM_STAGED) && operand->slot == named) {
		dest = operand;
		for (i = 0; dest->slot >= 0 && i < sim_pieces(s, dest->blocks); i++)
			sim_touch(s, cmd, cmd->member, SIM_DOM_SLOT, true,
				  dest->slot + i, dest->slot + i + 1);
	} else {
		dest = sim_range_new(s, cmd, 0, cmd->result_slot);
		if (!dest) {
			free(fetched);
			return;
		}
		if (operand)
			memcpy(dest->data, operand->data, bytes);
		else if (medium)
			memcpy(dest->data, sim_medium(s, cmd->member, cmd->lba),
			       bytes);
		/* The outcome replaces the previous result (and staged
		 * data) for exactly these blocks. */
		for (flag = SIM_STAGED; flag <= SIM_RESULT; flag <<= 1) {
			if (!(outcome & flag))
				continue;
			old = sim_find(t, cmd->lba, cmd->blocks, flag, dest);
			if (!old)
				continue;
			old->flags &= ~flag;
			if (!old->flags)
				sim_range_free(s, t, old);
		}
		dest->flags = outcome;
	}
	xor_into(dest->data, fetched, bytes);
	free(fetched);
	dest->step = s->step;
	sim_publish(s, t, dest);
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, cmd->lba,
		  cmd->lba + cmd->blocks);
}

/* WRITE NEW DATA (4.11): all or nothing, then release the range. */
static void sim_write_new_data(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	uint64_t end = cmd->lba + cmd->blocks, covered = 0;
	struct sim_range *r, *next;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, false))
		return;
	for (r = t->ranges; r; r = r->next) {
		if (!(r->flags & SIM_STAGED) || r->lba >= end ||
		    r->lba + r->blocks <= cmd->lba)
			continue;
		if (r->lba < cmd->lba || r->lba + r->blocks > end) {
			sim_fail(s, cmd, "a staged range sticks out of it");
			return;
		}
		covered += r->blocks;
	}
	if (covered != cmd->blocks) {
		sim_fail(s, cmd, "TPT LBA RANGE NOT BUFFERED IN GROUP");
		return;
	}
	for (r = t->ranges; r; r = r->next)
		if ((r->flags & SIM_STAGED) && r->lba >= cmd->lba &&
		    r->lba < end)
			memcpy(sim_medium(s, cmd->member, r->lba), r->data,
			       (uint64_t)r->blocks * s->bs);
	for (r = t->ranges; r; r = next) {
		next = r->next;
		if (r->lba < end && cmd->lba < r->lba + r->blocks)
			sim_range_free(s, t, r);
	}
	sim_touch(s, cmd, cmd->member, SIM_DOM_DISK, true, cmd->lba, end);
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, cmd->lba, end);
	sim_end_group_if_empty(t);
}

static void sim_release(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	struct sim_prep *p;

	while (t->ranges)
		sim_range_free(s, t, t->ranges);
	while ((p = t->preps)) {
		t->preps = p->next;
		free(p);
	}
	sim_end_group_if_empty(t);
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, 0, UINT64_MAX);
}

static void sim_exec(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	if (!sim_check_cmd(s, cmd))
		return;
	switch (cmd->op) {
	case TPT_PLAN_PREP_READ:
		sim_prep_read(s, cmd);
		break;
	case TPT_PLAN_PREP_WRITE:
		sim_prep_write(s, cmd);
		break;
	case TPT_PLAN_XDWRITE:
		sim_xdwrite(s, cmd);
		break;
	case TPT_PLAN_PRE_FETCH:
		/* A cache hint: no group state (4.3). */
		break;
	case TPT_PLAN_PART_TMP:
	case TPT_PLAN_PART_BLOCK:
	case TPT_PLAN_COMP_TMP:
	case TPT_PLAN_COMP_BLOCK:
		sim_read_parity(s, cmd);
		break;
	case TPT_PLAN_WRITE_NEW_DATA:
		sim_write_new_data(s, cmd);
		break;
	case TPT_PLAN_RELEASE:
		sim_release(s, cmd);
		break;
	default:
		sim_fail(s, cmd, "a command this planner does not send");
		break;
	}
}

static void sim_begin(struct sim *s, const struct tpt_plan *p,
		      unsigned char *host, uint64_t host_len)
{
	s->plan = p;
	s->host = host;
	s->host_len = host_len;
	s->host_use = xcalloc(host_len, sizeof(*s->host_use));
}

static void sim_end(struct sim *s)
{
	free(s->host_use);
	s->host_use = NULL;
}

/* Steps [@first, @end) of the plan, each command in plan order. */
static void sim_steps(struct sim *s, unsigned int first, unsigned int end)
{
	const struct tpt_plan *p = s->plan;
	unsigned int i, j;

	for (i = first; i < end && !s->failed; i++) {
		s->step++;
		s->nr_acc = 0;
		for (j = 0; j < p->steps[i].nr_cmds && !s->failed; j++)
			sim_exec(s, &p->cmds[p->steps[i].first_cmd + j]);
		if (!s->failed)
			sim_check_step_accesses(s);
	}
}

static void sim_check_host_used_once(struct sim *s)
{
	uint64_t i;

	for (i = 0; i < s->host_len && !s->failed; i++)
		if (s->host_use[i] != 1)
			sim_fail(s, NULL, "a host byte is not moved exactly once");
}

/* After a request every group is gone from every target (8.3). */
static void sim_check_idle(struct sim *s)
{
	unsigned int m, i;

	for (m = 0; m < s->a->geo.members && !s->failed; m++) {
		struct sim_target *t = &s->t[m];

		if (t->ranges || t->preps || t->group != SIM_NO_GROUP)
			sim_fail(s, NULL, "a group is left behind on a target");
		for (i = 0; i < s->a->nr_slots && !s->failed; i++)
			if (t->slot[i].owner || t->slot[i].valid)
				sim_fail(s, NULL, "a slot is left live");
	}
}

/* ---- static checks of a plan ---- */

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

		if (cmd->result_slot == TPT_SLOT_NONE)
			continue;
		CHECK(cmd->result_slot < a->nr_slots);
		if (cmd->result_slot >= a->nr_slots)
			continue;
		CHECK(taken[cmd->member][cmd->result_slot]);
		taken[cmd->member][cmd->result_slot] = 2;
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

static unsigned char *unit_in_array(struct world *w, uint64_t stripe,
				    unsigned int d)
{
	return w->data + (stripe * (w->a.geo.members - 1) + d) *
			 w->a.geo.unit_blocks * w->s.bs;
}

static void world_init(struct world *w, unsigned int members, uint32_t unit,
		       uint64_t stripes, uint32_t block_size, uint16_t nr_slots)
{
	const struct raid_layout_ops *l = &raid5_left_symmetric;
	uint64_t s, unit_bytes = (uint64_t)unit * block_size;
	unsigned int d;

	memset(w, 0, sizeof(*w));
	array_init(&w->a, members, unit, stripes, block_size, nr_slots);
	sim_init(&w->s, &w->a);
	w->array_blocks = l->array_blocks(&w->a.geo);
	w->data = xcalloc(w->array_blocks, block_size);
	rnd_fill(w->data, w->array_blocks * block_size);
	for (s = 0; s < stripes; s++) {
		unsigned char *parity =
			unit_on_member(w, l->parity_member(&w->a.geo, s, 0), s);

		for (d = 0; d < members - 1; d++) {
			memcpy(unit_on_member(w, l->data_member(&w->a.geo, s, d), s),
			       unit_in_array(w, s, d), unit_bytes);
			xor_into(parity, unit_in_array(w, s, d), unit_bytes);
		}
	}
}

static void world_destroy(struct world *w)
{
	sim_destroy(&w->s);
	array_destroy(&w->a);
	free(w->data);
}

/* Every data unit holds what the array should and every parity unit is
 * the XOR of its stripe's data. */
static bool world_consistent(struct world *w)
{
	const struct raid_layout_ops *l = &raid5_left_symmetric;
	const struct raid_geometry *g = &w->a.geo;
	uint64_t unit_bytes = (uint64_t)g->unit_blocks * w->s.bs, s, i;
	unsigned char *acc = xcalloc(1, unit_bytes);
	bool ok = true;
	unsigned int d;

	for (s = 0; s < g->member_blocks / g->unit_blocks && ok; s++) {
		memcpy(acc, unit_on_member(w, l->parity_member(g, s, 0), s),
		       unit_bytes);
		for (d = 0; d < g->members - 1; d++) {
			const unsigned char *u =
				unit_on_member(w, l->data_member(g, s, d), s);

			if (memcmp(u, unit_in_array(w, s, d), unit_bytes)) {
				fprintf(stderr, "stripe %llu unit %u: wrong data\n",
					(unsigned long long)s, d);
				ok = false;
			}
			xor_into(acc, u, unit_bytes);
		}
		for (i = 0; i < unit_bytes && ok; i++) {
			if (acc[i]) {
				fprintf(stderr, "stripe %llu: wrong parity\n",
					(unsigned long long)s);
				ok = false;
			}
		}
	}
	free(acc);
	return ok;
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
		sim_check_host_used_once(&w->s);
		memcpy(w->data + lba * w->s.bs, host, len);
	} else {
		sim_steps(&w->s, 0, (unsigned int)rnd_below(p->nr_steps));
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
	tpt_plan_return_slots(&w->a.ctx, p);
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
	err = tpt_plan_write(&w->a.ctx, lba, blocks, ++w->group, &p);
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
	err = tpt_plan_read(&w->a.ctx, lba, blocks, ++w->group, &p);
	CHECK_EQ(err, 0);
	if (!err) {
		check_plan_shape(&w->a, &p, w->group);
		CHECK_EQ(p.nr_slots, 0);
		CHECK_EQ(p.nr_steps, 1);
		sim_begin(&w->s, &p, host, len);
		sim_steps(&w->s, 0, p.nr_steps);
		sim_check_host_used_once(&w->s);
		sim_end(&w->s);
		sim_check_idle(&w->s);
		CHECK_MEM(host, w->data + lba * w->s.bs, len);
		tpt_plan_free(&p);
	}
	free(host);
}

/* ---- slot records ---- */

static void slot_alloc_limits(void)
{
	struct slot_alloc a;
	uint16_t first;

	CHECK_EQ(slot_alloc_init(&a, 0), -EINVAL);
	CHECK_EQ(slot_alloc_init(&a, TPT_SLOT_MAX + 1), -EINVAL);
	CHECK_EQ(slot_alloc_init(&a, TPT_SLOT_MAX), 0);
	CHECK_EQ(slot_alloc_free_count(&a), TPT_SLOT_MAX);
	CHECK_EQ(slot_alloc_get(&a, TPT_SLOT_MAX, &first), 0);
	CHECK_EQ(first, 0);
	CHECK_EQ(slot_alloc_free_count(&a), 0);
	CHECK_EQ(slot_alloc_get(&a, 1, &first), -EAGAIN);
	slot_alloc_put(&a, 0, TPT_SLOT_MAX);
	CHECK_EQ(slot_alloc_free_count(&a), TPT_SLOT_MAX);
	slot_alloc_destroy(&a);

	CHECK_EQ(slot_alloc_init(&a, 16), 0);
	CHECK_EQ(slot_alloc_get(&a, 0, &first), -EINVAL);
	CHECK_EQ(slot_alloc_get(&a, 17, &first), -EINVAL);
	slot_alloc_destroy(&a);
}

static void slot_alloc_exhaustion_and_runs(void)
{
	struct slot_alloc a;
	uint16_t first, i;

	CHECK_EQ(slot_alloc_init(&a, 16), 0);
	for (i = 0; i < 16; i++) {
		CHECK_EQ(slot_alloc_get(&a, 1, &first), 0);
		CHECK_EQ(first, i);
	}
	CHECK_EQ(slot_alloc_get(&a, 1, &first), -EAGAIN);
	slot_alloc_put(&a, 5, 1);
	slot_alloc_put(&a, 9, 1);
	/* Two free slots, but not next to each other. */
	CHECK_EQ(slot_alloc_free_count(&a), 2);
	CHECK_EQ(slot_alloc_get(&a, 2, &first), -EAGAIN);
	CHECK_EQ(slot_alloc_get(&a, 1, &first), 0);
	CHECK_EQ(first, 5);
	slot_alloc_put(&a, 0, 4);
	CHECK_EQ(slot_alloc_get(&a, 3, &first), 0);
	CHECK_EQ(first, 0);
	CHECK_EQ(slot_alloc_get(&a, 2, &first), -EAGAIN);
	CHECK_EQ(slot_alloc_get(&a, 1, &first), 0);
	CHECK_EQ(first, 3);
	CHECK_EQ(slot_alloc_get(&a, 1, &first), 0);
	CHECK_EQ(first, 9);
	CHECK_EQ(slot_alloc_free_count(&a), 0);
	slot_alloc_destroy(&a);
}

/* Random gets and puts against a record of who holds what: a slot is
 * never handed out twice. */
static void slot_alloc_never_doubles(void)
{
	static unsigned char held[TPT_SLOT_MAX];
	struct { uint16_t first, n; } runs[TPT_SLOT_MAX];
	unsigned int nr_runs = 0, i, j, free_slots = 300;
	struct slot_alloc a;
	uint16_t first, n;
	int err;

	memset(held, 0, sizeof(held));
	CHECK_EQ(slot_alloc_init(&a, 300), 0);
	for (i = 0; i < 20000; i++) {
		if (nr_runs && rnd_below(2)) {
			j = (unsigned int)rnd_below(nr_runs);
			slot_alloc_put(&a, runs[j].first, runs[j].n);
			for (n = 0; n < runs[j].n; n++)
				held[runs[j].first + n] = 0;
			free_slots += runs[j].n;
			runs[j] = runs[--nr_runs];
			continue;
		}
		n = (uint16_t)(1 + rnd_below(6));
		err = slot_alloc_get(&a, n, &first);
		if (err) {
			CHECK_EQ(err, -EAGAIN);
			continue;
		}
		CHECK(first + n <= 300);
		for (j = 0; j < n; j++) {
			CHECK_EQ(held[first + j], 0);
			held[first + j] = 1;
		}
		free_slots -= n;
		runs[nr_runs].first = first;
		runs[nr_runs++].n = n;
		CHECK_EQ(slot_alloc_free_count(&a), free_slots);
	}
	slot_alloc_destroy(&a);
}

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
		CHECK_EQ(tpt_plan_write(&w.a.ctx, 8 - blocks, blocks, ++w.group,
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

static void full_stripe_write(void)
{
	unsigned int n, i, d, calc, parity;
	struct paper_counts pc;
	struct tpt_plan p;
	unsigned char *host;
	struct world w;
	uint16_t acc;

	for (n = 3; n <= MAX_MEMBERS; n++) {
		const struct raid_layout_ops *l = &raid5_left_symmetric;
		uint32_t unit = 16, blocks = (n - 1) * unit;
		uint64_t lba = blocks;		/* stripe 1 */

		world_init(&w, n, unit, 4, 512, 64);
		CHECK_EQ(tpt_plan_write(&w.a.ctx, lba, blocks, ++w.group, &p), 0);
		CHECK_EQ(p.nr_cmds, 3 * n - 2);
		CHECK_EQ(p.nr_steps, n + 1);
		if (p.nr_cmds != 3 * n - 2 || p.nr_steps != n + 1)
			goto run;
		parity = l->parity_member(&w.a.geo, 1, 0);
		calc = l->data_member(&w.a.geo, 1, 0);	/* calculator_rr 0 */

		/* Step 1: a PREP WRITE per block, each FINAL (one per member),
		 * all but the calculator's exported. */
		CHECK_EQ(p.steps[0].nr_cmds, n - 1);
		for (d = 0; d < n - 1; d++) {
			const struct tpt_plan_cmd *c = &p.cmds[d];

			expect_cmd(&p, d, TPT_PLAN_PREP_WRITE,
				   l->data_member(&w.a.geo, 1, d), unit, unit);
			CHECK(c->final);
			CHECK_EQ(c->result_slot == TPT_SLOT_NONE, c->member == calc);
			CHECK_EQ(ref_of(&p, d, 0)->host_offset, d * unit * 512);
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
			CHECK_EQ(ref_of(&p, ci, 0)->slot, p.cmds[i].result_slot);
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

/* Tables I and II up to the widest array, without executing: the
 * simulator stops at MAX_MEMBERS. */
static void wide_arrays_count_like_the_paper(void)
{
	struct slot_alloc *slots = xcalloc(RAID_MAX_MEMBERS, sizeof(*slots));
	struct raid_geometry g = { .unit_blocks = 8, .member_blocks = 8 * 64 };
	struct tpt_plan_ctx c = {
		.geo = &g, .layout = &raid5_left_symmetric, .block_size = 512,
		.slots = slots,
	};
	struct paper_counts pc;
	struct tpt_plan p;
	unsigned int n, m;

	for (n = MAX_MEMBERS + 1; n <= RAID_MAX_MEMBERS; n++) {
		g.members = n;
		for (m = 0; m < n; m++)
			CHECK_EQ(slot_alloc_init(&slots[m], 8), 0);
		CHECK_EQ(tpt_plan_write(&c, 3 * 8 * (n - 1), 8 * (n - 1), 1, &p),
			 0);
		paper_counts(&p, 8 * 512, &pc);
		CHECK_EQ(pc.controller_ops, 3 * n - 1);
		CHECK_EQ(pc.target_ops, 5 * n - 4);
		CHECK_EQ(pc.target_units, 3 * (n - 1));
		CHECK_EQ(p.nr_steps, n + 1);
		tpt_plan_return_slots(&c, &p);
		tpt_plan_free(&p);

		CHECK_EQ(tpt_plan_write(&c, 8 * (n - 1) + 8 * (n - 2), 8, 2, &p),
			 0);
		paper_counts(&p, 8 * 512, &pc);
		CHECK_EQ(pc.controller_ops, 6);
		CHECK_EQ(pc.target_ops, 7);
		tpt_plan_return_slots(&c, &p);
		tpt_plan_free(&p);
		for (m = 0; m < n; m++)
			CHECK_EQ(slot_alloc_free_count(&slots[m]), 8);
	}
	free(slots);
}

static void reads_match_table(void)
{
	struct paper_counts pc;
	struct tpt_plan p;
	struct world w;
	unsigned int n, i;

	for (n = 3; n <= MAX_MEMBERS; n++) {
		world_init(&w, n, 8, 4, 512, 16);
		CHECK_EQ(tpt_plan_read(&w.a.ctx, 8 * (n - 1) + 8, 8, 1, &p), 0);
		CHECK_EQ(p.nr_cmds, 1);
		CHECK(p.cmds[0].final);
		paper_counts(&p, 8 * 512, &pc);
		CHECK_EQ(pc.controller_ops, 2);
		CHECK_EQ(pc.target_ops, 2);
		CHECK_EQ(pc.host_units, 1);
		CHECK_EQ(pc.target_units, 1);
		tpt_plan_free(&p);

		CHECK_EQ(tpt_plan_read(&w.a.ctx, 8 * (n - 1), 8 * (n - 1), 1,
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
	CHECK_EQ(tpt_plan_read(&w.a.ctx, 6, 12, 7, &p), 0);
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

	/* Two whole stripes: members 0 and 1 get two PREP READs, FINAL only
	 * on the second. */
	CHECK_EQ(tpt_plan_read(&w.a.ctx, 0, 48, 8, &p), 0);
	CHECK_EQ(p.nr_cmds, 6);
	expect_cmd(&p, 0, TPT_PLAN_PREP_READ, 0, 0, 8);
	expect_cmd(&p, 4, TPT_PLAN_PREP_READ, 0, 8, 8);
	CHECK(!p.cmds[0].final && p.cmds[4].final);
	CHECK(!p.cmds[1].final && p.cmds[5].final);
	CHECK(p.cmds[2].final && p.cmds[3].final);
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
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 4, 10, ++w.group, &p), 0);
	CHECK_EQ(p.nr_steps, 4);
	CHECK_EQ(p.nr_cmds, 12);
	if (p.nr_steps != 4 || p.nr_cmds != 12)
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

	CHECK_EQ(p.steps[1].nr_cmds, 3);
	expect_cmd(&p, 5, TPT_PLAN_PART_BLOCK, 3, 0, 4);
	expect_cmd(&p, 6, TPT_PLAN_PART_TMP, 3, 4, 2);
	expect_cmd(&p, 7, TPT_PLAN_PART_BLOCK, 3, 6, 2);
	CHECK_EQ(p.cmds[5].parity_mode, TPT_PARITY_XOR_MEDIUM);
	CHECK_EQ(p.cmds[6].parity_mode, TPT_PARITY_XOR_MEDIUM);
	CHECK_EQ(p.cmds[7].parity_mode, TPT_PARITY_XOR_MEDIUM);
	CHECK_EQ(ref_of(&p, 6, 0)->member, 0);
	CHECK_EQ(ref_of(&p, 6, 0)->slot, p.cmds[1].result_slot);
	CHECK_EQ(p.steps[2].nr_cmds, 1);
	expect_cmd(&p, 8, TPT_PLAN_PART_BLOCK, 3, 4, 2);
	CHECK_EQ(p.cmds[8].parity_mode, TPT_PARITY_XOR_GROUP);
	CHECK_EQ(ref_of(&p, 8, 0)->member, 1);
	CHECK_EQ(ref_of(&p, 8, 0)->slot, p.cmds[2].result_slot);

	/* One WRITE NEW DATA per member over its contiguous staged run. */
	CHECK_EQ(p.steps[3].nr_cmds, 3);
	expect_cmd(&p, 9, TPT_PLAN_WRITE_NEW_DATA, 0, 4, 4);
	expect_cmd(&p, 10, TPT_PLAN_WRITE_NEW_DATA, 1, 0, 6);
	expect_cmd(&p, 11, TPT_PLAN_WRITE_NEW_DATA, 3, 0, 8);
run_first:
	rnd_fill(host, sizeof(host));
	world_run_write(&w, &p, 4, host, 10, false);

	/* Tail of unit 0 and head of unit 1 that do not overlap: no cut,
	 * and the parity's two intervals leave a gap, so it gets two WRITE
	 * NEW DATA. */
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 6, 4, ++w.group, &p), 0);
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
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 5, 71, ++w.group, &p), 0);
	for (i = 0; i < p.nr_cmds; i++)
		counts[p.cmds[i].op]++;
	/* Head pieces [5,8), [0,8), [0,8): the parity's offsets split at 5,
	 * so units 1 and 2 XDWRITE twice; [0,5) folds 2 deltas, [5,8) 3.
	 * Tail: one piece, one delta. */
	CHECK_EQ(counts[TPT_PLAN_XDWRITE], 5 + 1);
	CHECK_EQ(counts[TPT_PLAN_PRE_FETCH], 2);
	CHECK_EQ(counts[TPT_PLAN_PART_TMP], 1 + 2);
	CHECK_EQ(counts[TPT_PLAN_PART_BLOCK], 1 + 1 + 1);
	CHECK_EQ(counts[TPT_PLAN_PREP_WRITE], 2 * 3);
	CHECK_EQ(counts[TPT_PLAN_COMP_TMP], 2 * 2);
	CHECK_EQ(counts[TPT_PLAN_COMP_BLOCK], 2);
	/* The parts share steps: host reads, COMP TMP and the longest
	 * parity chain (3 deltas), COMP BLOCK, WRITE NEW DATA. */
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
	 * WRITE NEW DATA per member covers all five. */
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 0, 5 * 24, ++w.group, &p), 0);
	memset(counts, 0, sizeof(counts));
	for (i = 0; i < p.nr_cmds; i++)
		counts[p.cmds[i].op]++;
	CHECK_EQ(counts[TPT_PLAN_PREP_WRITE], 15);
	CHECK_EQ(counts[TPT_PLAN_COMP_TMP], 10);
	CHECK_EQ(counts[TPT_PLAN_COMP_BLOCK], 5);
	CHECK_EQ(counts[TPT_PLAN_WRITE_NEW_DATA], 4);
	CHECK_EQ(p.nr_cmds, 34);
	CHECK_EQ(p.nr_steps, 5);
	if (p.nr_steps != 5)
		goto run_second;
	for (i = p.steps[4].first_cmd; i < p.nr_cmds; i++) {
		CHECK_EQ(p.cmds[i].lba, 0);
		CHECK_EQ(p.cmds[i].blocks, 40);
	}
	/* Both COMP TMP steps serve all five stripes side by side. */
	CHECK_EQ(p.steps[1].nr_cmds, 5);
	CHECK_EQ(p.steps[2].nr_cmds, 5);
	CHECK_EQ(p.steps[3].nr_cmds, 5);
	tpt_plan_count(&p, &c);
	CHECK_EQ(c.commands, 34);
	CHECK_EQ(c.host_bytes, 5 * 24 * 512);
	CHECK_EQ(c.peer_bytes, 5 * 3 * 8 * 512);
run_second:
	rnd_fill(host, 5 * 24 * 512);
	world_run_write(&w, &p, 0, host, 5 * 24, false);
	free(host);
	world_destroy(&w);
}

/* The calculator rotates: over requests to one stripe among its data
 * members, and within a request over the members, never the parity. */
static void calculator_rotation(void)
{
	const struct raid_layout_ops *l = &raid5_left_symmetric;
	unsigned int seen[MAX_MEMBERS] = { 0 }, i, j, m;
	unsigned char *host = xcalloc(5 * 32, 512);
	struct tpt_plan p;
	struct world w;

	world_init(&w, 5, 8, 10, 512, 64);
	for (i = 0; i < 8; i++) {
		CHECK_EQ(w.a.ctx.calculator_rr, i);
		CHECK_EQ(tpt_plan_write(&w.a.ctx, 2 * 32, 32, ++w.group, &p), 0);
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
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 1, 30, ++w.group, &p), 0);
	rnd_fill(host, 30 * 512);
	world_run_write(&w, &p, 1, host, 30, false);
	CHECK_EQ(w.a.ctx.calculator_rr, 8);

	/* Five stripes in one request: five different calculators. */
	memset(seen, 0, sizeof(seen));
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 0, 5 * 32, ++w.group, &p), 0);
	for (j = 0; j < p.nr_cmds; j++) {
		if (p.cmds[j].op != TPT_PLAN_COMP_TMP)
			continue;
		CHECK(p.cmds[j].member !=
		      l->parity_member(&w.a.geo, p.cmds[j].lba / 8, 0));
		seen[p.cmds[j].member]++;
	}
	for (m = 0; m < 5; m++)
		CHECK_EQ(seen[m], 3);
	rnd_fill(host, 5 * 32 * 512);
	world_run_write(&w, &p, 0, host, 5 * 32, false);
	CHECK_EQ(w.a.ctx.calculator_rr, 9);
	free(host);
	world_destroy(&w);
}

static void bad_requests(void)
{
	struct tpt_plan p;
	struct world w;
	struct tpt_plan_ctx c;

	world_init(&w, 4, 8, 6, 512, 16);
	c = w.a.ctx;
	CHECK_EQ(tpt_plan_read(&c, 0, 0, 1, &p), -EINVAL);
	CHECK_EQ(tpt_plan_write(&c, 0, 0, 1, &p), -EINVAL);
	CHECK_EQ(tpt_plan_read(&c, w.array_blocks - 3, 4, 1, &p), -EINVAL);
	CHECK_EQ(tpt_plan_write(&c, w.array_blocks, 1, 1, &p), -EINVAL);
	CHECK_EQ(tpt_plan_write(&c, UINT64_MAX, 2, 1, &p), -EINVAL);
	CHECK_EQ(tpt_plan_read(&c, w.array_blocks - 4, 4, 1, &p), 0);
	tpt_plan_free(&p);

	c.block_size = 0;
	CHECK_EQ(tpt_plan_read(&c, 0, 1, 1, &p), -EINVAL);
	/* A slot payload that is no multiple of 512. */
	c.block_size = 32;
	CHECK_EQ(tpt_plan_write(&c, 0, 1, 1, &p), -EINVAL);
	c = w.a.ctx;
	c.slots = NULL;
	CHECK_EQ(tpt_plan_write(&c, 0, 1, 1, &p), -EINVAL);
	c = w.a.ctx;
	w.a.geo.members = 2;
	CHECK_EQ(tpt_plan_read(&c, 0, 1, 1, &p), -EINVAL);
	w.a.geo.members = 4;
	/* Member LBAs beyond 48 bits, a unit beyond a 24-bit length. */
	w.a.geo.member_blocks = (UINT64_C(1) << 48) + 8;
	CHECK_EQ(tpt_plan_read(&c, 0, 1, 1, &p), -EINVAL);
	w.a.geo.member_blocks = UINT64_C(1) << 48;
	CHECK_EQ(tpt_plan_read(&c, 0, 1, 1, &p), 0);
	tpt_plan_free(&p);
	w.a.geo.unit_blocks = 1 << 24;
	w.a.geo.member_blocks = 1 << 24;
	c.block_size = 1;
	CHECK_EQ(tpt_plan_read(&c, 0, 1, 1, &p), -EINVAL);
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
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 24, 24, ++w.group, &p), -EAGAIN);
	CHECK_EQ(p.nr_cmds, 0);
	for (m = 0; m < 4; m++)
		CHECK_EQ(slot_alloc_free_count(&w.a.slots[m]), free_before[m]);
	CHECK_EQ(w.a.ctx.calculator_rr, 0);
	/* Unit 0 of stripe 1 is on member 3 too. */
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 24, 1, ++w.group, &p), -EAGAIN);
	/* Stripe 0 needs nothing of member 3 (its parity). */
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 0, 24, ++w.group, &p), 0);
	rnd_fill(host, sizeof(host));
	for (m = 0; m < 4; m++)
		slot_alloc_put(&w.a.slots[3], held[m], 1);
	world_run_write(&w, &p, 0, host, 24, false);
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 24, 24, ++w.group, &p), 0);
	world_run_write(&w, &p, 24, host, 24, false);

	/* Six full stripes need more than four slots on some member, which
	 * no amount of waiting provides. */
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 0, 6 * 24, ++w.group, &p), -E2BIG);
	CHECK(all_slots_free(&w.a));
	world_destroy(&w);

	/* One slot per member: a full stripe of N=3 needs one on each data
	 * member (block, accumulator), two on one member is too many; so
	 * are two deltas from one member in a partial stripe. */
	world_init(&w, 3, 8, 6, 512, 1);
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 0, 16, ++w.group, &p), 0);
	world_run_write(&w, &p, 0, host, 16, false);
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 0, 32, ++w.group, &p), -E2BIG);
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 4, 10, ++w.group, &p), -E2BIG);
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
	CHECK_EQ(tpt_plan_write(&w.a.ctx, 8, 8, 77, &p), 0);
	CHECK_EQ(tpt_plan_release(&p, &rel), 0);
	CHECK_EQ(rel.group, 77);
	CHECK_EQ(rel.nr_steps, 1);
	CHECK_EQ(rel.nr_cmds, 2);
	CHECK_EQ(rel.nr_refs, 0);
	CHECK_EQ(rel.nr_slots, 0);
	expect_cmd(&rel, 0, TPT_PLAN_RELEASE, 1, 0, 0);
	expect_cmd(&rel, 1, TPT_PLAN_RELEASE, 4, 0, 0);
	tpt_plan_free(&rel);
	tpt_plan_return_slots(&w.a.ctx, &p);
	tpt_plan_free(&p);

	CHECK_EQ(tpt_plan_write(&w.a.ctx, 0, 64, 78, &p), 0);
	CHECK_EQ(tpt_plan_release(&p, &rel), 0);
	CHECK_EQ(rel.nr_cmds, 5);
	for (i = 0; i < 5; i++) {
		expect_cmd(&rel, i, TPT_PLAN_RELEASE, i, 0, 0);
		CHECK_EQ(rel.cmds[i].result_slot, TPT_SLOT_NONE);
	}
	tpt_plan_free(&rel);
	tpt_plan_return_slots(&w.a.ctx, &p);
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
	CHECK_EQ(tpt_plan_write(&a.ctx, unit / 2,
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
	tpt_plan_return_slots(&a.ctx, &p);
	tpt_plan_free(&p);
	CHECK(all_slots_free(&a));
	array_destroy(&a);
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

/* ---- random requests against the reference ---- */

static void random_requests_on(unsigned int members, uint32_t unit,
			       uint64_t stripes, uint32_t block_size,
			       unsigned int n)
{
	uint64_t stripe_blocks = (uint64_t)(members - 1) * unit;
	uint64_t lba = 0, blocks = 0;
	int before = unit_failures;
	struct world w;
	unsigned int i, kind;

	world_init(&w, members, unit, stripes, block_size, 256);
	for (i = 0; i < n && unit_failures == before; i++) {
		switch (rnd_below(3)) {
		case 0:
			blocks = 1 + rnd_below(unit);
			break;
		case 1:
			blocks = 1 + rnd_below(stripe_blocks);
			break;
		default:
			blocks = 1 + rnd_below(3 * stripe_blocks + unit);
			break;
		}
		lba = rnd_below(w.array_blocks - blocks + 1);
		/* Aligned requests often, so whole units and stripes come
		 * up as much as ragged ones. */
		switch (rnd_below(4)) {
		case 0:
			lba -= lba % stripe_blocks;
			break;
		case 1:
			lba -= lba % unit;
			break;
		}
		kind = (unsigned int)rnd_below(20);
		if (kind < 9)
			world_write(&w, lba, (uint32_t)blocks, false);
		else if (kind < 17)
			world_read(&w, lba, (uint32_t)blocks);
		else
			world_write(&w, lba, (uint32_t)blocks, true);
	}
	if (unit_failures != before)
		fprintf(stderr, "random: N=%u unit=%u: request %u (lba %llu, "
			"%llu blocks) failed\n", members, unit, i - 1,
			(unsigned long long)lba, (unsigned long long)blocks);
	world_destroy(&w);
}

static void random_requests(void)
{
	unsigned int n;

	for (n = 3; n <= 6; n++) {
		random_requests_on(n, 8, 24, 64, 600);
		random_requests_on(n, 128, 6, 64, 600);
	}
	random_requests_on(8, 16, 12, 512, 150);
}

int main(void)
{
	RUN(slot_alloc_limits);
	RUN(slot_alloc_exhaustion_and_runs);
	RUN(slot_alloc_never_doubles);
	RUN(opcodes);
	RUN(single_block_write);
	RUN(full_stripe_write);
	RUN(wide_arrays_count_like_the_paper);
	RUN(reads_match_table);
	RUN(read_pieces_and_final);
	RUN(partial_pieces_at_different_offsets);
	RUN(multi_stripe_write);
	RUN(calculator_rotation);
	RUN(bad_requests);
	RUN(back_pressure);
	RUN(release_plan);
	RUN(long_runs_are_cut);
	RUN(random_requests);
	UNIT_EXIT();
}
