/*
 * Per I_T nexus TPT state: the peer list the controller delivered and the
 * slots this target exported to it.  A session exists from the first TPT
 * command of a nexus until the nexus goes away.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt.h"
#include "tpt_target.h"

#include <nettle/memops.h>

static LIST_HEAD(tpt_sessions);

struct tpt_session *tpt_session_find(int tid, uint64_t itn_id)
{
	struct tpt_session *s;

	list_for_each_entry(s, &tpt_sessions, link)
		if (s->tid == tid && s->itn_id == itn_id)
			return s;
	return NULL;
}

struct tpt_session *tpt_session_first(void)
{
	return list_empty(&tpt_sessions) ? NULL :
		list_first_entry(&tpt_sessions, struct tpt_session, link);
}

struct tpt_session *tpt_session_next(struct tpt_session *s)
{
	return s->link.next == &tpt_sessions ? NULL :
		list_entry(s->link.next, struct tpt_session, link);
}

struct tpt_session *tpt_session_get(int tid, uint64_t itn_id)
{
	struct tpt_session *s = tpt_session_find(tid, itn_id);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->tid = tid;
	s->itn_id = itn_id;
	INIT_LIST_HEAD(&s->groups);
	list_add_tail(&s->link, &tpt_sessions);
	return s;
}

/*
 * An array has one controller nexus at a time.  When another nexus
 * delivers a list of the same array, the controller behind the older one
 * has given up on it (it failed this box, or it restarted): what that
 * nexus sent and has not yet run - commands still in the socket buffer of
 * a box that was stopped, or retransmitted once a cut link heals - must
 * not change data the new nexus is about to repair.  So its groups go,
 * its commands in flight stop at their next step, and it gets no further
 * TPT command.
 */
static void tpt_session_supersede(struct tpt_session *old,
				  const struct tpt_session *by)
{
	old->superseded = true;
	eprintf("tpt: nexus %" PRIu64 " of array %" PRIx64 " superseded by "
		"nexus %" PRIu64 ": its groups and commands are dropped\n",
		old->itn_id, old->peers->array_id, by->itn_id);
	tpt_session_abort_cmds(old, TPT_SENSE_RELEASED_BY_NEXUS_LOSS);
	tpt_session_release_groups(old, NULL, TPT_RELEASE_NEXUS_LOSS);
}

/* Same array id and key: the same array's controller. */
static bool tpt_same_array(const struct tpt_peer_list *a,
			   const struct tpt_peer_list *b)
{
	return a->array_id == b->array_id &&
	       memeql_sec(a->array_key, b->array_key, sizeof(a->array_key));
}

enum tpt_sense_reason tpt_session_set_peers(struct tpt_session *s,
					    struct tpt_lu *tlu,
					    const struct tpt_peer_list *pl)
{
	const struct tpt_peer *self = tpt_peer_list_find(pl, pl->self_id);
	struct tpt_session *o;

	if (!self || self->role != TPT_ROLE_TARGET)
		return TPT_SENSE_INVALID_PARAM_FIELD;
	/* A LU in an array takes lists of that array only, and only with
	 * its key: a copied array id is not enough to supersede the
	 * controller's nexus or to plant links. */
	tpt_lu_take_key(tlu, s, pl);
	if (tlu->bound && (tlu->key_pending ||
			   tlu->array_id != pl->array_id ||
			   !memeql_sec(tlu->array_key, pl->array_key,
				       sizeof(tlu->array_key)))) {
		eprintf("tpt: nexus %" PRIu64 " sent a peer list of array %"
			PRIx64 " to LU %" PRIu64 ", which belongs to array %"
			PRIx64 "%s: refused\n", s->itn_id, pl->array_id,
			tlu->lu->lun, tlu->array_id,
			tlu->array_id == pl->array_id ? " (wrong key)" : "");
		return TPT_SENSE_PEER_LIST_CONFLICT;
	}
	if (s->peers) {
		/* One nexus serves one array, and a list only moves on. */
		if (!tpt_same_array(s->peers, pl) ||
		    pl->generation <= s->peers->generation)
			return TPT_SENSE_PEER_LIST_CONFLICT;
	} else {
		s->peers = malloc(sizeof(*s->peers));
		if (!s->peers)
			return TPT_SENSE_POOL_EXHAUSTED;
		s->scope = tpt_datamover_scope(pl->array_id, pl->array_key);
	}
	*s->peers = *pl;
	if (!tlu->bound) {
		tlu->bound = true;
		tlu->array_id = pl->array_id;
		memcpy(tlu->array_key, pl->array_key, sizeof(tlu->array_key));
		eprintf("tpt: LU %" PRIu64 " of target %d bound to array %"
			PRIx64 "\n", tlu->lu->lun, s->tid, pl->array_id);
	}
	list_for_each_entry(o, &tpt_sessions, link)
		if (o != s && !o->superseded && o->peers &&
		    tpt_same_array(o->peers, pl))
			tpt_session_supersede(o, s);
	eprintf("tpt: nexus %" PRIu64 " delivered peer list of array %" PRIx64
		" generation %u: %u peers, this target is peer %u\n",
		s->itn_id, pl->array_id, pl->generation, pl->count, pl->self_id);
	tpt_links_prune();
	return TPT_SENSE_NONE;
}

void tpt_session_log_unbound(struct tpt_session *s, const struct tpt_lu *tlu)
{
	if (s->refused_unbound)
		return;
	s->refused_unbound = true;
	eprintf("tpt: nexus %" PRIu64 " of target %d has not delivered the key "
		"of array %" PRIx64 ", to which LU %" PRIu64 " belongs: its "
		"TPT commands are refused\n", s->itn_id, s->tid, tlu->array_id,
		tlu->lu->lun);
}

