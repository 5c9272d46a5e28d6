/*
 * The array's boxes (tpt_controller.h, array.c has the requests): each
 * membership change written to the superblocks, and the way a box that
 * comes online becomes a member, a spare or a refused stranger.
 *
 * In order: the mode claims the box (TPT: its LU is bound to the array's
 * key, after which it serves plain reads to nobody else, so this comes
 * first whenever the array is known), its superblock is read
 * (controller/member_sb.h), the box is reserved (member_fence.c) and set
 * up by the mode, and the superblock decides what it is to the array.
 * A box of an array not yet known is read before it is claimed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt_controller.h"

/* ---- membership ---- */

struct sb_write {
	struct tpt_member *m;
	uint8_t buf[TPT_SB_LEN];
};

static void sb_written(struct tpt_member *m, struct scsi_task *task,
		       int status, void *arg)
{
	(void)task;
	m->array->sb_writes--;
	if (status != SCSI_STATUS_GOOD && status != SCSI_STATUS_CANCELLED)
		array_member_error(m->array, m, "superblock write failed");
	free(arg);
}

static void sb_of(const struct tpt_array *a, const struct tpt_member *m,
		  struct tpt_member_sb *sb)
{
	memset(sb, 0, sizeof(*sb));
	sb->array_id = a->array_id;
	sb->event = a->event;
	/* A box catching up says where it is going only once it is there:
	 * until then its superblock keeps the event it missed from. */
	sb->position = m->position < 0 ? TPT_SB_SPARE : (uint32_t)m->position;
	sb->nr_members = a->nr_members;
	sb->raid_level = a->level->level;
	sb->unit_bytes = a->spec.unit_bytes;
	sb->member_blocks = a->geo.member_blocks;
	sb->block_size = a->block_size;
	/* A member whose LU took the key binds itself to the array from this
	 * when its tgtd restarts; one that is not a TPT target binds to
	 * nothing. */
	if (m->keyed)
		tpt_member_sb_key_check(a->array_id, a->array_key,
					sb->key_check);
}

/* Write @m's superblock for the array as it now stands. */
static void sb_write(struct tpt_array *a, struct tpt_member *m)
{
	struct sb_write *w;
	uint8_t cdb[16] = { 0 };
	uint64_t lba = tpt_member_sb_lba(m->nr_blocks, m->block_size);

	if (m->link != MEMBER_ONLINE || !lba)
		return;
	w = calloc(1, sizeof(*w));
	if (!w)
		return;
	sb_of(a, m, &m->sb);
	tpt_member_sb_encode(&m->sb, w->buf, sizeof(w->buf));
	cdb[0] = 0x8a;		/* WRITE(16) */
	tpt_put_be(&cdb[2], lba, 8);
	tpt_put_be(&cdb[10], TPT_SB_LEN / m->block_size, 4);
	if (member_send_cdb(m, cdb, SCSI_XFER_WRITE, w->buf, TPT_SB_LEN,
			    sb_written, w))
		free(w);
	else
		a->sb_writes++;
}

/* Membership changed: a new event count, on every member that is
 * current.  A box still catching up keeps its old superblock: if the
 * array stops before it is done, it must not look current next time. */
void array_new_event(struct tpt_array *a)
{
	unsigned int i;

	a->event++;
	for (i = 0; i < a->nr_boxes; i++) {
		struct tpt_member *m = &a->member[i];
		int p = m->position;

		if (!m->ready || m->refused ||
		    (p >= 0 && a->pos[p].state != TPT_POS_IN_SYNC))
			continue;
		sb_write(a, m);
	}
}

void array_member_error(struct tpt_array *a, struct tpt_member *m,
			const char *why)
{
	(void)a;
	member_fail(m, why);
}

/*
 * Position @p's box is being lost: its data is now only in the others.
 * From an in-sync box the missed map starts now; a box that was catching
 * up keeps the map it was catching up from.  Whatever recovery ran was
 * planned with it: it starts again from what the array is then.  True
 * when the map is kept.
 */
static bool position_losing(struct tpt_array *a, unsigned int p)
{
	struct tpt_position *pos = &a->pos[p];

	recovery_stop(a);
	if (pos->state == TPT_POS_IN_SYNC) {
		pos->missing_since = a->event + 1;
		pos->missed_valid = true;
	}
	if (pos->missed_valid)
		array_spans_missed(a, p);
	return pos->missed_valid;
}

