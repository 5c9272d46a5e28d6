/* tpt-client's internals, shared by its source files:
 *
 *   main.c      the event loop, stdin's lines, dispatch, start and stop
 *   protocol.c  request fields and responses: the JSON-lines protocol
 *   iscsi.c     iSCSI sessions and SCSI commands (login ... abort)
 *   dm.c        the datamover: peers, registered buffers, Put/Get, stats
 *   items.c     the one list every kind of record is kept in
 *
 * The protocol itself is described at the top of main.c. */
#ifndef TPT_TOOLS_TPT_CLIENT_CLIENT_H
#define TPT_TOOLS_TPT_CLIENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <iscsi/iscsi.h>
#include <jansson.h>

#include "iser/tpt_dm.h"

#define DEFAULT_TIMEOUT_MS 10000
#define MAX_TIMEOUT_MS (10 * 60 * 1000)
#define MAX_SESSIONS 64
#define MAX_BUF_BYTES (1u << 30)

/* ------------------------------------------------------------------ */
/* Records */

/* Every kind of record the client keeps (sessions, commands, datamover
 * links, buffers, transfers, allowed peers, task management waits) sits
 * in a singly linked list of its kind, newest first.  A record's first
 * member is its struct item, so one set of list functions serves every
 * kind; kinds that are not looked up by name leave it NULL. */
struct item {
	struct item *next;
	char *name;		/* owned */
};

/* A zeroed record of size bytes named name (copied; NULL for none), at
 * the head of *list.  NULL when out of memory. */
void *item_new(struct item **list, size_t size, const char *name);
/* The newest record of list named name, or NULL. */
void *item_find(struct item *list, const char *name);
/* Takes record (which begins with its struct item) off *list and frees
 * it with its name.  What the record owns besides is the caller's. */
void item_delete(struct item **list, void *record);
/* item_delete() of every record of *list. */
void item_delete_all(struct item **list);

/* Iterates var, a type *, over list's records.  Not for deleting var on
 * the way. */
#define ITEM_FOR_EACH(type, var, list) \
	for (type *var = (type *)(void *)(list); var; \
	     var = (type *)(void *)var->item.next)

/* ------------------------------------------------------------------ */
/* State */

enum session_state {
	SESSION_CONNECTING,
	SESSION_LOGGING_IN,
	SESSION_UP,
	SESSION_FAILED,
};

struct client;

struct session {
	struct item item;		/* name: the session's */
	struct client *client;
	struct iscsi_context *iscsi;	/* NULL once torn down */
	int lun;
	enum session_state state;
	char error[256];		/* why it failed */
	/* Set while we ourselves make libiscsi cancel commands: any other
	 * cancellation means the connection died under us. */
	const char *cancel_reason;
	bool logout_done;
	int logout_status;
	struct item *tmfs;		/* struct tmf_wait */
};

struct client {
	struct item *sessions;		/* struct session */
	struct item *commands;		/* struct command, by tag */
	int iscsi_log_level;

	struct tpt_dm *dm;
	char dm_error[256];
	enum tpt_dm_role dm_role;
	uint16_t dm_peer_id;
	uint64_t dm_array_id;
	struct item *allowed;		/* struct allowed_peer */
	struct item *links;		/* struct dm_link */
	struct item *bufs;		/* struct dm_buffer */
	struct item *ops;		/* struct dm_op */
	uint64_t accepted_peers, refused_by_allow_list, peers_down;

	bool quit;
};

/* One request line, being answered. */
struct request {
	json_t *obj;
	bool has_id;
	long long id;
	char err[512];
	int err_errno;		/* positive errno to report, or 0 */
};

/* A response being built.  obj is NULL once building it ran out of
 * memory: reply_send() then says so instead. */
struct reply {
	json_t *obj;
};

/* What serves one op: 0 once it has answered, or -1 after fail() (the
 * dispatcher then sends the error response). */
typedef int op_fn(struct client *c, struct request *rq);

/* ------------------------------------------------------------------ */
/* protocol.c */

long long now_ms(void);
/* Milliseconds until deadline (now_ms() based), at least 0. */
int ms_left(long long deadline);

