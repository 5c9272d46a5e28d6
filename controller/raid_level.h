/*
 * RAID levels: where every array block lives on the members, and how a
 * host request becomes member commands in each controller mode.
 *
 * One ops struct per level and its files (raid5.c, raid5_baseline.c),
 * in the manner of SPDK's raid_bdev_module: the controller picks the
 * level by the array spec's raid= and never asks more of it than this
 * struct says.
 * Every callback is pure and synchronous: no I/O, no allocation but the
 * plan it returns (and, in TPT mode, the slots the plan takes).
 *
 * Every level keeps stripe unit n of a stripe at the same LBA on every
 * member: the slot header check of docs/protocol.md 5.1 derives the LBA a
 * reader expects from its own command, which only works that way (11,
 * "Members with different layouts").
 *
 * Members are named by their position in the layout, 0..N-1; which box
 * serves a position is the controller's business, not the level's.
 */
#ifndef TPT_CONTROLLER_RAID_LEVEL_H
#define TPT_CONTROLLER_RAID_LEVEL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* The most members any level accepts; sizes the planners' tables. */
#define RAID_MAX_MEMBERS 32

struct raid_geometry {
	unsigned int members;		/* N */
	uint32_t unit_blocks;		/* stripe unit, in logical blocks */
	uint64_t member_blocks;		/* usable blocks per member, a multiple of unit_blocks */
};

struct raid_chunk {			/* where an array block lives */
	uint64_t stripe;
	unsigned int member;
	uint64_t member_lba;
	unsigned int data_index;	/* 0..N-1-nr_parity() within the stripe */
};

/* Rebuild: each stripe's parity unit rather than one member's units. */
#define RAID_PARITY_MEMBER UINT_MAX

struct tpt_plan_ctx;
struct tpt_plan;
struct bl_plan_ctx;
struct bl_plan;

struct raid_level_ops {
	const char *name;		/* "raid5": logs, tgtadm show */
	unsigned int level;		/* raid= of the array spec */
	unsigned int min_members, max_members;
	/*
	 * Redundancy units per stripe: the members' worth of boxes it
	 * survives losing (a mirror's copies count as parity: each is the
	 * XOR of its stripe's one data unit).
	 */
	unsigned int (*nr_parity)(const struct raid_geometry *g);
	/*
	 * Its redundancy units are copies of the data, each readable on its
	 * own: one that disagrees after a crash is an older or newer version
	 * of the data, never a spoiler of another unit's reconstruction.
	 */
	bool copies;

	/* ---- layout (all required) ---- */
	uint64_t (*array_blocks)(const struct raid_geometry *g);
	/* @array_lba must be below array_blocks(). */
	void (*map)(const struct raid_geometry *g, uint64_t array_lba,
		    struct raid_chunk *out);
	/* Parity unit @i (0..nr_parity()-1) of @stripe. */
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
	/*
	 * Optional: of a stripe an online check found inconsistent, the
	 * member whose unit alone explains its syndromes @syn (one per
	 * redundancy unit, raid_check_bytes(), each @unit_bytes) - the
	 * one unit that, were it what the others say, would leave the
	 * stripe consistent - or -1 when none does (several units wrong).
	 * NULL for a level whose redundancy cannot tell (RAID-5: one
	 * syndrome says that a unit is wrong, never which).
	 */
	int (*check_locate)(const struct raid_geometry *g, uint64_t stripe,
			    const uint8_t *const *syn, uint64_t unit_bytes);

	/*
	 * ---- TPT mode (required): controller/tpt_plan.h ----
	 * Plan a host READ or WRITE of @blocks array blocks at @lba as TPT
	 * commands for the members, none to the members in c->missing, whose
	 * blocks are reconstructed from the others'.  0, or -EINVAL for a
	 * request or context the level cannot serve, -ENODATA when more
	 * members are missing than the level can rebuild, -EAGAIN when a
	 * member has too few free slots now (retry when a request has
	 * returned some), -E2BIG when a member's whole slot table is too
	 * small (split the request), -ENOMEM.  On error nothing is allocated.
	 */
	int (*tpt_read)(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
			uint32_t group, struct tpt_plan *out);
	int (*tpt_write)(struct tpt_plan_ctx *c, uint64_t lba, uint32_t blocks,
			 uint32_t group, struct tpt_plan *out);
	/*
	 * Rebuild @member's units of stripes [@first, @first + @nr) from the
	 * other members and write them to @member (which c->missing may
	 * name: its blocks are not read), or recompute every stripe's parity
	 * for RAID_PARITY_MEMBER.  The positions of c->rebuild_also are
	 * rebuilt too, from the same reads, by the levels that survive two
	 * losses (RAID-5 answers -ENODATA, as for any second position
	 * missing).  Errors as above.
	 */
	int (*tpt_rebuild)(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
			   unsigned int member, uint32_t group,
			   struct tpt_plan *out);
	/*
	 * An online check of stripes [@first, @first + @nr) (md's
	 * "check"): writes nothing to any member, and leaves in the host
	 * buffer the stripes' syndromes in the layout of raid_check_bytes(),
	 * each zero where its redundancy unit agrees with the data.  The
	 * targets compute them; the controller only takes in the outcome
	 * (SEND RESULT to its own registered buffer, protocol.md 4.18), as
	 * no TPT command can say "these two agree" by itself.  -ENODATA when
	 * any member is missing: a check compares every unit.  Errors as
	 * above.
	 */
	int (*tpt_check)(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
			 uint32_t group, struct tpt_plan *out);

