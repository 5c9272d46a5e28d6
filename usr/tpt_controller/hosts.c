/*
 * Extended hosts (paper III-B, III-C; docs/protocol.md 4.14, 4.19, 7.6):
 * a host that registered a key with TPT HOST KEY has its requests' data
 * moved by the targets, straight between its own registered memory and
 * theirs, while the controller only plans.
 *
 *   TPT HOST KEY     registers the host for its I_T nexus: a role-host
 *                    entry in the next generation of the peer list, whose
 *                    AUTH TOKEN is the host's key; GOOD once every member
 *                    online has the list (the mode's hosts_changed).
 *   TPT HOST READ    READ(16) and WRITE(16) whose data-out names the
 *   TPT HOST WRITE   host's buffer (STag, address) instead of carrying
 *                    data: checked here on the event loop, then run on
 *                    the backing store's workers like every other I/O,
 *                    so stripe locks, COMPARE AND WRITE's exclusion and
 *                    durability are shared with unmodified hosts.
 *
 * A registration lives as long as its I_T nexus: when the session ends,
 * the next generation leaves the host out and the targets drop their
 * connections to it (III-B step 3).  Only modes that let targets move a
 * host's data (TPT) offer the three opcodes; on any other LU they stay
 * INVALID COMMAND OPERATION CODE, from which an extended host learns to
 * fall back to plain READ and WRITE.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "scsi.h"
#include "target.h"
#include "tpt_datamover.h"
#include "tpt_controller.h"

/* Arrays that serve extended hosts, for the nexus-loss hook. */
static LIST_HEAD(host_arrays);

static const uint8_t host_opcodes[] = {
	TPT_OP_HOST_KEY, TPT_OP_HOST_READ, TPT_OP_HOST_WRITE,
};

/* CHECK CONDITION with our sense for @reason. */
static int host_sense(struct scsi_cmd *cmd, enum tpt_sense_reason reason,
		      const struct tpt_sense_info *info)
{
	int len = tpt_sense_build(cmd->sense_buffer, sizeof(cmd->sense_buffer),
				  reason, info);

	cmd->sense_len = len > 0 ? len : 0;
	return SAM_STAT_CHECK_CONDITION;
}

static int host_bad_field(struct scsi_cmd *cmd, enum tpt_sense_reason reason,
			  const struct tpt_field_ptr *where)
{
	struct tpt_sense_info info = { .field = *where };

	return host_sense(cmd, reason, where->valid ? &info : NULL);
}

static struct tpt_host *host_find(struct tpt_array *a, int tid,
				  uint64_t itn_id)
{
	struct tpt_host *h;

	list_for_each_entry(h, &a->hosts, link)
		if (h->tid == tid && h->itn_id == itn_id)
			return h;
	return NULL;
}

/* A peer id no host of @a has, from a counter: an id is not handed out
 * again soon, so a late transfer for a host that left does not name the
 * next one (it would fail anyway: its key and STags are others). */
static uint16_t host_new_id(struct tpt_array *a)
{
	struct tpt_host *h;
	uint16_t id;
	bool taken;

	/* At most TPT_MAX_HOSTS of the range's ids are taken. */
	do {
		if (a->next_host_id < TPT_HOST_PEER_ID_FIRST ||
		    a->next_host_id > TPT_PEER_ID_MAX)
			a->next_host_id = TPT_HOST_PEER_ID_FIRST;
		id = a->next_host_id++;
		taken = false;
		list_for_each_entry(h, &a->hosts, link)
			taken |= h->peer_id == id;
	} while (taken);
	return id;
}

/* In ascending peer id order, as peer lists want them. */
static void host_insert(struct tpt_array *a, struct tpt_host *nh)
{
	struct tpt_host *h;

	list_for_each_entry(h, &a->hosts, link) {
		if (h->peer_id > nh->peer_id) {
			list_add_tail(&nh->link, &h->link);
			return;
		}
	}
	list_add_tail(&nh->link, &a->hosts);
}

static void host_remove(struct tpt_array *a, struct tpt_host *h)
{
	list_del(&h->link);
	a->nr_hosts--;
	memset(h->key, 0, sizeof(h->key));
	free(h);
}

