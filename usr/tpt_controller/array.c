/*
 * A TPT-RAID array: its members, and the path a request takes through
 * the engine (tpt_controller.h).
 *
 * Requests.  A request is cut into spans of at most TPT_SPAN_MAX_STRIPES
 * stripes.  A span starts when no running span shares a stripe with it
 * and no span that arrived earlier and shares one is still waiting:
 * overlapping spans run in arrival order, so none is passed for ever.  It
 * is planned without the positions it cannot use (array_span_missing())
 * and run by the mode, which ends it with tpt_span_done().  A span that
 * met a fault - a member failing under it, a released group, a target
 * short of buffers - is planned again after a pause, degraded if a member
 * is gone, for as long as a member may take to be found failed; its
 * request sees an error only when no single lost box explains it.
 *
 * Members (array_members.c).  A box that comes online is claimed and
 * has its superblock read (controller/member_sb.h), then it is set up by
 * the mode.  What it is depends on what the superblock says and on the
 * array: the member of its position, a box that missed writes and must
 * catch up (recovery.c), a spare, or a foreign box that is refused.  A
 * member that fails leaves its position MISSING; the spans under way then,
 * and every write from then on, record their regions in the position's
 * missed-write map, which is what the box has to catch up on if it
 * returns.  Each change of membership raises the array's event
 * count, written to every member's superblock.
 */
#include <errno.h>
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt_controller.h"

/* Stripes one span may cover: in TPT mode a member may need a slot per
 * stripe for its block and one for the calculator's result, out of the
 * 128 slots the mode asks each member for (mode_tpt.c).  A level of
 * copies needs none (span_next()). */
#define TPT_SPAN_MAX_STRIPES 32
/* Spans running at once, at most: the members' buffers are the real
 * bound, which running_cap finds (span_cap_adjust). */
#define TPT_SPAN_RUNNING_MAX 64

time_t tpt_now_s(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec;
}

static time_t since_s(const struct timespec *t)
{
	return tpt_now_s() - t->tv_sec;
}

/* ---- positions and what a span may use ---- */

struct tpt_member *array_position_member(struct tpt_array *a, unsigned int pos)
{
	int m = pos < a->nr_members ? a->pos[pos].member : -1;

	return m >= 0 ? &a->member[m] : NULL;
}

bool array_spare_ready(const struct tpt_member *m)
{
	return m->position < 0 && m->ready && !m->refused && !m->failing &&
	       !m->held && m->link == MEMBER_ONLINE;
}

struct tpt_member *array_span_box(const struct tpt_span *s, unsigned int pos)
{
	struct tpt_array *a = s->array;
	bool replacing = s->replacing && a->replace.active &&
			 a->replace.position == s->member;

	if (s->replacing && pos == s->member)
		return replacing ? &a->member[a->replace.spare] : NULL;
	if (s->copying && pos == a->nr_members)
		return replacing ? &a->member[a->replace.old] : NULL;
	return array_position_member(a, pos);
}

unsigned int array_span_positions(const struct tpt_span *s)
{
	return s->array->nr_members + (s->copying ? 1 : 0);
}

bool array_fine_has(const struct tpt_array *a, const uint8_t *map,
		    uint64_t stripe)
{
	uint64_t b = stripe / a->fine_stripes;

	return map[b / 8] & (1u << (b % 8));
}

static void fine_set(const struct tpt_array *a, uint8_t *map,
		     uint64_t stripe)
{
	uint64_t b = stripe / a->fine_stripes;

	map[b / 8] |= 1u << (b % 8);
}

void array_fine_set(const struct tpt_array *a, uint8_t *map, uint64_t first,
		    uint64_t last)
{
	uint64_t b;

	for (b = first / a->fine_stripes; b <= last / a->fine_stripes; b++)
		map[b / 8] |= (uint8_t)(1u << (b % 8));
}

void array_fine_clear(const struct tpt_array *a, uint8_t *map,
		      uint64_t first, uint64_t end)
{
	uint64_t b;

	for (b = first / a->fine_stripes;
	     b < (end + a->fine_stripes - 1) / a->fine_stripes; b++)
		map[b / 8] &= (uint8_t)~(1u << (b % 8));
}

/*
 * The region map is what survives a restart; the fine one is what a
 * returning box catches up on and what a recovery at another position
 * may count on it for: a few stripes torn by writes in flight when it
 * was lost must not make whole regions unusable at two positions.
 */
bool array_mark_missed(struct tpt_array *a, unsigned int p, uint64_t first,
		       uint64_t last)
{
	struct tpt_position *pos = &a->pos[p];
	bool changed = false;
	uint64_t r;

	for (r = first / TPT_RECOVERY_REGION_STRIPES;
	     r <= last / TPT_RECOVERY_REGION_STRIPES; r++) {
		if (pos->missed[r / 8] & (1u << (r % 8)))
			continue;
		pos->missed[r / 8] |= 1u << (r % 8);
		changed = true;
	}
	array_fine_set(a, pos->missed_fine, first, last);
	return changed;
}

size_t array_missed_fine_bytes(const struct tpt_array *a)
{
	return ((a->nr_stripes + a->fine_stripes - 1) / a->fine_stripes +
		7) / 8;
}

