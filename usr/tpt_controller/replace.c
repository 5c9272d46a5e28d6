/*
 * replace=URL, md's --replace: a member that still serves (a disk that
 * keeps erring, a box to retire) is copied to a spare without the array
 * ever running degraded.  fail=URL then spare takeover leaves every
 * stripe without redundancy for as long as the rebuild takes; here the
 * old box goes on serving its position while its units are copied to
 * the spare (recovery.c runs the job; its batches read the old box and
 * write the spare, array_span_box(), s->copying), and only then does the
 * spare take over.  Units the old box cannot read are rebuilt from the
 * other positions, as a rebuild onto the spare would.
 *
 * The spare gets no host write while it is rebuilt.  A write that starts
 * marks its stripes in the spare's map (it lacks them again), the job
 * goes over the map in passes until nothing is marked, and the last pass
 * holds new writes back so that it ends.  The switch then happens in one
 * turn of the event loop with the map clear: a write that was planned
 * with the old box marked its stripes before it sent anything and under
 * their locks, and a batch that cleared them afterwards ran after it.
 *
 * The state file keeps a replace under way ("replace P ID"); the spare's
 * superblock says spare until the switch, and a restart begins the
 * replace again once both boxes are back (replace_resume()).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "list.h"
#include "tgtd.h"
#include "tgtadm_error.h"
#include "tpt.h"
#include "tpt_controller.h"
#include "recovery.h"

/* The last pass holds new host writes back: when what is left to do is
 * this small (a few batches, well under a host's timeout), or when
 * passes do not get there because writes mark stripes as fast as the
 * job does them. */
#define REPLACE_HOLD_STRIPES	128
#define REPLACE_FREE_PASSES	5

static struct tpt_member *ready_spare(struct tpt_array *a)
{
	unsigned int i;

	for (i = 0; i < a->nr_boxes; i++)
		if (array_spare_ready(&a->member[i]))
			return &a->member[i];
	return NULL;
}

/* Whether every position's box is online and in sync. */
static bool all_in_sync(struct tpt_array *a)
{
	unsigned int p;

	for (p = 0; p < a->nr_members; p++) {
		const struct tpt_member *m = array_position_member(a, p);

		if (a->pos[p].state != TPT_POS_IN_SYNC || !m || !m->ready ||
		    m->failing || m->link != MEMBER_ONLINE)
			return false;
	}
	return true;
}

/* The replace of @old's position by @spare starts (recovery_kick()
 * runs it): 0, or -ENOMEM. */
static int replace_begin(struct tpt_array *a, struct tpt_member *old,
			 struct tpt_member *spare)
{
	struct tpt_replace *rp = &a->replace;

	rp->lacks = malloc(array_missed_fine_bytes(a));
	if (!rp->lacks)
		return -ENOMEM;
	memset(rp->lacks, 0xff, array_missed_fine_bytes(a));
	rp->position = (unsigned int)old->position;
	rp->old = old->id;
	rp->spare = spare->id;
	rp->pass = 1;
	rp->copied = 0;
	rp->hold = rp->pending = false;
	rp->active = true;
	/* A restart begins it again. */
	array_save_state(a);
	return 0;
}

int replace_start(struct tpt_array *a, struct tpt_member *m)
{
	struct tpt_replace *rp = &a->replace;
	struct tpt_member *spare;

	if (rp->active || rp->pending) {
		eprintf("tptraid: replace=%s: position %u is being replaced "
			"already, by spare %u; one replace at a time\n", m->url,
			rp->position, rp->spare);
		return TGTADM_INVALID_REQUEST;
	}
	if (m->position < 0) {
		eprintf("tptraid: replace=%s: member %u serves no position "
			"(a spare, or a box taken out): replace= names a "
			"member that serves one\n", m->url, m->id);
		return TGTADM_INVALID_REQUEST;
	}
	if (!all_in_sync(a)) {
		eprintf("tptraid: replace=%s: the array is %s: a replace "
			"copies a position while every position is in sync "
			"(a position without its box takes a spare by "
			"itself)\n", m->url,
			tpt_array_state_name(tpt_array_state(a)));
		return TGTADM_INVALID_REQUEST;
	}
	spare = ready_spare(a);
	if (!spare) {
		eprintf("tptraid: replace=%s: no spare is ready (spare=URL "
			"adds one)\n", m->url);
		return TGTADM_INVALID_REQUEST;
	}
	if (replace_begin(a, m, spare)) {
		eprintf("tptraid: replace=%s: out of memory\n", m->url);
		return TGTADM_NOMEM;
	}
	eprintf("tptraid: member %u (%s) at position %u is to be replaced by "
		"spare %u (%s); it serves the position until the spare "
		"has every stripe%s\n", m->id, m->url, rp->position,
		spare->id, spare->url,
		a->recovery.active ? " (after the job that runs now)" : "");
	recovery_kick(a);
	return TGTADM_SUCCESS;
}

