/*
 * tgtadm --op update --params on a tptraid LU (docs/controller.md,
 * "Changing a running array"): settings kept in the state file
 * (rebuild_rate, fail_timeout), a spare added live, a box failed and
 * held out or added back (fail, readd), and the operator's actions
 * (force_recovery, resync, check).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tgtadm_error.h"
#include "tpt_controller.h"

/* The box of this array @url names, whatever its credentials. */
static struct tpt_member *array_box_of_url(struct tpt_array *a,
					   const char *url)
{
	unsigned int i;

	for (i = 0; i < a->nr_boxes; i++)
		if (!a->member[i].removed &&
		    tpt_spec_same_box(a->member[i].login_url, url))
			return &a->member[i];
	return NULL;
}

/* An id remove=URL freed (once its session is gone), or a new one; NULL
 * when the array has TPT_MAX_BOXES already. */
static struct tpt_member *array_free_box(struct tpt_array *a)
{
	unsigned int i;

	for (i = 0; i < a->nr_boxes; i++)
		if (a->member[i].removed &&
		    a->member[i].link == MEMBER_OFFLINE)
			return &a->member[i];
	if (a->nr_boxes == TPT_MAX_BOXES)
		return NULL;
	return &a->member[a->nr_boxes++];
}

static int array_add_spare(struct tpt_array *a, const char *url)
{
	struct tpt_member *m;
	char err[256];
	int ret;

	if (tpt_spec_member_url(url, err, sizeof(err))) {
		eprintf("tptraid: spare=%s\n", err);
		return TGTADM_INVALID_REQUEST;
	}
	m = array_box_of_url(a, url);
	if (m) {
		eprintf("tptraid: spare=%s: already in the array\n", m->url);
		return TGTADM_INVALID_REQUEST;
	}
	m = array_free_box(a);
	if (!m) {
		tpt_spec_hide_secrets(url, err, sizeof(err));
		eprintf("tptraid: spare=%s: the array has %u boxes already "
			"(remove=URL frees one)\n", err, a->nr_boxes);
		return TGTADM_INVALID_REQUEST;
	}
	/* A removed id is held and offline: member_close() lets go of
	 * what is left of its box without a word on the wire. */
	member_close(m);
	ret = member_init(a, m, (unsigned int)(m - a->member), url);
	if (ret) {
		/* Still nothing there: the id stays free. */
		m->removed = m->held = true;
		return TGTADM_UNKNOWN_ERR;
	}
	eprintf("tptraid: spare %u added: %s\n", m->id, m->url);
	member_connect(m);
	array_save_state(a);
	return TGTADM_SUCCESS;
}

/*
 * resync=yes: every stripe's parity computed again from its data (a
 * mirror's first copy in sync copied over the others), online, as md's
 * "repair": after tpt-scrub found stripes that disagree.  Only with every
 * position in sync: the resync needs them all.
 */
static int array_resync_all(struct tpt_array *a)
{
	enum tpt_array_state st = tpt_array_state(a);
	uint8_t *all;
	size_t len = (a->nr_regions + 7) / 8;
	int ret;

	if (st != TPT_ARRAY_OPTIMAL && st != TPT_ARRAY_RESYNCING) {
		eprintf("tptraid: resync=yes: the array is %s; a resync needs "
			"every position in sync\n", tpt_array_state_name(st));
		return TGTADM_INVALID_REQUEST;
	}
	/* As md refuses "repair" during a "check": the operator decides
	 * after the count, or stops it first. */
	if (a->recovery.active && a->recovery.check) {
		eprintf("tptraid: resync=yes: a check runs; check=stop ends "
			"it\n");
		return TGTADM_INVALID_REQUEST;
	}
	all = malloc(len);
	if (!all)
		return TGTADM_NOMEM;
	memset(all, 0xff, len);
	ret = array_unsynced_add(a, all, false);
	free(all);
	if (ret)
		return TGTADM_NOMEM;
	array_intent_mark_all(a);
	array_regions_changed(a);
	eprintf("tptraid: resync=yes: every region's parity is computed "
		"again from its data (%" PRIu64 " regions)\n", a->nr_regions);
	recovery_resync_grew(a);
	return TGTADM_SUCCESS;
}

