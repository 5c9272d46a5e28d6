/*
 * Switching an sbc LU into TPT mode, from tgtadm:
 *
 *   tgtadm --lld iscsi --mode logicalunit --op update --tid 1 --lun 1 \
 *          --params tpt_dm=127.0.0.1:4000,tpt=on
 *
 * Parameters (docs/target.md has the full list):
 *   tpt=on|off             execute the TPT command set on this LU
 *   tpt_dm=ADDR:PORT       where this tgtd's datamover listens (once per
 *                          process, before the first tpt=on)
 *   tpt_pool_mb=N          datamover buffer pool, MiB (default 128)
 *   tpt_group_timeout=N    seconds an idle request keeps its buffers (30)
 *   tpt_xfer_timeout=N     seconds a datamover link may move nothing while
 *                          transfers wait on it (10), for the process
 *   tpt_plain_io=refuse|read|allow
 *                          plain SBC commands from nexuses without the
 *                          key of the array the LU belongs to (plain_io.c)
 *   tpt_session_slot_mb=N, tpt_session_pool_mb=N, tpt_session_mb=N,
 *   tpt_group_mb=N, tpt_session_groups=N, tpt_groups_max=N
 *                          bounds on what a nexus, a group and the
 *                          process may keep (bounds.c), for the process
 *
 * TPT mode replaces entries of the LU's own copy of the sbc opcode table, so
 * ordinary SBC commands keep working and other LUs are untouched.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include <nettle/memops.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "parser.h"
#include "scsi.h"
#include "spc.h"
#include "tpt.h"
#include "disk_io.h"
#include "util.h"
#include "tpt_target.h"

#define TPT_DEFAULT_GROUP_TIMEOUT 30

static LIST_HEAD(tpt_lus);

/* Vendor opcodes plus the SBC ones the TPT command set reuses. */
static const uint8_t tpt_opcodes[] = {
	TPT_OP_XDWRITE_10,
	TPT_OP_SET_PEER_LIST,
	TPT_OP_REPORT_SLOTS,
	TPT_OP_RELEASE,
	TPT_OP_PREP_READ,
	TPT_OP_PREP_WRITE,
	TPT_OP_READ_NEW_BLOCK,
	TPT_OP_XDWRITE_16,
	TPT_OP_READ_PARITY_PART_TMP,
	TPT_OP_READ_PARITY_PART_BLOCK,
	TPT_OP_READ_PARITY_COMP_TMP,
	TPT_OP_READ_PARITY_COMP_BLOCK,
	TPT_OP_WRITE_NEW_DATA,
	TPT_OP_REPORT_ENDPOINT,
	TPT_OP_READ_MEDIUM,
	TPT_OP_SEND_RESULT,
};

struct tpt_lu *tpt_lu_of(const struct scsi_lu *lu)
{
	struct tpt_lu *tlu;

	list_for_each_entry(tlu, &tpt_lus, link)
		if (tlu->lu == lu)
			return tlu;
	return NULL;
}

uint32_t tpt_lu_block_size(const struct tpt_lu *tlu)
{
	return 1U << tlu->lu->blk_shift;
}

uint64_t tpt_lu_nr_blocks(const struct tpt_lu *tlu)
{
	return tlu->lu->size >> tlu->lu->blk_shift;
}

int tpt_lu_fd(const struct tpt_lu *tlu)
{
	return tlu->lu->fd;
}

enum tpt_inline_read_how tpt_lu_read_inline(const struct tpt_lu *tlu)
{
	return tlu->read_inline;
}

bool tpt_lu_serves(const struct tpt_lu *tlu, const struct tpt_session *s)
{
	if (!tlu->bound)
		return true;
	return s->peers && !s->superseded && !tlu->key_pending &&
	       s->peers->array_id == tlu->array_id &&
	       memeql_sec(s->peers->array_key, tlu->array_key,
			  sizeof(tlu->array_key));
}

void tpt_lu_unbind(struct tpt_lu *tlu, const struct tpt_session *by)
{
	if (!tlu->bound)
		return;
	eprintf("tpt: LU %" PRIu64 " of target %d unbound from array %" PRIx64
		" by nexus %" PRIu64 "\n", tlu->lu->lun, by->tid,
		tlu->array_id, by->itn_id);
	tlu->bound = false;
	tlu->key_pending = false;
	tlu->array_id = 0;
	memset(tlu->array_key, 0, sizeof(tlu->array_key));
}

/*
 * The target's machinery starts with its first LU in TPT mode: the
 * process's datamover, the disk workers and the hold-time sweep.  A tgtd
 * that only controls arrays runs none of it but the datamover.
 */
