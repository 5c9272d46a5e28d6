#include "scsi/tpt_parity.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

/* xor_gen takes at most this many vectors on the stack-free path we use. */
#define TPT_XOR_MAX_SRC 64

static int aligned(const void *p)
{
	return ((uintptr_t)p % TPT_PARITY_ALIGN) == 0;
}

int tpt_xor(void *dst, const void *const *src, unsigned int nsrc, size_t len)
{
	void *vec[TPT_XOR_MAX_SRC + 1];
	unsigned int i;

	if (!nsrc || nsrc > TPT_XOR_MAX_SRC || len > INT_MAX ||
	    len % TPT_PARITY_ALIGN || !aligned(dst))
		return -EINVAL;
	for (i = 0; i < nsrc; i++) {
		if (!aligned(src[i]) || src[i] == dst)
			return -EINVAL;
		/* ISA-L's API is not const-correct; it only reads sources. */
		vec[i] = (void *)src[i];
	}
	if (nsrc == 1) {
		memcpy(dst, src[0], len);
		return 0;
	}
	vec[nsrc] = dst;
	return xor_gen((int)nsrc + 1, (int)len, vec) ? -EINVAL : 0;
}

int tpt_xor_acc(void *dst, const void *const *src, unsigned int nsrc,
		size_t len)
{
	void *vec[TPT_XOR_MAX_SRC + 2];
	unsigned int i;

	if (!nsrc || nsrc > TPT_XOR_MAX_SRC || len > INT_MAX ||
	    len % TPT_PARITY_ALIGN || !aligned(dst))
		return -EINVAL;
	for (i = 0; i < nsrc; i++) {
		if (!aligned(src[i]) || src[i] == dst)
			return -EINVAL;
		vec[i] = (void *)src[i];
	}
	/* xor_gen reads every source of a vector-sized block before it
	 * stores that block of the destination, so the destination may be
	 * one of the sources; test_tpt_parity checks this holds. */
	vec[nsrc] = dst;
	vec[nsrc + 1] = dst;
	return xor_gen((int)nsrc + 2, (int)len, vec) ? -EINVAL : 0;
}

/* Powers of 2 and their logarithms, built once: tpt_gf_fold() weighs
 * every pass of every stretch it folds. */
static uint8_t gf_exp_table[255], gf_log_table[256];
static pthread_once_t gf_tables_once = PTHREAD_ONCE_INIT;

static void gf_tables_init(void)
{
	uint8_t x = 1;
	unsigned int e;

	gf_log_table[0] = 255;
	for (e = 0; e < 255; e++) {
		gf_exp_table[e] = x;
		gf_log_table[x] = (uint8_t)e;
		x = (uint8_t)gf_mul(x, 2);
	}
}

uint8_t tpt_gf_pow2(unsigned int e)
{
	pthread_once(&gf_tables_once, gf_tables_init);
	return gf_exp_table[e % 255];
}

uint8_t tpt_gf_log2(uint8_t x)
{
	pthread_once(&gf_tables_once, gf_tables_init);
	return gf_log_table[x];
}

int tpt_gf_fold(void *dst, const void *const *src, const uint8_t *gf_exp,
		unsigned int nsrc, size_t len, bool acc)
{
	unsigned char coef[TPT_XOR_MAX_SRC], tbls[32 * TPT_XOR_MAX_SRC];
	unsigned char *vec[TPT_XOR_MAX_SRC];
	bool weighted = false;
	unsigned int i;

	if (!nsrc || nsrc > TPT_XOR_MAX_SRC || len > INT_MAX ||
	    len % TPT_PARITY_ALIGN || !aligned(dst))
		return -EINVAL;
	for (i = 0; i < nsrc; i++) {
		if (gf_exp[i] == 255 || !aligned(src[i]) || src[i] == dst)
			return -EINVAL;
		weighted |= gf_exp[i] != 0;
		coef[i] = tpt_gf_pow2(gf_exp[i]);
		vec[i] = (unsigned char *)src[i];
	}
	if (!weighted)
		return acc ? tpt_xor_acc(dst, src, nsrc, len) :
			     tpt_xor(dst, src, nsrc, len);
	if (!acc) {
		/* One dot product over every source, written once. */
		unsigned char *out = dst;

		ec_init_tables((int)nsrc, 1, coef, tbls);
		ec_encode_data((int)len, (int)nsrc, 1, tbls, vec, &out);
		return 0;
	}
	/* gf_vect_mad is ISA-L's dst ^= c * src, one source at a time. */
	for (i = 0; i < nsrc; i++) {
		ec_init_tables(1, 1, &coef[i], tbls);
		gf_vect_mad((int)len, 1, 0, tbls, vec[i], dst);
	}
	return 0;
}

int tpt_gf_scale(void *buf, uint8_t gf_exp, size_t len)
{
	unsigned char tbl[32];

	if (!gf_exp)
		return 0;
	if (gf_exp == 255 || len > INT_MAX || len % TPT_PARITY_ALIGN ||
	    !aligned(buf))
		return -EINVAL;
	/* gf_vect_mul loads each vector before it stores it: in place is
	 * safe (test_tpt_parity checks it). */
	gf_vect_mul_init(tpt_gf_pow2(gf_exp), tbl);
	return gf_vect_mul((int)len, tbl, buf, buf) ? -EINVAL : 0;
}

static int raid5_encode(void *const *data, unsigned int ndata,
			void *const *parity, size_t len)
{
	return tpt_xor(parity[0], (const void *const *)data, ndata, len);
}

const struct tpt_parity_scheme tpt_parity_raid5 = {
	.name = "raid5",
	.nparity = 1,
	.encode = raid5_encode,
};

static const struct tpt_parity_scheme *const schemes[] = {
	&tpt_parity_raid5,
};

const struct tpt_parity_scheme *tpt_parity_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (!strcmp(schemes[i]->name, name))
			return schemes[i];
	return NULL;
}
