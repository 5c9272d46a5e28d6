/*
 * The sorted stripe set behind the record of lost units
 * (controller/stripe_set.c): against a plain bitmap, over random adds and
 * range removals.
 */
#include "controller/stripe_set.h"
#include "test/unit/unit.h"

#include <stdint.h>
#include <stdlib.h>

#define SPAN 200

static void stripe_set_basics(void)
{
	struct stripe_set s = { 0 };

	CHECK(!stripe_set_has(&s, 0));
	CHECK(!stripe_set_any(&s, 0, UINT64_MAX));
	CHECK_EQ(stripe_set_remove(&s, 0, 10), 0);
	CHECK_EQ(stripe_set_add(&s, 7), 1);
	CHECK_EQ(stripe_set_add(&s, 7), 0);
	CHECK_EQ(stripe_set_add(&s, UINT64_MAX - 1), 1);
	CHECK_EQ(stripe_set_add(&s, 3), 1);
	CHECK_EQ(s.n, 3);
	CHECK(s.v[0] == 3 && s.v[1] == 7 && s.v[2] == UINT64_MAX - 1);
	CHECK(stripe_set_has(&s, 7) && !stripe_set_has(&s, 8));
	CHECK(stripe_set_any(&s, 4, 8) && !stripe_set_any(&s, 4, 7));
	CHECK(!stripe_set_any(&s, 8, 8));
	CHECK_EQ(stripe_set_remove(&s, 7, 7), 0);
	CHECK_EQ(stripe_set_remove(&s, 0, 8), 2);
	CHECK_EQ(s.n, 1);
	CHECK(stripe_set_has(&s, UINT64_MAX - 1));
	stripe_set_clear(&s);
	CHECK(s.n == 0 && !s.v);
}

static void stripe_set_against_a_bitmap(void)
{
	struct stripe_set s = { 0 };
	unsigned char model[SPAN] = { 0 };
	unsigned int round, i, n;

	srand(7);
	for (round = 0; round < 20000; round++) {
		uint64_t a = (uint64_t)(rand() % SPAN), b;

		if (rand() % 3) {
			CHECK_EQ(stripe_set_add(&s, a), !model[a]);
			model[a] = 1;
		} else {
			b = a + (uint64_t)(rand() % 12);
			if (b > SPAN)
				b = SPAN;
			for (n = 0, i = (unsigned int)a; i < b; i++) {
				n += model[i];
				model[i] = 0;
			}
			CHECK_EQ(stripe_set_remove(&s, a, b), n);
		}
		a = (uint64_t)(rand() % SPAN);
		b = a + (uint64_t)(rand() % 5);
		for (n = 0, i = (unsigned int)a; i < b && i < SPAN; i++)
			n += model[i];
		CHECK_EQ(stripe_set_any(&s, a, b), n != 0);
		CHECK_EQ(stripe_set_has(&s, a), model[a]);
	}
	for (n = 0, i = 0; i < SPAN; i++)
		n += model[i];
	CHECK_EQ(s.n, n);
	for (i = 1; i < s.n; i++)
		CHECK(s.v[i - 1] < s.v[i]);
	stripe_set_clear(&s);
}

int main(void)
{
	RUN(stripe_set_basics);
	RUN(stripe_set_against_a_bitmap);
	UNIT_EXIT();
}
