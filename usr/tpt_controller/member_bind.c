/*
 * Binding a member's LU to the array's key, and giving it back
 * (protocol.md 5.5 and 4.12).
 *
 * A bound LU serves its blocks, its reservations and the TPT command set
 * only to a nexus that delivered the array's id and key in a peer list:
 * a stranger who can log in to the box cannot read or write the column
 * of the array's stripes it holds.  TPT mode binds as a side effect of
 * the peer list its targets need anyway (mode_tpt.c).  Baseline mode
 * moves data with plain READ and WRITE and needs no list, yet its members
 * deserve the same protection when they are TPT targets: it sends a list
 * naming the box alone (5.5 asks for no controller entry), which binds the
 * LU and admits no datamover peer.  A box that is not a TPT target (stock
 * tgt, another SCSI target, a LU with tpt=off) answers TPT REPORT ENDPOINT
 * with CHECK CONDITION and stays a plain member, guarded by CHAP and the
 * reservation only, as before.
 *
 * Either way m->keyed says the LU took the key: its superblock then
 * carries the key's check, which binds the LU again when its tgtd
 * restarts, and the array's stop unbinds it.
 */
#include <errno.h>
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
#include "scsi/tpt_cdb.h"
#include "scsi/tpt_sense.h"
#include "tpt_controller.h"

struct member_bind {
	void (*done)(struct tpt_member *m, int err);
	uint8_t *list;		/* the peer list being sent */
};

/* A peer list's generation only has to rise on its nexus; one counter
 * for the process rises on all of them. */
static uint32_t bind_generation;

static void bind_end(struct tpt_member *m, struct member_bind *b, int err)
{
	void (*done)(struct tpt_member *m, int err) = b->done;

	free(b->list);
	free(b);
	done(m, err);
}

static void bind_list_done(struct tpt_member *m, struct scsi_task *task,
			   int status, void *arg)
{
	if (status == SCSI_STATUS_CANCELLED) {
		bind_end(m, arg, -ECANCELED);
		return;
	}
	/* TPT PEER LIST GENERATION OR ARRAY CONFLICT: the LU is another
	 * array's (member_claimed() says so, once). */
	if (status == SCSI_STATUS_CHECK_CONDITION && task &&
	    task->sense.key == SCSI_SENSE_ILLEGAL_REQUEST &&
	    task->sense.ascq == 0x8001) {
		bind_end(m, arg, -EACCES);
		return;
	}
	if (status != SCSI_STATUS_GOOD) {
		eprintf("tptraid: member %u (%s): TPT SET PEER LIST failed: "
			"%s\n", m->id, m->url, member_error(m));
		bind_end(m, arg, -EPROTO);
		return;
	}
	m->keyed = true;
	bind_end(m, arg, 0);
}

/* The list that binds @m's LU to @a: one entry, the box itself. */
static int bind_list(const struct tpt_array *a, const struct tpt_member *m,
		     const struct tpt_endpoint *ep, uint8_t **out)
{
	struct tpt_peer_list *pl = calloc(1, sizeof(*pl));
	struct tpt_peer *self;
	int len = -ENOMEM;

	*out = malloc(TPT_PEER_LIST_LEN(1));
	if (!pl || !*out)
		goto out;
	pl->array_id = a->array_id;
	memcpy(pl->array_key, a->array_key, sizeof(pl->array_key));
	if (!++bind_generation)
		bind_generation = 1;
	pl->generation = bind_generation;
	pl->self_id = (uint16_t)m->id;
	pl->count = 1;
	self = &pl->peer[0];
	self->id = pl->self_id;
	self->role = TPT_ROLE_TARGET;
	self->ep = *ep;
	/* Nobody connects to it on our behalf: a token no one knows. */
	if (getrandom(self->token, sizeof(self->token), 0) !=
	    sizeof(self->token)) {
		len = -EIO;
		goto out;
	}
	self->token[0] |= 1;
	len = tpt_peer_list_encode(pl, *out, TPT_PEER_LIST_LEN(1));
out:
	free(pl);
	if (len < 0) {
		free(*out);
		*out = NULL;
	}
	return len;
}