static tgtadm_err tpt_target_start(void)
{
	static bool started;
	int err;

	if (started)
		return TGTADM_SUCCESS;
	if (!tpt_datamover_addr()[0]) {
		eprintf("tpt=on needs tpt_dm=ADDR:PORT first\n");
		return TGTADM_INVALID_REQUEST;
	}
	err = tpt_io_start();
	if (err) {
		eprintf("tpt: cannot start disk I/O workers: %s\n", strerror(-err));
		return TGTADM_UNKNOWN_ERR;
	}
	tpt_datamover_register(&tpt_target_dm_user);
	if (tpt_datamover_open())
		return TGTADM_UNKNOWN_ERR;
	tpt_group_timeouts_start();
	tpt_links_watch_start();
	started = true;
	return TGTADM_SUCCESS;
}

static tgtadm_err tpt_lu_enable(struct scsi_lu *lu)
{
	struct tpt_lu *tlu;
	tgtadm_err err;
	size_t i;

	if (tpt_lu_of(lu))
		return TGTADM_SUCCESS;
	err = tpt_target_start();
	if (err)
		return err;
	tlu = calloc(1, sizeof(*tlu));
	if (!tlu)
		return TGTADM_NOMEM;
	tlu->lu = lu;
	tlu->group_timeout = TPT_DEFAULT_GROUP_TIMEOUT;
	tlu->read_inline = tpt_inline_read_how(lu->fd, lu->bsoflags);
	list_add_tail(&tlu->link, &tpt_lus);
	for (i = 0; i < sizeof(tpt_opcodes); i++) {
		struct device_type_operations *op =
			&lu->dev_type_template.ops[tpt_opcodes[i]];

		/*
		 * Backing stores with an opcode map (rdwr, aio) pass only
		 * the opcodes they list to the device type.  The map is
		 * shared by every LU of that store; adding ours is harmless
		 * to LUs not in TPT mode, whose sbc table still answers
		 * these opcodes with INVALID COMMAND OPERATION CODE.
		 */
		if (test_bit(TEST_UNIT_READY, lu->bst->bs_supported_ops))
			set_bit(tpt_opcodes[i], lu->bst->bs_supported_ops);

		op->cmd_perform = tpt_cmd_perform;
		op->service_actions = NULL;
		/* Data reaches the medium only through WRITE NEW DATA, but
		 * every TPT command belongs to a write or read of the array,
		 * so reservations apply to them like to WRITE and READ.  Not
		 * to the two a controller sends to claim the LU before it
		 * reserves it (its restarted self finds its old nexus holding
		 * the reservation): they touch no data, and the peer list is
		 * refused without the array's key anyway. */
		if (tpt_opcodes[i] == TPT_OP_SET_PEER_LIST ||
		    tpt_opcodes[i] == TPT_OP_REPORT_ENDPOINT)
			op->pr_conflict_bits = 0;
		else
			op->pr_conflict_bits = PR_WE_FA | PR_EA_FA | PR_WE_FN |
					       PR_EA_FN;
	}
	tpt_plain_io_attach(tlu, tpt_opcodes, sizeof(tpt_opcodes));
	tpt_lu_bind_from_superblock(tlu);
	return TGTADM_SUCCESS;
}

/*
 * tpt=off of a LU still bound is how a box whose controller is gone is
 * freed (docs/target.md): the persistent reservation that controller held
 * goes with the binding, or it would keep any other array's controller
 * out until tgtd restarts.  Only controllers register on a bound LU.
 */
static void tpt_lu_drop_fence(struct tpt_lu *tlu)
{
	struct scsi_lu *lu = tlu->lu;
	struct registration *reg, *next;

	list_for_each_entry_safe(reg, next, &lu->registration_list,
				 registration_siblings) {
		list_del(&reg->registration_siblings);
		free(reg);
	}
	lu->pr_holder = NULL;
	lu->prgeneration++;
	eprintf("tpt: LU %" PRIu64 " freed from array %016" PRIx64 " (tpt=off): "
		"its reservation and registrations cleared\n", lu->lun,
		tlu->array_id);
}

static void tpt_lu_disable(struct scsi_lu *lu)
{
	struct tpt_lu *tlu = tpt_lu_of(lu);
	size_t i;

	if (!tlu)
		return;
	if (tlu->bound)
		tpt_lu_drop_fence(tlu);
	tpt_plain_io_detach(tlu);
	for (i = 0; i < sizeof(tpt_opcodes); i++) {
		lu->dev_type_template.ops[tpt_opcodes[i]].cmd_perform =
			spc_illegal_op;
		lu->dev_type_template.ops[tpt_opcodes[i]].pr_conflict_bits = 0;
	}
	/* Every session's requests on this LU end with it. */
	tpt_session_release_groups(NULL, tlu, TPT_RELEASE_COMMAND);
	list_del(&tlu->link);
	free(tlu);
}

