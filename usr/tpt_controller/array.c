/*
 * A TPT-RAID array: assembly, and the path a request takes through the
 * engine (tpt_controller.h).
 *
 * A request is cut into spans of at most TPT_SPAN_MAX_STRIPES stripes.  A
 * span starts when no running span shares a stripe with it and no span
 * that arrived earlier and shares one is still waiting: overlapping spans
 * run in arrival order, so none is passed for ever.  The mode then runs
 * it and ends it with tpt_span_done(), which starts the request's next
 * span or completes the request.
 */
#include <errno.h>
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt_controller.h"

/* Stripes one span may cover: in TPT mode a member may need a slot per
 * stripe for its block and one for the calculator's result, out of the
 * 128 slots the mode asks each member for (mode_tpt.c). */
#define TPT_SPAN_MAX_STRIPES 32

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
	cut = (r->next / per_stripe + TPT_SPAN_MAX_STRIPES) * per_stripe;
	if (cut > end)
		cut = end;
	s->req = r;
	s->array = a;
	s->write = r->kind == TPT_REQ_WRITE;
	s->lba = r->next;
	s->blocks = (uint32_t)(cut - r->next);
	s->buf = r->buf + (r->next - r->lba) * a->block_size;
	s->first_stripe = s->lba / per_stripe;
	s->last_stripe = (cut - 1) / per_stripe;
	return s;
}

/* Start @s if no running span shares a stripe with it: 0 started, -EBUSY
 * stripes taken, -EAGAIN the mode's resources are short. */
