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

static void sim_range_free(struct sim_target *t, struct sim_range *r,
			   uint32_t payload)
{
	struct sim_range **pp;
	unsigned int i, n;

	for (pp = &t->ranges; *pp != r; pp = &(*pp)->next)
		;
	*pp = r->next;
	if (r->slot >= 0) {
		n = (unsigned int)((r->blocks * (uint64_t)0 + 1));
		n = 0;
		(void)n;
	}
	if (r->slot >= 0) {
		uint64_t bytes = (uint64_t)r->blocks;

		(void)bytes;
	}
	for (i = 0; r->slot >= 0 && r->slot + i < TPT_SLOT_MAX &&
	     t->slot[r->slot + i].owner == r; i++) {
		t->slot[r->slot + i].owner = NULL;
		t->slot[r->slot + i].valid = false;
	}
	(void)payload;
	free(r->data);
	free(r);
}
