#include "controller/raid_level.h"
#include "test/unit/unit.h"

#include <errno.h>
#include <stdint.h>

static uint64_t rng = 0x243f6a8885a308d3;

/* splitmix64: fixed seed, so a failure replays. */
static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
	return z ^ (z >> 31);
}

/*
 * md's left-symmetric table, one row per stripe: the parity member, then
 * the members of data units 0..N-2.  For N=4 this is md's picture
 *
 *	D0  D1  D2  P
 *	D4  D5  P   D3
 *	D8  P   D6  D7
 *	P   D9  D10 D11
 *
 * (column = member, Dn = array unit n).
 */
static const unsigned int md_n3[6][3] = {
	{ 2, 0, 1 }, { 1, 2, 0 }, { 0, 1, 2 },
	{ 2, 0, 1 }, { 1, 2, 0 }, { 0, 1, 2 },
};

static const unsigned int md_n4[8][4] = {
	{ 3, 0, 1, 2 }, { 2, 3, 0, 1 }, { 1, 2, 3, 0 }, { 0, 1, 2, 3 },
	{ 3, 0, 1, 2 }, { 2, 3, 0, 1 }, { 1, 2, 3, 0 }, { 0, 1, 2, 3 },
};

static const unsigned int md_n5[10][5] = {
	{ 4, 0, 1, 2, 3 }, { 3, 4, 0, 1, 2 }, { 2, 3, 4, 0, 1 },
	{ 1, 2, 3, 4, 0 }, { 0, 1, 2, 3, 4 },
	{ 4, 0, 1, 2, 3 }, { 3, 4, 0, 1, 2 }, { 2, 3, 4, 0, 1 },
	{ 1, 2, 3, 4, 0 }, { 0, 1, 2, 3, 4 },
};

static void check_md_table(unsigned int n, const unsigned int *table)
{
	const struct raid_level_ops *l = &raid5_level;
	struct raid_geometry g = {
		.members = n, .unit_blocks = 16, .member_blocks = 16 * 64,
	};
	unsigned int s, d, off;

	for (s = 0; s < 2 * n; s++) {
		const unsigned int *row = table + s * n;

		CHECK_EQ(l->parity_member(&g, s, 0), row[0]);
		for (d = 0; d < n - 1; d++) {
			CHECK_EQ(l->data_member(&g, s, d), row[1 + d]);
			for (off = 0; off < 16; off += 5) {
				struct raid_chunk ch;

				l->map(&g, (s * (n - 1) + d) * 16 + off, &ch);
				CHECK_EQ(ch.stripe, s);
				CHECK_EQ(ch.member, row[1 + d]);
				CHECK_EQ(ch.member_lba, s * 16 + off);
				CHECK_EQ(ch.data_index, d);
			}
		}
	}
}

static void md_left_symmetric_tables(void)
{
	check_md_table(3, &md_n3[0][0]);
	check_md_table(4, &md_n4[0][0]);
	check_md_table(5, &md_n5[0][0]);
}

static void map_and_unmap_agree(void)
{
	const struct raid_level_ops *l = &raid5_level;
	unsigned int n, i;

	for (n = 3; n <= RAID_MAX_MEMBERS; n++) {
		struct raid_geometry g = {
			.members = n,
			.unit_blocks = 1 + (uint32_t)(rnd() % 300),
		};

		g.member_blocks = g.unit_blocks * (1 + rnd() % 5000);
		for (i = 0; i < 2000; i++) {
			uint64_t lba = rnd() % l->array_blocks(&g), back = ~0ull;
			struct raid_chunk ch;

			l->map(&g, lba, &ch);
			CHECK(ch.member < n);
			CHECK(ch.member_lba < g.member_blocks);
			CHECK(ch.data_index < n - 1);
			CHECK(ch.member != l->parity_member(&g, ch.stripe, 0));
			CHECK_EQ(ch.member_lba / g.unit_blocks, ch.stripe);
			CHECK_EQ(l->unmap(&g, ch.member, ch.member_lba, &back), 0);
			CHECK_EQ(back, lba);
		}
	}
}

/* Every member block is exactly one array block or a parity block, one
 * parity block per stripe row. */
static void unmap_covers_the_array_once(void)
{
	const struct raid_level_ops *l = &raid5_level;
	struct raid_geometry g = {
		.members = 5, .unit_blocks = 3, .member_blocks = 3 * 7,
	};
	unsigned char seen[4 * 3 * 7] = { 0 };
	unsigned int m, parity;
	uint64_t lba, row, a;

	CHECK_EQ(l->array_blocks(&g), sizeof(seen));
	for (row = 0; row < g.member_blocks; row++) {
		parity = 0;
		for (m = 0; m < g.members; m++) {
			int r = l->unmap(&g, m, row, &a);

			if (r == -ENOENT) {
				parity++;
				CHECK_EQ(m, l->parity_member(&g, row / 3, 0));
				continue;
			}
			CHECK_EQ(r, 0);
			CHECK(a < sizeof(seen));
			if (a < sizeof(seen))
				seen[a]++;
		}
		CHECK_EQ(parity, 1);
	}
	for (lba = 0; lba < sizeof(seen); lba++)
		CHECK_EQ(seen[lba], 1);
	CHECK_EQ(l->unmap(&g, 5, 0, &a), -EINVAL);
	CHECK_EQ(l->unmap(&g, 0, g.member_blocks, &a), -EINVAL);
}

static void array_blocks_and_lookup(void)
{
	const struct raid_level_ops *l = raid_level_find(5);
	struct raid_geometry g = {
		.members = 6, .unit_blocks = 128, .member_blocks = 128 * 1000,
	};

	CHECK(l == &raid5_level);
	CHECK(raid_level_find(7) == NULL);
	CHECK(raid_level_find(0) == NULL);
	if (!l)
		return;
	CHECK_EQ(l->nr_parity(&g), 1);
	CHECK_EQ(l->min_members, 3);
	CHECK_EQ(l->max_members, 32);
	CHECK_EQ(l->array_blocks(&g), 5 * 128 * 1000);
	g.members = 32;
	CHECK_EQ(l->array_blocks(&g), 31 * 128 * 1000);
}

static void geometry_checks(void)
{
	const struct raid_level_ops *l = &raid5_level;
	struct raid_geometry ok = {
		.members = 3, .unit_blocks = 8, .member_blocks = 64,
	}, g;

	CHECK_EQ(raid_geometry_check(l, &ok), 0);
	g = ok;
	g.members = 2;
	CHECK_EQ(raid_geometry_check(l, &g), -EINVAL);
	g.members = 33;
	CHECK_EQ(raid_geometry_check(l, &g), -EINVAL);
	g.members = 32;
	CHECK_EQ(raid_geometry_check(l, &g), 0);
	g = ok;
	g.unit_blocks = 0;
	CHECK_EQ(raid_geometry_check(l, &g), -EINVAL);
	g = ok;
	g.member_blocks = 60;
	CHECK_EQ(raid_geometry_check(l, &g), -EINVAL);
	g.member_blocks = 0;
	CHECK_EQ(raid_geometry_check(l, &g), -EINVAL);
	g.unit_blocks = 1;
	g.member_blocks = UINT64_MAX;
	CHECK_EQ(raid_geometry_check(l, &g), -EINVAL);
}

int main(void)
{
	RUN(md_left_symmetric_tables);
	RUN(map_and_unmap_agree);
	RUN(unmap_covers_the_array_once);
	RUN(array_blocks_and_lookup);
	RUN(geometry_checks);
	UNIT_EXIT();
}
