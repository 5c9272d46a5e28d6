/*
 * The operator's check (check=yes, md's "check") is a recovery job
 * (recovery.c) that goes over every stripe and writes nothing: each
 * batch is the level's tpt_check / bl_check, whose outcome - a syndrome
 * per redundancy unit, zero where it agrees with the data - comes back
 * to us in the span's buffer, and the stripes where it is not zero are
 * counted.
 * It runs only while the array is optimal with nothing else to do: a
 * member's box lost stops it (md's check stops when an array degrades),
 * and so does a restart, but neither loses it.  Where it has got to is
 * kept in the state file, and once the array is optimal again with
 * nothing else to do - the box rebuilt or caught up, the controller
 * started again - it goes on from there (mdadm's mdcheck keeps its
 * place).
 *
 * A resync of a mirror of three or more copies is made of check batches
 * too: the copies vote (below).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt_controller.h"
#include "recovery.h"

/* Mismatched stripes a check names one by one in the log, at most. */
#define CHECK_LOG_STRIPES 16

/* How often a running check's progress reaches the state file: what a
 * crash makes it check again, at most. */
#define CHECK_SAVE_SECONDS 10

/* Why a kept check waits (recovery.kept_by). */
static const char KEPT_BY_RESTART[] = "a restart";
static const char KEPT_BY_LOSS[] = "a box's loss";

/*
 * The running check is over, as @how says: its figures are the last
 * check's until the next one.  With @keep it is only stopped: it goes
 * on from where it got to once the array can run it again.
 */
void recovery_check_end(struct tpt_array *a, const char *how, bool keep)
{
	struct tpt_recovery *rc = &a->recovery;
	struct tpt_check *k = &rc->checking;
	char where[256] = "", resumed[64] = "", next[96] = "", unread[96] = "";
	size_t at = 0;
	unsigned int p;

	snprintf(k->end, sizeof(k->end), "%s", how);
	rc->last_check = *k;
	rc->check = false;
	if (keep)
		rc->kept_by = a->stopping ? KEPT_BY_RESTART : KEPT_BY_LOSS;
	else
		rc->check_kept = false;
	/* At the array's stop array_files_close() writes where it got
	 * to, after the files thread is done. */
	if (!a->stopping)
		array_save_state(a);
	for (p = 0; p < a->nr_members && at < sizeof(where); p++)
		if (k->found.located[p])
			at += (size_t)snprintf(where + at, sizeof(where) - at,
					       "%s position %u: %" PRIu64,
					       at ? "," : "; one wrong unit "
					       "each in", p,
					       k->found.located[p]);
	if (k->found.unreadable)
		snprintf(unread, sizeof(unread), ", %" PRIu64 " not read (units "
			 "lost on more positions than the level gives back)",
			 k->found.unreadable);
	if (k->resumed_after)
		snprintf(resumed, sizeof(resumed), " (from stripe %" PRIu64
			 " on, after %s)", k->resumed_at, k->resumed_after);
	if (a->stopping && rc->check_kept)
		snprintf(next, sizeof(next), "; the next start goes on from "
			 "stripe %" PRIu64, rc->kept_from);
	else if (rc->check_kept)
		snprintf(next, sizeof(next), "; it goes on from stripe %"
			 PRIu64 " once the array is optimal again",
			 rc->kept_from);
	eprintf("tptraid: check %s: %" PRIu64 " of %" PRIu64 " stripes "
		"checked in %.2f s%s%s, %" PRIu64 " mismatched (stripes whose "
		"%s)%s; nothing was repaired%s%s\n", how, k->checked, k->total,
		recovery_elapsed(&rc->started), resumed, unread,
		k->found.mismatches,
		a->level->copies ?
		"copies differ" : "parity disagrees with their data", where,
		k->found.located_kept ? ": resync=yes would keep the wrong units "
		"named that hold data: replace their box instead" :
		k->found.mismatches ? ": resync=yes repairs them" : "", next);
}

/*
 * Whether resync=yes, which makes the redundancy agree with the data as
 * it is, would keep @wrong's unit of @stripe wrong: a data unit.  A
 * mirror's copies vote in a resync (recovery_vote_repair()), so an odd
 * copy out is rewritten from the others, the first one too.
 */
static bool resync_keeps(const struct tpt_array *a, uint64_t stripe,
			 unsigned int wrong)
{
	return !a->level->copies &&
	       !(array_stripe_parity(a, stripe) & (1u << wrong));
}

/* What stripe @i of check batch @s holds: its units agree, or no single
 * one is the wrong one (no copy is the odd one out), else the position
 * of the one that is. */