void array_missed_all(struct tpt_array *a, unsigned int p, bool lacks)
{
	memset(a->pos[p].missed_fine, lacks ? 0xff : 0, array_missed_fine_bytes(a));
}

void array_missed_from_regions(struct tpt_array *a, unsigned int p)
{
	const struct tpt_position *pos = &a->pos[p];
	uint64_t r, first, last;

	for (r = 0; r < a->nr_regions; r++) {
		if (!(pos->missed[r / 8] & (1u << (r % 8))))
			continue;
		first = r * TPT_RECOVERY_REGION_STRIPES;
		last = first + TPT_RECOVERY_REGION_STRIPES - 1;
		if (last >= a->nr_stripes)
			last = a->nr_stripes - 1;
		array_mark_missed(a, p, first, last);
	}
}

/* Whether position @p's box holds @stripe's unit as it should. */
static bool position_valid(struct tpt_array *a, unsigned int p,
			   uint64_t stripe)
{
	const struct tpt_position *pos = &a->pos[p];
	struct tpt_member *m = array_position_member(a, p);

	if (!m || m->link != MEMBER_ONLINE || !m->ready || m->failing)
		return false;
	switch (pos->state) {
	case TPT_POS_IN_SYNC:
		return true;
	case TPT_POS_RECOVERING:
		return !array_fine_has(a, pos->missed_fine, stripe);
	default:
		return false;
	}
}

uint32_t array_stripe_parity(const struct tpt_array *a, uint64_t stripe)
{
	uint32_t parity = 0;
	unsigned int i;

	for (i = 0; !a->level->copies && i < a->level->nr_parity(&a->geo);
	     i++)
		parity |= 1u << a->level->parity_member(&a->geo, stripe, i);
	return parity;
}

uint32_t array_absent_at(struct tpt_array *a, uint64_t stripe)
{
	uint32_t absent = 0;
	unsigned int p;

	for (p = 0; p < a->nr_members; p++)
		if (!position_valid(a, p, stripe))
			absent |= 1u << p;
	return absent;
}

uint32_t array_missing_at(struct tpt_array *a, uint64_t stripe)
{
	uint32_t missing = array_absent_at(a, stripe) |
			   array_lost_at(a, stripe);

	/* A box missing where the parity may disagree with what a host
	 * wrote: its units there are unknown, not the parity's to give.
	 * A copy that disagrees is only another version of its data. */
	if (missing && a->parity_stale &&
	    array_fine_has(a, a->parity_stale, stripe))
		missing |= array_stripe_parity(a, stripe);
	return missing;
}

/* ---- stripes whose parity a resync has yet to compute ---- */

int array_unsynced_add(struct tpt_array *a, const uint8_t *regions,
		       bool stale)
{
	size_t mb = array_missed_fine_bytes(a);
	uint64_t st;

	if (!a->unsynced) {
		a->unsynced = calloc(mb, 1);
		a->parity_stale = calloc(mb, 1);
		if (!a->unsynced || !a->parity_stale) {
			array_unsynced_free(a);
			return -ENOMEM;
		}
	}
	for (st = 0; st < a->nr_stripes; st += a->fine_stripes) {
		uint64_t r = st / TPT_RECOVERY_REGION_STRIPES;

		if (!(regions[r / 8] & (1u << (r % 8))))
			continue;
		fine_set(a, a->unsynced, st);
		if (stale)
			fine_set(a, a->parity_stale, st);
	}
	return 0;
}

void array_unsynced_done(struct tpt_array *a, uint64_t first, uint64_t end)
{
	array_fine_clear(a, a->unsynced, first, end);
	array_fine_clear(a, a->parity_stale, first, end);
}

void array_unsynced_free(struct tpt_array *a)
{
	free(a->unsynced);
	free(a->parity_stale);
	a->unsynced = NULL;
	a->parity_stale = NULL;
}

/*
 * A write with every box there leaves an unsynced stripe's parity as far
 * from its data as it was (a small write folds in the change only), and
 * the host's data is now there: until the resync gets to the stripe, a
 * box lost there cannot be rebuilt.  With a box missing, a write is
 * planned from the parity and leaves the missing unit as it read before.
 */
static void span_mark_stale(struct tpt_array *a, const struct tpt_span *s)
{
	uint64_t st;

	if (!a->unsynced || s->kind != TPT_SPAN_WRITE ||
	    array_span_missing(s))
		return;
	for (st = s->first_stripe; st <= s->last_stripe; st++)
		if (array_fine_has(a, a->unsynced, st))
			fine_set(a, a->parity_stale, st);
}

/*
 * The parity positions of @s's stripes whose parity may not match their
 * data (parity_stale): a unit a member cannot read there is not the
 * parity's to give back, as array_missing_at() says of a box missing
 * there.  Rebuilt from it, the unit of a stripe a crash tore would come
 * back wrong, and be read and written back so.
 */
static uint32_t span_stale_parity(const struct tpt_span *s)
{
	const struct tpt_array *a = s->array;
	uint32_t parity = 0;
	uint64_t st;

	for (st = s->first_stripe; a->parity_stale && st <= s->last_stripe;
	     st++)
		if (array_fine_has(a, a->parity_stale, st))
			parity |= array_stripe_parity(a, st);
	return parity;
}

