/*
 * The RAID levels there are, and what every level shares
 * (controller/raid_level.h).
 */
#include "controller/raid_level.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static const struct raid_level_ops *const raid_levels[] = {
	&raid1_level,
	&raid5_level,
	&raid6_level,
};

const struct raid_level_ops *raid_level_find(unsigned int level)
{
	size_t i;

	for (i = 0; i < sizeof(raid_levels) / sizeof(raid_levels[0]); i++)
		if (raid_levels[i]->level == level)
			return raid_levels[i];
	return NULL;
}

int raid_geometry_check(const struct raid_level_ops *level,
			const struct raid_geometry *g)
{
	if (g->members < level->min_members ||
	    g->members > level->max_members || !g->unit_blocks ||
	    !g->member_blocks || g->member_blocks % g->unit_blocks)
		return -EINVAL;
	/* array_blocks() multiplies by the data members. */
	if (g->member_blocks > UINT64_MAX / g->members)
		return -EINVAL;
	return 0;
}

uint64_t raid_stripe_data_blocks(const struct raid_level_ops *level,
				 const struct raid_geometry *g)
{
	return (uint64_t)(g->members - level->nr_parity(g)) * g->unit_blocks;
}

bool raid_stripes_in_range(const struct raid_geometry *g, uint64_t first,
			   uint32_t nr)
{
	uint64_t stripes = g->member_blocks / g->unit_blocks;

	return nr && first <= stripes && nr <= stripes - first;
}

uint64_t raid_check_bytes(const struct raid_level_ops *level,
			  const struct raid_geometry *g, uint32_t block_size,
			  uint32_t nr)
{
	return (uint64_t)level->nr_parity(g) * nr * g->unit_blocks *
	       block_size;
}

bool raid_check_mismatch(const struct raid_level_ops *level,
			 const struct raid_geometry *g, uint32_t block_size,
			 const uint8_t *buf, uint32_t nr, uint32_t s)
{
	uint64_t unit = (uint64_t)g->unit_blocks * block_size;
	unsigned int i;

	for (i = 0; i < level->nr_parity(g); i++)
		if (!raid_unit_zero(buf + ((uint64_t)i * nr + s) * unit, unit))
			return true;
	return false;
}

bool raid_unit_zero(const uint8_t *buf, uint64_t len)
{
	/* Its first byte, and each the same as the one before. */
	return !len || (!buf[0] && !memcmp(buf, buf + 1, len - 1));
}

int raid_rebuild_also_check(uint32_t also, uint32_t missing,
			    unsigned int member)
{
	if (!also)
		return 0;
	if (member >= 32 || (also & (1u << member)) || (also & ~missing))
		return -EINVAL;
	return 0;
}

int raid_check_locate(const struct raid_level_ops *level,
		      const struct raid_geometry *g, uint32_t block_size,
		      const uint8_t *buf, uint32_t nr, uint32_t s,
		      uint64_t stripe)
{
	uint64_t unit = (uint64_t)g->unit_blocks * block_size;
	const uint8_t *syn[RAID_MAX_MEMBERS];
	unsigned int i;

	if (!level->check_locate)
		return -1;
	for (i = 0; i < level->nr_parity(g); i++)
		syn[i] = buf + ((uint64_t)i * nr + s) * unit;
	return level->check_locate(g, stripe, syn, unit);
}
