/*
 * Assembling an array and taking it down: from its definition and its
 * state file to a LU that serves (tpt_array_create()), and back
 * (tpt_array_destroy()).
 *
 * Assembly.  The members are connected and, when a state file names the
 * array, claimed with its key before anything is read from them; their
 * superblocks say which array they belong to and at which event
 * (array_identity()).  None: the array is new, its id and key drawn from
 * the kernel's CSPRNG.  Then the geometry (from the superblocks, or from
 * the definition and the members' sizes), the state file's region record
 * (array_files.c), each box admitted to its position or refused
 * (array_members.c), the regions a crash left unsynced, and the state
 * file written before tgtadm answers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "controller/state_file.h"
#include "tpt_controller.h"

/* How long creating an array may wait for its members (tgtadm waits). */
#define TPT_ASSEMBLE_SECONDS 15

uint64_t tpt_array_bytes(const struct tpt_array *a)
{
	return a->level->array_blocks(&a->geo) * a->block_size;
}

/* The geometry an existing array's superblocks record, checked against
 * the definition. */
static int array_geometry_of_sb(struct tpt_array *a, const struct tpt_member_sb *sb)
{
	if (sb->nr_members != a->nr_members ||
	    sb->raid_level != a->level->level ||
	    sb->unit_bytes != a->spec.unit_bytes) {
		eprintf("tptraid: the members hold a RAID-%u array of %u "
			"members with a %u-byte unit, not what --bsopts "
			"defines\n", sb->raid_level, sb->nr_members,
			sb->unit_bytes);
		return -EINVAL;
	}
	a->block_size = sb->block_size;
	a->geo.members = a->nr_members;
	a->geo.unit_blocks = a->spec.unit_bytes / a->block_size;
	a->geo.member_blocks = sb->member_blocks;
	return raid_geometry_check(a->level, &a->geo) ? -EINVAL : 0;
}

static int array_geometry(struct tpt_array *a, const struct tpt_member_sb *sb)
{
	uint64_t min_blocks = UINT64_MAX, usable;
	unsigned int p;

	if (sb) {
		if (array_geometry_of_sb(a, sb))
			return -EINVAL;
		goto maps;
	}
	a->block_size = array_position_member(a, 0)->block_size;
	for (p = 0; p < a->nr_members; p++) {
		struct tpt_member *m = array_position_member(a, p);

		if (m->block_size != a->block_size) {
			eprintf("tptraid: member %u has %u-byte blocks, member "
				"0 %u: members must agree\n", m->id,
				m->block_size, a->block_size);
			return -EINVAL;
		}
		usable = tpt_member_sb_lba(m->nr_blocks, m->block_size);
		if (usable < min_blocks)
			min_blocks = usable;
	}
	if (a->spec.unit_bytes % a->block_size) {
		eprintf("tptraid: stripe unit %u is not a multiple of the "
			"members' %u-byte blocks\n", a->spec.unit_bytes,
			a->block_size);
		return -EINVAL;
	}
	a->geo.members = a->nr_members;
	a->geo.unit_blocks = a->spec.unit_bytes / a->block_size;
	a->geo.member_blocks = min_blocks - min_blocks % a->geo.unit_blocks;
	if (!a->geo.member_blocks || raid_geometry_check(a->level, &a->geo)) {
		eprintf("tptraid: members are smaller than one stripe unit "
			"(and the 1 MiB each keeps for the array's "
			"metadata)\n");
		return -EINVAL;
	}
maps:
	a->nr_stripes = a->geo.member_blocks / a->geo.unit_blocks;
	a->nr_regions = (a->nr_stripes + TPT_RECOVERY_REGION_STRIPES - 1) /
			TPT_RECOVERY_REGION_STRIPES;
	for (a->fine_stripes = 1;
	     a->fine_stripes < TPT_MISSED_FINE_MAX_STRIPES &&
	     a->nr_stripes > TPT_MISSED_FINE_MAX_BITS * a->fine_stripes;
	     a->fine_stripes *= 2)
		;
	for (p = 0; p < a->nr_members; p++) {
		a->pos[p].missed = calloc((a->nr_regions + 7) / 8, 1);
		a->pos[p].missed_fine = calloc(array_missed_fine_bytes(a), 1);
		if (!a->pos[p].missed || !a->pos[p].missed_fine)
			return -ENOMEM;
	}
	a->intent = calloc((a->nr_regions + 7) / 8, 1);
	a->unwritten = calloc((a->nr_regions + 7) / 8, 1);
	a->region_gen = calloc(a->nr_regions, sizeof(*a->region_gen));
	a->region_inflight = calloc(a->nr_regions, sizeof(*a->region_inflight));
	a->region_idle_since = calloc(a->nr_regions,
				      sizeof(*a->region_idle_since));
	if (!a->intent || !a->unwritten || !a->region_gen ||
	    !a->region_inflight ||
	    !a->region_idle_since)
		return -ENOMEM;
	return 0;
}

