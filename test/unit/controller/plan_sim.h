/*
 * A simulated array for the planners' tests (test_tpt_plan.c,
 * test_bl_plan.c): member media and a model of N member targets following
 * docs/protocol.md - groups with staged data and results (8.1, 8.2),
 * result slots with headers (5.1, 5.4), and the commands' semantics
 * (section 4).  The model runs a TPT plan step by step and fails it where
 * a real target would fail a command, and also where the plan relies on
 * something a target does not promise: order among the commands of one
 * step, or a slot read before the step that filled it has completed.
 * Baseline plans run on the same media (test_bl_plan.c), so both modes
 * are checked against the same byte model.  plan_world.h adds a plan's
 * static checks and the world that runs plans on this model.
 */
#ifndef TPT_TEST_UNIT_CONTROLLER_PLAN_SIM_H
#define TPT_TEST_UNIT_CONTROLLER_PLAN_SIM_H

#include "controller/tpt_plan.h"
#include "scsi/tpt_cdb.h"
#include "test/unit/unit.h"
#include "test/unit/gf_ref.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Each test program uses a part of the simulator. */
#pragma GCC diagnostic ignored "-Wunused-function"

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
	struct slot_alloc *slot_of[MAX_MEMBERS];
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
	a->ctx.level = &raid5_level;
	a->ctx.block_size = block_size;
	/* The paper's flow (Table II), which the tests were written for. */
	a->ctx.prefetch = true;
	for (m = 0; m < MAX_MEMBERS; m++)
		a->slot_of[m] = &a->slots[m];
	a->ctx.slots = a->slot_of;
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
	unsigned int gofs;		/* its group: plan->group + gofs */
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
	/* PREP WRITE: a run between skips, its buffer and descriptors. */
	struct sim_range *range;
	unsigned int first_ref, nr_refs;
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

struct sim_grp {			/* one group on one target (8.1) */
	enum sim_group kind;
	bool final_seen;		/* a FINAL PREP arrived for the group */
	struct sim_range *ranges;
	struct sim_prep *preps;		/* in arrival order */
};

struct sim_target {
	unsigned char *disk;
	struct sim_grp grp[TPT_PLAN_MAX_GROUPS];
	struct sim_slot slot[TPT_SLOT_MAX];
};

enum sim_domain { SIM_DOM_STATE, SIM_DOM_DISK, SIM_DOM_SLOT };

/* What one command of the current step touched. */
struct sim_access {
	unsigned int cmd;
	unsigned int member;
	unsigned int gofs;		/* SIM_DOM_STATE: whose group */
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
	uint32_t dead;			/* members no command may reach */
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
	x->gofs = cmd->group_offset;
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
			    (x->domain == SIM_DOM_STATE && x->gofs != y->gofs) ||
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

	for (pp = &t->grp[r->gofs].ranges; *pp != r; pp = &(*pp)->next)
		;
	*pp = r->next;
	for (i = 0; r->slot >= 0 && i < sim_pieces(s, r->blocks); i++) {
		t->slot[r->slot + i].owner = NULL;
		t->slot[r->slot + i].valid = false;
	}
	free(r->data);
	free(r);
}

static struct sim_range *sim_find(struct sim_grp *G, uint64_t lba,
				  uint32_t blocks, unsigned int flag,
				  const struct sim_range *except)
{
	struct sim_range *r;

	for (r = G->ranges; r; r = r->next)
		if (r != except && r->lba == lba && r->blocks == blocks &&
		    (r->flags & flag))
			return r;
	return NULL;
}

static bool sim_overlaps(const struct sim_grp *G, uint64_t lba,
			 uint32_t blocks, unsigned int flag)
{
	const struct sim_range *r;

	for (r = G->ranges; r; r = r->next)
		if ((r->flags & flag) && r->lba < lba + blocks &&
		    lba < r->lba + r->blocks)
			return true;
	return false;
}

/* A buffer for the command's range, claiming its RESULT SLOT's slots as
 * a target does before any transfer (8.2). */
