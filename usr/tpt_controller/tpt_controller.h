/*
 * The TPT-RAID controller inside tgtd: a LU with backing store "tptraid"
 * is an array over member targets (docs/controller.md, docs/design.md).
 *
 *   bs_tptraid.c     tgt glue: the backing store, SBC semantics of each
 *                    opcode over blocking array I/O on worker threads
 *   array.c          the request path (spans, stripe locks,
 *                    re-planning) and tpt_array_submit()
 *   array_assemble.c assembly from the definition and the state file,
 *                    and teardown
 *   array_members.c  boxes joining: claim, superblock, fence, admit
 *   array_files.c    the state file and the region record, written by
 *                    a thread of their own
 *   member.c         member sessions on tgtd's event loop: connect,
 *                    commands, failure detection, reconnect
 *   recovery.c       background work: rebuild onto a spare, catching a
 *                    returning member up, resync after a crash
 *   replace.c        replace=URL: a member copied onto a spare while
 *                    it serves, which then takes its position over
 *   lost_units.c     units a recovery could not rebuild, recorded as
 *                    lost (md's bad block log) until a write gives them
 *                    back
 *   mode_tpt.c       TPT mode: the level's TPT plans, sent step by step;
 *                    the targets move data and compute parity
 *   mode_baseline.c  Baseline mode: the paper's in-band controller runs
 *                    the level's Baseline plans itself
 *   array_show.c     tgtadm --op show
 *   array_params.c   tgtadm --op update: settings, spares, resync and
 *                    force_recovery
 *   hosts.c          extended hosts: TPT HOST KEY registrations, and
 *                    TPT HOST READ/WRITE, whose data the targets move
 *                    straight to and from the host's memory
 *
 * The RAID level (controller/raid_level.h) and the mode (struct
 * tpt_mode_ops) are each one ops struct; the engine knows neither's
 * details.  Everything here runs on tgtd's event loop except
 * tpt_array_io(), the blocking wrapper the worker threads call.
 *
 * Members are boxes (struct tpt_member: a URL and its session); the
 * layout's positions 0..N-1 are served by boxes (struct tpt_position),
 * and plans name positions.  A spare is a box without a position.
 */
#ifndef __TPT_CONTROLLER_H__
#define __TPT_CONTROLLER_H__

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "list.h"
#include "work.h"
#include "controller/array_spec.h"
#include "controller/member_sb.h"
#include "controller/raid_level.h"
#include "controller/state_file.h"
#include "controller/stripe_set.h"
#include "iser/tpt_dm.h"
#include "scsi/tpt_cdb.h"

struct iscsi_context;
struct scsi_task;
struct scsi_lu;
struct scsi_cmd;
struct tpt_array;

/* Peer id of the controller in the lists it delivers; boxes are 0..n-1,
 * extended hosts from TPT_HOST_PEER_ID_FIRST on. */
#define TPT_CTL_PEER_ID 1000
#define TPT_HOST_PEER_ID_FIRST 0x1000
/* Extended hosts one array serves at once (TPT HOST KEY). */
#define TPT_MAX_HOSTS 64
#define TPT_MAX_BOXES (TPT_SPEC_MAX_MEMBERS + TPT_SPEC_MAX_SPARES)
/* Seconds each of the blocking goodbyes to a member (RELEASE, logout) may
 * take when the array is removed. */
#define MEMBER_STOP_TIMEOUT 2

/* ---- counters (the terms of the paper's Tables I and II) ---- */

struct tpt_array_counters {
	uint64_t reads, writes;			/* host requests */
	uint64_t host_bytes_in, host_bytes_out;	/* data hosts sent / got */
	/* Data extended hosts' requests moved between the host and the
	 * targets, past the controller (TPT HOST READ/WRITE). */
	uint64_t direct_bytes_in, direct_bytes_out;
	uint64_t target_bytes_in;		/* data members sent the controller */
	uint64_t target_bytes_out;		/* data the controller sent members */
	uint64_t bytes_xored;			/* by the controller */
	uint64_t pdus;				/* commands sent to members */
	uint64_t rma_ops;			/* one-sided transfers members started */
	/* Of those, the bytes moved between members (slot to slot), each
	 * transfer once; Table I counts them at both ends. */
	uint64_t peer_bytes;
	/* Pieces of an unmodified host's data the controller moved inside
	 * its commands' PDUs instead (inline data, plain READ in tpt mode;
	 * every member READ and WRITE in baseline mode). */
	uint64_t pdu_moves;
	uint64_t failed;			/* host requests that failed */
	uint64_t replans;			/* spans planned again after a fault */
	uint64_t degraded_spans;		/* spans planned without a member */
	uint64_t member_failures;		/* members found failed */
	uint64_t medium_errors;			/* local read errors served degraded */
	uint64_t medium_repairs;		/* units written back after one */
};

/* ---- member.c ---- */

enum member_link {
	MEMBER_OFFLINE,		/* no session */
	MEMBER_CONNECTING,	/* login, READ CAPACITY */
	MEMBER_ONLINE,
};

struct tpt_member_stats {
	uint64_t cmds;
	uint64_t errors;
};

struct tpt_member {
	struct tpt_array *array;
	unsigned int id;		/* stable: its peer id in peer lists */
	int position;			/* in the layout, or -1: a spare */
	/* Its URL without CHAP secrets: what logs and show print. */
	char url[TPT_SPEC_URL_MAX];
	/* As defined, secrets included: for the login and the state file. */
	char login_url[TPT_SPEC_URL_MAX];
	enum member_link link;
	/* Sessions ended so far: what a TPT target held for us (groups,
	 * slots) lived in one session and is gone with it. */
	unsigned int session;
	struct iscsi_context *iscsi;
	int lun;
	int fd;				/* registered with tgt's event loop */
	int fd_events;			/* what the loop waits for on it */
	/* Writes the commands queued in this round of the event loop
	 * (member_rearm). */
	struct event_data flush;
	/* Commands queued since the last flush, and whether one carries a
	 * data-out: libiscsi writes a command's header and its data-out
	 * with two send()s, and each segment wakes the target. */
	unsigned int flush_cmds;
	bool flush_data_out;
	uint64_t nr_blocks;
	uint32_t block_size;
	struct list_head cmds;		/* commands in flight */
	struct list_head watch_link;	/* every member, for the tick */
	struct list_head fail_link;	/* teardown pending */
	bool failing;
	/* The operator failed it (fail=URL): not connected again until
	 * readd=URL, restarts included (the state file's "held" lines). */
	bool held;
	/* The operator removed it (remove=URL): held, out of the array's
	 * show and its state file; spare=URL reuses the id. */
	bool removed;
	bool unreachable_said;		/* logged once per absence */
	char fail_reason[160];		/* for the log; empty: libiscsi's */
	char said[200];			/* the last failure logged before it
					 * served: not repeated (member.c) */
	time_t nop_sent;		/* monotonic seconds; 0: no NOP in flight */
	/* Bytes came in from the box since the last tick, and the last tick
	 * that found some: it is alive even if its NOP-In waits behind the
	 * data of our reads on a full link. */
	bool heard;
	time_t last_heard;
	time_t nop_answered;		/* when a NOP-In last came back */
	time_t nop_answered_sent;	/* when that NOP-Out had gone */
	time_t next_connect;
	time_t connect_started;
	/* Members that reported this one unreachable over the datamover
	 * while it answered us (member_unreachable()), since when, and
	 * their last report. */
	uint64_t unreached_by;		/* by member id (TPT_MAX_BOXES) */
	time_t unreached_since, unreached_last;
	bool unreached_said;		/* "can lose neither" logged */
	/* Its read errors, halved for each hour without one (read_repair.c),
	 * and when the last came. */
	unsigned int read_errors;
	time_t read_error_at;

