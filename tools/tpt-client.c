/* tpt-client: a scriptable iSCSI initiator and datamover peer for tests.
 *
 * Conformance suites use it to play the controller and the host when they
 * drive our targets by hand: they encode CDBs and parameter lists
 * themselves, and this process only carries them over stock libiscsi and
 * our datamover (iser/tpt_dm.h).  It runs as a co-process speaking JSON
 * lines: one request object per line on stdin, one response object per
 * line on stdout (flushed), diagnostics on stderr.  Binary data is
 * lowercase hex; 64-bit unsigned values are decimal strings (requests may
 * also give them as plain integers).  Every request carries an integer
 * "id" that its response echoes; responses carry "ok" and, when it is
 * false, "error" (plus "errno"/"errno_name" when a system error is known).
 *
 *   login     name url [initiator] [timeout_ms]
 *   logout    name [timeout_ms]
 *   drop      name [reset=true]       close TCP without logout (RST)
 *   send      name tag cdb dir=none|out|in [data] [inlen] [lun]
 *   wait      tags=[...] [timeout_ms] one line per tag, then {"done":true}
 *   abort     name tag [timeout_ms]   ABORT TASK -> "response"
 *   dm_open   role [listen] [port] [peer_id] [array_id] [provider]
 *             [pool_bytes]            -> "port", "provider"
 *   dm_allow  peer_id token [array_id] [role]
 *   dm_connect name addr port token [role] [peer_id] [array_id] [timeout_ms]
 *   dm_disconnect name
 *   dm_put / dm_get  peer buf offset stag rma_addr len [timeout_ms]
 *   buf       name size access=r|w|rw -> "stag", "rma_base", "size"
 *   buf_write name offset data;  buf_read name offset len -> "data"
 *   buf_release name;  stats;  quit
 *
 * One poll() loop serves every iSCSI connection, the datamover and stdin,
 * also between requests: peers move data into and out of our registered
 * buffers one-sidedly while their SCSI commands are in flight, and a
 * passive tcp-provider endpoint only makes progress when we call it.
 * Requests that wait (login, logout, wait, abort, dm_connect, dm_put,
 * dm_get) run the same loop without stdin until done or timed out; no
 * request blocks for longer than its timeout. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "iser/tpt_dm.h"
#include "jsonl.h"
#include "tool_iscsi.h"

#define DEFAULT_INITIATOR "iqn.2026-11.org.tptraid:tpt-client"
#define DEFAULT_TIMEOUT_MS 10000
#define MAX_TIMEOUT_MS (10 * 60 * 1000)
#define DEFAULT_MAX_LINE_BYTES (128u << 20)
#define MAX_LINE_LIMIT (1u << 30)
#define READ_CHUNK_BYTES (1u << 20)
#define MAX_SESSIONS 64
/* Collected commands kept for ABORT TASK; older ones are forgotten so a
 * long test does not make every tag lookup slower. */
#define MAX_REPORTED 1024
#define MAX_XFER_BYTES (64u << 20)
#define MAX_BUF_BYTES (1u << 30)
#define BUF_ALIGN 64
/* Longest sleep while a datamover is open.  Its event fd is meant to
 * cover passive-side progress too (tcp provider sockets sit in its wait
 * set); the beat only bounds the damage should some provider event not
 * make it readable, at about 0.5% of a core per idle client. */
#define DM_BEAT_MS 10
/* libiscsi asks to be retried after >= 100 ms when it has no events. */
#define ISCSI_RETRY_MS 100
#define IDLE_SLICE_MS 1000
/* The client's own datamover pool: it serves from buffers it registers
 * itself, so the pool only has to exist. */
#define CLIENT_POOL_BYTES (4u << 20)
#define CLIENT_POOL_BUF_BYTES (1u << 20)

struct client;

/* ------------------------------------------------------------------ */
/* State */

enum session_state {
	SESSION_CONNECTING,
	SESSION_LOGGING_IN,
	SESSION_UP,
	SESSION_FAILED,
};

/* A task management request waiting for its response. */
struct tmf_wait {
	struct tmf_wait *next;
	bool done;
	int status;		/* libiscsi callback status */
	uint32_t response;	/* RFC 3720 10.6.1 response code */
};

struct session {
	struct session *next;
	struct client *client;
	char *name;
	struct iscsi_context *iscsi;	/* NULL once torn down */
	int lun;
	enum session_state state;
	char error[256];		/* why it failed */
	/* Set while we ourselves make libiscsi cancel commands: any other
	 * cancellation means the connection died under us. */
	const char *cancel_reason;
	bool logout_done;
	int logout_status;
	struct tmf_wait *tmfs;
};

enum command_state {
	CMD_PENDING,
	CMD_DONE,
	CMD_REPORTED,	/* result handed out by wait; kept for ABORT TASK */
};

struct command {
	struct command *next;
	char *tag;
	struct session *session;	/* NULL once the session is gone */
	struct scsi_task *task;		/* freed once reported */
	struct iscsi_data out;		/* data-out, owned */
	enum command_state state;
	bool failed;			/* no SCSI status: see error */
	int status;
	char error[320];
	/* What ABORT TASK names, kept after the task is freed. */
	uint32_t lun, itt, cmdsn;
};

struct allowed_peer {
	struct allowed_peer *next;
	uint16_t peer_id;
	uint8_t token[TPT_DM_TOKEN_LEN];
	bool match_array;
	uint64_t array_id;
	uint8_t role;		/* 0: any */
};

enum link_state {
	LINK_CONNECTING,
	LINK_UP,
	LINK_FAILED,
	LINK_DOWN,
};

/* A datamover connection we opened with dm_connect. */
struct dm_link {
	struct dm_link *next;
	char *name;
	struct tpt_dm_peer *peer;
	enum link_state state;
	int status;
};

struct dm_buffer {
	struct dm_buffer *next;
	char *name;
	void *mem;
	size_t size;
	struct tpt_dm_buf *buf;
	unsigned int inflight;	/* our own puts/gets using it */
};

/* One dm_put/dm_get; outlives its request when that timed out. */
struct dm_op {
	struct dm_op *next;
	struct dm_buffer *buf;
	bool done;
	bool abandoned;
	int status;
};

struct client {
	struct jsonl_writer out;
	struct session *sessions;
	struct command *commands;
	int iscsi_log_level;

	struct tpt_dm *dm;
	char dm_error[256];
	enum tpt_dm_role dm_role;
	uint16_t dm_peer_id;
	uint64_t dm_array_id;
	struct allowed_peer *allowed;
	struct dm_link *links;
	struct dm_buffer *bufs;
	struct dm_op *ops;
	uint64_t accepted_peers, refused_by_allow_list, peers_down;

	bool quit;
};

struct request {
	struct jsonl_obj obj;
	bool has_id;
	long long id;
	char err[512];
	int err_errno;		/* positive errno to report, or 0 */
};

