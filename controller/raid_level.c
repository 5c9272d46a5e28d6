/*
 * The RAID levels there are, and what every level shares
 * (controller/raid_level.h).
 */
#include "controller/raid_level.h"

#include <errno.h>
#include <stddef.h>

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