#define VOTE_AGREE (-2)
#define VOTE_NONE (-1)

static int stripe_vote(const struct tpt_array *a, const struct tpt_span *s,
		       uint32_t i)
{
	uint32_t nr = (uint32_t)(s->last_stripe - s->first_stripe + 1);
	int wrong;

	if (!raid_check_mismatch(a->level, &a->geo, a->block_size, s->buf,
				 nr, i))
		return VOTE_AGREE;
	wrong = raid_check_locate(a->level, &a->geo, a->block_size, s->buf,
				  nr, i, s->first_stripe + i);
	return wrong >= 0 && (unsigned int)wrong < a->nr_members ? wrong :
	       VOTE_NONE;
}

/* What a check says of a mismatched stripe: which unit is the wrong one
 * when a single unit explains it. */
static void check_say(struct tpt_array *a, uint64_t st, int wrong)
{
	uint64_t per_stripe = raid_stripe_data_blocks(a->level, &a->geo);
	struct tpt_member *m = wrong < 0 ? NULL :
			       array_position_member(a, (unsigned int)wrong);
	char which[96] = "";

	if (wrong >= 0)
		snprintf(which, sizeof(which), ": position %d's unit (member "
			 "%d) is the one wrong, the others agree", wrong,
			 m ? (int)m->id : -1);
	eprintf("tptraid: check: stripe %" PRIu64 " (array blocks %" PRIu64
		"-%" PRIu64 "): %s%s\n", st, st * per_stripe,
		(st + 1) * per_stripe - 1, a->level->copies ?
		"its copies differ" : "its parity disagrees with its data",
		which);
}

/* Adds @b's counts to @a's. */
void recovery_tally_add(struct tpt_check_tally *a,
			const struct tpt_check_tally *b)
{
	unsigned int p;

	a->mismatches += b->mismatches;
	a->located_kept += b->located_kept;
	a->unreadable += b->unreadable;
	for (p = 0; p < TPT_SPEC_MAX_MEMBERS; p++)
		a->located[p] += b->located[p];
}

/* The stripes of check batch @s whose syndromes are not all zero: what
 * it found, into @t, counted in the running check's figures too. */
void recovery_check_count(struct tpt_array *a, const struct tpt_span *s,
			  struct tpt_check_tally *t)
{
	struct tpt_check *k = &a->recovery.checking;
	uint32_t nr = (uint32_t)(s->last_stripe - s->first_stripe + 1), i;

	memset(t, 0, sizeof(*t));
	for (i = 0; i < nr; i++) {
		uint64_t st = s->first_stripe + i;
		int wrong = stripe_vote(a, s, i);

		if (wrong == VOTE_AGREE)
			continue;
		if (wrong >= 0) {
			t->located[wrong]++;
			t->located_kept += resync_keeps(a, st,
							(unsigned int)wrong);
		}
		if (k->found.mismatches + t->mismatches++ < CHECK_LOG_STRIPES)
			check_say(a, st, wrong);
	}
	recovery_tally_add(&k->found, t);
	k->checked += nr;
}

/*
 * Check batch [@first, @first + @stripes) ended with @mismatches: the
 * kept point moves on over it when every stripe before it is done, with
 * the batches that ended ahead of it, and reaches the state file every
 * CHECK_SAVE_SECONDS.
 */
void recovery_check_advance(struct tpt_array *a, uint64_t first,
			    uint64_t stripes,
			    const struct tpt_check_tally *found)
{
	struct tpt_recovery *rc = &a->recovery;
	bool folded;
	unsigned int i;

	if (first != rc->kept_from) {
		/* recovery_step() starts no batch that could not wait
		 * here. */
		if (rc->nr_ahead < TPT_RECOVERY_BATCHES)
			rc->ahead[rc->nr_ahead++] = (struct tpt_check_ahead) {
				first, stripes, *found };
		return;
	}
	rc->kept_from += stripes;
	recovery_tally_add(&rc->kept, found);
	do {
		folded = false;
		for (i = 0; i < rc->nr_ahead && !folded; i++) {
			if (rc->ahead[i].first != rc->kept_from)
				continue;
			rc->kept_from += rc->ahead[i].stripes;
			recovery_tally_add(&rc->kept, &rc->ahead[i].found);
			rc->ahead[i] = rc->ahead[--rc->nr_ahead];
			folded = true;
		}
	} while (folded);
	if (recovery_elapsed(&rc->kept_saved) >= CHECK_SAVE_SECONDS) {
		clock_gettime(CLOCK_MONOTONIC, &rc->kept_saved);
		array_save_state(a);
	}
}

