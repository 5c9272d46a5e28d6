/* Disk I/O for TPT commands on worker threads, completed on the event loop. */
#ifndef __TPT_IO_H__
#define __TPT_IO_H__

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "list.h"
#include "tpt_inline_read.h"

struct tpt_io {
	int fd;
	bool write;
	bool sync;		/* fdatasync after a write */
	void *buf;
	size_t len;
	uint64_t offset;
	/* Set before done() runs: len, or a negative errno. */
	ssize_t result;
	void (*done)(struct tpt_io *req);
	void *owner;
	/* How a read of @fd may be done on the event loop; 0 (NEVER):
	 * always on a worker. */
	enum tpt_inline_read_how read_inline;
	struct list_head link;
};

int tpt_io_start(void);
/* done() runs later on the event loop, never from inside this call. */
void tpt_io_submit(struct tpt_io *req);

#endif
