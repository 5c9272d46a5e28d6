/*
 * The paper's Baseline (III-C, III-E): an in-band RAID-5 controller.  All
 * data passes through it and it computes parity itself, with standard
 * READ(16) and WRITE(16) to the members.  It exists so that TPT can be
 * measured against it on the same array definition, and its counters must
 * follow Table I: a single-block write moves 5 blocks through the
 * controller (new data in, old data and parity in, new data and parity
 * out), a full-stripe write 2N-1.
 *
 * Each stripe of a request is handled on its own, all at once:
 *   read      one READ per piece of a unit
 *   full      parity from the host data, then WRITE of every unit
 *   partial   READ old data and old parity, fold old ^ new into the
 *             parity, then WRITE the new data and parity
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "scsi/tpt_parity.h"
#include "tpt_ctl.h"

struct bl_piece {
	struct tpt_member *member;
	uint64_t member_lba;
	uint32_t bytes;
	uint32_t unit_off;		/* bytes into the unit */
	uint8_t *host;			/* its place in the request buffer */
	uint8_t *old;			/* old data (partial stripes) */
};

struct bl_stripe {
	struct bl_run *run;
	uint64_t stripe;
	unsigned int nr_pieces;
	struct bl_piece piece[TPT_SPEC_MAX_MEMBERS];
	bool full;
	struct tpt_member *parity_member;
	uint32_t p_off, p_len;		/* parity range within the unit */
	uint8_t *parity;
	unsigned int pending;
	bool writing;
};

struct bl_run {
	struct tpt_req *r;
	unsigned int pending;		/* stripes (or reads) outstanding */
	int failure;
	struct tpt_ctl_stats delta;
	unsigned int nr_stripes;
	struct bl_stripe stripe[];
};

static uint8_t *bl_alloc(size_t len)
{
	return aligned_alloc(TPT_PARITY_ALIGN,
			     (len + TPT_PARITY_ALIGN - 1) & ~(size_t)(TPT_PARITY_ALIGN - 1));
}

static void bl_run_end(struct bl_run *run)
{
	struct tpt_req *r = run->r;
	unsigned int i, j;

	tpt_ctl_count(r->array, &run->delta);
	for (i = 0; i < run->nr_stripes; i++) {
		for (j = 0; j < run->stripe[i].nr_pieces; j++)
			free(run->stripe[i].piece[j].old);
		free(run->stripe[i].parity);
	}
	tpt_ctl_finish(r, run->failure);
	free(run);
}

static void bl_fail(struct bl_run *run, int err)
{
	if (!run->failure)
		run->failure = err;
}

static int bl_status(struct tpt_member *m, int status)
{
	if (status == SCSI_STATUS_GOOD)
		return 0;
	eprintf("tptraid: member %u: command failed with status %d: %s\n",
		m->index, status, iscsi_get_error(m->iscsi));
	return -EIO;
}

static int bl_read(struct bl_run *run, struct tpt_member *m, uint64_t lba,
		   void *dst, uint32_t bytes, tpt_ctl_cmd_cb cb, void *arg)
{
	struct scsi_task *task;

	task = scsi_cdb_read16(lba, bytes, m->block_size, 0, 0, 0, 0, 0);
	if (!task)
		return -ENOMEM;
	if (scsi_task_add_data_in_buffer(task, bytes, dst)) {
		scsi_free_scsi_task(task);
		return -ENOMEM;
	}
	run->delta.pdus++;
	run->delta.target_bytes_in += bytes;
	return tpt_ctl_send(m, task, NULL, 0, cb, arg);
}

static int bl_write(struct bl_run *run, struct tpt_member *m, uint64_t lba,
		    void *src, uint32_t bytes, tpt_ctl_cmd_cb cb, void *arg)
{
	struct scsi_task *task;

	task = scsi_cdb_write16(lba, bytes, m->block_size, 0, 0, 0, 0, 0);
	if (!task)
		return -ENOMEM;
	run->delta.pdus++;
	run->delta.target_bytes_out += bytes;
	return tpt_ctl_send(m, task, src, bytes, cb, arg);
}

