/* tpt-client's iSCSI side: sessions (login, logout, drop) and the SCSI
 * commands on them (send, wait, abort), over stock libiscsi's async
 * interface.  main.c's event loop services the connections. */
#include "client.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <iscsi/scsi-lowlevel.h>

#include "tools/tool_iscsi.h"

#define DEFAULT_INITIATOR "iqn.2026-11.org.tptraid:tpt-client"
/* Collected commands kept for ABORT TASK; older ones are forgotten so a
 * long test does not make every tag lookup slower. */
#define MAX_REPORTED 1024
#define MAX_XFER_BYTES (64u << 20)
/* The most tags one wait names. */
#define MAX_WAIT_TAGS 4096

/* A task management request waiting for its response. */
struct tmf_wait {
	struct item item;	/* unnamed */
	bool done;
	int status;		/* libiscsi callback status */
	uint32_t response;	/* RFC 3720 10.6.1 response code */
};

enum command_state {
	CMD_PENDING,
	CMD_DONE,
	CMD_REPORTED,	/* result handed out by wait; kept for ABORT TASK */
};

struct command {
	struct item item;		/* name: the tag */
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

/* ------------------------------------------------------------------ */
/* Sessions: failure and teardown */

const char *iscsi_why(struct iscsi_context *iscsi)
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

void session_failed(struct session *s, const char *fmt, ...)
{
	va_list ap;

	if (s->state == SESSION_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
	if (s->state == SESSION_UP)
		fprintf(stderr, "tpt-client: session %s: %s\n", s->item.name,
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

/* libiscsi skips callbacks once logged out: what it did not call back is
 * failed here with the same reason. */
void session_close_context(struct session *s, const char *reason)
{
	if (s->iscsi) {
		s->cancel_reason = reason;
		iscsi_destroy_context(s->iscsi);
		s->iscsi = NULL;
		s->cancel_reason = NULL;
	}
	ITEM_FOR_EACH(struct command, cmd, s->client->commands)
		if (cmd->session == s && cmd->state == CMD_PENDING)
			command_fail(cmd, "cancelled: %s", reason);
	ITEM_FOR_EACH(struct tmf_wait, tmf, s->tmfs) {
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
	session_close_context(s, reason);
	ITEM_FOR_EACH(struct command, cmd, c->commands)
		if (cmd->session == s)
			cmd->session = NULL;
	item_delete_all(&s->tmfs);
	item_delete(&c->sessions, s);
}

/* ------------------------------------------------------------------ */
/* login, logout, drop */

/* The session of a callback for one step of logging in (connect, then
 * login), or NULL when there is nothing left to do: the session is past
 * that step (libiscsi may call the connect callback again when the
 * connection goes away) or the step failed, which is recorded. */
static struct session *login_step_done(struct iscsi_context *iscsi,
				       int status, void *private_data,
				       enum session_state step,
				       const char *what)
{
	struct session *s = private_data;

	if (s->state != step)
		return NULL;
	if (status != SCSI_STATUS_GOOD) {
		session_failed(s, "%s failed: %s", what, iscsi_why(iscsi));
		return NULL;
	}
	return s;
}

static void session_logged_in(struct iscsi_context *iscsi, int status,
			      void *command_data, void *private_data)
{
	struct session *s = login_step_done(iscsi, status, private_data,
					    SESSION_LOGGING_IN, "login");

	(void)command_data;
	if (s)
		s->state = SESSION_UP;
}

static void session_connected(struct iscsi_context *iscsi, int status,
			      void *command_data, void *private_data)
{
	struct session *s = login_step_done(iscsi, status, private_data,
					    SESSION_CONNECTING, "connect");

	(void)command_data;
	if (!s)
		return;
	s->state = SESSION_LOGGING_IN;
	if (iscsi_login_async(iscsi, session_logged_in, s))
		session_failed(s, "cannot start login: %s",
			       iscsi_why(iscsi));
}

static int count_sessions(const struct client *c)
{
	const struct item *it;
	int n = 0;

	for (it = c->sessions; it; it = it->next)
		n++;
	return n;
}

/* Connect and log in with iscsi_connect_async + iscsi_login_async rather
 * than iscsi_full_connect_async: the latter sends TEST UNIT READYs of its
 * own and swallows unit attentions the tests want to see. */
int op_login(struct client *c, struct request *rq)
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
	s = item_find(c->sessions, name);
	if (s && s->state != SESSION_FAILED)
		return fail(rq, "session '%s' already exists", name);
	if (s)
		session_free(c, s, "replaced by a new login");
	if (count_sessions(c) >= MAX_SESSIONS)
		return fail(rq, "too many sessions (%d)", MAX_SESSIONS);

	s = item_new(&c->sessions, sizeof(*s), name);
	if (!s)
		return fail(rq, "out of memory");
	s->client = c;
	s->state = SESSION_CONNECTING;

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
		return reply_ok(rq);
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

int op_logout(struct client *c, struct request *rq)
{
	const char *name;
	struct session *s;
	long long deadline;

	if (get_name(rq, "name", &name) || get_timeout(rq, &deadline))
		return -1;
	s = item_find(c->sessions, name);
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
	return rq->err[0] ? -1 : reply_ok(rq);
}

/* Simulate session loss: no logout, and by default a TCP reset (linger
 * 0) so the target learns at once instead of after a FIN handshake. */
int op_drop(struct client *c, struct request *rq)
{
	const char *name;
	struct session *s;
	bool reset = true;
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int fd;

	if (get_name(rq, "name", &name) || get_bool(rq, "reset", &reset) < 0)
		return -1;
	s = item_find(c->sessions, name);
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
	return reply_ok(rq);
}

/* ------------------------------------------------------------------ */
/* SCSI commands: send, wait, abort */

/* The session named name, logged in, or NULL after fail(). */
static struct session *session_up(struct client *c, struct request *rq,
				  const char *name)
{
	struct session *s = item_find(c->sessions, name);

	if (!s)
		fail(rq, "no session '%s'", name);
	else if (s->state != SESSION_UP)
		fail(rq, "session '%s' is not logged in: %s", name, s->error);
	else
		return s;
	return NULL;
}

/* Only for commands libiscsi no longer knows about. */
static void command_free(struct client *c, struct command *cmd)
{
	if (cmd->task)
		scsi_free_scsi_task(cmd->task);
	free(cmd->out.data);
	item_delete(&c->commands, cmd);
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

static const struct word dirs[] = {
	{ "none", SCSI_XFER_NONE },
	{ "in", SCSI_XFER_READ },
	{ "out", SCSI_XFER_WRITE },
	{ NULL, 0 },
};

int op_send(struct client *c, struct request *rq)
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
	s = session_up(c, rq, name);
	if (!s)
		return -1;
	cmd = item_find(c->commands, tag);
	if (cmd && cmd->state == CMD_PENDING)
		return fail(rq, "tag '%s' is still in flight", tag);
	if (cmd && cmd->state == CMD_DONE)
		return fail(rq, "tag '%s' has a result wait has not collected",
			    tag);
	if (word_value(rq, "dir", dir_text, dirs, &dir))
		return -1;
	lun = s->lun;
	if (get_int(rq, "lun", false, 0, 0xffff, &lun) < 0 ||
	    get_size(rq, "inlen", dir == SCSI_XFER_READ, MAX_XFER_BYTES,
		     &inlen) < 0)
		return -1;
	if (dir != SCSI_XFER_READ && has_field(rq, "inlen"))
		return fail(rq, "'inlen' goes with dir=in only");
	if (dir != SCSI_XFER_WRITE && has_field(rq, "data"))
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
	task = scsi_create_task((int)cdb_len, cdb, dir, expxferlen);
	free(cdb);
	cmd = task ? item_new(&c->commands, sizeof(*cmd), tag) : NULL;
	if (!cmd) {
		if (task)
			scsi_free_scsi_task(task);
		free(data);
		return fail(rq, "out of memory");
	}
	cmd->session = s;
	cmd->task = task;
	cmd->out.data = data;
	cmd->out.size = data_len;
	cmd->state = CMD_PENDING;

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
	return reply_ok(rq);
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
static void reply_command_result(struct reply *r, const struct command *cmd)
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
	reply_int(r, "status", cmd->status);
	reply_hex(r, "sense", sense, sense_len);
	reply_hex(r, "data", data, data_len);
	reply_int(r, "residual", t ? (long long)t->residual : 0);
	reply_str(r, "residual_kind",
		  residual_kind(t ? t->residual_status :
				SCSI_RESIDUAL_NO_RESIDUAL));
}

/* The list is newest first: keep the MAX_REPORTED newest collected. */
static void prune_reported(struct client *c)
{
	struct item *it, *next;
	unsigned int kept = 0;

	for (it = c->commands; it; it = next) {
		struct command *cmd = (struct command *)(void *)it;

		next = it->next;
		if (cmd->state == CMD_REPORTED && ++kept > MAX_REPORTED)
			command_free(c, cmd);
	}
}

/* One line for tag: its result, or why there is none. */
static void reply_tag(const struct request *rq, struct command *cmd,
		      const char *tag)
{
	struct reply r = reply_new(rq, cmd && cmd->state == CMD_DONE &&
				   !cmd->failed);

	reply_str(&r, "tag", tag);
	if (!cmd) {
		reply_str(&r, "error", "unknown tag");
	} else if (cmd->state == CMD_PENDING) {
		reply_str(&r, "error", "timeout");
	} else if (cmd->state == CMD_REPORTED) {
		reply_str(&r, "error", "result already collected");
	} else {
		if (cmd->failed)
			reply_str(&r, "error", cmd->error);
		else
			reply_command_result(&r, cmd);
		/* Keep only what ABORT TASK needs. */
		cmd->state = CMD_REPORTED;
		if (cmd->task)
			scsi_free_scsi_task(cmd->task);
		cmd->task = NULL;
		free(cmd->out.data);
		cmd->out.data = NULL;
		cmd->out.size = 0;
	}
	reply_send(&r);
}

int op_wait(struct client *c, struct request *rq)
{
	json_t *tags = json_object_get(rq->obj, "tags"), *tag;
	struct command *cmd;
	struct reply done;
	long long deadline;
	bool pending;
	size_t i;

	if (!tags)
		return fail(rq, "missing field 'tags'");
	if (!json_is_array(tags))
		return fail(rq, "field 'tags' must be an array of strings");
	json_array_foreach(tags, i, tag)
		if (!json_is_string(tag))
			return fail(rq, "field 'tags' must be an array of "
				    "strings");
	if (json_array_size(tags) > MAX_WAIT_TAGS)
		return fail(rq, "more than %d tags", MAX_WAIT_TAGS);
	if (get_timeout(rq, &deadline))
		return -1;
	for (;;) {
		pending = false;
		for (i = 0; i < json_array_size(tags) && !pending; i++) {
			cmd = item_find(c->commands, json_string_value(
					json_array_get(tags, i)));
			pending = cmd && cmd->state == CMD_PENDING;
		}
		if (!pending || !ms_left(deadline))
			break;
		progress_once(c, ms_left(deadline), false);
	}

	json_array_foreach(tags, i, tag)
		reply_tag(rq, item_find(c->commands, json_string_value(tag)),
			  json_string_value(tag));
	prune_reported(c);
	done = reply_new(rq, true);
	reply_bool(&done, "done", true);
	return reply_send(&done);
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

int op_abort(struct client *c, struct request *rq)
{
	const char *name, *tag;
	struct session *s;
	struct command *cmd;
	struct tmf_wait *tmf;
	struct scsi_task shim, *task;
	struct reply r;
	long long deadline;
	bool cancelled = false;

	if (get_name(rq, "name", &name) || get_name(rq, "tag", &tag) ||
	    get_timeout(rq, &deadline))
		return -1;
	s = session_up(c, rq, name);
	if (!s)
		return -1;
	cmd = item_find(c->commands, tag);
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
	tmf = item_new(&s->tmfs, sizeof(*tmf), NULL);
	if (!tmf)
		return fail(rq, "out of memory");
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
	r = reply_new(rq, true);
	reply_int(&r, "response", tmf->response);
	reply_str(&r, "response_name", tmf_response_name(tmf->response));
	reply_bool(&r, "cancelled", cancelled);
	reply_send(&r);
out:
	/* A timed-out request's record stays: libiscsi may still answer. */
	if (tmf->done)
		item_delete(&s->tmfs, tmf);
	return rq->err[0] ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Stop */

void iscsi_shutdown(struct client *c)
{
	long long deadline = now_ms() + 2000;
	bool waiting;

	/* Log out politely, but never hold up a quitting test for long. */
	ITEM_FOR_EACH(struct session, s, c->sessions)
		if (s->state == SESSION_UP &&
		    iscsi_logout_async(s->iscsi, session_logged_out, s))
			s->logout_done = true;
	do {
		waiting = false;
		ITEM_FOR_EACH(struct session, s, c->sessions)
			waiting |= s->state == SESSION_UP && !s->logout_done;
		if (waiting)
			progress_once(c, ms_left(deadline), false);
	} while (waiting && ms_left(deadline));
	while (c->sessions)
		session_free(c, (struct session *)(void *)c->sessions,
			     "client exiting");
	while (c->commands)
		command_free(c, (struct command *)(void *)c->commands);
}
