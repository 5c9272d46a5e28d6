/*
 * A TPT-RAID array: its members, the path requests take from tgt's worker
 * threads to the event loop, and the stripe locks that keep two writes
 * from updating one stripe's parity at once.
 *
 * Members are iSCSI sessions opened with libiscsi.  Set-up (login, READ
 * CAPACITY, TPT REPORT ENDPOINT, SET PEER LIST, REPORT SLOTS) happens
 * synchronously when tgtadm creates the LU; from then on every member is
 * driven asynchronously from tgtd's epoll loop, like any other fd there.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "work.h"
#include "iser/tpt_dm.h"
#include "tpt_ctl.h"
#include "tpt_target.h"
#include <arpa/inet.h>

static LIST_HEAD(tpt_arrays_list);

struct tpt_array_entry {
	struct list_head link;
	struct tpt_array *array;
};

/* ---- members on the event loop ---- */

/* libiscsi wants other events after every submission and service; its
 * socket never changes, since it does not reconnect on its own (see
 * member_connect). */
static void member_rearm(struct tpt_member *m)
{
	tgt_event_modify(m->fd, iscsi_which_events(m->iscsi));
}

static void member_down(struct tpt_member *m)
{
	if (!m->up)
		return;
	eprintf("tptraid: member %u (%s) is down: %s\n", m->index, m->url,
		iscsi_get_error(m->iscsi));
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

struct ctl_cmd {
	struct tpt_member *member;
	tpt_ctl_cmd_cb cb;
	void *arg;
	struct iscsi_data data;
};

static void ctl_cmd_done(struct iscsi_context *iscsi, int status,
			 void *command_data, void *private_data)
{
	struct ctl_cmd *c = private_data;
	struct scsi_task *task = command_data;

	(void)iscsi;
	if (status != SCSI_STATUS_GOOD)
		c->member->stats.errors++;
	c->cb(c->member, task, status, c->arg);
	if (task)
		scsi_free_scsi_task(task);
	free(c);
}

int tpt_ctl_send(struct tpt_member *m, struct scsi_task *task, void *data_out,
		 uint32_t data_out_len, tpt_ctl_cmd_cb cb, void *arg)
{
	struct ctl_cmd *c;

	/* Until degraded mode exists, a request that needs a dead member
	 * fails rather than waits. */
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
	if (iscsi_scsi_command_async(m->iscsi, m->lun, task, ctl_cmd_done,
				     data_out ? &c->data : NULL, c)) {
		scsi_free_scsi_task(task);
		free(c);
		return -EIO;
	}
	m->stats.cmds++;
	member_rearm(m);
	return 0;
}

/* libiscsi's own timeouts only advance when it is serviced. */
static struct tgt_work member_tick_work;

static void member_tick(void *data)
{
	struct tpt_array_entry *e;
	unsigned int i;

	(void)data;
	list_for_each_entry(e, &tpt_arrays_list, link) {
		for (i = 0; i < e->array->nr_members; i++) {
			struct tpt_member *m = &e->array->member[i];

			if (!m->up)
				continue;
			if (iscsi_service(m->iscsi, 0) < 0)
				member_down(m);
			else
				member_rearm(m);
		}
	}
	add_work(&member_tick_work, 1);
}

/* ---- synchronous set-up ---- */

static struct scsi_task *member_raw_sync(struct tpt_member *m,
					 const uint8_t *cdb, int xfer_dir,
					 void *out, uint32_t len)
{
	struct iscsi_data data = { .data = out, .size = len };
	struct scsi_task *task;

	task = scsi_create_task(16, (unsigned char *)cdb, xfer_dir, (int)len);
	if (!task)
		return NULL;
	if (!iscsi_scsi_command_sync(m->iscsi, m->lun, task,
				     xfer_dir == SCSI_XFER_WRITE ? &data : NULL)
	    || task->status != SCSI_STATUS_GOOD) {
		eprintf("tptraid: member %u (%s): opcode 0x%02x failed: %s "
			"(sense %x/%04x)\n", m->index, m->url, cdb[0],
			iscsi_get_error(m->iscsi), task->sense.key,
			task->sense.ascq);
		scsi_free_scsi_task(task);
		return NULL;
	}
	return task;
}

static int member_connect(struct tpt_array *a, struct tpt_member *m)
{
	struct scsi_readcapacity16 *rc16;
	struct iscsi_url *url;
	struct scsi_task *task;

	m->iscsi = iscsi_create_context(a->spec.initiator);
	if (!m->iscsi)
		return -ENOMEM;
	url = iscsi_parse_full_url(m->iscsi, m->url);
	if (!url) {
		eprintf("tptraid: %s: %s\n", m->url, iscsi_get_error(m->iscsi));
		return -EINVAL;
	}
	iscsi_set_targetname(m->iscsi, url->target);
	iscsi_set_session_type(m->iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(m->iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
	iscsi_set_timeout(m->iscsi, 10);
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
		eprintf("tptraid: %s: %s\n", m->url, iscsi_get_error(m->iscsi));
		iscsi_destroy_url(url);
		return -EINVAL;
	}
	m->lun = url->lun;
	if (iscsi_full_connect_sync(m->iscsi, url->portal, url->lun)) {
		eprintf("tptraid: member %u: login to %s failed: %s\n",
			m->index, m->url, iscsi_get_error(m->iscsi));
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

static int member_report_endpoint(struct tpt_member *m)
{
	uint8_t cdb[16] = { TPT_OP_REPORT_ENDPOINT };
	struct tpt_field_ptr where;
	struct scsi_task *task;
	int ret = 0;

	tpt_put_be(&cdb[10], TPT_ENDPOINT_REPORT_LEN, 4);
	task = member_raw_sync(m, cdb, SCSI_XFER_READ, NULL,
			       TPT_ENDPOINT_REPORT_LEN);
	if (!task) {
		eprintf("tptraid: member %u (%s) is not a TPT target: put its "
			"LUN in TPT mode (tpt=on)\n", m->index, m->url);
		return -EPROTO;
	}
	if (tpt_endpoint_report_decode(task->datain.data, task->datain.size,
				       &m->endpoint, &where)) {
		eprintf("tptraid: member %u (%s): bad endpoint report\n",
			m->index, m->url);
		ret = -EPROTO;
	}
	scsi_free_scsi_task(task);
	return ret;
}

static int array_deliver_peer_list(struct tpt_array *a)
{
	struct tpt_peer_list *pl = calloc(1, sizeof(*pl));
	uint8_t *buf = NULL;
	unsigned int i;
	int len, ret = -ENOMEM;

	if (!pl)
		return -ENOMEM;
	pl->array_id = a->array_id;
	pl->generation = 1;
	for (i = 0; i < a->nr_members; i++) {
		struct tpt_peer *p = &pl->peer[pl->count++];

		p->id = i;
		p->role = TPT_ROLE_TARGET;
		p->ep = a->member[i].endpoint.ep;
		memcpy(p->token, a->member[i].token, sizeof(p->token));
	}
	{
		struct tpt_peer *p = &pl->peer[pl->count++];
		struct tpt_dm *dm = tpt_target_dm();

		p->id = TPT_CTL_PEER_ID;
		p->role = TPT_ROLE_CONTROLLER;
		p->ep.port = tpt_dm_listen_port(dm);
		if (inet_pton(AF_INET, tpt_target_dm_addr(), p->ep.addr) == 1)
			p->ep.family = TPT_AF_IPV4;
		else if (inet_pton(AF_INET6, tpt_target_dm_addr(),
				   p->ep.addr) == 1)
			p->ep.family = TPT_AF_IPV6;
		memcpy(p->token, a->token, sizeof(p->token));
	}
	buf = malloc(TPT_PEER_LIST_LEN(pl->count));
	if (!buf)
		goto out;
	for (i = 0; i < a->nr_members; i++) {
		struct tpt_member *m = &a->member[i];
		uint8_t cdb[16] = { TPT_OP_SET_PEER_LIST };
		struct scsi_task *task;

		pl->self_id = i;
		len = tpt_peer_list_encode(pl, buf, TPT_PEER_LIST_LEN(pl->count));
		if (len < 0) {
			ret = -EINVAL;
			goto out;
		}
		tpt_put_be(&cdb[10], len, 4);
		task = member_raw_sync(m, cdb, SCSI_XFER_WRITE, buf, len);
		if (!task) {
			ret = -EIO;
			goto out;
		}
		scsi_free_scsi_task(task);
	}
	ret = 0;
out:
	free(buf);
	free(pl);
	return ret;
}

static int member_report_slots(struct tpt_array *a, struct tpt_member *m)
{
	uint8_t cdb[16] = { TPT_OP_REPORT_SLOTS };
	uint32_t alloc = TPT_SLOT_TABLE_LEN(TPT_CTL_SLOTS);
	struct tpt_field_ptr where;
	struct scsi_task *task;
	int ret = -EPROTO;

	tpt_put_be(&cdb[2], a->spec.unit_bytes, 4);
	tpt_put_be(&cdb[6], TPT_CTL_SLOTS, 2);
	tpt_put_be(&cdb[10], alloc, 4);
	task = member_raw_sync(m, cdb, SCSI_XFER_READ, NULL, alloc);
	if (!task)
		return -EIO;
	m->slot_table = malloc(sizeof(*m->slot_table));
	if (m->slot_table &&
	    !tpt_slot_table_decode(task->datain.data, task->datain.size,
				   m->slot_table, &where) &&
	    m->slot_table->count == TPT_CTL_SLOTS &&
	    m->slot_table->payload_size == a->spec.unit_bytes)
		ret = slot_alloc_init(&a->slots[m->index], m->slot_table->count);
	if (ret)
		eprintf("tptraid: member %u (%s): unusable slot table\n",
			m->index, m->url);
	scsi_free_scsi_task(task);
	return ret;
}

static void member_release_all(struct tpt_member *m)
{
	uint8_t cdb[16] = { TPT_OP_RELEASE, TPT_CDB_RELEASE_ALL };
	struct scsi_task *task = member_raw_sync(m, cdb, SCSI_XFER_NONE,
						 NULL, 0);

	if (task)
		scsi_free_scsi_task(task);
}

/* ---- requests from the workers ---- */

static bool stripes_overlap(const struct tpt_req *x, const struct tpt_req *y)
{
	return x->first_stripe <= y->last_stripe &&
	       y->first_stripe <= x->last_stripe;
}

static bool stripes_free(struct tpt_array *a, const struct tpt_req *r)
{
	struct tpt_req *o;

	list_for_each_entry(o, &a->running, link)
		if (stripes_overlap(o, r))
			return false;
	return true;
}

static void sync_start(struct tpt_req *r);

/* Start @r if its stripes are free; false if it must keep waiting. */
static bool array_try_start(struct tpt_array *a, struct tpt_req *r)
{
	if (!stripes_free(a, r))
		return false;
	list_add_tail(&r->link, &a->running);
	if (r->sync) {
		sync_start(r);
		return true;
	}
	if (a->spec.mode == TPT_MODE_BASELINE) {
		tpt_baseline_start(r);
		return true;
	}
	if (tpt_tpt_start(r) == -EAGAIN) {
		/* Slots are short: wait until some request returns some. */
		list_del(&r->link);
		return false;
	}
	return true;
}

/* Waiting requests in arrival order, so no writer starves.  A request
 * that ends at once (a failure to plan) re-enters here: that re-run is
 * folded into the loop instead of nesting. */
static void array_run_waiting(struct tpt_array *a)
{
	struct tpt_req *r;
	LIST_HEAD(todo);

	if (a->draining) {
		a->redrain = true;
		return;
	}
	a->draining = true;
	do {
		a->redrain = false;
		list_splice_init(&a->waiting, &todo);
		while (!list_empty(&todo)) {
			r = list_first_entry(&todo, struct tpt_req, link);
			list_del(&r->link);
			if (!array_try_start(a, r))
				list_add_tail(&r->link, &a->waiting);
		}
	} while (a->redrain);
	a->draining = false;
}

void tpt_ctl_finish(struct tpt_req *r, int result)
{
	struct tpt_array *a = r->array;

	list_del(&r->link);
	r->result = result;
	if (result) {
		pthread_mutex_lock(&a->stats_lock);
		a->stats.failed++;
		pthread_mutex_unlock(&a->stats_lock);
	}
	sem_post(&r->done);
	array_run_waiting(a);
}

void tpt_ctl_count(struct tpt_array *a, const struct tpt_ctl_stats *d)
{
	pthread_mutex_lock(&a->stats_lock);
	a->stats.reads += d->reads;
	a->stats.writes += d->writes;
	a->stats.host_bytes_in += d->host_bytes_in;
	a->stats.host_bytes_out += d->host_bytes_out;
	a->stats.target_bytes_in += d->target_bytes_in;
	a->stats.target_bytes_out += d->target_bytes_out;
	a->stats.bytes_xored += d->bytes_xored;
	a->stats.pdus += d->pdus;
	a->stats.rma_ops += d->rma_ops;
	pthread_mutex_unlock(&a->stats_lock);
}

void tpt_array_get_stats(struct tpt_array *a, struct tpt_ctl_stats *out)
{
	pthread_mutex_lock(&a->stats_lock);
	*out = a->stats;
	pthread_mutex_unlock(&a->stats_lock);
}

static void array_submitted(int fd, int events, void *data)
{
	struct tpt_array *a = data;
	struct tpt_req *r, *tmp;
	uint64_t count;
	LIST_HEAD(fresh);

	(void)events;
	if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		eprintf("tptraid: eventfd read: %m\n");
	pthread_mutex_lock(&a->lock);
	list_splice_init(&a->submitted, &fresh);
	pthread_mutex_unlock(&a->lock);
	list_for_each_entry_safe(r, tmp, &fresh, link) {
		list_del(&r->link);
		/* Behind anything already waiting for the same stripes. */
		if (!list_empty(&a->waiting) || !array_try_start(a, r))
			list_add_tail(&r->link, &a->waiting);
	}
}

/* Hand @r to the event loop and sleep until it is done. */
static int array_submit_wait(struct tpt_array *a, struct tpt_req *r)
{
	uint64_t one = 1;

	sem_init(&r->done, 0, 0);
	pthread_mutex_lock(&a->lock);
	list_add_tail(&r->link, &a->submitted);
	pthread_mutex_unlock(&a->lock);
	if (write(a->efd, &one, sizeof(one)) < 0)
		eprintf("tptraid: eventfd write: %m\n");
	while (sem_wait(&r->done) && errno == EINTR)
		;
	sem_destroy(&r->done);
	return r->result;
}

/* Stripes one request may span: in TPT mode a member may need a slot per
 * stripe for its block and one for the calculator's result. */
#define TPT_REQ_MAX_STRIPES (TPT_CTL_SLOTS / 4)

int tpt_array_io(struct tpt_array *a, bool write, uint64_t lba,
		 uint32_t blocks, void *buf)
{
	uint64_t per_stripe = (uint64_t)a->geo.unit_blocks * (a->nr_members - 1);
	uint8_t *p = buf;
	int ret = 0;

	/* A large host command is several array requests, one after the
	 * other: SCSI promises no atomicity across a command's blocks. */
	while (blocks && !ret) {
		struct tpt_req r = {
			.array = a,
			.write = write,
			.lba = lba,
			.buf = p,
		};
		uint64_t end = (lba / per_stripe + TPT_REQ_MAX_STRIPES) * per_stripe;

		r.blocks = end - lba < blocks ? end - lba : blocks;
		r.first_stripe = lba / per_stripe;
		r.last_stripe = (lba + r.blocks - 1) / per_stripe;
		ret = array_submit_wait(a, &r);
		lba += r.blocks;
		p += (uint64_t)r.blocks * a->block_size;
		blocks -= r.blocks;
	}
	return ret;
}

/* ---- SYNCHRONIZE CACHE to every member ---- */

struct sync_run {
	struct tpt_req *r;
	unsigned int pending;
	int failure;
};

static void sync_done(struct tpt_member *m, struct scsi_task *task,
		      int status, void *arg)
{
	struct sync_run *run = arg;

	(void)task;
	if (status != SCSI_STATUS_GOOD) {
		eprintf("tptraid: member %u: SYNCHRONIZE CACHE failed\n",
			m->index);
		run->failure = -EIO;
	}
	if (!--run->pending) {
		tpt_ctl_finish(run->r, run->failure);
		free(run);
	}
}

static void sync_start(struct tpt_req *r)
{
	struct tpt_array *a = r->array;
	struct sync_run *run = calloc(1, sizeof(*run));
	unsigned int i;

	if (!run) {
		tpt_ctl_finish(r, -ENOMEM);
		return;
	}
	run->r = r;
	run->pending = 1;
	for (i = 0; i < a->nr_members; i++) {
		struct scsi_task *task = scsi_cdb_synchronizecache16(0, 0, 0, 0);

		run->pending++;
		if (!task || tpt_ctl_send(&a->member[i], task, NULL, 0,
					  sync_done, run)) {
			run->pending--;
			run->failure = -EIO;
		}
	}
	sync_done(&a->member[0], NULL, SCSI_STATUS_GOOD, run);
}

int tpt_array_sync(struct tpt_array *a)
{
	/* An empty stripe range: it waits for no stripe lock. */
	struct tpt_req r = {
		.array = a,
		.sync = true,
		.first_stripe = 1,
		.last_stripe = 0,
	};

	return array_submit_wait(a, &r);
}

/* ---- create and destroy ---- */

uint64_t tpt_array_bytes(const struct tpt_array *a)
{
	return a->layout->array_blocks(&a->geo) * a->block_size;
}

static void array_free(struct tpt_array *a)
{
	unsigned int i;

	for (i = 0; i < a->nr_members; i++) {
		struct tpt_member *m = &a->member[i];

		if (m->fd >= 0)
			tgt_event_del(m->fd);
		if (m->iscsi) {
			if (m->up) {
				/* Controller stop (III-B step 4): the member
				 * drops every buffer it held for us, then we
				 * log out. */
				if (m->slot_table)
					member_release_all(m);
				iscsi_logout_sync(m->iscsi);
			}
			iscsi_destroy_context(m->iscsi);
		}
		if (m->slot_table) {
			slot_alloc_destroy(&a->slots[i]);
			free(m->slot_table);
		}
	}
	if (a->efd >= 0) {
		tgt_event_del(a->efd);
		close(a->efd);
	}
	free(a);
}

static int array_geometry(struct tpt_array *a)
{
	uint64_t min_blocks = UINT64_MAX;
	unsigned int i;

	a->block_size = a->member[0].block_size;
	for (i = 0; i < a->nr_members; i++) {
		if (a->member[i].block_size != a->block_size) {
			eprintf("tptraid: member %u has %u-byte blocks, member "
				"0 %u: members must agree\n", i,
				a->member[i].block_size, a->block_size);
			return -EINVAL;
		}
		if (a->member[i].nr_blocks < min_blocks)
			min_blocks = a->member[i].nr_blocks;
	}
	if (a->spec.unit_bytes % a->block_size) {
		eprintf("tptraid: stripe unit %u is not a multiple of the "
			"members' %u-byte blocks\n", a->spec.unit_bytes,
			a->block_size);
		return -EINVAL;
	}
	a->geo.members = a->nr_members;
	a->geo.unit_blocks = a->spec.unit_bytes / a->block_size;
	a->geo.member_blocks = min_blocks - min_blocks % a->geo.unit_blocks;
	if (!a->geo.member_blocks) {
		eprintf("tptraid: members are smaller than one stripe unit\n");
		return -EINVAL;
	}
	a->plan_ctx.geo = &a->geo;
	a->plan_ctx.layout = a->layout;
	a->plan_ctx.block_size = a->block_size;
	a->plan_ctx.slots = a->slots;
	return 0;
}

int tpt_array_create(struct scsi_lu *lu, const struct tpt_array_spec *spec,
		     struct tpt_array **out)
{
	struct tpt_array_entry *e;
	struct tpt_array *a;
	unsigned int i;
	int ret;

	a = calloc(1, sizeof(*a));
	e = calloc(1, sizeof(*e));
	if (!a || !e) {
		free(a);
		free(e);
		return -ENOMEM;
	}
	a->lu = lu;
	a->spec = *spec;
	a->efd = -1;
	a->nr_members = spec->nr_members;
	a->layout = raid_layout_find("raid5");
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->stats_lock, NULL);
	INIT_LIST_HEAD(&a->submitted);
	INIT_LIST_HEAD(&a->running);
	INIT_LIST_HEAD(&a->waiting);
	if (getrandom(&a->array_id, sizeof(a->array_id), 0) !=
		    sizeof(a->array_id) ||
	    getrandom(a->token, sizeof(a->token), 0) != sizeof(a->token)) {
		ret = -EIO;
		goto fail;
	}
	a->array_id |= 1;	/* non-zero */
	for (i = 0; i < a->nr_members; i++) {
		struct tpt_member *m = &a->member[i];

		m->array = a;
		m->index = i;
		m->fd = -1;
		strcpy(m->url, spec->member[i]);
		if (getrandom(m->token, sizeof(m->token), 0) !=
		    sizeof(m->token)) {
			ret = -EIO;
			goto fail;
		}
		ret = member_connect(a, m);
		if (ret)
			goto fail;
	}
	ret = array_geometry(a);
	if (ret)
		goto fail;

	if (spec->mode == TPT_MODE_TPT) {
		ret = tpt_target_dm_ensure(spec->dm_addr, spec->dm_port);
		for (i = 0; !ret && i < a->nr_members; i++)
			ret = member_report_endpoint(&a->member[i]);
		for (i = 0; !ret && i < a->nr_members; i++)
			if (strcmp(a->member[i].endpoint.provider,
				   tpt_dm_provider_name(tpt_target_dm()))) {
				eprintf("tptraid: member %u moves data with "
					"%s, this controller with %s\n", i,
					a->member[i].endpoint.provider,
					tpt_dm_provider_name(tpt_target_dm()));
				ret = -EPROTO;
			}
		if (!ret)
			ret = array_deliver_peer_list(a);
		for (i = 0; !ret && i < a->nr_members; i++)
			ret = member_report_slots(a, &a->member[i]);
		if (ret)
			goto fail;
	}

	a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (a->efd < 0 || tgt_event_add(a->efd, EPOLLIN, array_submitted, a)) {
		ret = -EIO;
		goto fail;
	}
	for (i = 0; i < a->nr_members; i++) {
		struct tpt_member *m = &a->member[i];

		m->fd = iscsi_get_fd(m->iscsi);
		tgt_event_add(m->fd, iscsi_which_events(m->iscsi),
			      member_event, m);
	}
	if (list_empty(&tpt_arrays_list)) {
		member_tick_work.func = member_tick;
		add_work(&member_tick_work, 1);
	}
	e->array = a;
	list_add_tail(&e->link, &tpt_arrays_list);
	eprintf("tptraid: %s RAID-5 of %u members, %u KiB unit, %" PRIu64
		" MiB\n", tpt_array_mode_name(spec->mode), a->nr_members,
		spec->unit_bytes >> 10, tpt_array_bytes(a) >> 20);
	*out = a;
	return 0;
fail:
	free(e);
	array_free(a);
	return ret;
}

void tpt_array_destroy(struct tpt_array *a)
{
	struct tpt_array_entry *e;

	list_for_each_entry(e, &tpt_arrays_list, link) {
		if (e->array == a) {
			list_del(&e->link);
			free(e);
			break;
		}
	}
	if (list_empty(&tpt_arrays_list))
		del_work(&member_tick_work);
	array_free(a);
}

int tpt_ctl_accept_peer(const struct tpt_dm_hello *hello,
			const struct sockaddr *src, socklen_t srclen)
{
	struct tpt_array_entry *e;

	(void)src;
	(void)srclen;
	list_for_each_entry(e, &tpt_arrays_list, link) {
		struct tpt_array *a = e->array;

		if (a->array_id == hello->array_id &&
		    hello->role == TPT_DM_ROLE_TARGET &&
		    hello->peer_id < a->nr_members &&
		    !memcmp(hello->token, a->token, sizeof(a->token)))
			return 0;
	}
	return -EPERM;
}
