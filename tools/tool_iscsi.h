/* tool_iscsi.h: opening the LUN an iscsi:// URL names with libiscsi,
 * the way our command-line tools do it.
 *
 * tool_iscsi_configure() is the part every tool shares, tpt-client
 * included (it logs in asynchronously to see unit attentions, so it
 * stops there); tool_lun_open() adds the synchronous login and READ
 * CAPACITY(16) of the one-shot tools, tool_lun_close() their teardown.
 * Each tool keeps its own way of sending SCSI commands;
 * tool_iscsi_report() says why one failed.
 *
 * Header-only (static inline) so single-file tools can include it
 * without the build knowing about it. */
#ifndef TPT_TOOLS_TOOL_ISCSI_H
#define TPT_TOOLS_TOOL_ISCSI_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

/* READ CAPACITY(16)s a new nexus may spend on unit attentions. */
#define TOOL_ISCSI_UA_RETRIES 8

/* Applies a parsed iscsi:// URL to a context that has not logged in
 * yet: the target, a normal (not discovery) session, the header digest
 * to offer, the initiator's CHAP user and secret if the URL has them,
 * and the target's (mutual CHAP: ?target_user=..&target_password=..).
 * libiscsi also takes the four from LIBISCSI_CHAP_USERNAME, _PASSWORD,
 * _TARGET_USERNAME and _TARGET_PASSWORD, which keeps them out of ps.  (iscsi_parse_full_url() given the context already sets target
 * and CHAP; we do not rely on it.)  With noautoreconnect, a lost
 * session is not quietly logged in again: the commands on it fail and
 * the loss shows. */
static inline void tool_iscsi_configure(struct iscsi_context *iscsi,
					const struct iscsi_url *url,
					enum iscsi_header_digest digest,
					bool noautoreconnect)
{
	iscsi_set_targetname(iscsi, url->target);
	iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(iscsi, digest);
	if (noautoreconnect)
		iscsi_set_noautoreconnect(iscsi, 1);
	if (url->user[0])
		iscsi_set_initiator_username_pwd(iscsi, url->user,
						 url->passwd);
	if (url->target_user[0])
		iscsi_set_target_username_pwd(iscsi, url->target_user,
					      url->target_passwd);
}

/* Says on stderr, as "PROG: WHAT failed: ...", why a SCSI command
 * ended with status (libiscsi's callback status; task may be NULL
 * unless it is CHECK CONDITION): the target's status and sense, or why
 * libiscsi gave up on the command. */
static inline void tool_iscsi_report(const char *prog, const char *what,
				     struct iscsi_context *iscsi, int status,
				     const struct scsi_task *task)
{
	switch (status) {
	case SCSI_STATUS_CHECK_CONDITION:
		fprintf(stderr, "%s: %s failed: CHECK CONDITION, sense key"
			" 0x%x (%s), ASC/ASCQ 0x%04x (%s)\n", prog, what,
			task->sense.key, scsi_sense_key_str(task->sense.key),
			task->sense.ascq, scsi_sense_ascq_str(task->sense.ascq));
		break;
	case SCSI_STATUS_CANCELLED:
	case SCSI_STATUS_ERROR:
	case SCSI_STATUS_TIMEOUT:
		/* Not from the target: libiscsi gave up on the command. */
		fprintf(stderr, "%s: %s failed in libiscsi (%s): %s\n", prog,
			what, status == SCSI_STATUS_CANCELLED ? "cancelled" :
			status == SCSI_STATUS_ERROR ? "error" : "timeout",
			iscsi_get_error(iscsi));
		break;
	default:
		fprintf(stderr, "%s: %s failed: SCSI status 0x%02x\n", prog,
			what, (unsigned int)status);
		break;
	}
}

/* Seconds a login or command may take (twice Linux's SCSI default). */
#define TOOL_ISCSI_TIMEOUT_S 60

/* How a tool opens a LUN with tool_lun_open(). */
struct tool_iscsi_login {
	const char *prog;		/* prefix of error messages */
	const char *initiator;		/* our IQN */
	enum iscsi_header_digest digest;
	bool noautoreconnect;
	/* Failures name the whole URL (several members at one portal)
	 * rather than the portal or nothing. */
	bool name_url;
};