uint32_t array_span_missing(const struct tpt_span *s)
{
	uint32_t lacking = s->missing | s->excluded;

	return s->excluded ? lacking | span_stale_parity(s) : lacking;
}

/*
 * The first block of READ span @s, failed for lack of units (boxes lost,
 * units members could not read), that its stripe cannot give: on a
 * position it lacks, in a stripe that lacks more than the level gives
 * back.  What a disk reports in the sense INFORMATION of a READ it could
 * not complete.  The span's first block when none stands out.
 */
uint64_t array_span_first_lost(const struct tpt_span *s)
{
	const struct tpt_array *a = s->array;
	uint64_t lba = s->lba, end = s->lba + s->blocks;
	uint32_t lacking = array_span_missing(s);
	struct raid_chunk c;

	if (!array_lacks_too_many(a, lacking) || a->level->copies)
		return s->lba;
	while (lba < end) {
		a->level->map(&a->geo, lba, &c);
		if (lacking & (1u << c.member))
			return lba;
		lba += a->geo.unit_blocks - c.member_lba % a->geo.unit_blocks;
	}
	return s->lba;
}

/*
 * Fix what @s plans without, cutting it where that changes within it (a
 * position recovered in part of the span, or missed in part): the rest becomes
 * the request's next span.  A rebuild span names its target position,
 * which is missing by definition; recovery's spans are not cut.
 */
static void span_settle_missing(struct tpt_array *a, struct tpt_span *s)
{
	uint64_t per_stripe = raid_stripe_data_blocks(a->level, &a->geo);
	uint64_t st;

	s->missing = array_missing_at(a, s->first_stripe);
	if (tpt_span_background(s)) {
		/* Planned as a whole: without every position it lacks
		 * anywhere (recovery.c cuts its batches where that
		 * changes, but it may have changed since). */
		for (st = s->first_stripe + 1; st <= s->last_stripe; st++)
			s->missing |= array_missing_at(a, st);
		return;
	}
	for (st = s->first_stripe + 1; st <= s->last_stripe; st++) {
		uint64_t end;

		if (array_missing_at(a, st) == s->missing)
			continue;
		end = st * per_stripe;
		s->blocks = (uint32_t)(end - s->lba);
		s->last_stripe = st - 1;
		break;
	}
}

/* ---- spans and stripe locks ---- */

static bool spans_overlap(const struct tpt_span *x, const struct tpt_span *y)
{
	return x->first_stripe <= y->last_stripe &&
	       y->first_stripe <= x->last_stripe;
}

static bool overlaps_any(const struct tpt_span *s, struct list_head *list,
			 const struct tpt_span *stop)
{
	struct tpt_span *o;

	list_for_each_entry(o, list, link) {
		if (o == stop)
			break;
		if (spans_overlap(o, s))
			return true;
	}
	return false;
}

/* The next span of @r, or NULL without memory. */
static struct tpt_span *span_next(struct tpt_req *r)
{
	struct tpt_array *a = r->array;
	uint64_t per_stripe = raid_stripe_data_blocks(a->level, &a->geo);
	uint64_t end = r->lba + r->blocks, cut;
	struct tpt_span *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	cut = (r->next / per_stripe +
	       (r->stripe_at_a_time ? 1 : TPT_SPAN_MAX_STRIPES)) * per_stripe;
	/* A mirror's reads and writes take no slots: nothing bounds its
	 * span but the request. */
	if (cut > end || (a->level->copies && !r->stripe_at_a_time))
		cut = end;
	s->kind = r->kind == TPT_REQ_WRITE ? TPT_SPAN_WRITE : TPT_SPAN_READ;
	s->req = r;
	s->array = a;
	s->fua = r->fua;
	s->lba = r->next;
	s->blocks = (uint32_t)(cut - r->next);
	clock_gettime(CLOCK_MONOTONIC, &s->first_try);
	s->first_stripe = s->lba / per_stripe;
	s->last_stripe = (cut - 1) / per_stripe;
	return s;
}

/* Its part of a proxied request's buffer (a direct request's data is in
 * the host, where the mode finds it through s->req->direct). */
static void span_buffer(struct tpt_array *a, struct tpt_span *s)
{
	if (s->req && s->req->buf)
		s->buf = s->req->buf + (s->lba - s->req->lba) * a->block_size;
}

static unsigned int spans_running(const struct tpt_array *a)
{
	const struct list_head *p;
	unsigned int n = 0;

	for (p = a->running.next; p != &a->running; p = p->next)
		n++;
	return n;
}

/*
 * Back-pressure from the members (protocol.md 8.4), additive increase and
 * multiplicative decrease: a member short of buffers halves the number of
 * spans that may run at once, each span that completes adds one.  Without
 * it, a stream of large writes keeps every member's pool share full, and
 * most spans are planned, refused with INSUFFICIENT RESOURCES, released
 * and planned again: commands sent for nothing.
 */
static void span_cap_adjust(struct tpt_array *a, int result)
{
	unsigned int running = spans_running(a);

	if (result == -EAGAIN)
		a->running_cap = running > 2 ? (running + 1) / 2 : 1;
	else if (!result && a->running_cap < TPT_SPAN_RUNNING_MAX)
		a->running_cap++;
}

