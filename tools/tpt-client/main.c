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
 *   dm_allow  peer_id token [array_id] [role] [scope]
 *   dm_connect name addr port token [role] [peer_id] [array_id] [counter]
 *              [scope] [timeout_ms]   (counter: the hello's, to replay one)
 *   dm_disconnect name
 *   dm_put / dm_get  peer buf offset stag rma_addr len [timeout_ms]
 *   buf       name size access=r|w|rw [scope] -> "stag", "rma_base", "size"
 *
 * A peer that connects to us is a link too, named accepted-<its peer id>,
 * for dm_put/dm_get (either end of a connection may start RMA).
 *
 * scope: the datamover scope (iser/tpt_dm.h) a peer is admitted into, a
 * link or a buffer lives in; 0, the default, when not given.  Transfers
 * need the link and the buffer in the same scope.
 *   buf_write name offset data;  buf_read name offset len -> "data"
 *   buf_release name;  stats;  quit
 *
 * One poll() loop serves every iSCSI connection, the datamover and stdin,
 * also between requests: peers move data into and out of our registered
 * buffers one-sidedly while their SCSI commands are in flight, and a
 * passive tcp-provider endpoint only makes progress when we call it.
 * Requests that wait (login, logout, wait, abort, dm_connect, dm_put,
 * dm_get) run the same loop without stdin until done or timed out; no
 * request blocks for longer than its timeout.
 *
 * This file holds the loop, stdin's lines and the dispatch; client.h
 * names the rest. */
#include "client.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX_LINE_BYTES (128u << 20)
#define MAX_LINE_LIMIT (1u << 30)
#define READ_CHUNK_BYTES (1u << 20)
/* Longest sleep while a datamover is open.  Its event fd is meant to
 * cover passive-side progress too (tcp provider sockets sit in its wait
 * set); the beat only bounds the damage should some provider event not
 * make it readable, at about 0.5% of a core per idle client. */
#define DM_BEAT_MS 10
/* libiscsi asks to be retried after >= 100 ms when it has no events. */
#define ISCSI_RETRY_MS 100
#define IDLE_SLICE_MS 1000

/* ------------------------------------------------------------------ */
/* The event loop */

short progress_once(struct client *c, int max_ms, bool with_stdin)
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
	ITEM_FOR_EACH(struct session, each, c->sessions) {
		int fd, events;

		if (nsess == MAX_SESSIONS)
			break;
		if (!each->iscsi || each->state == SESSION_FAILED)
			continue;
		fd = iscsi_get_fd(each->iscsi);
		events = iscsi_which_events(each->iscsi);
		if (fd < 0 && each->state == SESSION_UP) {
			session_failed(each, "connection closed: %s",
				       iscsi_why(each->iscsi));
			continue;
		}
		/* No events now: still serviced below, and soon again. */
		if (fd < 0 || !events) {
			fd = -1;
			if (timeout > ISCSI_RETRY_MS)
				timeout = ISCSI_RETRY_MS;
		}
		pfd[n++] = (struct pollfd){ .fd = fd, .events = (short)events };
		polled[nsess++] = each;
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
	ITEM_FOR_EACH(struct session, each, c->sessions)
		if (each->state == SESSION_FAILED && each->iscsi)
			session_close_context(each, each->error);

	return stdin_slot >= 0 ? pfd[stdin_slot].revents : 0;
}

/* ------------------------------------------------------------------ */
/* Dispatch */

static int op_quit(struct client *c, struct request *rq)
{
	c->quit = true;
	return reply_ok(rq);
}

#define MAX_OP_FIELDS 10

struct op {
	const char *name;
	op_fn *run;
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
	{ "dm_allow", op_dm_allow,
	  { "peer_id", "token", "array_id", "role", "scope" } },
	{ "dm_connect", op_dm_connect,
	  { "name", "addr", "port", "role", "peer_id", "array_id", "token",
	    "counter", "scope", "timeout_ms" } },
	{ "dm_disconnect", op_dm_disconnect, { "name" } },
	{ "dm_put", op_dm_put,
	  { "peer", "buf", "offset", "stag", "rma_addr", "len",
	    "timeout_ms" } },
	{ "dm_get", op_dm_get,
	  { "peer", "buf", "offset", "stag", "rma_addr", "len",
	    "timeout_ms" } },
	{ "buf", op_buf, { "name", "size", "access", "scope" } },
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

/* Parses rq's line into rq->obj and finds its op: NULL after fail(). */
static const struct op *parse_request(struct request *rq, const char *line,
				      size_t len)
{
	json_error_t jerr;
	json_t *id, *value;
	const struct op *op = NULL;
	const char *op_name, *key;
	size_t i;

	/* A key given twice would leave which one counts to chance. */
	rq->obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!rq->obj) {
		fail(rq, "malformed request: %s", jerr.text);
		return NULL;
	}
	if (!json_is_object(rq->obj)) {
		fail(rq, "malformed request: a request must be a JSON object");
		return NULL;
	}
	id = json_object_get(rq->obj, "id");
	if (!json_is_integer(id)) {
		fail(rq, "every request needs an integer 'id'");
		return NULL;
	}
	rq->has_id = true;
	rq->id = json_integer_value(id);
	if (get_name(rq, "op", &op_name))
		return NULL;
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(ops[i].name, op_name))
			op = &ops[i];
	if (!op) {
		fail(rq, "unknown op '%.60s'", op_name);
		return NULL;
	}
	json_object_foreach(rq->obj, key, value) {
		if (!op_takes(op, key)) {
			fail(rq, "op '%s' takes no field '%.60s'", op->name,
			     key);
			return NULL;
		}
	}
	return op;
}

static void handle_line(struct client *c, const char *line, size_t len)
{
	struct request rq;
	const struct op *op;
	size_t i;

	memset(&rq, 0, sizeof(rq));
	for (i = 0; i < len; i++)
		if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
			break;
	if (i == len)		/* blank lines are not requests */
		return;
	op = parse_request(&rq, line, len);
	if (!op || op->run(c, &rq))
		reply_error(&rq);
	json_decref(rq.obj);
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
			reply_error(&line_too_long);
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
		"  dm_allow peer_id token [array_id] [role] [scope]\n"
		"  dm_connect name addr port token [role] [peer_id] [array_id]\n"
		"             [counter] [scope] counter: send this one (replay)\n"
		"  dm_disconnect name\n"
		"  dm_put|dm_get peer buf offset stag rma_addr len [timeout_ms]\n"
		"  buf name size access=r|w|rw [scope]\n"
		"  buf_write name offset data\n"
		"  buf_read name offset len      buf_release name\n"
		"  stats                         quit\n"
		"  scope: the datamover scope of a peer, link or buffer (0)\n"
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
				reply_error(&line_too_long);
			else if (lb.len)
				handle_line(&client, lb.buf, lb.len);
			break;
		}
		feed_lines(&client, &lb, chunk, (size_t)n);
	}
	free(chunk);
	free(lb.buf);
	iscsi_shutdown(&client);
	dm_shutdown(&client);
	return 0;
}
