/* tool_iscsi.h: opening a libiscsi session to the LUN an iscsi:// URL
 * names, the way our command-line tools do it.
 *
 * tool_iscsi_configure() is the part every tool shares, tpt-client
 * included (it logs in asynchronously to see unit attentions, so it
 * stops there); tool_iscsi_login() adds the synchronous login the
 * one-shot tools use; tool_iscsi_capacity() decodes READ CAPACITY(16).
 * Each tool keeps its own way of sending and reporting SCSI commands.
 *
 * Header-only (static inline) so single-file tools can include it
 * without the build knowing about it. */
#ifndef TPT_TOOLS_TOOL_ISCSI_H
#define TPT_TOOLS_TOOL_ISCSI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

/* Applies a parsed iscsi:// URL to a context that has not logged in
 * yet: the target, a normal (not discovery) session, the header digest
 * to offer, and the initiator's CHAP user and secret if the URL has
 * them.  (iscsi_parse_full_url() given the context already sets target
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
}

/* How a tool logs in with tool_iscsi_login(). */
struct tool_iscsi_login {
	const char *prog;		/* prefix of error messages */
	const char *initiator;		/* our IQN */
	enum iscsi_header_digest digest;
	bool noautoreconnect;
	/* A failed login names the whole URL (several members at one
	 * portal) rather than the portal. */
	bool name_url;
};

/* Creates a context and logs in to the LUN url_text names
 * (iscsi_full_connect_sync), set up by tool_iscsi_configure(); *lun is
 * the URL's LUN.  *iscsi is set as soon as the context exists, so the
 * caller's teardown covers a failed login as well.  0, or -1 after a
 * "PROG: ..." message on stderr. */
static inline int tool_iscsi_login(const struct tool_iscsi_login *how,
				   const char *url_text,
				   struct iscsi_context **iscsi, int *lun)
{
	struct iscsi_url *url;

	*iscsi = iscsi_create_context(how->initiator);
	if (!*iscsi) {
		fprintf(stderr, "%s: out of memory\n", how->prog);
		return -1;
	}
	url = iscsi_parse_full_url(*iscsi, url_text);
	if (!url) {
		fprintf(stderr, "%s: bad URL '%s': %s\n", how->prog, url_text,
			iscsi_get_error(*iscsi));
		return -1;
	}
	tool_iscsi_configure(*iscsi, url, how->digest, how->noautoreconnect);
	*lun = url->lun;
	if (iscsi_full_connect_sync(*iscsi, url->portal, url->lun)) {
		fprintf(stderr, "%s: login to %s failed: %s\n", how->prog,
			how->name_url ? url_text : url->portal,
			iscsi_get_error(*iscsi));
		iscsi_destroy_url(url);
		return -1;
	}
	iscsi_destroy_url(url);
	return 0;
}

/* Decodes the data of a GOOD READ CAPACITY(16) task: the logical block
 * size and the number of blocks.  -1 if it does not decode or claims
 * 0-byte blocks. */
static inline int tool_iscsi_capacity(struct scsi_task *task,
				      uint32_t *block_size,
				      uint64_t *nr_blocks)
{
	struct scsi_readcapacity16 *rc16 = scsi_datain_unmarshall(task);

	if (!rc16 || !rc16->block_length)
		return -1;
	*block_size = rc16->block_length;
	*nr_blocks = rc16->returned_lba + 1;
	return 0;
}

#endif