	/* The array's view (array.c). */
	bool claimed;			/* the mode named the array to it */
	bool keyed;			/* its LU took the array's key */
	bool sb_read;			/* its superblock is read (sb_status) */
	bool ready;			/* set up: superblock read, mode ready */
	bool fenced;			/* holds the array's reservation */
	bool refused;			/* foreign or unusable: never used */
	struct tpt_member_sb sb;	/* as read when it came online */
	int sb_status;			/* tpt_member_sb_decode()'s answer */
	struct tpt_member_stats stats;
	void *mode_priv;		/* the mode's state for this box */
};

int member_init(struct tpt_array *a, struct tpt_member *m, unsigned int id,
		const char *url);
/* Log out and forget the session (at teardown). */
void member_close(struct tpt_member *m);
/*
 * At a stop: serve @a's members' sessions on a private poll loop until
 * none has a command in flight, or @seconds have passed; then drop the
 * sessions of those that still have, which completes their commands
 * (SCSI_STATUS_CANCELLED).  Whatever sent them is still there for that.
 */
void member_drain(struct tpt_array *a, unsigned int seconds);
/* Start an asynchronous connect of an OFFLINE member. */
void member_connect(struct tpt_member *m);
/* Fail @m (@why for the log, or NULL for libiscsi's error): deferred. */
void member_fail(struct tpt_member *m, const char *why);
/* Whether @what, a failure of ONLINE @m before it served, is news: false
 * when it is what was said last (a box that comes back failing the same
 * way every few seconds is logged once).  Lines so said end in
 * MEMBER_SAID_ONCE. */
bool member_say_once(struct tpt_member *m, const char *what);
#define MEMBER_SAID_ONCE " (said once while it stays so)"
/* Why a member is failed when its LU is bound to another array. */
#define MEMBER_BOUND_ELSEWHERE "its target serves it to another array's " \
	"key only (free it there with tpt=off, tpt=on if that array is gone)"

/* A target reported @m unreachable: ask it for a sign of life now. */
void member_probe(struct tpt_member *m);
/* Of a limit counted from @since (monotonic seconds), the seconds not to
 * count: the last time every member of @a was silent at once and the
 * TCP backoff after it, if @since was before their end. */
time_t member_silence_excused(const struct tpt_array *a, time_t since);
/*
 * Member @from reported member @to unreachable over the datamover (a
 * peer fault naming it, protocol.md 9.1).  @to is probed; if it goes on
 * answering us while such reports keep coming for fail_timeout, the
 * path between the two is what is broken (a partial partition), and
 * re-planning alone would fail the same way until the hosts saw errors:
 * one of the two is failed, the one in more broken pairs, @to on a tie,
 * but never one the array cannot lose (array_may_lose()).
 */
void member_unreachable(struct tpt_member *from, struct tpt_member *to);
/* Serve the members' sessions privately until the array settles. */
void member_wait(struct tpt_array *a, unsigned int seconds);
const char *member_error(const struct tpt_member *m);
const char *member_link_name(enum member_link link);

typedef void (*member_cmd_cb)(struct tpt_member *m, struct scsi_task *task,
			      int status, void *arg);
/* Queue @task on ONLINE @m (takes ownership of it); cb runs once, later,
 * with the SCSI status or a libiscsi one (SCSI_STATUS_CANCELLED when the
 * member failed).  0, or -EIO when the member is not online (cb does not
 * run). */
int member_send(struct tpt_member *m, struct scsi_task *task, void *data_out,
		uint32_t data_out_len, member_cmd_cb cb, void *arg);
/* The same for a raw 16-byte CDB with @len bytes of @data in or out. */
int member_send_cdb(struct tpt_member *m, const uint8_t *cdb, int xfer_dir,
		    void *data, uint32_t len, member_cmd_cb cb, void *arg);

/* member_fence.c: take ONLINE @m for the array whose key is @key (register,
 * preempt our older sessions, reserve WRITE EXCLUSIVE); @done gets 0,
 * -EBUSY when another initiator holds it, or another error. */
typedef void (*member_fence_cb)(struct tpt_member *m, int err);
void member_fence(struct tpt_member *m, uint64_t key, member_fence_cb done);
/* Give the reservation up (a clean stop), blocking. */
void member_unfence_sync(struct tpt_member *m, uint64_t key);

/* member_bind.c: bind ONLINE @m's LU to @a's key with a peer list naming
 * the box alone (Baseline's claim: it needs no datamover peer), or leave
 * it a plain member when it is not a TPT target; done() runs once, with
 * 0 (m->keyed says which), -EACCES when the LU is bound to another array,
 * -ECANCELED or another error. */
void member_bind_alone(struct tpt_array *a, struct tpt_member *m,
		       void (*done)(struct tpt_member *m, int err));
/* Unbind @m (TPT RELEASE ALL UNBIND): it drops what it held for us and
 * is free for another array.  done() runs once, with 0, whatever the box
 * answered. */
void member_unbind(struct tpt_array *a, struct tpt_member *m,
		   void (*done)(struct tpt_member *m, int err));
/* The same, blocking, at the array's stop, for a keyed member online. */
void member_unbind_sync(struct tpt_member *m);

/* ---- modes ---- */

struct tpt_span;

/*
 * How an array moves data and computes parity.  All callbacks run on the
 * event loop.
 */
