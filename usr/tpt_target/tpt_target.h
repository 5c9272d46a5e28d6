/*
 * The TPT target: an sbc LU switched into TPT mode executes the TPT command
 * set of docs/protocol.md besides ordinary SBC commands.
 *
 *   lu.c           tgtadm parameters, switching a LU's opcode table, show
 *   nexus.c        per I_T nexus state: peer list, slots
 *   peer_link.c    datamover links to peers, admission of incoming ones
 *   group.c        per (nexus, group number) buffers and their release
 *   bounds.c       what a nexus, a group and the process may keep
 *   xfer.c         moving byte ranges between peers' memory and ours
 *   cmd.c          decoding, dispatch, completion; cmd_*.c the handlers
 *   disk_io.c      disk I/O off the event loop
 *
 * The datamover itself is the process's (usr/tpt_datamover.h), shared
 * with a controller in the same tgtd.
 */
#ifndef __TPT_TARGET_H__
#define __TPT_TARGET_H__

#include <stdbool.h>
#include <stdint.h>

#include "list.h"
#include "scsi/tpt_cdb.h"
#include "controller/member_sb.h"
#include "iser/tpt_dm.h"
#include "tpt_datamover.h"
#include "tpt_inline_read.h"

struct scsi_lu;
struct scsi_cmd;
struct tpt_cmd;
struct tpt_session;

/* Private buffers hold up to this many bytes each; slots their payload. */
#define TPT_PRIVATE_PIECE	(1u << 20)
_Static_assert(TPT_PRIVATE_PIECE + TPT_SLOT_HDR_LEN <= TPT_DATAMOVER_BUF_BYTES,
	       "a pool buffer holds a private piece or a slot");

/* ---- lu.c ---- */

struct tpt_lu_stats {
	uint64_t cmds[256];		/* by opcode */
	uint64_t check_conditions;
	uint64_t bytes_read_disk, bytes_written_disk;
	uint64_t bytes_xored;
	uint64_t groups_released[5];	/* by enum tpt_release_why */
	uint64_t plain_refused;		/* plain SBC commands, plain_io.c */
};

/* Which plain SBC commands a LU in an array executes for nexuses without
 * the array's key (plain_io.c), in increasing openness. */
enum tpt_plain_io {
	TPT_PLAIN_IO_REFUSE,	/* only those that reveal no data */
	TPT_PLAIN_IO_READ,	/* and reads */
	TPT_PLAIN_IO_ALLOW,	/* all: plain tgt */
};

struct tpt_lu {
	struct scsi_lu *lu;
	struct list_head link;
	unsigned int group_timeout;	/* seconds */
	/*
	 * The array this LU belongs to, from the first peer list accepted
	 * on it (or its superblock, sb_binding.c) until the controller
	 * unbinds it (TPT RELEASE with UNBIND) or the operator sets
	 * tpt=off: only nexuses that delivered the same array id and key
	 * get TPT commands executed here.  Bound by the superblock, the key
	 * is not known (key_pending) until a peer list's matches key_check.
	 */
	bool bound;
	bool key_pending;
	uint64_t array_id;
	uint8_t array_key[TPT_ARRAY_KEY_LEN];
	uint8_t key_check[TPT_SB_KEY_CHECK_LEN];
	enum tpt_plain_io plain_io;
	/* How its medium reads may run on the event loop, from tpt=on. */
	enum tpt_inline_read_how read_inline;
	/* The LU's own handlers, which plain_io.c's gate calls. */
	int (*plain_ops[256])(int host_no, struct scsi_cmd *cmd);
	struct tpt_lu_stats stats;
};

struct tpt_lu *tpt_lu_of(const struct scsi_lu *lu);
uint32_t tpt_lu_block_size(const struct tpt_lu *tlu);
uint64_t tpt_lu_nr_blocks(const struct tpt_lu *tlu);
int tpt_lu_fd(const struct tpt_lu *tlu);
enum tpt_inline_read_how tpt_lu_read_inline(const struct tpt_lu *tlu);
/* Whether @s may drive @tlu: the LU is unbound, or @s delivered the
 * array id and key it is bound to. */
