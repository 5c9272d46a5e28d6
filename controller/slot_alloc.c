#include "controller/slot_alloc.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

static int slot_used(const struct slot_alloc *a, unsigned int s)
{
	return (a->used[s / 64] >> (s % 64)) & 1;
}

static void slot_mark(struct slot_alloc *a, unsigned int s, int used)
{
	if (used)
		a->used[s / 64] |= UINT64_C(1) << (s % 64);
	else
		a->used[s / 64] &= ~(UINT64_C(1) << (s % 64));
}

int slot_alloc_init(struct slot_alloc *a, uint16_t count)
{
	uint32_t generation = a->generation;

	if (!count || count > TPT_SLOT_MAX)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->generation = generation + 1;
	a->count = count;
	a->nr_free = count;
	return 0;
}

int slot_alloc_get(struct slot_alloc *a, uint16_t n, uint16_t *first)
{
	unsigned int start, s;

	if (!n || n > a->count)
		return -EINVAL;
	if (n > a->nr_free)
		return -EAGAIN;
	for (start = 0; start + n <= a->count; start = s + 1) {
		for (s = start; s < start + n && !slot_used(a, s); s++)
			;
		if (s == start + n) {
			for (s = start; s < start + n; s++)
				slot_mark(a, s, 1);
			a->nr_free -= n;
			*first = (uint16_t)start;
			return 0;
		}
	}
	return -EAGAIN;
}

void slot_alloc_put(struct slot_alloc *a, uint16_t first, uint16_t n)
{
	unsigned int s;

	/* Putting a free slot means two requests think they own it: the
	 * next plan would name a live slot and get TPT SLOT IN USE. */
	assert((unsigned int)first + n <= a->count);
	for (s = first; s < (unsigned int)first + n; s++) {
		assert(slot_used(a, s));
		slot_mark(a, s, 0);
	}
	a->nr_free += n;
}

uint16_t slot_alloc_free_count(const struct slot_alloc *a)
{
	return a->nr_free;
}

void slot_alloc_destroy(struct slot_alloc *a)
{
	uint32_t generation = a->generation;

	memset(a, 0, sizeof(*a));
	a->generation = generation + 1;
}
