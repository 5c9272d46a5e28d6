/*
 * TPT plans: one host READ or WRITE as the TPT commands of
 * docs/protocol.md section 7 for the member targets.  The RAID level
 * (controller/raid_level.h) decides which commands; this file holds the
 * plan itself, the builder levels make plans with, and what every plan
 * shares: slots, FINAL marking, WRITE NEW DATA, release and counting.
 * Pure: no I/O, and the only side effects are the slots plans take from
 * the caller's allocators and the calculator rotation.
 *
 * A plan is a list of steps.  The commands of one step are sent together;
 * the next step starts when all of them have completed with GOOD.  The
 * engine sends the commands a step has for one member in plan order, on
 * that member's session: a target records PREP READ and PREP WRITE in the
 * order they arrive (protocol.md 4.4, 4.5; iSCSI delivers them in CmdSN
 * order), and a PREP after its group's FINAL on that target is TPT GROUP
 * NUMBER IN USE.  Nothing else within a step depends on order: a target
 * does not order the commands of one group itself, so no command reads
 * what another command of its step writes.
 *
 * Every command of a plan carries the plan's group number (protocol.md
 * 2.3), except PRE-FETCH(16), whose SBC GROUP NUMBER is a grouping hint,
 * not a TPT group; the engine sends zero there.
 */
#ifndef TPT_CONTROLLER_TPT_PLAN_H
#define TPT_CONTROLLER_TPT_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "controller/array_spec.h"
#include "controller/plan_steps.h"
#include "controller/raid_level.h"
#include "controller/slot_alloc.h"

enum tpt_plan_op {			/* protocol.md opcodes */
	TPT_PLAN_PREP_READ, TPT_PLAN_PREP_WRITE, TPT_PLAN_READ_NEW_BLOCK,
	TPT_PLAN_XDWRITE, TPT_PLAN_PRE_FETCH, TPT_PLAN_PART_TMP, TPT_PLAN_PART_BLOCK,
	TPT_PLAN_COMP_TMP, TPT_PLAN_COMP_BLOCK, TPT_PLAN_WRITE_NEW_DATA, TPT_PLAN_RELEASE,
	TPT_PLAN_READ_MEDIUM, TPT_PLAN_SEND_RESULT,
	TPT_PLAN_WRITE,			/* SBC WRITE(16): data and parity we hold */
};

/*
 * A plan's commands belong to up to TPT_PLAN_MAX_GROUPS groups, numbered
 * from the plan's group number on.  The second keeps a reconstruction
 * apart from the request's ordinary flow on the same target: a PREP READ
 * and a READ MEDIUM of one block cannot share a group (protocol.md 8.1),
 * and what a reconstruction leaves behind is released on its own.  The
 * third keeps RAID-6's second reconstruction of a stripe apart from the
 * first: a target's READ PARITY outcome replaces its own export of the
 * same blocks in the same group, which the other may still read.
 */
#define TPT_PLAN_MAX_GROUPS 3

/* SKIP: bytes of a PREP READ's range that go nowhere (protocol.md 5.1,
 * PASSIVE PEER ID FFFDh). */
enum tpt_plan_ref_kind { TPT_REF_HOST, TPT_REF_SLOT, TPT_REF_PARITY, TPT_REF_SKIP };

/* One transfer descriptor, in order; for WRITE, one piece of its data. */
struct tpt_plan_ref {
	enum tpt_plan_ref_kind kind;
	/* HOST: byte offset in the request's host buffer; PARITY: where the
	 * first of the pieces it is the XOR of starts there */
	uint64_t host_offset;
	uint32_t nr_sources;		/* PARITY: pieces of @length back to back */
	unsigned int member;		/* SLOT: whose slot */
	uint16_t slot;
	uint32_t length;		/* bytes */
	/* A READ PARITY pass's weight 2^gf_exp (protocol.md 3.1); 0: plain
	 * XOR.  Every ref of one pass has the same. */
	uint8_t gf_exp;
};