/* Start @s if no running span shares a stripe with it: 0 started, -EBUSY
 * stripes taken, -EAGAIN the mode's resources are short.  A span waiting
 * to be planned again still holds its stripes: it may have left one half
 * written, for its re-plan (without the member that failed it) to finish. */
static int span_try_start(struct tpt_array *a, struct tpt_span *s)
{
	if (overlaps_any(s, &a->running, NULL) ||
	    overlaps_any(s, &a->retrying, NULL))
		return -EBUSY;
	/* Like a mode short of resources: later spans wait too. */
	if (spans_running(a) >= a->running_cap) {
		a->starved = true;
		return -EAGAIN;
	}
	if (s->kind == TPT_SPAN_WRITE && !replace_write_may_start(a, s))
		return -EBUSY;
	span_settle_missing(a, s);
	span_mark_stale(a, s);
	span_buffer(a, s);
	if (s->kind == TPT_SPAN_WRITE)
		replace_write_starts(a, s);
	/* Its regions marked durably first: parked until then. */
	if (array_intent_hold(a, s))
		return 0;
	if (s->missing) {
		pthread_mutex_lock(&a->counters_lock);
		a->counters.degraded_spans++;
		pthread_mutex_unlock(&a->counters_lock);
	}
	list_add_tail(&s->link, &a->running);
	if (a->mode->start(s)) {
		list_del(&s->link);
		array_intent_release(a, s);
		a->starved = true;
		return -EAGAIN;
	}
	return 0;
}

/*
 * Waiting spans in arrival order.  A span that cannot start blocks the
 * later spans that share a stripe with it; one that waits for the mode's
 * resources blocks every later one (a->starved), so that small requests
 * do not starve a large one of slots.  A span that ends at once re-enters
 * here: that re-run is folded into the loop instead of nesting.
 */
void array_run_waiting(struct tpt_array *a)
{
	struct tpt_span *s, *tmp;
	struct list_head *before;

	if (a->draining) {
		a->redrain = true;
		return;
	}
	a->draining = true;
	do {
		a->redrain = false;
		a->starved = false;
		list_for_each_entry_safe(s, tmp, &a->waiting, link) {
			if (overlaps_any(s, &a->waiting, s))
				continue;
			before = s->link.prev;
			list_del(&s->link);
			if (!span_try_start(a, s)) {
				if (a->redrain)
					break;
				continue;
			}
			list_add(&s->link, before);
			if (a->starved)
				break;
		}
	} while (a->redrain);
	a->draining = false;
}

void array_spans_missed(struct tpt_array *a, unsigned int p)
{
	struct list_head *lists[] = { &a->running, &a->retrying };
	struct tpt_span *s;
	unsigned int i;

	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		list_for_each_entry(s, lists[i], link)
			if (s->wrote && (s->kind != TPT_SPAN_REBUILD ||
					 s->member == RAID_PARITY_MEMBER))
				array_mark_missed(a, p, s->first_stripe,
						  s->last_stripe);
}

static void span_queue(struct tpt_array *a, struct tpt_span *s)
{
	if (a->starved || overlaps_any(s, &a->waiting, NULL) ||
	    span_try_start(a, s))
		list_add_tail(&s->link, &a->waiting);
}

void array_queue_span(struct tpt_array *a, struct tpt_span *s)
{
	span_queue(a, s);
}

void array_queue_span_first(struct tpt_array *a, struct tpt_span *s)
{
	list_add(&s->link, &a->waiting);
}

struct tpt_span *array_background_span(struct tpt_array *a,
				       enum tpt_span_kind kind,
				       unsigned int member, uint64_t first,
				       uint64_t n,
				       void (*done)(struct tpt_span *, int))
{
	uint64_t per_stripe = raid_stripe_data_blocks(a->level, &a->geo);
	struct tpt_span *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->kind = kind;
	s->array = a;
	s->member = member;
	s->first_stripe = first;
	s->last_stripe = first + n - 1;
	s->lba = first * per_stripe;
	s->blocks = (uint32_t)(n * per_stripe);
	s->done = done;
	clock_gettime(CLOCK_MONOTONIC, &s->first_try);
	return s;
}

static void req_finish(struct tpt_req *r)
{
	struct tpt_array *a = r->array;

	if (r->result) {
		pthread_mutex_lock(&a->counters_lock);
		a->counters.failed++;
		pthread_mutex_unlock(&a->counters_lock);
	}
	r->done(r, r->result);
}

/* Queue the next span of @r, or finish it. */
static void req_continue(struct tpt_req *r)
{
	struct tpt_span *s;

	if (r->result || r->next == r->lba + r->blocks) {
		req_finish(r);
		return;
	}
	s = span_next(r);
	if (!s) {
		r->result = -ENOMEM;
		req_finish(r);
		return;
	}
	span_queue(r->array, s);
}

/* ---- retrying a span ---- */

static struct tgt_work retry_work;
static LIST_HEAD(retry_arrays);
static bool retry_armed;

struct retry_entry {
	struct list_head link;
	struct tpt_array *array;
};