/* A check from stripe @from on (0, or where one was stopped, as
 * @resumed_after says), having @found what it found before it. */
static void check_begin(struct tpt_array *a, uint64_t from,
			const struct tpt_check_tally *found,
			const char *resumed_after)
{
	struct tpt_recovery *rc = &a->recovery;
	struct tpt_check_tally before = *found;

	memset(&rc->checking, 0, sizeof(rc->checking));
	rc->checking.checked = from;
	rc->checking.found = before;
	rc->checking.resumed_at = from;
	rc->checking.resumed_after = resumed_after;
	rc->check = true;
	rc->check_kept = true;
	rc->kept_from = from;
	rc->kept = before;
	rc->nr_ahead = 0;
	clock_gettime(CLOCK_MONOTONIC, &rc->kept_saved);
	array_save_state(a);
	recovery_job_start(a, RAID_PARITY_MEMBER, false);
}

void recovery_check_kept(struct tpt_array *a, uint64_t from,
			 const struct tpt_check_tally *found)
{
	a->recovery.check_kept = true;
	a->recovery.kept_by = KEPT_BY_RESTART;
	a->recovery.kept_from = from;
	a->recovery.kept = *found;
}

/* Whether a position's box is being failed: it counts as in sync until
 * it is gone, but a check planned now would stop at once. */
static bool box_failing(struct tpt_array *a)
{
	unsigned int p;

	for (p = 0; p < a->nr_members; p++) {
		const struct tpt_member *m = array_position_member(a, p);

		if (m && m->failing)
			return true;
	}
	return false;
}

/* The check a restart or a box's loss stopped, once the array can run
 * it: the first thing recovery_kick() finds nothing else to do. */
void recovery_check_resume(struct tpt_array *a)
{
	struct tpt_recovery *rc = &a->recovery;

	if (!rc->check_kept || box_failing(a))
		return;
	if (rc->kept_from > a->nr_stripes) {
		eprintf("tptraid: the state file's check goes on from stripe %"
			PRIu64 ", past the array's %" PRIu64 ": not resumed\n",
			rc->kept_from, a->nr_stripes);
		rc->check_kept = false;
		array_save_state(a);
		return;
	}
	check_begin(a, rc->kept_from, &rc->kept, rc->kept_by);
}

int recovery_check_start(struct tpt_array *a, char *why, size_t len)
{
	struct tpt_recovery *rc = &a->recovery;
	enum tpt_array_state st = tpt_array_state(a);

	if (rc->active && rc->check) {
		snprintf(why, len, "a check runs already (check=stop ends it)");
		return -EBUSY;
	}
	/* Batches of a job stopped a moment ago may still be ending. */
	if (st != TPT_ARRAY_OPTIMAL || box_failing(a) || rc->active || rc->in_flight ||
	    rc->paused || a->unsynced) {
		snprintf(why, len, "the array is %s%s; a check needs every "
			 "position in sync and no rebuild or resync running",
			 tpt_array_state_name(st), st != TPT_ARRAY_OPTIMAL ? "" :
			 rc->active || rc->in_flight || rc->paused ||
			 a->unsynced ? " with a recovery to run" :
			 " with a box being failed");
		return -EBUSY;
	}
	check_begin(a, 0, &(struct tpt_check_tally){ 0 }, NULL);
	return 0;
}

bool recovery_check_stop(struct tpt_array *a)
{
	struct tpt_recovery *rc = &a->recovery;

	if (!rc->active && rc->check_kept) {
		/* Waiting for the array to be optimal again. */
		eprintf("tptraid: check=stop: the check stopped by %s does "
			"not go on from stripe %" PRIu64 "\n", rc->kept_by,
			rc->kept_from);
		rc->check_kept = false;
		array_save_state(a);
		return true;
	}
	if (!rc->active || !rc->check)
		return false;
	recovery_check_end(a, "stopped by the operator", false);
	recovery_stop(a);
	if (!rc->in_flight)
		recovery_kick(a);
	return true;
}

/* Check stripes [@first, @first + @n) are not read: counted in @t and in
 * the running check's figures. */
void recovery_check_unread(struct tpt_array *a, uint64_t first, uint64_t n,
			   struct tpt_check_tally *t)
{
	struct tpt_check *k = &a->recovery.checking;
	char which[64];