struct tpt_mode_ops {
	const char *name;		/* "tpt", "baseline" */
	/* Once at assembly: 0 or -errno (logged). */
	int (*setup)(struct tpt_array *a);
	/* At teardown, before the members close; undoes setup. */
	void (*teardown)(struct tpt_array *a);
	/* Optional.  Name the array to ONLINE @m before anything else is
	 * read from it (asynchronous, like member_setup); TPT binds the LU
	 * to the array's key, without which a bound LU refuses us even its
	 * superblock. */
	void (*member_claim)(struct tpt_array *a, struct tpt_member *m,
			     void (*done)(struct tpt_member *m, int err));
	/* Optional.  Undo member_claim for @m, found not to be ours; done
	 * runs once, whatever the box answered. */
	void (*member_unclaim)(struct tpt_array *a, struct tpt_member *m,
			       void (*done)(struct tpt_member *m, int err));
	/* Make ONLINE, claimed, fenced @m usable (asynchronous): done() runs
	 * once, with 0 or -errno, possibly before this returns. */
	void (*member_setup)(struct tpt_array *a, struct tpt_member *m,
			     void (*done)(struct tpt_member *m, int err));
	/* @m's session is gone: forget what the mode kept for it. */
	void (*member_lost)(struct tpt_array *a, struct tpt_member *m);
	/* Start @s, which holds its stripe locks: 0 when started (it ends
	 * in exactly one tpt_span_done()), -EAGAIN when resources are short
	 * now (the engine retries when another span ends). */
	int (*start)(struct tpt_span *s);
	/* Optional: the mode serves extended hosts (hosts.c), whose data
	 * its targets move themselves.  The array's hosts changed: tell the
	 * members (asynchronous); done() runs once, with 0 when every
	 * member online took the news. */
	void (*hosts_changed)(struct tpt_array *a,
			      void (*done)(void *arg, int err), void *arg);
};

extern const struct tpt_mode_ops tpt_mode_tpt;
extern const struct tpt_mode_ops tpt_mode_baseline;

/* ---- array.c ---- */

enum tpt_req_kind {
	TPT_REQ_READ,
	TPT_REQ_WRITE,
	TPT_REQ_SYNC,		/* flush every member's cache */
};

/*
 * One host I/O on the array, of any size: the array's asynchronous API.
 * The caller fills the first fields and calls tpt_array_submit() on the
 * event loop; done() runs once, on the event loop (possibly before
 * tpt_array_submit() returns), with 0 or a negative errno: -ENODATA when
 * the blocks are lost with two members, -EIO otherwise.
 */
/* One piece of an extended host's buffer, under its own STag. */
struct tpt_host_piece {
	uint64_t stag;
	uint64_t rma_addr;		/* of the piece's first byte */
	uint32_t length;		/* bytes, whole blocks */
};

/*
 * Where an extended host's request has its data (TPT HOST READ/WRITE,
 * docs/protocol.md 4.19): the host's own registered buffer, which the
 * targets Put_Data into or Get_Data from.
 */
struct tpt_host_buf {
	int tid;			/* the I_T nexus that sent it */
	uint64_t itn_id;
	uint16_t peer_id;		/* its host's, found at submission */
	uint8_t flags;			/* TPT_XFER_VIRT_ADDR, every piece's */
	/* The request's bytes in order, 1 to TPT_HOST_DESC_MAX pieces:
	 * a host that sends adjacent requests as one command names each
	 * request's buffer (protocol.md 4.19). */
	unsigned int nr_pieces;
	struct tpt_host_piece *piece;
	/* Why a target could not move the data to or from the host: a
	 * passive-peer reason of protocol.md 9.1 (the request's error is
	 * then -ECOMM). */
	enum tpt_sense_reason fault;
};

struct tpt_req {
	enum tpt_req_kind kind;
	uint64_t lba;			/* array blocks */
	uint32_t blocks;
	uint8_t *buf;			/* NULL for a direct request */
	struct tpt_host_buf *direct;	/* an extended host's, or NULL */
	bool fua;			/* write through to the members' media */
	void (*done)(struct tpt_req *r, int result);
	void *priv;
	/* The engine's. */
	struct tpt_array *array;
	uint64_t next;			/* first block not yet done */
	unsigned int pending;		/* SYNC: members outstanding */
	int result;
	/* A READ that failed: the first of its blocks it could not get
	 * (array_span_first_lost()); those before @next were read.  Its
	 * spans are a stripe each once one has met units lost. */
	uint64_t lost_lba;
	bool stripe_at_a_time;
	struct list_head link;
};

void tpt_array_submit(struct tpt_array *a, struct tpt_req *r);

/* Blocking, from a worker thread: tpt_array_submit() on the event loop
 * and wait.  0 or a negative errno. */
int tpt_array_io(struct tpt_array *a, enum tpt_req_kind kind, uint64_t lba,
		 uint32_t blocks, void *buf, bool fua);
/* The same for an extended host's request @r (kind, lba, blocks, fua,
 * direct set), whose result, next and lost_lba it fills in: -ENOKEY when
 * its nexus has no host key registered, -ECOMM when a target could not
 * reach the host's buffer (r->direct->fault says how). */
void tpt_array_io_direct(struct tpt_array *a, struct tpt_req *r);

enum tpt_span_kind {
	TPT_SPAN_READ,
	TPT_SPAN_WRITE,
	TPT_SPAN_REBUILD,	/* rebuild @member's units (recovery.c) */
	TPT_SPAN_CHECK,		/* check stripes, into @buf (check.c) */
};

/*
 * A span: the part of a request (or of background work) that runs at
 * once, holding the stripe locks of its stripes so that no two spans
 * update one stripe's parity together.  A request is one span after
 * another: SCSI promises no atomicity across a command's blocks.
 */