/* ------------------------------------------------------------------ */
/* Small helpers */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ms_left(long long deadline)
{
	long long left = deadline - now_ms();

	return left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

static int fail(struct request *rq, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Handlers return fail(...): the dispatcher sends the error response. */
static int fail(struct request *rq, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rq->err, sizeof(rq->err), fmt, ap);
	va_end(ap);
	return -1;
}

static int fail_errno(struct request *rq, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail_errno(struct request *rq, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rq->err, sizeof(rq->err), fmt, ap);
	va_end(ap);
	rq->err_errno = err < 0 ? -err : err;
	return -1;
}

static const char *role_name(unsigned int role)
{
	switch (role) {
	case TPT_DM_ROLE_TARGET: return "target";
	case TPT_DM_ROLE_CONTROLLER: return "controller";
	case TPT_DM_ROLE_HOST: return "host";
	default: return "?";
	}
}

#define BAD_ROLE "field 'role' must be host, controller or target"

static int parse_role(const char *s)
{
	if (!strcmp(s, "target"))
		return TPT_DM_ROLE_TARGET;
	if (!strcmp(s, "controller"))
		return TPT_DM_ROLE_CONTROLLER;
	if (!strcmp(s, "host"))
		return TPT_DM_ROLE_HOST;
	return -1;
}

/* ------------------------------------------------------------------ */
/* Responses */

static void reply_start(struct client *c, const struct request *rq, bool ok)
{
	jsonl_begin(&c->out);
	if (rq->has_id)
		jsonl_int(&c->out, "id", rq->id);
	jsonl_bool(&c->out, "ok", ok);
}

/* Without stdout nobody is listening any more: leave at once. */
static int reply_finish(struct client *c)
{
	if (jsonl_end(&c->out, stdout)) {
		fprintf(stderr, "tpt-client: cannot write stdout: %s\n",
			strerror(errno));
		exit(1);
	}
	return 0;
}

static int reply_ok(struct client *c, const struct request *rq)
{
	reply_start(c, rq, true);
	return reply_finish(c);
}

static void reply_error(struct client *c, const struct request *rq)
{
	const char *name;

	reply_start(c, rq, false);
	jsonl_str(&c->out, "error", rq->err[0] ? rq->err : "unknown error");
	if (rq->err_errno) {
		name = strerrorname_np(rq->err_errno);
		jsonl_int(&c->out, "errno", rq->err_errno);
		jsonl_str(&c->out, "errno_name", name ? name : "?");
	}
	reply_finish(c);
}

/* ------------------------------------------------------------------ */
/* Request fields.  Each getter returns 0 with the value stored, 1 when an
 * optional field is absent (the caller's default stays), -1 with the
 * error set. */

static int get_str(struct request *rq, const char *key, bool required,
		   const char **out)
{
	const struct jsonl_value *v = jsonl_get(&rq->obj, key);

	if (!v)
		return required ? fail(rq, "missing field '%s'", key) : 1;
	if (v->type != JSONL_STRING)
		return fail(rq, "field '%s' must be a string", key);
	*out = v->str;
	return 0;
}

static int get_name(struct request *rq, const char *key, const char **out)
{
	if (get_str(rq, key, true, out) < 0)
		return -1;
	if (!(*out)[0])
		return fail(rq, "field '%s' must not be empty", key);
	return 0;
}

static int get_int(struct request *rq, const char *key, bool required,
		   long long min, long long max, long long *out)
{
	const struct jsonl_value *v = jsonl_get(&rq->obj, key);

	if (!v)
		return required ? fail(rq, "missing field '%s'", key) : 1;
	if (v->type != JSONL_INT)
		return fail(rq, "field '%s' must be an integer", key);
	if (v->integer < min || v->integer > max)
		return fail(rq, "field '%s' must be in %lld..%lld", key, min,
			    max);
	*out = v->integer;
	return 0;
}

static int get_size(struct request *rq, const char *key, bool required,
		    size_t max, size_t *out)
{
	long long v;
	int rc = get_int(rq, key, required, 0, (long long)max, &v);

	if (!rc)
		*out = (size_t)v;
	return rc;
}

/* A u64 as a decimal string (what we recommend) or a plain integer. */
static int get_u64(struct request *rq, const char *key, bool required,
		   uint64_t *out)
{
	const struct jsonl_value *v = jsonl_get(&rq->obj, key);
	unsigned long long n;
	char *end;

	if (!v)
		return required ? fail(rq, "missing field '%s'", key) : 1;
	if (v->type == JSONL_INT) {
		if (v->integer < 0)
			return fail(rq, "field '%s' must not be negative", key);
		*out = (uint64_t)v->integer;
		return 0;
	}
	if (v->type != JSONL_STRING)
		return fail(rq, "field '%s' must be a decimal string", key);
	if (v->str[0] < '0' || v->str[0] > '9')
		return fail(rq, "field '%s' is not a decimal number", key);
	errno = 0;
	n = strtoull(v->str, &end, 10);
	if (errno || *end)
		return fail(rq, "field '%s' is not a decimal u64", key);
	*out = n;
	return 0;
}

static int get_hex(struct request *rq, const char *key, bool required,
		   unsigned char **out, size_t *len)
{
	const char *s;
	int rc = get_str(rq, key, required, &s);

	if (rc)
		return rc;
	rc = jsonl_hex_decode(s, strlen(s), out, len);
	if (rc == -ENOMEM)
		return fail(rq, "out of memory decoding '%s'", key);
	if (rc)
		return fail(rq, "field '%s' is not an even-length hex string",
			    key);
	return 0;
}

static int get_bool(struct request *rq, const char *key, bool *out)
{
	const struct jsonl_value *v = jsonl_get(&rq->obj, key);

	if (!v)
		return 1;
	if (v->type != JSONL_BOOL)
		return fail(rq, "field '%s' must be true or false", key);
	*out = v->boolean;
	return 0;
}

static int get_timeout(struct request *rq, long long *deadline)
{
	long long ms = DEFAULT_TIMEOUT_MS;

	if (get_int(rq, "timeout_ms", false, 0, MAX_TIMEOUT_MS, &ms) < 0)
		return -1;
	*deadline = now_ms() + ms;
	return 0;
}

static int get_token(struct request *rq, uint8_t token[TPT_DM_TOKEN_LEN])
{
	unsigned char *bytes;
	size_t len;

	if (get_hex(rq, "token", true, &bytes, &len) < 0)
		return -1;
	if (len != TPT_DM_TOKEN_LEN) {
		free(bytes);
		return fail(rq, "field 'token' must be %d hex digits",
			    2 * TPT_DM_TOKEN_LEN);
	}
	memcpy(token, bytes, len);
	free(bytes);
	return 0;
}

/* ------------------------------------------------------------------ */
/* iSCSI sessions: lookup and teardown */

/* libiscsi's last error without the newline some of its messages end in. */
static const char *iscsi_why(struct iscsi_context *iscsi)
{
	static char why[256];
	size_t n;

	snprintf(why, sizeof(why), "%s", iscsi_get_error(iscsi));
	n = strlen(why);
	while (n && (why[n - 1] == '\n' || why[n - 1] == ' ' ||
		     why[n - 1] == '.'))
		why[--n] = '\0';
	return why;
}

static struct session *session_find(struct client *c, const char *name)
{
	struct session *s;

	for (s = c->sessions; s; s = s->next)
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

static void session_failed(struct session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Only records the failure: callbacks may not destroy the context they
 * run in, so the event loop tears it down afterwards. */
static void session_failed(struct session *s, const char *fmt, ...)
{
	va_list ap;

	if (s->state == SESSION_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
	if (s->state == SESSION_UP)
		fprintf(stderr, "tpt-client: session %s: %s\n", s->name,
			s->error);
	s->state = SESSION_FAILED;
}

static void command_fail(struct command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void command_fail(struct command *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd->error, sizeof(cmd->error), fmt, ap);
	va_end(ap);
	cmd->failed = true;
	cmd->state = CMD_DONE;
}

/* Destroy the libiscsi context; what it did not call back (it skips
 * callbacks once logged out) is failed here with the same reason. */
static void session_close_context(struct session *s, const char *reason)
{
	struct command *cmd;
	struct tmf_wait *tmf;

	if (s->iscsi) {
		s->cancel_reason = reason;
		iscsi_destroy_context(s->iscsi);
		s->iscsi = NULL;
		s->cancel_reason = NULL;
	}
	for (cmd = s->client->commands; cmd; cmd = cmd->next)
		if (cmd->session == s && cmd->state == CMD_PENDING)
			command_fail(cmd, "cancelled: %s", reason);
	for (tmf = s->tmfs; tmf; tmf = tmf->next) {
		if (!tmf->done) {
			tmf->done = true;
			tmf->status = SCSI_STATUS_CANCELLED;
		}
	}
	if (s->state != SESSION_FAILED) {
		snprintf(s->error, sizeof(s->error), "%s", reason);
		s->state = SESSION_FAILED;
	}
}

static void session_free(struct client *c, struct session *s,
			 const char *reason)
{
	struct session **pp;
	struct command *cmd;
	struct tmf_wait *tmf;

	session_close_context(s, reason);
	for (cmd = c->commands; cmd; cmd = cmd->next)
		if (cmd->session == s)
			cmd->session = NULL;
	while ((tmf = s->tmfs)) {
		s->tmfs = tmf->next;
		free(tmf);
	}
	for (pp = &c->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	free(s->name);
	free(s);
}

/* ------------------------------------------------------------------ */
/* Datamover callbacks */

static void dm_log(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "tpt-client: dm: %s\n", msg);
}

/* Equal-time compare: the token is a secret. */
static bool token_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t diff = 0;
	int i;

	for (i = 0; i < TPT_DM_TOKEN_LEN; i++)
		diff |= a[i] ^ b[i];
	return !diff;
}

static void format_addr(const struct sockaddr *sa, socklen_t len, char *out,
			size_t outlen)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (!sa || getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
			       NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(out, outlen, "?");
	else
		snprintf(out, outlen, "%s:%s", host, serv);
}

/* The anti-spoofing check of paper III-B, as a host or controller does
 * it: only peers announced with dm_allow get in, and only with their
 * token (and array and role, when dm_allow named them). */
static int dm_accept(void *arg, const struct tpt_dm_hello *hello,
		     const struct sockaddr *src, socklen_t srclen)
{
	struct client *c = arg;
	struct allowed_peer *a;
	char from[NI_MAXHOST + NI_MAXSERV + 2];

	format_addr(src, srclen, from, sizeof(from));
	for (a = c->allowed; a; a = a->next) {
		if (a->peer_id != hello->peer_id ||
		    !token_equal(a->token, hello->token))
			continue;
		if (a->match_array && a->array_id != hello->array_id)
			continue;
		if (a->role && a->role != hello->role)
			continue;
		c->accepted_peers++;
		fprintf(stderr, "tpt-client: dm: accepted %s peer %u from %s\n",
			role_name(hello->role), hello->peer_id, from);
		return 0;
	}
	c->refused_by_allow_list++;
	fprintf(stderr, "tpt-client: dm: refused %s peer %u (array %" PRIu64
		") from %s: not on the allow list\n", role_name(hello->role),
		hello->peer_id, hello->array_id, from);
	return -EACCES;
}

static void dm_connected(struct tpt_dm_peer *peer, int status, void *arg)
{
	struct dm_link *link = arg;

	(void)peer;
	if (link->state != LINK_CONNECTING)
		return;
	link->status = status;
	link->state = status ? LINK_FAILED : LINK_UP;
}

static void dm_peer_down(struct tpt_dm_peer *peer, void *arg)
{
	struct client *c = arg;
	struct dm_link *link;

	c->peers_down++;
	for (link = c->links; link; link = link->next) {
		if (link->peer == peer) {
			fprintf(stderr, "tpt-client: dm: peer %s went down\n",
				link->name);
			link->state = LINK_DOWN;
			return;
		}
	}
}

static void dm_op_done(int status, void *arg)
{
	struct dm_op *op = arg;

	op->done = true;
	op->status = status;
	op->buf->inflight--;
}

static void dm_reap_ops(struct client *c)
{
	struct dm_op **pp = &c->ops, *op;

	while ((op = *pp)) {
		if (op->done && op->abandoned) {
			*pp = op->next;
			free(op);
		} else {
			pp = &op->next;
		}
	}
}

/* ------------------------------------------------------------------ */
/* The event loop */

/* One pass: sleep at most max_ms until an iSCSI socket, the datamover or
 * (with_stdin) stdin is ready, then service everything.  Returns stdin's
 * revents. */
static short progress_once(struct client *c, int max_ms, bool with_stdin)
{
	struct pollfd pfd[MAX_SESSIONS + 2];
	struct session *polled[MAX_SESSIONS], *s;
	int n = 0, nsess = 0, first_session, stdin_slot = -1;
	int timeout = max_ms, i, rc;
	short revents;

	if (with_stdin) {
		stdin_slot = n;
		pfd[n++] = (struct pollfd){ .fd = STDIN_FILENO,
					    .events = POLLIN };
	}
	first_session = n;
	for (s = c->sessions; s && nsess < MAX_SESSIONS; s = s->next) {
		int fd, events;

		if (!s->iscsi || s->state == SESSION_FAILED)
			continue;
		fd = iscsi_get_fd(s->iscsi);
		events = iscsi_which_events(s->iscsi);
		if (fd < 0 && s->state == SESSION_UP) {
			session_failed(s, "connection closed: %s",
				       iscsi_why(s->iscsi));
			continue;
		}
		/* No events now: still serviced below, and soon again. */
		if (fd < 0 || !events) {
			fd = -1;
			if (timeout > ISCSI_RETRY_MS)
				timeout = ISCSI_RETRY_MS;
		}
		pfd[n++] = (struct pollfd){ .fd = fd, .events = (short)events };
		polled[nsess++] = s;
	}
	if (c->dm) {
		pfd[n++] = (struct pollfd){ .fd = tpt_dm_event_fd(c->dm),
					    .events = POLLIN };
		if (timeout > DM_BEAT_MS)
			timeout = DM_BEAT_MS;
	}
	if (timeout < 0)
		timeout = 0;

	if (poll(pfd, (nfds_t)n, timeout) < 0) {
		if (errno != EINTR)
			fprintf(stderr, "tpt-client: poll: %s\n",
				strerror(errno));
		for (i = 0; i < n; i++)
			pfd[i].revents = 0;
	}

	for (i = 0; i < nsess; i++) {
		s = polled[i];
		revents = pfd[first_session + i].revents;
		if (s->state == SESSION_FAILED || !s->iscsi)
			continue;
		if (revents & POLLNVAL) {
			session_failed(s, "connection socket closed");
			continue;
		}
		/* Called with no events too: libiscsi runs its timers here.
		 * Without auto-reconnect a dead connection ends up here, with
		 * a message about not reconnecting rather than about why. */
		if (iscsi_service(s->iscsi, revents) < 0)
			session_failed(s, "%s (libiscsi: %s)",
				       s->state == SESSION_UP ?
				       "connection lost" : "connection failed",
				       iscsi_why(s->iscsi));
	}
	if (c->dm) {
		rc = tpt_dm_progress(c->dm);
		if (rc < 0 && !c->dm_error[0]) {
			snprintf(c->dm_error, sizeof(c->dm_error),
				 "tpt_dm_progress: %s (%s)",
				 tpt_dm_strerror(c->dm), strerror(-rc));
			fprintf(stderr, "tpt-client: %s\n", c->dm_error);
		}
		dm_reap_ops(c);
	}
	for (s = c->sessions; s; s = s->next)
		if (s->state == SESSION_FAILED && s->iscsi)
			session_close_context(s, s->error);

	return stdin_slot >= 0 ? pfd[stdin_slot].revents : 0;
}

/* ------------------------------------------------------------------ */
/* login, logout, drop */

static void session_logged_in(struct iscsi_context *iscsi, int status,
			      void *command_data, void *private_data)
{
	struct session *s = private_data;

	(void)command_data;
	if (s->state != SESSION_LOGGING_IN)
		return;
	if (status != SCSI_STATUS_GOOD)
		session_failed(s, "login failed: %s", iscsi_why(iscsi));
	else
		s->state = SESSION_UP;
}

static void session_connected(struct iscsi_context *iscsi, int status,
			      void *command_data, void *private_data)
{
	struct session *s = private_data;

	(void)command_data;
	/* libiscsi may call this again when the connection goes away. */
	if (s->state != SESSION_CONNECTING)
		return;
	if (status != SCSI_STATUS_GOOD) {
		session_failed(s, "connect failed: %s", iscsi_why(iscsi));
		return;
	}
	s->state = SESSION_LOGGING_IN;
	if (iscsi_login_async(iscsi, session_logged_in, s))
		session_failed(s, "cannot start login: %s",
			       iscsi_why(iscsi));
}

static int count_sessions(const struct client *c)
{
	const struct session *s;
	int n = 0;

	for (s = c->sessions; s; s = s->next)
		n++;
	return n;
}

/* Connect and log in with iscsi_connect_async + iscsi_login_async rather
 * than iscsi_full_connect_async: the latter sends TEST UNIT READYs of its
 * own and swallows unit attentions the tests want to see. */
static int op_login(struct client *c, struct request *rq)
{
	const char *name, *url_text, *initiator = DEFAULT_INITIATOR;
	struct iscsi_url *url;
	struct session *s;
	long long deadline;
	int rc;

	if (get_name(rq, "name", &name) || get_name(rq, "url", &url_text) ||
	    get_str(rq, "initiator", false, &initiator) < 0 ||
	    get_timeout(rq, &deadline))
		return -1;
	s = session_find(c, name);
	if (s && s->state != SESSION_FAILED)
		return fail(rq, "session '%s' already exists", name);
	if (s)
		session_free(c, s, "replaced by a new login");
	if (count_sessions(c) >= MAX_SESSIONS)
		return fail(rq, "too many sessions (%d)", MAX_SESSIONS);

	s = calloc(1, sizeof(*s));
	if (!s || !(s->name = strdup(name))) {
		free(s);
		return fail(rq, "out of memory");
	}
	s->client = c;
	s->state = SESSION_CONNECTING;
	s->next = c->sessions;
	c->sessions = s;

	s->iscsi = iscsi_create_context(initiator);
	if (!s->iscsi) {
		session_free(c, s, "login failed");
		return fail(rq, "cannot create an iSCSI context for '%s'",
			    initiator);
	}
	if (c->iscsi_log_level) {
		iscsi_set_log_level(s->iscsi, c->iscsi_log_level);
		iscsi_set_log_fn(s->iscsi, iscsi_log_to_stderr);
	}
	url = iscsi_parse_full_url(s->iscsi, url_text);
	if (!url) {
		fail(rq, "bad URL '%s': %s", url_text,
		     iscsi_why(s->iscsi));
		session_free(c, s, "login failed");
		return -1;
	}
	/* A lost session must show as lost, not be quietly re-established. */
	tool_iscsi_configure(s->iscsi, url, ISCSI_HEADER_DIGEST_NONE, true);
	s->lun = url->lun;
	rc = iscsi_connect_async(s->iscsi, url->portal, session_connected, s);
	iscsi_destroy_url(url);
	if (rc) {
		fail(rq, "cannot connect: %s", iscsi_why(s->iscsi));
		session_free(c, s, "login failed");
		return -1;
	}

	while ((s->state == SESSION_CONNECTING ||
		s->state == SESSION_LOGGING_IN) && ms_left(deadline))
		progress_once(c, ms_left(deadline), false);
	if (s->state == SESSION_UP)
		return reply_ok(c, rq);
	if (s->state == SESSION_FAILED)
		fail(rq, "%s", s->error);
	else
		fail(rq, "login timed out");
	session_free(c, s, "login failed");
	return -1;
}

static void session_logged_out(struct iscsi_context *iscsi, int status,
			       void *command_data, void *private_data)
{
	struct session *s = private_data;

	(void)iscsi;
	(void)command_data;
	s->logout_done = true;
	s->logout_status = status;
}

static int op_logout(struct client *c, struct request *rq)
{
	const char *name;
	struct session *s;
	long long deadline;

	if (get_name(rq, "name", &name) || get_timeout(rq, &deadline))
		return -1;
	s = session_find(c, name);
	if (!s)
		return fail(rq, "no session '%s'", name);
	if (s->state != SESSION_UP) {
		fail(rq, "session '%s' had already failed: %s", name, s->error);
		session_free(c, s, "logged out");
		return -1;
	}
	if (iscsi_logout_async(s->iscsi, session_logged_out, s)) {
		fail(rq, "cannot send logout: %s", iscsi_why(s->iscsi));
		session_free(c, s, "logout failed");
		return -1;
	}
	while (!s->logout_done && s->state == SESSION_UP && ms_left(deadline))
		progress_once(c, ms_left(deadline), false);
	if (!s->logout_done)
		fail(rq, "logout %s (session removed anyway)",
		     s->state == SESSION_FAILED ? s->error : "timed out");
	else if (s->logout_status != SCSI_STATUS_GOOD)
		fail(rq, "logout failed (session removed anyway)");
	session_free(c, s, "session logged out");
	return rq->err[0] ? -1 : reply_ok(c, rq);
}

/* Simulate session loss: no logout, and by default a TCP reset (linger
 * 0) so the target learns at once instead of after a FIN handshake. */
static int op_drop(struct client *c, struct request *rq)
{
	const char *name;
	struct session *s;
	bool reset = true;
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int fd;

	if (get_name(rq, "name", &name) || get_bool(rq, "reset", &reset) < 0)
		return -1;
	s = session_find(c, name);
	if (!s)
		return fail(rq, "no session '%s'", name);
	if (s->iscsi && reset) {
		fd = iscsi_get_fd(s->iscsi);
		if (fd >= 0 &&
		    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)))
			fprintf(stderr, "tpt-client: SO_LINGER: %s\n",
				strerror(errno));
	}
	session_free(c, s, "session dropped");
	return reply_ok(c, rq);
}

/* ------------------------------------------------------------------ */
/* SCSI commands: send, wait, abort */

static struct command *command_find(struct client *c, const char *tag)
{
	struct command *cmd;

	for (cmd = c->commands; cmd; cmd = cmd->next)
		if (!strcmp(cmd->tag, tag))
			return cmd;
	return NULL;
}

/* Only for commands libiscsi no longer knows about. */
static void command_free(struct client *c, struct command *cmd)
{
	struct command **pp;

	for (pp = &c->commands; *pp; pp = &(*pp)->next) {
		if (*pp == cmd) {
			*pp = cmd->next;
			break;
		}
	}
	if (cmd->task)
		scsi_free_scsi_task(cmd->task);
	free(cmd->out.data);
	free(cmd->tag);
	free(cmd);
}

static void command_done(struct iscsi_context *iscsi, int status,
			 void *command_data, void *private_data)
{
	struct command *cmd = private_data;
	struct session *s = cmd->session;

	/* command_data is our task, or NULL when cancelled: use ours. */
	(void)command_data;
	if (cmd->state != CMD_PENDING)
		return;
	cmd->state = CMD_DONE;
	cmd->status = status;
	switch (status) {
	case SCSI_STATUS_CANCELLED:
		if (s && !s->cancel_reason)
			session_failed(s, "connection lost: %s",
				       iscsi_why(iscsi));
		command_fail(cmd, "cancelled: %s",
			     !s ? "session closed" :
			     s->cancel_reason ? s->cancel_reason : s->error);
		break;
	case SCSI_STATUS_ERROR:
		command_fail(cmd, "iSCSI error: %s", iscsi_why(iscsi));
		break;
	case SCSI_STATUS_TIMEOUT:
		command_fail(cmd, "timed out in libiscsi");
		break;
	default:
		if (status < 0 || status > 0xff)
			command_fail(cmd, "unexpected libiscsi status %#x: %s",
				     (unsigned int)status,
				     iscsi_why(iscsi));
		break;
	}
}

static int parse_dir(const char *s)
{
	if (!strcmp(s, "none"))
		return SCSI_XFER_NONE;
	if (!strcmp(s, "in"))
		return SCSI_XFER_READ;
	if (!strcmp(s, "out"))
		return SCSI_XFER_WRITE;
	return -1;
}

static int op_send(struct client *c, struct request *rq)
{
	const char *name, *tag, *dir_text;
	unsigned char *cdb = NULL, *data = NULL;
	size_t cdb_len = 0, data_len = 0, inlen = 0;
	long long lun;
	struct session *s;
	struct command *cmd;
	struct scsi_task *task;
	int dir, expxferlen, rc;

	if (get_name(rq, "name", &name) || get_name(rq, "tag", &tag) ||
	    get_str(rq, "dir", true, &dir_text))
		return -1;
	s = session_find(c, name);
	if (!s)
		return fail(rq, "no session '%s'", name);
	if (s->state != SESSION_UP)
		return fail(rq, "session '%s' is not logged in: %s", name,
			    s->error);
	cmd = command_find(c, tag);
	if (cmd && cmd->state == CMD_PENDING)
		return fail(rq, "tag '%s' is still in flight", tag);
	if (cmd && cmd->state == CMD_DONE)
		return fail(rq, "tag '%s' has a result wait has not collected",
			    tag);
	dir = parse_dir(dir_text);
	if (dir < 0)
		return fail(rq, "field 'dir' must be none, in or out");
	lun = s->lun;
	if (get_int(rq, "lun", false, 0, 0xffff, &lun) < 0 ||
	    get_size(rq, "inlen", dir == SCSI_XFER_READ, MAX_XFER_BYTES,
		     &inlen) < 0)
		return -1;
	if (dir != SCSI_XFER_READ && jsonl_get(&rq->obj, "inlen"))
		return fail(rq, "'inlen' goes with dir=in only");
	if (dir != SCSI_XFER_WRITE && jsonl_get(&rq->obj, "data"))
		return fail(rq, "'data' goes with dir=out only");

	if (get_hex(rq, "cdb", true, &cdb, &cdb_len) < 0)
		return -1;
	if (cdb_len < 1 || cdb_len > SCSI_CDB_MAX_SIZE) {
		free(cdb);
		return fail(rq, "a CDB is 1..%d bytes, not %zu",
			    SCSI_CDB_MAX_SIZE, cdb_len);
	}
	if (dir == SCSI_XFER_WRITE &&
	    get_hex(rq, "data", true, &data, &data_len) < 0) {
		free(cdb);
		return -1;
	}
	if (data_len > MAX_XFER_BYTES) {
		free(cdb);
		free(data);
		return fail(rq, "data-out larger than %u bytes",
			    MAX_XFER_BYTES);
	}
	expxferlen = (int)(dir == SCSI_XFER_WRITE ? data_len : inlen);

	if (cmd)		/* a reported tag is reused */
		command_free(c, cmd);
	cmd = calloc(1, sizeof(*cmd));
	task = scsi_create_task((int)cdb_len, cdb, dir, expxferlen);
	free(cdb);
	if (!cmd || !task || !(cmd->tag = strdup(tag))) {
		if (task)
			scsi_free_scsi_task(task);
		free(cmd);
		free(data);
		return fail(rq, "out of memory");
	}
	cmd->session = s;
	cmd->task = task;
	cmd->out.data = data;
	cmd->out.size = data_len;
	cmd->state = CMD_PENDING;
	cmd->next = c->commands;
	c->commands = cmd;

	/* libiscsi keeps pointing at cmd->out until the command is done. */
	rc = iscsi_scsi_command_async(s->iscsi, (int)lun, task, command_done,
				      data_len ? &cmd->out : NULL, cmd);
	if (rc) {
		fail(rq, "cannot queue the command: %s",
		     iscsi_why(s->iscsi));
		command_free(c, cmd);
		return -1;
	}
	cmd->lun = task->lun;
	cmd->itt = task->itt;
	cmd->cmdsn = task->cmdsn;
	return reply_ok(c, rq);
}

static const char *residual_kind(enum scsi_residual r)
{
	switch (r) {
	case SCSI_RESIDUAL_UNDERFLOW: return "underflow";
	case SCSI_RESIDUAL_OVERFLOW: return "overflow";
	default: return "none";
	}
}

/* libiscsi does not keep raw sense: on CHECK CONDITION, task->datain
 * holds the iSCSI sense segment, a 2-byte SenseLength then the sense. */
static void emit_command_result(struct client *c, struct command *cmd)
{
	struct scsi_task *t = cmd->task;
	const unsigned char *sense = NULL, *data = NULL;
	size_t sense_len = 0, data_len = 0;

	if (t && t->datain.data && t->datain.size > 0) {
		if (cmd->status == SCSI_STATUS_CHECK_CONDITION) {
			size_t seg = (size_t)t->datain.size;

			if (seg >= 2) {
				sense_len = (size_t)t->datain.data[0] << 8 |
					    t->datain.data[1];
				if (sense_len > seg - 2)
					sense_len = seg - 2;
				sense = t->datain.data + 2;
			}
		} else {
			data = t->datain.data;
			data_len = (size_t)t->datain.size;
		}
	}
	jsonl_int(&c->out, "status", cmd->status);
	jsonl_hex(&c->out, "sense", sense, sense_len);
	jsonl_hex(&c->out, "data", data, data_len);
	jsonl_int(&c->out, "residual", t ? (long long)t->residual : 0);
	jsonl_str(&c->out, "residual_kind",
		  residual_kind(t ? t->residual_status :
				SCSI_RESIDUAL_NO_RESIDUAL));
}

/* The list is newest first: keep the MAX_REPORTED newest collected. */
static void prune_reported(struct client *c)
{
	struct command *cmd, *next;
	unsigned int kept = 0;

	for (cmd = c->commands; cmd; cmd = next) {
		next = cmd->next;
		if (cmd->state == CMD_REPORTED && ++kept > MAX_REPORTED)
			command_free(c, cmd);
	}
}

static int op_wait(struct client *c, struct request *rq)
{
	const struct jsonl_value *tags = jsonl_get(&rq->obj, "tags");
	struct command *cmd;
	long long deadline;
	bool pending;
	size_t i;

	if (!tags)
		return fail(rq, "missing field 'tags'");
	if (tags->type != JSONL_ARRAY)
		return fail(rq, "field 'tags' must be an array of strings");
	if (get_timeout(rq, &deadline))
		return -1;
	for (;;) {
		pending = false;
		for (i = 0; i < tags->nitems && !pending; i++) {
			cmd = command_find(c, tags->items[i]);
			pending = cmd && cmd->state == CMD_PENDING;
		}
		if (!pending || !ms_left(deadline))
			break;
		progress_once(c, ms_left(deadline), false);
	}

	for (i = 0; i < tags->nitems; i++) {
		cmd = command_find(c, tags->items[i]);
		reply_start(c, rq,
			    cmd && cmd->state == CMD_DONE && !cmd->failed);
		jsonl_str(&c->out, "tag", tags->items[i]);
		if (!cmd) {
			jsonl_str(&c->out, "error", "unknown tag");
		} else if (cmd->state == CMD_PENDING) {
			jsonl_str(&c->out, "error", "timeout");
		} else if (cmd->state == CMD_REPORTED) {
			jsonl_str(&c->out, "error", "result already collected");
		} else {
			if (cmd->failed)
				jsonl_str(&c->out, "error", cmd->error);
			else
				emit_command_result(c, cmd);
			/* Keep only what ABORT TASK needs. */
			cmd->state = CMD_REPORTED;
			if (cmd->task)
				scsi_free_scsi_task(cmd->task);
			cmd->task = NULL;
			free(cmd->out.data);
			cmd->out.data = NULL;
			cmd->out.size = 0;
		}
		reply_finish(c);
	}
	prune_reported(c);
	reply_start(c, rq, true);
	jsonl_bool(&c->out, "done", true);
	return reply_finish(c);
}

static const char *tmf_response_name(uint32_t r)
{
	switch (r) {
	case ISCSI_TMR_FUNC_COMPLETE: return "function complete";
	case ISCSI_TMR_TASK_DOES_NOT_EXIST: return "task does not exist";
	case ISCSI_TMR_LUN_DOES_NOT_EXIST: return "LUN does not exist";
	case ISCSI_TMR_TASK_STILL_ALLEGIANT: return "task still allegiant";
	case ISCSI_TMR_TASK_ALLEGIANCE_REASS_NOT_SUPPORTED:
		return "task allegiance reassignment not supported";
	case ISCSI_TMR_TMF_NOT_SUPPORTED: return "not supported";
	case ISCSI_TMR_FUNC_AUTH_FAILED: return "authorization failed";
	case ISCSI_TMR_FUNC_REJECTED: return "rejected";
	default: return "unknown";
	}
}

static void tmf_done(struct iscsi_context *iscsi, int status,
		     void *command_data, void *private_data)
{
	struct tmf_wait *tmf = private_data;

	(void)iscsi;
	if (tmf->done)
		return;
	tmf->done = true;
	tmf->status = status;
	if (status == SCSI_STATUS_GOOD && command_data)
		tmf->response = *(const uint32_t *)command_data;
}

static int op_abort(struct client *c, struct request *rq)
{
	const char *name, *tag;
	struct session *s;
	struct command *cmd;
	struct tmf_wait *tmf, **pp;
	struct scsi_task shim, *task;
	long long deadline;
	bool cancelled = false;

	if (get_name(rq, "name", &name) || get_name(rq, "tag", &tag) ||
	    get_timeout(rq, &deadline))
		return -1;
	s = session_find(c, name);
	if (!s)
		return fail(rq, "no session '%s'", name);
	if (s->state != SESSION_UP)
		return fail(rq, "session '%s' is not logged in: %s", name,
			    s->error);
	cmd = command_find(c, tag);
	if (!cmd)
		return fail(rq, "unknown tag '%s'", tag);
	if (cmd->session != s)
		return fail(rq, "tag '%s' was not sent on session '%s'", tag,
			    name);
	/* libiscsi reads only lun, itt and cmdsn from the task, so a reported
	 * command (task freed) is named by a stand-in carrying those. */
	task = cmd->task;
	if (!task) {
		memset(&shim, 0, sizeof(shim));
		shim.lun = cmd->lun;
		shim.itt = cmd->itt;
		shim.cmdsn = cmd->cmdsn;
		task = &shim;
	}
	tmf = calloc(1, sizeof(*tmf));
	if (!tmf)
		return fail(rq, "out of memory");
	tmf->next = s->tmfs;
	s->tmfs = tmf;
	if (iscsi_task_mgmt_abort_task_async(s->iscsi, task, tmf_done, tmf)) {
		fail(rq, "cannot send ABORT TASK: %s",
		     iscsi_why(s->iscsi));
		goto out;
	}
	while (!tmf->done && ms_left(deadline))
		progress_once(c, ms_left(deadline), false);
	if (!tmf->done) {
		fail(rq, "no task management response in time");
		goto out;
	}
	if (tmf->status != SCSI_STATUS_GOOD) {
		fail(rq, "ABORT TASK failed: %s",
		     s->state == SESSION_FAILED ? s->error : "cancelled");
		goto out;
	}
	/* A target sends no SCSI response for a task it aborted, and
	 * libiscsi 1.19 does not forget the task itself (its header says it
	 * does): cancel it locally so wait reports the abort. */
	if (tmf->response == ISCSI_TMR_FUNC_COMPLETE &&
	    cmd->state == CMD_PENDING && s->iscsi) {
		s->cancel_reason = "aborted by ABORT TASK";
		iscsi_scsi_cancel_task(s->iscsi, cmd->task);
		s->cancel_reason = NULL;
		cancelled = cmd->state == CMD_DONE;
	}
	reply_start(c, rq, true);
	jsonl_int(&c->out, "response", tmf->response);
	jsonl_str(&c->out, "response_name", tmf_response_name(tmf->response));
	jsonl_bool(&c->out, "cancelled", cancelled);
	reply_finish(c);
out:
	/* A timed-out request's record stays: libiscsi may still answer. */
	if (tmf->done) {
		for (pp = &s->tmfs; *pp; pp = &(*pp)->next) {
			if (*pp == tmf) {
				*pp = tmf->next;
				free(tmf);
				break;
			}
		}
	}
	return rq->err[0] ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Datamover: open, allow, connect */

static int need_dm(struct client *c, struct request *rq)
{
	if (!c->dm)
		return fail(rq, "the datamover is not open (dm_open first)");
	return 0;
}

static int op_dm_open(struct client *c, struct request *rq)
{
	const char *role_text, *listen = "127.0.0.1", *provider = NULL;
	long long port = 0, peer_id = 0;
	uint64_t array_id = 0;
	size_t pool_bytes = CLIENT_POOL_BYTES;
	struct tpt_dm_config cfg;
	int role, rc;

	if (c->dm)
		return fail(rq, "the datamover is already open");
	if (get_str(rq, "role", true, &role_text) ||
	    get_str(rq, "listen", false, &listen) < 0 ||
	    get_str(rq, "provider", false, &provider) < 0 ||
	    get_int(rq, "port", false, 0, 65535, &port) < 0 ||
	    get_int(rq, "peer_id", false, 0, 65535, &peer_id) < 0 ||
	    get_u64(rq, "array_id", false, &array_id) < 0 ||
	    get_size(rq, "pool_bytes", false, MAX_BUF_BYTES, &pool_bytes) < 0)
		return -1;
	role = parse_role(role_text);
	if (role < 0)
		return fail(rq, BAD_ROLE);
	if (pool_bytes < CLIENT_POOL_BUF_BYTES)
		return fail(rq, "pool_bytes must be at least %u",
			    CLIENT_POOL_BUF_BYTES);

	memset(&cfg, 0, sizeof(cfg));
	cfg.provider = provider && provider[0] ? provider : NULL;
	cfg.listen_addr = listen[0] ? listen : NULL;
	cfg.listen_port = (uint16_t)port;
	cfg.pool_bytes = pool_bytes;
	cfg.pool_buf_bytes = CLIENT_POOL_BUF_BYTES;
	cfg.accept = dm_accept;
	cfg.accept_arg = c;
	cfg.log = dm_log;
	rc = tpt_dm_open(&cfg, &c->dm);
	if (rc < 0) {
		c->dm = NULL;
		return fail_errno(rq, rc, "tpt_dm_open: %s", strerror(-rc));
	}
	tpt_dm_set_peer_down_cb(c->dm, dm_peer_down, c);
	c->dm_role = (enum tpt_dm_role)role;
	c->dm_peer_id = (uint16_t)peer_id;
	c->dm_array_id = array_id;
	c->dm_error[0] = '\0';

	reply_start(c, rq, true);
	jsonl_int(&c->out, "port",
		  cfg.listen_addr ? tpt_dm_listen_port(c->dm) : 0);
	jsonl_str(&c->out, "provider", tpt_dm_provider_name(c->dm));
	return reply_finish(c);
}

static int op_dm_allow(struct client *c, struct request *rq)
{
	struct allowed_peer *a;
	long long peer_id;
	uint8_t token[TPT_DM_TOKEN_LEN];
	const char *role_text = NULL;
	uint64_t array_id = 0;
	int role = 0, has_array = 1;

	if (get_int(rq, "peer_id", true, 0, 65535, &peer_id) ||
	    get_token(rq, token) ||
	    (has_array = get_u64(rq, "array_id", false, &array_id)) < 0 ||
	    get_str(rq, "role", false, &role_text) < 0)
		return -1;
	if (role_text && (role = parse_role(role_text)) < 0)
		return fail(rq, BAD_ROLE);
	a = calloc(1, sizeof(*a));
	if (!a)
		return fail(rq, "out of memory");
	a->peer_id = (uint16_t)peer_id;
	memcpy(a->token, token, sizeof(token));
	a->match_array = has_array == 0;
	a->array_id = array_id;
	a->role = (uint8_t)role;
	a->next = c->allowed;
	c->allowed = a;
	return reply_ok(c, rq);
}

static struct dm_link *link_find(struct client *c, const char *name)
{
	struct dm_link *link;

	for (link = c->links; link; link = link->next)
		if (!strcmp(link->name, name))
			return link;
	return NULL;
}

static void link_free(struct client *c, struct dm_link *link)
{
	struct dm_link **pp;

	if (link->peer && c->dm)
		tpt_dm_disconnect(link->peer);
	for (pp = &c->links; *pp; pp = &(*pp)->next) {
		if (*pp == link) {
			*pp = link->next;
			break;
		}
	}
	free(link->name);
	free(link);
}

static int op_dm_connect(struct client *c, struct request *rq)
{
	const char *name, *addr, *role_text = NULL;
	long long port, peer_id;
	struct tpt_dm_hello hello;
	struct dm_link *link;
	long long deadline;
	int role, rc;

	if (need_dm(c, rq) || get_name(rq, "name", &name) ||
	    get_name(rq, "addr", &addr) ||
	    get_int(rq, "port", true, 1, 65535, &port) ||
	    get_str(rq, "role", false, &role_text) < 0 ||
	    get_timeout(rq, &deadline))
		return -1;
	memset(&hello, 0, sizeof(hello));
	role = c->dm_role;
	if (role_text && (role = parse_role(role_text)) < 0)
		return fail(rq, BAD_ROLE);
	peer_id = c->dm_peer_id;
	hello.array_id = c->dm_array_id;
	if (get_int(rq, "peer_id", false, 0, 65535, &peer_id) < 0 ||
	    get_u64(rq, "array_id", false, &hello.array_id) < 0 ||
	    get_token(rq, hello.token))
		return -1;
	hello.role = (uint8_t)role;
	hello.peer_id = (uint16_t)peer_id;

	link = link_find(c, name);
	if (link && (link->state == LINK_CONNECTING || link->state == LINK_UP))
		return fail(rq, "datamover link '%s' is %s", name,
			    link->state == LINK_UP ? "already up" :
			    "still connecting");
	if (link)
		link_free(c, link);
	link = calloc(1, sizeof(*link));
	if (!link || !(link->name = strdup(name))) {
		free(link);
		return fail(rq, "out of memory");
	}
	link->state = LINK_CONNECTING;
	link->next = c->links;
	c->links = link;
	rc = tpt_dm_connect(c->dm, addr, (uint16_t)port, &hello, dm_connected,
			    link, &link->peer);
	if (rc < 0) {
		fail_errno(rq, rc, "tpt_dm_connect: %s", tpt_dm_strerror(c->dm));
		link->peer = NULL;
		link_free(c, link);
		return -1;
	}
	while (link->state == LINK_CONNECTING && ms_left(deadline))
		progress_once(c, ms_left(deadline), false);
	if (link->state == LINK_UP)
		return reply_ok(c, rq);
	if (link->state == LINK_CONNECTING)
		return fail(rq, "datamover connect timed out");
	return fail_errno(rq, link->status, "datamover connect failed: %s",
			  strerror(-link->status));
}

static int op_dm_disconnect(struct client *c, struct request *rq)
{
	const char *name;
	struct dm_link *link;

	if (need_dm(c, rq) || get_name(rq, "name", &name))
		return -1;
	link = link_find(c, name);
	if (!link)
		return fail(rq, "no datamover link '%s'", name);
	link_free(c, link);
	return reply_ok(c, rq);
}

/* ------------------------------------------------------------------ */
/* Datamover: registered buffers, Put_Data / Get_Data, stats */

static struct dm_buffer *buffer_find(struct client *c, const char *name)
{
	struct dm_buffer *b;

	for (b = c->bufs; b; b = b->next)
		if (!strcmp(b->name, name))
			return b;
	return NULL;
}

/* release: false after tpt_dm_close(), which deregistered everything. */
static void buffer_free(struct client *c, struct dm_buffer *b, bool release)
{
	struct dm_buffer **pp;

	if (release && b->buf)
		tpt_dm_buf_release(b->buf);
	for (pp = &c->bufs; *pp; pp = &(*pp)->next) {
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	}
	free(b->mem);
	free(b->name);
	free(b);
}

static int get_buffer(struct client *c, struct request *rq, const char *key,
		      struct dm_buffer **out)
{
	const char *name;

	if (get_name(rq, key, &name))
		return -1;
	*out = buffer_find(c, name);
	if (!*out)
		return fail(rq, "no buffer '%s'", name);
	return 0;
}

/* offset and len must lie inside the buffer. */
static int get_range(struct request *rq, const struct dm_buffer *b,
		     size_t len, size_t *offset)
{
	if (get_size(rq, "offset", true, MAX_BUF_BYTES, offset))
		return -1;
	if (*offset > b->size || len > b->size - *offset)
		return fail(rq, "%zu bytes at offset %zu do not fit buffer '%s' "
			    "of %zu bytes", len, *offset, b->name, b->size);
	return 0;
}

static int op_buf(struct client *c, struct request *rq)
{
	const char *name, *access_text;
	struct dm_buffer *b;
	size_t size;
	unsigned int access;
	int rc;

	if (need_dm(c, rq) || get_name(rq, "name", &name) ||
	    get_size(rq, "size", true, MAX_BUF_BYTES, &size) ||
	    get_str(rq, "access", true, &access_text))
		return -1;
	if (!size)
		return fail(rq, "a buffer needs at least one byte");
	if (!strcmp(access_text, "r"))
		access = TPT_DM_ACCESS_REMOTE_READ;
	else if (!strcmp(access_text, "w"))
		access = TPT_DM_ACCESS_REMOTE_WRITE;
	else if (!strcmp(access_text, "rw"))
		access = TPT_DM_ACCESS_REMOTE_READ | TPT_DM_ACCESS_REMOTE_WRITE;
	else
		return fail(rq, "field 'access' must be r, w or rw");
	if (buffer_find(c, name))
		return fail(rq, "buffer '%s' already exists", name);

	b = calloc(1, sizeof(*b));
	if (!b)
		return fail(rq, "out of memory");
	b->size = size;
	b->name = strdup(name);
	b->mem = aligned_alloc(BUF_ALIGN,
			       (size + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN);
	if (!b->name || !b->mem) {
		free(b->name);
		free(b->mem);
		free(b);
		return fail(rq, "out of memory for %zu bytes", size);
	}
	memset(b->mem, 0, size);
	rc = tpt_dm_register(c->dm, b->mem, size, access, &b->buf);
	if (rc < 0) {
		fail_errno(rq, rc, "tpt_dm_register: %s",
			   tpt_dm_strerror(c->dm));
		free(b->name);
		free(b->mem);
		free(b);
		return -1;
	}
	b->next = c->bufs;
	c->bufs = b;
	reply_start(c, rq, true);
	jsonl_u64(&c->out, "stag", tpt_dm_buf_stag(b->buf));
	jsonl_u64(&c->out, "rma_base", tpt_dm_buf_rma_base(b->buf));
	jsonl_int(&c->out, "size", (long long)size);
	return reply_finish(c);
}

static int op_buf_write(struct client *c, struct request *rq)
{
	struct dm_buffer *b;
	unsigned char *data;
	size_t len, offset;

	if (need_dm(c, rq) || get_buffer(c, rq, "name", &b) ||
	    get_hex(rq, "data", true, &data, &len))
		return -1;
	if (get_range(rq, b, len, &offset)) {
		free(data);
		return -1;
	}
	if (len)
		memcpy((char *)b->mem + offset, data, len);
	free(data);
	return reply_ok(c, rq);
}

static int op_buf_read(struct client *c, struct request *rq)
{
	struct dm_buffer *b;
	size_t len, offset;

	if (need_dm(c, rq) || get_buffer(c, rq, "name", &b) ||
	    get_size(rq, "len", true, MAX_BUF_BYTES, &len) ||
	    get_range(rq, b, len, &offset))
		return -1;
	reply_start(c, rq, true);
	jsonl_hex(&c->out, "data", (char *)b->mem + offset, len);
	return reply_finish(c);
}

static int op_buf_release(struct client *c, struct request *rq)
{
	struct dm_buffer *b;

	if (need_dm(c, rq) || get_buffer(c, rq, "name", &b))
		return -1;
	if (b->inflight)
		return fail(rq, "buffer '%s' is in use by %u of our transfers",
			    b->name, b->inflight);
	buffer_free(c, b, true);
	return reply_ok(c, rq);
}

/* dm_put (Put_Data: our buffer -> peer's STag) and dm_get (Get_Data). */
static int dm_transfer(struct client *c, struct request *rq, bool put)
{
	const char *peer_name;
	struct dm_link *link;
	struct dm_buffer *b;
	struct dm_op *op, **pp;
	uint64_t stag, rma_addr;
	size_t len, offset;
	long long deadline;
	int rc;

	if (need_dm(c, rq) || get_name(rq, "peer", &peer_name) ||
	    get_buffer(c, rq, "buf", &b) ||
	    get_u64(rq, "stag", true, &stag) ||
	    get_u64(rq, "rma_addr", true, &rma_addr) ||
	    get_size(rq, "len", true, MAX_BUF_BYTES, &len) ||
	    get_range(rq, b, len, &offset) || get_timeout(rq, &deadline))
		return -1;
	link = link_find(c, peer_name);
	if (!link)
		return fail(rq, "no datamover link '%s'", peer_name);
	if (link->state != LINK_UP)
		return fail(rq, "datamover link '%s' is not up", peer_name);

	op = calloc(1, sizeof(*op));
	if (!op)
		return fail(rq, "out of memory");
	op->buf = b;
	b->inflight++;
	op->next = c->ops;
	c->ops = op;
	if (put)
		rc = tpt_dm_put(link->peer, b->buf, offset, stag, rma_addr, len,
				dm_op_done, op);
	else
		rc = tpt_dm_get(link->peer, b->buf, offset, stag, rma_addr, len,
				dm_op_done, op);
	if (rc < 0) {
		fail_errno(rq, rc, "%s: %s", put ? "tpt_dm_put" : "tpt_dm_get",
			   tpt_dm_strerror(c->dm));
		op->done = true;
		b->inflight--;
	} else {
		while (!op->done && ms_left(deadline))
			progress_once(c, ms_left(deadline), false);
		if (!op->done)
			fail(rq, "transfer timed out");
		else if (op->status)
			fail_errno(rq, op->status, "transfer failed: %s",
				   strerror(-op->status));
	}
	if (!op->done) {
		op->abandoned = true;	/* dm_reap_ops frees it later */
		return -1;
	}
	for (pp = &c->ops; *pp; pp = &(*pp)->next) {
		if (*pp == op) {
			*pp = op->next;
			break;
		}
	}
	free(op);
	return rq->err[0] ? -1 : reply_ok(c, rq);
}

static int op_dm_put(struct client *c, struct request *rq)
{
	return dm_transfer(c, rq, true);
}

static int op_dm_get(struct client *c, struct request *rq)
{
	return dm_transfer(c, rq, false);
}

static int op_stats(struct client *c, struct request *rq)
{
	struct tpt_dm_stats st;

	if (need_dm(c, rq))
		return -1;
	tpt_dm_get_stats(c->dm, &st);
	reply_start(c, rq, true);
	jsonl_u64(&c->out, "puts", st.puts);
	jsonl_u64(&c->out, "gets", st.gets);
	jsonl_u64(&c->out, "rma_ops", st.rma_ops);
	jsonl_u64(&c->out, "bytes_put", st.bytes_put);
	jsonl_u64(&c->out, "bytes_got", st.bytes_got);
	jsonl_u64(&c->out, "refused_peers", st.refused_peers);
	jsonl_u64(&c->out, "pool_exhausted", st.pool_exhausted);
	jsonl_u64(&c->out, "accepted_peers", c->accepted_peers);
	jsonl_u64(&c->out, "refused_by_allow_list", c->refused_by_allow_list);
	jsonl_u64(&c->out, "peers_down", c->peers_down);
	if (c->dm_error[0])
		jsonl_str(&c->out, "dm_error", c->dm_error);
	return reply_finish(c);
}

static int op_quit(struct client *c, struct request *rq)
{
	c->quit = true;
	return reply_ok(c, rq);
}

/* ------------------------------------------------------------------ */
/* Dispatch */

#define MAX_OP_FIELDS 10

struct op {
	const char *name;
	int (*run)(struct client *c, struct request *rq);
	/* Accepted besides "op" and "id": a misspelt field is an error, not
	 * a silently applied default. */
	const char *fields[MAX_OP_FIELDS];
};

static const struct op ops[] = {
	{ "login", op_login, { "name", "url", "initiator", "timeout_ms" } },
	{ "logout", op_logout, { "name", "timeout_ms" } },
	{ "drop", op_drop, { "name", "reset" } },
	{ "send", op_send,
	  { "name", "tag", "cdb", "dir", "data", "inlen", "lun" } },
	{ "wait", op_wait, { "tags", "timeout_ms" } },
	{ "abort", op_abort, { "name", "tag", "timeout_ms" } },
	{ "dm_open", op_dm_open,
	  { "role", "listen", "port", "peer_id", "array_id", "provider",
	    "pool_bytes" } },
	{ "dm_allow", op_dm_allow, { "peer_id", "token", "array_id", "role" } },
	{ "dm_connect", op_dm_connect,
	  { "name", "addr", "port", "role", "peer_id", "array_id", "token",
	    "timeout_ms" } },
	{ "dm_disconnect", op_dm_disconnect, { "name" } },
	{ "dm_put", op_dm_put,
	  { "peer", "buf", "offset", "stag", "rma_addr", "len",
	    "timeout_ms" } },
	{ "dm_get", op_dm_get,
	  { "peer", "buf", "offset", "stag", "rma_addr", "len",
	    "timeout_ms" } },
	{ "buf", op_buf, { "name", "size", "access" } },
	{ "buf_write", op_buf_write, { "name", "offset", "data" } },
	{ "buf_read", op_buf_read, { "name", "offset", "len" } },
	{ "buf_release", op_buf_release, { "name" } },
	{ "stats", op_stats, { NULL } },
	{ "quit", op_quit, { NULL } },
};

static bool op_takes(const struct op *op, const char *key)
{
	int i;

	if (!strcmp(key, "op") || !strcmp(key, "id"))
		return true;
	for (i = 0; i < MAX_OP_FIELDS && op->fields[i]; i++)
		if (!strcmp(op->fields[i], key))
			return true;
	return false;
}

static void handle_line(struct client *c, const char *line, size_t len)
{
	struct request rq;
	const struct jsonl_value *id;
	const struct op *op = NULL;
	const char *op_name;
	size_t i;

	memset(&rq, 0, sizeof(rq));
	for (i = 0; i < len; i++)
		if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
			break;
	if (i == len)		/* blank lines are not requests */
		return;
	if (jsonl_parse(line, len, &rq.obj, rq.err, sizeof(rq.err))) {
		char why[sizeof(rq.err)];

		memcpy(why, rq.err, sizeof(why));
		fail(&rq, "malformed request: %s", why);
		goto error;
	}
	id = jsonl_get(&rq.obj, "id");
	if (id && id->type == JSONL_INT) {
		rq.has_id = true;
		rq.id = id->integer;
	} else {
		fail(&rq, "every request needs an integer 'id'");
		goto error;
	}
	if (get_name(&rq, "op", &op_name))
		goto error;
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(ops[i].name, op_name))
			op = &ops[i];
	if (!op) {
		fail(&rq, "unknown op '%.60s'", op_name);
		goto error;
	}
	for (i = 0; i < rq.obj.nfields; i++) {
		if (!op_takes(op, rq.obj.fields[i].key)) {
			fail(&rq, "op '%s' takes no field '%.60s'", op->name,
			     rq.obj.fields[i].key);
			goto error;
		}
	}
	if (op->run(c, &rq) == 0)
		goto out;
error:
	reply_error(c, &rq);
out:
	jsonl_obj_free(&rq.obj);
}

static const struct request line_too_long = {
	.err = "request line longer than the limit (see --max-line)",
};

/* stdin arrives in arbitrary pieces; requests are whole lines. */
struct line_buffer {
	char *buf;
	size_t len, cap;
	size_t max;		/* longest line accepted */
	bool discarding;	/* inside a line that was too long */
};

static void feed_lines(struct client *c, struct line_buffer *lb,
		       const char *data, size_t n)
{
	while (n && !c->quit) {
		const char *nl = memchr(data, '\n', n);
		size_t seg = nl ? (size_t)(nl - data) : n;

		if (!lb->discarding && seg > lb->max - lb->len) {
			lb->discarding = true;
			free(lb->buf);
			lb->buf = NULL;
			lb->len = lb->cap = 0;
		}
		if (!lb->discarding && seg) {
			if (lb->len + seg > lb->cap) {
				size_t cap = lb->cap ? lb->cap : 4096;
				char *bigger;

				while (cap < lb->len + seg)
					cap *= 2;
				bigger = realloc(lb->buf, cap);
				if (!bigger) {
					lb->discarding = true;
					lb->len = 0;
					goto next;
				}
				lb->buf = bigger;
				lb->cap = cap;
			}
			memcpy(lb->buf + lb->len, data, seg);
			lb->len += seg;
		}
next:
		if (!nl)
			return;
		if (lb->discarding)
			reply_error(c, &line_too_long);
		else
			handle_line(c, lb->buf, lb->len);
		lb->discarding = false;
		lb->len = 0;
		data = nl + 1;
		n -= seg + 1;
	}
}

/* ------------------------------------------------------------------ */
/* Start and stop */

static void shutdown_client(struct client *c)
{
	struct session *s;
	long long deadline = now_ms() + 2000;
	bool waiting;

	/* Log out politely, but never hold up a quitting test for long. */
	for (s = c->sessions; s; s = s->next)
		if (s->state == SESSION_UP &&
		    iscsi_logout_async(s->iscsi, session_logged_out, s))
			s->logout_done = true;
	do {
		waiting = false;
		for (s = c->sessions; s; s = s->next)
			waiting |= s->state == SESSION_UP && !s->logout_done;
		if (waiting)
			progress_once(c, ms_left(deadline), false);
	} while (waiting && ms_left(deadline));
	while (c->sessions)
		session_free(c, c->sessions, "client exiting");
	while (c->commands)
		command_free(c, c->commands);

	if (c->dm) {
		/* Runs the callbacks of whatever is outstanding, frees the
		 * peers and deregisters every buffer. */
		tpt_dm_close(c->dm);
		c->dm = NULL;
	}
	while (c->links) {
		c->links->peer = NULL;
		link_free(c, c->links);
	}
	while (c->bufs)
		buffer_free(c, c->bufs, false);
	while (c->ops) {
		struct dm_op *op = c->ops;

		c->ops = op->next;
		free(op);
	}
	while (c->allowed) {
		struct allowed_peer *a = c->allowed;

		c->allowed = a->next;
		free(a);
	}
	jsonl_writer_free(&c->out);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: tpt-client [--iscsi-debug LEVEL] [--max-line BYTES]\n"
		"\n"
		"A co-process for tests: reads one JSON request per line on stdin\n"
		"and writes one JSON response per line on stdout.  Every request\n"
		"has \"op\" and an integer \"id\"; responses echo the id and carry\n"
		"\"ok\" and, on failure, \"error\".  Binary data is hex, u64 values\n"
		"are decimal strings.\n"
		"\n"
		"  login name url [initiator] [timeout_ms]\n"
		"  logout name [timeout_ms]      drop name [reset]\n"
		"  send name tag cdb dir=none|in|out [data] [inlen] [lun]\n"
		"  wait tags [timeout_ms]        one line per tag, then done\n"
		"  abort name tag [timeout_ms]\n"
		"  dm_open role [listen] [port] [peer_id] [array_id] [provider]\n"
		"  dm_allow peer_id token [array_id] [role]\n"
		"  dm_connect name addr port token [role] [peer_id] [array_id]\n"
		"  dm_disconnect name\n"
		"  dm_put|dm_get peer buf offset stag rma_addr len [timeout_ms]\n"
		"  buf name size access=r|w|rw   buf_write name offset data\n"
		"  buf_read name offset len      buf_release name\n"
		"  stats                         quit\n"
		"\n"
		"  --iscsi-debug LEVEL   libiscsi log level (to stderr)\n"
		"  --max-line BYTES      longest request line (default 128 MiB)\n"
		"  --help                this text\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "iscsi-debug", required_argument, NULL, 'd' },
		{ "max-line", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct client client;
	struct line_buffer lb = { .max = DEFAULT_MAX_LINE_BYTES };
	char *end;
	char *chunk;
	ssize_t n;
	short revents;
	int opt;

	while ((opt = getopt_long(argc, argv, "d:m:h", options, NULL)) != -1) {
		switch (opt) {
		case 'd':
			client.iscsi_log_level = atoi(optarg);
			break;
		case 'm':
			errno = 0;
			lb.max = strtoul(optarg, &end, 0);
			if (errno || *end || !lb.max || lb.max > MAX_LINE_LIMIT) {
				fprintf(stderr, "tpt-client: bad --max-line '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	/* A peer resetting a socket must not kill us mid-write. */
	signal(SIGPIPE, SIG_IGN);
	chunk = malloc(READ_CHUNK_BYTES);
	if (!chunk) {
		fprintf(stderr, "tpt-client: out of memory\n");
		return 1;
	}

	while (!client.quit) {
		revents = progress_once(&client, IDLE_SLICE_MS, true);
		if (!(revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = read(STDIN_FILENO, chunk, READ_CHUNK_BYTES);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			fprintf(stderr, "tpt-client: stdin: %s\n",
				strerror(errno));
			break;
		}
		if (n == 0) {
			/* EOF: a last request without a newline counts. */
			if (lb.discarding)
				reply_error(&client, &line_too_long);
			else if (lb.len)
				handle_line(&client, lb.buf, lb.len);
			break;
		}
		feed_lines(&client, &lb, chunk, (size_t)n);
	}
	free(chunk);
	free(lb.buf);
	shutdown_client(&client);
	return 0;
}