/*
 * The array the members' superblocks describe, if they agree: an array
 * created again (tgtd restarted with the same definition) is the same
 * array.  A box without a superblock joins as new; mixed ids are refused.
 */
/* The array's key from its state file, or a new one: a file from before
 * keys existed, or a new array. */
static int array_key(struct tpt_array *a, const struct tpt_state *state)
{
	uint8_t any = 0;
	unsigned int i;

	if (state) {
		memcpy(a->array_key, state->key, sizeof(a->array_key));
		for (i = 0; i < sizeof(a->array_key); i++)
			any |= a->array_key[i];
		if (any)
			return 0;
	}
	if (getrandom(a->array_key, sizeof(a->array_key), 0) !=
	    sizeof(a->array_key))
		return -EIO;
	a->array_key[0] |= 1;	/* never all zero */
	return 0;
}

/*
 * Which array the members hold, from their superblocks and the state
 * file: 0 with the newest superblock in *@found, or with none for a new
 * array (a->fresh; its id drawn now, or the state file's when a crash
 * stopped its creation).
 */
static int array_identity(struct tpt_array *a, const struct tpt_state *state,
			  const struct tpt_member_sb **found)
{
	bool again = state && state->creating;
	uint64_t id = state && !again ? state->array_id : 0, event = 0;
	unsigned int i;

	*found = NULL;
	for (i = 0; i < a->nr_boxes; i++) {
		struct tpt_member *m = &a->member[i];

		if (!m->sb_read || m->sb_status)
			continue;
		/* Written by the creation a crash stopped: nothing is in
		 * them yet.  Another array's box was not there then. */
		if (again && m->sb.array_id == state->array_id)
			continue;
		if (again) {
			eprintf("tptraid: member %u (%s) holds array %016"
				PRIx64 ", which it did not when array %016"
				PRIx64 " was being created: not creating it "
				"again over it\n", m->id, m->url,
				m->sb.array_id, state->array_id);
			return -EINVAL;
		}
		/* The state file names the array: others are refused later. */
		if (state && m->sb.array_id != id)
			continue;
		if (id && m->sb.array_id != id) {
			eprintf("tptraid: members carry superblocks of arrays "
				"%016" PRIx64 " and %016" PRIx64 ": not "
				"assembling a mix\n", id, m->sb.array_id);
			return -EINVAL;
		}
		id = m->sb.array_id;
		if (m->sb.event >= event) {
			event = m->sb.event;
			*found = &m->sb;
		}
	}
	if (state && !again && !*found) {
		eprintf("tptraid: no member of array %016" PRIx64 " (its state "
			"file) can be read: cannot assemble it\n", id);
		return -ENODEV;
	}
	if (id) {
		a->array_id = id;
		a->event = event;
		eprintf("tptraid: assembling array %016" PRIx64 " at event %"
			PRIu64 " from %s\n", id, event, state ? "its state file" :
			"its members' superblocks");
		return 0;
	}
	if (again) {
		a->array_id = state->array_id;
		eprintf("tptraid: creating array %016" PRIx64 " again, with "
			"its key: a crash stopped its creation\n", a->array_id);
	} else {
		if (getrandom(&a->array_id, sizeof(a->array_id), 0) !=
		    sizeof(a->array_id))
			return -EIO;
		a->array_id |= 1;	/* non-zero */
	}
	a->event = 0;
	a->fresh = true;
	return 0;
}

/*
 * At a stop, what still runs is a recovery's (a host's requests hold the
 * LU, which tgt does not remove then).  Its batches not started are
 * dropped; those started end here, while the mode that planned them and
 * the members' sessions are there: before, their commands completed in
 * member_close(), after the mode was gone.
 */