/* ---- TPT HOST KEY ---- */

struct host_key_cmd {
	struct scsi_cmd *cmd;
	struct tpt_array *array;
	int tid;
	uint64_t itn_id;
};

static void host_lists_sent(void *arg, int err)
{
	struct host_key_cmd *hk = arg;
	struct scsi_cmd *cmd = hk->cmd;
	int result = SAM_STAT_GOOD;

	if (err) {
		struct tpt_host *h = host_find(hk->array, hk->tid, hk->itn_id);

		eprintf("tptraid: host key of I_T nexus %" PRIu64 " refused: "
			"the peer list naming it could not go out: %s\n",
			hk->itn_id, strerror(-err));
		if (h)
			host_remove(hk->array, h);
		result = host_sense(cmd, TPT_SENSE_INTERNAL_FAILURE, NULL);
	}
	free(hk);
	target_cmd_io_done(cmd, result);
}

static int host_key_perform(struct tpt_array *a, struct scsi_cmd *cmd,
			    const struct tpt_cdb *cdb)
{
	uint32_t len = scsi_get_out_length(cmd);
	struct tpt_field_ptr where;
	struct host_key_cmd *hk;
	struct tpt_host_key key;
	enum tpt_sense_reason r;
	struct tpt_host *h;
	int tid = cmd->c_target->tid;

	if (scsi_get_data_dir(cmd) != DATA_WRITE || len != cdb->param_len)
		return host_sense(cmd, TPT_SENSE_PARAM_LIST_LENGTH, NULL);
	r = tpt_host_key_decode(scsi_get_out_buffer(cmd), len, &key, &where);
	if (r)
		return host_bad_field(cmd, r, &where);
	if (!a->assembled)
		return host_sense(cmd, TPT_SENSE_PEER_LIST_MISSING, NULL);
	hk = calloc(1, sizeof(*hk));
	if (!hk)
		return host_sense(cmd, TPT_SENSE_POOL_EXHAUSTED, NULL);
	h = host_find(a, tid, cmd->cmd_itn_id);
	if (!h) {
		if (a->nr_hosts >= TPT_MAX_HOSTS ||
		    !(h = calloc(1, sizeof(*h)))) {
			free(hk);
			if (a->nr_hosts >= TPT_MAX_HOSTS)
				eprintf("tptraid: host key refused: the array "
					"serves %u extended hosts already\n",
					a->nr_hosts);
			return host_sense(cmd, TPT_SENSE_POOL_EXHAUSTED, NULL);
		}
		h->tid = tid;
		h->itn_id = cmd->cmd_itn_id;
		h->peer_id = host_new_id(a);
		host_insert(a, h);
		a->nr_hosts++;
	}
	/* A second key replaces the first: the targets drop the links
	 * made under the old one when the new generation arrives. */
	h->ep = key.ep;
	memcpy(h->key, key.key, sizeof(h->key));
	memset(&key, 0, sizeof(key));
	hk->cmd = cmd;
	hk->array = a;
	hk->tid = tid;
	hk->itn_id = cmd->cmd_itn_id;
	set_cmd_async(cmd);
	a->mode->hosts_changed(a, host_lists_sent, hk);
	return SAM_STAT_GOOD;
}

/* ---- TPT HOST READ / WRITE ---- */

/*
 * Where a host command's transfer list is decoded: one per thread, used
 * by one call at a time.  A list is 8 KiB, and a malloc that large per
 * command made glibc consolidate its free lists each time (perf: about a
 * seventh of the controller's CPU on random 4 KiB reads).
 */
static _Thread_local struct tpt_xfer_list host_list;

/* Decode and check a host I/O command: TPT_SENSE_NONE with @cdb and
 * @xl filled, or the reason and its field. */
static enum tpt_sense_reason host_io_decode(struct tpt_array *a,
					    struct scsi_cmd *cmd,
					    struct tpt_cdb *cdb,
					    struct tpt_xfer_list *xl,
					    struct tpt_field_ptr *where)
{
	struct scsi_lu *lu = cmd->dev;
	enum tpt_sense_reason r;
	uint32_t len = scsi_get_out_length(cmd);