struct tpt_span {
	enum tpt_span_kind kind;
	struct tpt_req *req;		/* READ, WRITE */
	struct tpt_array *array;
	uint64_t lba;
	uint32_t blocks;
	/* Its part of the request's buffer; CHECK: the outcome, of
	 * raid_check_bytes(), which recovery.c owns. */
	uint8_t *buf;
	bool fua;
	uint64_t first_stripe, last_stripe;
	unsigned int member;		/* REBUILD: the position, or RAID_PARITY_MEMBER */
	/* REBUILD: other positions whose units it rebuilds from the same
	 * reads (two boxes lost: recovery.c, rebuild_along()). */
	uint32_t rebuild_also;
	void (*done)(struct tpt_span *s, int result);	/* REBUILD, CHECK */
	/* REBUILD: writes back units its position could not read
	 * (read_repair.c), not recovery's work: 1 for a request or a check,
	 * 2 for another repair (which cannot ask for a third). */
	unsigned int repair;
	void *priv;
	/* Positions planned without, and those failing this span alone
	 * (a local medium error): see array_span_missing(). */
	uint32_t missing, excluded;
	/* WRITE, CHECK, repair: positions whose units of its stripes it
	 * could not read, written back before it is planned again
	 * (read_repair.c), and those it has asked that for already: a
	 * position that still cannot read after its repair is lost there. */
	uint32_t repair_first, repair_asked;
	/* Failed for units lost on more positions than the level gives
	 * back (array_unreadable()): a check counts its stripes unread, a
	 * rebuild or resync steps over them (recovery.c). */
	bool lost_units;
	/* READ of several stripes that met them: gone over again a stripe
	 * at a time, to serve the stripes before them and to tell the host
	 * which block it lost (array_span_first_lost()). */
	bool narrow;
	/* WRITE: the region record generation it waits for, and whether it
	 * counts among its regions' writes in flight (array_files.c). */
	uint64_t need_gen;
	bool intent_counted;
	unsigned int attempts;
	/* A step that writes to a medium has gone out for it: it may have
	 * left a stripe written on some members and not on others. */
	bool wrote;
	/* On the retry list because a target was short of buffers: tried
	 * again when the next span ends (array.c). */
	bool short_of_buffers;
	/* REBUILD: a batch of replace=URL's job, which writes @member's
	 * units to the replacing spare, not to the box serving the
	 * position (array_span_box()). */
	bool replacing;
	/* A batch of a replace that copies the units from the box leaving
	 * the position (tpt_plan_copy()), named in its plan by position
	 * nr_members (array_span_box()), rather than rebuilding them from
	 * the others; cleared where that box cannot read them, and the
	 * batch is planned again as a rebuild (array_unreadable()). */
	bool copying;
	struct timespec first_try;
	struct list_head link;		/* array's running or waiting list */
};

/* Whether @s is recovery.c's work, not a request's: its done() gets the
 * result. */
static inline bool tpt_span_background(const struct tpt_span *s)
{
	return s->kind == TPT_SPAN_REBUILD || s->kind == TPT_SPAN_CHECK;
}

/*
 * The mode ends a span: 0, or the error of its last attempt.  With
 * @retry the span is planned again - after a member failed under it, a
 * group was released, a target was short of buffers - unless it has
 * tried long enough; otherwise its request sees the error.
 */
void tpt_span_done(struct tpt_span *s, int result, bool retry,
		   const struct tpt_array_counters *delta);
/* Positions whose boxes do not hold @stripe's units as they should. */
uint32_t array_missing_at(struct tpt_array *a, uint64_t stripe);
/* Of those, the positions whose box is not there or not in sync there:
 * not counting units recorded lost, nor a parity that may be stale. */
uint32_t array_absent_at(struct tpt_array *a, uint64_t stripe);
/* The positions of @stripe's parity units (none in a mirror). */
uint32_t array_stripe_parity(const struct tpt_array *a, uint64_t stripe);
/* Whether a member's failed command under @s is said by other lines. */
bool array_failure_quiet(const struct tpt_span *s,
			 const struct scsi_task *task, int status);
/* The first block of failed READ span @s that its stripe cannot give. */
uint64_t array_span_first_lost(const struct tpt_span *s);
/* Positions @s must be planned without, computed when it starts. */
uint32_t array_span_missing(const struct tpt_span *s);
/* The box serving position @pos, or NULL. */
struct tpt_member *array_position_member(struct tpt_array *a, unsigned int pos);
/* Whether @m is a spare set up and online, to be rebuilt onto. */
bool array_spare_ready(const struct tpt_member *m);
/* The box @s sends position @pos's commands to: the position's, or for a
 * batch of a replace (s->replacing) the spare it writes, and for one that
 * copies (s->copying) the box leaving the position at @pos nr_members;
 * NULL when none (a replace ended meanwhile). */
struct tpt_member *array_span_box(const struct tpt_span *s, unsigned int pos);
/* How many positions @s's plan may name: nr_members, one more for a
 * replace's copy. */
unsigned int array_span_positions(const struct tpt_span *s);
/* Queue a span of background work (recovery.c). */
void array_queue_span(struct tpt_array *a, struct tpt_span *s);
/* Ahead of every span waiting: the first to take its stripes. */
void array_queue_span_first(struct tpt_array *a, struct tpt_span *s);
/* A span of background work over stripes [@first, @first + @n) for
 * position @member (RAID_PARITY_MEMBER: every position, or parity),
 * ending in @done; NULL when out of memory. */
struct tpt_span *array_background_span(struct tpt_array *a,
				       enum tpt_span_kind kind,
				       unsigned int member, uint64_t first,
				       uint64_t n,
				       void (*done)(struct tpt_span *, int));

/* member.c's reports */
void array_member_online(struct tpt_array *a, struct tpt_member *m);
void array_member_lost(struct tpt_array *a, struct tpt_member *m,
		       bool was_online);
/* Membership changed: a new event count, in every current superblock. */
void array_new_event(struct tpt_array *a);
/* Whether members are still connecting or setting up (assembly). */
bool array_settling(const struct tpt_array *a);

/* array_members.c, for assembly: the next step of online @m once the
 * superblocks have said which array this is (claim it, or reserve and
 * set it up); what its superblock makes of set-up @m (m->refused when
 * nothing); give refused @m back and drop it. */
void array_member_advance(struct tpt_array *a, struct tpt_member *m);
void array_member_admit(struct tpt_array *a, struct tpt_member *m);
void array_member_refuse(struct tpt_array *a, struct tpt_member *m);
/* Position @p's box has not come by the end of assembly: the box can
 * catch up when it comes (array_members.c). */
void array_position_absent(struct tpt_array *a, unsigned int p);
/* array.c: start the waiting spans that may start now. */
void array_run_waiting(struct tpt_array *a);
/* array.c, for array_assemble.c: a new array's request queues and
 * counters' locks; the spans to plan again are tried
 * every second for a started array (-ENOMEM), until it is removed (no
 * error if it was not added); its requests' eventfd woke (tgt event
 * handler); the bytes of a position's missed_fine map. */