static void array_drain(struct tpt_array *a)
{
	struct list_head *idle[] = { &a->waiting, &a->retrying };
	struct tpt_span *s, *tmp;
	unsigned int i;

	for (i = 0; i < sizeof(idle) / sizeof(idle[0]); i++)
		list_for_each_entry_safe(s, tmp, idle[i], link) {
			if (!tpt_span_background(s))
				continue;
			list_del(&s->link);
			s->done(s, -ECANCELED);
		}
	member_drain(a, MEMBER_STOP_TIMEOUT);
}

static void array_free(struct tpt_array *a, bool set_up)
{
	unsigned int i;

	a->stopping = true;
	array_retry_remove(a);
	replace_cancel(a, "the array stops");
	recovery_stop(a);
	array_drain(a);
	array_files_close(a);
	tpt_hosts_detach(a);
	if (set_up)
		a->mode->teardown(a);
	for (i = 0; i < a->nr_boxes; i++)
		member_close(&a->member[i]);
	for (i = 0; i < a->nr_members; i++) {
		free(a->pos[i].missed);
		free(a->pos[i].missed_fine);
	}
	array_lost_free(a);
	array_unsynced_free(a);
	free(a->intent);
	free(a->unwritten);
	free(a->region_gen);
	free(a->region_inflight);
	free(a->region_idle_since);
	free(a->spec_text);
	if (a->efd >= 0) {
		tgt_event_del(a->efd);
		close(a->efd);
	}
	pthread_mutex_destroy(&a->submit_lock);
	pthread_mutex_destroy(&a->counters_lock);
	free(a);
}

/* Every position's member, or the reason the array cannot start. */
static int array_check_members(struct tpt_array *a)
{
	unsigned int p, down = 0;

	for (p = 0; p < a->nr_members; p++) {
		struct tpt_member *m = array_position_member(a, p);

		if (!m) {
			eprintf("tptraid: position %u has no member\n", p);
			down++;
		} else if (!m->ready || m->refused) {
			eprintf("tptraid: member %u (%s) is %s\n", m->id,
				m->url, m->refused ? "refused" :
				m->link == MEMBER_ONLINE ? "not set up" :
				m->held ? "held out" : "unreachable");
			down++;
		}
	}
	if (down && (a->fresh || !a->assembled)) {
		eprintf("tptraid: %u of %u members missing: a new array needs "
			"all of them\n", down, a->nr_members);
		return -ENODEV;
	}
	if (down > a->level->nr_parity(&a->geo)) {
		eprintf("tptraid: %u of %u members missing: the array cannot "
			"start\n", down, a->nr_members);
		return -ENODEV;
	}
	return 0;
}

/* The boxes and positions: the state file's if there is one (spares
 * added since, positions taken over), else the definition's. */
static int array_boxes(struct tpt_array *a, const struct tpt_array_spec *spec,
		       const struct tpt_state *state)
{
	unsigned int i, p;
	int ret;

	if (state && state->nr_positions != spec->nr_members) {
		eprintf("tptraid: the state file has %u positions, the "
			"definition %u members\n", state->nr_positions,
			spec->nr_members);
		return -EINVAL;
	}
	a->nr_boxes = state ? state->nr_boxes :
		      spec->nr_members + spec->nr_spares;
	for (i = 0; i < a->nr_boxes; i++) {
		ret = member_init(a, &a->member[i], i, state ? state->box[i] :
				  i < a->nr_members ? spec->member[i] :
				  spec->spare[i - a->nr_members]);
		if (ret)
			return ret;
		a->member[i].held = state && state->held[i];
		if (state && !state->box[i][0])
			a->member[i].held = a->member[i].removed = true;
	}
	for (p = 0; p < a->nr_members; p++) {
		int b = state ? state->position[p] : (int)p;

		a->pos[p].member = b;
		a->pos[p].state = b < 0 ? TPT_POS_MISSING : TPT_POS_IN_SYNC;
		if (b >= 0)
			a->member[b].position = (int)p;
	}
	if (state && state->has_replace)
		replace_pending(a, state->replace_position,
				state->replace_box);
	return 0;
}

/* Positions that cannot serve now: missing, or a box still catching up. */
static uint32_t array_unusable(struct tpt_array *a)
{
	uint32_t mask = 0;
	unsigned int p;

	for (p = 0; p < a->nr_members; p++) {
		struct tpt_member *m = array_position_member(a, p);

		if (a->pos[p].state != TPT_POS_IN_SYNC || !m || !m->ready ||
		    m->refused)
			mask |= 1u << p;
	}
	return mask;
}