	if (n > 1)
		snprintf(which, sizeof(which), "stripes %" PRIu64 "-%" PRIu64,
			 first, first + n - 1);
	else
		snprintf(which, sizeof(which), "stripe %" PRIu64, first);
	eprintf("tptraid: check: %s not checked: units unreadable on more "
		"positions than the %s back; lost until a write covers "
		"them\n", which, a->level->copies ? "copies give" :
		"parity gives");
	t->unreadable += n;
	k->found.unreadable += n;
	k->checked += n;
}

/* ---- the resync of a mirror of three or more copies votes ---- */

/*
 * Copies differ where a write was torn by a crash (never acknowledged:
 * either version is the array's) or where one went bad behind the
 * array's back, which only a check finds.  Copying the first over the
 * others, as a resync of two copies must, would spread a bad first copy;
 * with three or more the copies vote instead, as the check locates the
 * wrong one (raid_check_locate()).  Each batch is a check, and only the
 * stripes whose copies differ are written: the odd copy out from the
 * others (a REBUILD span of its position: the planner copies from a copy
 * in sync other than it), or, where no single copy is the odd one out,
 * every copy from the first.  The check and the repairs are separate
 * spans: a host write between them rewrites every copy, which makes the
 * vote moot, never wrong.
 */


/* Odd copies out the log names one by one in a resync, at most. */
#define VOTE_LOG_STRIPES 16

/* A voting batch whose repairs are in flight. */
struct vote_batch {
	uint64_t first, n;
	uint32_t missing;
	unsigned int pending;	/* repairs, and 1 while they go out */
	int result;		/* the first repair's error */
};

/* The votes of check batch @s's stripes, into @votes. */
void recovery_vote_count(struct tpt_array *a, const struct tpt_span *s,
			 int *votes)
{
	uint32_t nr = (uint32_t)(s->last_stripe - s->first_stripe + 1), i;

	for (i = 0; i < nr; i++)
		votes[i] = stripe_vote(a, s, i);
}

static void vote_put(struct tpt_array *a, struct vote_batch *b)
{
	if (--b->pending)
		return;
	recovery_batch_ended(a, b->first, b->n, b->missing, 0, b->result);
	free(b);
}

static void vote_repair_done(struct tpt_span *s, int result)
{
	struct vote_batch *b = s->priv;
	struct tpt_array *a = s->array;

	if (result && !b->result)
		b->result = result;
	free(s);
	vote_put(a, b);
}

/* Stripes [@first, @first + @n) of batch @b get the copies of their
 * vote @wrong. */
static int vote_queue(struct tpt_array *a, struct vote_batch *b,
		      uint64_t first, uint64_t n, int wrong)
{
	struct tpt_recovery *rc = &a->recovery;
	uint64_t per_stripe = raid_stripe_data_blocks(a->level, &a->geo);
	struct tpt_span *s;
	uint64_t st;

	s = array_background_span(a, TPT_SPAN_REBUILD, wrong >= 0 ?
				  (unsigned int)wrong : RAID_PARITY_MEMBER,
				  first, n, vote_repair_done);
	if (!s)
		return -ENOMEM;
	for (st = first; st < first + n; st++)
		if (rc->voted_odd + rc->voted_none + st - first <
		    VOTE_LOG_STRIPES)
			eprintf("tptraid: resync: stripe %" PRIu64 " (array "
				"blocks %" PRIu64 "-%" PRIu64 "): %s\n", st,
				st * per_stripe, (st + 1) * per_stripe - 1,
				wrong >= 0 ? "one copy is the odd one out: "
				"rewritten from the others" : "its copies "
				"differ with no majority: the first copied "
				"over the others");
	if (wrong >= 0)
		rc->voted_odd += n;
	else
		rc->voted_none += n;
	s->priv = b;
	b->pending++;
	array_queue_span(a, s);
	return 0;
}

/* Voting batch [@first, @first + @n) writes the stripes @votes say
 * differ, a span per run of stripes with the same vote; it ends when
 * they have. */
void recovery_vote_repair(struct tpt_array *a, uint64_t first, uint64_t n,
			  uint32_t missing, const int *votes)
{
	struct vote_batch *b = calloc(1, sizeof(*b));
	uint64_t i, j;

	if (!b) {
		recovery_batch_ended(a, first, n, missing, 0, -ENOMEM);
		return;
	}
	*b = (struct vote_batch){ first, n, missing, 1, 0 };
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && votes[j] == votes[i]; j++)
			;
		if (votes[i] != VOTE_AGREE &&
		    vote_queue(a, b, first + i, j - i, votes[i])) {
			b->result = -ENOMEM;
			break;
		}
	}
	vote_put(a, b);
}

