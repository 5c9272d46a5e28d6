/*
 * Background recovery of an array, one job at a time, in this order:
 *
 *   - a box back at its position catches up: only the stripes it missed
 *     when the array kept a record since it left, else every stripe;
 *   - a spare takes over a position that has no box, rebuilt in full
 *     (paper III-D 5: "a background process of reconstruction onto a
 *     spare disk ... begins");
 *   - the parity of regions is computed from their data: all of a new
 *     array's (its members' old contents need not agree), unless it was
 *     created assume_clean, or those that had writes in flight when the
 *     controller stopped without warning (the write-intent record of
 *     array_files.c), which closes the write hole.
 *
 * The work goes through the span queue like host I/O, in batches of
 * stripes under their stripe locks, up to TPT_RECOVERY_BATCHES of them in
 * flight, so host reads and writes go on meanwhile.  What a position's
 * box lacks is a bit per stripe (missed_fine): every stripe for a rebuild
 * in full, the stripes written without it for a catch-up.  A batch that
 * ends clears its bits; a write where the bit is clear reaches the box,
 * one where it is set is planned without it (its bit stays set) and the
 * recovery gets to it.  A batch that another position lacks too is
 * stepped over and tried again later (two boxes recovering at once).
 * A resync goes over the array's unsynced map the same way; a mirror of
 * three or more copies votes (the resync votes, below).
 * Each batch is planned by the RAID level for the array's mode
 * (raid_level_ops.tpt_rebuild / bl_rebuild): in TPT mode the targets
 * compute the missing units, in Baseline mode the controller does.  The
 * rate is limited to rebuild_rate MB/s of rebuilt units, if set.
 *
 * The operator's check and the resync of a mirror of three or more
 * copies are jobs whose batches are checks (job_checks()): check.c
 * counts what they found, and queues the resync's repairs.
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
#include "scsi/tpt_parity.h"
#include "tpt_controller.h"
#include "recovery.h"

/* Stripes one batch rebuilds: a slot per stripe on every source, out of
 * the 128 each member gives us (mode_tpt.c). */
#define RECOVERY_BATCH_STRIPES 16

/* What the batches in flight read from the survivors together, at most
 * (one batch at least): enough to keep the links and disks busy while a
 * batch waits on a step, little enough that what a box answers never
 * queues for seconds behind them on a slow link, and that Baseline's
 * buffers for them stay small. */
#define RECOVERY_INFLIGHT_BYTES (32u << 20)

/* Whether the running job's batches are checks: the operator's, or a
 * resync that votes. */
static bool job_checks(const struct tpt_array *a)
{
	return a->recovery.check || a->recovery.vote;
}

/* What recovering a stripe reads: its data units' worth of blocks; a
 * check reads every member's unit (and holds the outcome, fewer). */
static uint64_t stripe_read_bytes(const struct tpt_array *a)
{
	return job_checks(a) ?
	       (uint64_t)a->nr_members * a->spec.unit_bytes :
	       raid_stripe_data_blocks(a->level, &a->geo) * a->block_size;
}

/* Stripes one batch takes: a check of a wide array with large units
 * takes fewer, so that its batches too stay within the bytes in flight. */
static uint64_t batch_stripes(const struct tpt_array *a)
{
	uint64_t n = RECOVERY_INFLIGHT_BYTES / stripe_read_bytes(a);

	if (!job_checks(a) || n >= RECOVERY_BATCH_STRIPES)
		return RECOVERY_BATCH_STRIPES;
	return n ? n : 1;
}

static unsigned int batches_max(const struct tpt_array *a)
{
	uint64_t n = RECOVERY_INFLIGHT_BYTES /
		     (batch_stripes(a) * stripe_read_bytes(a));

	if (n < 1)
		return 1;
	return n < TPT_RECOVERY_BATCHES ? (unsigned int)n : TPT_RECOVERY_BATCHES;
}

double recovery_elapsed(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - since->tv_sec) +
	       (double)(now.tv_nsec - since->tv_nsec) / 1e9;
}

/* What the running job goes over: the stripes whose parity a resync
 * computes, or those its position's box lacks; a bit per fine_stripes. */
static const uint8_t *job_map(const struct tpt_array *a)
{
	const struct tpt_recovery *rc = &a->recovery;

	if (rc->replace)
		return a->replace.lacks;
	return rc->position == RAID_PARITY_MEMBER ? a->unsynced :
	       a->pos[rc->position].missed_fine;
}

/* Stripes the running recovery has to do. */
static uint64_t stripes_left(struct tpt_array *a)
{
	const uint8_t *map = job_map(a);
	uint64_t st, n = 0;

	for (st = 0; st < a->nr_stripes; st += a->fine_stripes)
		if (array_fine_has(a, map, st))
			n += st + a->fine_stripes <= a->nr_stripes ?
			     a->fine_stripes : a->nr_stripes - st;
	return n;
}

static void recovery_step(struct tpt_array *a);

/* ---- the end of a job ---- */