static struct sim_range *sim_range_new_at(struct sim *s,
					  const struct tpt_plan_cmd *cmd,
					  uint64_t lba, uint32_t blocks,
					  unsigned int flags, uint16_t slot)
{
	struct sim_target *t = &s->t[cmd->member];
	unsigned int n = sim_pieces(s, blocks), i;
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
	r->gofs = cmd->group_offset;
	r->lba = lba;
	r->blocks = blocks;
	r->flags = flags;
	r->slot = slot == TPT_SLOT_NONE ? -1 : slot;
	r->step = s->step;
	r->data = xcalloc(blocks, s->bs);
	for (i = 0; slot != TPT_SLOT_NONE && i < n; i++) {
		t->slot[slot + i].owner = r;
		sim_touch(s, cmd, cmd->member, SIM_DOM_SLOT, true, slot + i,
			  slot + i + 1);
	}
	r->next = t->grp[r->gofs].ranges;
	t->grp[r->gofs].ranges = r;
	return r;
}

static struct sim_range *sim_range_new(struct sim *s,
				       const struct tpt_plan_cmd *cmd,
				       unsigned int flags, uint16_t slot)
{
	return sim_range_new_at(s, cmd, cmd->lba, cmd->blocks, flags, slot);
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
		sl->group = s->plan->group + r->gofs;
		sl->lba = r->lba + at / s->bs;
		sl->length = (uint32_t)(bytes - at < s->payload ? bytes - at :
					s->payload);
		sl->payload = r->data + at;
		sl->step = s->step;
	}
}

static struct sim_grp *sim_grp_of(struct sim *s,
				  const struct tpt_plan_cmd *cmd)
{
	return &s->t[cmd->member].grp[cmd->group_offset];
}

static bool sim_use_group(struct sim *s, const struct tpt_plan_cmd *cmd,
			  enum sim_group kind, bool opens)
{
	struct sim_grp *G = sim_grp_of(s, cmd);

	if (G->kind == SIM_NO_GROUP) {
		if (!opens) {
			sim_fail(s, cmd, "TPT UNKNOWN GROUP NUMBER");
			return false;
		}
		G->kind = kind;
		G->final_seen = false;
		return true;
	}
	if (G->kind != kind) {
		sim_fail(s, cmd, "TPT GROUP NUMBER IN USE: read and write group");
		return false;
	}
	return true;
}