	r = tpt_cdb_decode(cmd->scb, cmd->scb_len, cdb, where);
	if (r)
		return r;
	r = tpt_cdb_check_capacity(cdb, lu->size >> lu->blk_shift);
	if (r)
		return r;
	if (scsi_get_data_dir(cmd) != DATA_WRITE)
		return TPT_SENSE_PARAM_LIST_LENGTH;
	r = tpt_xfer_list_decode(scsi_get_out_buffer(cmd), len, xl, where);
	if (!r)
		r = tpt_xfer_list_check(xl, cdb, a->block_size, where);
	if (r)
		return r;
	/* Both ends of a connection use one provider, and the targets use
	 * ours: its way of addressing memory is the only one they take. */
	if (!!(xl->desc[0].flags & TPT_XFER_VIRT_ADDR) !=
	    tpt_dm_virt_addr(tpt_datamover())) {
		where->valid = true;
		where->in_cdb = false;
		where->byte = TPT_XFER_HDR_LEN + 2;
		where->bit_valid = true;
		where->bit = 0;
		return TPT_SENSE_INVALID_PARAM_FIELD;
	}
	return TPT_SENSE_NONE;
}

static int host_io_perform(struct tpt_array *a, struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->dev;
	struct tpt_field_ptr where = { 0 };
	enum tpt_sense_reason r;
	struct tpt_cdb cdb;

	r = host_io_decode(a, cmd, &cdb, &host_list, &where);
	if (r)
		return host_bad_field(cmd, r, &where);
	if (device_reserved(cmd))
		return SAM_STAT_RESERVATION_CONFLICT;
	if (cdb.opcode == TPT_OP_HOST_WRITE &&
	    (lu->attrs.readonly || lu->attrs.swp)) {
		sense_data_build(cmd, DATA_PROTECT, ASC_WRITE_PROTECT);
		return SAM_STAT_CHECK_CONDITION;
	}
	if (!host_find(a, cmd->c_target->tid, cmd->cmd_itn_id))
		return host_sense(cmd, TPT_SENSE_HOST_KEY_MISSING, NULL);
	if (lu->bst->bs_cmd_submit(cmd)) {
		sense_data_build(cmd, HARDWARE_ERROR, ASC_INTERNAL_TGT_FAILURE);
		return SAM_STAT_CHECK_CONDITION;
	}
	return SAM_STAT_GOOD;
}

static int host_cmd_perform(int host_no, struct scsi_cmd *cmd)
{
	struct tpt_array *a = tptraid_array_of(cmd->dev);
	struct tpt_field_ptr where;
	enum tpt_sense_reason r;
	struct tpt_cdb cdb;

	(void)host_no;
	if (!a)
		return host_sense(cmd, TPT_SENSE_INVALID_OPCODE, NULL);
	if (cmd->scb[0] != TPT_OP_HOST_KEY)
		return host_io_perform(a, cmd);
	r = tpt_cdb_decode(cmd->scb, cmd->scb_len, &cdb, &where);
	if (r)
		return host_bad_field(cmd, r, &where);
	return host_key_perform(a, cmd, &cdb);
}

int tpt_hosts_io_req(struct tpt_array *a, struct scsi_cmd *cmd,
		     struct tpt_req *r, struct tpt_host_buf *hb)
{
	struct tpt_xfer_list *xl = &host_list;
	struct tpt_field_ptr where;
	struct tpt_cdb cdb;
	unsigned int i;

	/* Checked on the event loop already: it cannot fail here. */
	if (host_io_decode(a, cmd, &cdb, xl, &where)) {
		scsi_set_result(cmd, host_sense(cmd, TPT_SENSE_INTERNAL_FAILURE,
						NULL));
		return -1;
	}
	memset(hb, 0, sizeof(*hb));
	hb->piece = calloc(xl->count, sizeof(*hb->piece));
	if (!hb->piece) {
		scsi_set_result(cmd, host_sense(cmd, TPT_SENSE_INTERNAL_FAILURE,
						NULL));
		return -1;
	}
	hb->tid = cmd->c_target->tid;
	hb->itn_id = cmd->cmd_itn_id;
	hb->flags = xl->desc[0].flags;
	hb->nr_pieces = xl->count;
	for (i = 0; i < xl->count; i++) {
		hb->piece[i].stag = xl->desc[i].stag;
		hb->piece[i].rma_addr = xl->desc[i].offset;
		hb->piece[i].length = xl->desc[i].length;
	}
	r->kind = cdb.opcode == TPT_OP_HOST_WRITE ? TPT_REQ_WRITE : TPT_REQ_READ;
	r->lba = cdb.lba;
	r->blocks = cdb.transfer_length;
	r->buf = NULL;
	r->direct = hb;
	r->fua = cdb.flags & TPT_CDB_FUA;
	return 0;
}