struct tpt_plan_cmd {
	enum tpt_plan_op op;
	unsigned int member;
	uint64_t lba;			/* member LBA */
	uint32_t blocks;
	bool final;			/* PREP READ / PREP WRITE */
	uint8_t parity_mode;		/* TPT_PARITY_* of scsi/tpt_cdb.h */
	uint16_t result_slot;		/* TPT_SLOT_NONE or first slot */
	uint8_t operand_gf_exp;		/* READ PARITY: the operand's weight */
	uint8_t group_offset;		/* its group: plan->group + this */
	unsigned int nr_refs, first_ref;	/* into plan->refs */
};


/* Slots first..first+n-1 of @member, taken for one plan from @alloc in
 * its generation @generation. */
struct tpt_plan_slot_run {
	unsigned int member;
	uint16_t first, n;
	struct slot_alloc *alloc;
	uint32_t generation;
};

struct tpt_plan {
	struct tpt_plan_cmd *cmds; unsigned int nr_cmds;
	struct tpt_plan_ref *refs; unsigned int nr_refs;
	struct plan_step *steps; unsigned int nr_steps;
	/* slots this plan took, to return when the request ends */
	struct tpt_plan_slot_run *slots; unsigned int nr_slots;
	uint32_t group;			/* the first of its group numbers */
	unsigned int nr_groups;
};

struct tpt_plan_ctx {
	const struct raid_geometry *geo;
	const struct raid_level_ops *level;
	uint32_t block_size;		/* bytes per logical block */
	/* Per member (position): the allocator of the slots of the box that
	 * serves it; slot payload = unit_blocks * block_size. */
	struct slot_alloc **slots;
	unsigned int calculator_rr;	/* rotating calculator state, advanced by writes */
	/* Members (positions) whose blocks cannot be used: no command goes
	 * to them, and their blocks are reconstructed from the others. */
	uint32_t missing;
	/* A read-modify-write sends its parity member PRE-FETCH with the
	 * XDWRITEs (protocol.md 7.2; array option prefetch). */
	bool prefetch;
	/* How a full stripe's parity is gathered (protocol.md 7.4; array
	 * option parity_gather); zero is auto. */
	enum tpt_parity_gather gather;
	/* How a rebuild gathers a lost unit (protocol.md 7.5; array option
	 * rebuild_gather); zero is the tree. */
	enum tpt_rebuild_gather rebuild_gather;
	/* A rebuild's other positions (a mask, all in @missing) whose units
	 * the same plan rebuilds from the same reads: two boxes lost from a
	 * RAID-6 or a mirror of three or more (raid_rebuild_also_check()). */
	uint32_t rebuild_also;
	/* The host's data is in the controller's memory (an unmodified
	 * host): full stripes are cheapest written as they are, parity
	 * included (raid5.c, plan_full_stripes_held()). */
	bool host_held;
	/* An extended host's buffer is in this many pieces (protocol.md
	 * 4.19; 0 or 1: one): each piece boundary inside a command's range
	 * costs it a transfer descriptor more than it has references. */
	unsigned int host_pieces;
};

/* ---- building plans (for RAID levels) ---- */

/* The host references one command may have, so that it fits a transfer
 * list (TPT_XFER_DESC_MAX) however the host's buffer is cut. */
unsigned int tpt_plan_refs_max(const struct tpt_plan_ctx *c);

struct tpt_plan_builder {
	struct tpt_plan_ctx *c;
	struct tpt_plan *p;
	unsigned int *cmd_step;		/* step of each command, until sorted */
	unsigned int cap_cmds, cap_refs;
	unsigned int last_step;
	/* Result slots wanted per member, named by ordinals 0..n-1 until
	 * tpt_plan_finish() takes real slots; ordinals stay below
	 * TPT_SLOT_MAX, so they never collide with TPT_SLOT_NONE.  Each run
	 * of ordinals becomes a run of consecutive slots. */
	unsigned int slots_wanted[RAID_MAX_MEMBERS];
	struct tpt_plan_slot_run *runs;
	unsigned int nr_runs, cap_runs;
};

/*
 * Start an empty plan for a request of @blocks array blocks at @lba: 0,
 * or -EINVAL when the request or the context is outside what the
 * protocol can carry (48-bit member LBAs, 24-bit lengths, a slot payload
 * of one stripe unit, the array's end).
 */