bool tpt_lu_serves(const struct tpt_lu *tlu, const struct tpt_session *s);
/* The controller gives the LU up (it stops the array): any array may
 * bind it again. */
void tpt_lu_unbind(struct tpt_lu *tlu, const struct tpt_session *by);

/* ---- sb_binding.c ---- */

/* The first tpt=on of the LU in this process: bind it to the array its
 * member superblock names, if that carries a key check. */
void tpt_lu_bind_from_superblock(struct tpt_lu *tlu);
/* A LU bound by its superblock learns its key from @pl, if it matches. */
void tpt_lu_take_key(struct tpt_lu *tlu, const struct tpt_session *s,
		     const struct tpt_peer_list *pl);
/* The LU is deleted: a new one in its place reads its superblock again. */
void tpt_lu_forget(const struct scsi_lu *lu);

/* ---- plain_io.c ---- */

/* Puts the gate in front of every handler of @tlu's opcode table but the
 * @nr_tpt_ops TPT ones; detach takes it away again. */
void tpt_plain_io_attach(struct tpt_lu *tlu, const uint8_t *tpt_ops,
			 size_t nr_tpt_ops);
void tpt_plain_io_detach(struct tpt_lu *tlu);
/* "refuse", "read" or "allow": 0, or -1 for anything else. */
int tpt_plain_io_parse(const char *value, enum tpt_plain_io *out);
const char *tpt_plain_io_name(enum tpt_plain_io p);

/* ---- nexus.c ---- */

/* Slot memory of all sessions together. */
#define TPT_SLOT_BYTES_MAX	(1ULL << 30)

struct tpt_slot {
	struct tpt_dm_buf *dmb;
	struct tpt_range *owner;	/* live buffer using it, or NULL */
};

struct tpt_session {
	int tid;
	uint64_t itn_id;
	struct list_head link;
	struct tpt_peer_list *peers;	/* NULL until TPT SET PEER LIST */
	/* The datamover scope of its array (tpt_datamover_scope), set with
	 * the first list and never changed: a nexus serves one array.
	 * Slots, pool buffers and links of the nexus live in it; 0 (the
	 * default scope, which no peer reaches) before the list. */
	uint64_t scope;
	/* Another nexus delivered a list of the same array: this one's
	 * controller was given up on, and so is every command it sends. */
	bool superseded;
	/* Refused for want of a LU's array key: logged once per nexus. */
	bool refused_unbound;
	bool refused_plain;		/* the same for plain SBC commands */
	bool pool_logged;		/* datamover pool exhaustion: once */
	/* A group number named that it never had or no longer remembers
	 * releasing: a controller out of step, logged once per nexus. */
	bool unknown_group_logged;
	struct tpt_slot *slots;
	uint16_t nr_slots;
	uint32_t slot_payload;
	struct list_head groups;
	/* When it last sent a command (monotonic seconds), and the seconds
	 * it has been active since it began: the clock its groups' hold
	 * time runs on (group.c). */
	uint64_t heard, clock;
	/* Groups released recently, and why: later commands naming them
	 * learn what happened instead of "unknown group". */
#define TPT_TOMBSTONES 64
	struct {
		uint32_t group;
		uint8_t why;
		bool used;
	} tombstones[TPT_TOMBSTONES];
	unsigned int next_tombstone;
	/* What it keeps, against tpt_bounds. */
	unsigned int nr_groups;
	unsigned int pool_bufs;		/* pool buffers held now */
	unsigned int held_pieces;	/* private pieces of its groups */
	unsigned int bounds_logged;	/* bit per enum tpt_bound */
};

struct tpt_session *tpt_session_find(int tid, uint64_t itn_id);
struct tpt_session *tpt_session_first(void);
struct tpt_session *tpt_session_next(struct tpt_session *s);
struct tpt_session *tpt_session_get(int tid, uint64_t itn_id);
/* Takes @pl on @s, sent to @tlu, binding @tlu to its array if it was
 * free. */
