/* Taking structured values from a fuzzer's input, front to back: what the
 * fuzzers that build their own structures (rather than decode the bytes
 * as wire data) read their fields with. */
#ifndef TPT_FUZZ_READER_H
#define TPT_FUZZ_READER_H

#include <stddef.h>
#include <stdint.h>

struct reader {
	const uint8_t *p;
	size_t left;
};

/* The next @n bytes, big-endian; zeros once the input is used up. */
static inline uint64_t take(struct reader *r, unsigned int n)
{
	uint64_t v = 0;

	while (n--) {
		v = v << 8 | (r->left ? *r->p : 0);
		if (r->left) {
			r->p++;
			r->left--;
		}
	}
	return v;
}

static inline void take_bytes(struct reader *r, uint8_t *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = (uint8_t)take(r, 1);
}

#endif