bool replace_failing(struct tpt_array *a, struct tpt_member *m,
		     const char *why)
{
	struct tpt_replace *rp = &a->replace;
	struct tpt_member *spare;

	if (m->position < 0)
		return false;
	if ((rp->active || rp->pending) &&
	    rp->position == (unsigned int)m->position)
		return true;
	if (rp->active || rp->pending || !all_in_sync(a) ||
	    !(spare = ready_spare(a)) || replace_begin(a, m, spare))
		return false;
	eprintf("tptraid: member %u (%s) at position %u %s: replacing it by "
		"spare %u (%s) while it serves (as replace=URL)%s\n", m->id,
		m->url, rp->position, why, spare->id, spare->url,
		a->recovery.active ? ", after the job that runs now" : "");
	recovery_kick(a);
	return true;
}

void replace_pending(struct tpt_array *a, unsigned int position,
		     unsigned int spare)
{
	a->replace.pending = true;
	a->replace.position = position;
	a->replace.spare = spare;
}

void replace_resume(struct tpt_array *a)
{
	struct tpt_replace *rp = &a->replace;
	struct tpt_member *spare = &a->member[rp->spare];
	struct tpt_member *old = array_position_member(a, rp->position);

	if (!rp->pending || !a->assembled)
		return;
	if (spare->position >= 0 || spare->held || !old) {
		rp->pending = false;
		eprintf("tptraid: the replace of position %u by spare %u a "
			"restart interrupted is dropped: %s\n", rp->position,
			rp->spare, spare->position >= 0 ?
			"the spare serves a position now" :
			!old ? "the position has no box" : "the spare is held");
		array_save_state(a);
		return;
	}
	/* Until both are there and the array is whole: a box still
	 * connecting, a position catching up. */
	if (!all_in_sync(a) || !array_spare_ready(spare))
		return;
	if (replace_begin(a, old, spare))
		return;
	eprintf("tptraid: member %u (%s) at position %u is being replaced by "
		"spare %u (%s): a restart interrupted it, it starts again\n",
		old->id, old->url, rp->position, spare->id, spare->url);
}

/* The running replace is over, one way or another: its map goes. True
 * when its last pass held new writes back, which may go on now. */
static bool replace_clear(struct tpt_replace *rp)
{
	bool held = rp->hold;

	free(rp->lacks);
	rp->lacks = NULL;
	rp->active = rp->hold = false;
	return held;
}

void replace_cancel(struct tpt_array *a, const char *why)
{
	struct tpt_replace *rp = &a->replace;
	bool held;

	if (!rp->active && !rp->pending)
		return;
	held = replace_clear(rp);
	/* An array that stops keeps it for its next start. */
	if (a->stopping) {
		rp->pending = true;
		eprintf("tptraid: replace of position %u stopped: %s; the "
			"next start begins it again\n", rp->position, why);
	} else {
		rp->pending = false;
		eprintf("tptraid: replace of position %u stopped: %s; spare "
			"%u (%s) is a spare again\n", rp->position, why,
			rp->spare, a->member[rp->spare].url);
		array_save_state(a);
	}
	if (a->recovery.active && a->recovery.replace)
		recovery_stop(a);
	if (held && !a->stopping)
		array_run_waiting(a);
}

/*
 * The box being replaced is lost: the spare takes the position over at
 * once and is rebuilt in what its map marks only, where a spare taking
 * over after the loss would be rebuilt in full.  A write in flight on the
 * old box marked its stripes when it started, so the map has them.
 */
