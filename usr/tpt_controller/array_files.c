/*
 * The array's files on the controller's own disk (docs/controller.md,
 * "What the controller keeps"):
 *
 *   PATH          the state file (controller/state_file.h), rewritten
 *                 whole, synced and renamed into place;
 *   PATH.regions  the region record (controller/intent_file.h): the
 *                 write-intent bits and the missed-write maps, two copies
 *                 written alternately and synced.
 *
 * A thread of their own writes them, so the event loop never waits for
 * a disk.  Writes that must not reach a member before their region is
 * marked durably wait, parked, for the flush that covers them
 * (array_intent_hold()); everything else only asks for a flush.
 *
 * The write-intent protocol, md's write-intent bitmap: a region's bit is
 * durable before any write of the region goes out, counts the writes in
 * flight there, and is cleared once the region has been idle for
 * TPT_INTENT_IDLE_SECONDS; the clearing need not be durable soon, since a
 * bit left set costs only a resync of its region after a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "controller/intent_file.h"
#include "controller/state_file.h"
#include "tpt_controller.h"

#define TPT_INTENT_IDLE_SECONDS 2

struct array_files {
	struct tpt_array *a;
	char path[PATH_MAX];
	char regions_path[PATH_MAX + 16];
	int regions_fd;
	size_t copy_len;
	uint64_t seq;			/* of the last copy encoded */

	pthread_t thread;
	bool thread_up;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int efd;			/* the thread's completions */
	bool stop;

	/* Jobs, one of each kind in the thread's hands at a time. */
	char *state_text;		/* to write, or NULL */
	size_t state_len;
	uint8_t *regions_buf;		/* to write, or NULL */
	uint64_t regions_gen;		/* what that copy covers */
	uint64_t done_gen;		/* the thread's last durable copy */
	int error;			/* the thread's last failure */
	bool state_failed;		/* the last state file write's */

	/* The loop's side. */
	bool state_busy, state_again;
	/* The array's lost_gen in the state file being written, and in the
	 * last one written. */
	uint64_t writing_lost_gen, saved_lost_gen;
	bool regions_busy;
	uint64_t durable_gen;
	bool error_said;
	struct tgt_work tick;
};

static struct array_files *files_of(const struct tpt_array *a)
{
	return a->files;
}

/* ---- the thread ---- */

static int write_all(int fd, const void *buf, size_t len, off_t at)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, at);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
		at += n;
	}
	return 0;
}

/* The state file, replaced atomically: a crash leaves the old one or the
 * new one, never a mix. */
static int write_state(const char *path, const char *text, size_t len,
		       const char *suffix)
{
	char tmp[PATH_MAX + 8], dir[PATH_MAX], *slash;
	int fd, err, dfd;

	snprintf(tmp, sizeof(tmp), "%s%s", path, suffix);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	err = write_all(fd, text, len, 0);
	if (!err && fsync(fd))
		err = -errno;
	close(fd);
	if (!err && rename(tmp, path))
		err = -errno;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return err;
}