enum tpt_sense_reason tpt_session_set_peers(struct tpt_session *s,
					    struct tpt_lu *tlu,
					    const struct tpt_peer_list *pl);
/* Logs, once per nexus, that @s was refused on @tlu for want of its
 * array's key. */
void tpt_session_log_unbound(struct tpt_session *s, const struct tpt_lu *tlu);
enum tpt_sense_reason tpt_session_reserve_slots(struct tpt_session *s,
						uint32_t payload,
						uint16_t count);
void tpt_session_fill_slot_table(const struct tpt_session *s,
				 struct tpt_slot_table *t);

/* ---- bounds.c ---- */

/* Set by tgtadm (lu.c); each applies to what is asked for from then on. */
struct tpt_bounds {
	unsigned int session_slot_mb;	/* slot memory of one nexus */
	unsigned int session_pool_mb;	/* pool one nexus holds; 0: half */
	unsigned int session_mb;	/* private pieces of a nexus's groups */
	unsigned int group_mb;		/* the same, of one group */
	unsigned int session_groups;	/* open groups of one nexus */
	unsigned int groups_max;	/* open groups of the process */
};
extern struct tpt_bounds tpt_bounds;

enum tpt_bound {
	TPT_BOUND_SESSION_SLOTS,
	TPT_BOUND_SESSION_POOL,
	TPT_BOUND_SESSION_HELD,
	TPT_BOUND_GROUP_HELD,
	TPT_BOUND_SESSION_GROUPS,
	TPT_BOUND_GROUPS,
	TPT_BOUNDS
};

/* Process-wide use, and the most one nexus has used, for tgtadm show. */
struct tpt_bound_use {
	unsigned int groups;
	unsigned int pool_bufs;
	unsigned int held_pieces;
	uint64_t slot_bytes;
	unsigned int peak_session_groups;
	unsigned int peak_session_pool_bufs;
	unsigned int peak_session_held_pieces;
	uint64_t refused[TPT_BOUNDS];
};
extern struct tpt_bound_use tpt_bound_use;

unsigned int tpt_bound_session_pool_bufs(void);
/* Count a refusal of @s at bound @b, logged once per nexus and bound:
 * returns INSUFFICIENT RESOURCES. */
enum tpt_sense_reason tpt_bound_refuse(struct tpt_session *s,
				       enum tpt_bound b);

/* ---- peer_link.c ---- */

/* A connected datamover peer for peer-list entry @peer_id, connecting if
 * need be: cb runs (maybe before this returns) with the peer or an error. */
typedef void (*tpt_link_cb)(struct tpt_dm_peer *peer, int status, void *arg);
void tpt_link_get(struct tpt_session *s, uint16_t peer_id, tpt_link_cb cb,
		  void *arg);
/* Drops the connected links that no live peer list names any more (the
 * entry went, or its token or address changed). */
void tpt_links_prune(void);
/* tpt_xfer_timeout=N: seconds a datamover link may move nothing while
 * transfers wait on it, or stay unconnected, before it is dropped and
 * they fail (TIMED OUT, UNREACHABLE: docs/protocol.md 9.1), for links
 * now and later; lu.c checks the value (1..3600). */
void tpt_links_set_xfer_timeout(unsigned int seconds);
unsigned int tpt_links_xfer_timeout(void);
/* Checks the links against their limits once a second from now on. */
void tpt_links_watch_start(void);

/* The target as a datamover user: admission by peer list, links dropped
 * when their peer goes away. */
extern struct tpt_datamover_user tpt_target_dm_user;

/* ---- group.c ---- */

enum tpt_release_why {
	TPT_RELEASE_DONE,		/* the request completed */
	TPT_RELEASE_COMMAND,		/* TPT RELEASE */
	TPT_RELEASE_TASK_MGMT,		/* abort, LU reset */
	TPT_RELEASE_TIMEOUT,
	TPT_RELEASE_NEXUS_LOSS,
};

/* One contiguous byte range of buffered data, split into pieces that are
 * either slots (exported) or private pool buffers. */