void array_requests_init(struct tpt_array *a)
{
	pthread_mutex_init(&a->submit_lock, NULL);
	pthread_mutex_init(&a->counters_lock, NULL);
	INIT_LIST_HEAD(&a->submitted);
	INIT_LIST_HEAD(&a->running);
	INIT_LIST_HEAD(&a->waiting);
	INIT_LIST_HEAD(&a->retrying);
	a->running_cap = TPT_SPAN_RUNNING_MAX;
}

int array_retry_add(struct tpt_array *a)
{
	struct retry_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->array = a;
	list_add_tail(&e->link, &retry_arrays);
	return 0;
}

void array_retry_remove(struct tpt_array *a)
{
	struct retry_entry *e;

	list_for_each_entry(e, &retry_arrays, link) {
		if (e->array == a) {
			list_del(&e->link);
			free(e);
			return;
		}
	}
}

static void retry_tick(void *data)
{
	struct retry_entry *e;
	bool again = false;

	(void)data;
	retry_armed = false;
	list_for_each_entry(e, &retry_arrays, link) {
		struct tpt_array *a = e->array;

		/* Ahead of the spans that waited for their stripes. */
		list_splice_init(&a->retrying, &a->waiting);
		array_run_waiting(a);
		if (!list_empty(&a->retrying))
			again = true;
	}
	if (again && !retry_armed) {
		retry_armed = true;
		add_work(&retry_work, 1);
	}
}

/* Plan @s again a second from now (tgt's timers tick in seconds): a
 * member that failed is out of the array by then, a target short of
 * buffers has given some back.  With @short_of_buffers, sooner: when the
 * next span ends, which gives its buffers back (span_wake_short). */
static void span_retry_later(struct tpt_array *a, struct tpt_span *s,
			     bool short_of_buffers)
{
	s->missing = 0;
	s->short_of_buffers = short_of_buffers;
	list_add_tail(&s->link, &a->retrying);
	if (!retry_armed) {
		retry_armed = true;
		retry_work.func = retry_tick;
		add_work(&retry_work, 1);
	}
}

/*
 * READ span @s met units lost on more positions than the level gives
 * back, somewhere in its stripes: it keeps its first stripe, without
 * what it excluded, and the request goes on a stripe at a time (it
 * fails at the stripe that lacks them).
 */
static void span_narrow(struct tpt_array *a, struct tpt_span *s)
{
	uint64_t per_stripe = raid_stripe_data_blocks(a->level, &a->geo);

	s->narrow = false;
	s->excluded = 0;
	s->blocks = (uint32_t)((s->first_stripe + 1) * per_stripe - s->lba);
	s->last_stripe = s->first_stripe;
	s->req->stripe_at_a_time = true;
}

/* Long enough for a hung member to be found failed, and its requests to
 * be planned without it; the time every member was silent (the
 * controller's link out) and the backoff after it not counted. */
static bool span_may_retry(struct tpt_array *a, struct tpt_span *s)
{
	return !a->stopping &&
	       since_s(&s->first_try) < 2 * (time_t)a->fail_timeout + 10 +
	       member_silence_excused(a, s->first_try.tv_sec);
}

void tpt_array_count(struct tpt_array *a, const struct tpt_array_counters *d)
{
	pthread_mutex_lock(&a->counters_lock);
	a->counters.target_bytes_in += d->target_bytes_in;
	a->counters.target_bytes_out += d->target_bytes_out;
	a->counters.bytes_xored += d->bytes_xored;
	a->counters.pdus += d->pdus;
	a->counters.rma_ops += d->rma_ops;
	a->counters.peer_bytes += d->peer_bytes;
	a->counters.pdu_moves += d->pdu_moves;
	pthread_mutex_unlock(&a->counters_lock);
}

/*
 * A span ended and its members freed what it held: the spans a target
 * turned away for want of buffers (INSUFFICIENT RESOURCES, protocol.md
 * 8.4) try again now, ahead of the others, instead of a second later.
 * Under a stream of large writes a target's pool share is often full
 * for a moment; a second's pause for each of those moments cost most of
 * the throughput.
 */
static void span_wake_short(struct tpt_array *a)
{
	struct tpt_span *o, *tmp;
	LIST_HEAD(woken);

	list_for_each_entry_safe(o, tmp, &a->retrying, link) {
		if (!o->short_of_buffers)
			continue;
		o->short_of_buffers = false;
		list_del(&o->link);
		list_add_tail(&o->link, &woken);
	}
	list_splice_init(&woken, &a->waiting);
}

