/*
 * Datamover links from this target to its peers, and admission of the
 * peers' links to it (paper III-B, docs/protocol.md section 6.4).
 *
 * Links are outgoing datamover connections, one per (array, peer): a
 * target only ever connects to entries of a list its controller
 * delivered, and only admits incoming connections that present an
 * entry's id, the array id and this target's own token from an address
 * the entry names.
 *
 * Both live in the datamover scope of the array whose list named the peer
 * (tpt_datamover_scope: its id and key): a connection admitted by one
 * binding's list reaches that array's slots and nothing of another array
 * this tgtd serves, and a link moves data between the array's buffers
 * only.  A link to a host is the exception: it lives in a scope of that
 * host's own (tpt_datamover_host_scope), where no slot is registered, and
 * xfer.c registers each piece it moves there for the transfer's time.
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
#include "work.h"
#include "tpt_target.h"

struct tpt_link_waiter {
	struct list_head link;
	tpt_link_cb cb;
	void *arg;
};

/*
 * A link is keyed by everything that authenticates the peer, not only by
 * its id: a list that names the same id with another token or address
 * (a later generation, or a stranger's list with a copied array id) gets
 * a link of its own and never one built for somebody else's entry.  The
 * scope is part of the key too: a stranger's list may copy an entry
 * whole, but not the array key, and a link serves one scope's buffers.
 */
struct tpt_link {
	struct list_head link;
	uint64_t scope;			/* tpt_link_scope(): the link's own */
	uint64_t list_scope;		/* the scope of the list that named it */
	uint64_t array_id;
	uint16_t peer_id;
	uint8_t role;
	uint8_t token[TPT_AUTH_TOKEN_LEN];
	struct tpt_endpoint ep;
	struct tpt_dm_peer *peer;
	bool connected;
	bool finished;			/* failed: going away */
	struct list_head waiters;
};

static LIST_HEAD(tpt_links);

/* tpt_xfer_timeout: how long a link may move nothing while transfers
 * wait on it (or stay unconnected) before it is dropped.  Below the
 * controller's command timeout at its shortest fail_timeout (13 s), so
 * that the controller hears which peer this box could not reach before
 * it gives up on this box itself. */
#define TPT_DEFAULT_XFER_TIMEOUT 10

static unsigned int xfer_timeout = TPT_DEFAULT_XFER_TIMEOUT;
static struct tgt_work stall_work;

/* The scope a link to @entry of @s's list lives in. */
static uint64_t tpt_link_scope(const struct tpt_session *s,
			       const struct tpt_peer *entry)
{
	if (entry->role == TPT_ROLE_HOST)
		return tpt_datamover_host_scope(s->scope, entry->id,
						entry->token);
	return s->scope;
}

/* Whether @l was built for @entry of @s's list.  The link's own scope
 * is a hash of the list's scope and the entry, so comparing those says
 * the same without hashing on every transfer. */
static bool tpt_link_is_for(const struct tpt_link *l,
			    const struct tpt_session *s,
			    const struct tpt_peer *entry)
{
	return l->list_scope == s->scope && l->array_id == s->peers->array_id &&
	       l->peer_id == entry->id && l->role == entry->role &&
	       !memcmp(l->token, entry->token, sizeof(l->token)) &&
	       l->ep.family == entry->ep.family && l->ep.port == entry->ep.port &&
	       !memcmp(l->ep.addr, entry->ep.addr, sizeof(l->ep.addr));
}

static struct tpt_link *tpt_link_find(const struct tpt_session *s,
				      const struct tpt_peer *entry)
{
	struct tpt_link *l;

	list_for_each_entry(l, &tpt_links, link)
		if (tpt_link_is_for(l, s, entry))
			return l;
	return NULL;
}