struct tpt_piece {
	struct tpt_dm_buf *dmb;
	int slot;			/* slot index, or -1 */
	uint32_t len;
};

#define TPT_RANGE_STAGED	0x1	/* to be written by WRITE NEW DATA */
#define TPT_RANGE_RESULT	0x2	/* the group's result for its range */

struct tpt_range {
	struct list_head link;
	struct tpt_group *group;
	uint64_t lba;
	uint32_t nr_blocks;
	unsigned int flags;
	uint32_t piece_bytes;		/* granule: every piece but the last */
	unsigned int held_pieces;	/* charged to group and nexus */
	unsigned int holders;		/* commands working with it */
	bool released;			/* left the group, a holder remains */
	unsigned int nr_pieces;
	struct tpt_piece piece[];
};

enum tpt_group_kind {
	TPT_GROUP_READ,
	TPT_GROUP_WRITE,
};

/* A PREP READ or PREP WRITE recorded until the FINAL one of its group:
 * the LBA range, where its data goes or comes from, and for PREP WRITE
 * the range its data will land in. */
struct tpt_prep {
	struct list_head link;
	uint64_t lba;
	uint32_t nr_blocks;
	struct tpt_xfer_list *xl;
	uint8_t *inline_data;
	struct tpt_range *range;
};

void tpt_prep_free(struct tpt_prep *p);

struct tpt_group {
	struct list_head link;
	struct tpt_session *session;
	struct tpt_lu *tlu;
	uint32_t number;
	enum tpt_group_kind kind;
	struct list_head ranges;
	struct list_head preps;		/* PREP READ/WRITE until FINAL */
	unsigned int inflight;		/* commands executing on it */
	uint64_t last_used;		/* its session's clock */
	bool doomed;			/* release when inflight drops to 0 */
	bool final_seen;		/* a FINAL PREP arrived: no more PREPs */
	unsigned int held_pieces;	/* private pieces of its ranges */
	enum tpt_release_why doom_why;
};

/* The group, creating it for @kind, or a sense reason. */
enum tpt_sense_reason tpt_group_get(struct tpt_session *s, struct tpt_lu *tlu,
				    uint32_t number, enum tpt_group_kind kind,
				    bool create, struct tpt_group **out);
struct tpt_group *tpt_group_find(struct tpt_session *s, struct tpt_lu *tlu,
				 uint32_t number);
void tpt_group_hold(struct tpt_group *g);
void tpt_group_unhold(struct tpt_group *g);
void tpt_group_release(struct tpt_group *g, enum tpt_release_why why);
/* Drop @g, held only by the command that opened it and still empty, as
 * if it had never been opened: a refused command changes nothing. */
bool tpt_group_forget_unused(struct tpt_group *g);
void tpt_session_release_groups(struct tpt_session *s, struct tpt_lu *tlu,
				enum tpt_release_why why);
void tpt_group_timeouts_start(void);
void tpt_session_heard(struct tpt_session *s);

/* A new range of @nr_blocks at @lba stored in slots from @slot on, or in
 * private buffers for TPT_SLOT_NONE.  Not yet on the group's list.  With
 * @lazy, private pieces get their buffers from tpt_piece_get() only. */
enum tpt_sense_reason tpt_range_alloc(struct tpt_group *g, uint64_t lba,
				      uint32_t nr_blocks, uint16_t slot,
				      bool lazy, struct tpt_range **out);
/* 0, -EDQUOT at the nexus's pool share, -EAGAIN when the pool is dry. */
int tpt_piece_get(struct tpt_range *r, unsigned int i);
void tpt_piece_put(struct tpt_range *r, unsigned int i);
void tpt_range_attach(struct tpt_range *r, unsigned int flags);
void tpt_range_free(struct tpt_range *r);
void tpt_range_hold(struct tpt_range *r);
void tpt_range_unhold(struct tpt_range *r);
/* The range of @g covering exactly [lba, lba + nr_blocks) with any of
 * @flags, or NULL. */