/*
 * After a crash of the controller the regions of the write-intent record
 * may hold stripes whose parity does not match their data (the write
 * hole): they are resynchronised before anything else.  With a member
 * missing too, that member's blocks there cannot be rebuilt from a
 * parity that may be wrong: like md, the array does not start by itself.
 * The regions a new array's first resync had yet to do and no host had
 * written (a->unwritten) are not in doubt: only contents nobody wrote
 * may disagree there, as before the restart.
 */
static int array_after_crash(struct tpt_array *a, uint8_t *dirty)
{
	size_t mb = (a->nr_regions + 7) / 8, i;
	uint32_t unusable = array_unusable(a);
	uint64_t regions = 0, written = 0;
	uint8_t *unwritten;
	char fresh[80] = "";
	int ret;

	for (i = 0; i < mb; i++) {
		regions += (uint64_t)__builtin_popcount(dirty[i]);
		written += (uint64_t)__builtin_popcount(dirty[i] &
							~a->unwritten[i]);
	}
	if (!regions)
		return 0;
	/* A mirror's copies that differ are each a version of the data
	 * (md starts a dirty degraded RAID-1 too): nothing is unknown. */
	if (unusable && written && !a->spec.start_dirty_degraded &&
	    !a->level->copies) {
		eprintf("tptraid: the controller stopped with writes in flight "
			"or a parity resync unfinished in %" PRIu64 " regions "
			"hosts wrote while member positions 0x%x could not be "
			"used: parity there may not match the data and those "
			"positions' blocks there cannot be rebuilt. "
			"Not starting (as md); to start anyway, accepting that "
			"those blocks may be wrong, create the LU again with "
			"--bsopts start_dirty_degraded=yes (for that assembly "
			"only)\n", written, unusable);
		return -EUCLEAN;
	}
	/* A clean stop keeps the regions a resync had yet to do. */
	if (written < regions)
		snprintf(fresh, sizeof(fresh), " (%" PRIu64 " of them no host "
			 "has written since the array was new)",
			 regions - written);
	eprintf("tptraid: the controller stopped with writes in flight or a "
		"parity resync unfinished in %" PRIu64 " regions: resyncing "
		"their parity%s\n", regions, fresh);
	unwritten = malloc(mb);
	if (!unwritten)
		return -ENOMEM;
	for (i = 0; i < mb; i++) {
		unwritten[i] = dirty[i] & a->unwritten[i];
		dirty[i] &= (uint8_t)~a->unwritten[i];
	}
	ret = array_unsynced_add(a, unwritten, false);
	/* Started dirty and degraded, the operator took what the parity
	 * gives: a box lost there later is rebuilt from it too. */
	if (!ret)
		ret = array_unsynced_add(a, dirty, !unusable);
	free(unwritten);
	return ret;
}