static void sim_end_group_if_empty(struct sim_grp *G)
{
	if (!G->ranges && !G->preps) {
		G->kind = SIM_NO_GROUP;
		G->final_seen = false;
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
	if (!sl->valid || sl->group != s->plan->group + cmd->group_offset ||
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
/* The passes a READ PARITY command's list makes over its range (5.1). */
static unsigned int sim_passes(const struct sim *s,
			       const struct tpt_plan_cmd *cmd)
{
	uint64_t total = 0, range = (uint64_t)cmd->blocks * s->bs;
	unsigned int j;

	for (j = 0; j < cmd->nr_refs; j++)
		total += s->plan->refs[cmd->first_ref + j].length;
	return range && total > range && total % range == 0 ?
		(unsigned int)(total / range) : 1;
}

/* The descriptors' bytes into @dst: @passes times the command's range,
 * no descriptor crossing from one pass into the next. */
static bool sim_fetch_passes(struct sim *s, const struct tpt_plan_cmd *cmd,
			     unsigned char *dst, unsigned int passes)
{
	uint64_t range = (uint64_t)cmd->blocks * s->bs, pos = 0;
	uint64_t want = passes * range;
	unsigned int j;

	for (j = 0; j < cmd->nr_refs; j++) {
		const struct tpt_plan_ref *ref = &s->plan->refs[cmd->first_ref + j];

		if (!ref->length || pos + ref->length > want ||
		    pos / range != (pos + ref->length - 1) / range) {
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
		} else if (!sim_read_slot(s, cmd, ref, pos % range, dst + pos)) {
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

static bool sim_fetch(struct sim *s, const struct tpt_plan_cmd *cmd,
		      unsigned char *dst)
{
	return sim_fetch_passes(s, cmd, dst, 1);
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

/* Field rules of sections 3 and 5.1, and what the planners promise on
 * top: PREP, XDWRITE, READ NEW BLOCK and SEND RESULT move host data,
 * COMP reads other targets' slots, PART either (a reconstruct-write
 * starts from the host's data), READ MEDIUM nothing; no command goes to
 * a member that is gone. */
static bool sim_check_cmd(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	const struct raid_geometry *g = &s->a->geo;
	enum tpt_plan_op op = cmd->op;
	bool part = op == TPT_PLAN_PART_TMP || op == TPT_PLAN_PART_BLOCK;
	bool prep = op == TPT_PLAN_PREP_READ || op == TPT_PLAN_PREP_WRITE;
	bool host_only = prep || op == TPT_PLAN_XDWRITE ||
			 op == TPT_PLAN_READ_NEW_BLOCK ||
			 op == TPT_PLAN_SEND_RESULT;
	bool write = op == TPT_PLAN_WRITE;	/* refs, but no list */
	bool has_list = op != TPT_PLAN_PRE_FETCH &&
			op != TPT_PLAN_WRITE_NEW_DATA && !write &&
			op != TPT_PLAN_RELEASE && op != TPT_PLAN_READ_MEDIUM;
	uint64_t skipped_at = 0;	/* a descriptor's byte in the range */
	unsigned int j;

	if (cmd->member >= g->members) {
		sim_fail(s, cmd, "no such member");
		return false;
	}
	if (s->dead & (1u << cmd->member)) {
		sim_fail(s, cmd, "a command to a member that is gone");
		return false;
	}
	if (cmd->group_offset >= s->plan->nr_groups ||
	    cmd->group_offset >= TPT_PLAN_MAX_GROUPS) {
		sim_fail(s, cmd, "a group the plan does not have");
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
	else if (!has_list && !write && cmd->nr_refs)
		sim_fail(s, cmd, "descriptors on a command without any");
	else if (write && (!cmd->nr_refs || cmd->result_slot != TPT_SLOT_NONE))
		sim_fail(s, cmd, "WRITE without data, or with a RESULT SLOT");
	else if (op != TPT_PLAN_READ_MEDIUM && !has_list &&
		 cmd->result_slot != TPT_SLOT_NONE)
		sim_fail(s, cmd, "RESULT SLOT on a command without a list");
	else if (has_list && (!cmd->nr_refs ||
			      cmd->nr_refs > TPT_XFER_DESC_MAX))
		sim_fail(s, cmd, "DESCRIPTOR COUNT out of range");
	else if ((op == TPT_PLAN_PREP_READ || op == TPT_PLAN_SEND_RESULT) &&
		 cmd->result_slot != TPT_SLOT_NONE)
		sim_fail(s, cmd, "RESULT SLOT in a command that pushes");
	else if (cmd->first_ref + cmd->nr_refs > s->plan->nr_refs)
		sim_fail(s, cmd, "descriptors beyond the plan's");
	if (cmd->operand_gf_exp == 255 ||
	    (cmd->operand_gf_exp &&
	     !((part && cmd->parity_mode != TPT_PARITY_COPY) ||
	       op == TPT_PLAN_COMP_TMP)))
		sim_fail(s, cmd, "an OPERAND GF EXPONENT where it is refused");
	for (j = 0; !s->failed && j < cmd->nr_refs; j++) {
		const struct tpt_plan_ref *ref = &s->plan->refs[cmd->first_ref + j];

		if (ref->gf_exp == 255 ||
		    (ref->gf_exp && !part && op != TPT_PLAN_COMP_TMP &&
		     op != TPT_PLAN_COMP_BLOCK))
			sim_fail(s, cmd, "a GF EXPONENT where it is refused");
		/* A skip: PREP READ and PREP WRITE only (whole blocks
		 * there), between moved pieces (5.1). */
		if (ref->kind == TPT_REF_SKIP) {
			if (!prep || !j || j + 1 == cmd->nr_refs ||
			    (op == TPT_PLAN_PREP_WRITE &&
			     (ref->length % s->bs || skipped_at % s->bs)))
				sim_fail(s, cmd, "a skip descriptor where it "
					 "is refused");
			skipped_at += ref->length;
			continue;
		}
		skipped_at += ref->length;
		if (write ? ref->kind == TPT_REF_SLOT :
		    ref->kind == TPT_REF_PARITY ||
		    (host_only ? ref->kind != TPT_REF_HOST :
		     !part && ref->kind == TPT_REF_HOST))
			sim_fail(s, cmd, "descriptor of the wrong kind");
	}
	return !s->failed;
}

/* PREP READ (4.4): record; on FINAL read every record of the group and
 * RMA-write it to the host. */
static void sim_prep_read(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_grp *G = sim_grp_of(s, cmd);
	struct sim_prep *p, **tail;
	unsigned int j;

	if (!sim_use_group(s, cmd, SIM_READ_GROUP, true))
		return;
	if (G->final_seen) {
		sim_fail(s, cmd, "PREP READ after its group's FINAL");
		return;
	}
	for (tail = &G->preps; *tail; tail = &(*tail)->next)
		;
	p = xcalloc(1, sizeof(*p));
	p->cmd = cmd;
	*tail = p;
	sim_touch(s, cmd, cmd->member, SIM_DOM_DISK, false, cmd->lba,
		  cmd->lba + cmd->blocks);
	if (!cmd->final)
		return;
	G->final_seen = true;
	while ((p = G->preps)) {
		const struct tpt_plan_cmd *rc = p->cmd;
		uint64_t pos = 0;

		for (j = 0; j < rc->nr_refs; j++) {
			const struct tpt_plan_ref *ref =
				&s->plan->refs[rc->first_ref + j];

			if (ref->kind == TPT_REF_SKIP) {
				pos += ref->length;	/* read, not moved */
				continue;
			}
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
		G->preps = p->next;
		free(p);
	}
	sim_end_group_if_empty(G);
}

/* A PREP WRITE run's host descriptors into its buffer. */
static bool sim_fetch_run(struct sim *s, const struct sim_prep *p)
{
	uint64_t pos = 0, bytes = (uint64_t)p->range->blocks * s->bs;
	unsigned int j;

	for (j = 0; j < p->nr_refs; j++) {
		const struct tpt_plan_ref *ref =
			&s->plan->refs[p->cmd->first_ref + p->first_ref + j];

		if (ref->host_offset + ref->length > s->host_len ||
		    pos + ref->length > bytes) {
			sim_fail(s, p->cmd, "host descriptor out of range");
			return false;
		}
		memcpy(p->range->data + pos, s->host + ref->host_offset,
		       ref->length);
		sim_use_host(s, ref->host_offset, ref->length);
		pos += ref->length;
	}
	if (pos != bytes) {
		sim_fail(s, p->cmd, "TOTAL LENGTH is not TRANSFER LENGTH");
		return false;
	}
	return true;
}

/* PREP WRITE (4.5): stage, claim the slots, a buffer per run between
 * skips; on FINAL fetch every record of the group from the host and
 * make the slots valid. */
static void sim_prep_write(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	struct sim_grp *G = sim_grp_of(s, cmd);
	struct sim_prep *p, **tail;
	uint64_t pos = 0, run_pos = 0;
	unsigned int slot = cmd->result_slot, j, run_first = 0;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, true))
		return;
	if (G->final_seen) {
		sim_fail(s, cmd, "PREP WRITE after its group's FINAL");
		return;
	}
	if (sim_overlaps(G, cmd->lba, cmd->blocks, SIM_STAGED)) {
		sim_fail(s, cmd, "TPT GROUP NUMBER IN USE: staged twice");
		return;
	}
	for (j = 0; j <= cmd->nr_refs; j++) {
		const struct tpt_plan_ref *ref =
			j < cmd->nr_refs ? &s->plan->refs[cmd->first_ref + j] :
			NULL;
		struct sim_range *r;

		if (ref && ref->kind != TPT_REF_SKIP) {
			pos += ref->length;
			continue;
		}
		if (ref && pos == run_pos) {	/* skips side by side */
			pos += ref->length;
			run_first = j + 1;
			run_pos = pos;
			continue;
		}
		r = sim_range_new_at(s, cmd, cmd->lba + run_pos / s->bs,
				     (uint32_t)((pos - run_pos) / s->bs),
				     SIM_STAGED | SIM_RESULT,
				     (uint16_t)slot);
		if (!r)
			return;
		if (slot != TPT_SLOT_NONE)
			slot += sim_pieces(s, r->blocks);
		for (tail = &G->preps; *tail; tail = &(*tail)->next)
			;
		p = xcalloc(1, sizeof(*p));
		p->cmd = cmd;
		p->range = r;
		p->first_ref = run_first;
		p->nr_refs = j - run_first;
		*tail = p;
		if (ref)
			pos += ref->length;
		run_first = j + 1;
		run_pos = pos;
	}
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, cmd->lba,
		  cmd->lba + cmd->blocks);
	if (!cmd->final)
		return;
	G->final_seen = true;
	while ((p = G->preps)) {
		if (!sim_fetch_run(s, p))
			return;
		sim_publish(s, t, p->range);
		G->preps = p->next;
		free(p);
	}
}

/* READ NEW BLOCK (4.6): the new data, staged and, unchanged, the result. */
static void sim_read_new_block(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	struct sim_range *r;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, true))
		return;
	if (sim_overlaps(sim_grp_of(s, cmd), cmd->lba, cmd->blocks,
			 SIM_STAGED)) {
		sim_fail(s, cmd, "TPT GROUP NUMBER IN USE: staged twice");
		return;
	}
	r = sim_range_new(s, cmd, SIM_STAGED | SIM_RESULT, cmd->result_slot);
	if (!r || !sim_fetch(s, cmd, r->data))
		return;
	sim_publish(s, t, r);
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, cmd->lba,
		  cmd->lba + cmd->blocks);
}

/* READ MEDIUM: the medium's blocks become the group's result, replacing
 * an earlier one for the same blocks. */
static void sim_read_medium(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	struct sim_grp *G = sim_grp_of(s, cmd);
	struct sim_range *r, *old;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, true))
		return;
	old = sim_find(G, cmd->lba, cmd->blocks, SIM_RESULT, NULL);
	r = sim_range_new(s, cmd, SIM_RESULT, cmd->result_slot);
	if (!r)
		return;
	if (old) {
		old->flags &= ~SIM_RESULT;
		if (!old->flags)
			sim_range_free(s, t, old);
	}
	memcpy(r->data, sim_medium(s, cmd->member, cmd->lba),
	       (uint64_t)cmd->blocks * s->bs);
	sim_publish(s, t, r);
	sim_touch(s, cmd, cmd->member, SIM_DOM_DISK, false, cmd->lba,
		  cmd->lba + cmd->blocks);
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, cmd->lba,
		  cmd->lba + cmd->blocks);
}

