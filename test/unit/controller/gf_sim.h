/*
 * GF(2^8) for the simulators (plan_sim.h, test_bl_plan.c): the field of
 * RAID-6's Q and of the targets' weighted passes (docs/protocol.md 3.1),
 * computed bytewise by shift and reduce, independently of the ISA-L
 * code under test.
 */
#ifndef TPT_TEST_UNIT_CONTROLLER_GF_SIM_H
#define TPT_TEST_UNIT_CONTROLLER_GF_SIM_H

#include <stdint.h>

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

static void weigh(unsigned char *buf, uint64_t len, uint8_t gf_exp)
{
	uint8_t c = gf_exp2(gf_exp);
	uint64_t i;

	for (i = 0; gf_exp && i < len; i++)
		buf[i] = gf_times(c, buf[i]);
}

#endif
