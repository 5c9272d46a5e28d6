/*
 * Unreadable sectors for the tests: an LD_PRELOAD library that makes a
 * disk's latent read errors happen to a file.
 *
 * A target started with LD_PRELOAD=.../libtpt-bad-sectors.so and
 * TPT_BAD_SECTORS=FILE fails every read of a byte range FILE lists with
 * EIO, as a disk fails a READ of a sector it cannot read (UNRECOVERED
 * READ ERROR); a write over a listed range makes it readable again, as a
 * disk remaps a sector that is written.  So a test can see both what a
 * host gets when a member cannot read a block and whether the array
 * rewrites it.  Nothing else in the process changes.
 *
 * FILE has lines "PATH OFFSET LENGTH" (bytes of the file at PATH).  Tests
 * only append to it; each read or write of a listed file takes the lines
 * added since the last look.  Reads go through pread, preadv (with
 * preadv2's RWF_NOWAIT) and splice, the three ways tgtd reads a LU; writes
 * through pwrite and pwritev.
 *
 * Why a library and not device-mapper's dm-error or scsi_debug: the test
 * machines' kernels have neither.  Why not libfiu: it fails calls by
 * name, not by where they read.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define BAD_RANGES_MAX 256

struct bad_range {
	dev_t dev;
	ino_t ino;
	uint64_t start, end;		/* [start, end) bytes */
};

static struct {
	pthread_mutex_t lock;
	struct bad_range range[BAD_RANGES_MAX];
	unsigned int nr;
	long taken;			/* bytes of the list read so far */
} bad = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void add_range(dev_t dev, ino_t ino, uint64_t start, uint64_t end)
{
	if (bad.nr == BAD_RANGES_MAX) {
		fprintf(stderr, "bad_sectors: more than %d ranges\n",
			BAD_RANGES_MAX);
		return;
	}
	bad.range[bad.nr++] = (struct bad_range){ dev, ino, start, end };
}

/* The lines appended to the list since the last call. */
static void take_new_lines(void)
{
	const char *list = getenv("TPT_BAD_SECTORS");
	char path[4096];
	unsigned long long off, len;
	struct stat st;
	FILE *f;

	if (!list || stat(list, &st) || st.st_size <= bad.taken)
		return;
	f = fopen(list, "r");
	if (!f)
		return;
	if (fseek(f, bad.taken, SEEK_SET) == 0)
		while (fscanf(f, "%4095s %llu %llu", path, &off, &len) == 3) {
			struct stat file;

			if (stat(path, &file) == 0 && len)
				add_range(file.st_dev, file.st_ino, off,
					  off + len);
		}
	bad.taken = st.st_size;
	fclose(f);
}

/* Whether [@off, @off + @len) of @fd has a bad byte; a write (@clear)
 * makes what it covers good. */
static bool touches_bad(int fd, uint64_t off, uint64_t len, bool clear)
{
	uint64_t end = off + len;
	bool hit = false;
	struct stat st;
	unsigned int i;

	pthread_mutex_lock(&bad.lock);
	take_new_lines();
	if (!bad.nr || fstat(fd, &st) || !S_ISREG(st.st_mode))
		goto out;
	for (i = 0; i < bad.nr; i++) {
		struct bad_range *r = &bad.range[i];

		if (r->dev != st.st_dev || r->ino != st.st_ino ||
		    r->end <= off || end <= r->start)
			continue;
		hit = true;
		if (!clear)
			break;
		/* What is left before and after the write. */
		if (r->start < off && end < r->end)
			add_range(r->dev, r->ino, end, r->end);
		if (r->start < off) {
			r->end = off;
		} else if (end < r->end) {
			r->start = end;
		} else {
			bad.range[i--] = bad.range[--bad.nr];
		}
	}
out:
	pthread_mutex_unlock(&bad.lock);
	return hit;
}

static size_t iov_bytes(const struct iovec *iov, int cnt)
{
	size_t n = 0;
	int i;

	for (i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

#define REAL(name) \
	static __typeof__(name) *real; \
	if (!real) \
		real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static ssize_t eio(void)
{
	errno = EIO;
	return -1;
}

ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
	REAL(pread);
	if (touches_bad(fd, offset, count, false))
		return eio();
	return real(fd, buf, count, offset);
}

ssize_t pread64(int fd, void *buf, size_t count, off_t offset)
{
	REAL(pread64);
	if (touches_bad(fd, offset, count, false))
		return eio();
	return real(fd, buf, count, offset);
}

ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t offset)
{
	REAL(preadv);
	if (touches_bad(fd, offset, iov_bytes(iov, cnt), false))
		return eio();
	return real(fd, iov, cnt, offset);
}

ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t offset,
		int flags)
{
	REAL(preadv2);
	if (offset >= 0 && touches_bad(fd, offset, iov_bytes(iov, cnt), false))
		return eio();
	return real(fd, iov, cnt, offset, flags);
}

/* A write of @n bytes at @offset went through: what it covered is good. */
static ssize_t written(int fd, ssize_t n, off_t offset)
{
	int saved = errno;

	if (n > 0)
		touches_bad(fd, offset, n, true);
	errno = saved;
	return n;
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
	REAL(pwrite);
	return written(fd, real(fd, buf, count, offset), offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
	REAL(pwrite64);
	return written(fd, real(fd, buf, count, offset), offset);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t offset)
{
	REAL(pwritev);
	return written(fd, real(fd, iov, cnt, offset), offset);
}

ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out,
	       size_t len, unsigned int flags)
{
	off_t at = off_in ? *off_in : lseek(fd_in, 0, SEEK_CUR);

	REAL(splice);
	if (at >= 0 && touches_bad(fd_in, at, len, false))
		return eio();
	return real(fd_in, off_in, fd_out, off_out, len, flags);
}