static void recovery_finish(struct tpt_array *a)
{
	struct tpt_recovery *rc = &a->recovery;
	double secs = recovery_elapsed(&rc->started);
	uint64_t bytes = rc->done_stripes * a->spec.unit_bytes;

	if (rc->replace) {
		rc->active = false;
		replace_finish(a);
		recovery_kick(a);
		return;
	}
	/* The units a rebuild recorded lost are in the state file before
	 * the region record stops counting their stripes missed: a crash
	 * in between must not leave them to be read. */
	if (!rc->check && rc->position != RAID_PARITY_MEMBER &&
	    !array_lost_durable(a)) {
		rc->lost_wait = true;
		array_save_state(a);
		return;
	}
	rc->active = false;
	if (rc->check) {
		recovery_check_end(a, "completed", false);
	} else if (rc->position == RAID_PARITY_MEMBER) {
		array_unsynced_free(a);
		if (rc->vote)
			eprintf("tptraid: copies of %" PRIu64 " stripes "
				"compared in %.2f s: %" PRIu64 " had an odd "
				"copy out, rewritten from the others, %" PRIu64
				" differed with no majority, the first copied "
				"over the others\n", rc->done_stripes, secs,
				rc->voted_odd, rc->voted_none);
		else
			eprintf("tptraid: parity of %" PRIu64 " stripes "
				"computed in %.2f s\n", rc->done_stripes, secs);
	} else {
		struct tpt_position *pos = &a->pos[rc->position];

		pos->state = TPT_POS_IN_SYNC;
		pos->catch_up = false;
		pos->missed_valid = false;
		memset(pos->missed, 0, (a->nr_regions + 7) / 8);
		array_missed_all(a, rc->position, false);
		array_regions_changed(a);
		eprintf("tptraid: position %u %s: %" PRIu64 " stripes in %.2f "
			"s (%.1f MB/s)%s; the array is %s\n", rc->position,
			rc->catch_up ? "caught up" : "rebuilt",
			rc->done_stripes, secs,
			secs > 0 ? (double)bytes / 1e6 / secs : 0.0,
			pos->lost.n ? ", but for its lost units" : "",
			tpt_array_state_name(tpt_array_state(a)));
		/* The box is current: its superblock, and every other,
		 * says so. */
		array_new_event(a);
	}
	recovery_kick(a);
}

void recovery_lost_saved(struct tpt_array *a)
{
	struct tpt_recovery *rc = &a->recovery;

	if (rc->active && rc->lost_wait && array_lost_durable(a)) {
		rc->lost_wait = false;
		recovery_finish(a);
	}
}

static void recovery_retry(void *data);

/* Of @missing, the positions other than @position, which a rebuild of
 * it lacks by definition (a resync's recovers none). */
static uint32_t others_of(uint32_t missing, unsigned int position)
{
	return position == RAID_PARITY_MEMBER ? missing :
	       missing & ~(1u << position);
}

/* Whether a batch planned without @missing failed for lack of positions
 * other than the one it recovers. */
static bool lacks_others(const struct tpt_array *a, uint32_t missing,
			 unsigned int position)
{
	return others_of(missing, position) &&
	       array_lacks_too_many(a, missing);
}


/* Whether a box catching up serves one of the positions in @missing:
 * force_recovery can take what it holds. */
static bool returning_box(const struct tpt_array *a, uint32_t missing)
{
	unsigned int p;

	for (p = 0; p < a->nr_members; p++)
		if ((missing & (1u << p)) && a->pos[p].catch_up &&
		    a->pos[p].state == TPT_POS_RECOVERING)
			return true;
	return false;
}

/* For the log: why a batch from stripe @at planned without @missing
 * could not be planned, when other positions lacked it. */
static void stall_why(struct tpt_array *a, uint64_t at,
		      uint32_t missing, unsigned int position, char *why,
		      size_t len)
{
	uint32_t unreadable;

	why[0] = '\0';
	if (!lacks_others(a, missing, position))
		return;
	/* Lacked there by no position: some member could not read it. */
	unreadable = others_of(missing, position) & ~array_missing_at(a, at);
	if (position == RAID_PARITY_MEMBER)
		/* The parity counts as lacking (array.c, span_stale_parity()):
		 * it is what the resync does not trust. */
		snprintf(why, len, " (position mask 0x%x cannot read its "
			 "units there, and their parity may not match their "
			 "data: lost until a host write covers them)",
			 unreadable & ~array_stripe_parity(a, at));
	else if (unreadable)
		snprintf(why, len, " (position mask 0x%x cannot read its "
			 "units there: lost sectors; a host write over them "
			 "gives them back)", unreadable);
	else if (a->parity_stale && array_fine_has(a, a->parity_stale, at))
		snprintf(why, len, " (their parity may not match what a host "
			 "wrote there: the resync had not reached them; "
			 "--params force_recovery=yes takes it as it is)");
	else
		snprintf(why, len, " (position mask 0x%x is not in sync "
			 "there either%s)", missing & ~(1u << position),
			 returning_box(a, missing) ? "; --params force_recovery"
			 "=yes takes a returning box's units as it holds them" :
			 "");
}

uint64_t *recovery_stalled_at(struct tpt_array *a, unsigned int position)
{
	return position == RAID_PARITY_MEMBER ? &a->recovery.resync_stalled_at :
	       &a->pos[position].stalled_at;
}

/* The job stops for now: a kick in a few seconds starts what the array
 * needs then, trying the other positions first, since one may need what
 * this one lacks.  Said once for each stripe it stops at. */
