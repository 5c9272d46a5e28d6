/*
 * TPT mode (paper III-C): the controller plans each span with the RAID
 * level's TPT planner and sends the commands step by step; the targets
 * move the data (to and from the host's data, which the controller holds
 * as the unmodified host's proxy and registers with the datamover) and
 * compute parity among themselves.  The controller never touches a data
 * byte after iSCSI delivered it.
 *
 * Set-up (III-B): the controller's datamover, each member's endpoint (TPT
 * REPORT ENDPOINT), the peer list to every member (TPT SET PEER LIST),
 * and each member's slot table (TPT REPORT SLOTS, the Send_Control STag
 * qualifier).  At teardown every member drops what it holds for us (TPT
 * RELEASE ALL, III-B step 4).
 *
 * A failed step ends the span: TPT RELEASE to every member that got a
 * command (nothing reached a disk before WRITE NEW DATA, III-D 4), then
 * the host sees the error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "controller/slot_alloc.h"
#include "controller/tpt_plan.h"
#include "iser/tpt_dm.h"
#include "tpt_datamover.h"
#include "tpt_controller.h"

/* Slots the controller asks each member for (TPT REPORT SLOTS): enough
 * for a span of 32 stripes (array.c) with a result of each kind. */
#define TPT_CTL_SLOTS 128

/* What TPT mode keeps per member. */
struct tp_member {
	struct tpt_endpoint_report endpoint;
	uint8_t token[TPT_AUTH_TOKEN_LEN];	/* what peers present to it */
	struct tpt_slot_table slot_table;
};

struct tp_array {
	struct tp_member member[TPT_SPEC_MAX_MEMBERS];
	uint8_t token[TPT_AUTH_TOKEN_LEN];	/* targets present it to us */
	struct slot_alloc slots[TPT_SPEC_MAX_MEMBERS];
	struct tpt_plan_ctx plan_ctx;
	uint32_t next_group;
	bool slots_ready;
};

static struct tp_array *tp_of(const struct tpt_array *a)
{
	return a->mode_priv;
}

/* ---- set-up ---- */

static LIST_HEAD(tp_arrays);

struct tp_array_entry {
	struct list_head link;
	struct tpt_array *array;
};

/* Incoming datamover connections: targets of one of our arrays reading
 * or writing the host data we proxy. */
static int tp_accept_peer(const struct tpt_dm_hello *hello,
			  const struct sockaddr *src, socklen_t srclen)
{
	struct tp_array_entry *e;

	(void)src;
	(void)srclen;
	list_for_each_entry(e, &tp_arrays, link) {
		struct tpt_array *a = e->array;

		if (a->array_id == hello->array_id &&
		    hello->role == TPT_DM_ROLE_TARGET &&
		    hello->peer_id < a->nr_members &&
		    !memcmp(hello->token, tp_of(a)->token,
			    sizeof(tp_of(a)->token)))
			return 0;
	}
	return -EPERM;
}

static struct tpt_datamover_user tp_dm_user = {
	.name = "controller",
	.accept = tp_accept_peer,
};

static int tp_report_endpoint(struct tpt_member *m)
{
	struct tp_member *tm = &tp_of(m->array)->member[m->index];
	uint8_t cdb[16] = { TPT_OP_REPORT_ENDPOINT };
	struct tpt_field_ptr where;
	struct scsi_task *task;
	int ret = 0;

	tpt_put_be(&cdb[10], TPT_ENDPOINT_REPORT_LEN, 4);
	task = member_command_sync(m, cdb, SCSI_XFER_READ, NULL,
				   TPT_ENDPOINT_REPORT_LEN);
	if (!task) {
		eprintf("tptraid: member %u (%s) is not a TPT target: put its "
			"LUN in TPT mode (tpt=on)\n", m->index, m->url);
		return -EPROTO;
	}
	if (tpt_endpoint_report_decode(task->datain.data, task->datain.size,
				       &tm->endpoint, &where)) {
		eprintf("tptraid: member %u (%s): bad endpoint report\n",
			m->index, m->url);
		ret = -EPROTO;
	} else if (strcmp(tm->endpoint.provider,
			  tpt_dm_provider_name(tpt_datamover()))) {
		eprintf("tptraid: member %u moves data with %s, this "
			"controller with %s\n", m->index,
			tm->endpoint.provider,
			tpt_dm_provider_name(tpt_datamover()));
		ret = -EPROTO;
	}
	scsi_free_scsi_task(task);
	return ret;
}

