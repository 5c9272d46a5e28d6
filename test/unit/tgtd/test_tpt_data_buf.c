/*
 * usr/tpt_data_buf.c, the data buffers of tgtd's iSCSI/TCP commands: page
 * alignment at every size, reuse of small and large buffers, and what
 * happens past each bound.  The module has no dependency on the rest of
 * tgtd, so the test compiles it in.
 */
#include <stdint.h>
#include <unistd.h>

#include "test/unit/unit.h"
#include "usr/tpt_data_buf.c"

static size_t page;

static bool aligned(const void *p)
{
	return p && (uintptr_t)p % page == 0;
}

static bool in_4k_class(const void *p)
{
	const uint8_t *q = p;

	return small[0].region && q >= small[0].region &&
	       q < small[0].region + TPT_DATA_BUF_CLASS_BYTES;
}

static void test_small_sizes_are_aligned_and_usable(void)
{
	static const size_t sizes[] = { 0, 1, 512, 4096, 4097, 8192, 20000,
					32768, 32769, TPT_DATA_BUF_MIN - 1 };
	void *buf[sizeof(sizes) / sizeof(sizes[0])];
	unsigned int i, j;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		buf[i] = tpt_data_buf_alloc(sizes[i]);
		CHECK(aligned(buf[i]));
		if (buf[i])
			memset(buf[i], (int)i, sizes[i]);
	}
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (j = 0; j < i; j++)
			CHECK(buf[i] != buf[j]);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		tpt_data_buf_free(buf[i]);
}

static void test_small_buffers_are_reused_within_their_class(void)
{
	void *a = tpt_data_buf_alloc(4096), *b, *c;

	tpt_data_buf_free(a);
	b = tpt_data_buf_alloc(100);		/* the same class */
	CHECK(a == b);
	c = tpt_data_buf_alloc(5000);		/* the next class up */
	CHECK(c != a);
	CHECK(aligned(c));
	tpt_data_buf_free(b);
	tpt_data_buf_free(c);
}

/* A class's region used up: the next buffers come from glibc, and go
 * back there, while the region's own stay reusable. */
static void test_a_full_class_falls_back_to_glibc(void)
{
	size_t n = TPT_DATA_BUF_CLASS_BYTES / 4096 + 3, i;
	void **buf = calloc(n, sizeof(*buf));
	unsigned int outside = 0;
	void *again;

	CHECK(buf != NULL);
	if (!buf)
		return;
	for (i = 0; i < n; i++) {
		buf[i] = tpt_data_buf_alloc(4096);
		CHECK(aligned(buf[i]));
		if (buf[i])
			memset(buf[i], 0x5a, 4096);
		if (!in_4k_class(buf[i]))
			outside++;
	}
	/* Test 1 and 2 left class 0's buffers free: all of them and the
	 * rest of the region are used before glibc is asked. */
	CHECK_EQ(outside, 3);
	for (i = 0; i < n; i++)
		tpt_data_buf_free(buf[i]);
	again = tpt_data_buf_alloc(4096);
	CHECK(in_4k_class(again));
	tpt_data_buf_free(again);
	free(buf);
}

static void test_large_buffers_are_kept_and_fit_their_size(void)
{
	void *a = tpt_data_buf_alloc(1 << 20), *b, *c;

	CHECK(aligned(a));
	tpt_data_buf_free(a);
	b = tpt_data_buf_alloc((1 << 20) - 4096);
	CHECK(b == a);
	/* Not a buffer more than twice the request's size. */
	tpt_data_buf_free(b);
	c = tpt_data_buf_alloc(256 << 10);
	CHECK(c != a);
	CHECK(aligned(c));
	tpt_data_buf_free(c);
}

int main(void)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
	RUN(test_small_sizes_are_aligned_and_usable);
	RUN(test_small_buffers_are_reused_within_their_class);
	RUN(test_a_full_class_falls_back_to_glibc);
	RUN(test_large_buffers_are_kept_and_fit_their_size);
	UNIT_EXIT();
}
