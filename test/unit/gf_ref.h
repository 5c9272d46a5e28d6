/*
 * GF(2^8) for the tests (test_tpt_parity.c, the simulators plan_sim.h
 * and test_bl_plan.c): the field of RAID-6's Q and of the targets'
 * weighted passes (docs/protocol.md 3.1), computed bytewise by shift and
 * reduce, independently of the ISA-L code under test.
 */
#ifndef TPT_TEST_UNIT_GF_REF_H
#define TPT_TEST_UNIT_GF_REF_H

#include <stdint.h>

/* Each test uses a part of it. */
#pragma GCC diagnostic ignored "-Wunused-function"

/* a * b modulo 11Dh. */
static uint8_t gf_times(uint8_t a, uint8_t b)
{
	uint8_t p = 0;

	for (; b; b >>= 1) {
		if (b & 1)
			p ^= a;
		a = (uint8_t)((a & 0x80) ? (a << 1) ^ 0x1d : a << 1);
	}
	return p;
}

static uint8_t gf_exp2(unsigned int e)
{
	uint8_t x = 1;

	while (e--)
		x = gf_times(x, 2);
	return x;
}

/* dst ^= 2^gf_exp src, bytewise. */
static void weighted_xor_into(unsigned char *dst, const unsigned char *src,
			      uint64_t len, uint8_t gf_exp)
{
	uint8_t c = gf_exp2(gf_exp);
	uint64_t i;

	for (i = 0; i < len; i++)
		dst[i] ^= gf_times(c, src[i]);
}

/* The exponent e with 2^e = @x, or 255 for zero, which has none. */
static uint8_t gf_log2_ref(uint8_t x)
{
	unsigned int e;

	for (e = 0; e < 255; e++)
		if (gf_exp2(e) == x)
			return (uint8_t)e;
	return 255;
}

static uint8_t gf_inv_ref(uint8_t x)
{
	return gf_exp2((255 - gf_log2_ref(x)) % 255);
}

static void weigh(unsigned char *buf, uint64_t len, uint8_t gf_exp)
{
	uint8_t c = gf_exp2(gf_exp);
	uint64_t i;

	for (i = 0; gf_exp && i < len; i++)
		buf[i] = gf_times(c, buf[i]);
}

#endif
