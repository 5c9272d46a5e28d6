/*
 * usr/tpt_inline_read.c, READs done in tgtd's event loop: which files
 * qualify, what is copied and what spliced, and that anything else is
 * left to a worker.  The module and the pipes it uses have no dependency
 * on the rest of tgtd, so the test compiles both in.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "test/unit/unit.h"
#include "usr/tpt_data_pipe.c"
#include "usr/tpt_inline_read.c"

#define FILE_BYTES (2u << 20)

static uint8_t pattern[FILE_BYTES];

/* A file of FILE_BYTES in @dir holding the pattern; -1 when @dir is not
 * there. */
static int make_file(const char *dir)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/test_tpt_inline_read.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	unlink(path);
	if (pwrite(fd, pattern, FILE_BYTES, 0) != FILE_BYTES)
		abort();
	return fd;
}

static int swap_configured(void)
{
	struct sysinfo si;

	return sysinfo(&si) || si.totalswap;
}

/* A file in /dev/shm while no swap is configured, or -1 (the test is
 * then skipped, and says so). */
static int memory_file(void)
{
	int fd = make_file("/dev/shm");

	if (fd >= 0 && !swap_configured())
		return fd;
	printf("  (no /dev/shm, or swap on: skipped)\n");
	if (fd >= 0)
		close(fd);
	return -1;
}

static void test_which_files_qualify(void)
{
	int fd = make_file("/dev/shm"), fds[2];

	if (fd >= 0) {
		CHECK_EQ(tpt_inline_read_how(fd, 0), TPT_INLINE_READ_MEMORY);
		close(fd);
	}
	/* As the LU's bsoflags say, whatever the file system. */
	fd = make_file("/tmp");
	if (fd >= 0) {
		CHECK_EQ(tpt_inline_read_how(fd, O_DIRECT),
			 TPT_INLINE_READ_NEVER);
		close(fd);
	}
	if (pipe(fds))
		abort();
	CHECK_EQ(tpt_inline_read_how(fds[0], 0), TPT_INLINE_READ_NEVER);
	close(fds[0]);
	close(fds[1]);
}

static void test_nowait_copies_cached_small_reads_only(void)
{
	struct tpt_inline_read_stats s0, s1;
	static uint8_t buf[64 << 10];
	struct tpt_data_pipe *pipe = NULL;
	int fd = make_file("/tmp");

	if (fd < 0 || tpt_inline_read_how(fd, 0) != TPT_INLINE_READ_NOWAIT) {
		printf("  (/tmp has no RWF_NOWAIT: skipped)\n");
		if (fd >= 0)
			close(fd);
		return;
	}
	tpt_inline_read_stats(&s0);
	/* Just written, so cached. */
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_NOWAIT, fd, 4096, 4096, buf,
				 NULL),
		 TPT_INLINE_READ_DONE);
	CHECK_MEM(buf, pattern + 4096, 4096);
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_NOWAIT, fd, 512,
				 TPT_INLINE_READ_COPY_MAX, buf, &pipe),
		 TPT_INLINE_READ_DONE);
	CHECK_MEM(buf, pattern + 512, TPT_INLINE_READ_COPY_MAX);
	CHECK(pipe == NULL);
	/* Longer: a worker's, with its pipe. */
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_NOWAIT, fd, 0, 64 << 10, buf,
				 &pipe),
		 TPT_INLINE_READ_LATER);
	CHECK(pipe == NULL);
	/* Past the end: the worker reports it. */
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_NOWAIT, fd, FILE_BYTES, 4096,
				 buf, NULL),
		 TPT_INLINE_READ_LATER);
	tpt_inline_read_stats(&s1);
	CHECK_EQ(s1.copied - s0.copied, 2);
	CHECK_EQ(s1.would_wait - s0.would_wait, 1);
	CHECK_EQ(s1.spliced, s0.spliced);
	close(fd);
}

