/*
 * Baseline mode: the paper's in-band controller (III-C, III-E).  All data
 * passes through the controller, which runs the RAID level's Baseline
 * plans (controller/bl_plan.h): standard READ(16) and WRITE(16) to the
 * members, and the parity computed here with ISA-L.  It exists so that
 * TPT can be measured against it on the same array definition; its
 * counters follow Table I (a single-block write moves 5 blocks through
 * the controller, a full-stripe write 2N-1).
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
#include "controller/bl_plan.h"
#include "scsi/tpt_parity.h"
#include "tpt_controller.h"

struct bl_run {
	struct tpt_span *span;
	struct bl_plan plan;
	uint8_t **temp;
	unsigned int step;
	unsigned int pending;
	int failure;
	unsigned int pdus;		/* commands actually sent */
};

static int bl_setup(struct tpt_array *a)
{
	(void)a;
	return 0;
}

static void bl_teardown(struct tpt_array *a)
{
	(void)a;
}

static uint8_t *bl_alloc(size_t len)
{
	return aligned_alloc(TPT_PARITY_ALIGN,
			     (len + TPT_PARITY_ALIGN - 1) &
				     ~(size_t)(TPT_PARITY_ALIGN - 1));
}

static uint8_t *bl_mem(struct bl_run *run, const struct bl_ref *ref)
{
	return (ref->buf == BL_BUF_HOST ? run->span->buf : run->temp[ref->temp]) +
	       ref->offset;
}

static void bl_end(struct bl_run *run)
{
	struct tpt_array_counters d = { 0 };
	struct bl_plan_counts k;
	unsigned int i;

	d.pdus = run->pdus;
	if (!run->failure) {
		bl_plan_count(&run->plan, &k);
		d.target_bytes_in = k.member_in;
		d.target_bytes_out = k.member_out;
		d.bytes_xored = k.xored;
	}
	for (i = 0; run->temp && i < run->plan.nr_temps; i++)
		free(run->temp[i]);
	free(run->temp);
	bl_plan_free(&run->plan);
	tpt_span_done(run->span, run->failure, &d);
	free(run);
}

static void bl_step(struct bl_run *run);

static void bl_cmd_done(struct tpt_member *m, struct scsi_task *task,
			int status, void *arg)
{
	struct bl_run *run = arg;

	(void)task;
	if (status != SCSI_STATUS_GOOD) {
		eprintf("tptraid: member %u: command failed with status %d: "
			"%s\n", m->index, status, member_error(m));
		if (!run->failure)
			run->failure = -EIO;
	}
	if (!--run->pending)
		bl_step(run);
}

/* dst ^= src; src of any alignment (host data comes as it comes). */
static int bl_xor(uint8_t *dst, const uint8_t *src, uint32_t len)
{
	uint8_t *bounce = NULL;
	int err;

	if ((uintptr_t)src % TPT_PARITY_ALIGN) {
		bounce = bl_alloc(len);
		if (!bounce)
			return -ENOMEM;
		memcpy(bounce, src, len);
		src = bounce;
	}
	err = tpt_xor_acc(dst, src, len);
	free(bounce);
	return err;
}

static int bl_local(struct bl_run *run, const struct bl_cmd *cmd)
{
	uint8_t *dst = bl_mem(run, &cmd->dst);
	const uint8_t *src = bl_mem(run, &cmd->src);

	if (cmd->op == BL_COPY) {
		memcpy(dst, src, cmd->bytes);
		return 0;
	}
	return bl_xor(dst, src, cmd->bytes);
}

static int bl_send(struct bl_run *run, const struct bl_cmd *cmd)
{
	struct tpt_member *m = &run->span->array->member[cmd->member];
	struct scsi_task *task;
	int err;

	if (cmd->op == BL_READ) {
		task = scsi_cdb_read16(cmd->lba, cmd->bytes, m->block_size, 0,
				       0, 0, 0, 0);
		if (task && scsi_task_add_data_in_buffer(task, cmd->bytes,
							 bl_mem(run, &cmd->dst))) {
			scsi_free_scsi_task(task);
			task = NULL;
		}
	} else {
		task = scsi_cdb_write16(cmd->lba, cmd->bytes, m->block_size, 0,
					0, 0, 0, 0);
	}
	if (!task)
		return -ENOMEM;
	run->pending++;
	err = member_send(m, task, cmd->op == BL_WRITE ?
				      bl_mem(run, &cmd->src) : NULL,
			  cmd->op == BL_WRITE ? cmd->bytes : 0, bl_cmd_done, run);
	if (err) {
		run->pending--;
		return err;
	}
	run->pdus++;
	return 0;
}

/* Runs when the current step's commands have all completed. */
static void bl_step(struct bl_run *run)
{
	const struct plan_step *st;
	unsigned int i;
	int err = 0;

	if (run->failure || run->step == run->plan.nr_steps) {
		bl_end(run);
		return;
	}
	st = &run->plan.steps[run->step++];
	for (i = 0; i < st->nr_cmds && !err; i++) {
		const struct bl_cmd *cmd = &run->plan.cmds[st->first_cmd + i];

		if (cmd->op == BL_COPY || cmd->op == BL_XOR)
			err = bl_local(run, cmd);
	}
	/* Held open while the step's commands go out. */
	run->pending++;
	for (i = 0; i < st->nr_cmds && !err; i++) {
		const struct bl_cmd *cmd = &run->plan.cmds[st->first_cmd + i];

		if (cmd->op == BL_READ || cmd->op == BL_WRITE)
			err = bl_send(run, cmd);
	}
	if (err && !run->failure)
		run->failure = err;
	if (!--run->pending)
		bl_step(run);
}

static int bl_start(struct tpt_span *s)
{
	struct tpt_array *a = s->array;
	struct bl_plan_ctx c = {
		.geo = &a->geo,
		.level = a->level,
		.block_size = a->block_size,
	};
	struct bl_run *run = calloc(1, sizeof(*run));
	unsigned int i;
	int err;

	if (!run) {
		tpt_span_done(s, -ENOMEM, NULL);
		return 0;
	}
	run->span = s;
	err = s->write ? a->level->bl_write(&c, s->lba, s->blocks, &run->plan) :
			 a->level->bl_read(&c, s->lba, s->blocks, &run->plan);
	if (!err && run->plan.nr_temps) {
		run->temp = calloc(run->plan.nr_temps, sizeof(*run->temp));
		if (!run->temp)
			err = -ENOMEM;
		for (i = 0; !err && i < run->plan.nr_temps; i++)
			if (!(run->temp[i] = bl_alloc(run->plan.temp_bytes[i])))
				err = -ENOMEM;
	}
	if (err) {
		eprintf("tptraid: cannot plan a %s of %u blocks at %" PRIu64
			": %s\n", s->write ? "write" : "read", s->blocks,
			s->lba, strerror(-err));
		run->failure = err;
		bl_end(run);
		return 0;
	}
	bl_step(run);
	return 0;
}

const struct tpt_mode_ops tpt_mode_baseline = {
	.name = "baseline",
	.setup = bl_setup,
	.teardown = bl_teardown,
	.start = bl_start,
};
