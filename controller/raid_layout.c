#include "controller/raid_layout.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/*
 * Left-symmetric RAID-5 as md places it: parity of stripe s on member
 * N-1 - (s mod N), walking backwards one member per stripe; data unit d
 * on the member d+1 places after the parity.  Stripe s covers member LBAs
 * [s * unit, (s + 1) * unit) on every member.
 */

static unsigned int r5_parity(const struct raid_geometry *g, uint64_t stripe)
{
	return g->members - 1 - (unsigned int)(stripe % g->members);
}

static uint64_t r5_array_blocks(const struct raid_geometry *g)
{
	return (uint64_t)(g->members - 1) * g->member_blocks;
}

static unsigned int r5_parity_member(const struct raid_geometry *g,
				     uint64_t stripe, unsigned int i)
{
	(void)i;
	return r5_parity(g, stripe);
}

static unsigned int r5_data_member(const struct raid_geometry *g,
				   uint64_t stripe, unsigned int data_index)
{
	return (r5_parity(g, stripe) + 1 + data_index) % g->members;
}

static void r5_map(const struct raid_geometry *g, uint64_t array_lba,
		   struct raid_chunk *out)
{
	uint64_t stripe_blocks = (uint64_t)(g->members - 1) * g->unit_blocks;
	uint64_t in_stripe = array_lba % stripe_blocks;

	out->stripe = array_lba / stripe_blocks;
	out->data_index = (unsigned int)(in_stripe / g->unit_blocks);
	out->member = r5_data_member(g, out->stripe, out->data_index);
	out->member_lba = out->stripe * g->unit_blocks +
			  in_stripe % g->unit_blocks;
}

static int r5_unmap(const struct raid_geometry *g, unsigned int member,
		    uint64_t member_lba, uint64_t *array_lba)
{
	uint64_t stripe = member_lba / g->unit_blocks;
	unsigned int parity, data_index;

	if (member >= g->members || member_lba >= g->member_blocks)
		return -EINVAL;
	parity = r5_parity(g, stripe);
	if (member == parity)
		return -ENOENT;
	data_index = (member + g->members - parity - 1) % g->members;
	*array_lba = (stripe * (g->members - 1) + data_index) * g->unit_blocks +
		     member_lba % g->unit_blocks;
	return 0;
}

const struct raid_layout_ops raid5_left_symmetric = {
	.name = "raid5",
	.nr_parity = 1,
	.min_members = 3,
	.max_members = RAID_MAX_MEMBERS,
	.array_blocks = r5_array_blocks,
	.map = r5_map,
	.parity_member = r5_parity_member,
	.data_member = r5_data_member,
	.unmap = r5_unmap,
};

static const struct raid_layout_ops *const raid_layouts[] = {
	&raid5_left_symmetric,
};

const struct raid_layout_ops *raid_layout_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(raid_layouts) / sizeof(raid_layouts[0]); i++)
		if (!strcmp(raid_layouts[i]->name, name))
			return raid_layouts[i];
	return NULL;
}

int raid_geometry_check(const struct raid_layout_ops *layout,
			const struct raid_geometry *g)
{
	if (g->members < layout->min_members ||
	    g->members > layout->max_members || !g->unit_blocks ||
	    !g->member_blocks || g->member_blocks % g->unit_blocks)
		return -EINVAL;
	/* array_blocks() multiplies by the data members. */
	if (g->member_blocks > UINT64_MAX / g->members)
		return -EINVAL;
	return 0;
}