static void test_memory_splices_and_copies(void)
{
	struct tpt_inline_read_stats s0, s1;
	static uint8_t buf[64 << 10];
	struct tpt_data_pipe *pipe = NULL;
	int fd = memory_file();

	if (fd < 0)
		return;
	tpt_inline_read_stats(&s0);
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_MEMORY, fd, 8192, 64 << 10,
				 buf, &pipe),
		 TPT_INLINE_READ_DONE);
	CHECK(pipe != NULL);
	if (pipe) {
		CHECK_EQ(tpt_data_pipe_left(pipe), 64 << 10);
		CHECK_EQ(read(pipe->rfd, buf, 64 << 10), 64 << 10);
		pipe->left = 0;
		CHECK_MEM(buf, pattern + 8192, 64 << 10);
		tpt_data_pipe_release(pipe);
	}
	/* Below a pipe's minimum, or with none to be had: copied up to the
	 * copy limit, a worker's beyond it. */
	pipe = NULL;
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_MEMORY, fd, 0, 4096, buf,
				 &pipe),
		 TPT_INLINE_READ_DONE);
	CHECK(pipe == NULL);
	CHECK_MEM(buf, pattern, 4096);
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_MEMORY, fd, 4096,
				 TPT_INLINE_READ_COPY_MAX, buf, NULL),
		 TPT_INLINE_READ_DONE);
	CHECK_MEM(buf, pattern + 4096, TPT_INLINE_READ_COPY_MAX);
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_MEMORY, fd, 0, 64 << 10, buf,
				 NULL),
		 TPT_INLINE_READ_LATER);
	tpt_inline_read_stats(&s1);
	CHECK_EQ(s1.spliced - s0.spliced, 1);
	CHECK_EQ(s1.copied - s0.copied, 2);
	CHECK_EQ(s1.would_wait, s0.would_wait);
	close(fd);
}

/* A pipe that could not be filled inline is not tried again by the
 * worker: the result says so, and the fallback counts once. */
static void test_memory_pipe_tried_once(void)
{
	struct tpt_data_pipe_stats p0, p1;
	static uint8_t buf[64 << 10];
	struct tpt_data_pipe *pipe = NULL;
	int fd = memory_file();

	if (fd < 0)
		return;
	tpt_data_pipe_stats(&p0);
	/* The file ends inside the READ: no pipe, too long to copy. */
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_MEMORY, fd, FILE_BYTES - 4096,
				 64 << 10, buf, &pipe),
		 TPT_INLINE_READ_LATER_NO_PIPE);
	CHECK(pipe == NULL);
	/* Without a pipe to take it, the same READ is simply later. */
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_MEMORY, fd, FILE_BYTES - 4096,
				 64 << 10, buf, NULL),
		 TPT_INLINE_READ_LATER);
	tpt_data_pipe_stats(&p1);
	CHECK_EQ(p1.fallbacks - p0.fallbacks, 1);
	CHECK_EQ(p1.reads, p0.reads);
	close(fd);
}

static void test_never_reads_nothing(void)
{
	uint8_t buf[4096];
	struct tpt_data_pipe *pipe = NULL;
	int fd = make_file("/tmp");

	CHECK(fd >= 0);
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_NEVER, fd, 0, 4096, buf, NULL),
		 TPT_INLINE_READ_LATER);
	CHECK_EQ(tpt_inline_read(TPT_INLINE_READ_NEVER, fd, 0, 64 << 10, buf,
				 &pipe),
		 TPT_INLINE_READ_LATER);
	CHECK(pipe == NULL);
	close(fd);
}

int main(void)
{
	unsigned int i;

	for (i = 0; i < FILE_BYTES; i++)
		pattern[i] = (uint8_t)(i * 13 + i / 512);
	RUN(test_which_files_qualify);
	RUN(test_nowait_copies_cached_small_reads_only);
	RUN(test_memory_splices_and_copies);
	RUN(test_memory_pipe_tried_once);
	RUN(test_never_reads_nothing);
	UNIT_EXIT();
}
