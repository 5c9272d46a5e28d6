/*
 * The TPT-RAID controller inside tgtd: a LU with backing store "tptraid"
 * is an array over member targets (docs/controller.md, docs/design.md).
 *
 *   bs_tptraid.c     tgt glue: the backing store, SBC semantics of each
 *                    opcode over blocking array I/O on worker threads
 *   array.c          assembly, the request path (spans, stripe locks) and
 *                    tpt_array_submit(), the array's asynchronous API
 *   member.c         member sessions: libiscsi on tgtd's event loop
 *   mode_tpt.c       TPT mode: the level's TPT plans, sent step by step;
 *                    the targets move data and compute parity
 *   mode_baseline.c  Baseline mode: the paper's in-band controller runs
 *                    the level's Baseline plans itself
 *   array_show.c     tgtadm --op show
 *
 * The RAID level (controller/raid_level.h) and the mode (struct
 * tpt_mode_ops) are each one ops struct; the engine knows neither's
 * details.  Everything here runs on tgtd's event loop except
 * tpt_array_io(), the blocking wrapper the worker threads call.
 */
#ifndef __TPT_CONTROLLER_H__
#define __TPT_CONTROLLER_H__

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "list.h"
#include "controller/array_spec.h"
#include "controller/raid_level.h"
#include "iser/tpt_dm.h"
#include "scsi/tpt_cdb.h"

struct iscsi_context;
struct scsi_task;
struct scsi_lu;
struct tpt_array;

/* Peer id of the controller in the lists it delivers; members are 0..N-1. */
#define TPT_CTL_PEER_ID 1000

/* ---- counters (the terms of the paper's Tables I and II) ---- */

struct tpt_array_counters {
	uint64_t reads, writes;			/* host requests */
	uint64_t host_bytes_in, host_bytes_out;	/* data hosts sent / got */
	uint64_t target_bytes_in;		/* data members sent the controller */
	uint64_t target_bytes_out;		/* data the controller sent members */
	uint64_t bytes_xored;			/* by the controller */
	uint64_t pdus;				/* commands sent to members */
	uint64_t rma_ops;			/* one-sided transfers members started */
	uint64_t failed;			/* host requests that failed */
};

/* ---- member.c ---- */

struct tpt_member_stats {
	uint64_t cmds;
	uint64_t errors;
};

struct tpt_member {
	struct tpt_array *array;
	unsigned int index;		/* position in the layout */
	char url[TPT_SPEC_URL_MAX];
	struct iscsi_context *iscsi;
	int lun;
	int fd;				/* registered with tgt's event loop */
	bool up;
	uint64_t nr_blocks;
	uint32_t block_size;
	struct tpt_member_stats stats;
	void *mode_priv;		/* the mode's state for this member */
};

/* Log in and read the capacity (synchronously, at assembly): 0 or -errno,
 * logged. */
int member_open(struct tpt_array *a, struct tpt_member *m);
/* Start serving @m from the event loop. */
void member_watch(struct tpt_member *m);
/* Log out and free (synchronously, at teardown). */
void member_close(struct tpt_member *m);

/* A command on a set-up member, synchronously: the task with GOOD status
 * (the caller frees it), or NULL, logged. */
struct scsi_task *member_command_sync(struct tpt_member *m, const uint8_t *cdb,
				      int xfer_dir, void *data_out,
				      uint32_t len);

typedef void (*member_cmd_cb)(struct tpt_member *m, struct scsi_task *task,
			      int status, void *arg);
/* Queue @task on @m (takes ownership of it); cb runs once, later, with
 * the SCSI status or a negative libiscsi status.  0, or -EIO when the
 * member is down (cb does not run). */
int member_send(struct tpt_member *m, struct scsi_task *task, void *data_out,
		uint32_t data_out_len, member_cmd_cb cb, void *arg);
const char *member_error(const struct tpt_member *m);

/* ---- modes ---- */

struct tpt_span;

/*
 * How an array moves data and computes parity.  All callbacks run on the
 * event loop.
 */
struct tpt_mode_ops {
	const char *name;		/* "tpt", "baseline" */
	/* Once at assembly, every member open: 0 or -errno (logged).  May
	 * block (assembly is synchronous). */
	int (*setup)(struct tpt_array *a);
	/* At teardown, before the members close; undoes setup. */
	void (*teardown)(struct tpt_array *a);
	/* Start @s, which holds its stripe locks: 0 when started (it ends
	 * in exactly one tpt_span_done()), -EAGAIN when resources are short
	 * now (the engine retries when another span ends). */
	int (*start)(struct tpt_span *s);
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
 * tpt_array_submit() returns), with 0 or a negative errno.
 */
struct tpt_req {
	enum tpt_req_kind kind;
	uint64_t lba;			/* array blocks */
	uint32_t blocks;
	uint8_t *buf;
	void (*done)(struct tpt_req *r, int result);
	void *priv;
	/* The engine's. */
	struct tpt_array *array;
	uint64_t next;			/* first block not yet done */
	unsigned int spans_left;	/* SYNC: members outstanding */
	int result;
	struct list_head link;
};

void tpt_array_submit(struct tpt_array *a, struct tpt_req *r);

/* Blocking, from a worker thread: tpt_array_submit() on the event loop
 * and wait.  0 or a negative errno. */
int tpt_array_io(struct tpt_array *a, enum tpt_req_kind kind, uint64_t lba,
		 uint32_t blocks, void *buf);

/*
 * A span: the part of a request that runs at once, holding the stripe
 * locks of its stripes so that no two spans update one stripe's parity
 * together.  A request is one span after another: SCSI promises no
 * atomicity across a command's blocks.
 */
struct tpt_span {
	struct tpt_req *req;
	struct tpt_array *array;
	bool write;
	uint64_t lba;
	uint32_t blocks;
	uint8_t *buf;			/* its part of the request's buffer */
	uint64_t first_stripe, last_stripe;
	struct list_head link;		/* array's running or waiting list */
};

/* The mode ends a span: counts what it did and frees the locks. */
void tpt_span_done(struct tpt_span *s, int result,
		   const struct tpt_array_counters *delta);

struct tpt_array {
	struct scsi_lu *lu;
	struct tpt_array_spec spec;
	const struct raid_level_ops *level;
	const struct tpt_mode_ops *mode;
	void *mode_priv;
	struct raid_geometry geo;
	uint32_t block_size;
	unsigned int nr_members;
	struct tpt_member member[TPT_SPEC_MAX_MEMBERS];
	uint64_t array_id;

	/* Worker threads queue requests here; the event loop takes them. */
	pthread_mutex_t submit_lock;
	struct list_head submitted;
	int efd;

	struct list_head running;	/* spans holding stripe locks */
	struct list_head waiting;	/* spans in arrival order */
	bool starved;			/* a waiting span lacks the mode's resources */
	bool draining, redrain;		/* run_waiting() re-entry */

	pthread_mutex_t counters_lock;	/* show reads, the loop writes */
	struct tpt_array_counters counters;
};

int tpt_array_create(struct scsi_lu *lu, const struct tpt_array_spec *spec,
		     struct tpt_array **out);
void tpt_array_destroy(struct tpt_array *a);
uint64_t tpt_array_bytes(const struct tpt_array *a);
void tpt_array_get_counters(struct tpt_array *a, struct tpt_array_counters *out);

/* The array of a tptraid LU, or NULL for any other LU (bs_tptraid.c). */
struct tpt_array *tptraid_array_of(struct scsi_lu *lu);

#endif