/*
 * From now on @m is planned without (position_valid()), though its
 * teardown, and array_member_lost(), come a turn of the loop later.  A
 * span that wrote and fails on it meanwhile is planned again at once:
 * its regions must reach the position's missed map before then, or a
 * stripe torn by it would later be trusted.  So the loss starts here.
 */
void array_member_failing(struct tpt_array *a, struct tpt_member *m)
{
	if (m->ready && m->position >= 0 && !a->stopping) {
		/* The box being replaced leaves its position to the spare. */
		replace_member_lost(a, m);
		if (m->position >= 0)
			position_losing(a, (unsigned int)m->position);
	}
}

void array_member_lost(struct tpt_array *a, struct tpt_member *m,
		       bool was_online)
{
	bool was_ready = m->ready;

	m->ready = false;
	m->sb_read = false;
	m->claimed = false;
	m->keyed = false;
	if (a->stopping)
		return;
	if (was_ready)
		a->mode->member_lost(a, m);
	if (!was_online || !was_ready || m->refused)
		return;
	pthread_mutex_lock(&a->counters_lock);
	a->counters.member_failures++;
	pthread_mutex_unlock(&a->counters_lock);
	replace_member_lost(a, m);
	/* A spare's loss: no job plans with a box that serves no position
	 * (a spare being rebuilt onto has one), so whatever runs goes on. */
	if (m->position >= 0) {
		struct tpt_position *pos = &a->pos[m->position];

		/* Begun when it began to fail (array_member_failing()), if
		 * it did; the spans since are marked too. */
		if (position_losing(a, (unsigned int)m->position))
			array_regions_changed(a);
		pos->state = TPT_POS_MISSING;
		eprintf("tptraid: position %d has no member now: the array is "
			"%s\n", m->position,
			tpt_array_state_name(tpt_array_state(a)));
	}
	if (a->assembled)
		array_new_event(a);
	recovery_kick(a);
}

/* @m is refused, for the reason @fmt says (after "member N (URL)"): said
 * once while the box comes back refused the same way. */