static void recovery_pause(struct tpt_array *a, uint64_t at,
			   const char *what, uint32_t missing)
{
	struct tpt_recovery *rc = &a->recovery;
	bool resync = rc->position == RAID_PARITY_MEMBER;
	uint64_t *stalled = recovery_stalled_at(a, rc->position);
	char why[224], whose[32] = "the parity resync";

	stall_why(a, at, missing, rc->position, why, sizeof(why));
	snprintf(rc->stopped, sizeof(rc->stopped), "stripe %" PRIu64
		 ": %s%s", at, what, why);
	if (!resync)
		snprintf(whose, sizeof(whose), "recovery of position %u",
			 rc->position);
	if (*stalled != at + 1)
		eprintf("tptraid: %s stopped at %s; trying again every 5 s\n",
			whose, rc->stopped);
	*stalled = at + 1;
	rc->kick_from = resync ? 0 : rc->position + 1;
	rc->active = false;
	rc->paused = true;
	rc->timer.func = recovery_retry;
	rc->timer.data = a;
	add_work(&rc->timer, 5);
}

/*
 * Whether a rebuild of the running job's position failed at @stripe,
 * planned without @missing, for good: what the others lack there is a
 * unit a member could not read, or one recorded lost - not a position
 * whose box may come back or catch up, nor a parity that may be stale
 * (force_recovery is the operator's call there).
 */
static bool lost_for_good(struct tpt_array *a, uint64_t stripe,
			  uint32_t missing)
{
	const struct tpt_recovery *rc = &a->recovery;

	return rc->position != RAID_PARITY_MEMBER && !job_checks(a) &&
	       lacks_others(a, missing, rc->position) &&
	       !(others_of(missing, rc->position) &
		 array_absent_at(a, stripe)) &&
	       !(a->parity_stale && array_fine_has(a, a->parity_stale, stripe));
}

/*
 * Stripes [@first, @first + @n) of a rebuild or resync, planned without
 * @missing and rebuilding the positions of @also too, ended with @result:
 * what they did is done.  False when that pauses the job.
 */
static bool stripes_ended(struct tpt_array *a, uint64_t s_first, uint64_t n,
			  uint32_t s_missing, uint32_t s_also, int result)
{
	struct tpt_recovery *rc = &a->recovery;
	bool recorded = false;
	uint64_t st;
	unsigned int p;

	/* A batch of several stripes that fails for good lacks the same
	 * recorded units in each (batches are cut where what is missing
	 * changes); one that met a unit a member could not read was gone
	 * over a stripe at a time first. */
	if (result && lost_for_good(a, s_first, s_missing)) {
		recorded = true;
		for (st = s_first; st < s_first + n; st++)
			recorded &= array_lost_record(a, rc->position, st,
						      others_of(s_missing,
								rc->position));
		/* In sync but for those units. */
		if (recorded)
			result = 0;
	}
	if (result && lacks_others(a, s_missing, rc->position)) {
		/* Another position lacks these stripes too (a box lost
		 * while this one was recovering, and back; or a survivor
		 * cannot read its units there): step over them.  Its
		 * recovery may need the stripes this one does now, and
		 * this job comes back for these when it has run. */
		if (!rc->skipped) {
			rc->first_skipped = s_first;
			rc->skipped_missing = s_missing;
		}
		rc->skipped += n;
	} else if (result) {
		recovery_pause(a, s_first, strerror(-result), s_missing);
		return false;
	} else {
		rc->done_stripes += n;
		if (rc->position == RAID_PARITY_MEMBER) {
			array_unsynced_done(a, s_first, s_first + n);
			rc->resync_stalled_at = 0;
		} else {
			array_fine_clear(a, a->pos[rc->position].missed_fine,
					 s_first, s_first + n);
			a->pos[rc->position].stalled_at = 0;
			if (!recorded)
				array_lost_done(a, rc->position, s_first,
						s_first + n);
			for (p = 0; p < a->nr_members; p++)
				if (s_also & (1u << p)) {
					array_fine_clear(a,
							 a->pos[p].missed_fine,
							 s_first, s_first + n);
					array_lost_done(a, p, s_first,
							s_first + n);
				}
		}
	}
	return true;
}

/* A batch whose stripes are accounted for is over: the next one starts,
 * or, stopped meanwhile, what the array needs now once none is left. */
static void batch_close(struct tpt_array *a)
{
	struct tpt_recovery *rc = &a->recovery;

	if (!rc->active) {
		if (!rc->in_flight)
			recovery_kick(a);
		return;
	}
	recovery_step(a);
}

/*
 * The batch of stripes [@first, @first + @n), planned without @missing
 * and rebuilding the positions of @also too, has ended with @result:
 * what it did is done, and the next batch starts.
 */
void recovery_batch_ended(struct tpt_array *a, uint64_t s_first, uint64_t n,
			  uint32_t s_missing, uint32_t s_also, int result)
{
	struct tpt_recovery *rc = &a->recovery;

	rc->in_flight--;
	if (rc->active && rc->check && result) {
		char how[80];

		/* A box lost or failing (the batch, planned again, found a
		 * position out of sync): it goes on when the array is
		 * optimal again.  What the members said ends it. */
		snprintf(how, sizeof(how), "stopped at stripe %" PRIu64 ": %s",
			 s_first, result == -ENODATA ?
			 "a position is not in sync" : strerror(-result));
		recovery_check_end(a, how, result == -ENODATA);
		rc->active = false;
	}
	if (rc->active && rc->check)
		rc->done_stripes += n;
	else if (rc->active && rc->replace) {
		if (replace_batch_ended(a, s_first, n, result))
			rc->done_stripes += n;
	} else if (rc->active &&
		 !stripes_ended(a, s_first, n, s_missing, s_also, result))
		return;
	batch_close(a);
}

/*
 * A batch that met units lost beyond what the level gives back (a
 * survivor's lost sectors, array_unreadable()), gone over again a stripe
 * at a time, one after the other: only the stripes that lack them are
 * left (a check counts them unread, a rebuild steps over them), the
 * others are checked or rebuilt.  It ends as the batch it stands for.
 */
