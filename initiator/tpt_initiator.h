/* libtptinitiator: the extended TPT-RAID host (docs/initiator.md).
 *
 * A host that reads and writes a TPT-RAID LUN with its data moving
 * straight between its own memory and the target boxes (the paper's
 * III-B/III-C), while the controller only plans: the controller is
 * reached with stock libiscsi, and the targets reach the host's buffers
 * with one-sided RMA through its datamover (iser/tpt_dm.h).
 *
 * What a context does for you:
 *   - logs in to the controller (CHAP and mutual CHAP as libiscsi does);
 *   - opens a datamover that listens (targets connect to the host, never
 *     the reverse), pre-registers its buffer pool once, and draws a fresh
 *     16-byte host key from the kernel's CSPRNG for this session;
 *   - registers key and endpoint with the controller (TPT HOST KEY) and
 *     admits only target boxes that prove the key;
 *   - sends READs and WRITEs as TPT HOST READ / TPT HOST WRITE naming a
 *     pool buffer; each request gets its buffer under a fresh STag which
 *     dies when the status arrives, so a late RMA fails;
 *   - falls back to plain READ(16)/WRITE(16) when the LUN is not a
 *     TPT-mode array (Baseline, stock tgt): tpt_init_is_direct() says
 *     which.  The same client therefore works on every LUN.
 *   - logout ends the session, which is what revokes the key at the
 *     controller; the datamover is closed with it.
 *
 * Async first, in libiscsi's manner: every operation takes a callback,
 * and nothing blocks.  The caller polls the descriptors tpt_init_get_fds()
 * names from its own loop and calls tpt_init_service(); callbacks run
 * only from inside tpt_init_service() (and tpt_init_close()).  The
 * blocking calls at the end run that loop themselves.
 *
 * Not thread-safe: one context per thread, like libiscsi.
 *
 * The controller's session is libiscsi's, whose PDUs go out with
 * writev(): a controller that has reset the connection raises SIGPIPE,
 * which kills a process that has not set it to SIG_IGN (as libiscsi's
 * own users must).  With it ignored, the write fails and so do the
 * requests on the session.  A library does not change a process's
 * signals behind its back: that is the application's to do.
 *
 * Errors are negative errno values; tpt_init_error() has the detail of
 * the last one (the SCSI sense, libiscsi's text, ...). */
#ifndef TPT_INITIATOR_H
#define TPT_INITIATOR_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tpt_init;

/* Whether to send TPT HOST KEY at all. */
enum tpt_init_direct {
	/* Try; fall back to plain SCSI when the LU does not know the
	 * command (INVALID COMMAND OPERATION CODE) or refuses the key
	 * for another reason (logged). */
	TPT_INIT_DIRECT_AUTO = 0,
	TPT_INIT_DIRECT_ON,	/* direct or fail the connect */
	TPT_INIT_DIRECT_OFF,	/* an ordinary libiscsi initiator */
};

/* Log levels of the log callback. */
enum tpt_init_log_level {
	TPT_INIT_LOG_ERROR = 0,
	TPT_INIT_LOG_WARNING,
	TPT_INIT_LOG_INFO,
};

/* The most requests one command may carry (merge_max). */
#define TPT_INIT_MERGE_MAX 64

struct tpt_init_config {
	/* iscsi://[user[%password]@]host[:port]/IQN/LUN.  Mutual CHAP as
	 * libiscsi spells it: ?target_user=..&target_password=..; or the
	 * fields below, or libiscsi's LIBISCSI_CHAP_* environment. */
	const char *url;
	const char *initiator_name;	/* NULL: a default IQN */
	/* Override the URL's CHAP credentials when non-NULL (keeps
	 * secrets out of URLs and so out of ps). */
	const char *user, *password;
	const char *target_user, *target_password;

	enum tpt_init_direct direct;
	/* Where the datamover listens.  NULL: the local address of the
	 * iSCSI connection to the controller, which is the one interface
	 * we know the array can route back to.  Port 0: ephemeral. */
	const char *dm_addr;
	uint16_t dm_port;
	const char *dm_provider;	/* NULL: as the datamover picks */

	/* Largest piece of a request, bytes (block multiple); larger
	 * requests are split into commands of this size.  0: 4 MiB.  Also
	 * the size of one pool buffer.  (Merged requests, below, may make
	 * a command of up to 1 MiB from smaller ones.) */
	size_t max_io;
	/* Commands in flight at once; more requests wait in the context.
	 * The pool is queue_depth * max_io bytes, registered once.  0: 16. */
	unsigned int queue_depth;
	/* Seconds a login or a command may take before it fails with
	 * -ETIMEDOUT.  0: 30. */
	unsigned int timeout_s;
	/* Direct requests waiting to be sent that continue one another
	 * (same direction and FUA, each starting where the one before
	 * ends) go as one command naming each one's buffer: at most this
	 * many, and at most 1 MiB together (a request that is larger goes
	 * alone).  The controller then plans, locks and sends member
	 * commands once for them all.  0: TPT_INIT_MERGE_MAX; 1: never
	 * merge. */
	unsigned int merge_max;
	/* A target that could not reach our datamover (a route lost)
	 * sends us on plain SCSI through the controller; this many seconds
	 * later, direct is tried again, and each time it fails again (or
	 * is lost again within 30 s of the wait after it came back) the
	 * wait doubles, up to 16 times this.  0: 60; at most 3600. */
	unsigned int direct_retry_s;

