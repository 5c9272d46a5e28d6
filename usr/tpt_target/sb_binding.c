/*
 * A LU's binding to its array across tgtd restarts.
 *
 * The binding (tpt_lu.bound) is made by the first peer list a LU accepts
 * and lives in memory: a tgtd that restarted used to come up with the LU
 * unbound, open to any initiator's plain WRITE and to any array's peer
 * list until its controller was back - a window in which a stranger on the
 * storage network could tear the array's stripes or claim the box.  So
 * the first tpt=on of a LU in this tgtd's life reads the member
 * superblock the array's controller keeps in the LU's last MiB
 * (controller/member_sb.h): one that carries a key check binds the LU to
 * that array at once, with the key still unknown.  Everything the binding
 * guards is then refused, and the first peer list of that array whose
 * key matches the check supplies the key (tpt_lu_take_key()).
 *
 * Only the first tpt=on reads it: tpt=off then tpt=on is how the operator
 * frees a box whose controller is gone for good (docs/target.md, "Who may
 * drive it"), and must not bind it again until the next restart.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/memops.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "target.h"
#include "tpt_target.h"

/* The LUs whose superblock was read already, until they are deleted. */
struct tpt_lu_seen {
	struct list_head link;
	const struct scsi_lu *lu;
};

static LIST_HEAD(tpt_lus_seen);

static struct tpt_lu_seen *seen_entry(const struct scsi_lu *lu)
{
	struct tpt_lu_seen *s;

	list_for_each_entry(s, &tpt_lus_seen, link)
		if (s->lu == lu)
			return s;
	return NULL;
}

void tpt_lu_forget(const struct scsi_lu *lu)
{
	struct tpt_lu_seen *s = seen_entry(lu);

	if (s) {
		list_del(&s->link);
		free(s);
	}
}

/* 0 with the superblock in *@sb; -ENOENT for none (or no room for one). */
static int read_superblock(struct tpt_lu *tlu, struct tpt_member_sb *sb)
{
	uint32_t bs = tpt_lu_block_size(tlu);
	uint64_t lba = tpt_member_sb_lba(tpt_lu_nr_blocks(tlu), bs);
	void *buf;
	ssize_t got;
	int ret;

	if (!lba || tpt_lu_fd(tlu) < 0)
		return -ENOENT;
	/* Aligned for a LU opened with bsoflags=direct. */
	if (posix_memalign(&buf, 4096, TPT_SB_LEN))
		return -ENOMEM;
	got = pread(tpt_lu_fd(tlu), buf, TPT_SB_LEN, (off_t)(lba * bs));
	if (got == TPT_SB_LEN)
		ret = tpt_member_sb_decode(buf, TPT_SB_LEN, sb);
	else
		ret = got < 0 ? -errno : -EIO;
	free(buf);
	return ret;
}

void tpt_lu_bind_from_superblock(struct tpt_lu *tlu)
{
	struct scsi_lu *lu = tlu->lu;
	struct tpt_lu_seen *s;
	struct tpt_member_sb sb;
	int ret;

	if (seen_entry(lu))
		return;
	s = calloc(1, sizeof(*s));
	if (s) {
		s->lu = lu;
		list_add_tail(&s->link, &tpt_lus_seen);
	}
	ret = read_superblock(tlu, &sb);
	if (ret == -ENOENT)
		return;
	if (ret) {
		/* A damaged block binds nothing, as before superblocks
		 * carried a key check; the controller refuses the box. */
		eprintf("tpt: LU %" PRIu64 " of target %d: its member "
			"superblock cannot be read (%s): not bound to an "
			"array\n", lu->lun, lu->tgt->tid, strerror(-ret));
		return;
	}
	if (!tpt_member_sb_binds(&sb))
		return;
	tlu->bound = true;
	tlu->key_pending = true;
	tlu->array_id = sb.array_id;
	memcpy(tlu->key_check, sb.key_check, sizeof(tlu->key_check));
	eprintf("tpt: LU %" PRIu64 " of target %d bound to array %016" PRIx64
		" by its superblock: TPT commands and plain I/O wait for a "
		"nexus with that array's key\n", lu->lun, lu->tgt->tid,
		sb.array_id);
}

void tpt_lu_take_key(struct tpt_lu *tlu, const struct tpt_session *s,
		     const struct tpt_peer_list *pl)
{
	uint8_t check[TPT_SB_KEY_CHECK_LEN];

	if (!tlu->key_pending || pl->array_id != tlu->array_id)
		return;
	tpt_member_sb_key_check(pl->array_id, pl->array_key, check);
	if (!memeql_sec(check, tlu->key_check, sizeof(check)))
		return;
	memcpy(tlu->array_key, pl->array_key, sizeof(tlu->array_key));
	tlu->key_pending = false;
	eprintf("tpt: LU %" PRIu64 " of target %d: nexus %" PRIu64
		" delivered the key its superblock checks for array %016"
		PRIx64 "\n", tlu->lu->lun, s->tid, s->itn_id, tlu->array_id);
}