static void bind_endpoint_done(struct tpt_member *m, struct scsi_task *task,
			       int status, void *arg)
{
	struct member_bind *b = arg;
	struct tpt_endpoint_report r;
	struct tpt_field_ptr where;
	uint8_t cdb[16] = { TPT_OP_SET_PEER_LIST };
	int len;

	if (status == SCSI_STATUS_CANCELLED) {
		bind_end(m, b, -ECANCELED);
		return;
	}
	/* INVALID COMMAND OPERATION CODE, or whatever else a target that
	 * does not know the opcode calls it. */
	if (status == SCSI_STATUS_CHECK_CONDITION && task &&
	    task->sense.key == SCSI_SENSE_ILLEGAL_REQUEST) {
		eprintf("tptraid: member %u (%s) is not a TPT target: it is not "
			"bound to the array (anyone who can log in may read "
			"it; put its LUN in TPT mode, tpt=on, to bind it)\n",
			m->id, m->url);
		bind_end(m, b, 0);
		return;
	}
	if (status != SCSI_STATUS_GOOD ||
	    tpt_endpoint_report_decode(task->datain.data, task->datain.size,
				       &r, &where)) {
		eprintf("tptraid: member %u (%s): TPT REPORT ENDPOINT failed: "
			"%s\n", m->id, m->url, status == SCSI_STATUS_GOOD ?
			"bad endpoint report" : member_error(m));
		bind_end(m, b, -EPROTO);
		return;
	}
	len = bind_list(m->array, m, &r.ep, &b->list);
	if (len < 0) {
		bind_end(m, b, len);
		return;
	}
	tpt_put_be(&cdb[10], len, 4);
	if (member_send_cdb(m, cdb, SCSI_XFER_WRITE, b->list, len,
			    bind_list_done, b))
		bind_end(m, b, -EIO);
}

void member_bind_alone(struct tpt_array *a, struct tpt_member *m,
		       void (*done)(struct tpt_member *m, int err))
{
	uint8_t cdb[16] = { TPT_OP_REPORT_ENDPOINT };
	struct member_bind *b = calloc(1, sizeof(*b));

	(void)a;
	if (!b) {
		done(m, -ENOMEM);
		return;
	}
	b->done = done;
	tpt_put_be(&cdb[10], TPT_ENDPOINT_REPORT_LEN, 4);
	if (member_send_cdb(m, cdb, SCSI_XFER_READ, NULL,
			    TPT_ENDPOINT_REPORT_LEN, bind_endpoint_done, b))
		bind_end(m, b, -EIO);
}

static void unbind_done(struct tpt_member *m, struct scsi_task *task,
			int status, void *arg)
{
	void (*done)(struct tpt_member *m, int err) = arg;

	(void)task;
	if (status != SCSI_STATUS_GOOD && status != SCSI_STATUS_CANCELLED)
		eprintf("tptraid: member %u (%s): giving it back (TPT RELEASE "
			"UNBIND) failed: %s\n", m->id, m->url, member_error(m));
	done(m, 0);
}

void member_unbind(struct tpt_array *a, struct tpt_member *m,
		   void (*done)(struct tpt_member *m, int err))
{
	uint8_t cdb[16] = { TPT_OP_RELEASE, TPT_CDB_RELEASE_ALL |
					    TPT_CDB_RELEASE_UNBIND };

	(void)a;
	m->keyed = false;
	if (member_send_cdb(m, cdb, SCSI_XFER_NONE, NULL, 0, unbind_done,
			    done))
		done(m, 0);
}

void member_unbind_sync(struct tpt_member *m)
{
	uint8_t cdb[16] = { TPT_OP_RELEASE, TPT_CDB_RELEASE_ALL |
					    TPT_CDB_RELEASE_UNBIND };
	struct scsi_task *task;

	if (!m->keyed || m->link != MEMBER_ONLINE)
		return;
	m->keyed = false;
	task = scsi_create_task(16, cdb, SCSI_XFER_NONE, 0);
	if (!task)
		return;
	/* Blocking, as the LU's removal is: a member that stopped answering
	 * holds the stop for seconds, not fail_timeout's multiple (what it
	 * held for us goes with its session anyway). */
	iscsi_set_timeout(m->iscsi, MEMBER_STOP_TIMEOUT);
	iscsi_scsi_command_sync(m->iscsi, m->lun, task, NULL);
	scsi_free_scsi_task(task);
}