struct batch_narrowing {
	uint64_t first, n, next;
	uint32_t missing, also;
	int result;
	struct tpt_check_tally found;
};

static bool narrow_next(struct tpt_array *a, struct batch_narrowing *bn);

static void narrow_span_done(struct tpt_span *s, int result)
{
	struct batch_narrowing *bn = s->priv;
	struct tpt_array *a = s->array;
	struct tpt_recovery *rc = &a->recovery;
	bool checking = rc->active && rc->check;
	struct tpt_check_tally t;

	if (checking && !result) {
		recovery_check_count(a, s, &t);
		recovery_tally_add(&bn->found, &t);
	} else if (checking && result == -EIO && s->lost_units) {
		recovery_check_unread(a, s->first_stripe, 1, &bn->found);
	} else if (checking && result) {
		bn->result = result;
	} else if (rc->active &&
		   !stripes_ended(a, s->first_stripe, 1, array_span_missing(s),
				  s->rebuild_also, result)) {
		/* Paused: the rest waits for the job to go on. */
		bn->result = result;
	}
	free(s->buf);
	free(s);
	if (rc->active && !bn->result && ++bn->next < bn->first + bn->n &&
	    narrow_next(a, bn))
		return;
	if (checking) {
		if (!bn->result)
			recovery_check_advance(a, bn->first, bn->n, &bn->found);
		recovery_batch_ended(a, bn->first, bn->n, bn->missing,
				     bn->also, bn->result);
	} else {
		/* Each stripe was accounted for as it ended; out of memory,
		 * those not gone over yet are left like the ones that lack
		 * the unit, for the job to come back to. */
		if (rc->active && bn->result == -ENOMEM)
			stripes_ended(a, bn->next, bn->first + bn->n - bn->next,
				      bn->missing, bn->also, -ENOMEM);
		rc->in_flight--;
		if (!bn->result || rc->active)
			batch_close(a);
	}
	free(bn);
}

/* Queues @bn's next stripe; false when it cannot (@bn's result says). */
static bool narrow_next(struct tpt_array *a, struct batch_narrowing *bn)
{
	bool check = a->recovery.check;
	struct tpt_span *s;

	s = array_background_span(a, check ? TPT_SPAN_CHECK : TPT_SPAN_REBUILD,
				  a->recovery.position, bn->next, 1,
				  narrow_span_done);
	if (s && check)
		s->buf = aligned_alloc(TPT_PARITY_ALIGN,
				       raid_check_bytes(a->level, &a->geo,
							a->block_size, 1));
	if (!s || (check && !s->buf)) {
		free(s);
		bn->result = -ENOMEM;
		return false;
	}
	s->rebuild_also = bn->also;
	s->priv = bn;
	array_queue_span(a, s);
	return true;
}

/* Batch [@first, @first + @n) again, a stripe at a time: false when it
 * cannot be (out of memory), and the batch ends as it is. */
static bool batch_narrow(struct tpt_array *a, uint64_t first, uint64_t n,
			 uint32_t missing, uint32_t also)
{
	struct batch_narrowing *bn = calloc(1, sizeof(*bn));

	if (!bn)
		return false;
	*bn = (struct batch_narrowing) { .first = first, .n = n,
					 .next = first, .missing = missing,
					 .also = also };
	if (narrow_next(a, bn))
		return true;
	free(bn);
	return false;
}

static void recovery_span_done(struct tpt_span *s, int result)
{
	struct tpt_array *a = s->array;
	struct tpt_recovery *rc = &a->recovery;
	uint64_t n = s->last_stripe - s->first_stripe + 1;
	uint64_t s_first = s->first_stripe;
	/* With a member that could not read (array_unreadable()). */
	uint32_t s_missing = array_span_missing(s), s_also = s->rebuild_also;

	if (rc->active && rc->replace) {
		/* The box serving the position is there to be read: a
		 * replace does not step over what it cannot rebuild, it
		 * ends (replace_batch_ended()). */
		if (!result && s->copying)
			a->replace.copied += n;
		free(s);
		recovery_batch_ended(a, s_first, n, s_missing, s_also, result);
		return;
	}
	if (rc->active && rc->check && result == -EIO && s->lost_units) {
		/* Units lost on more positions than the level gives back
		 * (array_unreadable() logged which): the check goes on, as
		 * md's goes on over a read error it cannot repair.  Stopping
		 * would leave every stripe after them unchecked. */
		struct tpt_check_tally found = { 0 };

		free(s->buf);
		free(s);
		if (n > 1 && batch_narrow(a, s_first, n, s_missing, s_also))
			return;
		recovery_check_unread(a, s_first, n, &found);
		recovery_check_advance(a, s_first, n, &found);
		recovery_batch_ended(a, s_first, n, s_missing, s_also, 0);
		return;
	}
	if (rc->active && !job_checks(a) && result && s->excluded && n > 1 &&
	    lacks_others(a, s_missing, rc->position)) {
		/* A survivor could not read its units of some of these
		 * stripes, and they lack this position too (a resync's: their
		 * parity may not match their data): only those are stepped
		 * over. */
		free(s);
		if (batch_narrow(a, s_first, n, s_missing, s_also))
			return;
		recovery_batch_ended(a, s_first, n, s_missing, s_also, result);
		return;
	}
	if (rc->active && rc->check && !result) {
		struct tpt_check_tally found;

		recovery_check_count(a, s, &found);
		recovery_check_advance(a, s_first, n, &found);
	} else if (rc->active && rc->vote && !result) {
		int votes[RECOVERY_BATCH_STRIPES];

		/* The batch ends when its repairs have. */
		recovery_vote_count(a, s, votes);
		free(s->buf);
		free(s);
		recovery_vote_repair(a, s_first, n, s_missing, votes);
		return;
	}
	if (s->kind == TPT_SPAN_CHECK)
		free(s->buf);
	free(s);
	recovery_batch_ended(a, s_first, n, s_missing, s_also, result);
}

