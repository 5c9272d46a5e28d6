/*
 * Zero-copy READ data for iSCSI/TCP: see tpt_data_pipe.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "tpt_data_pipe.h"

struct tpt_data_pipe {
	int rfd, wfd;
	size_t capacity;
	size_t left;			/* filled and not yet sent */
	struct tpt_data_pipe *next;	/* on the free list */
};

static pthread_mutex_t pipe_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tpt_data_pipe *free_pipes;
static struct tpt_data_pipe_stats pipe_stats;

int tpt_data_pipe_fits(size_t len)
{
	return len >= TPT_DATA_PIPE_MIN && len <= TPT_DATA_PIPE_MAX;
}

/* Called with pipe_lock held. */
static struct tpt_data_pipe *open_pipe(void)
{
	struct tpt_data_pipe *p;
	int fds[2], size;

	if (pipe_stats.open >= TPT_DATA_PIPE_OPEN) {
		errno = EBUSY;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	if (pipe2(fds, O_CLOEXEC)) {
		free(p);
		return NULL;
	}
	p->rfd = fds[0];
	p->wfd = fds[1];
	/* Failing to grow (pipe-max-size, or an unprivileged user past
	 * pipe-user-pages-soft) leaves a smaller pipe for smaller READs. */
	fcntl(p->wfd, F_SETPIPE_SZ, TPT_DATA_PIPE_MAX);
	size = fcntl(p->wfd, F_GETPIPE_SZ);
	p->capacity = size > 0 ? (size_t)size : 0;
	pipe_stats.open++;
	return p;
}

/* Called with pipe_lock held. */
static void close_pipe(struct tpt_data_pipe *p)
{
	close(p->rfd);
	close(p->wfd);
	free(p);
	pipe_stats.open--;
}

/* Called with pipe_lock held: @p, taken by take_pipe(), is free again. */
static void give_back(struct tpt_data_pipe *p)
{
	pipe_stats.busy--;
	if (p->left) {
		/* Its data was never sent: a fresh pipe is cheaper than
		 * draining this one. */
		close_pipe(p);
	} else {
		p->next = free_pipes;
		free_pipes = p;
	}
}

static struct tpt_data_pipe *take_pipe(size_t len)
{
	struct tpt_data_pipe *p, **prev;

	pthread_mutex_lock(&pipe_lock);
	for (prev = &free_pipes; (p = *prev); prev = &p->next)
		if (p->capacity >= len)
			break;
	if (p)
		*prev = p->next;
	else
		p = open_pipe();
	if (p && p->capacity < len) {
		/* A new pipe that could not grow: kept for shorter READs. */
		p->next = free_pipes;
		free_pipes = p;
		p = NULL;
		errno = ENOSPC;
	}
	if (p)
		pipe_stats.busy++;
	else
		pipe_stats.fallbacks++;
	pthread_mutex_unlock(&pipe_lock);
	return p;
}

struct tpt_data_pipe *tpt_data_pipe_fill(int fd, off_t offset, size_t len)
{
	struct tpt_data_pipe *p = take_pipe(len);
	ssize_t ret;

	if (!p)
		return NULL;
	while (p->left < len) {
		ret = splice(fd, &offset, p->wfd, NULL, len - p->left, 0);
		if (ret <= 0) {
			int err = ret ? errno : ENODATA;

			pthread_mutex_lock(&pipe_lock);
			give_back(p);
			pipe_stats.fallbacks++;
			pthread_mutex_unlock(&pipe_lock);
			errno = err;
			return NULL;
		}
		p->left += ret;
	}
	pthread_mutex_lock(&pipe_lock);
	pipe_stats.reads++;
	pipe_stats.bytes += len;
	pthread_mutex_unlock(&pipe_lock);
	return p;
}

ssize_t tpt_data_pipe_send(struct tpt_data_pipe *p, int sock, size_t len,
			   int more)
{
	ssize_t ret;

	if (len > p->left)
		len = p->left;
	ret = splice(p->rfd, NULL, sock, NULL, len,
		     SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0));
	if (ret > 0)
		p->left -= ret;
	return ret;
}

size_t tpt_data_pipe_left(const struct tpt_data_pipe *p)
{
	return p->left;
}

void tpt_data_pipe_release(struct tpt_data_pipe *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&pipe_lock);
	give_back(p);
	pthread_mutex_unlock(&pipe_lock);
}

void tpt_data_pipe_stats(struct tpt_data_pipe_stats *stats)
{
	pthread_mutex_lock(&pipe_lock);
	*stats = pipe_stats;
	pthread_mutex_unlock(&pipe_lock);
}
