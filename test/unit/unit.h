/* Minimal unit-test support: each test is a program that exits 0 on pass,
 * 1 on failure and 77 when it cannot run here (liburing's convention).
 * scripts/run-unit runs them with a timeout each and prints the summary. */
#ifndef TPT_TEST_UNIT_H
#define TPT_TEST_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNIT_SKIP 77

static int unit_failures;

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n",         \
				__FILE__, __LINE__, #cond);                  \
			unit_failures++;                                     \
		}                                                            \
	} while (0)

#define CHECK_EQ(a, b)                                                       \
	do {                                                                 \
		long long unit_a_ = (long long)(a), unit_b_ = (long long)(b); \
		if (unit_a_ != unit_b_) {                                    \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", \
				__FILE__, __LINE__, #a, #b, unit_a_, unit_b_); \
			unit_failures++;                                     \
		}                                                            \
	} while (0)

#define CHECK_MEM(a, b, n)                                                   \
	do {                                                                 \
		if (memcmp((a), (b), (n)) != 0) {                            \
			fprintf(stderr, "%s:%d: %s and %s differ\n",         \
				__FILE__, __LINE__, #a, #b);                 \
			unit_failures++;                                     \
		}                                                            \
	} while (0)

/* Run one test function and report it by name. */
#define RUN(fn)                                                              \
	do {                                                                 \
		int unit_before_ = unit_failures;                            \
		fn();                                                        \
		fprintf(stderr, "%s %s\n",                                   \
			unit_failures == unit_before_ ? "ok  " : "FAIL", #fn); \
	} while (0)

#define UNIT_EXIT() return unit_failures ? 1 : 0

#endif