void array_requests_init(struct tpt_array *a);
int array_retry_add(struct tpt_array *a);
void array_retry_remove(struct tpt_array *a);
void array_submitted(int fd, int events, void *data);
size_t array_missed_fine_bytes(const struct tpt_array *a);
/* Record in position @p's missed map the regions of every span that has
 * written and not ended (running, or to be planned again): it may have
 * written some members of a stripe and not the box @p just lost.  One
 * that has not written yet is planned again without @p, and its regions
 * are marked then, if it can be planned; a rebuild of another position
 * leaves @p's units as they were. */
void array_spans_missed(struct tpt_array *a, unsigned int p);
/* member_fail() of @m: its position's missed map starts now. */
void array_member_failing(struct tpt_array *a, struct tpt_member *m);
/* A command to @m failed in a way only @m can be blamed for. */
void array_member_error(struct tpt_array *a, struct tpt_member *m,
			const char *why);
/*
 * @m, serving position @pos, could not read its medium for @s (MEDIUM
 * ERROR): the span's error, -ESTALE to plan it again (*@retry) - a READ or
 * a recovery without the position, a WRITE that has written nothing, a
 * CHECK or a repair after its units there are written back
 * (read_repair.c); -EIO without a retry where the stripes lack more units
 * than the level gives back then; -EIO where the member is failed (the
 * rest, unless the array cannot lose it).
 */
int array_unreadable(struct tpt_span *s, struct tpt_member *m,
		     unsigned int pos, bool *retry);
/* A READ(16) of @s to @m, serving position @pos, ended with @status and
 * @task's SBC sense (both modes send plain reads): the span's error, and
 * in *@retry whether planning it again may cure that. */
int array_read_failed(struct tpt_span *s, struct tpt_member *m,
		      unsigned int pos, const struct scsi_task *task,
		      int status, bool *retry);

enum tpt_pos_state {
	TPT_POS_IN_SYNC,
	TPT_POS_MISSING,	/* its data is not on any box */
	TPT_POS_RECOVERING,	/* a box is catching up (recovery.c) */
};

struct tpt_position {
	int member;			/* the box serving it, or -1 */
	enum tpt_pos_state state;
	/* RECOVERING: catching up on what its box missed (else rebuilt in
	 * full); either way it is in sync where missed_fine says so. */
	bool catch_up;
	/* Regions written while the position had no usable box: what a
	 * returning box missed (a bit per recovery region), valid when the
	 * array has kept it since the position went missing at event
	 * missing_since (not across a restart of the controller). */
	uint8_t *missed;
	bool missed_valid;
	uint64_t missing_since;
	/* What the position's box lacks, a bit per fine_stripes stripes:
	 * the stripes written without it (array_mark_missed()), every
	 * stripe when it is rebuilt in full; recovery clears the bits it
	 * has done.  The regions are what the record file keeps; after a
	 * restart their stripes count as missed whole. */
	uint8_t *missed_fine;
	/* Its recovery last stopped at this stripe, plus one (0: it did
	 * not): trying again every few seconds logs that once. */
	uint64_t stalled_at;
	/* Stripes whose unit here a recovery could not rebuild
	 * (lost_units.c): never read from the box, in any state. */
	struct stripe_set lost;
};

/* Stripes per region of the missed-write record. */
#define TPT_RECOVERY_REGION_STRIPES 64
/* A bit of a fine missed map stands for one stripe up to 8M stripes
 * (1 MiB a map), beyond for a power of two of them, at most the
 * recovery's batch, so that a batch always covers whole bits. */
#define TPT_MISSED_FINE_MAX_BITS (8u << 20)
#define TPT_MISSED_FINE_MAX_STRIPES 16

/* A fine map (a bit per fine_stripes stripes): whether it has @stripe;
 * set the bits of stripes [@first, @last]; clear stripes [@first, @end),
 * which start and end on bits (recovery batches do) or at the last
 * stripe. */
bool array_fine_has(const struct tpt_array *a, const uint8_t *map,
		    uint64_t stripe);
void array_fine_set(const struct tpt_array *a, uint8_t *map, uint64_t first,
		    uint64_t last);
void array_fine_clear(const struct tpt_array *a, uint8_t *map,
		      uint64_t first, uint64_t end);
/* Mark stripes [@first, @last] missed by position @p's box in both maps,
 * true when a region bit changed; set the fine bits of the regions the
 * region map has (after loading it). */
bool array_mark_missed(struct tpt_array *a, unsigned int p, uint64_t first,
		       uint64_t last);
void array_missed_from_regions(struct tpt_array *a, unsigned int p);
/* Position @p's box lacks every stripe (a rebuild in full), or none. */
void array_missed_all(struct tpt_array *a, unsigned int p, bool lacks);

/* The stripes of @regions (a bit per recovery region) get their parity
 * computed from their data by a resync; @stale: it may disagree with
 * data a host wrote there (writes were in flight at a crash), rather
 * than with contents nobody wrote (a new array's).  -ENOMEM. */
int array_unsynced_add(struct tpt_array *a, const uint8_t *regions,
		       bool stale);
/* The resync has computed the parity of stripes [@first, @end). */
void array_unsynced_done(struct tpt_array *a, uint64_t first, uint64_t end);
/* The resync is over (or the array goes). */
void array_unsynced_free(struct tpt_array *a);

enum tpt_array_state {
	TPT_ARRAY_OPTIMAL,
	TPT_ARRAY_DEGRADED,
	TPT_ARRAY_REBUILDING,
	TPT_ARRAY_RESYNCING,
	TPT_ARRAY_FAILED,
};
const char *tpt_array_state_name(enum tpt_array_state st);
enum tpt_array_state tpt_array_state(const struct tpt_array *a);
/* Whether @a would still serve every stripe without @m. */
bool array_may_lose(const struct tpt_array *a, const struct tpt_member *m);
/* Whether a stripe lacking the positions in @lacking is beyond what the
 * level rebuilds. */
bool array_lacks_too_many(const struct tpt_array *a, uint32_t lacking);
/* CLOCK_MONOTONIC seconds, for the controller's timeouts and budgets. */
time_t tpt_now_s(void);

/* ---- array_files.c ---- */

/* Open (creating) PATH.regions and load the record: 0 with the regions
 * whose writes may not have finished (to resync) set in @dirty; all of
 * them when an array that is not new has no record of its own.  A new
 * array's record is written before this returns, every region marked
 * unless assume_clean (its first resync). */
int array_files_open(struct tpt_array *a, const char *path, uint8_t *dirty);
void array_files_close(struct tpt_array *a);
/* Ask for the state file to be written as the array now stands. */
void array_save_state(struct tpt_array *a);
/* The same, written and synced before returning (0 or -errno, logged): at
 * assembly, so that tgtadm's answer comes once the array's key is on
 * disk.  The file's thread must have nothing of it queued. */