static void tpt_link_finish(struct tpt_link *l, int status)
{
	struct tpt_link_waiter *w, *tmp;
	LIST_HEAD(waiters);

	list_splice_init(&l->waiters, &waiters);
	if (status) {
		l->finished = true;
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
	/* A link dropped while connecting: tpt_link_finish() is
	 * disconnecting it and calls its waiters itself. */
	if (l->finished)
		return;
	if (status)
		eprintf("tpt: connecting to peer %u of array %" PRIx64
			" failed: %s\n", l->peer_id, l->array_id,
			strerror(-status));
	else
		l->connected = true;
	tpt_link_finish(l, status);
}

static void tpt_peer_down(struct tpt_dm_peer *peer)
{
	struct tpt_link *l;

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
	l = tpt_link_find(s, entry);
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
	l->scope = tpt_link_scope(s, entry);
	l->list_scope = s->scope;
	l->role = entry->role;
	l->array_id = s->peers->array_id;
	l->peer_id = peer_id;
	memcpy(l->token, entry->token, sizeof(l->token));
	l->ep = entry->ep;
	INIT_LIST_HEAD(&l->waiters);
	list_add_tail(&w->link, &l->waiters);
	list_add_tail(&l->link, &tpt_links);

	memset(&hello, 0, sizeof(hello));
	hello.role = TPT_DM_ROLE_TARGET;
	hello.peer_id = s->peers->self_id;
	hello.array_id = s->peers->array_id;
	memcpy(hello.token, entry->token, sizeof(hello.token));
	err = tpt_dm_connect(tpt_datamover(), l->scope, addr, entry->ep.port,
			     &hello, tpt_link_connected, l, &l->peer);
	if (err) {
		l->peer = NULL;
		tpt_link_finish(l, err);
		return;
	}
	/* A peer whose packets stop reaching us (a route lost between two
	 * boxes that both still answer the controller, a host's box gone
	 * without a reset) would hold the transfers waiting on it, and
	 * their stripes, as long as TCP retransmits, until the
	 * controller's command timeout failed this box for it.  Dropped,
	 * the commands name the peer (TIMED OUT, UNREACHABLE), and the
	 * controller decides: a host's request fails alone, a target that
	 * answers it but not us is a broken pair (protocol.md 9.1). */
	tpt_dm_peer_set_stall_limit(l->peer, xfer_timeout);
}

void tpt_links_set_xfer_timeout(unsigned int seconds)
{
	struct tpt_link *l;

	xfer_timeout = seconds;
	list_for_each_entry(l, &tpt_links, link)
		if (l->peer)
			tpt_dm_peer_set_stall_limit(l->peer, seconds);
}

unsigned int tpt_links_xfer_timeout(void)
{
	return xfer_timeout;
}

static void tpt_links_watch(void *data)
{
	(void)data;
	if (tpt_datamover())
		tpt_dm_expire_stalled(tpt_datamover());
	add_work(&stall_work, 1);
}

void tpt_links_watch_start(void)
{
	stall_work.func = tpt_links_watch;
	add_work(&stall_work, 1);
}

/* Whether a live list still names what @l was built for. */
static bool tpt_link_listed(const struct tpt_link *l)
{
	struct tpt_session *s;

	for (s = tpt_session_first(); s; s = tpt_session_next(s)) {
		const struct tpt_peer *entry;

		if (!s->peers || s->superseded)
			continue;
		entry = tpt_peer_list_find(s->peers, l->peer_id);
		if (entry && tpt_link_is_for(l, s, entry))
			return true;
	}
	return false;
}

void tpt_links_prune(void)
{
	struct tpt_link *l, *tmp;

	/* A link still connecting goes too: connecting to a box whose
	 * cable is out takes minutes of SYN retries, and the transfers
	 * waiting for it must fail now that the controller gave up on it. */
	list_for_each_entry_safe(l, tmp, &tpt_links, link) {
		if (tpt_link_listed(l))
			continue;
		eprintf("tpt: peer %u of array %" PRIx64 " is no longer listed: "
			"link dropped\n", l->peer_id, l->array_id);
		tpt_link_finish(l, -ECONNRESET);
	}
	/* And the other way: a peer no list names any more has no business
	 * in our slots.  A box that hung mid-transfer and wakes up after the
	 * controller failed it would otherwise go on writing into slots
	 * that new requests use by then. */
	if (tpt_datamover())
		tpt_dm_readmit(tpt_datamover());
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

/*
 * A peer is admitted by the list that names it, into that list's array's
 * scope.  Lists with the same array id but different keys could both
 * name it only if one copied the other's entries, tokens included: then
 * nobody can tell which array the peer is for, and it is refused rather
 * than let into the wrong one.
 */
static int tpt_accept_peer(const struct tpt_dm_hello *hello,
			   const struct sockaddr *src, socklen_t srclen,
			   uint8_t token[TPT_DM_TOKEN_LEN], uint64_t *scope)
{
	const struct tpt_session *admitted = NULL;
	struct tpt_session *s;

	for (s = tpt_session_first(); s; s = tpt_session_next(s)) {
		const struct tpt_peer *self, *them;

		if (!s->peers || s->superseded ||
		    s->peers->array_id != hello->array_id)
			continue;
		self = tpt_peer_list_find(s->peers, s->peers->self_id);
		them = tpt_peer_list_find(s->peers, hello->peer_id);
		if (!self || !them || them->role != hello->role ||
		    !tpt_dm_hello_proves(hello, self->token))
			continue;
		if (!tpt_addr_matches(&them->ep, src, srclen))
			continue;
		if (admitted && admitted->scope != s->scope) {
			eprintf("tpt: datamover peer %u of array %" PRIx64
				" is named alike by the lists of nexuses %"
				PRIu64 " and %" PRIu64 ", which have different "
				"array keys: refused\n", hello->peer_id,
				hello->array_id, admitted->itn_id, s->itn_id);
			return -EPERM;
		}
		if (!admitted) {
			memcpy(token, self->token, TPT_DM_TOKEN_LEN);
			*scope = s->scope;
			admitted = s;
		}
	}
	return admitted ? 0 : -EPERM;
}

struct tpt_datamover_user tpt_target_dm_user = {
	.name = "target",
	.accept = tpt_accept_peer,
	.peer_down = tpt_peer_down,
};
