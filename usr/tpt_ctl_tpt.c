/*
 * TPT mode (paper III-C): the controller plans each request and sends the
 * TPT commands step by step; the targets move the data (to and from the
 * host's data, which the controller holds as the unmodified host's proxy
 * and registers with the datamover) and compute parity among themselves.
 * The controller never touches a data byte after iSCSI delivered it.
 *
 * A failed step ends the request: TPT RELEASE to every member that got a
 * command (nothing reached a disk before WRITE NEW DATA, III-D 4), then
 * the host sees the error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "controller/tpt_plan.h"
#include "iser/tpt_dm.h"
#include "tpt_ctl.h"
#include "tpt_target.h"

struct tp_run {
	struct tpt_req *r;
	struct tpt_plan plan;
	struct tpt_plan release;
	bool releasing;
	struct tpt_dm_buf *host_mr;
	unsigned int step;
	unsigned int pending;
	int failure;
	struct tpt_ctl_stats delta;
};

struct tp_cmd {
	struct tp_run *run;
	const struct tpt_plan_cmd *pc;
	uint8_t *data_out;
};

static void tp_step(struct tp_run *run);

static void tp_end(struct tp_run *run)
{
	struct tpt_req *r = run->r;
	struct tpt_array *a = r->array;

	/* Every member freed the slots: by WRITE NEW DATA or by RELEASE. */
	tpt_plan_return_slots(&a->plan_ctx, &run->plan);
	tpt_plan_free(&run->plan);
	if (run->releasing)
		tpt_plan_free(&run->release);
	if (run->host_mr)
		tpt_dm_buf_release(run->host_mr);
	tpt_ctl_count(a, &run->delta);
	tpt_ctl_finish(r, run->failure);
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
	struct tpt_array *a = run->r->array;
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
			if (pc->op == TPT_PLAN_PREP_READ)
				run->delta.target_bytes_in += ref->length;
			else
				run->delta.target_bytes_out += ref->length;
		} else {
			const struct tpt_slot_table *t =
				a->member[ref->member].slot_table;

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
	struct tpt_member *m = &run->r->array->member[pc->member];
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
	run->delta.pdus++;
	n = tpt_ctl_send(m, task, c->data_out, len, tp_cmd_done, c);
	if (n) {
		run->pending--;
		free(c->data_out);
		free(c);
	}
	return n;
}

static void tp_send_step(struct tp_run *run, const struct tpt_plan *p,
			 unsigned int step)
{
	const struct tpt_plan_step *s = &p->steps[step];
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

int tpt_tpt_start(struct tpt_req *r)
{
	struct tpt_array *a = r->array;
	uint64_t bytes = (uint64_t)r->blocks * a->block_size;
	struct tp_run *run;
	uint32_t group;
	int err;

	run = calloc(1, sizeof(*run));
	if (!run) {
		tpt_ctl_finish(r, -ENOMEM);
		return 0;
	}
	run->r = r;
	group = a->next_group++;
	if (!group)
		group = a->next_group++;
	err = r->write ? tpt_plan_write(&a->plan_ctx, r->lba, r->blocks,
					group, &run->plan) :
			 tpt_plan_read(&a->plan_ctx, r->lba, r->blocks, group,
				       &run->plan);
	if (err == -EAGAIN) {
		free(run);
		return -EAGAIN;
	}
	if (!err)
		err = tpt_dm_register(tpt_target_dm(), r->buf, bytes,
				      r->write ? TPT_DM_ACCESS_REMOTE_READ :
						 TPT_DM_ACCESS_REMOTE_WRITE,
				      &run->host_mr);
	if (err) {
		eprintf("tptraid: cannot plan a %s of %u blocks at %" PRIu64
			": %s\n", r->write ? "write" : "read", r->blocks,
			r->lba, strerror(-err));
		if (run->plan.cmds) {
			tpt_plan_return_slots(&a->plan_ctx, &run->plan);
			tpt_plan_free(&run->plan);
		}
		free(run);
		tpt_ctl_finish(r, err);
		return 0;
	}
	if (r->write) {
		run->delta.writes = 1;
		run->delta.host_bytes_in = bytes;
	} else {
		run->delta.reads = 1;
		run->delta.host_bytes_out = bytes;
	}
	tp_step(run);
	return 0;
}