static void recovery_retry(void *data)
{
	struct tpt_array *a = data;

	a->recovery.paused = false;
	recovery_kick(a);
}

static void recovery_resume(void *data)
{
	struct tpt_array *a = data;

	a->recovery.paused = false;
	recovery_step(a);
}

/* Whether the running recovery has @stripe to do: a check has every
 * one. */
static bool recovery_wants(struct tpt_array *a, uint64_t stripe)
{
	return a->recovery.check || array_fine_has(a, job_map(a), stripe);
}

/* The next stripe to recover from @from on: the next bit of the job's
 * map (eight clear bits at a time). */
static uint64_t recovery_next(struct tpt_array *a, uint64_t from)
{
	const uint8_t *map = job_map(a);
	uint64_t b;

	if (a->recovery.check)
		return from < a->nr_stripes ? from : a->nr_stripes;
	for (b = from / a->fine_stripes; b * a->fine_stripes < a->nr_stripes;
	     b++) {
		if (!(b % 8) && !map[b / 8]) {
			b += 7;
			continue;
		}
		if (map[b / 8] & (1u << (b % 8)))
			return b * a->fine_stripes > from ?
			       b * a->fine_stripes : from;
	}
	return a->nr_stripes;
}

/* Whether position @p's box is there to be written, though it lacks
 * stripes (RECOVERING). */
static bool recovering_box(struct tpt_array *a, unsigned int p)
{
	struct tpt_member *m = array_position_member(a, p);

	return a->pos[p].state == TPT_POS_RECOVERING && m && m->ready &&
	       !m->failing && m->link == MEMBER_ONLINE;
}

/* Whether a rebuild of @position can write position @p's units too
 * (rebuild_along()): the level survives the loss of both. */
static bool takes_along(struct tpt_array *a, unsigned int position,
			unsigned int p)
{
	return p != position && a->level->nr_parity(&a->geo) >= 2 &&
	       recovering_box(a, p);
}

/*
 * The other positions a rebuild batch from stripe @first (planned without
 * @missing) writes from the same reads: with two boxes lost (RAID-6, a
 * mirror of three or more) and both positions recovering, each survivor
 * is read once for both instead of once per position, which halves the
 * time the array spends with no redundancy left.  The batch's stripes
 * share @missing (recovery_next_batch() cuts them there), so such a
 * position lacks them all.
 */
static uint32_t rebuild_along(struct tpt_array *a, uint64_t first,
			      uint32_t missing)
{
	struct tpt_recovery *rc = &a->recovery;
	uint32_t also = 0;
	unsigned int p;

	if (rc->check || rc->position == RAID_PARITY_MEMBER)
		return 0;
	for (p = 0; p < a->nr_members; p++)
		if ((missing & (1u << p)) && takes_along(a, rc->position, p) &&
		    array_fine_has(a, a->pos[p].missed_fine, first))
			also |= 1u << p;
	return also;
}