/* An open LUN: a logged-in session and the LUN's geometry. */
struct tool_lun {
	struct iscsi_context *iscsi;
	int lun;			/* the URL's LUN */
	uint32_t block_size;
	uint64_t nr_blocks;
};

/* READ CAPACITY(16) of an open session into lun's geometry, retrying
 * unit attentions.  0, or -1 after a message. */
static inline int tool_lun_capacity(const struct tool_iscsi_login *how,
				    const char *url_text, struct tool_lun *lun)
{
	struct scsi_readcapacity16 *rc16;
	struct scsi_task *task;
	char what[256];
	int tries = 0;

	snprintf(what, sizeof(what), "READ CAPACITY(16)%s%s",
		 how->name_url ? " of " : "", how->name_url ? url_text : "");
	while ((task = iscsi_readcapacity16_sync(lun->iscsi, lun->lun)) &&
	       task->status == SCSI_STATUS_CHECK_CONDITION &&
	       task->sense.key == SCSI_SENSE_UNIT_ATTENTION &&
	       ++tries < TOOL_ISCSI_UA_RETRIES)
		scsi_free_scsi_task(task);
	if (!task) {
		fprintf(stderr, "%s: %s failed: %s\n", how->prog, what,
			iscsi_get_error(lun->iscsi));
		return -1;
	}
	if (task->status != SCSI_STATUS_GOOD) {
		tool_iscsi_report(how->prog, what, lun->iscsi, task->status,
				  task);
		scsi_free_scsi_task(task);
		return -1;
	}
	rc16 = scsi_datain_unmarshall(task);
	if (!rc16 || !rc16->block_length) {
		fprintf(stderr, "%s: cannot decode %s\n", how->prog, what);
		scsi_free_scsi_task(task);
		return -1;
	}
	lun->block_size = rc16->block_length;
	lun->nr_blocks = rc16->returned_lba + 1;
	scsi_free_scsi_task(task);
	return 0;
}

/* Creates a context, logs in to the LUN url_text names
 * (iscsi_full_connect_sync, set up by tool_iscsi_configure()) and reads
 * its geometry.  lun->iscsi is set as soon as the context exists, so
 * tool_lun_close() covers a failed open as well.  0, or -1 after a
 * "PROG: ..." message on stderr. */
static inline int tool_lun_open(const struct tool_iscsi_login *how,
				const char *url_text, struct tool_lun *lun)
{
	struct iscsi_url *url;

	/* libiscsi writes PDUs with writev(): a target that has closed the
	 * connection would kill the tool with SIGPIPE, silently, where the
	 * write should fail and the commands on it with it. */
	signal(SIGPIPE, SIG_IGN);
	lun->iscsi = iscsi_create_context(how->initiator);
	if (!lun->iscsi) {
		fprintf(stderr, "%s: out of memory\n", how->prog);
		return -1;
	}
	url = iscsi_parse_full_url(lun->iscsi, url_text);
	if (!url) {
		fprintf(stderr, "%s: bad URL '%s': %s\n", how->prog, url_text,
			iscsi_get_error(lun->iscsi));
		return -1;
	}
	tool_iscsi_configure(lun->iscsi, url, how->digest,
			     how->noautoreconnect);
	/* A login or command the LUN never answers fails after this long,
	 * rather than holding the tool for as long as the session lives;
	 * libiscsi checks it each time the context is serviced. */
	iscsi_set_timeout(lun->iscsi, TOOL_ISCSI_TIMEOUT_S);
	lun->lun = url->lun;
	if (iscsi_full_connect_sync(lun->iscsi, url->portal, url->lun)) {
		fprintf(stderr, "%s: login to %s failed: %s\n", how->prog,
			how->name_url ? url_text : url->portal,
			iscsi_get_error(lun->iscsi));
		iscsi_destroy_url(url);
		return -1;
	}
	iscsi_destroy_url(url);
	return tool_lun_capacity(how, url_text, lun);
}

/* Logs out of a session still logged in, unless logout is false (the
 * caller has commands queued on it), and frees the context. */
static inline void tool_lun_close(struct tool_lun *lun, bool logout)
{
	if (!lun->iscsi)
		return;
	if (logout && iscsi_is_logged_in(lun->iscsi))
		iscsi_logout_sync(lun->iscsi);
	iscsi_destroy_context(lun->iscsi);
	lun->iscsi = NULL;
}

#endif
