/*
 * Disk I/O for TPT commands, off tgtd's event loop.
 *
 * TPT commands read and write the LU's backing file in pieces whose
 * completions drive datamover transfers (a chunk read from disk is sent
 * while the next one is being read), so they need completions on the event
 * loop rather than tgt's bs_thread model of one worker per command.  A few
 * worker threads run pread/pwrite; finished requests come back through an
 * eventfd that the event loop watches.  A short read that cannot wait
 * for a disk (tpt_inline_read.h) is done at submission instead, and
 * completes from a scheduled event of the same loop: no thread hop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "disk_io.h"

#define TPT_IO_THREADS 4

static struct {
	bool started;
	int efd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct list_head todo;
	struct list_head done;
	/* Read at submission: event loop only, no lock. */
	struct list_head done_inline;
	struct event_data inline_event;
} io = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.efd = -1,
};

static ssize_t tpt_io_run(struct tpt_io *req)
{
	size_t done = 0;

	while (done < req->len) {
		ssize_t n;

		if (req->write)
			n = pwrite(req->fd, (char *)req->buf + done,
				   req->len - done, req->offset + done);
		else
			n = pread(req->fd, (char *)req->buf + done,
				  req->len - done, req->offset + done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) {
			if (req->write)
				return -EIO;
			/* A sparse backing file ends early: zeroes. */
			memset((char *)req->buf + done, 0, req->len - done);
			break;
		}
		done += n;
	}
	if (req->write && req->sync && fdatasync(req->fd) < 0)
		return -errno;
	return req->len;
}

static void *tpt_io_worker(void *arg)
{
	uint64_t one = 1;
	bool wake;

	(void)arg;
	pthread_mutex_lock(&io.lock);
	for (;;) {
		struct tpt_io *req;

		while (list_empty(&io.todo))
			pthread_cond_wait(&io.cond, &io.lock);
		req = list_first_entry(&io.todo, struct tpt_io, link);
		list_del(&req->link);
		pthread_mutex_unlock(&io.lock);

		req->result = tpt_io_run(req);

		/* One wake-up per batch: the loop reads the eventfd before
		 * it takes the list, so a request added to a list that is
		 * not empty is taken by the round already asked for. */
		pthread_mutex_lock(&io.lock);
		wake = list_empty(&io.done);
		list_add_tail(&req->link, &io.done);
		if (wake && write(io.efd, &one, sizeof(one)) < 0)
			eprintf("tpt io: eventfd write failed: %m\n");
	}
	return NULL;
}

/* Runs done() of each request on @done, which it empties. */
static void tpt_io_complete(struct list_head *done)
{
	struct tpt_io *req, *tmp;

	list_for_each_entry_safe(req, tmp, done, link) {
		list_del(&req->link);
		req->done(req);
	}
}

static void tpt_io_reap(int fd, int events, void *data)
{
	LIST_HEAD(done);
	uint64_t count;

	(void)events;
	(void)data;
	if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		eprintf("tpt io: eventfd read failed: %m\n");

	pthread_mutex_lock(&io.lock);
	list_splice_init(&io.done, &done);
	pthread_mutex_unlock(&io.lock);
	tpt_io_complete(&done);
}

static void tpt_io_reap_inline(struct event_data *ev)
{
	LIST_HEAD(done);

	(void)ev;
	list_splice_init(&io.done_inline, &done);
	tpt_io_complete(&done);
}

int tpt_io_start(void)
{
	pthread_t thread;
	int i, err;

	if (io.started)
		return 0;
	INIT_LIST_HEAD(&io.todo);
	INIT_LIST_HEAD(&io.done);
	INIT_LIST_HEAD(&io.done_inline);
	tgt_init_sched_event(&io.inline_event, tpt_io_reap_inline, NULL);
	io.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (io.efd < 0)
		return -errno;
	err = tgt_event_add(io.efd, EPOLLIN, tpt_io_reap, NULL);
	if (err) {
		close(io.efd);
		io.efd = -1;
		return err;
	}
	for (i = 0; i < TPT_IO_THREADS; i++) {
		err = pthread_create(&thread, NULL, tpt_io_worker, NULL);
		if (!err) {
			pthread_detach(thread);
		} else {
			eprintf("tpt io: cannot start worker: %s\n", strerror(err));
			/* The threads already running serve everything. */
			if (i == 0) {
				tgt_event_del(io.efd);
				close(io.efd);
				io.efd = -1;
				return -err;
			}
			break;
		}
	}
	io.started = true;
	return 0;
}

void tpt_io_submit(struct tpt_io *req)
{
	if (!req->write && req->len <= TPT_INLINE_READ_COPY_MAX &&
	    tpt_inline_pread(req->read_inline, req->fd, req->offset, req->len,
			     req->buf)) {
		req->result = req->len;
		list_add_tail(&req->link, &io.done_inline);
		tgt_add_sched_event(&io.inline_event);
		return;
	}
	pthread_mutex_lock(&io.lock);
	list_add_tail(&req->link, &io.todo);
	pthread_cond_signal(&io.cond);
	pthread_mutex_unlock(&io.lock);
}
