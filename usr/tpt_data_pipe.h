/*
 * Zero-copy READ data for iSCSI/TCP (patches/tgt/0018-*): the rdwr
 * backing store splices a file LUN's pages into a pipe (a worker, or the
 * event loop where the file is in memory: tpt_inline_read.h), and the
 * event loop splices them from the pipe to the connection's socket, so a
 * READ's data is never copied into tgtd's memory and out again.
 *
 * Why: tgt pread()s every READ into its data buffer and send()s it from
 * there, two copies of every byte it serves; on a file LUN in the page
 * cache those two copies were 38% of tgtd's CPU on 64 KiB sequential
 * reads (perf, /dev/shm LUN), the rest being the network stack and the
 * wake-ups.  A pipe holds references to the page cache's pages, which
 * TCP sends as they are.
 *
 * Why a pipe and not sendfile() from the event loop: the part that may
 * wait for a disk (the file's pages into the pipe) can then be left to a
 * worker; the event loop only moves page references to the socket.
 *
 * What a reader gets is the page as it is when TCP copies it (loopback)
 * or the NIC reads it: a WRITE to the same blocks that completes while
 * the READ's data is still queued may show through, as it may on any
 * zero-copy server (knfsd splices READs the same way).  Commands that
 * overlap in time have no order between them in SCSI; a host that
 * issues a WRITE after its READ completed has received the READ's data.
 * With DataDigest on, the data is read into the buffer as before (the
 * digest must cover the bytes that are sent).
 *
 * Bounded: at most TPT_DATA_PIPE_OPEN pipes (two file descriptors each)
 * exist at a time, each holding one command's data of at most
 * TPT_DATA_PIPE_MAX bytes; a READ that finds none free, or a pipe that
 * cannot grow to its length, reads into the data buffer as before.  An
 * emptied pipe is kept for the next READ; one that still holds data when
 * its command ends (a connection lost mid-way) is closed.  Workers take
 * pipes and the event loop gives them back, hence the lock.
 */
#ifndef __TPT_DATA_PIPE_H__
#define __TPT_DATA_PIPE_H__

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* READs from this length on go through a pipe.  Below it the copies are
 * cheap and a pipe's extra system call (the header's send()) eats what
 * they cost: on a /dev/shm LUN, tgtd CPU per GiB read at 4 and 8 KiB was
 * the same within the spread either way, at 16 KiB 1.1-1.5 s with a pipe
 * against 1.5-1.8 s without, at 32 KiB 0.57-0.67 against 0.89-1.01. */
#define TPT_DATA_PIPE_MIN (16u << 10)
/* ... and up to this one, a pipe's size without privileges by default
 * (/proc/sys/fs/pipe-max-size). */
#define TPT_DATA_PIPE_MAX (1u << 20)
#define TPT_DATA_PIPE_OPEN 128

struct tpt_data_pipe;

/* Whether a READ of @len bytes may go through a pipe. */
int tpt_data_pipe_fits(size_t len);

/*
 * A pipe holding @len bytes of @fd from @offset, or NULL with errno set
 * (no pipe free, the file ended early, an I/O error): the caller then
 * reads them the usual way, and reports a real error from there.  May
 * wait for the disk: for a worker thread, unless the file is in memory.
 */
struct tpt_data_pipe *tpt_data_pipe_fill(int fd, off_t offset, size_t len);

/*
 * Moves up to @len of @pipe's bytes to socket @sock, without blocking;
 * @more: more of the stream follows at once (MSG_MORE).  Returns the
 * bytes moved, or -1 with errno (EAGAIN: the socket is full).
 */
ssize_t tpt_data_pipe_send(struct tpt_data_pipe *pipe, int sock, size_t len,
			   int more);

/* Bytes still in @pipe. */
size_t tpt_data_pipe_left(const struct tpt_data_pipe *pipe);

/* Gives @pipe back (NULL: nothing), from the thread that sent from it. */
void tpt_data_pipe_release(struct tpt_data_pipe *pipe);

struct tpt_data_pipe_stats {
	uint64_t reads;		/* READs filled into a pipe */
	uint64_t bytes;		/* their bytes */
	uint64_t fallbacks;	/* eligible READs that got no pipe */
	unsigned int open;	/* pipes open now, free or in use */
	unsigned int busy;	/* ... of them holding a command's data */
};

void tpt_data_pipe_stats(struct tpt_data_pipe_stats *stats);

#endif