struct tpt_range *tpt_range_find(struct tpt_group *g, uint64_t lba,
				 uint32_t nr_blocks, unsigned int flags);
/* Any range of @g with one of @flags sharing a block with the LBA range. */
struct tpt_range *tpt_range_overlapping(struct tpt_group *g, uint64_t lba,
					uint32_t nr_blocks, unsigned int flags);
void *tpt_piece_data(const struct tpt_range *r, unsigned int i);
/* One operand of tpt_range_fold(): @range's bytes from byte @pos on,
 * laid over the destination's LBAs.  A READ PARITY command's fetched
 * range holds its passes back to back, pass p from
 * tpt_range_pass_pos(dst, p). */
struct tpt_fold_src {
	const struct tpt_range *range;
	uint64_t pos;
	uint8_t gf_exp;			/* weight 2^gf_exp; 0: plain XOR */
};

uint64_t tpt_range_pass_pos(const struct tpt_range *dst, unsigned int pass);
/* dst = src[0] ^ ... ^ src[n-1] (one source: a copy), each weighted by
 * its gf_exp (tpt_gf_fold()), or with @acc dst = 2^acc_gf_exp dst ^ all
 * of them, over ranges of the same LBAs; n at most
 * TPT_XOR_PASSES_MAX + 1.  0 or -EINVAL. */
int tpt_range_fold(struct tpt_range *dst, const struct tpt_fold_src *src,
		   unsigned int n, bool acc, uint8_t acc_gf_exp);
/* Publish slot headers so peers may read the range. */
void tpt_range_publish(struct tpt_range *r);

/* ---- xfer.c ---- */

/* Move the bytes of @xl (covering a byte stream of xl->total_length) to or
 * from @r's pieces; done(cmd, reason) runs once everything completed. */
enum tpt_xfer_dir {
	TPT_XFER_FETCH,			/* Get_Data from the passive sides */
	TPT_XFER_PUSH,			/* Put_Data to the passive sides */
};
typedef void (*tpt_xfer_done)(struct tpt_cmd *tc, void *ctx,
			      enum tpt_sense_reason r);
void tpt_xfer_pieces(struct tpt_cmd *tc, struct tpt_range *r,
		     unsigned int first, unsigned int count,
		     const struct tpt_xfer_list *xl, const uint8_t *inline_data,
		     enum tpt_xfer_dir dir, tpt_xfer_done done, void *ctx);
void tpt_xfer_range(struct tpt_cmd *tc, struct tpt_range *r,
		    const struct tpt_xfer_list *xl, const uint8_t *inline_data,
		    enum tpt_xfer_dir dir, tpt_xfer_done done, void *ctx);

/* ---- cmd.c ---- */

/* A TPT command being executed. */
struct tpt_cmd {
	struct scsi_cmd *scmd;
	struct list_head link;		/* all executing TPT commands */
	struct tpt_lu *tlu;
	struct tpt_session *session;
	struct tpt_group *group;
	bool opened_group;		/* the group did not exist before */
	struct tpt_cdb cdb;
	struct tpt_xfer_list *xl;
	const uint8_t *inline_data;
	bool aborted;
	/* Outstanding asynchronous steps of the current stage, and the
	 * first failure of the command (what its sense data reports). */
	unsigned int pending;
	enum tpt_sense_reason failure;
	struct tpt_sense_info failure_info;
	/* Set while tpt_cmd_perform() runs, to catch completions that
	 * happen before it returns. */
	bool in_perform;
	bool completed;
	int sync_result;
	enum tpt_sense_reason abort_reason;
	/* What runs when tpt_cmd_fetch_and_read() has ended. */
	void (*stage_finish)(struct tpt_cmd *tc);
	/* Handler-specific state, freed with the command. */
	void *priv;
};

int tpt_cmd_perform(int host_no, struct scsi_cmd *cmd);
/* Finish @tc: GOOD when reason is TPT_SENSE_NONE, else CHECK CONDITION. */
void tpt_cmd_complete(struct tpt_cmd *tc, enum tpt_sense_reason reason);
/* One asynchronous step of @tc ended with @r: keeps the first failure and
 * says whether it was the last outstanding one. */