static int tp_deliver_peer_list(struct tpt_array *a)
{
	struct tp_array *tp = tp_of(a);
	struct tpt_peer_list *pl = calloc(1, sizeof(*pl));
	struct tpt_peer *p;
	uint8_t *buf = NULL;
	unsigned int i;
	int len, ret = -ENOMEM;

	if (!pl)
		return -ENOMEM;
	pl->array_id = a->array_id;
	pl->generation = 1;
	for (i = 0; i < a->nr_members; i++) {
		p = &pl->peer[pl->count++];
		p->id = i;
		p->role = TPT_ROLE_TARGET;
		p->ep = tp->member[i].endpoint.ep;
		memcpy(p->token, tp->member[i].token, sizeof(p->token));
	}
	p = &pl->peer[pl->count++];
	p->id = TPT_CTL_PEER_ID;
	p->role = TPT_ROLE_CONTROLLER;
	if (tpt_datamover_endpoint(&p->ep)) {
		ret = -EINVAL;
		goto out;
	}
	memcpy(p->token, tp->token, sizeof(p->token));
	buf = malloc(TPT_PEER_LIST_LEN(pl->count));
	if (!buf)
		goto out;
	for (i = 0; i < a->nr_members; i++) {
		uint8_t cdb[16] = { TPT_OP_SET_PEER_LIST };
		struct scsi_task *task;

		pl->self_id = i;
		len = tpt_peer_list_encode(pl, buf, TPT_PEER_LIST_LEN(pl->count));
		if (len < 0) {
			ret = -EINVAL;
			goto out;
		}
		tpt_put_be(&cdb[10], len, 4);
		task = member_command_sync(&a->member[i], cdb, SCSI_XFER_WRITE,
					   buf, len);
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

static int tp_report_slots(struct tpt_member *m)
{
	struct tp_array *tp = tp_of(m->array);
	struct tpt_slot_table *t = &tp->member[m->index].slot_table;
	uint32_t alloc = TPT_SLOT_TABLE_LEN(TPT_CTL_SLOTS);
	uint8_t cdb[16] = { TPT_OP_REPORT_SLOTS };
	struct tpt_field_ptr where;
	struct scsi_task *task;
	int ret = -EPROTO;

	tpt_put_be(&cdb[2], m->array->spec.unit_bytes, 4);
	tpt_put_be(&cdb[6], TPT_CTL_SLOTS, 2);
	tpt_put_be(&cdb[10], alloc, 4);
	task = member_command_sync(m, cdb, SCSI_XFER_READ, NULL, alloc);
	if (!task)
		return -EIO;
	if (!tpt_slot_table_decode(task->datain.data, task->datain.size, t,
				   &where) &&
	    t->count == TPT_CTL_SLOTS &&
	    t->payload_size == m->array->spec.unit_bytes)
		ret = slot_alloc_init(&tp->slots[m->index], t->count);
	if (ret)
		eprintf("tptraid: member %u (%s): unusable slot table\n",
			m->index, m->url);
	scsi_free_scsi_task(task);
	return ret;
}

static void tp_teardown(struct tpt_array *a)
{
	struct tp_array *tp = tp_of(a);
	struct tp_array_entry *e;
	unsigned int i;

	if (!tp)
		return;
	list_for_each_entry(e, &tp_arrays, link) {
		if (e->array == a) {
			list_del(&e->link);
			free(e);
			break;
		}
	}
	for (i = 0; i < a->nr_members; i++) {
		uint8_t cdb[16] = { TPT_OP_RELEASE, TPT_CDB_RELEASE_ALL };
		struct scsi_task *task;

		/* Controller stop (III-B step 4): the member drops every
		 * buffer it held for us, then we log out. */
		if (tp->slots_ready && a->member[i].up) {
			task = member_command_sync(&a->member[i], cdb,
						   SCSI_XFER_NONE, NULL, 0);
			if (task)
				scsi_free_scsi_task(task);
		}
		slot_alloc_destroy(&tp->slots[i]);
	}
	free(tp);
	a->mode_priv = NULL;
}

static int tp_setup(struct tpt_array *a)
{
	struct tp_array_entry *e;
	struct tp_array *tp;
	unsigned int i;
	char portal[80];
	int ret;

	tp = calloc(1, sizeof(*tp));
	e = calloc(1, sizeof(*e));
	if (!tp || !e) {
		free(tp);
		free(e);
		return -ENOMEM;
	}
	a->mode_priv = tp;
	e->array = a;
	list_add_tail(&e->link, &tp_arrays);
	if (getrandom(tp->token, sizeof(tp->token), 0) != sizeof(tp->token))
		return -EIO;
	for (i = 0; i < a->nr_members; i++)
		if (getrandom(tp->member[i].token, sizeof(tp->member[i].token),
			      0) != sizeof(tp->member[i].token))
			return -EIO;
	snprintf(portal, sizeof(portal), "%s:%u", a->spec.dm_addr,
		 a->spec.dm_port);
	tpt_datamover_register(&tp_dm_user);
	ret = tpt_datamover_set_portal(portal);
	if (!ret)
		ret = tpt_datamover_open();
	for (i = 0; !ret && i < a->nr_members; i++)
		ret = tp_report_endpoint(&a->member[i]);
	if (!ret)
		ret = tp_deliver_peer_list(a);
	for (i = 0; !ret && i < a->nr_members; i++)
		ret = tp_report_slots(&a->member[i]);
	if (ret)
		return ret;
	tp->slots_ready = true;
	tp->plan_ctx.geo = &a->geo;
	tp->plan_ctx.level = a->level;
	tp->plan_ctx.block_size = a->block_size;
	tp->plan_ctx.slots = tp->slots;
	return 0;
}

/* ---- running a span ---- */

struct tp_run {
	struct tpt_span *span;
	struct tpt_plan plan;
	struct tpt_plan release;
	bool releasing;
	struct tpt_dm_buf *host_mr;
	unsigned int step;
	unsigned int pending;
	int failure;
	unsigned int pdus;		/* commands actually sent */
};

struct tp_cmd {
	struct tp_run *run;
	const struct tpt_plan_cmd *pc;
	uint8_t *data_out;
};

static void tp_step(struct tp_run *run);

/* Counters for the span, from its plan: what the controller sent and what
 * the members moved for it. */
static void tp_count(struct tp_run *run, struct tpt_array_counters *d)
{
	struct tpt_plan_counts k;
	unsigned int i;

	memset(d, 0, sizeof(*d));
	d->pdus = run->pdus;
	if (run->failure)
		return;
	tpt_plan_count(&run->plan, &k);
	d->rma_ops = k.transfers;
	for (i = 0; i < run->span->array->nr_members; i++) {
		/* The host's data is ours: PREP READ pushes into it,
		 * everything else pulls from it. */
		d->target_bytes_in += k.member[i].host_out;
		d->target_bytes_out += k.member[i].host_in;
	}
}

static void tp_end(struct tp_run *run)
{
	struct tpt_span *s = run->span;
	struct tp_array *tp = tp_of(s->array);
	struct tpt_array_counters d;

	/* Every member freed the slots: by WRITE NEW DATA or by RELEASE. */
	tpt_plan_return_slots(&tp->plan_ctx, &run->plan);
	tp_count(run, &d);
	tpt_plan_free(&run->plan);
	if (run->releasing)
		tpt_plan_free(&run->release);
	if (run->host_mr)
		tpt_dm_buf_release(run->host_mr);
	tpt_span_done(s, run->failure, &d);
	free(run);
}

static void tp_cmd_done(struct tpt_member *m, struct scsi_task *task,
			int status, void *arg)
{
	struct tp_cmd *c = arg;
	struct tp_run *run = c->run;

	if (status != SCSI_STATUS_GOOD) {
		eprintf("tptraid: member %u: %s of group %u failed: status "
			"%d, sense %x/%04x\n", m->index,
			tpt_plan_op_name(c->pc->op), run->plan.group, status,
			task ? task->sense.key : 0, task ? task->sense.ascq : 0);
		if (!run->failure)
			run->failure = -EIO;
	}
	free(c->data_out);
	free(c);
	if (!--run->pending)
		tp_step(run);
}

/* The transfer list of @pc: host pieces name our registration of the host
 * data, slot pieces the member's slot as it reported it. */
static int tp_xfer_list(struct tp_run *run, const struct tpt_plan *p,
			const struct tpt_plan_cmd *pc, uint8_t **out)
{
	struct tp_array *tp = tp_of(run->span->array);
	struct tpt_xfer_list *xl = calloc(1, sizeof(*xl));
	uint64_t base = tpt_dm_buf_rma_base(run->host_mr);
	unsigned int i;
	int len;

	if (!xl)
		return -ENOMEM;
	xl->count = pc->nr_refs;
	xl->result_slot = pc->result_slot;
	for (i = 0; i < pc->nr_refs; i++) {
		const struct tpt_plan_ref *ref = &p->refs[pc->first_ref + i];
		struct tpt_xfer_desc *d = &xl->desc[i];

		d->length = ref->length;
		xl->total_length += ref->length;
		if (ref->kind == TPT_REF_HOST) {
			d->peer = TPT_CTL_PEER_ID;
			d->flags = base ? TPT_XFER_VIRT_ADDR : 0;
			d->stag = tpt_dm_buf_stag(run->host_mr);
			d->offset = base + ref->host_offset;
		} else {
			const struct tpt_slot_table *t =
				&tp->member[ref->member].slot_table;

			d->peer = ref->member;
			d->flags = TPT_XFER_SLOT | (t->flags & TPT_XFER_VIRT_ADDR);
			d->stag = t->slot[ref->slot].stag;
			d->offset = t->slot[ref->slot].offset;
		}
	}
	*out = malloc(TPT_XFER_LIST_LEN(xl->count));
	len = *out ? tpt_xfer_list_encode(xl, *out, TPT_XFER_LIST_LEN(xl->count)) :
		     -ENOMEM;
	free(xl);
	if (len < 0) {
		free(*out);
		*out = NULL;
	}
	return len;
}

static int tp_send(struct tp_run *run, const struct tpt_plan *p,
		   const struct tpt_plan_cmd *pc)
{
	struct tpt_member *m = &run->span->array->member[pc->member];
	struct tpt_cdb cdb = {
		.opcode = tpt_plan_opcode(pc->op),
		.lba = pc->lba,
		.transfer_length = pc->blocks,
		.group = p->group,
		.parity_mode = pc->parity_mode,
	};
	uint8_t raw[TPT_CDB_MAX_LEN] = { 0 };
	struct scsi_task *task;
	struct tp_cmd *c;
	int len = 0, n;

	switch (pc->op) {
	case TPT_PLAN_PREP_READ:
	case TPT_PLAN_PREP_WRITE:
		cdb.flags = pc->final ? TPT_CDB_FINAL : 0;
		break;
	case TPT_PLAN_XDWRITE:
		cdb.flags = TPT_CDB_DISABLE_WRITE;
		break;
	case TPT_PLAN_PRE_FETCH:
		/* SBC's GROUP NUMBER is a hint there, not our request id. */
		cdb.group = 0;
		break;
	case TPT_PLAN_RELEASE:
		cdb.lba = 0;
		cdb.transfer_length = 0;
		break;
	default:
		break;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->run = run;
	c->pc = pc;
	if (tpt_cdb_info(cdb.opcode)->param == TPT_PARAM_XFER_LIST) {
		len = tp_xfer_list(run, p, pc, &c->data_out);
		if (len < 0) {
			free(c);
			return len;
		}
	}
	n = tpt_cdb_encode(&cdb, raw, sizeof(raw));
	task = n > 0 ? scsi_create_task(n, raw, len ? SCSI_XFER_WRITE :
						       SCSI_XFER_NONE, len) : NULL;
	if (!task) {
		free(c->data_out);
		free(c);
		return n > 0 ? -ENOMEM : -EINVAL;
	}
	run->pending++;
	n = member_send(m, task, c->data_out, len, tp_cmd_done, c);
	if (n) {
		run->pending--;
		free(c->data_out);
		free(c);
		return n;
	}
	run->pdus++;
	return 0;
}

static void tp_send_step(struct tp_run *run, const struct tpt_plan *p,
			 unsigned int step)
{
	const struct plan_step *s = &p->steps[step];
	unsigned int i;
	int err;

	/* Held open while the step's commands go out. */
	run->pending++;
	for (i = 0; i < s->nr_cmds; i++) {
		err = tp_send(run, p, &p->cmds[s->first_cmd + i]);
		if (err) {
			if (!run->failure)
				run->failure = err;
			break;
		}
	}
	if (!--run->pending)
		tp_step(run);
}

/* Runs when the current step's commands have all completed. */
static void tp_step(struct tp_run *run)
{
	if (run->releasing) {
		tp_end(run);
		return;
	}
	if (run->failure) {
		/* Undo at every member that may hold the group's buffers. */
		run->releasing = true;
		if (tpt_plan_release(&run->plan, &run->release) ||
		    !run->release.nr_steps) {
			tp_end(run);
			return;
		}
		tp_send_step(run, &run->release, 0);
		return;
	}
	if (run->step == run->plan.nr_steps) {
		tp_end(run);
		return;
	}
	tp_send_step(run, &run->plan, run->step++);
}

static int tp_start(struct tpt_span *s)
{
	struct tpt_array *a = s->array;
	struct tp_array *tp = tp_of(a);
	uint64_t bytes = (uint64_t)s->blocks * a->block_size;
	struct tp_run *run;
	uint32_t group;
	int err;

	run = calloc(1, sizeof(*run));
	if (!run) {
		tpt_span_done(s, -ENOMEM, NULL);
		return 0;
	}
	run->span = s;
	group = tp->next_group++;
	if (!group)
		group = tp->next_group++;
	err = s->write ? a->level->tpt_write(&tp->plan_ctx, s->lba, s->blocks,
					     group, &run->plan) :
			 a->level->tpt_read(&tp->plan_ctx, s->lba, s->blocks,
					    group, &run->plan);
	if (err == -EAGAIN) {
		free(run);
		return -EAGAIN;
	}
	if (!err)
		err = tpt_dm_register(tpt_datamover(), s->buf, bytes,
				      s->write ? TPT_DM_ACCESS_REMOTE_READ :
						 TPT_DM_ACCESS_REMOTE_WRITE,
				      &run->host_mr);
	if (err) {
		eprintf("tptraid: cannot plan a %s of %u blocks at %" PRIu64
			": %s\n", s->write ? "write" : "read", s->blocks,
			s->lba, strerror(-err));
		if (run->plan.cmds) {
			tpt_plan_return_slots(&tp->plan_ctx, &run->plan);
			tpt_plan_free(&run->plan);
		}
		free(run);
		tpt_span_done(s, err, NULL);
		return 0;
	}
	tp_step(run);
	return 0;
}

const struct tpt_mode_ops tpt_mode_tpt = {
	.name = "tpt",
	.setup = tp_setup,
	.teardown = tp_teardown,
	.start = tp_start,
};