/* Handlers return fail(...): the dispatcher sends the error response. */
int fail(struct request *rq, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* fail() that also reports err (a negative or positive errno). */
int fail_errno(struct request *rq, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Request fields.  Each getter returns 0 with the value stored, 1 when
 * an optional field is absent (the caller's default stays), -1 with the
 * error set. */
int get_str(struct request *rq, const char *key, bool required,
	    const char **out);
/* A required, non-empty string. */
int get_name(struct request *rq, const char *key, const char **out);
int get_int(struct request *rq, const char *key, bool required,
	    long long min, long long max, long long *out);
int get_size(struct request *rq, const char *key, bool required, size_t max,
	     size_t *out);
/* A u64 as a decimal string (what we recommend) or a plain integer. */
int get_u64(struct request *rq, const char *key, bool required,
	    uint64_t *out);
/* Hex, in *out (malloc'd, NULL when empty) and *len. */
int get_hex(struct request *rq, const char *key, bool required,
	    unsigned char **out, size_t *len);
int get_bool(struct request *rq, const char *key, bool *out);
/* A word a string field may hold, and what it stands for; a list of
 * them ends with { NULL }. */
struct word {
	const char *text;
	int value;
};

/* text's value among words, or fail(): "field 'KEY' must be A, B or
 * C". */
int word_value(struct request *rq, const char *key, const char *text,
	       const struct word *words, int *value);
/* value's text among words, or "?". */
const char *word_text(const struct word *words, int value);
/* timeout_ms (default DEFAULT_TIMEOUT_MS) as a now_ms() deadline. */
int get_timeout(struct request *rq, long long *deadline);
/* A field is there at all. */
bool has_field(const struct request *rq, const char *key);

/* The start of every response: "id" (when the request had one), "ok". */
struct reply reply_new(const struct request *rq, bool ok);
void reply_int(struct reply *r, const char *key, long long v);
/* u64 values as decimal strings: JSON readers often hold numbers in
 * doubles. */
void reply_u64(struct reply *r, const char *key, uint64_t v);
void reply_bool(struct reply *r, const char *key, bool v);
void reply_str(struct reply *r, const char *key, const char *s);
void reply_hex(struct reply *r, const char *key, const void *data,
	       size_t len);
/* Writes the response as one line, flushed, and frees it; exits when
 * stdout is gone (nobody is listening any more).  Returns 0. */
int reply_send(struct reply *r);
/* A response of just "id" and "ok": true. */
int reply_ok(const struct request *rq);
/* The error response of rq: "ok": false, "error", and "errno" and
 * "errno_name" when a system error is known. */
void reply_error(const struct request *rq);

/* ------------------------------------------------------------------ */
/* main.c */

/* One pass of the event loop: sleeps at most max_ms until an iSCSI
 * socket, the datamover or (with_stdin) stdin is ready, then services
 * everything.  Returns stdin's revents. */
short progress_once(struct client *c, int max_ms, bool with_stdin);

/* ------------------------------------------------------------------ */
/* iscsi.c */

/* libiscsi's last error without the newline some of its messages end
 * in. */
const char *iscsi_why(struct iscsi_context *iscsi);
/* Records why s failed; the event loop tears it down afterwards
 * (callbacks may not destroy the context they run in). */
void session_failed(struct session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Destroys s's libiscsi context, failing what it had not called back
 * with reason. */
void session_close_context(struct session *s, const char *reason);
/* Logs every session out, briefly, and frees them and all commands. */
void iscsi_shutdown(struct client *c);

op_fn op_login, op_logout, op_drop, op_send, op_wait, op_abort;

/* ------------------------------------------------------------------ */
/* dm.c */

/* After tpt_dm_progress(): frees the transfers timed-out requests left
 * behind once they are done. */
void dm_reap_ops(struct client *c);
/* Closes the datamover and frees every datamover record. */
void dm_shutdown(struct client *c);

op_fn op_dm_open, op_dm_allow, op_dm_connect, op_dm_disconnect;
op_fn op_dm_put, op_dm_get, op_stats;
op_fn op_buf, op_buf_write, op_buf_read, op_buf_release;

#endif