bool tpt_cmd_step_done(struct tpt_cmd *tc, enum tpt_sense_reason r);
/* Record the first failure of a stage with details for the sense data. */
void tpt_cmd_fail(struct tpt_cmd *tc, enum tpt_sense_reason reason,
		  bool info_valid, uint32_t information, uint32_t desc_index);
enum tpt_sense_reason tpt_dm_status_reason(int status);

/* Disk I/O of a whole range into or out of its pieces. */
typedef void (*tpt_disk_done)(struct tpt_cmd *tc, void *ctx,
			      enum tpt_sense_reason r);
void tpt_disk_range(struct tpt_cmd *tc, struct tpt_range *r, bool write,
		    bool sync, tpt_disk_done done, void *ctx);

void tpt_disk_pieces(struct tpt_cmd *tc, struct tpt_range *r,
		     unsigned int first, unsigned int count, bool write,
		     bool sync, tpt_disk_done done, void *ctx);

/* Ranges for the command's LBA range, all or nothing: *@a, where its
 * transfer list's bytes land (every pass of a READ PARITY list, back to
 * back, protocol.md 5.1), in the slots from @slot_a (TPT_SLOT_NONE:
 * private) and, when @b is not NULL, *@b in those from @slot_b.  A sense
 * reason on failure. */
int tpt_cmd_alloc_ranges(struct tpt_cmd *tc, uint16_t slot_a,
			 struct tpt_range **a, uint16_t slot_b,
			 struct tpt_range **b);
/* @r from tpt_range_alloc() for the command's RESULT SLOT: an INVALID
 * FIELD IN PARAMETER LIST gets the field pointer protocol.md 8.2 gives
 * it.  Returns @r. */
int tpt_cmd_result_slot_sense(struct tpt_cmd *tc, int r);
/*
 * The inputs of a command that brings data in, side by side: Get_Data of
 * its transfer list into @fetched and, when @medium is not NULL, a read
 * of its LBA range from the medium into @medium (XDWRITE's old data, XOR
 * MEDIUM's operand).  @finish runs once both have ended, with the first
 * failure in tc->failure.
 */
void tpt_cmd_fetch_and_read(struct tpt_cmd *tc, struct tpt_range *fetched,
			    struct tpt_range *medium,
			    void (*finish)(struct tpt_cmd *tc));

/* Take the command's group (held until completion); a sense reason when it
 * does not exist (and !create) or was released. */
int tpt_cmd_use_group(struct tpt_cmd *tc, enum tpt_group_kind kind,
		      bool create);
bool tpt_lu_busy(const struct tpt_lu *tlu);
/* Stop every command of @g at its next step, failing it with @reason. */
void tpt_group_abort_cmds(struct tpt_group *g, enum tpt_sense_reason reason);
/* Every command of @s in flight ends with @reason at its next step. */
void tpt_session_abort_cmds(struct tpt_session *s,
			    enum tpt_sense_reason reason);

/*
 * Handlers return TPT_EXEC_ASYNC once they went asynchronous (they end in
 * exactly one tpt_cmd_complete()), or a tpt_sense_reason to complete at
 * once (TPT_SENSE_NONE: GOOD).
 */
#define TPT_EXEC_ASYNC (-1)
int tpt_exec_report_endpoint(struct tpt_cmd *tc);
int tpt_exec_set_peer_list(struct tpt_cmd *tc);
int tpt_exec_report_slots(struct tpt_cmd *tc);
int tpt_exec_release(struct tpt_cmd *tc);
int tpt_exec_prep_read(struct tpt_cmd *tc);
int tpt_exec_prep_write(struct tpt_cmd *tc);
int tpt_exec_new_data(struct tpt_cmd *tc);
int tpt_exec_write_new_data(struct tpt_cmd *tc);
int tpt_exec_read_parity(struct tpt_cmd *tc);
int tpt_exec_read_medium(struct tpt_cmd *tc);
int tpt_exec_send_result(struct tpt_cmd *tc);

#endif
