/*
 * The controller's record of one member's result slots (docs/protocol.md
 * 2.6, 8.4).  The controller names every slot a result goes to, so it
 * knows which are free without asking; running out is its own
 * back-pressure and costs no round trip.  A slot is taken when a plan is
 * made and put back when the WRITE NEW DATA or TPT RELEASE that frees it
 * on the member has completed.
 */
#ifndef TPT_CONTROLLER_SLOT_ALLOC_H
#define TPT_CONTROLLER_SLOT_ALLOC_H

#include <stdint.h>

#include "scsi/tpt_cdb.h"

struct slot_alloc {
	/* Counts the tables this allocator has served: slots taken from an
	 * earlier one (a session that is gone) are not given back to it. */
	uint32_t generation;
	uint16_t count;			/* SLOT COUNT of the member's table */
	uint16_t nr_free;
	uint64_t used[TPT_SLOT_MAX / 64];	/* bit per slot */
};

/* @count from TPT REPORT SLOTS, 1..TPT_SLOT_MAX; -EINVAL otherwise.
 * Starts a new generation: everything is free. */
int slot_alloc_init(struct slot_alloc *a, uint16_t count);

/*
 * Take @n consecutive free slots, the lowest run that fits, and return
 * the first in @first.  -EAGAIN when no such run is free (wait for a
 * request to give some back), -EINVAL when @n is 0 or above the count.
 */
int slot_alloc_get(struct slot_alloc *a, uint16_t n, uint16_t *first);

/* Give back slots taken with slot_alloc_get(); they must all be taken. */
void slot_alloc_put(struct slot_alloc *a, uint16_t first, uint16_t n);

uint16_t slot_alloc_free_count(const struct slot_alloc *a);

void slot_alloc_destroy(struct slot_alloc *a);

#endif