static int span_try_start(struct tpt_array *a, struct tpt_span *s)
{
	if (overlaps_any(s, &a->running, NULL))
		return -EBUSY;
	list_add_tail(&s->link, &a->running);
	if (a->mode->start(s)) {
		list_del(&s->link);
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
static void run_waiting(struct tpt_array *a)
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

static void span_queue(struct tpt_array *a, struct tpt_span *s)
{
	if (a->starved || overlaps_any(s, &a->waiting, NULL) ||
	    span_try_start(a, s))
		list_add_tail(&s->link, &a->waiting);
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

void tpt_span_done(struct tpt_span *s, int result,
		   const struct tpt_array_counters *delta)
{
	struct tpt_array *a = s->array;
	struct tpt_req *r = s->req;
	uint64_t bytes = (uint64_t)s->blocks * a->block_size;

	list_del(&s->link);
	pthread_mutex_lock(&a->counters_lock);
	if (delta) {
		a->counters.target_bytes_in += delta->target_bytes_in;
		a->counters.target_bytes_out += delta->target_bytes_out;
		a->counters.bytes_xored += delta->bytes_xored;
		a->counters.pdus += delta->pdus;
		a->counters.rma_ops += delta->rma_ops;
	}
	if (!result) {
		if (s->write)
			a->counters.host_bytes_in += bytes;
		else
			a->counters.host_bytes_out += bytes;
	}
	pthread_mutex_unlock(&a->counters_lock);
	if (result && !r->result)
		r->result = result;
	r->next = s->lba + s->blocks;
	free(s);
	req_continue(r);
	run_waiting(a);
}

/* ---- SYNCHRONIZE CACHE to every member ---- */

static void sync_done(struct tpt_member *m, struct scsi_task *task,
		      int status, void *arg)
{
	struct tpt_req *r = arg;

	(void)task;
	if (status != SCSI_STATUS_GOOD) {
		eprintf("tptraid: member %u: SYNCHRONIZE CACHE failed: %s\n",
			m->index, member_error(m));
		r->result = -EIO;
	}
	if (!--r->spans_left)
		req_finish(r);
}

static void sync_start(struct tpt_req *r)
{
	struct tpt_array *a = r->array;
	unsigned int i;

	/* Held while the commands go out. */
	r->spans_left = 1;
	for (i = 0; i < a->nr_members; i++) {
		struct scsi_task *task = scsi_cdb_synchronizecache16(0, 0, 0, 0);

		r->spans_left++;
		if (!task || member_send(&a->member[i], task, NULL, 0,
					 sync_done, r)) {
			r->spans_left--;
			r->result = -EIO;
		}
	}
	sync_done(&a->member[0], NULL, SCSI_STATUS_GOOD, r);
}

/* ---- the API ---- */

void tpt_array_submit(struct tpt_array *a, struct tpt_req *r)
{
	uint64_t array_blocks = a->level->array_blocks(&a->geo);

	r->array = a;
	r->next = r->lba;
	r->result = 0;
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

static void array_submitted(int fd, int events, void *data)
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

int tpt_array_io(struct tpt_array *a, enum tpt_req_kind kind, uint64_t lba,
		 uint32_t blocks, void *buf)
{
	struct blocking_req b = {
		.r = {
			.kind = kind,
			.lba = lba,
			.blocks = blocks,
			.buf = buf,
			.done = blocking_done,
		},
	};
	uint64_t one = 1;
	int ret;

	if (kind != TPT_REQ_SYNC && !blocks)
		return 0;
	sem_init(&b.done, 0, 0);
	pthread_mutex_lock(&a->submit_lock);
	list_add_tail(&b.r.link, &a->submitted);
	pthread_mutex_unlock(&a->submit_lock);
	if (write(a->efd, &one, sizeof(one)) < 0)
		eprintf("tptraid: eventfd write: %m\n");
	while (sem_wait(&b.done) && errno == EINTR)
		;
	sem_destroy(&b.done);
	ret = b.r.result;
	return ret;
}

void tpt_array_get_counters(struct tpt_array *a, struct tpt_array_counters *out)
{
	pthread_mutex_lock(&a->counters_lock);
	*out = a->counters;
	pthread_mutex_unlock(&a->counters_lock);
}

/* ---- assembly and teardown ---- */

uint64_t tpt_array_bytes(const struct tpt_array *a)
{
	return a->level->array_blocks(&a->geo) * a->block_size;
}

static int array_geometry(struct tpt_array *a)
{
	uint64_t min_blocks = UINT64_MAX;
	unsigned int i;

	a->block_size = a->member[0].block_size;
	for (i = 0; i < a->nr_members; i++) {
		if (a->member[i].block_size != a->block_size) {
			eprintf("tptraid: member %u has %u-byte blocks, member "
				"0 %u: members must agree\n", i,
				a->member[i].block_size, a->block_size);
			return -EINVAL;
		}
		if (a->member[i].nr_blocks < min_blocks)
			min_blocks = a->member[i].nr_blocks;
	}
	if (a->spec.unit_bytes % a->block_size) {
		eprintf("tptraid: stripe unit %u is not a multiple of the "
			"members' %u-byte blocks\n", a->spec.unit_bytes,
			a->block_size);
		return -EINVAL;
	}
	a->geo.members = a->nr_members;
	a->geo.unit_blocks = a->spec.unit_bytes / a->block_size;
	a->geo.member_blocks = min_blocks - min_blocks % a->geo.unit_blocks;
	if (!a->geo.member_blocks || raid_geometry_check(a->level, &a->geo)) {
		eprintf("tptraid: members are smaller than one stripe unit\n");
		return -EINVAL;
	}
	return 0;
}

static void array_free(struct tpt_array *a, bool set_up)
{
	unsigned int i;

	if (set_up)
		a->mode->teardown(a);
	for (i = 0; i < a->nr_members; i++)
		member_close(&a->member[i]);
	if (a->efd >= 0) {
		tgt_event_del(a->efd);
		close(a->efd);
	}
	pthread_mutex_destroy(&a->submit_lock);
	pthread_mutex_destroy(&a->counters_lock);
	free(a);
}

int tpt_array_create(struct scsi_lu *lu, const struct tpt_array_spec *spec,
		     struct tpt_array **out)
{
	struct tpt_array *a;
	unsigned int i;
	int ret;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->lu = lu;
	a->spec = *spec;
	a->efd = -1;
	a->nr_members = spec->nr_members;
	pthread_mutex_init(&a->submit_lock, NULL);
	pthread_mutex_init(&a->counters_lock, NULL);
	INIT_LIST_HEAD(&a->submitted);
	INIT_LIST_HEAD(&a->running);
	INIT_LIST_HEAD(&a->waiting);
	for (i = 0; i < a->nr_members; i++) {
		a->member[i].array = a;
		a->member[i].index = i;
		a->member[i].fd = -1;
		strcpy(a->member[i].url, spec->member[i]);
	}
	a->level = raid_level_find(spec->raid_level);
	a->mode = spec->mode == TPT_MODE_BASELINE ? &tpt_mode_baseline :
						    &tpt_mode_tpt;
	if (!a->level) {
		eprintf("tptraid: RAID level %u is not implemented\n",
			spec->raid_level);
		ret = -EINVAL;
		goto fail;
	}
	if (getrandom(&a->array_id, sizeof(a->array_id), 0) !=
	    sizeof(a->array_id)) {
		ret = -EIO;
		goto fail;
	}
	a->array_id |= 1;	/* non-zero */
	for (i = 0; i < a->nr_members; i++) {
		ret = member_open(a, &a->member[i]);
		if (ret)
			goto fail;
	}
	ret = array_geometry(a);
	if (ret)
		goto fail;
	ret = a->mode->setup(a);
	if (ret) {
		array_free(a, true);
		return ret;
	}

	a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (a->efd < 0 || tgt_event_add(a->efd, EPOLLIN, array_submitted, a)) {
		ret = -EIO;
		array_free(a, true);
		return ret;
	}
	for (i = 0; i < a->nr_members; i++)
		member_watch(&a->member[i]);
	eprintf("tptraid: %s %s of %u members, %u KiB unit, %" PRIu64 " MiB\n",
		a->mode->name, a->level->name, a->nr_members,
		spec->unit_bytes >> 10, tpt_array_bytes(a) >> 20);
	*out = a;
	return 0;
fail:
	array_free(a, false);
	return ret;
}

void tpt_array_destroy(struct tpt_array *a)
{
	array_free(a, true);
}
