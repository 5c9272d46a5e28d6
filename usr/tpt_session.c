/*
 * Per I_T nexus TPT state: the peer list the controller delivered, the
 * slots this target exported to it, and datamover links to the peers.
 *
 * A session exists from the first TPT command of a nexus until the nexus
 * goes away.  Links are outgoing datamover connections, one per
 * (array, peer): a target only ever connects to entries of a list its
 * controller delivered, and only admits incoming connections that present
 * an entry's id, the array id and this target's own token from an address
 * the entry names (paper III-B, docs/protocol.md section 6.4).
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
#include "tpt_ctl.h"

static LIST_HEAD(tpt_sessions);

struct tpt_link_waiter {
	struct list_head link;
	tpt_link_cb cb;
	void *arg;
};

struct tpt_link {
	struct list_head link;
	uint64_t array_id;
	uint16_t peer_id;
	struct tpt_dm_peer *peer;
	bool connected;
	struct list_head waiters;
};

static LIST_HEAD(tpt_links);
static bool peer_down_registered;

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

enum tpt_sense_reason tpt_session_set_peers(struct tpt_session *s,
					    const struct tpt_peer_list *pl)
{
	const struct tpt_peer *self = tpt_peer_list_find(pl, pl->self_id);

	if (!self || self->role != TPT_ROLE_TARGET)
		return TPT_SENSE_INVALID_PARAM_FIELD;
	if (s->peers) {
		/* One nexus serves one array, and a list only moves on. */
		if (s->peers->array_id != pl->array_id ||
		    pl->generation <= s->peers->generation)
			return TPT_SENSE_PEER_LIST_CONFLICT;
	} else {
		s->peers = malloc(sizeof(*s->peers));
		if (!s->peers)
			return TPT_SENSE_POOL_EXHAUSTED;
	}
	*s->peers = *pl;
	eprintf("tpt: nexus %" PRIu64 " delivered peer list of array %" PRIx64
		" generation %u: %u peers, this target is peer %u\n",
		s->itn_id, pl->array_id, pl->generation, pl->count, pl->self_id);
	return TPT_SENSE_NONE;
}

/*
 * Slots are registered memory of their own rather than pool buffers: the
 * pool's buffers are sized for the largest stripe unit, slots for the one
 * the controller asked for.  All sessions' slots together stay under
 * slot_bytes_max, so a controller cannot make tgtd pin unbounded memory.
 */
static uint64_t slot_bytes_used;
static const uint64_t slot_bytes_max = 1ULL << 30;

static size_t tpt_slot_bytes(uint32_t payload)
{
	return (TPT_SLOT_HDR_LEN + payload + 4095) & ~(size_t)4095;
}

static void tpt_slot_free(struct tpt_slot *slot, uint32_t payload)
{
	void *mem = tpt_dm_buf_addr(slot->dmb);

	tpt_dm_buf_release(slot->dmb);
	free(mem);
	slot_bytes_used -= tpt_slot_bytes(payload);
}