int tpt_plan_begin(struct tpt_plan_builder *b, struct tpt_plan_ctx *c,
		   uint64_t lba, uint32_t blocks, uint32_t group,
		   struct tpt_plan *out);
/* tpt_plan_begin() for a plan over whole stripes [@first, @first + @nr)
 * (rebuild, resync, check): -EINVAL for none, or beyond what an array
 * can address. */
int tpt_plan_begin_stripes(struct tpt_plan_builder *b, struct tpt_plan_ctx *c,
			   uint64_t first, uint32_t nr, uint32_t group,
			   struct tpt_plan *out);
/* A command in @step, valid until the next add; its transfer descriptors
 * are the tpt_plan_add_*_ref() calls that follow.  NULL without memory. */
struct tpt_plan_cmd *tpt_plan_add_cmd(struct tpt_plan_builder *b,
				      unsigned int step, enum tpt_plan_op op,
				      unsigned int member, uint64_t lba,
				      uint32_t blocks);
int tpt_plan_add_host_ref(struct tpt_plan_builder *b, uint64_t host_offset,
			  uint32_t length);
/* A piece that is the XOR of @nr_sources pieces of @length bytes back
 * to back in the host buffer from @host_offset: a parity the engine
 * computes from data it holds (TPT_PLAN_WRITE only). */
int tpt_plan_add_parity_ref(struct tpt_plan_builder *b, uint64_t host_offset,
			    uint32_t length, uint32_t nr_sources);
/* @length bytes of a PREP READ's or PREP WRITE's range that are not
 * moved (protocol.md 4.4, 4.5). */
int tpt_plan_add_skip_ref(struct tpt_plan_builder *b, uint32_t length);
/* The ref added last is its pass's share, weighted 2^@gf_exp (3.1). */
void tpt_plan_weigh_last_ref(struct tpt_plan_builder *b, uint8_t gf_exp);
/* A SLOT descriptor for the result slot @ordinal of @member. */
int tpt_plan_add_slot_ref(struct tpt_plan_builder *b, unsigned int member,
			  uint16_t ordinal, uint32_t length);
/* What a member's stripe is to a run of stripes one command covers. */
enum tpt_plan_run_stripe {
	TPT_RUN_TAKE,		/* the command moves the member's unit there */
	TPT_RUN_SKIP,		/* it may step over it with a skip */
	TPT_RUN_STOP,		/* the run ends before it */
};

/*
 * How many stripes from @s on (one the member takes, before @end, at most
 * @max_run) one command of the member covers: the stripes @kind says it
 * takes, and those it may skip where it takes one again after them
 * (protocol.md 4.4, 4.5).  *@taken: how many of them it takes.
 */
uint64_t tpt_plan_run_over(uint64_t s, uint64_t end, uint64_t max_run,
			   enum tpt_plan_run_stripe (*kind)(const void *ctx,
							    uint64_t stripe),
			   const void *ctx, uint64_t *taken);

/* A result slot on @member, named by the ordinal in @ordinal; -E2BIG when
 * the member's whole table could never hold the plan's results. */
int tpt_plan_want_slot(struct tpt_plan_builder *b, unsigned int member,
		       uint16_t *ordinal);
/* @n consecutive slots on @member for a result of @n slot payloads,
 * named by the ordinals from *@first on. */
int tpt_plan_want_slots(struct tpt_plan_builder *b, unsigned int member,
			uint16_t n, uint16_t *first);

/* One source of a parity chain: slots of @member from @ordinal on, one per
 * unit of the chain's range, or, with @member -1, the host's bytes at
 * @host_offset. */
struct tpt_chain_source {
	int member;
	uint16_t ordinal;
	uint64_t host_offset;
	uint8_t gf_exp;			/* its pass weighted 2^gf_exp (3.1) */
};

/*
 * A parity chain at @target over [@lba, @lba + @n): the XOR of @nr
 * sources into the operand of @first_mode, in as few READ PARITY PART
 * commands as the passes of a list allow (protocol.md 5.1) - one, unless
 * descriptors or scratch run out - one per step from @step on, since a
 * target does not order a group's commands.  Each command after the first
 * folds its passes into the result with XOR GROUP; the last is PART BLOCK
 * with @stage (the outcome staged for WRITE NEW DATA).  Returns the last
 * step used, or an error.
 */