	/* Refused datamover peers, fallback decisions, session loss.
	 * NULL: warnings and errors to stderr. */
	void (*log)(void *arg, enum tpt_init_log_level level,
		    const char *msg);
	void *log_arg;
};

/* Creates a context from @cfg (copied; the strings too).  Nothing goes on
 * the wire yet.  -EINVAL (bad URL or value, detail via @err if non-NULL,
 * a buffer of @errlen bytes), -ENOMEM. */
int tpt_init_new(const struct tpt_init_config *cfg, struct tpt_init **out,
		 char *err, size_t errlen);

/* Ends the session if one is up (logout, which revokes the host key at
 * the controller), closes the datamover and frees the context.
 * Outstanding requests complete with -ECANCELED before it returns.
 * Blocks for at most the timeout.  NULL is a no-op. */
void tpt_init_close(struct tpt_init *ctx);

/* --- driving the context from your own loop --- */

#define TPT_INIT_MAX_FDS 2

/* Sends what was submitted since the last call, merged where it can be
 * (merge_max), then fills @fds with the descriptors to poll and their
 * events; returns how many (they change: call it before every poll).
 * Poll with a timeout of at most tpt_init_poll_timeout_ms() so that
 * timeouts fire. */
int tpt_init_get_fds(struct tpt_init *ctx, struct pollfd fds[TPT_INIT_MAX_FDS]);
int tpt_init_poll_timeout_ms(const struct tpt_init *ctx);
/* Handles what poll reported in @fds (as filled by tpt_init_get_fds;
 * revents 0 is fine, e.g. after a poll timeout).  Runs callbacks.
 * 0, or a negative errno once the session is lost (every outstanding
 * request has then failed). */
int tpt_init_service(struct tpt_init *ctx, const struct pollfd *fds, int n);

/* --- asynchronous operations --- */

/* status: 0, or a negative errno: -EIO (the LUN answered CHECK CONDITION
 * or another bad status; tpt_init_error() has the sense), -ETIMEDOUT,
 * -ENOTCONN (session lost), -ECANCELED (context closed). */
typedef void (*tpt_init_cb)(struct tpt_init *ctx, int status, void *arg);

/* Logs in, reads the LUN's capacity, opens the datamover and registers
 * the host key (or decides to fall back).  Once.  Besides the statuses
 * above, cb may get -ECONNREFUSED (the login or READ CAPACITY failed:
 * tpt_init_error() says why) and, with direct I/O required, the
 * datamover's own negative errno (-ENODEV: no provider, ...). */
int tpt_init_connect_async(struct tpt_init *ctx, tpt_init_cb cb, void *arg);

/* Byte offset and length must be multiples of the block size and lie in
 * the LUN; @buf must stay valid (and, for writes, unchanged) until the
 * callback.  Returns 0 (cb will run, never from inside this call) or a
 * negative errno without running cb: -EINVAL, -ENOTCONN, -ENOMEM.
 * Nothing is sent before the next tpt_init_get_fds() or
 * tpt_init_service(), so that requests submitted together can go as
 * one command. */
int tpt_init_pread_async(struct tpt_init *ctx, void *buf, size_t len,
			 uint64_t offset, tpt_init_cb cb, void *arg);
#define TPT_INIT_FUA 0x1	/* pwrite: force unit access */
int tpt_init_pwrite_async(struct tpt_init *ctx, const void *buf, size_t len,
			  uint64_t offset, unsigned int flags, tpt_init_cb cb,
			  void *arg);
/* SYNCHRONIZE CACHE(16) of the whole LUN. */
int tpt_init_flush_async(struct tpt_init *ctx, tpt_init_cb cb, void *arg);

/* --- blocking wrappers: run the loop until done --- */

int tpt_init_connect(struct tpt_init *ctx);
int tpt_init_pread(struct tpt_init *ctx, void *buf, size_t len,
		   uint64_t offset);
int tpt_init_pwrite(struct tpt_init *ctx, const void *buf, size_t len,
		    uint64_t offset, unsigned int flags);
int tpt_init_flush(struct tpt_init *ctx);

/* --- what the context knows --- */

uint64_t tpt_init_size(const struct tpt_init *ctx);		/* bytes */
uint32_t tpt_init_block_size(const struct tpt_init *ctx);
size_t tpt_init_max_io(const struct tpt_init *ctx);
/* True once connected with the host key registered: data moves by RMA. */
bool tpt_init_is_direct(const struct tpt_init *ctx);
/* Where the datamover listens ("addr:port"), or "" when not direct. */
const char *tpt_init_dm_endpoint(const struct tpt_init *ctx);
const char *tpt_init_error(const struct tpt_init *ctx);

struct tpt_init_stats {
	uint64_t requests;		/* user requests completed */
	uint64_t commands;		/* SCSI commands sent for them */
	uint64_t merged;		/* pieces that went in another's command */
	uint64_t direct_bytes_in;	/* read by RMA into our buffers */
	uint64_t direct_bytes_out;	/* written by RMA from our buffers */
	uint64_t plain_bytes_in;	/* read through the controller */
	uint64_t plain_bytes_out;
	uint64_t errors;		/* requests that failed */
	uint64_t refused_peers;		/* datamover connections refused */
	uint64_t accepted_peers;
	uint64_t path_fallbacks;	/* direct given up for a lost path */
};
void tpt_init_get_stats(const struct tpt_init *ctx, struct tpt_init_stats *st);

#ifdef __cplusplus
}
#endif

#endif
