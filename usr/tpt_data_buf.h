/*
 * Data buffers of iSCSI/TCP commands (patches/tgt/0010-*): large ones
 * are kept for reuse instead of being returned to glibc after every
 * command.
 *
 * Why: tgt allocates each command's data buffer with posix_memalign and
 * frees it when the command ends.  glibc serves a request above its mmap
 * threshold with a fresh mmap and gives it back with munmap, so every
 * large READ or WRITE paid for an mmap, a munmap and a page fault per
 * page touched: stock tgt reads 1 MiB requests at a third of its 64 KiB
 * throughput on loopback (issue 14; with glibc's threshold raised, the
 * same tgtd reads them 4.5x faster).  A buffer kept here is already
 * mapped and faulted in when the next command takes it.
 *
 * Small ones (below TPT_DATA_BUF_MIN) come from one region per size
 * class, 4 KiB to 64 KiB, and go back to their class's free list: tgt
 * wants every data buffer page-aligned, and glibc serves a page-aligned
 * request from its heap by splitting a larger chunk and giving back the
 * pieces around it, which has it consolidate its free lists over and
 * over (perf, random 4 KiB reads of an extended host: 3% of the
 * controller's CPU in posix_memalign, most of it consolidating).
 *
 * Bounded: at most TPT_DATA_BUF_KEPT large buffers, TPT_DATA_BUF_KEPT_BYTES
 * in all, are kept, and each small class's region is
 * TPT_DATA_BUF_CLASS_BYTES; past that, buffers come and go through glibc
 * as before.  Used from tgtd's event loop only (where iSCSI/TCP allocates
 * and frees them), so there is no locking.
 */
#ifndef __TPT_DATA_BUF_H__
#define __TPT_DATA_BUF_H__

#include <stddef.h>

/* Requests below this are small: served by the size classes. */
#define TPT_DATA_BUF_MIN (64u << 10)
#define TPT_DATA_BUF_KEPT 64
#define TPT_DATA_BUF_KEPT_BYTES ((size_t)128 << 20)
/* Each small class's region (address space; pages as they are used). */
#define TPT_DATA_BUF_CLASS_BYTES ((size_t)4 << 20)

/* A page-aligned buffer of at least @size bytes, or NULL. */
void *tpt_data_buf_alloc(size_t size);
/* @buf from tpt_data_buf_alloc(), or NULL. */
void tpt_data_buf_free(void *buf);

#endif