/* Split the request's part of a stripe into unit pieces. */
static void bl_layout_stripe(struct tpt_req *r, struct bl_stripe *s,
			     uint64_t stripe)
{
	struct tpt_array *a = r->array;
	uint64_t unit = a->geo.unit_blocks;
	uint64_t per_stripe = unit * (a->nr_members - 1);
	uint64_t first = stripe * per_stripe, end = first + per_stripe;
	uint64_t lo = r->lba > first ? r->lba : first;
	uint64_t hi = r->lba + r->blocks < end ? r->lba + r->blocks : end;
	uint32_t bs = a->block_size;
	uint32_t p_end = 0;
	uint64_t lba;

	s->stripe = stripe;
	s->parity_member = &a->member[a->layout->parity_member(&a->geo, stripe, 0)];
	s->full = lo == first && hi == end;
	s->p_off = UINT32_MAX;
	for (lba = lo; lba < hi;) {
		struct raid_chunk c;
		uint64_t in_unit, n;
		struct bl_piece *p = &s->piece[s->nr_pieces++];

		a->layout->map(&a->geo, lba, &c);
		in_unit = c.member_lba % unit;
		n = unit - in_unit;
		if (n > hi - lba)
			n = hi - lba;
		p->member = &a->member[c.member];
		p->member_lba = c.member_lba;
		p->bytes = n * bs;
		p->unit_off = in_unit * bs;
		p->host = r->buf + (lba - r->lba) * bs;
		if (p->unit_off < s->p_off)
			s->p_off = p->unit_off;
		if (p->unit_off + p->bytes > p_end)
			p_end = p->unit_off + p->bytes;
		lba += n;
	}
	/* The parity covers the union of the pieces' places in the unit. */
	s->p_len = p_end - s->p_off;
}

/* ---- reads ---- */

static void bl_read_done(struct tpt_member *m, struct scsi_task *task,
			 int status, void *arg)
{
	struct bl_run *run = arg;
	int err = bl_status(m, status);

	(void)task;
	if (err)
		bl_fail(run, err);
	if (!--run->pending)
		bl_run_end(run);
}

static void bl_start_read(struct bl_run *run)
{
	unsigned int i, j;
	int err;

	run->pending = 1;
	for (i = 0; i < run->nr_stripes && !run->failure; i++) {
		struct bl_stripe *s = &run->stripe[i];

		for (j = 0; j < s->nr_pieces; j++) {
			struct bl_piece *p = &s->piece[j];

			run->pending++;
			err = bl_read(run, p->member, p->member_lba, p->host,
				      p->bytes, bl_read_done, run);
			if (err) {
				run->pending--;
				bl_fail(run, err);
				break;
			}
		}
	}
	if (!--run->pending)
		bl_run_end(run);
}

/* ---- writes ---- */

static void bl_stripe_step(struct bl_stripe *s);

static void bl_stripe_cmd_done(struct tpt_member *m, struct scsi_task *task,
			       int status, void *arg)
{
	struct bl_stripe *s = arg;
	int err = bl_status(m, status);

	(void)task;
	if (err)
		bl_fail(s->run, err);
	if (!--s->pending)
		bl_stripe_step(s);
}

/* dst ^= src, with src of any alignment (host data comes as it comes). */
static int bl_fold(struct bl_run *run, uint8_t *dst, const uint8_t *src,
		   uint32_t len)
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
	run->delta.bytes_xored += len;
	return err;
}

static int bl_compute_parity(struct bl_stripe *s)
{
	unsigned int i;
	int err = 0;

	if (s->full) {
		memcpy(s->parity, s->piece[0].host, s->p_len);
		for (i = 1; i < s->nr_pieces && !err; i++)
			err = bl_fold(s->run, s->parity, s->piece[i].host,
				      s->p_len);
		return err;
	}
	/* New parity = old parity ^ old data ^ new data, piece by piece. */
	for (i = 0; i < s->nr_pieces && !err; i++) {
		struct bl_piece *p = &s->piece[i];
		uint8_t *at = s->parity + (p->unit_off - s->p_off);

		err = bl_fold(s->run, at, p->old, p->bytes);
		if (!err)
			err = bl_fold(s->run, at, p->host, p->bytes);
	}
	return err;
}

