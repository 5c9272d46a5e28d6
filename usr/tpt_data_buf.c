/*
 * Kept data buffers for iSCSI/TCP commands (tpt_data_buf.h says why).
 *
 * A small table of buffers, each either lent to a command or free for the
 * next one.  A request takes the smallest free buffer that holds it and
 * is not more than twice its size, so a stream of 4 KiB-over-64 KiB
 * commands does not pin a 16 MiB buffer; when the table or its byte bound
 * is full, free buffers that did not fit are given back to make room,
 * and a request that still finds none gets a buffer of its own from
 * glibc, freed as before.  The table is scanned, not hashed: it has at
 * most TPT_DATA_BUF_KEPT entries, and a free of a small buffer scans it
 * once to learn that the buffer is not one of them.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "tpt_data_buf.h"

/* Kept buffers are sized in these steps, so that neighbouring request
 * sizes share them. */
#define KEPT_STEP (64u << 10)

struct kept_buf {
	void *addr;
	size_t size;
	bool lent;
};

static struct kept_buf kept[TPT_DATA_BUF_KEPT];
static unsigned int nr_kept;
static size_t kept_bytes;

static void *page_alloc(size_t size)
{
	void *addr = NULL;

	if (posix_memalign(&addr, sysconf(_SC_PAGESIZE), size))
		return NULL;
	return addr;
}

static struct kept_buf *best_fit(size_t size)
{
	struct kept_buf *best = NULL;
	unsigned int i;

	for (i = 0; i < nr_kept; i++) {
		struct kept_buf *k = &kept[i];

		if (k->lent || k->size < size || k->size / 2 > size)
			continue;
		if (!best || k->size < best->size)
			best = k;
	}
	return best;
}

/* Give back free buffers until one of @size fits under the bounds. */
static bool make_room(size_t size)
{
	unsigned int i = 0;

	while (nr_kept == TPT_DATA_BUF_KEPT ||
	       kept_bytes + size > TPT_DATA_BUF_KEPT_BYTES) {
		while (i < nr_kept && kept[i].lent)
			i++;
		if (i == nr_kept)
			return false;
		free(kept[i].addr);
		kept_bytes -= kept[i].size;
		kept[i] = kept[--nr_kept];
	}
	return true;
}

void *tpt_data_buf_alloc(size_t size)
{
	struct kept_buf *k;
	size_t want;
	void *addr;

	if (size < TPT_DATA_BUF_MIN || size > TPT_DATA_BUF_KEPT_BYTES)
		return page_alloc(size);
	k = best_fit(size);
	if (k) {
		k->lent = true;
		return k->addr;
	}
	want = (size + KEPT_STEP - 1) / KEPT_STEP * KEPT_STEP;
	if (want > TPT_DATA_BUF_KEPT_BYTES || !make_room(want))
		return page_alloc(size);
	addr = page_alloc(want);
	if (!addr)
		return NULL;
	kept[nr_kept++] = (struct kept_buf){ .addr = addr, .size = want,
					     .lent = true };
	kept_bytes += want;
	return addr;
}

void tpt_data_buf_free(void *buf)
{
	unsigned int i;

	if (!buf)
		return;
	for (i = 0; i < nr_kept; i++) {
		if (kept[i].addr == buf) {
			kept[i].lent = false;
			return;
		}
	}
	free(buf);
}
