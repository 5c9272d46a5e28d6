#include "scsi/tpt_parity.h"
#include "test/unit/unit.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

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

int main(void)
{
	RUN(xor_matches_bytewise_reference);
	RUN(raid5_parity_recovers_any_lost_block);
	RUN(xor_acc_folds_in_place);
	RUN(xor_rejects_bad_arguments);
	UNIT_EXIT();
}