static void bl_stripe_write(struct bl_stripe *s)
{
	struct bl_run *run = s->run;
	uint64_t p_lba = s->stripe * run->r->array->geo.unit_blocks +
			 s->p_off / s->parity_member->block_size;
	unsigned int i;
	int err;

	err = bl_compute_parity(s);
	if (err) {
		bl_fail(run, err);
		bl_stripe_step(s);
		return;
	}
	s->writing = true;
	s->pending = 1;
	for (i = 0; i <= s->nr_pieces; i++) {
		struct bl_piece *p = i < s->nr_pieces ? &s->piece[i] : NULL;

		s->pending++;
		err = p ? bl_write(run, p->member, p->member_lba, p->host,
				   p->bytes, bl_stripe_cmd_done, s) :
			  bl_write(run, s->parity_member, p_lba, s->parity,
				   s->p_len, bl_stripe_cmd_done, s);
		if (err) {
			s->pending--;
			bl_fail(run, err);
			break;
		}
	}
	if (!--s->pending)
		bl_stripe_step(s);
}

/* Runs when a stripe's outstanding commands have all completed. */
static void bl_stripe_step(struct bl_stripe *s)
{
	struct bl_run *run = s->run;

	if (!s->writing && !run->failure) {
		bl_stripe_write(s);
		return;
	}
	if (!--run->pending)
		bl_run_end(run);
}

static void bl_stripe_start(struct bl_stripe *s)
{
	struct bl_run *run = s->run;
	uint64_t p_lba;
	unsigned int i;
	int err = 0;

	s->parity = bl_alloc(s->p_len);
	if (!s->parity) {
		bl_fail(run, -ENOMEM);
		bl_stripe_step(s);
		return;
	}
	if (s->full) {
		bl_stripe_write(s);
		return;
	}
	p_lba = s->stripe * run->r->array->geo.unit_blocks +
		s->p_off / s->parity_member->block_size;
	s->pending = 1;
	for (i = 0; i <= s->nr_pieces && !err; i++) {
		struct bl_piece *p = i < s->nr_pieces ? &s->piece[i] : NULL;

		if (p) {
			p->old = bl_alloc(p->bytes);
			if (!p->old) {
				err = -ENOMEM;
				break;
			}
		}
		s->pending++;
		err = p ? bl_read(run, p->member, p->member_lba, p->old,
				  p->bytes, bl_stripe_cmd_done, s) :
			  bl_read(run, s->parity_member, p_lba, s->parity,
				  s->p_len, bl_stripe_cmd_done, s);
		if (err)
			s->pending--;
	}
	if (err)
		bl_fail(run, err);
	if (!--s->pending)
		bl_stripe_step(s);
}

void tpt_baseline_start(struct tpt_req *r)
{
	unsigned int n = r->last_stripe - r->first_stripe + 1, i;
	uint64_t bytes = (uint64_t)r->blocks * r->array->block_size;
	struct bl_run *run;

	run = calloc(1, sizeof(*run) + n * sizeof(run->stripe[0]));
	if (!run) {
		tpt_ctl_finish(r, -ENOMEM);
		return;
	}
	run->r = r;
	run->nr_stripes = n;
	for (i = 0; i < n; i++) {
		run->stripe[i].run = run;
		bl_layout_stripe(r, &run->stripe[i], r->first_stripe + i);
	}
	if (!r->write) {
		run->delta.reads = 1;
		run->delta.host_bytes_out = bytes;
		bl_start_read(run);
		return;
	}
	run->delta.writes = 1;
	run->delta.host_bytes_in = bytes;
	run->pending = n + 1;
	for (i = 0; i < n; i++)
		bl_stripe_start(&run->stripe[i]);
	if (!--run->pending)
		bl_run_end(run);
}