/* Start the next batch; false when none is to start now. */
static bool recovery_next_batch(struct tpt_array *a)
{
	struct tpt_recovery *rc = &a->recovery;
	uint64_t first, n, region_end, left;
	uint32_t missing;
	struct tpt_span *s;

	first = recovery_next(a, rc->next);
	if (first >= a->nr_stripes) {
		if (rc->in_flight)
			return false;
		left = rc->replace ? stripes_left(a) : 0;
		if (left && replace_next_pass(a, left)) {
			rc->next = 0;
			rc->total_stripes = rc->done_stripes + left;
			return true;
		}
		if (rc->skipped) {
			char what[96];

			snprintf(what, sizeof(what), "%" PRIu64 " stripe%s "
				 "from there on that %s %s left", rc->skipped,
				 rc->skipped > 1 ? "s" : "",
				 rc->position == RAID_PARITY_MEMBER ?
				 "a member cannot read" :
				 "another position lacks too",
				 rc->skipped > 1 ? "are" : "is");
			recovery_pause(a, rc->first_skipped, what,
				       rc->skipped_missing);
		} else
			recovery_finish(a);
		return false;
	}
	/* rebuild_rate: the units rebuilt so far may not run ahead of the
	 * rate; wait a second when they do. */
	if (a->rebuild_rate && !(rc->replace && a->replace.hold) &&
	    (double)(rc->done_stripes * a->spec.unit_bytes) / 1e6 >
	    a->rebuild_rate * recovery_elapsed(&rc->started)) {
		rc->paused = true;
		rc->timer.func = recovery_resume;
		rc->timer.data = a;
		add_work(&rc->timer, 1);
		return false;
	}
	region_end = (first / TPT_RECOVERY_REGION_STRIPES + 1) *
		     TPT_RECOVERY_REGION_STRIPES;
	/* A run of stripes to do with the same positions in sync: a batch
	 * is planned as a whole, and where another position is recovering
	 * too, a stripe it lacks must not hold back the ones around it. */
	missing = array_missing_at(a, first);
	for (n = 1; n < batch_stripes(a) && first + n < region_end &&
	     first + n < a->nr_stripes && recovery_wants(a, first + n) &&
	     array_missing_at(a, first + n) == missing; n++)
		;
	if ((rc->check || rc->position == RAID_PARITY_MEMBER) && missing &&
	    !(missing & array_absent_at(a, first)) &&
	    !(a->parity_stale && array_fine_has(a, a->parity_stale, first))) {
		/* Units recorded lost there: their boxes hold nothing to
		 * compare, and a check goes on, as over units it cannot
		 * read.  A resync has nothing to compute from: the parity
		 * there holds what it held (where it may be stale, the
		 * stripes are stepped over as any it cannot read, and lost
		 * until written). */
		struct tpt_check_tally found = { 0 };

		if (rc->check) {
			recovery_check_unread(a, first, n, &found);
			recovery_check_advance(a, first, n, &found);
		} else {
			array_unsynced_done(a, first, first + n);
			rc->done_stripes += n;
		}
		rc->next = first + n;
		return true;
	}
	s = array_background_span(a, job_checks(a) ? TPT_SPAN_CHECK :
				  TPT_SPAN_REBUILD, rc->position, first, n,
				  recovery_span_done);
	if (s && job_checks(a)) {
		/* Its outcome: whole units, so aligned_alloc()'s size is a
		 * multiple of the alignment. */
		s->buf = aligned_alloc(TPT_PARITY_ALIGN,
				       raid_check_bytes(a->level, &a->geo,
							a->block_size,
							(uint32_t)n));
		if (!s->buf) {
			free(s);
			s = NULL;
		}
	}
	if (!s) {
		if (!rc->in_flight) {
			rc->active = false;
			if (rc->check)
				recovery_check_end(a, "stopped: out of memory",
						   false);
		}
		return false;
	}
	s->rebuild_also = rebuild_along(a, first, missing);
	s->replacing = rc->replace;
	/* A replace copies the old box's units where it holds them (none
	 * recorded lost there): a stripe whose parity is wrong would give
	 * the spare a wrong unit rebuilt, and a copy reads one box, not
	 * the others.  Its plan names the old box by one more position. */
	s->copying = rc->replace && !(missing & (1u << rc->position)) &&
		     a->nr_members < RAID_MAX_MEMBERS;
	rc->next = first + n;
	rc->in_flight++;
	/* A replace's last pass goes ahead of the writes it holds back,
	 * which would otherwise keep it from the stripes they share. */
	if (rc->replace && a->replace.hold) {
		array_queue_span_first(a, s);
		array_run_waiting(a);
	} else
		array_queue_span(a, s);
	return true;
}

static void recovery_step(struct tpt_array *a)
{
	struct tpt_recovery *rc = &a->recovery;

	/* A check's batches that ended ahead of the kept point wait in
	 * rc->ahead (recovery_check_advance()) until the one before them
	 * ends, a narrowed one a stripe at a time: none starts that could
	 * not wait there. */
	while (rc->active && !rc->paused && !a->stopping &&
	       rc->in_flight < batches_max(a) &&
	       !(rc->check &&
		 rc->in_flight + rc->nr_ahead >= TPT_RECOVERY_BATCHES) &&
	       recovery_next_batch(a))
		;
}

/* For the log: the positions a rebuild of @position takes along
 * (rebuild_along()), in @buf, or "". */
static const char *along_what(struct tpt_array *a, unsigned int position,
			      char *buf, size_t len)
{
	size_t at = 0;
	unsigned int p;

	buf[0] = '\0';
	for (p = 0; p < a->nr_members && at < len; p++)
		if (takes_along(a, position, p))
			at += (size_t)snprintf(buf + at, len - at, "%s%u",
					       at ? ", " : "; with position ",
					       p);
	if (at && at < len)
		snprintf(buf + at, len - at, " where it lacks them too, from "
			 "the same reads");
	return buf;
}

/*
 * A job goes over what its position's box lacks (missed_fine) from the
 * first stripe on: what an earlier job stopped by a failure did is clear
 * there already.  A quiet restart after a stall logs nothing new.
 */