void tpt_span_done(struct tpt_span *s, int result, bool retry,
		   const struct tpt_array_counters *delta)
{
	struct tpt_array *a = s->array;
	struct tpt_req *r = s->req;
	uint64_t bytes = (uint64_t)s->blocks * a->block_size;

	list_del(&s->link);
	array_intent_release(a, s);
	span_wake_short(a);
	span_cap_adjust(a, result);
	if (delta)
		tpt_array_count(a, delta);
	/* A recovery that was stopped does not want its batch any more; a
	 * unit to write back whose position has since lost its box is the
	 * recovery's to write. */
	if (tpt_span_background(s) && !s->repair && !a->recovery.active)
		retry = false;
	if (s->repair &&
	    (array_missing_at(a, s->first_stripe) & (1u << s->member)))
		retry = false;
	if (result && retry && span_may_retry(a, s)) {
		pthread_mutex_lock(&a->counters_lock);
		a->counters.replans++;
		pthread_mutex_unlock(&a->counters_lock);
		s->attempts++;
		/* A fault a member has since been failed for, or one that a
		 * re-plan alone cures: at once; anything else after a pause. */
		if (s->narrow)
			span_narrow(a, s);
		if (array_missing_at(a, s->first_stripe) != s->missing ||
		    result == -ESTALE) {
			s->missing = 0;
			read_repair_queue(a, s, s->repair_first);
			s->repair_asked |= s->repair_first;
			s->repair_first = 0;
			span_queue(a, s);
		} else {
			/* Short of buffers while other spans hold some: one
			 * of them ending is the moment to try again. */
			span_retry_later(a, s, result == -EAGAIN &&
					 !list_empty(&a->running));
		}
		array_run_waiting(a);
		return;
	}
	/* It read around units it could not: they are written back. */
	if (!result && s->excluded)
		read_repair_queue(a, s, s->excluded);
	if (!result && s->kind == TPT_SPAN_WRITE)
		array_lost_written(a, s);
	if (tpt_span_background(s)) {
		s->done(s, result);
		array_run_waiting(a);
		return;
	}
	pthread_mutex_lock(&a->counters_lock);
	if (!result) {
		/* An extended host's bytes went past the controller. */
		struct tpt_array_counters *k = &a->counters;
		uint64_t *in = r->direct ? &k->direct_bytes_in : &k->host_bytes_in;
		uint64_t *out = r->direct ? &k->direct_bytes_out :
					    &k->host_bytes_out;

		*(s->kind == TPT_SPAN_WRITE ? in : out) += bytes;
	}
	pthread_mutex_unlock(&a->counters_lock);
	if (result && !r->result) {
		/* The spans before it have their blocks read: a READ's host
		 * gets those, and where it failed. */
		r->result = result;
		r->next = s->lba;
		if (s->kind == TPT_SPAN_READ)
			r->lost_lba = array_span_first_lost(s);
	} else {
		r->next = s->lba + s->blocks;
	}
	free(s);
	req_continue(r);
	array_run_waiting(a);
}

/* ---- SYNCHRONIZE CACHE to every member that holds data ---- */

static void sync_done(struct tpt_member *m, struct scsi_task *task,
		      int status, void *arg)
{
	struct tpt_req *r = arg;

	(void)task;
	/* A member that fails is out of the array: what it cached is not
	 * the array's any more. */
	if (status != SCSI_STATUS_GOOD && status != SCSI_STATUS_CANCELLED) {
		eprintf("tptraid: member %u: SYNCHRONIZE CACHE failed: %s\n",
			m->id, member_error(m));
		array_member_error(m->array, m, "SYNCHRONIZE CACHE failed");
	}
	if (!--r->pending)
		req_finish(r);
}

static void sync_start(struct tpt_req *r)
{
	struct tpt_array *a = r->array;
	unsigned int i;

	/* Held while the commands go out. */
	r->pending = 1;
	for (i = 0; i < a->nr_boxes; i++) {
		struct tpt_member *m = &a->member[i];
		struct scsi_task *task;

		if (m->position < 0 || m->link != MEMBER_ONLINE || !m->ready)
			continue;
		task = scsi_cdb_synchronizecache16(0, 0, 0, 0);
		r->pending++;
		if (!task || member_send(m, task, NULL, 0, sync_done, r))
			r->pending--;
	}
	if (tpt_array_state(a) == TPT_ARRAY_FAILED)
		r->result = -ENODATA;
	if (!--r->pending)
		req_finish(r);
}

/* ---- the API ---- */

void tpt_array_submit(struct tpt_array *a, struct tpt_req *r)
{
	uint64_t array_blocks = a->level->array_blocks(&a->geo);

	r->array = a;
	r->next = r->lba;
	r->result = 0;
	r->lost_lba = r->lba;
	r->stripe_at_a_time = false;
	if (r->kind == TPT_REQ_SYNC) {
		sync_start(r);
		return;
	}
	pthread_mutex_lock(&a->counters_lock);
	if (r->kind == TPT_REQ_WRITE)
		a->counters.writes++;
	else
		a->counters.reads++;
	pthread_mutex_unlock(&a->counters_lock);
	if (r->lba > array_blocks || r->blocks > array_blocks - r->lba)
		r->result = -EINVAL;
	/* The host may have logged out since its command was checked. */
	else if (r->direct)
		r->result = tpt_hosts_resolve(a, r->direct);
	req_continue(r);
}

/* ---- the blocking wrapper ---- */

struct blocking_req {
	struct tpt_req r;
	sem_t done;
};

static void blocking_done(struct tpt_req *r, int result)
{
	struct blocking_req *b = (struct blocking_req *)r;

	(void)result;
	sem_post(&b->done);
}

