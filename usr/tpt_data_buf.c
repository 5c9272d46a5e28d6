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
 * most TPT_DATA_BUF_KEPT entries, and a free of a glibc buffer scans it
 * once to learn that the buffer is not one of them.
 *
 * Small buffers: class c holds buffers of 4 KiB << c in a region of its
 * own, mapped when the class is first used and never unmapped.  Buffers
 * are carved from the region in order and, once freed, kept on the
 * class's free list (linked through the free buffers themselves), so a
 * free finds its class from the address alone.  A class whose region is
 * used up, or could not be mapped, hands out glibc buffers instead.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
/* A buffer we keep is unreachable to its last owner: ASan reports a use
 * after free of it as it would of a buffer given back to glibc. */
#define buf_poison(addr, size) ASAN_POISON_MEMORY_REGION(addr, size)
#define buf_unpoison(addr, size) ASAN_UNPOISON_MEMORY_REGION(addr, size)
#else
#define buf_poison(addr, size) ((void)(addr), (void)(size))
#define buf_unpoison(addr, size) ((void)(addr), (void)(size))
#endif

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

#define SMALL_SHIFT 12			/* class 0: 4 KiB */
#define SMALL_CLASSES 5			/* up to 64 KiB: TPT_DATA_BUF_MIN */

struct free_buf {
	struct free_buf *next;
};

struct small_class {
	uint8_t *region;		/* NULL until first used */
	bool unmappable;		/* mmap failed: glibc from then on */
	size_t carved;			/* buffers handed out from the region */
	struct free_buf *free;
};

static struct small_class small[SMALL_CLASSES];

static size_t small_size(unsigned int c)
{
	return (size_t)1 << (SMALL_SHIFT + c);
}

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
		buf_unpoison(kept[i].addr, kept[i].size);
		free(kept[i].addr);
		kept_bytes -= kept[i].size;
		kept[i] = kept[--nr_kept];
	}
	return true;
}

/* A buffer of class @c, or NULL when the class has none to give. */
static void *small_alloc(unsigned int c)
{
	struct small_class *sc = &small[c];
	size_t size = small_size(c);
	void *addr;

	if (sc->free) {
		addr = sc->free;
		buf_unpoison(addr, size);
		sc->free = sc->free->next;
		return addr;
	}
	if (!sc->region && !sc->unmappable) {
		addr = mmap(NULL, TPT_DATA_BUF_CLASS_BYTES,
			    PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (addr == MAP_FAILED) {
			sc->unmappable = true;
			return NULL;
		}
		sc->region = addr;
	}
	if (!sc->region || (sc->carved + 1) * size > TPT_DATA_BUF_CLASS_BYTES)
		return NULL;
	return sc->region + sc->carved++ * size;
}

/* Takes @buf back if it is a small class's; false if it is not. */
static bool small_free(void *buf)
{
	uint8_t *p = buf;
	unsigned int c;

	for (c = 0; c < SMALL_CLASSES; c++) {
		struct small_class *sc = &small[c];
		struct free_buf *f = buf;

		if (!sc->region || p < sc->region ||
		    p >= sc->region + TPT_DATA_BUF_CLASS_BYTES)
			continue;
		f->next = sc->free;
		sc->free = f;
		buf_poison(p + sizeof(*f), small_size(c) - sizeof(*f));
		return true;
	}
	return false;
}

void *tpt_data_buf_alloc(size_t size)
{
	struct kept_buf *k;
	unsigned int c;
	size_t want;
	void *addr;

	if (size < TPT_DATA_BUF_MIN) {
		for (c = 0; small_size(c) < size; c++)
			;
		addr = small_alloc(c);
		return addr ? addr : page_alloc(size);
	}
	if (size > TPT_DATA_BUF_KEPT_BYTES)
		return page_alloc(size);
	k = best_fit(size);
	if (k) {
		k->lent = true;
		buf_unpoison(k->addr, k->size);
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

	if (!buf || small_free(buf))
		return;
	for (i = 0; i < nr_kept; i++) {
		if (kept[i].addr == buf) {
			kept[i].lent = false;
			buf_poison(buf, kept[i].size);
			return;
		}
	}
	free(buf);
}