void tpt_hosts_io_answer(struct scsi_cmd *cmd, const struct tpt_req *r)
{
	struct tpt_sense_info info = { .info_valid = true,
				       .information = TPT_PEER_ID_INITIATOR };
	int err = r->result;

	free(r->direct->piece);
	r->direct->piece = NULL;
	if (!err) {
		scsi_set_result(cmd, SAM_STAT_GOOD);
	} else if (err == -ENOKEY) {
		scsi_set_result(cmd, host_sense(cmd,
				TPT_SENSE_HOST_KEY_MISSING, NULL));
	} else if (err == -ECOMM && r->direct->fault) {
		/* The host's own datamover failed the targets. */
		scsi_set_result(cmd, host_sense(cmd, r->direct->fault, &info));
	} else if (r->kind == TPT_REQ_READ) {
		/* What READ(16) reports, the first block not read included. */
		tptraid_read_error(cmd, r);
	} else {
		/* What WRITE(16) reports when the array cannot (the data-out
		 * is the list, whatever the data's direction). */
		tptraid_io_error(cmd, err, true);
	}
}

void tpt_hosts_io(struct tpt_array *a, struct scsi_cmd *cmd)
{
	struct tpt_host_buf hb;
	struct tpt_req r;

	if (tpt_hosts_io_req(a, cmd, &r, &hb))
		return;
	tpt_array_io_direct(a, &r);
	tpt_hosts_io_answer(cmd, &r);
}

int tpt_hosts_resolve(struct tpt_array *a, struct tpt_host_buf *hb)
{
	struct tpt_host *h = host_find(a, hb->tid, hb->itn_id);

	if (!h)
		return -ENOKEY;
	hb->peer_id = h->peer_id;
	return 0;
}

/* ---- life cycle ---- */

void tpt_hosts_attach(struct tpt_array *a)
{
	struct scsi_lu *lu = a->lu;
	size_t i;

	if (!a->mode->hosts_changed)
		return;
	for (i = 0; i < sizeof(host_opcodes); i++) {
		struct device_type_operations *op =
			&lu->dev_type_template.ops[host_opcodes[i]];

		op->cmd_perform = host_cmd_perform;
		op->service_actions = NULL;
		/* TPT HOST READ and WRITE are READ and WRITE: device_reserved()
		 * judges them by these, as sbc does its own. */
		op->pr_conflict_bits = host_opcodes[i] == TPT_OP_HOST_KEY ? 0 :
				       host_opcodes[i] == TPT_OP_HOST_READ ?
				       PR_EA_FA | PR_EA_FN :
				       PR_WE_FA | PR_EA_FA | PR_WE_FN | PR_EA_FN;
	}
	list_add_tail(&a->hosts_link, &host_arrays);
}

static void hosts_lists_after_loss(void *arg, int err)
{
	(void)arg;
	if (err)
		eprintf("tptraid: cannot tell the members a host left: %s\n",
			strerror(-err));
}

void tptraid_it_nexus_destroy(int tid, uint64_t itn_id)
{
	struct tpt_array *a;

	list_for_each_entry(a, &host_arrays, hosts_link) {
		struct tpt_host *h = host_find(a, tid, itn_id);

		if (!h)
			continue;
		host_remove(a, h);
		a->mode->hosts_changed(a, hosts_lists_after_loss, NULL);
	}
}

void tpt_hosts_detach(struct tpt_array *a)
{
	struct tpt_host *h, *tmp;

	list_for_each_entry_safe(h, tmp, &a->hosts, link)
		host_remove(a, h);
	list_del_init(&a->hosts_link);
}
