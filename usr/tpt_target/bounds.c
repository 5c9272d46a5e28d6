/*
 * What one I_T nexus, one group and the whole process may make the target
 * keep.  Without bounds a single nexus could take every slot byte, hold
 * the buffer pool with requests it never finishes, or grow the heap with
 * PREP records and groups, and the real controller would get nothing.  A
 * command that would cross a bound fails with INSUFFICIENT RESOURCES
 * (protocol.md 8.4) before it changes anything; the controller retries.
 *
 * Private pieces are counted whole (TPT_PRIVATE_PIECE each): each takes,
 * or for a recorded PREP READ will take, one pool buffer whatever its
 * length.
 */
#include <inttypes.h>
#include <stddef.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt_target.h"

struct tpt_bounds tpt_bounds = {
	/* Twice the 128 slots of the largest (1 MiB) stripe unit the
	 * controller asks for. */
	.session_slot_mb = 256,
	/* 0: half of the pool, whatever tpt_pool_mb made it. */
	.session_pool_mb = 0,
	.session_mb = 1024,
	/* Four times what a span of 32 stripes of 1 MiB puts in one range. */
	.group_mb = 128,
	.session_groups = 1024,
	.groups_max = 16384,
};

struct tpt_bound_use tpt_bound_use;

static const char *const bound_name[TPT_BOUNDS] = {
	[TPT_BOUND_SESSION_SLOTS] = "slot memory per nexus (tpt_session_slot_mb)",
	[TPT_BOUND_SESSION_POOL] = "pool share per nexus (tpt_session_pool_mb)",
	[TPT_BOUND_SESSION_HELD] = "buffered bytes per nexus (tpt_session_mb)",
	[TPT_BOUND_GROUP_HELD] = "buffered bytes per group (tpt_group_mb)",
	[TPT_BOUND_SESSION_GROUPS] = "groups per nexus (tpt_session_groups)",
	[TPT_BOUND_GROUPS] = "groups per process (tpt_groups_max)",
};

unsigned int tpt_bound_session_pool_bufs(void)
{
	unsigned int mb = tpt_bounds.session_pool_mb;

	if (!mb)
		mb = tpt_datamover_pool_mb() / 2;
	return (uint64_t)mb * (1u << 20) / TPT_PRIVATE_PIECE;
}

enum tpt_sense_reason tpt_bound_refuse(struct tpt_session *s,
				       enum tpt_bound b)
{
	tpt_bound_use.refused[b]++;
	/* A nexus pressing against a bound retries, maybe for long: one
	 * line says what happened, the counters say how often. */
	if (!(s->bounds_logged & (1u << b))) {
		s->bounds_logged |= 1u << b;
		eprintf("tpt: nexus %" PRIu64 " reached the %s: refusing with "
			"INSUFFICIENT RESOURCES (logged once per nexus)\n",
			s->itn_id, bound_name[b]);
	}
	return TPT_SENSE_POOL_EXHAUSTED;
}