static void *files_thread(void *arg)
{
	struct array_files *f = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		char *text;
		uint8_t *buf;
		uint64_t gen, seq;
		size_t len;
		int err = 0, werr;

		while (!f->stop && !f->state_text && !f->regions_buf)
			pthread_cond_wait(&f->cond, &f->lock);
		if (f->stop && !f->state_text && !f->regions_buf)
			break;
		text = f->state_text;
		len = f->state_len;
		buf = f->regions_buf;
		gen = f->regions_gen;
		pthread_mutex_unlock(&f->lock);
		if (text)
			err = write_state(f->path, text, len, ".new");
		if (buf) {
			seq = tpt_get_be(&buf[16], 8);
			werr = write_all(f->regions_fd, buf, f->copy_len,
					 (off_t)((seq % 2) * f->copy_len));
			if (!werr && fdatasync(f->regions_fd))
				werr = -errno;
			if (werr)
				err = werr;
		}
		pthread_mutex_lock(&f->lock);
		if (text) {
			free(f->state_text);
			f->state_text = NULL;
			f->state_failed = err != 0;
		}
		if (buf) {
			f->regions_buf = NULL;
			if (!err)
				f->done_gen = gen;
		}
		if (err)
			f->error = err;
		pthread_mutex_unlock(&f->lock);
		/* The loop reads it; a full counter cannot be, but say so. */
		if (write(f->efd, &one, sizeof(one)) < 0)
			perror("tptraid: eventfd write");
		free(buf);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* ---- the region record ---- */

static void regions_encode(struct tpt_array *a, struct tpt_intent_record *r)
{
	unsigned int p;

	memset(r, 0, sizeof(*r));
	r->array_id = a->array_id;
	r->nr_regions = a->nr_regions;
	r->region_stripes = TPT_RECOVERY_REGION_STRIPES;
	r->nr_positions = a->nr_members;
	r->intent = a->intent;
	r->unwritten = a->unwritten;
	for (p = 0; p < a->nr_members; p++) {
		r->missed[p] = a->pos[p].missed;
		r->missing_since[p] = a->pos[p].missed_valid ?
				      a->pos[p].missing_since : 0;
	}
}

/* Hand the record as it stands to the thread, if it is free. */
static void regions_flush(struct tpt_array *a)
{
	struct array_files *f = files_of(a);
	struct tpt_intent_record r;
	uint8_t *buf;

	if (!f || f->regions_busy || f->durable_gen == a->change_gen)
		return;
	buf = aligned_alloc(4096, f->copy_len);
	if (!buf)
		return;
	regions_encode(a, &r);
	r.seq = ++f->seq;
	if (tpt_intent_encode(&r, buf, f->copy_len) < 0) {
		free(buf);
		return;
	}
	f->regions_busy = true;
	pthread_mutex_lock(&f->lock);
	f->regions_buf = buf;
	f->regions_gen = a->change_gen;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void regions_done(struct tpt_array *a)
{
	struct array_files *f = files_of(a);
	struct tpt_span *s, *tmp;
	LIST_HEAD(ready);

	pthread_mutex_lock(&f->lock);
	f->durable_gen = f->done_gen;
	f->regions_busy = f->regions_buf != NULL;
	pthread_mutex_unlock(&f->lock);
	list_for_each_entry_safe(s, tmp, &a->intent_waiting, link) {
		if (s->need_gen > f->durable_gen)
			continue;
		list_del(&s->link);
		list_add_tail(&s->link, &ready);
	}
	list_for_each_entry_safe(s, tmp, &ready, link) {
		list_del(&s->link);
		array_queue_span(a, s);
	}
	regions_flush(a);
}

static void files_event(int fd, int events, void *data)
{
	struct tpt_array *a = data;
	struct array_files *f = files_of(a);
	uint64_t count;
	int err;

	(void)events;
	if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		eprintf("tptraid: eventfd read: %m\n");
	pthread_mutex_lock(&f->lock);
	err = f->error;
	f->error = 0;
	if (f->state_busy && !f->state_text) {
		f->state_busy = false;
		if (!f->state_failed)
			f->saved_lost_gen = f->writing_lost_gen;
	}
	pthread_mutex_unlock(&f->lock);
	if (err && !f->error_said) {
		eprintf("tptraid: cannot write the array's files beside %s: %s:"
			" a crash now may need a full resync\n", f->path,
			strerror(-err));
		f->error_said = true;
	}
	if (!f->state_busy && f->state_again) {
		f->state_again = false;
		array_save_state(a);
	}
	recovery_lost_saved(a);
	if (f->regions_busy)
		regions_done(a);
}

static bool bit(const uint8_t *map, uint64_t r)
{
	return map[r / 8] & (1u << (r % 8));
}

static void set_bit(uint8_t *map, uint64_t r)
{
	map[r / 8] |= 1u << (r % 8);
}

static void clear_bit(uint8_t *map, uint64_t r)
{
	map[r / 8] &= (uint8_t)~(1u << (r % 8));
}

bool array_intent_hold(struct tpt_array *a, struct tpt_span *s)
{
	struct array_files *f = files_of(a);
	uint64_t r, first = s->first_stripe / TPT_RECOVERY_REGION_STRIPES;
	uint64_t last = s->last_stripe / TPT_RECOVERY_REGION_STRIPES;
	uint32_t missing = array_span_missing(s);
	uint64_t need = 0;
	unsigned int p;

	if (s->kind != TPT_SPAN_WRITE)
		return false;
	/* Missing more than the level rebuilds, it fails unplanned: if it
	 * has written nothing before (a member failed under it), no box
	 * misses anything. */
	if (array_lacks_too_many(a, missing) && !s->wrote)
		return false;
	for (r = first; r <= last; r++) {
		uint64_t st = r * TPT_RECOVERY_REGION_STRIPES;
		uint64_t end = st + TPT_RECOVERY_REGION_STRIPES - 1;
		bool changed = !bit(a->intent, r);

		set_bit(a->intent, r);
		/* Host data is about to be there, ahead of the resync: on
		 * disk first, so that a restart counts the region's parity
		 * as possibly off from it (array.c, span_mark_stale()). */
		if (!missing && bit(a->unwritten, r)) {
			clear_bit(a->unwritten, r);
			changed = true;
		}
		if (st < s->first_stripe)
			st = s->first_stripe;
		if (end > s->last_stripe)
			end = s->last_stripe;
		for (p = 0; p < a->nr_members; p++)
			if ((missing & (1u << p)) && a->pos[p].missed_valid &&
			    array_mark_missed(a, p, st, end))
				changed = true;
		if (changed)
			a->region_gen[r] = ++a->change_gen;
		if (a->region_gen[r] > need)
			need = a->region_gen[r];
	}
	if (!f || need <= f->durable_gen) {
		for (r = first; r <= last; r++)
			a->region_inflight[r]++;
		s->intent_counted = true;
		return false;
	}
	s->need_gen = need;
	list_add_tail(&s->link, &a->intent_waiting);
	regions_flush(a);
	return true;
}

void array_intent_release(struct tpt_array *a, struct tpt_span *s)
{
	uint64_t r, first = s->first_stripe / TPT_RECOVERY_REGION_STRIPES;
	uint64_t last = s->last_stripe / TPT_RECOVERY_REGION_STRIPES;
	time_t now = time(NULL);

	if (!s->intent_counted)
		return;
	s->intent_counted = false;
	for (r = first; r <= last; r++) {
		a->region_inflight[r]--;
		a->region_idle_since[r] = now;
	}
}

/* Lazily, the intent bits of regions idle for a while; a parity resync
 * keeps those it has not reached. */
static void files_tick(void *data)
{
	struct tpt_array *a = data;
	struct array_files *f = files_of(a);
	time_t now = time(NULL);
	bool cleared = false;
	uint64_t r;

	for (r = 0; r < a->nr_regions && a->spec.write_intent; r++) {
		if (!bit(a->intent, r) || a->region_inflight[r] ||
		    now - a->region_idle_since[r] < TPT_INTENT_IDLE_SECONDS ||
		    recovery_keeps_region(a, r))
			continue;
		clear_bit(a->intent, r);
		clear_bit(a->unwritten, r);
		cleared = true;
	}
	if (cleared) {
		a->change_gen++;
		regions_flush(a);
	}
	add_work(&f->tick, 1);
}

void array_regions_changed(struct tpt_array *a)
{
	a->change_gen++;
	regions_flush(a);
}

/* ---- the state file ---- */

/* The state file's text as the array now stands (malloc'ed, its length
 * in *@len), or NULL, said in the log (of the file at @path); with
 * @creating, of an array whose creation has not finished. */
static char *state_text(struct tpt_array *a, const char *path,
			bool creating, size_t *len)
{
	struct tpt_state *st;
	unsigned int i;
	char *text;
	int n;

	st = calloc(1, sizeof(*st));
	text = malloc(1 << 16);
	if (!st || !text) {
		free(st);
		free(text);
		eprintf("tptraid: cannot write %s: out of memory\n", path);
		return NULL;
	}
	st->array_id = a->array_id;
	st->creating = creating;
	memcpy(st->key, a->array_key, sizeof(st->key));
	snprintf(st->spec, sizeof(st->spec), "%s", a->spec_text);
	st->nr_boxes = a->nr_boxes;
	for (i = 0; i < a->nr_boxes; i++) {
		/* An empty URL: an id the operator removed. */
		snprintf(st->box[i], sizeof(st->box[i]), "%s",
			 a->member[i].removed ? "" : a->member[i].login_url);
		st->held[i] = a->member[i].held && !a->member[i].removed;
	}
	st->nr_positions = a->nr_members;
	for (i = 0; i < a->nr_members; i++)
		st->position[i] = a->pos[i].member;
	st->has_replace = a->replace.active || a->replace.pending;
	st->replace_position = a->replace.position;
	st->replace_box = a->replace.spare;
	st->has_rebuild_rate = a->rebuild_rate_tuned;
	st->rebuild_rate = a->rebuild_rate;
	st->has_fail_timeout = a->fail_timeout_tuned;
	st->fail_timeout = a->fail_timeout;
	st->has_check = a->recovery.check_kept;
	st->check_from = a->recovery.kept_from;
	st->check_mismatches = a->recovery.kept.mismatches;
	st->check_unreadable = a->recovery.kept.unreadable;
	/* What it located, if anything: a count per position. */
	for (i = 0; i < a->nr_members && st->has_check; i++)
		if (a->recovery.kept.located[i])
			st->nr_check_located = a->nr_members;
	memcpy(st->check_located, a->recovery.kept.located,
	       sizeof(st->check_located));
	array_lost_save(a, st);
	st->check_located_kept = st->nr_check_located ?
				 a->recovery.kept.located_kept : 0;
	n = tpt_state_format(st, text, 1 << 16);
	free(st);
	if (n < 0) {
		/* Said every time: without the file, a crash loses the key
		 * the members are bound with. */
		eprintf("tptraid: cannot write %s: the array's state does not "
			"fit its format (%s)\n", path, strerror(-n));
		free(text);
		return NULL;
	}
	*len = (size_t)n;
	return text;
}

bool array_lost_durable(const struct tpt_array *a)
{
	const struct array_files *f = files_of(a);

	return !f || f->saved_lost_gen == a->lost_gen;
}

void array_save_state(struct tpt_array *a)
{
	struct array_files *f = files_of(a);
	size_t len;
	char *text;

	if (!f)
		return;
	if (f->state_busy) {
		f->state_again = true;
		return;
	}
	text = state_text(a, f->path, false, &len);
	if (!text)
		return;
	f->writing_lost_gen = a->lost_gen;
	f->state_busy = true;
	pthread_mutex_lock(&f->lock);
	f->state_text = text;
	f->state_len = len;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* The state file at @path written and synced now, from this thread: 0
 * or -errno, logged.  Beside a write of the files thread's, if one runs:
 * its own temporary file (PATH.now). */
static int save_state_sync(struct tpt_array *a, const char *path,
			   bool creating)
{
	size_t len;
	char *text = state_text(a, path, creating, &len);
	int ret;

	if (!text)
		return -EINVAL;
	ret = write_state(path, text, len, ".now");
	free(text);
	if (ret)
		eprintf("tptraid: cannot write %s: %s\n", path,
			strerror(-ret));
	return ret;
}

int array_save_state_now(struct tpt_array *a)
{
	struct array_files *f = files_of(a);
	int ret = save_state_sync(a, f->path, false);

	/* The thread writes again after it, as things are then. */
	if (f->state_busy)
		f->state_again = true;
	return ret;
}

int array_save_state_creating(struct tpt_array *a, const char *path)
{
	return save_state_sync(a, path, true);
}

/* ---- open, load, close ---- */

/*
 * The region record's copies as @version lays them out (each version has
 * its length, and so its second copy's offset), into the array's maps:
 * 0 with the record's intent bits (the regions to resync) in @dirty,
 * -ENOENT when there is none, or -EINVAL for one of another array or
 * geometry.
 */
static int regions_load_version(struct tpt_array *a, struct array_files *f,
				uint8_t *dirty, uint32_t version)
{
	struct tpt_intent_record r[2];
	size_t len = tpt_intent_copy_len(a->nr_regions, a->nr_members, version);
	uint8_t *buf = aligned_alloc(4096, len);
	int got[2], best = -1, i, ret = -ENOMEM;
	unsigned int p;
	size_t mb = (a->nr_regions + 7) / 8;

	if (!buf)
		return -ENOMEM;
	memset(r, 0, sizeof(r));
	for (i = 0; i < 2; i++) {
		r[i].nr_regions = a->nr_regions;
		r[i].region_stripes = TPT_RECOVERY_REGION_STRIPES;
		r[i].nr_positions = a->nr_members;
		r[i].intent = calloc(1, mb);
		r[i].unwritten = calloc(1, mb);
		if (!r[i].intent || !r[i].unwritten)
			goto out;
		for (p = 0; p < a->nr_members; p++)
			if (!(r[i].missed[p] = calloc(1, mb)))
				goto out;
	}
	for (i = 0; i < 2; i++) {
		got[i] = pread(f->regions_fd, buf, len, (off_t)(i * len)) ==
			 (ssize_t)len ? tpt_intent_decode(buf, len, &r[i]) :
			 -ENOENT;
		if (!got[i] && r[i].array_id == a->array_id &&
		    (best < 0 || r[i].seq > r[best].seq))
			best = i;
	}
	if (best >= 0) {
		memcpy(dirty, r[best].intent, mb);
		memcpy(a->intent, r[best].intent, mb);
		memcpy(a->unwritten, r[best].unwritten, mb);
		for (p = 0; p < a->nr_members; p++) {
			memcpy(a->pos[p].missed, r[best].missed[p], mb);
			array_missed_from_regions(a, p);
			a->pos[p].missing_since = r[best].missing_since[p];
			a->pos[p].missed_valid = r[best].missing_since[p] != 0;
		}
		f->seq = r[best].seq;
		ret = 0;
	} else {
		ret = got[0] == -ENOENT && got[1] == -ENOENT ? -ENOENT :
		      -EINVAL;
	}
out:
	free(buf);
	for (i = 0; i < 2; i++) {
		free(r[i].intent);
		free(r[i].unwritten);
		for (p = 0; p < a->nr_members; p++)
			free(r[i].missed[p]);
	}
	return ret;
}

/* The record, as this version writes it or as version 1 did where that
 * laid its copies out elsewhere (a controller upgraded in place). */
static int regions_load(struct tpt_array *a, struct array_files *f,
			uint8_t *dirty)
{
	int ret = regions_load_version(a, f, dirty, TPT_INTENT_VERSION);

	if ((ret == -ENOENT || ret == -EINVAL) &&
	    tpt_intent_copy_len(a->nr_regions, a->nr_members, 1) !=
	    f->copy_len && !regions_load_version(a, f, dirty, 1))
		return 0;
	return ret;
}

/*
 * The record as it stands, written and synced before returning.  For the
 * moments a write in the thread's turn would leave a window: a new array's
 * first record goes down before its members' superblocks say it exists,
 * and the last one at a stop.  The thread has nothing queued then.
 */
static int regions_write_now(struct tpt_array *a)
{
	struct array_files *f = files_of(a);
	struct tpt_intent_record r;
	uint8_t *buf = aligned_alloc(4096, f->copy_len);
	int ret;

	if (!buf)
		return -ENOMEM;
	regions_encode(a, &r);
	r.seq = ++f->seq;
	ret = tpt_intent_encode(&r, buf, f->copy_len);
	if (ret >= 0)
		ret = write_all(f->regions_fd, buf, f->copy_len,
				(off_t)((r.seq % 2) * f->copy_len));
	if (!ret && fdatasync(f->regions_fd))
		ret = -errno;
	free(buf);
	if (!ret)
		f->durable_gen = a->change_gen;
	return ret;
}

/* Every region counts as in flight, each write waiting for the record to
 * be durable: with write_intent=no (md with no bitmap: a crash resyncs it
 * all), for a new array's first resync and for a record lost.  The
 * regions a resync has yet to do stay marked (recovery_keeps_region()),
 * so a stop before it ends leaves the rest to the next start. */
void array_intent_mark_all(struct tpt_array *a)
{
	uint64_t r;

	a->change_gen++;
	for (r = 0; r < a->nr_regions; r++) {
		set_bit(a->intent, r);
		a->region_gen[r] = a->change_gen;
	}
}

int array_files_open(struct tpt_array *a, const char *path, uint8_t *dirty)
{
	struct array_files *f = calloc(1, sizeof(*f));
	bool lost;
	int ret;

	if (!f)
		return -ENOMEM;
	f->a = a;
	f->regions_fd = -1;
	f->efd = -1;
	snprintf(f->path, sizeof(f->path), "%s", path);
	snprintf(f->regions_path, sizeof(f->regions_path), "%s.regions", path);
	f->copy_len = tpt_intent_copy_len(a->nr_regions, a->nr_members,
					  TPT_INTENT_VERSION);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	a->files = f;
	f->regions_fd = open(f->regions_path, O_RDWR | O_CREAT | O_CLOEXEC,
			     0600);
	if (f->regions_fd < 0) {
		eprintf("tptraid: cannot open %s: %m\n", f->regions_path);
		return -errno;
	}
	ret = regions_load(a, f, dirty);
	if (ret && ret != -ENOENT && ret != -EINVAL)
		return ret;
	lost = ret && !a->fresh;
	if (lost) {
		/* Which regions had writes in flight is not known: every
		 * one may have, as md without a bitmap.  Marked in the new
		 * record until the resync has done them. */
		eprintf("tptraid: %s holds no record of this array (%s): "
			"resyncing every region's parity\n", f->regions_path,
			ret == -ENOENT ? "none written" :
			"damaged, or another array's or geometry's");
		memset(dirty, 0xff, (a->nr_regions + 7) / 8);
		if (a->nr_regions % 8)
			dirty[a->nr_regions / 8] &= (1u << (a->nr_regions % 8)) - 1;
	}
	f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->efd < 0 || tgt_event_add(f->efd, EPOLLIN, files_event, a))
		return -EIO;
	if (pthread_create(&f->thread, NULL, files_thread, f))
		return -EIO;
	f->thread_up = true;
	f->tick.func = files_tick;
	f->tick.data = a;
	add_work(&f->tick, 1);
	/* The record as it stands is durable: nothing waits for it. */
	f->durable_gen = a->change_gen;
	if (!a->spec.write_intent || lost ||
	    (a->fresh && !a->spec.assume_clean))
		array_intent_mark_all(a);
	else if (!a->fresh)
		return 0;
	/* Nobody wrote a new array's members: until a write says otherwise
	 * their parity may be off only from contents no host wrote.  Not
	 * with write_intent=no, where a region's writes never wait. */
	if (a->fresh && !a->spec.assume_clean && a->spec.write_intent)
		memcpy(a->unwritten, a->intent, (a->nr_regions + 7) / 8);
	/* Written now: a new array has a record before its members say it
	 * exists, so that one without it later is one whose record was lost. */
	ret = regions_write_now(a);
	if (ret)
		eprintf("tptraid: cannot write %s: %s\n", f->regions_path,
			strerror(-ret));
	return ret;
}

/* At teardown: every write has ended, so the record is written one last
 * time without intent (a clean stop resyncs nothing), synchronously; not
 * after a refused start, whose regions the next start must still resync
 * (it wrote nothing), nor its state file. */
void array_files_close(struct tpt_array *a)
{
	struct array_files *f = files_of(a);

	if (!f)
		return;
	if (f->thread_up) {
		del_work(&f->tick);
		pthread_mutex_lock(&f->lock);
		f->stop = true;
		pthread_cond_signal(&f->cond);
		pthread_mutex_unlock(&f->lock);
		pthread_join(f->thread, NULL);
	}
	/* Where a check the stop ended got to, for the next start; and a
	 * change the thread had yet to write again. */
	if (a->started && (a->recovery.check_kept || f->state_again))
		array_save_state_now(a);
	if (f->regions_fd >= 0 && a->intent && a->started) {
		uint64_t reg;

		for (reg = 0; reg < a->nr_regions; reg++)
			if (!recovery_keeps_region(a, reg)) {
				clear_bit(a->intent, reg);
				clear_bit(a->unwritten, reg);
			}
		regions_write_now(a);
	}
	if (f->regions_fd >= 0)
		close(f->regions_fd);
	if (f->efd >= 0) {
		tgt_event_del(f->efd);
		close(f->efd);
	}
	free(f->state_text);
	free(f->regions_buf);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
	a->files = NULL;
}
