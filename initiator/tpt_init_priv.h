/* libtptinitiator internals shared by its files: the context, one SCSI
 * command, one user request.  Not installed. */
#ifndef TPT_INIT_PRIV_H
#define TPT_INIT_PRIV_H

#include <stdarg.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "initiator/tpt_initiator.h"
#include "iser/tpt_dm.h"
#include "scsi/tpt_cdb.h"

_Static_assert(TPT_INIT_MERGE_MAX == TPT_HOST_DESC_MAX,
	       "a command names at most TPT_HOST_DESC_MAX buffers");

/* Merged requests make commands of up to this many bytes: beyond it the
 * controller's cost per byte hardly falls (docs/performance.md, Figs.
 * 5-6), while fewer, larger commands overlap less on the links (a
 * host's 1 MiB writes merged to 2 MiB moved 0.70 of the link optimum in
 * scripts/bench/scale at N = 9, H = 4, against 0.99 unmerged). */
#define INIT_MERGE_BYTES (1u << 20)

/* UNIT ATTENTIONs one command may absorb (a new nexus sees a few). */
#define INIT_UA_RETRIES 8

/* How long direct must hold after a retry, beyond the wait before it,
 * for the next path lost to start the wait over: longer than a target
 * takes to give up on us (tpt_xfer_timeout, 10 s by default) and the
 * controller to tell us. */
#define INIT_PATH_HOLD_S 30

enum init_state {
	INIT_NEW,		/* nothing sent yet */
	INIT_CONNECTING,	/* login, capacity, host key */
	INIT_READY,
	INIT_DEAD,		/* connect failed or session lost */
	INIT_CLOSING,
};

enum cmd_kind { CMD_READ, CMD_WRITE, CMD_FLUSH };

struct init_req;

/* A piece of at most max_io bytes of a request: one SCSI command, or,
 * merged with the pieces of other requests that continue it, a part of
 * one (the first piece sends it). */
struct init_cmd {
	struct init_req *req;
	enum cmd_kind kind;
	uint64_t lba;
	uint32_t blocks;
	uint8_t *data;			/* the caller's bytes for this piece */
	bool fua;
	bool direct;			/* sent as TPT HOST READ/WRITE */
	unsigned int direct_try;	/* ctx->direct_tries when sent */
	unsigned int ua_retries;
	struct tpt_dm_buf *buf;		/* direct: the pool buffer, this send */
	struct scsi_task *task;
	uint8_t *list;			/* direct, first piece: the data-out */
	struct init_cmd *merged;	/* the next piece in this command */
	struct init_cmd *next;		/* in the wait queue */
};

/* What the caller asked for: done when every command is. */
struct init_req {
	struct tpt_init *ctx;
	tpt_init_cb cb;
	void *arg;
	unsigned int left;		/* commands not yet finished */
	int status;			/* the first failure */
	struct init_req *next_done;	/* in the completion list */
	unsigned int ncmds;
	struct init_cmd cmd[];
};

struct tpt_init {
	struct tpt_init_config cfg;	/* strings point into our copies */
	char *strings[8];		/* what cfg's strings point to */
	struct iscsi_context *iscsi;
	char portal[256];
	char target[256];
	int lun;
	enum init_state state;

	/* Connect. */
	tpt_init_cb connect_cb;
	void *connect_arg;
	double deadline;		/* monotonic seconds: connect, logout */
	unsigned int ua_retries;

	/* Geometry. */
	uint32_t block_size;
	uint64_t nr_blocks;
	size_t max_io;

	/* Host-direct. */
	struct tpt_dm *dm;
	bool direct;
	/* Plain since a target could not reach us: direct again from
	 * direct_retry_at (monotonic seconds), after a wait that doubles
	 * each time (direct_retry_wait). */
	bool path_lost;
	double direct_retry_at;
	unsigned int direct_retry_wait;
	/* Direct again since a retry: the wait starts over from
	 * direct_retry_s only for a path lost from this time on. */
	double path_held_at;
	/* Times direct was taken up again: only what a command sent since
	 * the last time meets says whether the path is back. */
	unsigned int direct_tries;
	uint8_t key[TPT_AUTH_TOKEN_LEN];
	uint8_t key_list[TPT_HOST_KEY_LEN];
	char dm_endpoint[80];

	/* Commands. */
	unsigned int inflight;		/* pieces, each holding a pool buffer */
	unsigned int inflight_cmds;	/* SCSI commands they went in */
	unsigned int nr_waiting;	/* pieces in the wait queue */
	struct init_cmd *wait_head, *wait_tail;
	struct init_req *done_head, *done_tail;
	unsigned int outstanding;	/* requests not yet completed */

	struct tpt_init_stats stats;
	char err[512];
};

/* tpt_initiator.c */
void init_log(struct tpt_init *ctx, enum tpt_init_log_level level,
	      const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void init_seterr(struct tpt_init *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
double init_now(void);
/* Sense or libiscsi's reason for a bad status, into ctx->err; returns
 * the errno the caller sees. */
int init_status_error(struct tpt_init *ctx, const char *what, int status,
		      const struct scsi_task *task);

/* tpt_init_io.c */
void init_io_pump(struct tpt_init *ctx);
/* Fails every command not yet sent with @status (the session is gone). */
void init_io_fail_waiting(struct tpt_init *ctx, int status);
/* Runs the callbacks of completed requests. */
void init_io_run_done(struct tpt_init *ctx);
/* Whether a CHECK CONDITION's sense is @reason's (scsi/tpt_sense.h). */
bool init_sense_is(const struct scsi_task *task, enum tpt_sense_reason reason);
/* A CHECK CONDITION's whole sense, INFORMATION included, which libiscsi's
 * parsed task->sense leaves out: false when there is none it can parse. */
bool init_task_sense(const struct scsi_task *task, struct tpt_sense *out);

#endif
