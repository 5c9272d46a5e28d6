/*
 * Member sessions: one libiscsi context per member target, driven from
 * tgtd's epoll loop like any other fd there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "work.h"
#include "tpt_controller.h"

/* Seconds a command may take before libiscsi fails it. */
#define MEMBER_CMD_TIMEOUT 10

static LIST_HEAD(watched_members);

struct watched {
	struct list_head link;
	struct tpt_member *m;
};

const char *member_error(const struct tpt_member *m)
{
	return m->iscsi ? iscsi_get_error(m->iscsi) : "no session";
}

/* libiscsi wants other events after every submission and service; its
 * socket never changes, since it does not reconnect on its own (see
 * member_open). */
static void member_rearm(struct tpt_member *m)
{
	tgt_event_modify(m->fd, iscsi_which_events(m->iscsi));
}

static void member_down(struct tpt_member *m)
{
	if (!m->up)
		return;
	eprintf("tptraid: member %u (%s) is down: %s\n", m->index, m->url,
		member_error(m));
	m->up = false;
	if (m->fd >= 0)
		tgt_event_del(m->fd);
	m->fd = -1;
}

static void member_event(int fd, int events, void *data)
{
	struct tpt_member *m = data;

	(void)fd;
	if (iscsi_service(m->iscsi, events) < 0) {
		member_down(m);
		return;
	}
	member_rearm(m);
}

/* libiscsi's own timeouts only advance when it is serviced. */
static struct tgt_work member_tick_work;

static void member_tick(void *data)
{
	struct watched *w;

	(void)data;
	list_for_each_entry(w, &watched_members, link) {
		struct tpt_member *m = w->m;

		if (!m->up)
			continue;
		if (iscsi_service(m->iscsi, 0) < 0)
			member_down(m);
		else
			member_rearm(m);
	}
	add_work(&member_tick_work, 1);
}

struct member_cmd {
	struct tpt_member *member;
	member_cmd_cb cb;
	void *arg;
	struct iscsi_data data;
};

static void member_cmd_done(struct iscsi_context *iscsi, int status,
			    void *command_data, void *private_data)
{
	struct member_cmd *c = private_data;
	struct scsi_task *task = command_data;

	(void)iscsi;
	if (status != SCSI_STATUS_GOOD)
		c->member->stats.errors++;
	c->cb(c->member, task, status, c->arg);
	if (task)
		scsi_free_scsi_task(task);
	free(c);
}

int member_send(struct tpt_member *m, struct scsi_task *task, void *data_out,
		uint32_t data_out_len, member_cmd_cb cb, void *arg)
{
	struct member_cmd *c;

	if (!m->up) {
		scsi_free_scsi_task(task);
		return -EIO;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		scsi_free_scsi_task(task);
		return -ENOMEM;
	}
	c->member = m;
	c->cb = cb;
	c->arg = arg;
	c->data.data = data_out;
	c->data.size = data_out_len;
	if (iscsi_scsi_command_async(m->iscsi, m->lun, task, member_cmd_done,
				     data_out ? &c->data : NULL, c)) {
		scsi_free_scsi_task(task);
		free(c);
		return -EIO;
	}
	m->stats.cmds++;
	member_rearm(m);
	return 0;
}

struct scsi_task *member_command_sync(struct tpt_member *m, const uint8_t *cdb,
				      int xfer_dir, void *data_out,
				      uint32_t len)
{
	struct iscsi_data data = { .data = data_out, .size = len };
	struct scsi_task *task;

	task = scsi_create_task(16, (unsigned char *)cdb, xfer_dir, (int)len);
	if (!task)
		return NULL;
	if (!iscsi_scsi_command_sync(m->iscsi, m->lun, task,
				     xfer_dir == SCSI_XFER_WRITE ? &data : NULL)
	    || task->status != SCSI_STATUS_GOOD) {
		eprintf("tptraid: member %u (%s): opcode 0x%02x failed: %s "
			"(sense %x/%04x)\n", m->index, m->url, cdb[0],
			member_error(m), task->sense.key, task->sense.ascq);
		scsi_free_scsi_task(task);
		return NULL;
	}
	return task;
}

int member_open(struct tpt_array *a, struct tpt_member *m)
{
	struct scsi_readcapacity16 *rc16;
	struct iscsi_url *url;
	struct scsi_task *task;

	m->iscsi = iscsi_create_context(a->spec.initiator);
	if (!m->iscsi)
		return -ENOMEM;
	url = iscsi_parse_full_url(m->iscsi, m->url);
	if (!url) {
		eprintf("tptraid: %s: %s\n", m->url, member_error(m));
		return -EINVAL;
	}
	iscsi_set_targetname(m->iscsi, url->target);
	iscsi_set_session_type(m->iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(m->iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
	iscsi_set_timeout(m->iscsi, MEMBER_CMD_TIMEOUT);
	/*
	 * A member that goes away must fail the commands it had, at once:
	 * libiscsi's silent reconnect would park them, and the host's I/O
	 * with them, until the box came back.  Taking a member back is the
	 * controller's decision (degraded mode, rebuild), not libiscsi's.
	 */
	iscsi_set_noautoreconnect(m->iscsi, 1);
	/* CHAP towards a member: iscsi://user%secret@host/iqn/lun. */
	if (url->user[0] &&
	    iscsi_set_initiator_username_pwd(m->iscsi, url->user, url->passwd)) {
		eprintf("tptraid: %s: %s\n", m->url, member_error(m));
		iscsi_destroy_url(url);
		return -EINVAL;
	}
	m->lun = url->lun;
	if (iscsi_full_connect_sync(m->iscsi, url->portal, url->lun)) {
		eprintf("tptraid: member %u: login to %s failed: %s\n",
			m->index, m->url, member_error(m));
		iscsi_destroy_url(url);
		return -ECONNREFUSED;
	}
	iscsi_destroy_url(url);

	task = iscsi_readcapacity16_sync(m->iscsi, m->lun);
	if (!task || task->status != SCSI_STATUS_GOOD ||
	    !(rc16 = scsi_datain_unmarshall(task))) {
		eprintf("tptraid: member %u (%s): READ CAPACITY failed\n",
			m->index, m->url);
		if (task)
			scsi_free_scsi_task(task);
		return -EIO;
	}
	m->block_size = rc16->block_length;
	m->nr_blocks = rc16->returned_lba + 1;
	scsi_free_scsi_task(task);
	m->up = true;
	return 0;
}

void member_watch(struct tpt_member *m)
{
	struct watched *w = malloc(sizeof(*w));

	m->fd = iscsi_get_fd(m->iscsi);
	if (!w || tgt_event_add(m->fd, iscsi_which_events(m->iscsi),
				member_event, m)) {
		free(w);
		m->fd = -1;
		member_down(m);
		return;
	}
	w->m = m;
	if (list_empty(&watched_members)) {
		member_tick_work.func = member_tick;
		add_work(&member_tick_work, 1);
	}
	list_add_tail(&w->link, &watched_members);
}

void member_close(struct tpt_member *m)
{
	struct watched *w;

	list_for_each_entry(w, &watched_members, link) {
		if (w->m == m) {
			list_del(&w->link);
			free(w);
			/* The tick runs while anything is watched. */
			if (list_empty(&watched_members))
				del_work(&member_tick_work);
			break;
		}
	}
	if (m->fd >= 0)
		tgt_event_del(m->fd);
	m->fd = -1;
	if (m->iscsi) {
		if (m->up)
			iscsi_logout_sync(m->iscsi);
		iscsi_destroy_context(m->iscsi);
		m->iscsi = NULL;
	}
	m->up = false;
}
