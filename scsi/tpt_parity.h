/* Parity schemes behind one ops struct, computed with ISA-L.
 *
 * Buffers handed to a scheme must be aligned to TPT_PARITY_ALIGN and their
 * length a multiple of it: ISA-L's vector code requires both, and our
 * buffer pools allocate that way anyway. */
#ifndef TPT_SCSI_PARITY_H
#define TPT_SCSI_PARITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TPT_PARITY_ALIGN 32

struct tpt_parity_scheme {
	const char *name;
	/* Number of parity blocks per stripe. */
	unsigned int nparity;
	/* Compute parity[0..nparity-1] from data[0..ndata-1], each len bytes.
	 * Returns 0, or -EINVAL on bad counts, length or alignment. */
	int (*encode)(void *const *data, unsigned int ndata,
		      void *const *parity, size_t len);
};

/* RAID-5: P = XOR of all data blocks. */
extern const struct tpt_parity_scheme tpt_parity_raid5;

const struct tpt_parity_scheme *tpt_parity_find(const char *name);

/* dst = XOR of src[0..nsrc-1]; dst may not alias a source.  This is the
 * building block of partial-stripe updates (old parity ^ old data ^ new
 * data).  Returns 0 or -EINVAL. */
int tpt_xor(void *dst, const void *const *src, unsigned int nsrc, size_t len);

/* dst ^= src[0] ^ ... ^ src[nsrc-1]: folding operands into an
 * accumulated result in one pass over memory, as targets do with a READ
 * PARITY command's passes.  Same rules as tpt_xor(); returns 0 or
 * -EINVAL. */
int tpt_xor_acc(void *dst, const void *const *src, unsigned int nsrc,
		size_t len);

/*
 * Weighted folding, for parity that is not a plain XOR (RAID-6's Q, and
 * solving two erasures): dst = 2^e[0]*src[0] ^ ... ^ 2^e[n-1]*src[n-1] in
 * GF(2^8) with the polynomial 11Dh of Linux md's RAID-6 and ISA-L, or
 * with @acc dst ^= that sum.  Exponent 0 is a plain XOR (an all-zero
 * @gf_exp takes the XOR path above), exponents 0-254 name every non-zero
 * element, 255 is refused.  Same rules as tpt_xor() otherwise; with @acc
 * no source may alias dst.  Returns 0 or -EINVAL.
 */
int tpt_gf_fold(void *dst, const void *const *src, const uint8_t *gf_exp,
		unsigned int nsrc, size_t len, bool acc);

/* buf *= 2^@gf_exp in place (0-254; 0 leaves any buffer as it is).
 * Returns 0, or -EINVAL for exponent 255, a bad length or alignment. */
int tpt_gf_scale(void *buf, uint8_t gf_exp, size_t len);

/* 2^@e in that field (e taken modulo 255). */
uint8_t tpt_gf_pow2(unsigned int e);

/* The exponent e (0-254) with 2^e = @x, for @x non-zero; 255 for zero,
 * which has none. */
uint8_t tpt_gf_log2(uint8_t x);

#endif