int array_save_state_now(struct tpt_array *a);
/* A new array's state file at @path, written and synced before its
 * members are claimed with its key ("creating yes": a crash from then on
 * leaves the key and the id on disk, and the next start creates the
 * array again with them).  0 or -errno, logged. */
int array_save_state_creating(struct tpt_array *a, const char *path);
/* The region record changed (a position went missing, a map was cleared):
 * write it, nothing waits for it. */
void array_regions_changed(struct tpt_array *a);
/* Every region marked in the record, for a resync of the whole array (a
 * first resync, a lost record, the operator's resync=yes): kept marked
 * until the resync has done it, so a restart goes on with the rest. */
void array_intent_mark_all(struct tpt_array *a);
/* Before a WRITE span starts: mark its regions (and, for the positions it
 * misses, their missed maps); true when it must wait for that to be
 * durable - it is parked and queued again then. */
bool array_intent_hold(struct tpt_array *a, struct tpt_span *s);
/* A WRITE span ended (or will be planned again). */
void array_intent_release(struct tpt_array *a, struct tpt_span *s);

/* ---- read_repair.c ---- */

/* The units of @s's stripes on the positions of @positions, which could
 * not be read for it, are written back from the others, before any other
 * span takes those stripes. */
void read_repair_queue(struct tpt_array *a, const struct tpt_span *s,
		       uint32_t positions);

/* ---- recovery.c ---- */

/* Recovery batches that may be in flight at once: while one waits on a
 * step, the next ones keep the other links and disks busy. */
#define TPT_RECOVERY_BATCHES 4

/* What a check found in some stripes. */
struct tpt_check_tally {
	uint64_t mismatches;		/* stripes whose redundancy disagrees */
	/* Of those, the ones a single wrong unit explains, per position
	 * holding it (raid_check_locate(): RAID-6, mirrors of 3 or more). */
	uint64_t located[TPT_SPEC_MAX_MEMBERS];
	/* Of those, the ones resync=yes would keep wrong (recovery.c,
	 * resync_keeps()). */
	uint64_t located_kept;
	/* Stripes it could not read: units lost on more positions than
	 * the level gives back (not kept in the state file). */
	uint64_t unreadable;
};

/* An online check's figures (check=yes), running or the last one's. */
struct tpt_check {
	uint64_t checked, total;	/* stripes */
	struct tpt_check_tally found;
	/* How it ended, "completed" or "stopped at stripe S: WHY"; ""
	 * while it runs. */
	char end[96];
	/* Where it went on after a restart or a box's loss had stopped
	 * it, and which ("a restart"); NULL when it began at stripe 0
	 * (checked and found include what it found before). */
	uint64_t resumed_at;
	const char *resumed_after;
};

/* A batch of the running check that ended ahead of the stripes before
 * it (check.c, recovery_check_advance()). */
struct tpt_check_ahead {
	uint64_t first, stripes;
	struct tpt_check_tally found;
};

struct tpt_recovery {
	bool active;
	/* The running job is a check: it goes over every stripe, writes
	 * nothing, and counts mismatches (position RAID_PARITY_MEMBER). */
	bool check;
	struct tpt_check checking;	/* the running check's figures */
	/* The last one's, until the next; its end is "" when none ran. */
	struct tpt_check last_check;
	unsigned int position;		/* or RAID_PARITY_MEMBER */
	bool catch_up;			/* only the stripes its box missed */
	/* The job is a replace's (replace.c): it rebuilds @position onto
	 * the spare of a->replace while the position's box serves. */
	bool replace;
	/* The running resync is of a mirror of three or more copies: its
	 * batches are checks, and only copies that differ are written
	 * (check.c, recovery_vote_repair()); the stripes with an odd copy out
	 * and those whose copies differed with no majority so far. */
	bool vote;
	uint64_t voted_odd, voted_none;
	uint64_t next;			/* next stripe to recover */
	uint64_t done_stripes, total_stripes;
	/* Stripes stepped over because another position lacks them too
	 * (a resync: a member cannot read them, and their parity may not
	 * match their data), and the first of them: the job is not done
	 * until they are. */
	uint64_t skipped, first_skipped;
	uint32_t skipped_missing;
	/* The parity resync's pos[].stalled_at. */
	uint64_t resync_stalled_at;
	struct timespec started;
	unsigned int in_flight;		/* batches, TPT_RECOVERY_BATCHES at most */
	/* recovery_kick() looks for a position to recover from here on. */
	unsigned int kick_from;
	struct tgt_work timer;		/* the rate limit's pause */
	bool paused;
	/* Done, but for the state file to hold the units it recorded lost
	 * (recovery_lost_saved()). */
	bool lost_wait;
	/* Where and why the last job stopped before its end ("stripe S:
	 * WHY"), for the log and show; "" when it did not. */
	char stopped[224];
	/*
	 * A check to go on with once the array is optimal again (the state
	 * file's "check" line): the stripes before @kept_from were
	 * checked, and @kept says what was found in them.  Kept while a
	 * check runs (saved every CHECK_SAVE_SECONDS) and when the array
	 * stops or a member's box is lost under it (@kept_by says which);
	 * dropped when it ends any other way.  Its batches end out of
	 * order: those ahead of @kept_from wait in @ahead.
	 */
	bool check_kept;
	const char *kept_by;
	uint64_t kept_from;
	struct tpt_check_tally kept;
	struct tpt_check_ahead ahead[TPT_RECOVERY_BATCHES];
	unsigned int nr_ahead;
	struct timespec kept_saved;
};

/* Start whatever the array's state calls for, if nothing runs. */
void recovery_kick(struct tpt_array *a);
/* Where @position's recovery (RAID_PARITY_MEMBER: the parity resync)
 * last stopped, plus one; 0 when it did not. */
uint64_t *recovery_stalled_at(struct tpt_array *a, unsigned int position);
/* At assembly: the state file keeps a check a restart (or a box's loss
 * before it) stopped, to go on with from stripe @from once the array is
 * optimal with nothing else to do. */
void recovery_check_kept(struct tpt_array *a, uint64_t from,
			 const struct tpt_check_tally *found);
/* Whether region @r still awaits its parity resync: its intent bit stays. */
bool recovery_keeps_region(const struct tpt_array *a, uint64_t r);
void recovery_stop(struct tpt_array *a);
/* The operator's force_recovery=yes: stripes that lack more than the
 * parity can give back are taken as they are - a returning box's unit
 * as it holds it, a parity that may not match the data as it is -
 * logging which blocks may not be what was written (md's --force). */
