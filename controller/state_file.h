/*
 * The array's state file, the controller's own record of an array: the
 * file --backing-store names (docs/controller.md, "What the controller
 * keeps").  A few lines of text an engineer can read:
 *
 *   tptraid-state 1
 *   array 65c854e8e9b3c6ab
 *   key 9f0c...(32 hex digits)
 *   spec raid=5;unit=64k;mode=tpt;dm=...;member=...;member=...;...
 *   box 0 iscsi://10.0.0.11:3260/iqn...:box1/1
 *   box 5 iscsi://10.0.0.16:3260/iqn...:spare1/1
 *   box 6 removed
 *   position 0 0
 *   position 1 5
 *   held 3
 *   rebuild_rate 200
 *   fail_timeout 10
 *   check 1024 3 1
 *   check_located 1 0 2 0 0 0
 *   lost 2 4711
 *   replace 1 5
 *   creating yes
 *
 * "spec" is the definition as --bsopts gave it, so that the LU can be
 * created again from the file alone; "box" lines are every member and
 * spare, with their ids (peer ids), including spares added later with
 * tgtadm; "position" lines say which box serves each position now, which
 * differs from the definition's member= order once a spare has taken
 * over.  "held ID", once per box and after its "box" line, is a box the
 * operator failed (fail=URL): the controller does not connect to it
 * until readd=URL, also after a restart.  "box ID removed" is an id whose
 * box the operator removed (remove=URL): no position or "held" line names
 * it, and the next spare=URL takes it.  "key" is the array's secret
 * (docs/protocol.md 5.5): targets serve the array only to nexuses that
 * deliver it, so the file is the controller's alone (mode 0600); a file
 * without one (written before keys existed) gets a new key.
 * "rebuild_rate" and "fail_timeout", each at most once, are what the
 * operator set with tgtadm after creation: they win over the definition's
 * values, so a restart keeps them.  "check", at most
 * once, is an operator's check (check=yes) that a restart interrupted:
 * stripes 0 to FROM-1 were checked, MISMATCHES of them disagreed and
 * UNREADABLE (optional, 0 if left out) could not be read (units lost on
 * more positions than the level gives back), and the controller goes on
 * from FROM.  "check_located", at most once and
 * only with "check", is what it had located in those stripes: KEPT, then a
 * count per position (as many as "position" lines) of the stripes whose
 * one wrong unit that position holds; KEPT of them resync=yes would keep
 * wrong.  "lost P STRIPE", once per unit and in ascending order, is a
 * unit of position P that a recovery could not rebuild (a survivor's
 * lost sector there): unknown until a host write of its stripe gives it
 * back, never to be read from P's box (usr/tpt_controller/lost_units.c);
 * at most TPT_STATE_LOST_MAX.  "replace P ID", at most once, is a
 * replace=URL under way: box ID, a spare (no position line names it, no
 * held line), is being rebuilt into position P, which names a box; a
 * restart begins it again.  "creating yes" is a file written
 * while the array was being created, before its members were claimed
 * with its key: a crash then left them bound to this key and id, and the
 * next start creates the array again with them instead of finding the
 * members held by an array nobody knows.  Parsing is strict: a damaged file
 * is refused with the line and what is wrong, never half used.  Pure: no
 * I/O.
 */
#ifndef TPT_CONTROLLER_STATE_FILE_H
#define TPT_CONTROLLER_STATE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/array_spec.h"

#define TPT_STATE_VERSION 1
#define TPT_STATE_SPEC_MAX 12288
#define TPT_STATE_MAX_BOXES (TPT_SPEC_MAX_MEMBERS + TPT_SPEC_MAX_SPARES)

#define TPT_STATE_KEY_LEN 16
/* Lost units the file holds, all positions together. */
#define TPT_STATE_LOST_MAX 512

struct tpt_state {
	uint64_t array_id;
	uint8_t key[TPT_STATE_KEY_LEN];	/* all zero: none in the file */
	char spec[TPT_STATE_SPEC_MAX];
	unsigned int nr_boxes;
	char box[TPT_STATE_MAX_BOXES][TPT_SPEC_URL_MAX];	/* by id; ""
								 * removed */
	unsigned int nr_positions;
	int position[TPT_SPEC_MAX_MEMBERS];	/* box id, or -1: none */
	bool held[TPT_STATE_MAX_BOXES];		/* by id: failed by the operator */
	/* Set with tgtadm since creation (has_*), over the spec's. */
	bool has_rebuild_rate, has_fail_timeout;
	unsigned int rebuild_rate, fail_timeout;
	/* A check to go on with (has_check): FROM, MISMATCHES and
	 * UNREADABLE, and the wrong units it located per position
	 * (check_located, as many as positions, or none) and how many of
	 * them resync would keep. */
	bool has_check;
	uint64_t check_from, check_mismatches, check_unreadable;
	unsigned int nr_check_located;
	uint64_t check_located[TPT_SPEC_MAX_MEMBERS], check_located_kept;
	/* Lost units, ascending by position, then stripe. */
	unsigned int nr_lost;
	struct tpt_state_lost {
		unsigned int position;
		uint64_t stripe;
	} lost[TPT_STATE_LOST_MAX];
	/* A replace under way (has_replace): position and spare's box id. */
	bool has_replace;
	unsigned int replace_position, replace_box;
	/* The array's creation has not finished ("creating yes"). */
	bool creating;
};

/*
 * Parse @text (@len bytes) into @out: 0, or -EINVAL with "line N: what"
 * in @err.  Box ids must be 0..n-1 without gaps, each position named
 * once, from 0 on, and naming a box or -1.
 */
int tpt_state_parse(const char *text, size_t len, struct tpt_state *out,
		    char *err, size_t errlen);

/* Format @st into @buf: the length, or -ENOSPC (or -EINVAL for a state
 * that would not parse back). */
int tpt_state_format(const struct tpt_state *st, char *buf, size_t len);

#endif