void array_submitted(int fd, int events, void *data)
{
	struct tpt_array *a = data;
	struct tpt_req *r, *tmp;
	uint64_t count;
	LIST_HEAD(fresh);

	(void)events;
	if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		eprintf("tptraid: eventfd read: %m\n");
	pthread_mutex_lock(&a->submit_lock);
	list_splice_init(&a->submitted, &fresh);
	pthread_mutex_unlock(&a->submit_lock);
	list_for_each_entry_safe(r, tmp, &fresh, link) {
		list_del(&r->link);
		tpt_array_submit(a, r);
	}
}

/* Submits a copy of @r on the event loop and waits for its end; fills in
 * @r's result, and for a failed READ where it stopped (next, lost_lba). */
static int array_io_wait(struct tpt_array *a, struct tpt_req *r)
{
	struct blocking_req b = { .r = *r };
	uint64_t one = 1;

	if (b.r.kind != TPT_REQ_SYNC && !b.r.blocks)
		return r->result = 0;
	b.r.done = blocking_done;
	sem_init(&b.done, 0, 0);
	pthread_mutex_lock(&a->submit_lock);
	list_add_tail(&b.r.link, &a->submitted);
	pthread_mutex_unlock(&a->submit_lock);
	if (write(a->efd, &one, sizeof(one)) < 0)
		eprintf("tptraid: eventfd write: %m\n");
	while (sem_wait(&b.done) && errno == EINTR)
		;
	sem_destroy(&b.done);
	r->next = b.r.next;
	r->lost_lba = b.r.lost_lba;
	return r->result = b.r.result;
}

int tpt_array_io(struct tpt_array *a, enum tpt_req_kind kind, uint64_t lba,
		 uint32_t blocks, void *buf, bool fua)
{
	struct tpt_req r = { .kind = kind, .lba = lba, .blocks = blocks,
			     .buf = buf, .fua = fua };

	return array_io_wait(a, &r);
}

void tpt_array_io_direct(struct tpt_array *a, struct tpt_req *r)
{
	array_io_wait(a, r);
}

void tpt_array_get_counters(struct tpt_array *a, struct tpt_array_counters *out)
{
	pthread_mutex_lock(&a->counters_lock);
	*out = a->counters;
	pthread_mutex_unlock(&a->counters_lock);
}

/* ---- state ---- */

const char *tpt_array_state_name(enum tpt_array_state st)
{
	static const char *const names[] = {
		[TPT_ARRAY_OPTIMAL] = "optimal",
		[TPT_ARRAY_DEGRADED] = "degraded",
		[TPT_ARRAY_REBUILDING] = "rebuilding",
		[TPT_ARRAY_RESYNCING] = "resyncing",
		[TPT_ARRAY_FAILED] = "failed",
	};

	return names[st];
}

/* The array's state were @without (NULL: none) lost too. */
static enum tpt_array_state array_state_without(const struct tpt_array *a,
						const struct tpt_member *without)
{
	unsigned int p, lost = 0, recovering = 0;
	bool catch_up = false;

	for (p = 0; p < a->nr_members; p++) {
		const struct tpt_position *pos = &a->pos[p];
		const struct tpt_member *m = pos->member >= 0 ?
					     &a->member[pos->member] : NULL;
		bool usable = m && m != without && m->link == MEMBER_ONLINE &&
			      m->ready;

		if (pos->state == TPT_POS_IN_SYNC && usable)
			continue;
		if (pos->state == TPT_POS_RECOVERING && usable) {
			recovering++;
			catch_up |= pos->catch_up;
			continue;
		}
		lost++;
	}
	if (lost + recovering > a->level->nr_parity(&a->geo) ||
	    lost > a->level->nr_parity(&a->geo))
		return TPT_ARRAY_FAILED;
	if (recovering)
		return catch_up ? TPT_ARRAY_RESYNCING : TPT_ARRAY_REBUILDING;
	/* A check changes nothing: the array is as it was. */
	if (a->recovery.active && a->recovery.position == RAID_PARITY_MEMBER &&
	    !a->recovery.check)
		return TPT_ARRAY_RESYNCING;
	return lost ? TPT_ARRAY_DEGRADED : TPT_ARRAY_OPTIMAL;
}

enum tpt_array_state tpt_array_state(const struct tpt_array *a)
{
	return array_state_without(a, NULL);
}

bool array_may_lose(const struct tpt_array *a, const struct tpt_member *m)
{
	return array_state_without(a, m) != TPT_ARRAY_FAILED;
}

bool array_lacks_too_many(const struct tpt_array *a, uint32_t lacking)
{
	return (unsigned int)__builtin_popcount(lacking) >
	       a->level->nr_parity(&a->geo);
}

/* Whether @s's stripes can do without @pos as well as what they lack. */
static bool rebuildable_without(const struct tpt_span *s, unsigned int pos)
{
	return !array_lacks_too_many(s->array, array_span_missing(s) |
				     1u << pos | span_stale_parity(s));
}

/*
 * Whether a member's failed command under @s goes without its own log
 * line: a medium error met again by a recovery trying the stripes it
 * stopped at every 5 s, which said what it could not read when it
 * stopped (recovery_pause()).
 */