void recovery_force(struct tpt_array *a);
/* The array's unsynced map grew (the operator's resync=yes): a parity
 * resync running goes over it from the start again, else one starts
 * when the array can. */
void recovery_resync_grew(struct tpt_array *a);
/* The operator's check=yes: go over every stripe online, host I/O going
 * on, at rebuild_rate, counting the stripes whose parity (or copies)
 * disagree with their data, repairing nothing (md's "check").  0, or
 * -EBUSY when a position is not in sync or another job runs (@why says
 * which). */
int recovery_check_start(struct tpt_array *a, char *why, size_t len);
/* check=stop: the running check ends where it is; false when none runs. */
bool recovery_check_stop(struct tpt_array *a);
/* "NN.N% ETA Ns R MB/s", or "" when nothing runs. */
void recovery_progress(const struct tpt_array *a, char *buf, size_t len);
/* The state file now holds the record of lost units as it stands: a
 * rebuild that waited for that to end ends. */
void recovery_lost_saved(struct tpt_array *a);

/* ---- replace=URL (replace.c) ---- */

/*
 * A member replaced while it serves (md's --replace): a spare is rebuilt
 * into its position from the other positions, the box going on serving
 * it, so the array never runs degraded.  The spare gets no host write:
 * one that reaches a stripe it has done marks the stripe to do again,
 * and the job goes over what is marked until nothing is, the last pass
 * holding new writes back.  Then the spare takes the position over and
 * the old box is failed and held out.
 */
struct tpt_replace {
	bool active;
	unsigned int position;
	unsigned int old, spare;	/* member ids */
	/* Stripes the spare lacks, a bit per fine_stripes (as missed_fine). */
	uint8_t *lacks;
	unsigned int pass;		/* 1: the first, over every stripe */
	/* Stripes copied from the old box; the others were rebuilt from
	 * the other positions (its units there lost, or unreadable). */
	uint64_t copied;
	bool hold;			/* new host writes wait: the last pass */
	struct timespec hold_since;
	/* Kept in the state file by a controller that stopped during it:
	 * to begin again once the array and the spare are there
	 * (replace_resume()); position and spare set, nothing else. */
	bool pending;
};

/* replace=URL (from array_params.c): the operator's request for @m. */
int replace_start(struct tpt_array *a, struct tpt_member *m);
/* The same for a member that keeps losing sectors (read_repair.c), as
 * md replaces a device that wants replacement: true if a replace of @m
 * runs now (begun here, or already), false if none can (no spare ready,
 * the array not whole, another replace running), with nothing said. */
bool replace_failing(struct tpt_array *a, struct tpt_member *m,
		     const char *why);
/* Assembly: the state file keeps a replace of @position by box @spare;
 * recovery_kick() begins it again with replace_resume() when it can. */
void replace_pending(struct tpt_array *a, unsigned int position,
		     unsigned int spare);
void replace_resume(struct tpt_array *a);
/* @m is failing or lost: a replace it takes part in, or whose array
 * then lacks a box, ends, its spare a spare again - but for the loss of
 * the box being replaced, whose position the spare then takes over,
 * rebuilt in what it still lacks. */
void replace_member_lost(struct tpt_array *a, struct tpt_member *m);
/* The replace ends unfinished (@why for the log), or at teardown. */
void replace_cancel(struct tpt_array *a, const char *why);
/* WRITE span @s may start: false while its last pass holds new writes
 * back.  replace_write_starts() marks its stripes for the spare. */
bool replace_write_may_start(const struct tpt_array *a,
			     const struct tpt_span *s);
void replace_write_starts(struct tpt_array *a, const struct tpt_span *s);
/* For recovery.c's job: a batch of stripes [@first, @first + @n) ended
 * with @result (false: the replace ended); another pass over the @left
 * stripes writes marked meanwhile (false: none is left); the spare takes
 * the position over. */
bool replace_batch_ended(struct tpt_array *a, uint64_t first, uint64_t n,
			 int result);
bool replace_next_pass(struct tpt_array *a, uint64_t left);
void replace_finish(struct tpt_array *a);

/* ---- lost units (lost_units.c) ---- */

/* The positions whose unit of @stripe is recorded lost. */
uint32_t array_lost_at(const struct tpt_array *a, uint64_t stripe);
/* Records position @p's unit of @stripe as lost, which the positions of
 * @blockers could not help rebuild: false when the record is full. */
bool array_lost_record(struct tpt_array *a, unsigned int p, uint64_t stripe,
		       uint32_t blockers);
/* Position @p's units of stripes [@first, @end) are rebuilt. */
void array_lost_done(struct tpt_array *a, unsigned int p, uint64_t first,
		     uint64_t end);
/* A recovery of @p goes over its lost units again. */
void array_lost_to_missed(struct tpt_array *a, unsigned int p);
/* Host write span @s succeeded: the lost units of the stripes it wrote
 * whole are written back from the others. */
void array_lost_written(struct tpt_array *a, const struct tpt_span *s);
/* From and into the state file. */
void array_lost_load(struct tpt_array *a, const struct tpt_state *st);
void array_lost_save(const struct tpt_array *a, struct tpt_state *st);
/* Whether the state file on disk holds the record as it stands. */
bool array_lost_durable(const struct tpt_array *a);
void array_lost_free(struct tpt_array *a);

