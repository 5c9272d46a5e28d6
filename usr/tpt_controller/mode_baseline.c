/*
 * Baseline mode: the paper's in-band controller (III-C, III-E).  All data
 * passes through the controller, which runs the RAID level's Baseline
 * plans (controller/bl_plan.h): standard READ(16) and WRITE(16) to the
 * members, and the parity computed here with ISA-L.  It exists so that
 * TPT can be measured against it on the same array definition; its
 * counters follow Table I (a single-block write moves 5 blocks through
 * the controller, a full-stripe write 2N-1).  Members that are TPT targets
 * are bound to the array's key all the same (member_bind.c), so that a
 * stranger can read or write them no more than a `tpt` array's.
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
	bool retry;
	unsigned int pdus;		/* commands actually sent */
};

/* The in-band controller needs nothing of its members but READ and
 * WRITE; TPT targets among them are bound to the array all the same
 * (member_bind.c). */
static int bl_setup(struct tpt_array *a)
{
	(void)a;
	return 0;
}

/* Controller stop: the bound members are free for another array. */
static void bl_teardown(struct tpt_array *a)
{
	unsigned int i;

	for (i = 0; i < a->nr_boxes; i++)
		member_unbind_sync(&a->member[i]);
}

static void bl_member_setup(struct tpt_array *a, struct tpt_member *m,
			    void (*done)(struct tpt_member *m, int err))
{
	(void)a;
	done(m, 0);
}

static void bl_member_lost(struct tpt_array *a, struct tpt_member *m)
{
	(void)a;
	(void)m;
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
		/* Each member READ or WRITE carries its data. */
		d.pdu_moves = run->pdus;
		bl_plan_count(&run->plan, &k);
		d.target_bytes_in = k.member_in;
		d.target_bytes_out = k.member_out;
		d.bytes_xored = k.xored;
	}
	for (i = 0; run->temp && i < run->plan.nr_temps; i++)
		free(run->temp[i]);
	free(run->temp);
	bl_plan_free(&run->plan);
	tpt_span_done(run->span, run->failure, run->retry, &d);
	free(run);
}

/*
 * What a failed READ or WRITE means: a member whose WRITE failed is
 * failed, a READ's failure is read as in TPT mode (array_read_failed()).
 */
static void bl_classify(struct bl_run *run, struct tpt_member *m,
			const struct bl_cmd *cmd, struct scsi_task *task,
			int status)
{
	bool retry = true;
	int err = -EIO;

	if (cmd->op == BL_WRITE)
		/* Data or parity may be on the others already: a re-plan with
		 * this member would fold its stale unit into the parity. */
		array_member_error(m->array, m, "WRITE failed");
	else
		err = array_read_failed(run->span, m, cmd->member, task,
					status, &retry);
	if (!run->failure || run->retry) {
		run->failure = err;
		run->retry = retry;
	}
}

static void bl_step(struct bl_run *run);

struct bl_io {
	struct bl_run *run;
	const struct bl_cmd *cmd;
};

static void bl_cmd_done(struct tpt_member *m, struct scsi_task *task,
			int status, void *arg)
{
	struct bl_io *io = arg;
	struct bl_run *run = io->run;

	if (status != SCSI_STATUS_GOOD) {
		if (status != SCSI_STATUS_CANCELLED &&
		    !array_failure_quiet(run->span, task, status))
			eprintf("tptraid: member %u: command failed with "
				"status 0x%x: %s\n", m->id, status,
				member_error(m));
		bl_classify(run, m, io->cmd, task, status);
	}
	free(io);
	if (!--run->pending)
		bl_step(run);
}

/* dst ^= 2^gf_exp src; src of any alignment (host data comes as it
 * comes). */
static int bl_xor(uint8_t *dst, const uint8_t *src, uint32_t len,
		  uint8_t gf_exp)
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
	err = tpt_gf_fold(dst, (const void *[]){ src }, &gf_exp, 1, len, true);
	free(bounce);
	return err;
}

static int bl_local(struct bl_run *run, const struct bl_cmd *cmd)
{
	uint8_t *dst = bl_mem(run, &cmd->dst);
	const uint8_t *src = bl_mem(run, &cmd->src);

	if (cmd->op == BL_COPY) {
		memcpy(dst, src, cmd->bytes);
		return tpt_gf_scale(dst, cmd->gf_exp, cmd->bytes);
	}
	return bl_xor(dst, src, cmd->bytes, cmd->gf_exp);
}