static void __attribute__((format(printf, 2, 3)))
member_refusal(struct tpt_member *m, const char *fmt, ...)
{
	char why[sizeof(m->said)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	m->refused = true;
	if (member_say_once(m, why))
		eprintf("tptraid: member %u (%s)%s" MEMBER_SAID_ONCE "\n",
			m->id, m->url, why);
}

/*
 * A box came back with its superblock read: what is it to this array?
 * Spares and current members are used as they are; a member that missed
 * writes catches up, from its position's missed map when the array kept
 * one since the box's last event, else in full; anything foreign is
 * refused with one clear line.
 */
void array_member_admit(struct tpt_array *a, struct tpt_member *m)
{
	const struct tpt_member_sb *sb = &m->sb;
	int p = m->position;

	if (m->sb_status == -EINVAL) {
		member_refusal(m, ": damaged superblock: refused (clear the "
			       "last MiB of its LU to use it anew)");
		return;
	}
	if (m->sb_status == 0 && sb->array_id != a->array_id) {
		member_refusal(m, " belongs to array %016" PRIx64 ", not %016"
			       PRIx64 ": refused", sb->array_id, a->array_id);
		return;
	}
	/* A new array created again after a crash (array_identity()):
	 * what the first attempt wrote is no array yet, whatever its
	 * event and position, and every member is current.  Only at its
	 * creation: a box that returns later is what it says. */
	if (a->fresh && !a->started && m->sb_status == 0)
		return;
	if (m->sb_status == 0 && sb->event > a->event) {
		member_refusal(m, " is at event %" PRIu64 ", newer than the "
			       "array's %" PRIu64 ": refused", sb->event,
			       a->event);
		return;
	}
	if (p < 0)
		return;
	/* A spare that was taking the position over says so only once it
	 * has: it starts over. */
	if (m->sb_status == 0 && sb->position == TPT_SB_SPARE &&
	    a->pos[p].state != TPT_POS_IN_SYNC) {
		a->pos[p].state = TPT_POS_RECOVERING;
		a->pos[p].stalled_at = 0;
		a->pos[p].catch_up = false;
		array_missed_all(a, (unsigned int)p, true);
		eprintf("tptraid: member %u (%s) is back: rebuilding position "
			"%d onto it from the start\n", m->id, m->url, p);
		return;
	}
	if (m->sb_status == 0 && sb->position != (uint32_t)p) {
		member_refusal(m, " holds position %u, not %d: refused (is the "
			       "member= order right?)", sb->position, p);
		return;
	}
	/* In a new array every member is current; in one assembled from
	 * its superblocks, a member is current at the array's event. */
	if (a->pos[p].state == TPT_POS_IN_SYNC &&
	    (a->fresh || (m->sb_status == 0 && sb->event == a->event)))
		return;
	/* It missed writes: catch up from the map if the array has kept
	 * one since this box's last event, else rebuild it whole. */
	a->pos[p].state = TPT_POS_RECOVERING;
	a->pos[p].stalled_at = 0;
	a->pos[p].catch_up = m->sb_status == 0 && a->pos[p].missed_valid &&
			     sb->event + 1 >= a->pos[p].missing_since;
	if (!a->pos[p].catch_up)
		array_missed_all(a, (unsigned int)p, true);
	eprintf("tptraid: member %u (%s) is back at position %d from event %"
		PRIu64 ": %s\n", m->id, m->url, p, m->sb_status ? 0 : sb->event,
		a->pos[p].catch_up ? "catching up on the stripes it missed" :
		a->pos[p].missed_valid ? "rebuilding it in full (the array "
		"has kept no record since that event)" : "rebuilding it in "
		"full (no record of what it missed)");
}

/*
 * A box late at assembly (a rack powered up together, one box slower to
 * boot than TPT_ASSEMBLE_SECONDS) is at the array's event when it held
 * its position to the end: the position's missed map starts now, as for
 * a loss at run time, and the box catches up on what is written without
 * it instead of being rebuilt in full.  If it lagged behind already, its
 * superblock's event says so when it comes (array_member_admit()), and a
 * map the record kept for it since goes on.  Its units in the regions a
 * crash left writes in flight in are not in the map: they hold every
 * write acknowledged before the crash, where the parity there may not
 * (the write hole), and the resync computes the parity from them.  Writes
 * planned without it wait for the record to hold its map
 * (array_intent_hold()), written once the array has started
 * (tpt_array_create()): a refused start leaves the record as it was.
 */
void array_position_absent(struct tpt_array *a, unsigned int p)
{
	struct tpt_position *pos = &a->pos[p];

	pos->state = TPT_POS_MISSING;
	if (!a->fresh && !pos->missed_valid) {
		pos->missing_since = a->event + 1;
		pos->missed_valid = true;
	}
}

static void member_unclaimed(struct tpt_member *m, int err)
{
	(void)err;
	member_fail(m, "refused");
}

/* @m is not for this array: give it back to whoever it belongs to, if we
 * had named the array to it, and drop it. */
void array_member_refuse(struct tpt_array *a, struct tpt_member *m)
{
	if (m->claimed && a->mode->member_unclaim) {
		m->claimed = false;
		a->mode->member_unclaim(a, m, member_unclaimed);
		return;
	}
	member_fail(m, "refused");
}

static void member_set_up(struct tpt_member *m, int err)
{
	struct tpt_array *a = m->array;

	if (err) {
		char why[80];

		snprintf(why, sizeof(why), "set-up failed: %s", strerror(-err));
		member_fail(m, why);
		return;
	}
	m->ready = true;
	if (!a->assembled)
		return;
	array_member_admit(a, m);
	if (m->refused) {
		array_member_refuse(a, m);
		return;
	}
	eprintf("tptraid: member %u (%s) is online as %s\n", m->id, m->url,
		m->position < 0 ? "a spare" : "a member");
	if (m->position < 0 || a->pos[m->position].state == TPT_POS_IN_SYNC)
		sb_write(a, m);
	recovery_kick(a);
	array_run_waiting(a);
}

static void member_fenced(struct tpt_member *m, int err)
{
	struct tpt_array *a = m->array;

	if (err) {
		if (err != -ECANCELED)
			member_fail(m, err == -EBUSY ? "reserved by another "
				    "initiator" : "cannot reserve it");
		return;
	}
	m->fenced = true;
	a->mode->member_setup(a, m, member_set_up);
}

/* Reserve the box for the array (member_fence.c), then the mode's set-up. */
static void member_take(struct tpt_array *a, struct tpt_member *m)
{
	member_fence(m, a->array_id, member_fenced);
}

static void sb_read(struct tpt_member *m);

static void member_claimed(struct tpt_member *m, int err)
{
	struct tpt_array *a = m->array;

	if (err) {
		if (err == -EACCES)
			member_fail(m, MEMBER_BOUND_ELSEWHERE);
		else if (err != -ECANCELED)
			member_fail(m, "it did not take the array's key (is it "
				    "bound to another array?)");
		return;
	}
	m->claimed = true;
	if (!m->sb_read)
		sb_read(m);
	else if (a->identified)
		member_take(a, m);
}

/*
 * Name the array to @m (the mode's claim: TPT binds the LU to the array's
 * key, protocol.md 5.5), which a member bound to the array serves plain
 * SBC commands only after; modes without a claim go straight on.
 */
static void member_claim(struct tpt_array *a, struct tpt_member *m)
{
	if (a->mode->member_claim)
		a->mode->member_claim(a, m, member_claimed);
	else
		member_claimed(m, 0);
}

void array_member_advance(struct tpt_array *a, struct tpt_member *m)
{
	if (m->claimed)
		member_take(a, m);
	else
		member_claim(a, m);
}

/* Whether CHECK CONDITION @task is ACCESS DENIED (SPC): a TPT target
 * whose LU is bound to an array we have not named (plain_io.c). */
static bool sense_access_denied(const struct scsi_task *task, int status)
{
	return status == SCSI_STATUS_CHECK_CONDITION && task &&
	       task->sense.key == SCSI_SENSE_ILLEGAL_REQUEST &&
	       task->sense.ascq == 0x2002;
}

static void sb_read_done(struct tpt_member *m, struct scsi_task *task,
			 int status, void *arg)
{
	struct tpt_array *a = m->array;
	uint8_t *buf = arg;

	if (status != SCSI_STATUS_GOOD) {
		free(buf);
		if (sense_access_denied(task, status))
			member_fail(m, MEMBER_BOUND_ELSEWHERE);
		else if (status != SCSI_STATUS_CANCELLED)
			member_fail(m, "cannot read its superblock");
		return;
	}
	m->sb_status = tpt_member_sb_decode(buf, TPT_SB_LEN, &m->sb);
	free(buf);
	m->sb_read = true;
	/* Until the superblocks have said which array it is, it waits. */
	if (a->identified)
		array_member_advance(a, m);
}

static void sb_read(struct tpt_member *m)
{
	uint64_t lba = tpt_member_sb_lba(m->nr_blocks, m->block_size);
	uint8_t cdb[16] = { 0x88 };	/* READ(16) */
	uint8_t *buf = malloc(TPT_SB_LEN);

	tpt_put_be(&cdb[2], lba, 8);
	tpt_put_be(&cdb[10], TPT_SB_LEN / m->block_size, 4);
	if (!buf || member_send_cdb(m, cdb, SCSI_XFER_READ, buf, TPT_SB_LEN,
				    sb_read_done, buf)) {
		free(buf);
		member_fail(m, "cannot read its superblock");
	}
}

/*
 * A box's session is up.  When the array's id and key are known (its
 * state file, or the superblocks already read) the array is named to the
 * box first, since a box bound to the array, as after a controller
 * restart, shows its superblock to no one else; a box of an array still
 * unknown is read first and named once the superblocks have decided.
 */
void array_member_online(struct tpt_array *a, struct tpt_member *m)
{
	uint64_t lba = tpt_member_sb_lba(m->nr_blocks, m->block_size);

	m->refused = false;
	m->claimed = false;
	m->keyed = false;
	if (!lba) {
		eprintf("tptraid: member %u (%s) is too small\n", m->id, m->url);
		member_fail(m, "too small");
		return;
	}
	if (a->assembled && (m->block_size != a->block_size ||
			     lba < a->geo.member_blocks)) {
		member_refusal(m, " has %" PRIu64 " blocks of %u bytes: the "
			       "array needs %" PRIu64 " of %u", m->nr_blocks,
			       m->block_size, a->geo.member_blocks,
			       a->block_size);
		member_fail(m, "refused");
		return;
	}
	if (a->known)
		member_claim(a, m);
	else
		sb_read(m);
}

bool array_settling(const struct tpt_array *a)
{
	unsigned int i;

	for (i = 0; i < a->nr_boxes; i++) {
		const struct tpt_member *m = &a->member[i];

		if (m->link == MEMBER_CONNECTING ||
		    (m->link == MEMBER_ONLINE && !m->ready && !m->refused &&
		     (a->identified || !m->sb_read)))
			return true;
	}
	return a->sb_writes > 0;
}