struct tpt_array {
	struct scsi_lu *lu;
	struct tpt_array_spec spec;
	char *spec_text;		/* --bsopts as given: the definition */
	const struct raid_level_ops *level;
	const struct tpt_mode_ops *mode;
	void *mode_priv;
	struct raid_geometry geo;
	uint32_t block_size;
	unsigned int nr_members;	/* N: positions */
	unsigned int nr_boxes;		/* members and spares */
	struct tpt_member member[TPT_MAX_BOXES];
	struct tpt_position pos[TPT_SPEC_MAX_MEMBERS];
	uint64_t array_id;
	/* The array's secret, in every peer list: targets serve the array
	 * only to nexuses that deliver it (docs/protocol.md 5.5).  Kept in
	 * the state file, so a restarted controller has it again. */
	uint8_t array_key[TPT_ARRAY_KEY_LEN];
	uint64_t event;			/* membership changes so far */
	uint64_t nr_stripes, nr_regions;
	uint64_t fine_stripes;		/* stripes per bit of missed_fine */
	/* Lost units of every position (lost_units.c), and a count of the
	 * record's changes: the state file holds it once saved_lost_gen
	 * (array_files.c) has caught up. */
	unsigned int nr_lost;
	uint64_t lost_gen;
	bool lost_full_said;
	/* Stripes whose parity a resync has yet to compute from their data
	 * (recovery.c), and of those the ones where it may disagree with
	 * data a host wrote: after a crash with writes in flight, or written
	 * on a new array ahead of its first resync.  A box missing there
	 * makes its units unknown, not rebuildable (array_missing_at()).
	 * Fine maps; NULL when no resync is due. */
	uint8_t *unsynced, *parity_stale;
	unsigned int fail_timeout;	/* seconds without an answer */
	/* When a member was last heard, and the last time every member was
	 * silent at once (member.c): its end, when one was heard again,
	 * and its length.  Monotonic seconds; 0: never. */
	time_t heard_last, silence_end, silence_len;
	unsigned int rebuild_rate;	/* MB/s, 0: unthrottled */
	/* Set with tgtadm since creation: kept in the state file, where
	 * they win over the definition's values at the next assembly. */
	bool fail_timeout_tuned, rebuild_rate_tuned;
	bool known;			/* array_id and array_key decided */
	bool identified;		/* ... and the event */
	bool assembled;			/* geometry known, serving I/O */
	/* The assembly succeeded: only then does the record's last copy
	 * at teardown clear its intent bits.  A refused start leaves the
	 * record as it found it, for the next attempt to resync. */
	bool started;
	unsigned int sb_writes;		/* superblock writes in flight */
	bool fresh;			/* a new array: its parity is not yet known */
	bool stopping;
	struct tpt_recovery recovery;
	struct tpt_replace replace;

	/* Worker threads queue requests here; the event loop takes them. */
	pthread_mutex_t submit_lock;
	struct list_head submitted;
	int efd;

	struct list_head running;	/* spans holding stripe locks */
	struct list_head waiting;	/* spans in arrival order */
	struct list_head retrying;	/* spans waiting out a backoff */
	struct list_head intent_waiting;	/* WRITE spans: regions being marked */
	bool starved;			/* a waiting span lacks the mode's resources */
	/* Spans that may run at once (array.c): halved when a member is
	 * short of buffers, grown by one with every span that completes. */
	unsigned int running_cap;
	bool draining, redrain;		/* run_waiting() re-entry */

	/* The region record (array_files.c): intent bits, the generation
	 * of each region's last change, writes in flight per region; and
	 * of the regions a new array's first resync has yet to do, those
	 * no host has written (unwritten, kept across a restart). */
	struct array_files *files;
	uint8_t *intent, *unwritten;
	uint64_t *region_gen;
	uint32_t *region_inflight;
	time_t *region_idle_since;
	uint64_t change_gen;

	pthread_mutex_t counters_lock;	/* show reads, the loop writes */
	struct tpt_array_counters counters;

	/* Extended hosts (hosts.c), in ascending peer id order. */
	struct list_head hosts;
	unsigned int nr_hosts;
	uint16_t next_host_id;
	struct list_head hosts_link;	/* arrays with hosts.c's attention */
};

/* ---- hosts.c ---- */

/* An extended host: what its TPT HOST KEY said, for the I_T nexus that
 * sent it.  Targets know it as a role-host entry of the peer list. */
struct tpt_host {
	struct list_head link;		/* a->hosts */
	int tid;
	uint64_t itn_id;
	uint16_t peer_id;
	struct tpt_endpoint ep;		/* where its datamover listens */
	uint8_t key[TPT_AUTH_TOKEN_LEN];
};

/* For an array whose mode serves extended hosts: its LU takes TPT HOST
 * KEY, TPT HOST READ and TPT HOST WRITE (cmd_perform on the event loop;
 * the I/O then runs on the backing store's workers, as READ and WRITE
 * do). */
void tpt_hosts_attach(struct tpt_array *a);
/* At teardown: forget every host. */
void tpt_hosts_detach(struct tpt_array *a);
/* TPT HOST READ/WRITE @cmd, checked already, as the array request @r
 * with the host's buffer in @hb (0); -1 when memory ran out, @cmd's
 * answer set. */
int tpt_hosts_io_req(struct tpt_array *a, struct scsi_cmd *cmd,
		     struct tpt_req *r, struct tpt_host_buf *hb);
/* @cmd's answer from its request @r (tpt_hosts_io_req), r->result set;
 * frees what tpt_hosts_io_req() allocated in r->direct. */
void tpt_hosts_io_answer(struct scsi_cmd *cmd, const struct tpt_req *r);
/* A worker thread's part of TPT HOST READ/WRITE, checked already: the
 * same from tpt_array_io_direct(). */
void tpt_hosts_io(struct tpt_array *a, struct scsi_cmd *cmd);
/* bs_tptraid.c: the sense of an array I/O that failed with @err, as a
 * single disk reports a READ (@write false) or WRITE it could not do. */
void tptraid_io_error(struct scsi_cmd *cmd, int err, bool write);
/* The same for a READ (or TPT HOST READ) @r, with the first block it
 * could not get and, for a READ, the blocks before it as Data-In. */
void tptraid_read_error(struct scsi_cmd *cmd, const struct tpt_req *r);
/* On the event loop: the peer id of @hb's host (0), or -ENOKEY. */
int tpt_hosts_resolve(struct tpt_array *a, struct tpt_host_buf *hb);

struct tpt_state;
/*
 * Assemble the array @spec defines (@spec_text as --bsopts gave it),
 * whose files are at @path; @state is what the state file there says, or
 * NULL for a new array.  0 or -errno, logged.
 */
int tpt_array_create(struct scsi_lu *lu, const struct tpt_array_spec *spec,
		     const char *spec_text, const struct tpt_state *state,
		     const char *path, struct tpt_array **out);
void tpt_array_destroy(struct tpt_array *a);
uint64_t tpt_array_bytes(const struct tpt_array *a);
void tpt_array_get_counters(struct tpt_array *a, struct tpt_array_counters *out);
void tpt_array_count(struct tpt_array *a, const struct tpt_array_counters *d);
/* tgtadm --op update --params (array_params.c): spare=URL,
 * rebuild_rate=MB/s, fail_timeout=s, and the actions force_recovery=yes,
 * resync=yes and check=yes|stop.
 * TGTADM_UNKNOWN_PARAM for keys that are not ours. */
int tpt_array_param(struct tpt_array *a, const char *key, const char *value);

/* The array of a tptraid LU, or NULL for any other LU (bs_tptraid.c). */
struct tpt_array *tptraid_array_of(struct scsi_lu *lu);

#endif
