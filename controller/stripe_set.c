/*
 * A sorted set of stripe numbers (stripe_set.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/stripe_set.h"

/* The index of the first element not below @stripe. */
static unsigned int lower_bound(const struct stripe_set *set, uint64_t stripe)
{
	unsigned int lo = 0, hi = set->n;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (set->v[mid] < stripe)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool stripe_set_has(const struct stripe_set *set, uint64_t stripe)
{
	unsigned int i;

	if (!set->n)
		return false;
	i = lower_bound(set, stripe);
	return i < set->n && set->v[i] == stripe;
}

int stripe_set_add(struct stripe_set *set, uint64_t stripe)
{
	unsigned int i = lower_bound(set, stripe);

	if (i < set->n && set->v[i] == stripe)
		return 0;
	if (set->n == set->cap) {
		unsigned int cap = set->cap ? 2 * set->cap : 8;
		uint64_t *v = realloc(set->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		set->v = v;
		set->cap = cap;
	}
	memmove(&set->v[i + 1], &set->v[i], (set->n - i) * sizeof(*set->v));
	set->v[i] = stripe;
	set->n++;
	return 1;
}

unsigned int stripe_set_remove(struct stripe_set *set, uint64_t first,
			       uint64_t end)
{
	unsigned int i, j;

	if (!set->n || first >= end)
		return 0;
	i = lower_bound(set, first);
	j = lower_bound(set, end);
	memmove(&set->v[i], &set->v[j], (set->n - j) * sizeof(*set->v));
	set->n -= j - i;
	return j - i;
}

bool stripe_set_any(const struct stripe_set *set, uint64_t first,
		    uint64_t end)
{
	unsigned int i;

	if (!set->n || first >= end)
		return false;
	i = lower_bound(set, first);
	return i < set->n && set->v[i] < end;
}

void stripe_set_clear(struct stripe_set *set)
{
	free(set->v);
	*set = (struct stripe_set) { 0 };
}