/* SEND RESULT: RMA-write the result for exactly its blocks to the host,
 * then release that result. */
static void sim_send_result(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	struct sim_grp *G = sim_grp_of(s, cmd);
	uint64_t pos = 0, want = (uint64_t)cmd->blocks * s->bs;
	struct sim_range *r;
	unsigned int j;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, false))
		return;
	r = sim_find(G, cmd->lba, cmd->blocks, SIM_RESULT, NULL);
	if (!r) {
		sim_fail(s, cmd, "TPT LBA RANGE NOT BUFFERED IN GROUP");
		return;
	}
	if (r->step >= s->step) {
		sim_fail(s, cmd, "sends a result made in its own step");
		return;
	}
	for (j = 0; j < cmd->nr_refs; j++) {
		const struct tpt_plan_ref *ref = &s->plan->refs[cmd->first_ref + j];

		if (ref->host_offset + ref->length > s->host_len ||
		    pos + ref->length > want) {
			sim_fail(s, cmd, "host descriptor out of range");
			return;
		}
		memcpy(s->host + ref->host_offset, r->data + pos, ref->length);
		sim_use_host(s, ref->host_offset, ref->length);
		pos += ref->length;
	}
	if (pos != want) {
		sim_fail(s, cmd, "TOTAL LENGTH is not TRANSFER LENGTH");
		return;
	}
	r->flags &= ~SIM_RESULT;
	if (!r->flags)
		sim_range_free(s, t, r);
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, cmd->lba,
		  cmd->lba + cmd->blocks);
	sim_end_group_if_empty(G);
}