int tpt_plan_add_chain(struct tpt_plan_builder *b, unsigned int step,
		       unsigned int target, uint64_t lba, uint32_t n,
		       uint8_t group, uint8_t first_mode, bool stage,
		       const struct tpt_chain_source *src, unsigned int nr);
/* The same with weights (protocol.md 3.1): each source's pass weighted
 * by its gf_exp, and the first link's operand (with XOR MEDIUM, @target's
 * own blocks) by 2^@operand_gf_exp. */
int tpt_plan_add_weighted_chain(struct tpt_plan_builder *b, unsigned int step,
				unsigned int target, uint64_t lba, uint32_t n,
				uint8_t group, uint8_t first_mode,
				uint8_t operand_gf_exp, bool stage,
				const struct tpt_chain_source *src,
				unsigned int nr);
/* A piece of a stripe unit a READ takes from a member that has it. */
struct tpt_read_piece {
	unsigned int member;
	uint64_t member_lba;
	uint32_t blocks;
	uint64_t host_offset;		/* bytes */
};

/*
 * One PREP READ per run of a member's pieces that are contiguous on the
 * member (the units of consecutive stripes, where it holds data in each),
 * with a host descriptor per piece: the transfer list covers the range in
 * order (protocol.md 5.1), so the target reads the run in one pass and
 * puts each piece where the host wants it.  For an extended host the run
 * also steps over the units the member holds parity in (one in RAID-5,
 * two in RAID-6), between two of its data units, with a skip descriptor
 * (PASSIVE PEER ID FFFDh): the target reads them with the rest and moves
 * none of it.  A 1 MiB READ over 32 KiB units is then a command per
 * member, not 32 (nor two or three per member where its parity breaks
 * the run): the controller's cost of a READ is its commands.  An
 * unmodified host's PREP READs go as plain READs into its buffer, where a
 * skipped unit would need room of its own.  All in step 0; @piece is
 * used up.
 */
int tpt_plan_add_prep_reads(struct tpt_plan_builder *b,
			    struct tpt_read_piece *piece, unsigned int nr);

/* One data member's share of a partial stripe write. */
struct tpt_stripe_piece {
	unsigned int member;
	uint32_t first, end;		/* blocks within the unit */
	uint64_t host_offset;		/* bytes, of block @first */
};

/*
 * A write of array blocks [@first, @end) of @stripe (a request at
 * @req_lba) as the data members' pieces, in @piece (room for
 * RAID_MAX_MEMBERS), and the unit's offsets cut at every piece boundary,
 * in @bound (room for 2 * RAID_MAX_MEMBERS), sorted, without repeats.
 * The pieces may sit at different offsets of the unit (a write covering
 * the tail of one unit and the head of the next), so one parity block
 * range can take data from some members and not others; and a SLOT
 * descriptor takes a slot's whole payload, the reader checking the
 * piece's LBA and length (protocol.md 5.1), so a result can only be read
 * over exactly the range it was produced for.  Each elementary interval
 * [bound[i], bound[i + 1]) is therefore planned on its own; Baseline
 * plans cut the same way where a level's parity is computed per block.
 */
void tpt_stripe_cut(const struct raid_geometry *g,
		    const struct raid_level_ops *l, uint32_t block_size,
		    uint64_t req_lba,
		    uint64_t stripe, uint64_t first, uint64_t end,
		    struct tpt_stripe_piece *piece, unsigned int *nr_pieces,
		    uint32_t *bound, unsigned int *nr_bounds);
/* The piece of @member covering [x, x + len) of the unit, or NULL. */
const struct tpt_stripe_piece *
tpt_stripe_piece_over(const struct tpt_stripe_piece *piece, unsigned int nr,
		      unsigned int member, uint32_t x, uint32_t len);

/*
 * Read-modify-write of the interval [x, x + len) of the stripe whose
 * units start at member LBA @base (paper III-C, Fig. 4; protocol.md
 * 7.2): each piece covering it XDWRITEs its new data in step 0 and
 * exports the delta, new XOR old, into a slot of its own.  The deltas are
 * the sources of the parity's chain, in @delta: how many, or an error.
 */
