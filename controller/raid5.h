/*
 * What RAID-5's two planners share (raid5.c: layout and TPT plans,
 * raid5_baseline.c: Baseline plans); the rest of the controller uses
 * raid5_level (controller/raid_level.h) only.
 */
#ifndef TPT_CONTROLLER_RAID5_H
#define TPT_CONTROLLER_RAID5_H

#include <stdint.h>

#include "controller/bl_plan.h"
#include "controller/raid_level.h"

/*
 * The one member of the array whose blocks cannot be used in @missing
 * (a mask of positions), in *@F, or -1.  RAID-5 rebuilds one member's
 * blocks from the others; with two gone a stripe's lost block cannot be
 * known, and the request fails rather than return or write anything
 * wrong: -ENODATA.
 */
int r5_missing(uint32_t missing, const struct raid_geometry *g, int *F);

/*
 * As r5_missing() for a read of array blocks [@lba, @lba + @blocks),
 * which needs only the members holding them: with two or more gone, a
 * read that touches none of them is planned without any (*@F = -1).
 */
int r5_read_missing(uint32_t missing, const struct raid_level_ops *l,
		    const struct raid_geometry *g, uint64_t lba,
		    uint32_t blocks, int *F);

/*
 * Whether a rebuild of stripes [@first, @first + @nr) of @member (or of
 * every stripe's parity, RAID_PARITY_MEMBER) can be planned with the
 * positions in @missing gone: -EINVAL for a request no array has,
 * -ENODATA when a member besides @member is missing (RAID-5 rebuilds one
 * member from all the others), else 0.
 */
int r5_rebuild_check(const struct raid_geometry *g, uint64_t per_stripe,
		     uint32_t missing, uint64_t first, uint32_t nr,
		     unsigned int member);

/* raid_level_ops.bl_read, bl_write, bl_rebuild and bl_check of
 * raid5_level. */
int r5_bl_read(const struct bl_plan_ctx *c, uint64_t lba, uint32_t blocks,
	       struct bl_plan *out);
int r5_bl_write(const struct bl_plan_ctx *c, uint64_t lba, uint32_t blocks,
		struct bl_plan *out);
int r5_bl_rebuild(const struct bl_plan_ctx *c, uint64_t first, uint32_t nr,
		  unsigned int member, struct bl_plan *out);
int r5_bl_check(const struct bl_plan_ctx *c, uint64_t first, uint32_t nr,
		struct bl_plan *out);

#endif