/* XDWRITE (4.1): stage the new data, export new XOR old. */
static void sim_xdwrite(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	uint64_t bytes = (uint64_t)cmd->blocks * s->bs;
	struct sim_range *staged, *result;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, true))
		return;
	if (sim_overlaps(sim_grp_of(s, cmd), cmd->lba, cmd->blocks,
			 SIM_STAGED)) {
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

/* Each pass's GF EXPONENT, every descriptor of a pass the same (5.1). */
static bool sim_pass_weights(struct sim *s, const struct tpt_plan_cmd *cmd,
			     uint8_t *pass_exp)
{
	uint64_t range = (uint64_t)cmd->blocks * s->bs, pos = 0;
	unsigned int j;

	for (j = 0; j < cmd->nr_refs; j++) {
		const struct tpt_plan_ref *ref = &s->plan->refs[cmd->first_ref + j];

		if (pos % range == 0)
			pass_exp[pos / range] = ref->gf_exp;
		else if (pass_exp[pos / range] != ref->gf_exp) {
			sim_fail(s, cmd, "a pass weighted unevenly");
			return false;
		}
		pos += ref->length;
	}
	return true;
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
	struct sim_grp *G = sim_grp_of(s, cmd);
	struct sim_range *operand = NULL, *dest, *old;
	uint8_t pass_exp[TPT_XOR_PASSES_MAX];
	unsigned char *fetched;
	unsigned int flag, i, passes;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, !group))
		return;
	if (group) {
		operand = sim_find(G, cmd->lba, cmd->blocks, SIM_RESULT, NULL);
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
	    sim_overlaps(G, cmd->lba, cmd->blocks, SIM_STAGED)) {
		sim_fail(s, cmd, "TPT GROUP NUMBER IN USE: staged twice");
		return;
	}
	passes = sim_passes(s, cmd);
	if (passes > TPT_XOR_PASSES_MAX) {
		sim_fail(s, cmd, "more passes than a target XORs");
		return;
	}
	fetched = xcalloc((uint64_t)passes * cmd->blocks, s->bs);
	if (!sim_fetch_passes(s, cmd, fetched, passes) ||
	    !sim_pass_weights(s, cmd, pass_exp)) {
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
			old = sim_find(G, cmd->lba, cmd->blocks, flag, dest);
			if (!old)
				continue;
			old->flags &= ~flag;
			if (!old->flags)
				sim_range_free(s, t, old);
		}
		dest->flags = outcome;
	}
	/* The operand, in place or copied, is weighted first (3.1). */
	weigh(dest->data, bytes, cmd->operand_gf_exp);
	for (i = 0; i < passes; i++)
		weighted_xor_into(dest->data, fetched + i * bytes, bytes,
				  pass_exp[i]);
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
	struct sim_grp *G = sim_grp_of(s, cmd);
	uint64_t end = cmd->lba + cmd->blocks, covered = 0;
	struct sim_range *r, *next;

	if (!sim_use_group(s, cmd, SIM_WRITE_GROUP, false))
		return;
	for (r = G->ranges; r; r = r->next) {
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
	for (r = G->ranges; r; r = r->next)
		if ((r->flags & SIM_STAGED) && r->lba >= cmd->lba &&
		    r->lba < end)
			memcpy(sim_medium(s, cmd->member, r->lba), r->data,
			       (uint64_t)r->blocks * s->bs);
	for (r = G->ranges; r; r = next) {
		next = r->next;
		if (r->lba < end && cmd->lba < r->lba + r->blocks)
			sim_range_free(s, t, r);
	}
	sim_touch(s, cmd, cmd->member, SIM_DOM_DISK, true, cmd->lba, end);
	sim_touch(s, cmd, cmd->member, SIM_DOM_STATE, true, cmd->lba, end);
	sim_end_group_if_empty(G);
}

