#include "scsi/tpt_parity.h"
#include "test/unit/unit.h"
#include "test/unit/gf_ref.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LEN 4096

static unsigned char *block(unsigned int seed)
{
	unsigned char *b = aligned_alloc(TPT_PARITY_ALIGN, LEN);
	unsigned int i;

	for (i = 0; i < LEN; i++)
		b[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 5));
	return b;
}

static void xor_matches_bytewise_reference(void)
{
	unsigned char *src[5], *dst = block(0), expect[LEN];
	unsigned int i, j;

	for (i = 0; i < 5; i++)
		src[i] = block(i + 1);
	for (j = 0; j < LEN; j++) {
		expect[j] = 0;
		for (i = 0; i < 5; i++)
			expect[j] ^= src[i][j];
	}
	CHECK_EQ(tpt_xor(dst, (const void *const *)src, 5, LEN), 0);
	CHECK_MEM(dst, expect, LEN);
	for (i = 0; i < 5; i++)
		free(src[i]);
	free(dst);
}

static void raid5_parity_recovers_any_lost_block(void)
{
	const struct tpt_parity_scheme *s = tpt_parity_find("raid5");
	unsigned char *data[4], *p = block(0), *rebuilt = block(0);
	const void *survivors[4];
	unsigned int lost, i, n;

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ(s->nparity, 1);
	for (i = 0; i < 4; i++)
		data[i] = block(10 + i);
	CHECK_EQ(s->encode((void *const *)data, 4, (void *const *)&p, LEN), 0);
	for (lost = 0; lost < 4; lost++) {
		n = 0;
		for (i = 0; i < 4; i++)
			if (i != lost)
				survivors[n++] = data[i];
		survivors[n++] = p;
		CHECK_EQ(tpt_xor(rebuilt, survivors, n, LEN), 0);
		CHECK_MEM(rebuilt, data[lost], LEN);
	}
	for (i = 0; i < 4; i++)
		free(data[i]);
	free(p);
	free(rebuilt);
}

static void xor_acc_folds_in_place(void)
{
	unsigned char *acc = block(3), *src = block(4), *src2 = block(5);
	unsigned char expect[LEN];
	const void *one[1] = { src }, *two[2] = { src, src2 };
	const void *self[2] = { src, acc }, *misaligned[1] = { src + 1 };
	unsigned int j;

	for (j = 0; j < LEN; j++)
		expect[j] = acc[j] ^ src[j];
	CHECK_EQ(tpt_xor_acc(acc, one, 1, LEN), 0);
	CHECK_MEM(acc, expect, LEN);
	/* Folding the same operand again restores the original. */
	CHECK_EQ(tpt_xor_acc(acc, one, 1, LEN), 0);
	for (j = 0; j < LEN; j++)
		expect[j] ^= src[j];
	CHECK_MEM(acc, expect, LEN);
	/* Several operands in one call: the same as one at a time. */
	for (j = 0; j < LEN; j++)
		expect[j] ^= src[j] ^ src2[j];
	CHECK_EQ(tpt_xor_acc(acc, two, 2, LEN), 0);
	CHECK_MEM(acc, expect, LEN);
	CHECK_EQ(tpt_xor_acc(acc, self, 2, LEN), -EINVAL);
	CHECK_EQ(tpt_xor_acc(acc, one, 0, LEN), -EINVAL);
	CHECK_EQ(tpt_xor_acc(acc, one, 1, LEN - 1), -EINVAL);
	CHECK_EQ(tpt_xor_acc(acc + 1, one, 1, 64), -EINVAL);
	CHECK_EQ(tpt_xor_acc(acc, misaligned, 1, 64), -EINVAL);
	free(acc);
	free(src);
	free(src2);
}

static void xor_rejects_bad_arguments(void)
{
	unsigned char *a = block(1), *b = block(2), *d = block(3);
	const void *src[2] = { a, b };
	const void *misaligned[2] = { a + 1, b };

	CHECK_EQ(tpt_xor(d, src, 0, LEN), -EINVAL);
	CHECK_EQ(tpt_xor(d, src, 2, LEN - 1), -EINVAL);
	CHECK_EQ(tpt_xor(d, misaligned, 2, 64), -EINVAL);
	CHECK_EQ(tpt_xor(a, src, 2, LEN), -EINVAL);
	CHECK(tpt_parity_find("raid7") == NULL);
	free(a);
	free(b);
	free(d);
}