static void replace_takeover(struct tpt_array *a, struct tpt_member *old)
{
	struct tpt_replace *rp = &a->replace;
	struct tpt_member *spare = &a->member[rp->spare];
	struct tpt_position *pos = &a->pos[rp->position];

	eprintf("tptraid: member %u, being replaced at position %u, failed: "
		"spare %u (%s) takes the position over and is rebuilt where "
		"it lacks stripes\n", old->id, rp->position, spare->id,
		spare->url);
	/* Whatever ran was planned with the old box. */
	recovery_stop(a);
	old->position = -1;
	spare->position = (int)rp->position;
	pos->member = (int)spare->id;
	pos->state = TPT_POS_RECOVERING;
	pos->catch_up = false;
	pos->stalled_at = 0;
	memcpy(pos->missed_fine, rp->lacks, array_missed_fine_bytes(a));
	array_save_state(a);
	if (replace_clear(rp))
		array_run_waiting(a);
}

void replace_member_lost(struct tpt_array *a, struct tpt_member *m)
{
	struct tpt_replace *rp = &a->replace;
	struct tpt_member *spare = &a->member[rp->spare];
	char why[160];

	if ((!rp->active && !rp->pending) ||
	    (m->id != rp->spare && m->position < 0))
		return;
	if (rp->active && m->id == rp->old &&
	    m->position == (int)rp->position && array_spare_ready(spare)) {
		replace_takeover(a, m);
		return;
	}
	if (m->id == rp->spare)
		snprintf(why, sizeof(why), "the spare failed");
	else
		snprintf(why, sizeof(why), "member %u (position %d) failed: "
			 "the spare may be needed for it", m->id, m->position);
	replace_cancel(a, why);
}

bool replace_write_may_start(const struct tpt_array *a,
			     const struct tpt_span *s)
{
	/* One that wrote already holds its stripes, and a batch may be
	 * waiting for them. */
	return !a->replace.hold || s->attempts;
}

void replace_write_starts(struct tpt_array *a, const struct tpt_span *s)
{
	if (a->replace.active)
		array_fine_set(a, a->replace.lacks, s->first_stripe,
			       s->last_stripe);
}

bool replace_batch_ended(struct tpt_array *a, uint64_t first, uint64_t n,
			 int result)
{
	char why[96];

	if (result) {
		/* The position's box serves on: nothing is lost, and the
		 * operator may ask again (or fail= it and rebuild). */
		snprintf(why, sizeof(why), "stripe %" PRIu64 " could not be "
			 "copied or rebuilt (%s)", first, strerror(-result));
		replace_cancel(a, why);
		return false;
	}
	array_fine_clear(a, a->replace.lacks, first, first + n);
	return true;
}

bool replace_next_pass(struct tpt_array *a, uint64_t left)
{
	struct tpt_replace *rp = &a->replace;

	if (!left)
		return false;
	rp->pass++;
	if (!rp->hold &&
	    (left <= REPLACE_HOLD_STRIPES || rp->pass > REPLACE_FREE_PASSES)) {
		rp->hold = true;
		clock_gettime(CLOCK_MONOTONIC, &rp->hold_since);
	}
	return true;
}

void replace_finish(struct tpt_array *a)
{
	struct tpt_replace *rp = &a->replace;
	struct tpt_member *old = &a->member[rp->old];
	struct tpt_member *spare = &a->member[rp->spare];
	const struct tpt_recovery *rc = &a->recovery;
	double secs = recovery_elapsed(&rc->started);
	double held = rp->hold ? recovery_elapsed(&rp->hold_since) : 0;
	unsigned int p = rp->position;

	spare->position = (int)p;
	a->pos[p].member = (int)spare->id;
	old->position = -1;
	old->held = true;
	/* Every unit of the position was rebuilt onto the spare, those
	 * the old box had lost too. */
	array_lost_done(a, p, 0, a->nr_stripes);
	replace_clear(rp);
	eprintf("tptraid: position %u replaced: spare %u (%s) serves it, "
		"%" PRIu64 " stripes done in %u pass%s in %.2f s (%" PRIu64
		" copied from member %u, %" PRIu64 " rebuilt from the other "
		"positions; new host writes held back %.2f s); member %u (%s) "
		"is failed and held out (remove=URL takes it out of the array, "
		"readd=URL makes it a spare); the array is %s\n", p, spare->id,
		spare->url, rc->done_stripes, rp->pass,
		rp->pass > 1 ? "es" : "", secs, rp->copied, old->id,
		rc->done_stripes - rp->copied, held, old->id, old->url,
		tpt_array_state_name(tpt_array_state(a)));
	array_save_state(a);
	/* Every superblock says who serves the position now, the old box's
	 * that it is a spare, before its session goes. */
	array_new_event(a);
	member_fail(old, "replaced by the operator (replace=)");
	array_run_waiting(a);
}
