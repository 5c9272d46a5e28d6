#include "scsi/tpt_parity.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

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
