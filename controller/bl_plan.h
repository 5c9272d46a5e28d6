/*
 * Baseline plans: one host READ or WRITE as the paper's in-band controller
 * executes it (III-C, III-E) - standard READ(16) and WRITE(16) to the
 * members, and the XORs the controller computes itself in between.  The
 * RAID level decides which (controller/raid_level.h); the engine runs
 * the plan (usr/tpt_controller/mode_baseline.c) and the unit tests run it
 * against simulated members.
 *
 * A plan is a list of steps.  A step's local operations (COPY, XOR) run
 * first, in plan order; then its member READs and WRITEs go out together,
 * and the next step starts when all of them have completed.  Data lives
 * in the host's buffer or in temporary buffers the plan asks for, each
 * the engine allocates for the request and frees with it.
 */
#ifndef TPT_CONTROLLER_BL_PLAN_H
#define TPT_CONTROLLER_BL_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/plan_steps.h"
#include "controller/raid_level.h"

enum bl_op {
	BL_READ,		/* member blocks -> dst */
	BL_WRITE,		/* src -> member blocks */
	BL_COPY,		/* dst = 2^gf_exp src */
	BL_XOR,			/* dst ^= 2^gf_exp src */
};

enum bl_buf { BL_BUF_HOST, BL_BUF_TEMP };

struct bl_ref {				/* a place in the request's memory */
	enum bl_buf buf;
	unsigned int temp;		/* BL_BUF_TEMP: which one */
	uint64_t offset;		/* bytes into that buffer */
};

struct bl_cmd {
	enum bl_op op;
	unsigned int member;		/* READ, WRITE */
	uint64_t lba;			/* READ, WRITE: member LBA */
	uint32_t bytes;
	struct bl_ref dst;		/* READ, COPY, XOR */
	struct bl_ref src;		/* WRITE, COPY, XOR */
	/* COPY, XOR: the weight of src in GF(2^8) (scsi/tpt_parity.h), 0:
	 * none; a weighted dst must be aligned to TPT_PARITY_ALIGN (a
	 * temporary, or a check's outcome buffer). */
	uint8_t gf_exp;
};


struct bl_plan {
	struct bl_cmd *cmds; unsigned int nr_cmds;
	struct plan_step *steps; unsigned int nr_steps;
	uint32_t *temp_bytes; unsigned int nr_temps;
};

struct bl_plan_ctx {
	const struct raid_geometry *geo;
	const struct raid_level_ops *level;
	uint32_t block_size;		/* bytes per logical block */
	/* Members whose blocks cannot be used (struct tpt_plan_ctx). */
	uint32_t missing;
	/* Positions a rebuild also rebuilds (struct tpt_plan_ctx). */
	uint32_t rebuild_also;
};

/* ---- building plans (for RAID levels) ---- */

struct bl_plan_builder {
	const struct bl_plan_ctx *c;
	struct bl_plan *p;
	unsigned int *cmd_step;
	unsigned int cap_cmds, cap_temps;
	unsigned int last_step;
};

/* 0, or -EINVAL for an empty request, one past the array's end or a
 * context that is not a checked geometry. */
int bl_plan_begin(struct bl_plan_builder *b, const struct bl_plan_ctx *c,
		  uint64_t lba, uint32_t blocks, struct bl_plan *out);
/* A temporary buffer of @bytes: its number, or -ENOMEM. */
int bl_plan_add_temp(struct bl_plan_builder *b, uint32_t bytes);
int bl_plan_add(struct bl_plan_builder *b, unsigned int step,
		const struct bl_cmd *cmd);
/* Sort into steps: 0, or an error after which the plan is abandoned. */
int bl_plan_finish(struct bl_plan_builder *b);
void bl_plan_abandon(struct bl_plan_builder *b);
/* bl_plan_finish(), or after @err (not 0) bl_plan_abandon() and @err. */
int bl_plan_end(struct bl_plan_builder *b, int err);

/*
 * A copy of the units of stripes [@first, @first + @nr) from member
 * @from to each member of the mask @to: the controller reads the run into
 * a temporary and writes it to each.  Any level's (tpt_plan_copy()): a
 * mirror's rebuild, a replace's batch from the box leaving a position.
 * 0, -EINVAL, -ENOMEM.
 */
int bl_plan_copy(const struct bl_plan_ctx *c, uint64_t first, uint32_t nr,
		 unsigned int from, uint32_t to, struct bl_plan *out);

static inline struct bl_ref bl_host(uint64_t offset)
{
	return (struct bl_ref){ .buf = BL_BUF_HOST, .offset = offset };
}

static inline struct bl_ref bl_temp(unsigned int temp, uint64_t offset)
{
	return (struct bl_ref){ .buf = BL_BUF_TEMP, .temp = temp,
				.offset = offset };
}

void bl_plan_free(struct bl_plan *p);

/*
 * What a plan costs, in the terms of the paper's Tables I and II: the
 * controller's PDUs to members (one per READ or WRITE), the bytes that
 * cross it to and from members, and the bytes it XORs or copies.
 */
struct bl_plan_counts {
	unsigned int commands;
	uint64_t member_in;		/* READ: members to the controller */
	uint64_t member_out;		/* WRITE: the controller to members */
	uint64_t xored;
};

void bl_plan_count(const struct bl_plan *p, struct bl_plan_counts *out);

#endif