/*
 * Slots are registered memory of their own rather than pool buffers: the
 * pool's buffers are sized for the largest stripe unit, slots for the one
 * the controller asked for.  All sessions' slots together stay under
 * TPT_SLOT_BYTES_MAX, so a controller cannot make tgtd pin unbounded
 * memory, and one session's under its bound (bounds.c), so one nexus
 * cannot take them all.
 *
 * They are registered in the scope of the nexus's array: only peers that
 * a list of that array (same id and key) admitted can read them, not the
 * peers of another binding in this tgtd, even with the exact STag.  A
 * slot table needs the list first (TPT REPORT SLOTS answers PEER LIST
 * MISSING before it), and the list's array never changes, so the table
 * never has to move to another scope.
 */
static size_t tpt_slot_bytes(uint32_t payload)
{
	return (TPT_SLOT_HDR_LEN + payload + 4095) & ~(size_t)4095;
}

static void tpt_slot_free(struct tpt_slot *slot, uint32_t payload)
{
	void *mem = tpt_dm_buf_addr(slot->dmb);

	tpt_dm_buf_release(slot->dmb);
	free(mem);
	tpt_bound_use.slot_bytes -= tpt_slot_bytes(payload);
}

static int tpt_slot_alloc(struct tpt_slot *slot, uint64_t scope,
			  uint32_t payload)
{
	size_t bytes = tpt_slot_bytes(payload);
	void *mem;
	int err;

	if (tpt_bound_use.slot_bytes + bytes > TPT_SLOT_BYTES_MAX)
		return -EAGAIN;
	mem = aligned_alloc(4096, bytes);
	if (!mem)
		return -EAGAIN;
	/* A fresh slot reads as free to anyone who looks. */
	memset(mem, 0, TPT_SLOT_HDR_LEN);
	err = tpt_dm_register(tpt_datamover(), scope, mem, bytes,
			      TPT_DM_ACCESS_REMOTE_READ, &slot->dmb);
	if (err) {
		free(mem);
		return err;
	}
	tpt_bound_use.slot_bytes += bytes;
	return 0;
}

static void tpt_session_free_slots(struct tpt_session *s)
{
	uint16_t i;

	for (i = 0; i < s->nr_slots; i++)
		tpt_slot_free(&s->slots[i], s->slot_payload);
	free(s->slots);
	s->slots = NULL;
	s->nr_slots = 0;
	s->slot_payload = 0;
}

enum tpt_sense_reason tpt_session_reserve_slots(struct tpt_session *s,
						uint32_t payload,
						uint16_t count)
{
	struct tpt_slot *slots;
	uint16_t i;

	if (s->nr_slots == count && s->slot_payload == payload)
		return TPT_SENSE_NONE;
	if (payload > TPT_PRIVATE_PIECE)
		return TPT_SENSE_INVALID_CDB_FIELD;
	for (i = 0; i < s->nr_slots; i++)
		if (s->slots[i].owner)
			return TPT_SENSE_SLOT_IN_USE;
	/* The new table replaces the old one: only its own size counts. */
	if ((uint64_t)count * tpt_slot_bytes(payload) >
	    (uint64_t)tpt_bounds.session_slot_mb << 20)
		return tpt_bound_refuse(s, TPT_BOUND_SESSION_SLOTS);

	slots = calloc(count, sizeof(*slots));
	if (!slots)
		return TPT_SENSE_POOL_EXHAUSTED;
	for (i = 0; i < count; i++) {
		int err = tpt_slot_alloc(&slots[i], s->scope, payload);

		if (err) {
			while (i--)
				tpt_slot_free(&slots[i], payload);
			free(slots);
			return err == -EAGAIN ? TPT_SENSE_POOL_EXHAUSTED :
						TPT_SENSE_INTERNAL_FAILURE;
		}
	}
	tpt_session_free_slots(s);
	s->slots = slots;
	s->nr_slots = count;
	s->slot_payload = payload;
	return TPT_SENSE_NONE;
}

void tpt_session_fill_slot_table(const struct tpt_session *s,
				 struct tpt_slot_table *t)
{
	uint16_t i;

	t->count = s->nr_slots;
	t->payload_size = s->slot_payload;
	t->flags = 0;
	for (i = 0; i < s->nr_slots; i++) {
		t->slot[i].stag = tpt_dm_buf_stag(s->slots[i].dmb);
		t->slot[i].offset = tpt_dm_buf_rma_base(s->slots[i].dmb);
		if (t->slot[i].offset)
			t->flags |= TPT_XFER_VIRT_ADDR;
	}
}

static void tpt_session_free(struct tpt_session *s)
{
	tpt_session_release_groups(s, NULL, TPT_RELEASE_NEXUS_LOSS);
	tpt_session_free_slots(s);
	list_del(&s->link);
	free(s->peers);
	free(s);
}

void tpt_target_it_nexus_destroy(int tid, uint64_t itn_id)
{
	struct tpt_session *s = tpt_session_find(tid, itn_id);

	if (!s)
		return;
	/* Its groups go with it: a later nexus of the same initiator knows
	 * none of them, which is worth knowing when one is asked for. */
	if (s->nr_groups)
		eprintf("tpt: I_T nexus %" PRIu64 " of target %d is gone with %u "
			"open groups: released\n", itn_id, tid, s->nr_groups);
	tpt_session_free(s);
}