void recovery_job_start(struct tpt_array *a, unsigned int position,
			bool catch_up)
{
	struct tpt_recovery *rc = &a->recovery;
	bool quiet = *recovery_stalled_at(a, position);
	char along[96];

	rc->active = true;
	rc->lost_wait = false;
	rc->stopped[0] = '\0';
	rc->position = position;
	rc->catch_up = catch_up;
	/* A position in sync is recovered only onto a replacing spare. */
	rc->replace = !rc->check && position != RAID_PARITY_MEMBER &&
		      a->pos[position].state == TPT_POS_IN_SYNC;
	/* Its box may give them now (a survivor's sector written since). */
	if (position != RAID_PARITY_MEMBER && !rc->check && !rc->replace)
		array_lost_to_missed(a, position);
	/* Two copies have no majority; RAID-6's located unit is not
	 * rewritten (docs/controller.md, "Not yet"). */
	rc->vote = !rc->check && position == RAID_PARITY_MEMBER &&
		   a->level->copies && a->nr_members >= 3;
	rc->voted_odd = rc->voted_none = 0;
	rc->next = rc->check ? rc->kept_from : 0;
	rc->done_stripes = 0;
	rc->skipped = 0;
	rc->total_stripes = rc->check ? a->nr_stripes - rc->kept_from :
			    stripes_left(a);
	if (rc->check)
		rc->checking.total = a->nr_stripes;
	clock_gettime(CLOCK_MONOTONIC, &rc->started);
	if (rc->check && rc->checking.resumed_after)
		eprintf("tptraid: check: going on with the check stopped by "
			"%s, from stripe %" PRIu64 " of %" PRIu64 " (%" PRIu64
			" mismatched before it); nothing is repaired\n",
			rc->checking.resumed_after, rc->kept_from,
			a->nr_stripes, rc->kept.mismatches);
	else if (rc->check)
		eprintf("tptraid: check=yes: checking %" PRIu64 " stripes "
			"online; nothing is repaired\n", rc->total_stripes);
	else if (position == RAID_PARITY_MEMBER && !quiet)
		eprintf("tptraid: computing the parity of %" PRIu64
			" stripes\n", rc->total_stripes);
	else if (rc->replace)
		eprintf("tptraid: replacing position %u: copying member %u "
			"(%s), which serves it meanwhile, onto spare %u (%s) "
			"(what it cannot read rebuilt from the other "
			"positions): %" PRIu64 " stripes\n", position,
			a->replace.old, a->member[a->replace.old].url,
			a->replace.spare, a->member[a->replace.spare].url,
			rc->total_stripes);
	else if (position != RAID_PARITY_MEMBER && !quiet)
		eprintf("tptraid: %s position %u onto member %d (%s): %" PRIu64
			" stripes%s%s\n", catch_up ? "catching up" : "rebuilding",
			position, a->pos[position].member,
			a->member[a->pos[position].member].url,
			rc->total_stripes, !catch_up &&
			rc->total_stripes < a->nr_stripes ?
			" (the rest is done already)" : "",
			along_what(a, position, along, sizeof(along)));
	recovery_step(a);
}

/* A ready spare for @position, if there is one, made its box: the
 * rebuild writes over whatever it held. */
static void recovery_take_spare(struct tpt_array *a, unsigned int position)
{
	struct tpt_position *pos = &a->pos[position];
	unsigned int i;

	for (i = 0; i < a->nr_boxes; i++) {
		struct tpt_member *m = &a->member[i];

		if (!array_spare_ready(m))
			continue;
		if (pos->member >= 0)
			a->member[pos->member].position = -1;
		m->position = (int)position;
		pos->member = (int)i;
		pos->state = TPT_POS_RECOVERING;
		pos->stalled_at = 0;
		pos->catch_up = false;
		array_missed_all(a, position, true);
		eprintf("tptraid: spare %u (%s) takes over position %u\n", i,
			m->url, position);
		array_save_state(a);
		return;
	}
}

void recovery_kick(struct tpt_array *a)
{
	unsigned int i, p;

	if (!a->assembled || a->stopping || a->recovery.active ||
	    a->recovery.in_flight || a->recovery.paused)
		return;
	/* Every position without a box takes a spare first: a rebuild
	 * then takes along the other positions that lack its stripes
	 * (rebuild_along()). */
	for (p = 0; p < a->nr_members; p++)
		if (a->pos[p].state == TPT_POS_MISSING)
			recovery_take_spare(a, p);
	/* From the position after the one that stalled last: two
	 * positions recovering at once may each need the other somewhere
	 * (a source lost during a rebuild, then back), and neither may
	 * starve the other. */
	for (i = 0; i < a->nr_members; i++) {
		p = (a->recovery.kick_from + i) % a->nr_members;
		if (recovering_box(a, p)) {
			recovery_job_start(a, p, a->pos[p].catch_up);
			return;
		}
	}
	if (tpt_array_state(a) != TPT_ARRAY_OPTIMAL)
		return;
	replace_resume(a);
	/* A replace rebuilds from the parity: it must be right. */
	if (a->unsynced)
		recovery_job_start(a, RAID_PARITY_MEMBER, false);
	else if (a->replace.active)
		recovery_job_start(a, a->replace.position, false);
	else
		recovery_check_resume(a);
}

bool recovery_keeps_region(const struct tpt_array *a, uint64_t r)
{
	uint64_t st = r * TPT_RECOVERY_REGION_STRIPES;
	uint64_t end = st + TPT_RECOVERY_REGION_STRIPES;

	for (; a->unsynced && st < end && st < a->nr_stripes;
	     st += a->fine_stripes)
		if (array_fine_has(a, a->unsynced, st))
			return true;
	return false;
}

/* Stripes force_recovery names one by one in the log, at most. */
#define FORCE_LOG_STRIPES 16

/* For the log: @stripe's blocks held by the data positions of @doubtful,
 * which may not be what was written, taken as @how. */
static void force_log(struct tpt_array *a, uint64_t stripe,
		      uint32_t doubtful, const char *how)
{
	uint64_t lba, unit = a->geo.unit_blocks;
	char blocks[160] = "";
	size_t len = 0;
	unsigned int p;

	for (p = 0; p < a->nr_members && len < sizeof(blocks); p++) {
		if (!(doubtful & (1u << p)) ||
		    a->level->unmap(&a->geo, p, stripe * unit, &lba))
			continue;
		len += (size_t)snprintf(blocks + len, sizeof(blocks) - len,
					"%s%" PRIu64 "-%" PRIu64,
					len ? ", " : "", lba, lba + unit - 1);
	}
	eprintf("tptraid: force_recovery: stripe %" PRIu64 " taken %s: "
		"blocks %s may not be what was written\n", stripe, how,
		len ? blocks : "(parity only)");
}