static int parse_uint(const char *s, unsigned int min, unsigned int max,
		      unsigned int *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* The bounds of bounds.c, each a key of its own. */
static const struct {
	const char *key;
	unsigned int *value;
	unsigned int min, max;
} bound_params[] = {
	{ "tpt_session_slot_mb", &tpt_bounds.session_slot_mb, 1,
	  TPT_SLOT_BYTES_MAX >> 20 },
	{ "tpt_session_pool_mb", &tpt_bounds.session_pool_mb, 1, 65536 },
	{ "tpt_session_mb", &tpt_bounds.session_mb, 1, 1 << 20 },
	{ "tpt_group_mb", &tpt_bounds.group_mb, 1, 1 << 20 },
	{ "tpt_session_groups", &tpt_bounds.session_groups, 1, 1 << 20 },
	{ "tpt_groups_max", &tpt_bounds.groups_max, 1, 1 << 24 },
};

static tgtadm_err tpt_bound_param(const char *p, const char *value)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bound_params); i++) {
		if (strcmp(p, bound_params[i].key))
			continue;
		if (parse_uint(value, bound_params[i].min, bound_params[i].max,
			       bound_params[i].value)) {
			eprintf("%s=%s: expected %u..%u\n", p, value,
				bound_params[i].min, bound_params[i].max);
			return TGTADM_INVALID_REQUEST;
		}
		return TGTADM_SUCCESS;
	}
	return TGTADM_UNKNOWN_PARAM;
}

/* One "key=value" of --params that spc did not know. */
tgtadm_err tpt_target_param(struct scsi_lu *lu, const char *p,
			    const char *value)
{
	struct tpt_lu *tlu;
	unsigned int n;

	if (!strcmp(p, "tpt")) {
		if (!strcmp(value, "on"))
			return tpt_lu_enable(lu);
		if (!strcmp(value, "off")) {
			tlu = tpt_lu_of(lu);
			if (tlu && tpt_lu_busy(tlu)) {
				eprintf("tpt=off: TPT commands are executing\n");
				return TGTADM_LUN_ACTIVE;
			}
			tpt_lu_disable(lu);
			return TGTADM_SUCCESS;
		}
		eprintf("tpt=%s: expected on or off\n", value);
		return TGTADM_INVALID_REQUEST;
	}
	if (!strcmp(p, "tpt_dm"))
		return tpt_datamover_set_portal(value) ?
			TGTADM_INVALID_REQUEST : TGTADM_SUCCESS;
	if (!strcmp(p, "tpt_pool_mb")) {
		if (parse_uint(value, 8, 65536, &n)) {
			eprintf("tpt_pool_mb=%s: expected 8..65536\n", value);
			return TGTADM_INVALID_REQUEST;
		}
		return tpt_datamover_set_pool_mb(n) ? TGTADM_INVALID_REQUEST :
						      TGTADM_SUCCESS;
	}
	if (!strcmp(p, "tpt_group_timeout")) {
		tlu = tpt_lu_of(lu);
		if (!tlu || parse_uint(value, 1, 3600, &n)) {
			eprintf("tpt_group_timeout=%s: expected 1..3600 seconds "
				"on a LU with tpt=on\n", value);
			return TGTADM_INVALID_REQUEST;
		}
		tlu->group_timeout = n;
		return TGTADM_SUCCESS;
	}
	if (!strcmp(p, "tpt_xfer_timeout")) {
		if (parse_uint(value, 1, 3600, &n)) {
			eprintf("tpt_xfer_timeout=%s: expected 1..3600 "
				"seconds\n", value);
			return TGTADM_INVALID_REQUEST;
		}
		tpt_links_set_xfer_timeout(n);
		return TGTADM_SUCCESS;
	}
	if (!strcmp(p, "tpt_plain_io")) {
		tlu = tpt_lu_of(lu);
		if (!tlu || tpt_plain_io_parse(value, &tlu->plain_io)) {
			eprintf("tpt_plain_io=%s: expected refuse, read or allow "
				"on a LU with tpt=on\n", value);
			return TGTADM_INVALID_REQUEST;
		}
		return TGTADM_SUCCESS;
	}
	return tpt_bound_param(p, value);
}

/* Process-wide, under every LU in TPT mode: the bounds, what is in use
 * against them, the most one nexus has used, and the refusals. */
