/*
 * The TPT-RAID controller inside tgtd: a LU with backing store "tptraid"
 * is a RAID-5 array over member targets.
 *
 *   bs_tptraid.c        tgt glue: the backing store, SBC opcode semantics
 *                       on top of array reads and writes (worker threads)
 *   tpt_ctl_array.c     members (libiscsi on tgtd's event loop), the
 *                       request queue from the workers, stripe locks
 *   tpt_ctl_baseline.c  the paper's in-band Baseline: the controller moves
 *                       all data and computes parity
 *   tpt_ctl_tpt.c       TPT: the controller plans (controller/tpt_plan.c)
 *                       and the targets move data and compute parity
 */
#ifndef __TPT_CTL_H__
#define __TPT_CTL_H__

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>

#include "list.h"
#include "controller/array_spec.h"
#include "controller/raid_layout.h"
#include "controller/slot_alloc.h"
#include "controller/tpt_plan.h"
#include "iser/tpt_dm.h"
#include "scsi/tpt_cdb.h"

struct iscsi_context;
struct scsi_task;
struct scsi_lu;
struct tpt_dm_buf;

/* Peer id of the controller in the lists it delivers; members are 0..N-1. */
#define TPT_CTL_PEER_ID 1000
/* Slots the controller asks each member for (TPT REPORT SLOTS). */
#define TPT_CTL_SLOTS 128

struct tpt_ctl_stats {
	uint64_t reads, writes;			/* host requests */
	uint64_t host_bytes_in, host_bytes_out;	/* data the host sent/got */
	uint64_t target_bytes_in;		/* data targets sent us */
	uint64_t target_bytes_out;		/* data we sent targets */
	uint64_t bytes_xored;
	uint64_t pdus;				/* commands sent to members */
	uint64_t rma_ops;			/* datamover ops we initiated */
	uint64_t failed;			/* requests that failed */
};

struct tpt_member_stats {
	uint64_t cmds;
	uint64_t errors;
};

struct tpt_member {
	struct tpt_array *array;
	unsigned int index;
	char url[TPT_SPEC_URL_MAX];
	struct iscsi_context *iscsi;
	int lun;
	int fd;				/* registered with tgt's event loop */
	bool up;
	uint64_t nr_blocks;
	uint32_t block_size;
	struct tpt_endpoint_report endpoint;
	uint8_t token[TPT_AUTH_TOKEN_LEN];
	struct tpt_slot_table *slot_table;
	struct tpt_member_stats stats;
};

/* One array I/O, handed from a worker thread to the event loop. */
struct tpt_req {
	struct list_head link;
	struct tpt_array *array;
	bool write;
	bool sync;			/* SYNCHRONIZE CACHE to every member */
	uint64_t lba;			/* array blocks */
	uint32_t blocks;
	uint8_t *buf;
	uint64_t first_stripe, last_stripe;
	int result;			/* 0 or a negative errno */
	sem_t done;
	/* Mode-specific execution state. */
	void *run;
};

struct tpt_array {
	struct scsi_lu *lu;
	struct tpt_array_spec spec;
	struct raid_geometry geo;
	const struct raid_layout_ops *layout;
	uint32_t block_size;
	unsigned int nr_members;
	struct tpt_member member[TPT_SPEC_MAX_MEMBERS];
	uint64_t array_id;
	uint8_t token[TPT_AUTH_TOKEN_LEN];	/* targets present it to us */
	uint32_t next_group;
	/* TPT mode: the planner and the members' slots it allocates from. */
	struct slot_alloc slots[TPT_SPEC_MAX_MEMBERS];
	struct tpt_plan_ctx plan_ctx;

	/* Workers queue requests here; the event loop takes them. */
	pthread_mutex_t lock;
	struct list_head submitted;
	int efd;

	struct list_head running;	/* holding stripe locks */
	struct list_head waiting;	/* for stripe locks or slots */
	bool draining, redrain;		/* array_run_waiting() re-entry */

	pthread_mutex_t stats_lock;	/* workers read, the loop writes */
	struct tpt_ctl_stats stats;
};

int tpt_array_create(struct scsi_lu *lu, const struct tpt_array_spec *spec,
		     struct tpt_array **out);
void tpt_array_destroy(struct tpt_array *a);
uint64_t tpt_array_bytes(const struct tpt_array *a);

/* Blocking, from a worker thread: 0 or a negative errno. */
int tpt_array_io(struct tpt_array *a, bool write, uint64_t lba,
		 uint32_t blocks, void *buf);
/* Flush every member's cache (SYNCHRONIZE CACHE to all). */
int tpt_array_sync(struct tpt_array *a);

void tpt_array_get_stats(struct tpt_array *a, struct tpt_ctl_stats *out);
/* The array of a tptraid LU, or NULL for any other LU. */
struct tpt_array *tptraid_array_of(struct scsi_lu *lu);

/* Incoming datamover connections for controller arrays (tpt_session.c
 * asks this when no target session admits the peer). */
int tpt_ctl_accept_peer(const struct tpt_dm_hello *hello,
			const struct sockaddr *src, socklen_t srclen);

/* ---- used by the execution modes ---- */

typedef void (*tpt_ctl_cmd_cb)(struct tpt_member *m, struct scsi_task *task,
			       int status, void *arg);
/* Queue @task on @m (takes ownership of task); cb runs once. */
int tpt_ctl_send(struct tpt_member *m, struct scsi_task *task, void *data_out,
		 uint32_t data_out_len, tpt_ctl_cmd_cb cb, void *arg);
void tpt_ctl_finish(struct tpt_req *r, int result);
void tpt_ctl_count(struct tpt_array *a, const struct tpt_ctl_stats *delta);

void tpt_baseline_start(struct tpt_req *r);
/* 0 when started, -EAGAIN when slots are short (retry later). */
int tpt_tpt_start(struct tpt_req *r);

#endif