static int bl_send(struct bl_run *run, const struct bl_cmd *cmd)
{
	struct tpt_member *m = array_span_box(run->span, cmd->member);
	struct scsi_task *task;
	struct bl_io *io;
	int err;

	if (!m)
		return -EIO;
	if (cmd->op == BL_READ) {
		task = scsi_cdb_read16(cmd->lba, cmd->bytes, m->block_size, 0,
				       0, 0, 0, 0);
		if (task && scsi_task_add_data_in_buffer(task, cmd->bytes,
							 bl_mem(run, &cmd->dst))) {
			scsi_free_scsi_task(task);
			task = NULL;
		}
	} else {
		/* The host asked for its write to be on media (FUA). */
		task = scsi_cdb_write16(cmd->lba, cmd->bytes, m->block_size, 0,
					0, run->span->fua ? 1 : 0, 0, 0);
	}
	io = calloc(1, sizeof(*io));
	if (!task || !io) {
		if (task)
			scsi_free_scsi_task(task);
		free(io);
		return -ENOMEM;
	}
	io->run = run;
	io->cmd = cmd;
	run->pending++;
	err = member_send(m, task, cmd->op == BL_WRITE ?
				      bl_mem(run, &cmd->src) : NULL,
			  cmd->op == BL_WRITE ? cmd->bytes : 0, bl_cmd_done, io);
	if (err) {
		free(io);
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
	bool writes = false, local_err;
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
	local_err = err != 0;
	/* Held open while the step's commands go out.  A READ that cannot
	 * be sent fails the span and the rest of the step is not worth
	 * sending; a step of WRITEs goes out in full: once some members have
	 * their part of a stripe, every other must, or the stripe is torn
	 * and a re-plan reads the new data back as old.  A member that cannot
	 * take its WRITE is failed instead: its unit is then the others' to
	 * give. */
	for (i = 0; i < st->nr_cmds; i++)
		if (run->plan.cmds[st->first_cmd + i].op == BL_WRITE)
			writes = true;
	if (writes && !local_err)
		run->span->wrote = true;
	run->pending++;
	/* Nothing goes out after a local step failed. */
	for (i = 0; !local_err && i < st->nr_cmds && (!err || writes); i++) {
		const struct bl_cmd *cmd = &run->plan.cmds[st->first_cmd + i];
		struct tpt_member *m;
		int e;

		if (cmd->op != BL_READ && cmd->op != BL_WRITE)
			continue;
		e = bl_send(run, cmd);
		if (!e)
			continue;
		err = e;
		m = array_span_box(run->span, cmd->member);
		if (cmd->op == BL_WRITE && m)
			array_member_error(m->array, m,
					   "WRITE could not be sent");
	}
	if (err && (!run->failure || run->retry)) {
		/* A member gone since the plan: the re-plan knows. */
		run->failure = err;
		run->retry = err == -EIO;
	}
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
		.missing = array_span_missing(s),
		.rebuild_also = s->kind == TPT_SPAN_REBUILD ?
				s->rebuild_also : 0,
	};
	struct bl_run *run = calloc(1, sizeof(*run));
	unsigned int i;
	int err;

	if (!run) {
		tpt_span_done(s, -ENOMEM, false, NULL);
		return 0;
	}
	run->span = s;
	switch (s->kind) {
	case TPT_SPAN_WRITE:
		err = a->level->bl_write(&c, s->lba, s->blocks, &run->plan);
		break;
	case TPT_SPAN_READ:
		err = a->level->bl_read(&c, s->lba, s->blocks, &run->plan);
		break;
	case TPT_SPAN_CHECK:
		err = a->level->bl_check(&c, s->first_stripe,
					 (uint32_t)(s->last_stripe -
						    s->first_stripe + 1),
					 &run->plan);
		break;
	default:
		if (s->copying) {
			err = bl_plan_copy(&c, s->first_stripe,
					   (uint32_t)(s->last_stripe -
						      s->first_stripe + 1),
					   a->nr_members, 1u << s->member,
					   &run->plan);
			break;
		}
		err = a->level->bl_rebuild(&c, s->first_stripe,
					   (uint32_t)(s->last_stripe -
						      s->first_stripe + 1),
					   s->member, &run->plan);
		break;
	}
	if (!err && run->plan.nr_temps) {
		run->temp = calloc(run->plan.nr_temps, sizeof(*run->temp));
		if (!run->temp)
			err = -ENOMEM;
		for (i = 0; !err && i < run->plan.nr_temps; i++)
			if (!(run->temp[i] = bl_alloc(run->plan.temp_bytes[i])))
				err = -ENOMEM;
	}
	if (err) {
		if (err != -ENODATA)
			eprintf("tptraid: cannot plan %u blocks at %" PRIu64
				": %s\n", s->blocks, s->lba, strerror(-err));
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
	.member_claim = member_bind_alone,
	.member_unclaim = member_unbind,
	.member_setup = bl_member_setup,
	.member_lost = bl_member_lost,
	.start = bl_start,
};