static void tpt_bounds_show(struct concat_buf *b)
{
	const struct tpt_bound_use *u = &tpt_bound_use;

	concat_printf(b, TPT_SHOW_INDENT "TPT bounds: session_slot_mb %u "
		      "session_pool_mb %u session_mb %u group_mb %u "
		      "session_groups %u groups_max %u slot_mb %llu\n",
		      tpt_bounds.session_slot_mb,
		      tpt_bound_session_pool_bufs() * (TPT_PRIVATE_PIECE >> 20),
		      tpt_bounds.session_mb, tpt_bounds.group_mb,
		      tpt_bounds.session_groups, tpt_bounds.groups_max,
		      TPT_SLOT_BYTES_MAX >> 20);
	concat_printf(b, TPT_SHOW_INDENT "TPT in use: groups %u pool_buffers %u "
		      "buffered_mb %u slot_bytes %" PRIu64 "\n", u->groups,
		      u->pool_bufs, u->held_pieces * (TPT_PRIVATE_PIECE >> 20),
		      u->slot_bytes);
	concat_printf(b, TPT_SHOW_INDENT "TPT peak per nexus: groups %u "
		      "pool_buffers %u buffered_mb %u\n", u->peak_session_groups,
		      u->peak_session_pool_bufs,
		      u->peak_session_held_pieces * (TPT_PRIVATE_PIECE >> 20));
	concat_printf(b, TPT_SHOW_INDENT "TPT refused: session_slots %" PRIu64
		      " session_pool %" PRIu64 " session_buffered %" PRIu64
		      " group_buffered %" PRIu64 " session_groups %" PRIu64
		      " groups %" PRIu64 "\n",
		      u->refused[TPT_BOUND_SESSION_SLOTS],
		      u->refused[TPT_BOUND_SESSION_POOL],
		      u->refused[TPT_BOUND_SESSION_HELD],
		      u->refused[TPT_BOUND_GROUP_HELD],
		      u->refused[TPT_BOUND_SESSION_GROUPS],
		      u->refused[TPT_BOUND_GROUPS]);
}

void tpt_target_show(struct scsi_lu *lu, struct concat_buf *b)
{
	struct tpt_lu *tlu = tpt_lu_of(lu);
	const struct tpt_lu_stats *st;
	uint64_t cmds = 0;
	unsigned int i;

	if (!tlu)
		return;
	st = &tlu->stats;
	for (i = 0; i < 256; i++)
		cmds += st->cmds[i];
	concat_printf(b, TPT_SHOW_INDENT "TPT mode: on\n");
	concat_printf(b, TPT_SHOW_INDENT "TPT datamover: %s %s:%u\n",
		      tpt_dm_provider_name(tpt_datamover()),
		      tpt_datamover_addr(), tpt_dm_listen_port(tpt_datamover()));
	concat_printf(b, TPT_SHOW_INDENT "TPT group timeout: %u s\n",
		      tlu->group_timeout);
	concat_printf(b, TPT_SHOW_INDENT "TPT transfer timeout: %u s\n",
		      tpt_links_xfer_timeout());
	if (tlu->bound)
		concat_printf(b, TPT_SHOW_INDENT "TPT array: %016" PRIx64 "%s\n",
			      tlu->array_id, tlu->key_pending ?
			      " (from its superblock, waiting for the key)" : "");
	else
		concat_printf(b, TPT_SHOW_INDENT "TPT array: none\n");
	concat_printf(b, TPT_SHOW_INDENT "TPT plain I/O: %s, refused %" PRIu64
		      "\n", tpt_plain_io_name(tlu->plain_io),
		      st->plain_refused);
	concat_printf(b, TPT_SHOW_INDENT "TPT counters: commands %" PRIu64
		      " check_conditions %" PRIu64 " disk_read %" PRIu64
		      " disk_written %" PRIu64 " xored %" PRIu64 "\n", cmds,
		      st->check_conditions, st->bytes_read_disk,
		      st->bytes_written_disk, st->bytes_xored);
	concat_printf(b, TPT_SHOW_INDENT "TPT requests released: done %" PRIu64
		      " release %" PRIu64 " abort %" PRIu64 " timeout %" PRIu64
		      " nexus_loss %" PRIu64 "\n",
		      st->groups_released[TPT_RELEASE_DONE],
		      st->groups_released[TPT_RELEASE_COMMAND],
		      st->groups_released[TPT_RELEASE_TASK_MGMT],
		      st->groups_released[TPT_RELEASE_TIMEOUT],
		      st->groups_released[TPT_RELEASE_NEXUS_LOSS]);
	tpt_bounds_show(b);
}

void tpt_sbc_lu_exit(struct scsi_lu *lu)
{
	tpt_lu_disable(lu);
	tpt_lu_forget(lu);
	spc_lu_exit(lu);
}