	/*
	 * ---- Baseline mode (required): controller/bl_plan.h ----
	 * The same for the in-band controller: member READs and WRITEs and
	 * the XORs it computes itself.  0, -EINVAL, -ENODATA, -ENOMEM.
	 */
	int (*bl_read)(const struct bl_plan_ctx *c, uint64_t lba,
		       uint32_t blocks, struct bl_plan *out);
	int (*bl_write)(const struct bl_plan_ctx *c, uint64_t lba,
			uint32_t blocks, struct bl_plan *out);
	int (*bl_rebuild)(const struct bl_plan_ctx *c, uint64_t first,
			  uint32_t nr, unsigned int member,
			  struct bl_plan *out);
	/* The check as tpt_check(), the controller reading every unit. */
	int (*bl_check)(const struct bl_plan_ctx *c, uint64_t first,
			uint32_t nr, struct bl_plan *out);
};

/*
 * RAID-5 in Linux md's default left-symmetric layout.  Data units follow
 * the parity unit round the members, so any N-1 consecutive units of the
 * array lie on N-1 different members and a sequential read keeps every
 * member busy, parity members included.
 */
extern const struct raid_level_ops raid5_level;

/*
 * RAID-1: every member a copy of the whole array (raid1.c).  It survives
 * the loss of all members but one.
 */
extern const struct raid_level_ops raid1_level;

/*
 * RAID-6: P and Q (md's left-symmetric layout, Q weighted as md's and
 * ISA-L's), computed by the targets with weighted passes (raid6.c).  It
 * survives the loss of any two members.
 */
extern const struct raid_level_ops raid6_level;

/* The level for raid=@level, or NULL. */
const struct raid_level_ops *raid_level_find(unsigned int level);

/*
 * 0 if @g suits @level: a member count it supports, a non-zero unit, and
 * members holding whole stripes with an array size that fits 64 bits.
 * -EINVAL otherwise.  The ops themselves assume a checked geometry.
 */
int raid_geometry_check(const struct raid_level_ops *level,
			const struct raid_geometry *g);

/* Whether stripes [@first, @first + @nr) are some, and all on the
 * members (a rebuild's, a check's, a copy's run). */
bool raid_stripes_in_range(const struct raid_geometry *g, uint64_t first,
			   uint32_t nr);

/* Blocks of data in one stripe: (N - nr_parity()) units. */
uint64_t raid_stripe_data_blocks(const struct raid_level_ops *level,
				 const struct raid_geometry *g);

/*
 * An online check's outcome (tpt_check, bl_check) for @nr stripes: a
 * syndrome of one stripe unit per redundancy unit of each stripe, the
 * unit XOR what it should be - RAID-5: the parity XOR the data units,
 * RAID-1: copy i+1 XOR the first copy - all zero where the stripe is
 * consistent.  Syndrome i of stripe first + s is unit (i * @nr + s) of
 * the buffer: each redundancy unit's run of stripes back to back, as a
 * target sends a run of its results.  Its size in bytes:
 */
uint64_t raid_check_bytes(const struct raid_level_ops *level,
			  const struct raid_geometry *g, uint32_t block_size,
			  uint32_t nr);
/* Whether stripe first + @s of the check outcome @buf of @nr stripes
 * disagrees with its redundancy: a syndrome of it is not zero. */
bool raid_check_mismatch(const struct raid_level_ops *level,
			 const struct raid_geometry *g, uint32_t block_size,
			 const uint8_t *buf, uint32_t nr, uint32_t s);
/* For such a stripe, @stripe in the array: the member whose unit is the
 * one wrong (the level's check_locate()), or -1 when the level cannot
 * tell or no single unit explains it. */
int raid_check_locate(const struct raid_level_ops *level,
		      const struct raid_geometry *g, uint32_t block_size,
		      const uint8_t *buf, uint32_t nr, uint32_t s,
		      uint64_t stripe);
/* Whether @len bytes at @buf are all zero. */
bool raid_unit_zero(const uint8_t *buf, uint64_t len);

/* A rebuild's c->rebuild_also: 0, or -EINVAL unless @member is a position
 * and each of @also is missing and not @member. */
int raid_rebuild_also_check(uint32_t also, uint32_t missing,
			    unsigned int member);

#endif
