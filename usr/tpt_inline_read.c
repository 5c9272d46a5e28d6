/*
 * READs of a file LUN that complete in tgtd's event loop: see
 * tpt_inline_read.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <sys/statfs.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "tpt_data_pipe.h"
#include "tpt_inline_read.h"

static struct tpt_inline_read_stats read_stats;

enum tpt_inline_read_how tpt_inline_read_how(int fd, int oflags)
{
	struct statfs fs;
	struct iovec iov;
	char byte;

	if (oflags & O_DIRECT)
		return TPT_INLINE_READ_NEVER;
	iov.iov_base = &byte;
	iov.iov_len = 1;
	if (preadv2(fd, &iov, 1, 0, RWF_NOWAIT) >= 0 || errno == EAGAIN)
		return TPT_INLINE_READ_NOWAIT;
	if (!fstatfs(fd, &fs) &&
	    (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC))
		return TPT_INLINE_READ_MEMORY;
	return TPT_INLINE_READ_NEVER;
}

/* Whether no swap is configured: a tmpfs page then stays in memory.
 * swapon(8) may run any time, hence the check once a second. */
static int swap_is_off(void)
{
	static time_t checked = -1;
	static int off;
	struct timespec now;
	struct sysinfo si;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
	if (now.tv_sec != checked) {
		checked = now.tv_sec;
		off = !sysinfo(&si) && !si.totalswap;
	}
	return off;
}

/* Whether a read of a file @how says may run inline now. */
static int may_read_now(enum tpt_inline_read_how how)
{
	return how == TPT_INLINE_READ_NOWAIT ||
	       (how == TPT_INLINE_READ_MEMORY && swap_is_off());
}

/* tpt_inline_pread() once may_read_now() said yes. */
static int copy_now(enum tpt_inline_read_how how, int fd, off_t offset,
		    size_t len, void *buf)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	ssize_t ret;

	ret = preadv2(fd, &iov, 1, offset,
		      how == TPT_INLINE_READ_NOWAIT ? RWF_NOWAIT : 0);
	if (ret != (ssize_t)len) {
		/* Not in memory, or an error the worker will report. */
		read_stats.would_wait++;
		return 0;
	}
	read_stats.copied++;
	return 1;
}

int tpt_inline_pread(enum tpt_inline_read_how how, int fd, off_t offset,
		     size_t len, void *buf)
{
	return may_read_now(how) && copy_now(how, fd, offset, len, buf);
}

enum tpt_inline_read_result tpt_inline_read(enum tpt_inline_read_how how,
					    int fd, off_t offset, size_t len,
					    void *buf,
					    struct tpt_data_pipe **pipe)
{
	bool pipe_tried = false;

	if (!may_read_now(how))
		return TPT_INLINE_READ_LATER;
	if (how == TPT_INLINE_READ_MEMORY && pipe && tpt_data_pipe_fits(len)) {
		*pipe = tpt_data_pipe_fill(fd, offset, len);
		if (*pipe) {
			read_stats.spliced++;
			return TPT_INLINE_READ_DONE;
		}
		pipe_tried = true;
	}
	if (len <= TPT_INLINE_READ_COPY_MAX && copy_now(how, fd, offset, len, buf))
		return TPT_INLINE_READ_DONE;
	return pipe_tried ? TPT_INLINE_READ_LATER_NO_PIPE : TPT_INLINE_READ_LATER;
}

void tpt_inline_read_stats(struct tpt_inline_read_stats *stats)
{
	*stats = read_stats;
}
