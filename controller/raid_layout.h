/*
 * RAID layouts: where every array block lives on the members.
 *
 * The planner asks a layout only where blocks are, never how parity is
 * computed, so a layout sits behind an ops struct and RAID-1 or RAID-6
 * can be added as further ops without touching the planner's callers.
 *
 * Every layout keeps stripe unit n of a stripe at the same LBA on every
 * member: the slot header check of docs/protocol.md 5.1 derives the LBA a
 * reader expects from its own command, which only works that way (11,
 * "Members with different layouts").
 */
#ifndef TPT_CONTROLLER_RAID_LAYOUT_H
#define TPT_CONTROLLER_RAID_LAYOUT_H

#include <stdint.h>

/* The most members any layout accepts; sizes the planner's tables. */
#define RAID_MAX_MEMBERS 32

struct raid_geometry {
	unsigned int members;		/* N, 3..32 for RAID-5 */
	uint32_t unit_blocks;		/* stripe unit, in logical blocks */
	uint64_t member_blocks;		/* usable blocks per member, a multiple of unit_blocks */
};

struct raid_chunk {			/* where an array block lives */
	uint64_t stripe;
	unsigned int member;
	uint64_t member_lba;
	unsigned int data_index;	/* 0..N-2 within the stripe */
};

struct raid_layout_ops {
	const char *name;		/* "raid5" */
	unsigned int nr_parity;
	unsigned int min_members, max_members;
	uint64_t (*array_blocks)(const struct raid_geometry *g);
	/* @array_lba must be below array_blocks(). */
	void (*map)(const struct raid_geometry *g, uint64_t array_lba,
		    struct raid_chunk *out);
	/* Parity block @i (0..nr_parity-1) of @stripe. */
	unsigned int (*parity_member)(const struct raid_geometry *g,
				      uint64_t stripe, unsigned int i);
	unsigned int (*data_member)(const struct raid_geometry *g,
				    uint64_t stripe, unsigned int data_index);
	/*
	 * The inverse of map(), for rebuild and scrub, which walk members
	 * rather than the array: 0 and the array LBA of a data block,
	 * -ENOENT for a parity block, -EINVAL outside the member.
	 */
	int (*unmap)(const struct raid_geometry *g, unsigned int member,
		     uint64_t member_lba, uint64_t *array_lba);
};

/*
 * Linux md's default RAID-5 layout.  Data units follow the parity unit
 * round the members, so any N-1 consecutive units of the array lie on N-1
 * different members and a sequential read keeps every member busy,
 * parity members included.
 */
extern const struct raid_layout_ops raid5_left_symmetric;

const struct raid_layout_ops *raid_layout_find(const char *name);

/*
 * 0 if @g suits @layout: a member count it supports, a non-zero unit, and
 * members holding whole stripes with an array size that fits 64 bits.
 * -EINVAL otherwise.  The ops themselves assume a checked geometry.
 */
int raid_geometry_check(const struct raid_layout_ops *layout,
			const struct raid_geometry *g);

#endif