static int tpt_slot_alloc(struct tpt_slot *slot, uint32_t payload)
{
	size_t bytes = tpt_slot_bytes(payload);
	void *mem;
	int err;

	if (slot_bytes_used + bytes > slot_bytes_max)
		return -EAGAIN;
	mem = aligned_alloc(4096, bytes);
	if (!mem)
		return -EAGAIN;
	/* A fresh slot reads as free to anyone who looks. */
	memset(mem, 0, TPT_SLOT_HDR_LEN);
	err = tpt_dm_register(tpt_target_dm(), mem, bytes,
			      TPT_DM_ACCESS_REMOTE_READ, &slot->dmb);
	if (err) {
		free(mem);
		return err;
	}
	slot_bytes_used += bytes;
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

	slots = calloc(count, sizeof(*slots));
	if (!slots)
		return TPT_SENSE_POOL_EXHAUSTED;
	for (i = 0; i < count; i++) {
		int err = tpt_slot_alloc(&slots[i], payload);

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

void tpt_it_nexus_destroy(int tid, uint64_t itn_id)
{
	struct tpt_session *s = tpt_session_find(tid, itn_id);

	if (s)
		tpt_session_free(s);
}

/* ---- links to peers ---- */

static struct tpt_link *tpt_link_find(uint64_t array_id, uint16_t peer_id)
{
	struct tpt_link *l;

	list_for_each_entry(l, &tpt_links, link)
		if (l->array_id == array_id && l->peer_id == peer_id)
			return l;
	return NULL;
}

static void tpt_link_finish(struct tpt_link *l, int status)
{
	struct tpt_link_waiter *w, *tmp;
	LIST_HEAD(waiters);

	list_splice_init(&l->waiters, &waiters);
	if (status) {
		list_del(&l->link);
		if (l->peer)
			tpt_dm_disconnect(l->peer);
		free(l);
		l = NULL;
	}
	list_for_each_entry_safe(w, tmp, &waiters, link) {
		list_del(&w->link);
		w->cb(l ? l->peer : NULL, status, w->arg);
		free(w);
	}
}

static void tpt_link_connected(struct tpt_dm_peer *peer, int status, void *arg)
{
	struct tpt_link *l = arg;

	(void)peer;
	if (status)
		eprintf("tpt: connecting to peer %u of array %" PRIx64
			" failed: %s\n", l->peer_id, l->array_id,
			strerror(-status));
	else
		l->connected = true;
	tpt_link_finish(l, status);
}

static void tpt_peer_down(struct tpt_dm_peer *peer, void *arg)
{
	struct tpt_link *l;

	(void)arg;
	list_for_each_entry(l, &tpt_links, link) {
		if (l->peer == peer) {
			eprintf("tpt: link to peer %u of array %" PRIx64
				" went down\n", l->peer_id, l->array_id);
			/* Next use reconnects. */
			tpt_link_finish(l, -ECONNRESET);
			return;
		}
	}
}

static int tpt_endpoint_text(const struct tpt_endpoint *ep, char *buf,
			     size_t len)
{
	int af = ep->family == TPT_AF_IPV4 ? AF_INET : AF_INET6;

	return inet_ntop(af, ep->addr, buf, len) ? 0 : -EINVAL;
}

void tpt_link_get(struct tpt_session *s, uint16_t peer_id, tpt_link_cb cb,
		  void *arg)
{
	const struct tpt_peer *entry = tpt_peer_list_find(s->peers, peer_id);
	struct tpt_link_waiter *w;
	struct tpt_dm_hello hello;
	struct tpt_link *l;
	char addr[INET6_ADDRSTRLEN];
	int err;

	if (!entry) {
		cb(NULL, -ENOENT, arg);
		return;
	}
	l = tpt_link_find(s->peers->array_id, peer_id);
	if (l && l->connected) {
		cb(l->peer, 0, arg);
		return;
	}
	w = malloc(sizeof(*w));
	if (!w) {
		cb(NULL, -ENOMEM, arg);
		return;
	}
	w->cb = cb;
	w->arg = arg;
	if (l) {
		list_add_tail(&w->link, &l->waiters);
		return;
	}
	err = tpt_endpoint_text(&entry->ep, addr, sizeof(addr));
	l = err ? NULL : calloc(1, sizeof(*l));
	if (!l) {
		free(w);
		cb(NULL, err ? err : -ENOMEM, arg);
		return;
	}
	if (!peer_down_registered) {
		tpt_dm_set_peer_down_cb(tpt_target_dm(), tpt_peer_down, NULL);
		peer_down_registered = true;
	}
	l->array_id = s->peers->array_id;
	l->peer_id = peer_id;
	INIT_LIST_HEAD(&l->waiters);
	list_add_tail(&w->link, &l->waiters);
	list_add_tail(&l->link, &tpt_links);

	memset(&hello, 0, sizeof(hello));
	hello.role = TPT_DM_ROLE_TARGET;
	hello.peer_id = s->peers->self_id;
	hello.array_id = s->peers->array_id;
	memcpy(hello.token, entry->token, sizeof(hello.token));
	err = tpt_dm_connect(tpt_target_dm(), addr, entry->ep.port, &hello,
			     tpt_link_connected, l, &l->peer);
	if (err) {
		l->peer = NULL;
		tpt_link_finish(l, err);
	}
}

/* ---- admission of incoming datamover connections ---- */

static bool tpt_addr_matches(const struct tpt_endpoint *ep,
			     const struct sockaddr *src, socklen_t srclen)
{
	if (src->sa_family == AF_INET && srclen >= sizeof(struct sockaddr_in))
		return ep->family == TPT_AF_IPV4 &&
		       !memcmp(ep->addr,
			       &((const struct sockaddr_in *)src)->sin_addr, 4);
	if (src->sa_family == AF_INET6 && srclen >= sizeof(struct sockaddr_in6))
		return ep->family == TPT_AF_IPV6 &&
		       !memcmp(ep->addr,
			       &((const struct sockaddr_in6 *)src)->sin6_addr, 16);
	return false;
}

int tpt_dm_accept_peer(void *arg, const struct tpt_dm_hello *hello,
		       const struct sockaddr *src, socklen_t srclen)
{
	struct tpt_session *s;

	(void)arg;
	list_for_each_entry(s, &tpt_sessions, link) {
		const struct tpt_peer *self, *them;

		if (!s->peers || s->peers->array_id != hello->array_id)
			continue;
		self = tpt_peer_list_find(s->peers, s->peers->self_id);
		them = tpt_peer_list_find(s->peers, hello->peer_id);
		if (!self || !them || them->role != hello->role ||
		    memcmp(self->token, hello->token, sizeof(self->token)))
			continue;
		if (!tpt_addr_matches(&them->ep, src, srclen))
			continue;
		return 0;
	}
	/* Not a member of an array we serve as a target: maybe one we
	 * control.  The datamover logs a refusal with the source address. */
	return tpt_ctl_accept_peer(hello, src, srclen);
}
