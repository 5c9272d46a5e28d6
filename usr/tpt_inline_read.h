/*
 * READs of a file LUN that complete in tgtd's event loop (patches/tgt/
 * 0019-*), where reading them cannot wait for a disk.
 *
 * Why: the rdwr backing store hands every command to a worker thread and
 * the worker hands it back, two thread wake-ups per command; for a READ
 * whose blocks are in memory they cost more than the read.  Measured on
 * a /dev/shm LUN, one session at queue depth 16: random 4 KiB READs
 * 1.6x the IOPS at half tgtd's CPU per GiB, sequential 16 KiB 1.6x.
 *
 * When a read cannot wait:
 *  - the file takes preadv2(RWF_NOWAIT) (ext4, xfs, btrfs, block
 *    devices): a read that would wait fails with EAGAIN and goes to a
 *    worker as before;
 *  - the file is in memory (tmpfs, ramfs: RWF_NOWAIT is refused there)
 *    and no swap is configured, checked again at most once a second: its
 *    pages then never leave memory.
 * Never with O_DIRECT (bsoflags=direct): a direct read always waits.
 *
 * A READ up to TPT_INLINE_READ_COPY_MAX bytes is read into its buffer; a
 * longer one that may go through a pipe (tpt_data_pipe.h) is spliced
 * into one, in memory only (a splice cannot be told not to wait).
 * Everything else goes to a worker as before.  The TPT target's medium
 * reads (tpt_target/disk_io.c) use the same test through
 * tpt_inline_pread() up to TPT_INLINE_READ_COPY_MAX: their data must
 * reach a buffer anyway, so only the thread hop is saved, and a larger
 * copy is better done by a worker on the other core.
 */
#ifndef __TPT_INLINE_READ_H__
#define __TPT_INLINE_READ_H__

#include <stddef.h>
#include <sys/types.h>

struct tpt_data_pipe;

enum tpt_inline_read_how {
	TPT_INLINE_READ_NEVER,
	TPT_INLINE_READ_NOWAIT,		/* preadv2(RWF_NOWAIT) */
	TPT_INLINE_READ_MEMORY,		/* tmpfs/ramfs, while swap is off */
};

/* Copies up to this length; the pipe from tpt_data_pipe.h's minimum up,
 * the two overlap where a pipe cannot be had. */
#define TPT_INLINE_READ_COPY_MAX (32u << 10)

/* How READs of @fd (opened with @oflags) may run inline; decided once
 * when the LU opens its file. */
enum tpt_inline_read_how tpt_inline_read_how(int fd, int oflags);

enum tpt_inline_read_result {
	TPT_INLINE_READ_LATER,		/* a worker must do it */
	/* The same, into the buffer: a pipe was tried inline and could not
	 * be filled (none free, the file ends early), so the worker must
	 * not try one again - a second attempt, and a second count. */
	TPT_INLINE_READ_LATER_NO_PIPE,
	TPT_INLINE_READ_DONE,
};

/*
 * Reads @len bytes at @offset of @fd inline if @how allows it now: into
 * @buf, or, if @pipe is given (the transport takes one) and @len fits
 * one, into a pipe stored at *@pipe.  Nothing read is kept unless the
 * result is TPT_INLINE_READ_DONE.
 */
enum tpt_inline_read_result tpt_inline_read(enum tpt_inline_read_how how,
					    int fd, off_t offset, size_t len,
					    void *buf,
					    struct tpt_data_pipe **pipe);

/*
 * The same for a read that has only a buffer to go to (a TPT command's
 * medium read, usr/tpt_target/disk_io.c), of any length: 1 when all
 * @len bytes were read into @buf, 0 when a worker must read them (not
 * in memory, the file ends early, an error: the worker says which).
 */
int tpt_inline_pread(enum tpt_inline_read_how how, int fd, off_t offset,
		     size_t len, void *buf);

struct tpt_inline_read_stats {
	unsigned long long copied;	/* READs read into their buffer inline */
	unsigned long long spliced;	/* ... into a pipe inline */
	unsigned long long would_wait;	/* tried inline, done by a worker */
};

/* Counted since tgtd started; event loop only, like the reads. */
void tpt_inline_read_stats(struct tpt_inline_read_stats *stats);

#endif