bool array_failure_quiet(const struct tpt_span *s,
			 const struct scsi_task *task, int status)
{
	if (status != SCSI_STATUS_CHECK_CONDITION || !task ||
	    task->sense.key != SCSI_SENSE_MEDIUM_ERROR ||
	    s->kind != TPT_SPAN_REBUILD || s->repair)
		return false;
	return *recovery_stalled_at(s->array, s->member);
}

/* For the log: @m's units of @s's stripes are lost until written. */
static void say_lost(const struct tpt_span *s, const struct tpt_member *m)
{
	eprintf("tptraid: member %u cannot read its units of stripes %" PRIu64
		"-%" PRIu64 ", and %s: what needs them fails until a write "
		"covers them\n", m->id, s->first_stripe, s->last_stripe,
		span_stale_parity(s) ? "their parity may not match their data "
		"(a write was in flight there at a crash, and no resync has "
		"made them agree)" : array_span_missing(s) ?
		"another position lacks them" : "neither can another position");
}

int array_unreadable(struct tpt_span *s, struct tpt_member *m,
		     unsigned int pos, bool *retry)
{
	struct tpt_array *a = s->array;
	bool resync = s->kind == TPT_SPAN_REBUILD &&
		      s->member == RAID_PARITY_MEMBER && !s->repair;
	bool repairs = (s->kind == TPT_SPAN_WRITE && !s->wrote) ||
		       s->kind == TPT_SPAN_CHECK || s->repair || resync;

	pthread_mutex_lock(&a->counters_lock);
	a->counters.medium_errors++;
	pthread_mutex_unlock(&a->counters_lock);
	*retry = true;
	/* The box a replace copies from cannot read its units there: the
	 * others give them, as they would without the copy. */
	if (s->copying) {
		s->copying = false;
		return -ESTALE;
	}
	/* Planned again without it: it is written back once the span has
	 * read the rest.  Not a parity resync's, which computes the parity
	 * from every data unit: the unit is written back first (below),
	 * where the parity can be trusted. */
	if ((s->kind == TPT_SPAN_READ ||
	     (s->kind == TPT_SPAN_REBUILD && !s->repair && !resync)) &&
	    rebuildable_without(s, pos)) {
		s->excluded |= 1u << pos;
		return -ESTALE;
	}
	/* A write or a repair that has written nothing, a check, a parity
	 * resync: the stripes are as they were, and what the others hold
	 * gives the units back first (a resync's, where its parity can be
	 * trusted: rebuildable_without()).  Once a write has written some,
	 * only the parity of a plan without the member knows what they
	 * hold. */
	if (repairs && !(s->repair_asked & (1u << pos)) && s->repair < 2 &&
	    rebuildable_without(s, pos)) {
		s->repair_first |= 1u << pos;
		return -ESTALE;
	}
	/* More units unknown than the level gives back (a box lost too, a
	 * second lost sector in the stripe): those blocks are lost until
	 * written, and the span fails; failing a member would lose more.
	 * A recovery steps over the stripes as it does over those another
	 * position lacks, and comes back for them (recovery.c).  A READ
	 * of several stripes goes over them again a stripe at a time
	 * first (span_narrow()): the stripes before serve their blocks. */
	if (s->kind == TPT_SPAN_READ && s->first_stripe < s->last_stripe) {
		s->narrow = true;
		return -ESTALE;
	}
	if ((repairs || s->kind == TPT_SPAN_READ) && !s->wrote) {
		/* A resync trying the stripe it stopped at again (every 5 s)
		 * said so when it stopped. */
		if (!resync || a->recovery.resync_stalled_at !=
			       s->first_stripe + 1)
			say_lost(s, m);
		s->lost_units = true;
		/* What the recovery steps over the stripes for. */
		s->excluded |= 1u << pos;
		*retry = false;
		return -EIO;
	}
	/* A recovery's: recovery.c records the unit it rebuilds there as
	 * lost.  Not the member's fault beyond that sector, even where the
	 * array could lose it (RAID-6 with two survivors' sectors lost in one
	 * stripe): failed, it would take every unit it still holds along,
	 * be caught up, and fail again at the same sector. */
	if (s->kind == TPT_SPAN_REBUILD && s->member != RAID_PARITY_MEMBER) {
		s->excluded |= 1u << pos;
		*retry = false;
		return -EIO;
	}
	array_member_error(a, m, "medium error");
	return -EIO;
}

/*
 * A medium error on a read of a read span is served without the member,
 * for this span only, and planned again at once; a member failing its own
 * media (a medium error while a write reads, a hardware error) is failed;
 * a command it calls wrong fails the span; anything else - the member
 * gone (member.c failed it) or busy - is planned again.
 */
int array_read_failed(struct tpt_span *s, struct tpt_member *m,
		      unsigned int pos, const struct scsi_task *task,
		      int status, bool *retry)
{
	*retry = true;
	if (status != SCSI_STATUS_CHECK_CONDITION || !task)
		return -EIO;
	switch (task->sense.key) {
	case SCSI_SENSE_MEDIUM_ERROR:
		return array_unreadable(s, m, pos, retry);
	case SCSI_SENSE_HARDWARE_ERROR:
		array_member_error(s->array, m, "hardware error");
		return -EIO;
	case SCSI_SENSE_ILLEGAL_REQUEST:
		*retry = false;
		return -EIO;
	default:
		return -EIO;
	}
}
