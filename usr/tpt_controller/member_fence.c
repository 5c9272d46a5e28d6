/*
 * Fencing members with SPC persistent reservations.
 *
 * On every new session to a member, once the mode has claimed it (a
 * peer list binds a TPT target's LU to the array's key, member_bind.c)
 * and its superblock says it is ours, the controller registers the array's key, preempts the
 * sessions that key had before (its own older nexus: a box that comes
 * back, a controller that restarted) and holds WRITE EXCLUSIVE.  From
 * then on a nexus the controller gave up on, and any other initiator,
 * gets RESERVATION CONFLICT for writes and for every TPT command (the
 * target applies reservations to them, usr/tpt_target/lu.c).  A clean
 * stop gives the reservation up, so the box can serve another array; a
 * box another array's controller still holds is refused.
 *
 * The key is the array id: stable across controller restarts, different
 * between arrays.  It is no secret (PERSISTENT RESERVE IN shows it to
 * anyone): this fences a controller's own past.  Strangers are kept out
 * by CHAP and, on a member that is a TPT target (in either mode), by the
 * LU's binding, which refuses them every plain command that touches data
 * or reservations (usr/tpt_target/plain_io.c, member_bind.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "util.h"
#include "tpt_controller.h"

#define PR_OUT_OPCODE 0x5f
#define PR_PARAM_LEN 24
#define PR_TYPE_WRITE_EXCLUSIVE 0x1

enum pr_action {
	PR_REGISTER = 0x00,
	PR_RESERVE = 0x01,
	PR_PREEMPT = 0x04,
	PR_REGISTER_AND_IGNORE = 0x06,
};

/* The steps of taking a member, in order. */
static const enum pr_action fence_steps[] = {
	PR_REGISTER_AND_IGNORE, PR_PREEMPT, PR_RESERVE,
};

struct fence {
	uint64_t key;
	unsigned int step;
	member_fence_cb done;
	uint8_t param[PR_PARAM_LEN];
};

/* PERSISTENT RESERVE OUT @action: its CDB and parameter list. */
static void pr_out(enum pr_action action, uint64_t key, uint8_t *cdb,
		   uint8_t *param)
{
	memset(cdb, 0, 16);
	memset(param, 0, PR_PARAM_LEN);
	cdb[0] = PR_OUT_OPCODE;
	cdb[1] = action;
	/* Scope LU; the type counts for RESERVE and PREEMPT only. */
	if (action == PR_RESERVE || action == PR_PREEMPT)
		cdb[2] = PR_TYPE_WRITE_EXCLUSIVE;
	cdb[8] = PR_PARAM_LEN;
	switch (action) {
	case PR_REGISTER_AND_IGNORE:
		put_unaligned_be64(key, param + 8);	/* the new key */
		break;
	case PR_PREEMPT:
		put_unaligned_be64(key, param);
		put_unaligned_be64(key, param + 8);	/* whose sessions go */
		break;
	case PR_RESERVE:
		put_unaligned_be64(key, param);
		break;
	case PR_REGISTER:
		put_unaligned_be64(key, param);		/* to key 0: unregister */
		break;
	}
}

static void fence_step(struct tpt_member *m, struct fence *f);

static void fence_step_done(struct tpt_member *m, struct scsi_task *task,
			    int status, void *arg)
{
	struct fence *f = arg;
	member_fence_cb done = f->done;

	(void)task;
	if (status != SCSI_STATUS_GOOD) {
		free(f);
		if (status == SCSI_STATUS_RESERVATION_CONFLICT)
			eprintf("tptraid: member %u (%s) is reserved by another "
				"initiator (another array's controller?): "
				"refused\n", m->id, m->url);
		done(m, status == SCSI_STATUS_CANCELLED ? -ECANCELED :
			status == SCSI_STATUS_RESERVATION_CONFLICT ?
			-EBUSY : -EIO);
		return;
	}
	if (++f->step < sizeof(fence_steps) / sizeof(fence_steps[0])) {
		fence_step(m, f);
		return;
	}
	free(f);
	done(m, 0);
}

static void fence_step(struct tpt_member *m, struct fence *f)
{
	uint8_t cdb[16];
	int err;

	pr_out(fence_steps[f->step], f->key, cdb, f->param);
	err = member_send_cdb(m, cdb, SCSI_XFER_WRITE, f->param, PR_PARAM_LEN,
			      fence_step_done, f);
	if (err) {
		member_fence_cb done = f->done;

		free(f);
		done(m, err);
	}
}

void member_fence(struct tpt_member *m, uint64_t key, member_fence_cb done)
{
	struct fence *f = calloc(1, sizeof(*f));

	if (!f) {
		done(m, -ENOMEM);
		return;
	}
	f->key = key;
	f->done = done;
	fence_step(m, f);
}

void member_unfence_sync(struct tpt_member *m, uint64_t key)
{
	uint8_t cdb[16], param[PR_PARAM_LEN];
	struct iscsi_data data = { .data = param, .size = PR_PARAM_LEN };
	struct scsi_task *task;

	pr_out(PR_REGISTER, key, cdb, param);
	task = scsi_create_task(10, cdb, SCSI_XFER_WRITE, PR_PARAM_LEN);
	if (!task)
		return;
	/* Unregistering the holder releases its reservation (SPC-4). */
	iscsi_scsi_command_sync(m->iscsi, m->lun, task, &data);
	scsi_free_scsi_task(task);
}