/* WRITE(16) of data the controller holds: host pieces as they are, parity
 * pieces the XOR of the host pieces they name; no group. */
static void sim_write(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	uint64_t pos = 0, want = (uint64_t)cmd->blocks * s->bs, i, b;
	unsigned char *data = xcalloc(want, 1);
	unsigned int j;

	for (j = 0; j < cmd->nr_refs && !s->failed; j++) {
		const struct tpt_plan_ref *ref = &s->plan->refs[cmd->first_ref + j];
		uint64_t span = ref->kind == TPT_REF_PARITY ?
			(uint64_t)ref->nr_sources * ref->length : ref->length;

		if (!ref->length || pos + ref->length > want ||
		    (ref->kind == TPT_REF_PARITY && !ref->nr_sources) ||
		    ref->host_offset + span > s->host_len) {
			sim_fail(s, cmd, "a WRITE piece outside its range or "
				 "the host buffer");
			break;
		}
		if (ref->kind == TPT_REF_HOST) {
			memcpy(data + pos, s->host + ref->host_offset,
			       ref->length);
			sim_use_host(s, ref->host_offset, ref->length);
		} else {
			for (i = 0; i < ref->nr_sources; i++)
				for (b = 0; b < ref->length; b++)
					data[pos + b] ^= s->host[ref->host_offset +
						i * ref->length + b];
		}
		pos += ref->length;
	}
	if (!s->failed && pos != want)
		sim_fail(s, cmd, "WRITE data is not TRANSFER LENGTH");
	if (!s->failed) {
		memcpy(sim_medium(s, cmd->member, cmd->lba), data, want);
		sim_touch(s, cmd, cmd->member, SIM_DOM_DISK, true, cmd->lba,
			  cmd->lba + cmd->blocks);
	}
	free(data);
}