int tpt_plan_add_xdwrites(struct tpt_plan_builder *b, uint64_t base,
			  const struct tpt_stripe_piece *piece, unsigned int nr,
			  uint32_t x, uint32_t len,
			  struct tpt_chain_source *delta);

/*
 * The steps that end a plan (protocol.md 4.11, 8.3, 9.2): WRITE NEW DATA
 * of every run of staged data, in a step after the last one used, and TPT
 * RELEASE of every group that would still hold results on a member
 * afterwards (READ MEDIUM exports, chains that stage nothing).  A RELEASE
 * goes beside the WRITE NEW DATA commands, or in the next step where its
 * group has a WRITE NEW DATA or SEND RESULT on the same member: a release
 * must not race a command of its own group.
 */
int tpt_plan_add_end_steps(struct tpt_plan_builder *b);
/* Sort into steps, mark FINAL, take the slots: 0, or an error after
 * which the plan is abandoned. */
int tpt_plan_finish(struct tpt_plan_builder *b);
void tpt_plan_abandon(struct tpt_plan_builder *b);
/* How a level's planner ends: tpt_plan_finish(), or after @err (not 0)
 * tpt_plan_abandon() and @err. */
int tpt_plan_end(struct tpt_plan_builder *b, int err);

/*
 * A copy of the units of stripes [@first, @first + @nr) from member
 * @from to each member of the mask @to (protocol.md 7.5 with one
 * source): @from exports the run with READ MEDIUM, a slot per unit, and
 * each of @to takes it with PART BLOCK in COPY mode, staged for WRITE NEW
 * DATA.  Every level keeps a stripe's units at the same LBA on every
 * member, so this is any level's: a mirror's rebuild, and a replace's
 * batch (replace.c), which copies from the box leaving a position and
 * names it by an index past the geometry's, below RAID_MAX_MEMBERS.
 * Errors as a level's tpt_rebuild().
 */
int tpt_plan_copy(struct tpt_plan_ctx *c, uint64_t first, uint32_t nr,
		  unsigned int from, uint32_t to, uint32_t group,
		  struct tpt_plan *out);

/*
 * RELEASE of every group on every member that got a command, for aborting
 * a plan mid-way.  When its commands have completed, no slot of @p is live
 * on any member and its slots can be returned (protocol.md 9.2).  Takes
 * no slots.
 */
int tpt_plan_release(const struct tpt_plan *p, struct tpt_plan *out);

void tpt_plan_free(struct tpt_plan *p);	/* does not return slots */

/* Once every member has freed them: WRITE NEW DATA or TPT RELEASE done.
 * Slots of a table that has since been replaced are not given back. */
void tpt_plan_return_slots(const struct tpt_plan *p);

/* The CDB opcode the engine sends for @op (enum tpt_opcode). */
uint8_t tpt_plan_opcode(enum tpt_plan_op op);

/* Protocol name of @op, for logs. */
const char *tpt_plan_op_name(enum tpt_plan_op op);

/*
 * What a plan costs, in the terms of the paper's Tables I and II (III-E):
 * an operation is a PDU sent or a one-sided transfer started, and a
 * transfer between two targets moves its bytes through both.  Per member:
 * the PDUs the controller sends it (each answered by one response), the
 * transfers it starts (one per descriptor), and the bytes it moves with
 * the host and with other members' slots.
 */
struct tpt_plan_member_counts {
	unsigned int commands;
	unsigned int transfers;
	uint64_t host_in;		/* read from the host */
	uint64_t host_out;		/* written to the host */
	uint64_t peer_in;		/* read from other members' slots */
	uint64_t peer_out;		/* read by other members from its slots */
};

struct tpt_plan_counts {
	struct tpt_plan_member_counts member[RAID_MAX_MEMBERS];
	unsigned int commands;		/* the controller's PDUs, without the host's answer */
	unsigned int transfers;
	uint64_t host_bytes;		/* between the host and the targets */
	uint64_t peer_bytes;		/* between targets, each transfer once */
};

void tpt_plan_count(const struct tpt_plan *p, struct tpt_plan_counts *out);

#endif