int tpt_array_create(struct scsi_lu *lu, const struct tpt_array_spec *spec,
		     const char *spec_text, const struct tpt_state *state,
		     const char *path, struct tpt_array **out)
{
	const struct tpt_member_sb *sb;
	bool wrote_creating = false;
	struct tpt_array *a;
	uint8_t *dirty = NULL;
	unsigned int i;
	int ret;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->lu = lu;
	a->spec = *spec;
	a->spec_text = strdup(spec_text);
	a->efd = -1;
	a->nr_members = spec->nr_members;
	a->fail_timeout = spec->fail_timeout ? spec->fail_timeout :
			  TPT_SPEC_FAIL_TIMEOUT_DEFAULT;
	a->rebuild_rate = spec->rebuild_rate;
	if (state && state->has_fail_timeout) {
		a->fail_timeout = state->fail_timeout;
		a->fail_timeout_tuned = true;
	}
	if (state && state->has_rebuild_rate) {
		a->rebuild_rate = state->rebuild_rate;
		a->rebuild_rate_tuned = true;
	}
	if (state && state->has_check) {
		struct tpt_check_tally found = {
			.mismatches = state->check_mismatches,
			.located_kept = state->check_located_kept,
			.unreadable = state->check_unreadable,
		};

		memcpy(found.located, state->check_located,
		       sizeof(found.located));
		recovery_check_kept(a, state->check_from, &found);
	}
	if (state)
		array_lost_load(a, state);
	array_requests_init(a);
	INIT_LIST_HEAD(&a->intent_waiting);
	INIT_LIST_HEAD(&a->hosts);
	INIT_LIST_HEAD(&a->hosts_link);
	a->level = raid_level_find(spec->raid_level);
	a->mode = spec->mode == TPT_MODE_BASELINE ? &tpt_mode_baseline :
						    &tpt_mode_tpt;
	if (!a->spec_text || !a->level) {
		ret = a->level ? -ENOMEM : -EINVAL;
		if (!a->level)
			eprintf("tptraid: no RAID level %u (levels 1, 5 and 6)\n",
				spec->raid_level);
		array_free(a, false);
		return ret;
	}
	ret = array_boxes(a, spec, state);
	if (ret) {
		array_free(a, false);
		return ret;
	}
	ret = array_key(a, state) ? -EIO : a->mode->setup(a);
	if (ret)
		goto fail;
	/* A state file names the array: members are claimed before they
	 * are read. */
	if (state) {
		a->array_id = state->array_id;
		a->known = true;
	}
	for (i = 0; i < a->nr_boxes; i++) {
		if (a->member[i].removed)
			continue;
		if (a->member[i].held)
			eprintf("tptraid: member %u (%s) is held out by the "
				"operator (fail=): not connected until "
				"readd=URL\n", i, a->member[i].url);
		else
			member_connect(&a->member[i]);
	}
	member_wait(a, TPT_ASSEMBLE_SECONDS);
	ret = array_identity(a, state, &sb);
	/* A new array's key and id are on disk before any member is
	 * claimed with them: a crash from here on leaves no member bound
	 * to an array nobody knows. */
	if (!ret && a->fresh && !state) {
		ret = array_save_state_creating(a, path);
		wrote_creating = !ret;
	}
	if (!ret) {
		a->identified = true;
		a->known = true;
		for (i = 0; i < a->nr_boxes; i++) {
			struct tpt_member *m = &a->member[i];

			if (m->sb_read && m->link == MEMBER_ONLINE)
				array_member_advance(a, m);
		}
		member_wait(a, TPT_ASSEMBLE_SECONDS);
	}
	if (!ret && !sb)
		ret = array_check_members(a);
	if (!ret)
		ret = array_geometry(a, sb);
	if (!ret) {
		dirty = calloc((a->nr_regions + 7) / 8, 1);
		ret = dirty ? array_files_open(a, path, dirty) : -ENOMEM;
	}
	if (ret)
		goto fail;
	a->assembled = true;
	for (i = 0; i < a->nr_boxes; i++) {
		struct tpt_member *m = &a->member[i];

		if (!m->ready) {
			if (m->position >= 0)
				array_position_absent(a,
						      (unsigned int)m->position);
			continue;
		}
		array_member_admit(a, m);
		if (m->refused) {
			array_member_refuse(a, m);
			if (m->position >= 0)
				a->pos[m->position].state = TPT_POS_MISSING;
		}
	}
	ret = array_check_members(a);
	if (!ret)
		ret = array_after_crash(a, dirty);
	if (!ret && a->fresh && !spec->assume_clean) {
		/* Every region's: the members' old contents need not agree,
		 * but nobody wrote them (array_files_open() marked them all
		 * in the record). */
		memset(dirty, 0xff, (a->nr_regions + 7) / 8);
		ret = array_unsynced_add(a, dirty, false);
	}
	if (ret)
		goto fail;
	a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (a->efd < 0 || tgt_event_add(a->efd, EPOLLIN, array_submitted, a)) {
		ret = -EIO;
		goto fail;
	}
	/* The members say what they are before the LU serves anything. */
	array_new_event(a);
	member_wait(a, TPT_ASSEMBLE_SECONDS);
	ret = array_retry_add(a);
	if (!ret)
		ret = array_save_state_now(a);
	if (ret)
		goto fail;
	eprintf("tptraid: %s %s of %u members, %u KiB unit, %" PRIu64 " MiB, "
		"array %016" PRIx64 " event %" PRIu64 "\n", a->mode->name,
		a->level->name, a->nr_members, spec->unit_bytes >> 10,
		tpt_array_bytes(a) >> 20, a->array_id, a->event);
	a->started = true;
	/* The maps begun for boxes that did not come, kept from now on. */
	array_regions_changed(a);
	recovery_kick(a);
	free(dirty);
	*out = a;
	return 0;
fail:
	free(dirty);
	array_free(a, true);
	/* Its members given back (array_free()): none holds the key.  One
	 * created again after a crash keeps its file for the next try. */
	if (wrote_creating && !unlink(path))
		eprintf("tptraid: the array was not created: %s removed\n",
			path);
	return ret;
}

void tpt_array_destroy(struct tpt_array *a)
{
	array_free(a, true);
}