/*
 * check=yes: every stripe's redundancy compared with its data, online,
 * the mismatched stripes counted and nothing repaired (md's "check"), so
 * that the operator can decide on resync=yes; check=stop ends it.
 */
static int array_check(struct tpt_array *a, const char *value)
{
	char why[160];

	if (!strcmp(value, "stop")) {
		if (recovery_check_stop(a))
			return TGTADM_SUCCESS;
		eprintf("tptraid: check=stop: no check runs\n");
		return TGTADM_INVALID_REQUEST;
	}
	if (strcmp(value, "yes")) {
		eprintf("tptraid: check=%s: the values are yes and stop\n",
			value);
		return TGTADM_INVALID_REQUEST;
	}
	if (recovery_check_start(a, why, sizeof(why))) {
		eprintf("tptraid: check=yes: %s\n", why);
		return TGTADM_INVALID_REQUEST;
	}
	return TGTADM_SUCCESS;
}

/* The box of this array @url names, or NULL (logged as @key's). */
static struct tpt_member *array_box_named(struct tpt_array *a,
					  const char *key, const char *url)
{
	struct tpt_member *m = array_box_of_url(a, url);
	char shown[TPT_SPEC_URL_MAX];

	if (m)
		return m;
	tpt_spec_hide_secrets(url, shown, sizeof(shown));
	eprintf("tptraid: %s=%s: not a box of this array\n", key, shown);
	return NULL;
}

/*
 * fail=URL, md's --fail: the operator takes a box out (a disk that keeps
 * erring, a box to service).  It is failed as if it had died - a spare
 * takes its position, or the array runs degraded - and held out: the
 * controller does not connect to it again, restarts included, until
 * readd=URL.  Before, a box the operator wanted out came back the moment
 * its tgtd answered.  Refused where the array cannot lose it, as md
 * refuses to fail the last in-sync copy of a block.
 */
static int array_fail_box(struct tpt_array *a, const char *url)
{
	struct tpt_member *m = array_box_named(a, "fail", url);

	if (!m)
		return TGTADM_INVALID_REQUEST;
	if (m->held) {
		eprintf("tptraid: fail=%s: held out already\n", m->url);
		return TGTADM_SUCCESS;
	}
	if (m->link != MEMBER_OFFLINE && !array_may_lose(a, m)) {
		eprintf("tptraid: fail=%s: the array (%s) cannot lose this box: "
			"some stripes would have no way to be read; refused\n",
			m->url, tpt_array_state_name(tpt_array_state(a)));
		return TGTADM_INVALID_REQUEST;
	}
	m->held = true;
	array_save_state(a);
	eprintf("tptraid: member %u (%s) failed by the operator: held out "
		"until readd=URL\n", m->id, m->url);
	member_fail(m, "taken out by the operator (fail=)");
	return TGTADM_SUCCESS;
}

/* readd=URL, md's --re-add: a held box is connected again, and caught
 * up or rebuilt like any box that returns. */
static int array_readd_box(struct tpt_array *a, const char *url)
{
	struct tpt_member *m = array_box_named(a, "readd", url);

	if (!m)
		return TGTADM_INVALID_REQUEST;
	if (!m->held) {
		eprintf("tptraid: readd=%s: not held out (fail=URL holds a box "
			"out)\n", m->url);
		return TGTADM_INVALID_REQUEST;
	}
	m->held = false;
	m->next_connect = 0;
	array_save_state(a);
	eprintf("tptraid: member %u (%s) added back by the operator: "
		"connecting; it is caught up or rebuilt as a returning box\n",
		m->id, m->url);
	return TGTADM_SUCCESS;
}

