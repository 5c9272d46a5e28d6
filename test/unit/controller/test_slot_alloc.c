/*
 * The controller's record of each member's result slots
 * (controller/slot_alloc.c): the limits it takes, runs of consecutive
 * slots, and that no slot is ever handed out twice.
 */
#include "controller/slot_alloc.h"
/* Its random numbers, with a fixed seed. */
#include "test/unit/controller/plan_sim.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void slot_alloc_limits(void)
{
	struct slot_alloc a;
	uint16_t first;

	CHECK_EQ(slot_alloc_init(&a, 0), -EINVAL);
	CHECK_EQ(slot_alloc_init(&a, TPT_SLOT_MAX + 1), -EINVAL);
	CHECK_EQ(slot_alloc_init(&a, TPT_SLOT_MAX), 0);
	CHECK_EQ(slot_alloc_free_count(&a), TPT_SLOT_MAX);
	CHECK_EQ(slot_alloc_get(&a, TPT_SLOT_MAX, &first), 0);
	CHECK_EQ(first, 0);
	CHECK_EQ(slot_alloc_free_count(&a), 0);
	CHECK_EQ(slot_alloc_get(&a, 1, &first), -EAGAIN);
	slot_alloc_put(&a, 0, TPT_SLOT_MAX);
	CHECK_EQ(slot_alloc_free_count(&a), TPT_SLOT_MAX);
	slot_alloc_destroy(&a);

	CHECK_EQ(slot_alloc_init(&a, 16), 0);
	CHECK_EQ(slot_alloc_get(&a, 0, &first), -EINVAL);
	CHECK_EQ(slot_alloc_get(&a, 17, &first), -EINVAL);
	slot_alloc_destroy(&a);
}

static void slot_alloc_exhaustion_and_runs(void)
{
	struct slot_alloc a;
	uint16_t first, i;

	CHECK_EQ(slot_alloc_init(&a, 16), 0);
	for (i = 0; i < 16; i++) {
		CHECK_EQ(slot_alloc_get(&a, 1, &first), 0);
		CHECK_EQ(first, i);
	}
	CHECK_EQ(slot_alloc_get(&a, 1, &first), -EAGAIN);
	slot_alloc_put(&a, 5, 1);
	slot_alloc_put(&a, 9, 1);
	/* Two free slots, but not next to each other. */
	CHECK_EQ(slot_alloc_free_count(&a), 2);
	CHECK_EQ(slot_alloc_get(&a, 2, &first), -EAGAIN);
	CHECK_EQ(slot_alloc_get(&a, 1, &first), 0);
	CHECK_EQ(first, 5);
	slot_alloc_put(&a, 0, 4);
	CHECK_EQ(slot_alloc_get(&a, 3, &first), 0);
	CHECK_EQ(first, 0);
	CHECK_EQ(slot_alloc_get(&a, 2, &first), -EAGAIN);
	CHECK_EQ(slot_alloc_get(&a, 1, &first), 0);
	CHECK_EQ(first, 3);
	CHECK_EQ(slot_alloc_get(&a, 1, &first), 0);
	CHECK_EQ(first, 9);
	CHECK_EQ(slot_alloc_free_count(&a), 0);
	slot_alloc_destroy(&a);
}

/* Random gets and puts against a record of who holds what: a slot is
 * never handed out twice. */
static void slot_alloc_never_doubles(void)
{
	static unsigned char held[TPT_SLOT_MAX];
	struct { uint16_t first, n; } runs[TPT_SLOT_MAX];
	unsigned int nr_runs = 0, i, j, free_slots = 300;
	struct slot_alloc a;
	uint16_t first, n;
	int err;

	memset(held, 0, sizeof(held));
	CHECK_EQ(slot_alloc_init(&a, 300), 0);
	for (i = 0; i < 20000; i++) {
		if (nr_runs && rnd_below(2)) {
			j = (unsigned int)rnd_below(nr_runs);
			slot_alloc_put(&a, runs[j].first, runs[j].n);
			for (n = 0; n < runs[j].n; n++)
				held[runs[j].first + n] = 0;
			free_slots += runs[j].n;
			runs[j] = runs[--nr_runs];
			continue;
		}
		n = (uint16_t)(1 + rnd_below(6));
		err = slot_alloc_get(&a, n, &first);
		if (err) {
			CHECK_EQ(err, -EAGAIN);
			continue;
		}
		CHECK(first + n <= 300);
		for (j = 0; j < n; j++) {
			CHECK_EQ(held[first + j], 0);
			held[first + j] = 1;
		}
		free_slots -= n;
		runs[nr_runs].first = first;
		runs[nr_runs++].n = n;
		CHECK_EQ(slot_alloc_free_count(&a), free_slots);
	}
	slot_alloc_destroy(&a);
}

int main(void)
{
	RUN(slot_alloc_limits);
	RUN(slot_alloc_exhaustion_and_runs);
	RUN(slot_alloc_never_doubles);
	UNIT_EXIT();
}