/*
 * More positions lack @stripe than the parity stands for (a box lost
 * during a rebuild and back, after writes in flight tore the stripe):
 * the position of a returning box, whose unit can be taken as it holds
 * it (it left before a write there, so it may be older), or -1.
 */
static int torn_returning(struct tpt_array *a, uint64_t stripe)
{
	uint32_t lacking = array_missing_at(a, stripe);
	unsigned int p;

	if (!array_lacks_too_many(a, lacking))
		return -1;
	for (p = 0; p < a->nr_members; p++) {
		struct tpt_position *pos = &a->pos[p];
		struct tpt_member *m = array_position_member(a, p);

		if ((lacking & (1u << p)) &&
		    pos->state == TPT_POS_RECOVERING && pos->catch_up &&
		    m && m->link == MEMBER_ONLINE && m->ready && !m->failing)
			return (int)p;
	}
	return -1;
}

/* Take the returning box's units of stripes [@first, @end) (one bit of
 * its map) as it holds them, where one of them is torn: the others that
 * lack them are rebuilt from them.  Stripes taken, added to @n. */
static void force_torn(struct tpt_array *a, uint64_t first, uint64_t end,
		       uint64_t *n)
{
	uint64_t s;
	char how[64];
	int p = -1;

	for (s = first; s < end && p < 0; s++)
		p = torn_returning(a, s);
	if (p < 0)
		return;
	snprintf(how, sizeof(how), "from position %d's box as it holds it",
		 p);
	/* The bit stands for all of them: each is taken as it is. */
	for (s = first; s < end; s++, (*n)++)
		if (*n < FORCE_LOG_STRIPES)
			force_log(a, s, array_missing_at(a, s), how);
	array_fine_clear(a, a->pos[p].missed_fine, first, end);
}

/* One data position lacks @stripe where its parity may not match the
 * data: the parity is taken as it is.  True when that was done. */
static bool force_stale(struct tpt_array *a, uint64_t stripe, uint64_t n)
{
	unsigned int nr_parity = a->level->nr_parity(&a->geo), p;
	uint32_t others = array_missing_at(a, stripe);

	/* Every parity unit of the stripe (RAID-6: P and Q) is taken as it
	 * is. */
	for (p = 0; p < nr_parity; p++)
		others &= ~(1u << a->level->parity_member(&a->geo, stripe, p));
	/* None, or more than the parity can stand for. */
	if (!others || array_lacks_too_many(a, others))
		return false;
	if (n < FORCE_LOG_STRIPES)
		force_log(a, stripe, others, "from its parity as it is");
	return true;
}

void recovery_force(struct tpt_array *a)
{
	uint64_t st, s, end, before, n = 0;

	/* A bit of the fine maps at a time: it is taken whole. */
	for (st = 0; st < a->nr_stripes; st = end) {
		end = st + a->fine_stripes < a->nr_stripes ?
		      st + a->fine_stripes : a->nr_stripes;
		force_torn(a, st, end, &n);
		if (!a->parity_stale || !array_fine_has(a, a->parity_stale, st))
			continue;
		for (before = n, s = st; s < end; s++)
			n += force_stale(a, s, n);
		if (n != before)
			array_fine_clear(a, a->parity_stale, st, end);
	}
	if (!n) {
		eprintf("tptraid: force_recovery: no stripe lacks more than "
			"the parity can give back\n");
		return;
	}
	eprintf("tptraid: force_recovery: %" PRIu64 " stripes taken as they "
		"are (the first %u named above)\n", n,
		n < FORCE_LOG_STRIPES ? (unsigned int)n : FORCE_LOG_STRIPES);
	/* A job waiting to try again goes on now. */
	if (a->recovery.paused && !a->recovery.active) {
		del_work(&a->recovery.timer);
		a->recovery.paused = false;
		recovery_kick(a);
	}
}

void recovery_resync_grew(struct tpt_array *a)
{
	struct tpt_recovery *rc = &a->recovery;

	/* Behind where it has got to, too: it would end (and drop the map)
	 * without them. */
	if (rc->active && rc->position == RAID_PARITY_MEMBER) {
		rc->next = 0;
		rc->total_stripes = rc->done_stripes + stripes_left(a);
	}
	recovery_kick(a);
}

void recovery_stop(struct tpt_array *a)
{
	/* Only a member's loss or the array's stop end a check here, and
	 * neither loses it. */
	if (a->recovery.active && a->recovery.check)
		recovery_check_end(a, a->stopping ?
				   "stopped: the array stopped" :
				   "stopped: a box was lost", true);
	if (a->recovery.paused)
		del_work(&a->recovery.timer);
	a->recovery.paused = false;
	a->recovery.active = false;
}

void recovery_progress(const struct tpt_array *a, char *buf, size_t len)
{
	const struct tpt_recovery *rc = &a->recovery;
	double secs = recovery_elapsed(&rc->started), pct, rate, eta;

	if (!rc->active || !rc->total_stripes) {
		snprintf(buf, len, "-");
		return;
	}
	pct = 100.0 * (double)rc->done_stripes / (double)rc->total_stripes;
	rate = secs > 0 ? (double)(rc->done_stripes * a->spec.unit_bytes) /
			  1e6 / secs : 0;
	eta = rc->done_stripes ? secs * (double)(rc->total_stripes -
						 rc->done_stripes) /
				 (double)rc->done_stripes : 0;
	snprintf(buf, len, "%.1f%% eta %.0fs rate %.1fMB/s", pct, eta, rate);
}