static void gf_fold_matches_bytewise_reference(void)
{
	static const uint8_t exps[4] = { 0, 1, 77, 254 };
	unsigned char *src[4], *dst = block(0), expect[LEN], before[LEN];
	unsigned int i, j;

	CHECK_EQ(tpt_gf_pow2(0), 1);
	CHECK_EQ(tpt_gf_pow2(8), 0x1d);
	CHECK_EQ(tpt_gf_pow2(255), 1);
	for (i = 0; i < 255; i++) {
		CHECK_EQ(tpt_gf_pow2(i), gf_exp2(i));
		CHECK_EQ(tpt_gf_log2(gf_exp2(i)), i);
	}
	CHECK_EQ(tpt_gf_log2(0), 255);
	for (i = 0; i < 4; i++)
		src[i] = block(i + 20);
	for (j = 0; j < LEN; j++) {
		expect[j] = 0;
		for (i = 0; i < 4; i++)
			expect[j] ^= gf_times(gf_exp2(exps[i]), src[i][j]);
	}
	CHECK_EQ(tpt_gf_fold(dst, (const void *const *)src, exps, 4, LEN,
			     false), 0);
	CHECK_MEM(dst, expect, LEN);
	/* Accumulating folds the weighted sum into what dst held. */
	memcpy(before, dst, LEN);
	CHECK_EQ(tpt_gf_fold(dst, (const void *const *)src, exps, 4, LEN,
			     true), 0);
	for (j = 0; j < LEN; j++)
		expect[j] ^= before[j];
	CHECK_MEM(dst, expect, LEN);
	/* Scaling in place, as a weighted operand is. */
	memcpy(before, dst, LEN);
	CHECK_EQ(tpt_gf_scale(dst, 200, LEN), 0);
	for (j = 0; j < LEN; j++)
		CHECK_EQ(dst[j], gf_times(gf_exp2(200), before[j]));
	CHECK_EQ(tpt_gf_scale(dst, 0, LEN), 0);
	CHECK_EQ(tpt_gf_scale(dst, 255, LEN), -EINVAL);
	CHECK_EQ(tpt_gf_scale(dst + 1, 1, 64), -EINVAL);
	CHECK_EQ(tpt_gf_scale(dst, 1, LEN - 1), -EINVAL);
	for (i = 0; i < 4; i++)
		free(src[i]);
	free(dst);
}

/*
 * P = D0 ^ D1 ^ ..., Q = 2^0 D0 ^ 2^1 D1 ^ ... (RAID-6): any two lost
 * data blocks come back as one weighted fold each over the survivors, P
 * and Q.  From P ^ Psurv = Dx ^ Dy and Q ^ Qsurv = 2^x Dx ^ 2^y Dy:
 * Dx = c 2^y P ^ c Q ^ sum over survivors i of c (2^y ^ 2^i) Di, with
 * c = 1 / (2^x ^ 2^y).  This is the arithmetic a controller plans and
 * the targets' weighted passes carry out.
 */
static void raid6_weights_recover_two_lost_blocks(void)
{
	enum { NDATA = 5 };
	unsigned char *data[NDATA], *p = block(0), *q = block(0);
	unsigned char *rebuilt = block(0);
	const void *src[NDATA + 2];
	uint8_t exps[NDATA + 2], zero[NDATA] = { 0 };
	unsigned int x, y, i, n;

	for (i = 0; i < NDATA; i++) {
		data[i] = block(40 + i);
		exps[i] = (uint8_t)i;
	}
	CHECK_EQ(tpt_gf_fold(p, (const void *const *)data, zero, NDATA, LEN,
			     false), 0);
	CHECK_EQ(tpt_gf_fold(q, (const void *const *)data, exps, NDATA, LEN,
			     false), 0);
	for (x = 0; x < NDATA; x++) {
		for (y = 0; y < NDATA; y++) {
			uint8_t c, gy = gf_exp2(y);

			if (x == y)
				continue;
			c = gf_inv_ref(gf_exp2(x) ^ gy);
			n = 0;
			src[n] = p;
			exps[n++] = gf_log2_ref(gf_times(c, gy));
			src[n] = q;
			exps[n++] = gf_log2_ref(c);
			for (i = 0; i < NDATA; i++) {
				if (i == x || i == y)
					continue;
				src[n] = data[i];
				exps[n++] = gf_log2_ref(gf_times(c, gy ^
							     gf_exp2(i)));
			}
			CHECK_EQ(tpt_gf_fold(rebuilt, src, exps, n, LEN,
					     false), 0);
			CHECK_MEM(rebuilt, data[x], LEN);
		}
	}
	for (i = 0; i < NDATA; i++)
		free(data[i]);
	free(p);
	free(q);
	free(rebuilt);
}

static void gf_fold_rejects_bad_arguments(void)
{
	unsigned char *a = block(1), *b = block(2), *d = block(3);
	const void *src[2] = { a, b }, *self[2] = { a, d };
	const uint8_t exps[2] = { 3, 0 }, reserved[2] = { 0, 255 };

	CHECK_EQ(tpt_gf_fold(d, src, reserved, 2, LEN, false), -EINVAL);
	CHECK_EQ(tpt_gf_fold(d, src, exps, 0, LEN, false), -EINVAL);
	CHECK_EQ(tpt_gf_fold(d, src, exps, 2, LEN - 1, false), -EINVAL);
	CHECK_EQ(tpt_gf_fold(d + 1, src, exps, 2, 64, false), -EINVAL);
	CHECK_EQ(tpt_gf_fold(d, self, exps, 2, LEN, true), -EINVAL);
	free(a);
	free(b);
	free(d);
}

int main(void)
{
	RUN(gf_fold_matches_bytewise_reference);
	RUN(raid6_weights_recover_two_lost_blocks);
	RUN(gf_fold_rejects_bad_arguments);
	RUN(xor_matches_bytewise_reference);
	RUN(raid5_parity_recovers_any_lost_block);
	RUN(xor_acc_folds_in_place);
	RUN(xor_rejects_bad_arguments);
	UNIT_EXIT();
}
