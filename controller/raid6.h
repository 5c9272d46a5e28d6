/*
 * What RAID-6's planners share (raid6.c: layout, the field arithmetic and
 * TPT plans; raid6_baseline.c: Baseline plans); the rest of the
 * controller uses raid6_level (controller/raid_level.h) only.
 *
 * Every unit of a stripe is a linear combination over GF(2^8) of its k =
 * N-2 data units: data unit i is itself, P their XOR, Q the sum of data
 * unit i weighted 2^i (Linux md's RAID-6 and ISA-L's field, polynomial
 * 11Dh).  So any unit comes back from any k others, and every plan below
 * is weights over members' units: what a target's weighted passes
 * (protocol.md 3.1) and the Baseline controller's weighted XORs compute.
 */
#ifndef TPT_CONTROLLER_RAID6_H
#define TPT_CONTROLLER_RAID6_H

#include <stdint.h>

#include "controller/bl_plan.h"
#include "controller/raid_level.h"

/* Parity unit numbers, for raid_level_ops.parity_member(). */
#define R6_P 0
#define R6_Q 1

/* Data unit @i's weight in parity @par: 1 in P, 2^i in Q. */
uint8_t r6_parity_coef(unsigned int par, unsigned int i);

/* Data index of @member in @stripe, or -1 for its P and Q members. */
int r6_data_index(const struct raid_geometry *g, uint64_t stripe,
		  unsigned int member);

/*
 * The weights (field elements; 0: not used) that give the unit @target
 * holds in @stripe from the units of other members, none of them in
 * @unusable (a mask of positions): @w[member].  Data members and P are
 * preferred to Q, so a single lost data unit is the plain XOR of its
 * stripe's other data and P, as in RAID-5.  0, or -ENODATA when fewer
 * than N-2 usable members remain.
 */
int r6_solve(const struct raid_geometry *g, uint64_t stripe,
	     unsigned int target, uint32_t unusable,
	     uint8_t w[RAID_MAX_MEMBERS]);

/* A parity unit's new contents after a write: weights over the members'
 * current units and over the host's new data, by data index. */
struct r6_weights {
	uint8_t media[RAID_MAX_MEMBERS];
	uint8_t host[RAID_MAX_MEMBERS];
};

/*
 * The new unit of parity @par (R6_P, R6_Q) of @stripe when the data
 * units whose indices are in the mask @written take the host's new data,
 * from members not in @unusable: read-modify-write (the parity's own
 * unit, and the old data of the units written) or reconstruct-write (the
 * data units not written), whichever reads fewer units, a lost data
 * unit's old contents replaced by its solution (r6_solve()).  0, or
 * -ENODATA.
 */
int r6_new_parity(const struct raid_geometry *g, uint64_t stripe,
		  unsigned int par, uint32_t written, uint32_t unusable,
		  struct r6_weights *out);

/* -EINVAL unless [@first, @first + @nr) is a run of stripes @g has. */
int r6_stripes_check(const struct raid_geometry *g, uint64_t first,
		     uint32_t nr);

/*
 * Whether a rebuild of stripes [@first, @first + @nr) of @member (or a
 * resync of every stripe's P and Q, RAID_PARITY_MEMBER) can be planned
 * with the positions in @missing gone: -EINVAL for a request no array
 * has, -ENODATA when more than two are gone or, for a resync, any; else
 * 0 and the positions that count in *@out (r6_missing()).
 */
int r6_rebuild_check(const struct raid_geometry *g, uint32_t missing,
		     uint64_t first, uint32_t nr, unsigned int member,
		     uint32_t *out);

/* The positions a rebuild of @member writes, for r6_rebuild_check()'s
 * @missing: @member and those of @also (c->rebuild_also), in order, into
 * @target; their number (none for RAID_PARITY_MEMBER), or -EINVAL for an
 * @also raid_rebuild_also_check() refuses. */
int r6_rebuild_targets(uint32_t missing, unsigned int member, uint32_t also,
		       unsigned int target[RAID_MAX_MEMBERS]);

/* The positions in @missing that count (bits beyond the members do not);
 * -ENODATA when more than two are gone. */
int r6_missing(const struct raid_geometry *g, uint32_t missing,
	       uint32_t *out);

/* raid_level_ops.bl_read, bl_write, bl_rebuild and bl_check of
 * raid6_level. */
int r6_bl_read(const struct bl_plan_ctx *c, uint64_t lba, uint32_t blocks,
	       struct bl_plan *out);
int r6_bl_write(const struct bl_plan_ctx *c, uint64_t lba, uint32_t blocks,
		struct bl_plan *out);
int r6_bl_rebuild(const struct bl_plan_ctx *c, uint64_t first, uint32_t nr,
		  unsigned int member, struct bl_plan *out);
int r6_bl_check(const struct bl_plan_ctx *c, uint64_t first, uint32_t nr,
		struct bl_plan *out);

#endif