static void sim_release(struct sim *s, const struct tpt_plan_cmd *cmd)
{
	struct sim_target *t = &s->t[cmd->member];
	struct sim_grp *G = sim_grp_of(s, cmd);
	struct sim_prep *p;

	while (G->ranges)
		sim_range_free(s, t, G->ranges);
	while ((p = G->preps)) {
		G->preps = p->next;
		free(p);
	}
	sim_end_group_if_empty(G);
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
	case TPT_PLAN_READ_NEW_BLOCK:
		sim_read_new_block(s, cmd);
		break;
	case TPT_PLAN_READ_MEDIUM:
		sim_read_medium(s, cmd);
		break;
	case TPT_PLAN_SEND_RESULT:
		sim_send_result(s, cmd);
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
	case TPT_PLAN_WRITE:
		sim_write(s, cmd);
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

/* Every host byte moved @times times: once, but for a write to copies
 * once per copy written. */
static void sim_check_host_used(struct sim *s, unsigned int times)
{
	uint64_t i;

	for (i = 0; i < s->host_len && !s->failed; i++)
		if (s->host_use[i] != times)
			sim_fail(s, NULL, "a host byte is not moved as often "
				 "as the level writes it");
}

/* Every host byte went somewhere: a RAID-6 whose members are missing
 * sends a written unit's data to each parity that folds it in. */
static void sim_check_host_moved(struct sim *s)
{
	uint64_t i;

	for (i = 0; i < s->host_len && !s->failed; i++)
		if (!s->host_use[i])
			sim_fail(s, NULL, "a host byte is not moved");
}

static void sim_check_host_used_once(struct sim *s)
{
	sim_check_host_used(s, 1);
}

/* After a request every group is gone from every target (8.3). */
static void sim_check_idle(struct sim *s)
{
	unsigned int m, i;

	for (m = 0; m < s->a->geo.members && !s->failed; m++) {
		struct sim_target *t = &s->t[m];

		for (i = 0; i < TPT_PLAN_MAX_GROUPS; i++)
			if (t->grp[i].ranges || t->grp[i].preps ||
			    t->grp[i].kind != SIM_NO_GROUP)
				sim_fail(s, NULL, "a group is left behind on a "
					 "target");
		for (i = 0; i < s->a->nr_slots && !s->failed; i++)
			if (t->slot[i].owner || t->slot[i].valid)
				sim_fail(s, NULL, "a slot is left live");
	}
}

#endif
