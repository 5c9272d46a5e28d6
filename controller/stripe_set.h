/*
 * A small sorted set of stripe numbers, bounded: the controller's record
 * of one position's lost units (usr/tpt_controller/lost_units.c), as md
 * keeps a bad block log per device.  Expected to hold a handful; looked
 * up for every stripe a request plans, so a lookup is a binary search
 * and an empty set costs one compare.  Pure: no I/O.
 */
#ifndef TPT_CONTROLLER_STRIPE_SET_H
#define TPT_CONTROLLER_STRIPE_SET_H

#include <stdbool.h>
#include <stdint.h>

struct stripe_set {
	uint64_t *v;		/* ascending, no duplicates */
	unsigned int n, cap;
};

bool stripe_set_has(const struct stripe_set *set, uint64_t stripe);

/* 1 if added, 0 if it was there, -ENOMEM without memory. */
int stripe_set_add(struct stripe_set *set, uint64_t stripe);

/* Removes the stripes in [@first, @end); how many it held. */
unsigned int stripe_set_remove(struct stripe_set *set, uint64_t first,
			       uint64_t end);

/* Whether it holds any stripe in [@first, @end). */
bool stripe_set_any(const struct stripe_set *set, uint64_t first,
		    uint64_t end);

void stripe_set_clear(struct stripe_set *set);

#endif