/*
 * remove=URL, md's --remove: a box held out (fail=URL) or a spare leaves
 * the array for good.  It no longer shows, its id is free for the next
 * spare=URL, and a position it still held has no box until a spare is
 * rebuilt into it.  Its target is left as it is: bound to the array and
 * reserved by it, with the array's superblock, until its operator frees
 * it (tpt=off, tpt=on) and clears the last MiB, as after a lost
 * controller.  Refused for a box that serves a position: fail= it first,
 * which refuses what the array cannot lose.
 */
static int array_remove_box(struct tpt_array *a, const char *url)
{
	struct tpt_member *m = array_box_named(a, "remove", url);
	int p;

	if (!m)
		return TGTADM_INVALID_REQUEST;
	p = m->position;
	if (!m->held && p >= 0) {
		eprintf("tptraid: remove=%s: member %u serves position %d: "
			"fail=URL takes it out first\n", m->url, m->id, p);
		return TGTADM_INVALID_REQUEST;
	}
	if (p >= 0) {
		a->pos[p].member = -1;
		m->position = -1;
	}
	m->held = m->removed = true;
	array_save_state(a);
	eprintf("tptraid: member %u (%s) removed by the operator%s; its id is "
		"free for spare=URL (its target still holds the array's "
		"superblock and binding)\n", m->id, m->url, p >= 0 ?
		": its position has no box until a spare is rebuilt into it" :
		"");
	if (m->link != MEMBER_OFFLINE)
		member_fail(m, "removed by the operator (remove=)");
	/* A spare may be rebuilt into the position now. */
	if (p >= 0)
		recovery_kick(a);
	return TGTADM_SUCCESS;
}

int tpt_array_param(struct tpt_array *a, const char *key, const char *value)
{
	char err[256];

	if (!strcmp(key, "spare"))
		return array_add_spare(a, value);
	if (!strcmp(key, "fail"))
		return array_fail_box(a, value);
	if (!strcmp(key, "readd"))
		return array_readd_box(a, value);
	if (!strcmp(key, "remove"))
		return array_remove_box(a, value);
	if (!strcmp(key, "replace")) {
		struct tpt_member *m = array_box_named(a, "replace", value);

		return m ? replace_start(a, m) : TGTADM_INVALID_REQUEST;
	}
	/* An action, not a setting: nothing is kept. */
	if (!strcmp(key, "force_recovery")) {
		if (strcmp(value, "yes")) {
			eprintf("tptraid: force_recovery=%s: the only value "
				"is yes\n", value);
			return TGTADM_INVALID_REQUEST;
		}
		recovery_force(a);
		return TGTADM_SUCCESS;
	}
	if (!strcmp(key, "resync")) {
		if (strcmp(value, "yes")) {
			eprintf("tptraid: resync=%s: the only value is yes\n",
				value);
			return TGTADM_INVALID_REQUEST;
		}
		return array_resync_all(a);
	}
	if (!strcmp(key, "check"))
		return array_check(a, value);
	/* Kept in the state file: a restarted controller keeps them. */
	if (!strcmp(key, "rebuild_rate")) {
		if (tpt_spec_rebuild_rate(value, &a->rebuild_rate, err,
					  sizeof(err))) {
			eprintf("tptraid: %s\n", err);
			return TGTADM_INVALID_REQUEST;
		}
		a->rebuild_rate_tuned = true;
		array_save_state(a);
		return TGTADM_SUCCESS;
	}
	if (!strcmp(key, "fail_timeout")) {
		if (tpt_spec_fail_timeout(value, &a->fail_timeout, err,
					  sizeof(err))) {
			eprintf("tptraid: %s\n", err);
			return TGTADM_INVALID_REQUEST;
		}
		a->fail_timeout_tuned = true;
		array_save_state(a);
		return TGTADM_SUCCESS;
	}
	return TGTADM_UNKNOWN_PARAM;
}
