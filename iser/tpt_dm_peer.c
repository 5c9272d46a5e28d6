/* Datamover peers: the hello, connecting, accepting (with the owner's
 * anti-spoofing decision, paper III-B), connection events and teardown.
 *
 * Lifetime: a peer this side connected belongs to its owner until
 * tpt_dm_disconnect(); an accepted peer belongs to the datamover and ends
 * when it goes down.  Either way the memory stays until the provider has
 * returned every chunk context of the peer (dm_peer_reap), and so does
 * the peer's hold on its scope: the endpoint lives in the scope's domain
 * and its completions arrive on the scope's CQ. */
#include "iser/tpt_dm_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

/* --- hello codec --- */

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	put_be16(p, (uint16_t)(v >> 16));
	put_be16(p + 2, (uint16_t)v);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)get_be16(p) << 16 | get_be16(p + 2);
}

static uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* HMAC-SHA256 keyed with @token over @label and the signed part of the
 * hello, cut to 16 bytes: the hello's proof ("H") or the answer ("A"). */
static void dm_hello_mac(const uint8_t token[TPT_DM_TOKEN_LEN], char label,
			 const uint8_t signed_part[DM_HELLO_SIGNED_LEN],
			 uint8_t mac[TPT_DM_TOKEN_LEN])
{
	struct hmac_sha256_ctx ctx;

	hmac_sha256_set_key(&ctx, TPT_DM_TOKEN_LEN, token);
	hmac_sha256_update(&ctx, 1, (const uint8_t *)&label);
	hmac_sha256_update(&ctx, DM_HELLO_SIGNED_LEN, signed_part);
	hmac_sha256_digest(&ctx, TPT_DM_TOKEN_LEN, mac);
}

static void dm_hello_signed_part(const struct tpt_dm_hello *hello,
				 uint8_t wire[DM_HELLO_SIGNED_LEN])
{
	put_be32(wire, DM_HELLO_MAGIC);
	wire[4] = DM_HELLO_VERSION;
	wire[5] = hello->role;
	put_be16(wire + 6, hello->peer_id);
	put_be64(wire + 8, hello->array_id);
	put_be64(wire + 16, hello->counter);
}

void dm_hello_encode(struct tpt_dm_hello *hello,
		     uint8_t wire[DM_HELLO_WIRE_LEN])
{
	dm_hello_signed_part(hello, wire);
	dm_hello_mac(hello->token, 'H', wire, hello->proof);
	memcpy(wire + DM_HELLO_SIGNED_LEN, hello->proof, TPT_DM_TOKEN_LEN);
}

int dm_hello_decode(const uint8_t *wire, size_t len,
		    struct tpt_dm_hello *hello)
{
	/* Longer is fine: a later version may append fields, and some
	 * providers pad connection data. */
	if (len < DM_HELLO_WIRE_LEN || get_be32(wire) != DM_HELLO_MAGIC ||
	    wire[4] != DM_HELLO_VERSION)
		return -EPROTO;
	memset(hello, 0, sizeof(*hello));
	hello->role = wire[5];
	hello->peer_id = get_be16(wire + 6);
	hello->array_id = get_be64(wire + 8);
	hello->counter = get_be64(wire + 16);
	memcpy(hello->proof, wire + DM_HELLO_SIGNED_LEN, TPT_DM_TOKEN_LEN);
	return 0;
}

void dm_hello_answer(const struct tpt_dm_hello *hello,
		     const uint8_t token[TPT_DM_TOKEN_LEN],
		     uint8_t answer[DM_HELLO_ANSWER_LEN])
{
	uint8_t signed_part[DM_HELLO_SIGNED_LEN];

	dm_hello_signed_part(hello, signed_part);
	dm_hello_mac(token, 'A', signed_part, answer);
}

bool tpt_dm_hello_proves(const struct tpt_dm_hello *hello,
			 const uint8_t token[TPT_DM_TOKEN_LEN])
{
	uint8_t signed_part[DM_HELLO_SIGNED_LEN], mac[TPT_DM_TOKEN_LEN];

	dm_hello_signed_part(hello, signed_part);
	dm_hello_mac(token, 'H', signed_part, mac);
	return memeql_sec(mac, hello->proof, sizeof(mac));
}

/* A counter for our next hello: nanoseconds of the wall clock, so that it
 * keeps growing across restarts of this process, and never the same
 * twice within it. */
static uint64_t dm_next_counter(struct tpt_dm *dm)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	dm->last_counter = now > dm->last_counter ? now : dm->last_counter + 1;
	return dm->last_counter;
}

/* Remembers @hello's counter if it is above the last one accepted from
 * the same peer: false for a replay (or a peer whose clock went back). */
static bool dm_counter_fresh(struct tpt_dm *dm, const struct tpt_dm_hello *hello)
{
	struct dm_seen_peer *seen;
	struct dm_list *pos;

	for (pos = dm->seen_peers.next; pos != &dm->seen_peers; pos = pos->next) {
		seen = dm_container_of(pos, struct dm_seen_peer, link);
		if (seen->array_id != hello->array_id ||
		    seen->role != hello->role || seen->peer_id != hello->peer_id)
			continue;
		if (hello->counter <= seen->counter)
			return false;
		seen->counter = hello->counter;
		return true;
	}
	seen = calloc(1, sizeof(*seen));
	if (!seen)
		return false;
	seen->array_id = hello->array_id;
	seen->role = hello->role;
	seen->peer_id = hello->peer_id;
	seen->counter = hello->counter;
	dm_list_add_tail(&dm->seen_peers, &seen->link);
	return true;
}

void dm_seen_peers_free(struct tpt_dm *dm)
{
	while (dm->seen_peers.next != &dm->seen_peers) {
		struct dm_seen_peer *seen = dm_container_of(
			dm->seen_peers.next, struct dm_seen_peer, link);

		dm_list_del(&seen->link);
		free(seen);
	}
}

/* --- peer objects --- */

static struct tpt_dm_peer *dm_peer_alloc(struct tpt_dm *dm)
{
	struct tpt_dm_peer *peer;
	unsigned int i;

	peer = calloc(1, sizeof(*peer));
	if (!peer)
		return NULL;
	peer->chunks = calloc(dm->cfg.max_inflight, sizeof(*peer->chunks));
	if (!peer->chunks) {
		free(peer);
		return NULL;
	}
	peer->dm = dm;
	dm_list_init(&peer->link);
	dm_list_init(&peer->queued);
	dm_list_init(&peer->posted);
	for (i = 0; i < dm->cfg.max_inflight; i++) {
		peer->chunks[i].peer = peer;
		peer->chunks[i].next_free = peer->free_chunks;
		peer->free_chunks = &peer->chunks[i];
	}
	return peer;
}

void dm_peer_free(struct tpt_dm_peer *peer)
{
	dm_list_del(&peer->link);
	if (peer->scope)
		dm_scope_put(peer->scope);
	free(peer->chunks);
	free(peer);
}

/* Frees peers nobody needs any more (from dm_reap, never while busy). */
void dm_peer_reap(struct tpt_dm *dm)
{
	struct dm_list *pos, *next;

	for (pos = dm->peers.next; pos != &dm->peers; pos = next) {
		struct tpt_dm_peer *peer =
			dm_container_of(pos, struct tpt_dm_peer, link);

		next = pos->next;
		if (peer->released && peer->state == DM_PEER_DOWN &&
		    !peer->chunks_posted)
			dm_peer_free(peer);
	}
}

static void dm_format_addr(const struct sockaddr *sa, socklen_t len,
			   char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN], port[8];

	/* Numeric only: a reverse lookup would block the event loop. */
	if (!sa || !len ||
	    getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(buf, size, "(unknown address)");
	else if (sa->sa_family == AF_INET6)
		snprintf(buf, size, "[%s]:%s", host, port);
	else
		snprintf(buf, size, "%s:%s", host, port);
}

int tpt_dm_connect(struct tpt_dm *dm, uint64_t scope, const char *addr,
		   uint16_t port, const struct tpt_dm_hello *hello,
		   tpt_dm_connect_cb cb, void *arg, struct tpt_dm_peer **out)
{
	uint8_t wire[DM_HELLO_WIRE_LEN];
	struct tpt_dm_peer *peer;
	struct fi_info *info = NULL;
	int ret;

	if (out)
		*out = NULL;
	if (!addr || !hello || !out || !port)
		return dm_error(dm, -EINVAL, "connect: missing address, "
				"port or hello");
	if (dm->closing)
		return dm_error(dm, -ESHUTDOWN, "connect: context closing");
	ret = tpt_dm_fabric_dest_info(&dm->fab, addr, port, &info);
	if (ret)
		return ret;
	peer = dm_peer_alloc(dm);
	if (!peer) {
		fi_freeinfo(info);
		return dm_error(dm, -ENOMEM, "out of memory");
	}
	ret = dm_scope_get(dm, scope, &peer->scope);
	if (ret)
		goto fail;
	peer->hello = *hello;
	if (!peer->hello.counter)
		peer->hello.counter = dm_next_counter(dm);
	peer->connect_cb = cb;
	peer->connect_arg = arg;
	dm_format_addr(info->dest_addr, (socklen_t)info->dest_addrlen,
		       peer->addr_str, sizeof(peer->addr_str));
	ret = tpt_dm_fabric_ep_open(&dm->fab, &peer->scope->dom, info, peer,
				    &peer->ep);
	if (ret)
		goto fail;
	dm_hello_encode(&peer->hello, wire);
	ret = fi_connect(peer->ep, info->dest_addr, wire, sizeof(wire));
	if (ret) {
		ret = dm_error(dm, tpt_dm_fabric_errno(ret), "fi_connect %s: %s",
			       peer->addr_str, fi_strerror(-ret));
		fi_close(&peer->ep->fid);
		goto fail;
	}
	fi_freeinfo(info);
	peer->state = DM_PEER_CONNECTING;
	peer->last_progress = dm_now_ms();
	dm_list_add_tail(&dm->peers, &peer->link);
	*out = peer;
	return 0;

fail:
	fi_freeinfo(info);
	dm_peer_free(peer);
	return ret;
}

void tpt_dm_disconnect(struct tpt_dm_peer *peer)
{
	struct tpt_dm *dm;

	if (!peer || peer->released)
		return;
	dm = peer->dm;
	dm->busy++;
	peer->released = true;
	if (peer->state != DM_PEER_DOWN)
		dm_peer_teardown(peer, -ECANCELED, false);
	dm->busy--;
	dm_reap(dm);
}

/* Whether the accept policy still lets @peer in, into the scope its
 * connection lives in. */
static bool dm_still_admitted(struct tpt_dm *dm, struct tpt_dm_peer *peer)
{
	uint8_t token[TPT_DM_TOKEN_LEN];
	uint64_t scope = 0;

	if (!dm->cfg.accept)
		return false;
	dm->callbacks_run++;
	if (dm->cfg.accept(dm->cfg.accept_arg, &peer->hello,
			   peer->srclen ? (struct sockaddr *)&peer->src : NULL,
			   peer->srclen, token, &scope))
		return false;
	return tpt_dm_hello_proves(&peer->hello, token) &&
	       peer->scope && scope == peer->scope->id;
}

void tpt_dm_readmit(struct tpt_dm *dm)
{
	struct dm_list *pos;

	dm->busy++;
	/* Peers are only freed by dm_reap, never while busy: a callback
	 * below may add peers, none goes away under us. */
	for (pos = dm->peers.next; pos != &dm->peers; pos = pos->next) {
		struct tpt_dm_peer *peer =
			dm_container_of(pos, struct tpt_dm_peer, link);

		if (!peer->accepted || peer->state == DM_PEER_DOWN ||
		    dm_still_admitted(dm, peer))
			continue;
		dm_log(dm, "peer id %u (role %u, array %llu) from %s is no "
		       "longer admitted: disconnected", peer->hello.peer_id,
		       peer->hello.role,
		       (unsigned long long)peer->hello.array_id,
		       peer->addr_str);
		dm_peer_teardown(peer, -ECONNRESET, true);
	}
	dm->busy--;
	dm_reap(dm);
}

void tpt_dm_peer_set_stall_limit(struct tpt_dm_peer *peer,
				 unsigned int seconds)
{
	peer->stall_limit = seconds;
}

/* Whether @peer waits on its connection, or has operations outstanding,
 * and nothing moved for its stall limit. */
static bool dm_peer_stalled(const struct tpt_dm_peer *peer, uint64_t now)
{
	if (!peer->stall_limit ||
	    now - peer->last_progress < (uint64_t)peer->stall_limit * 1000)
		return false;
	if (peer->state == DM_PEER_CONNECTING)
		return true;
	return peer->state == DM_PEER_UP &&
	       (!dm_list_empty(&peer->queued) || !dm_list_empty(&peer->posted));
}

unsigned int tpt_dm_expire_stalled(struct tpt_dm *dm)
{
	uint64_t now = dm_now_ms();
	unsigned int dropped = 0;
	struct dm_list *pos;

	dm->busy++;
	/* As in tpt_dm_readmit(): no peer is freed while busy, and a torn
	 * down one is DOWN, which the walk passes by. */
	for (pos = dm->peers.next; pos != &dm->peers; pos = pos->next) {
		struct tpt_dm_peer *peer =
			dm_container_of(pos, struct tpt_dm_peer, link);

		if (!dm_peer_stalled(peer, now))
			continue;
		dm_log(dm, "peer %s: %s for %u s: disconnected", peer->addr_str,
		       peer->state == DM_PEER_CONNECTING ?
		       "no connection" : "no transfer moved",
		       (unsigned int)((now - peer->last_progress) / 1000));
		dm_peer_teardown(peer, -ETIMEDOUT, true);
		dropped++;
	}
	dm->busy--;
	dm_reap(dm);
	return dropped;
}

const struct tpt_dm_hello *tpt_dm_peer_hello(const struct tpt_dm_peer *peer)
{
	return &peer->hello;
}

uint64_t tpt_dm_peer_scope(const struct tpt_dm_peer *peer)
{
	return peer->scope ? peer->scope->id : 0;
}

void dm_peer_teardown(struct tpt_dm_peer *peer, int status, bool notify_down)
{
	struct tpt_dm *dm = peer->dm;
	enum dm_peer_state was = peer->state;
	tpt_dm_connect_cb connect_cb;

	if (was == DM_PEER_DOWN)
		return;
	dm->busy++;
	peer->state = DM_PEER_DOWN;
	peer->kick_pending = false;
	peer->fail_pending = 0;
	/* Endpoint first: once it is closed the provider no longer reads or
	 * writes any buffer of ours, so callbacks may release them.  The
	 * tcp provider reports what was still queued as cancelled
	 * completions, which come back to us as orphan chunks. */
	if (peer->ep) {
		if (was == DM_PEER_UP)
			fi_shutdown(peer->ep, 0);
		fi_close(&peer->ep->fid);
		peer->ep = NULL;
	}
	dm_peer_fail_ops(peer, status);
	connect_cb = peer->connect_cb;
	peer->connect_cb = NULL;
	if (was == DM_PEER_CONNECTING && connect_cb) {
		dm->callbacks_run++;
		connect_cb(peer, status, peer->connect_arg);
	} else if (was == DM_PEER_UP && notify_down && !peer->released &&
		   dm->peer_down_cb) {
		/* Not for a handle its owner let go of in a callback above. */
		dm->callbacks_run++;
		dm->peer_down_cb(peer, dm->peer_down_arg);
	}
	if (peer->accepted)
		peer->released = true;
	dm->busy--;
}

/* --- connection events --- */

static void dm_refuse(struct tpt_dm *dm, struct fi_info *info,
		      const struct tpt_dm_hello *hello, const char *from,
		      const char *why)
{
	int ret;

	dm->stats.refused_peers++;
	if (hello)
		dm_log(dm, "refused peer id %u (role %u, array %llu) from "
		       "%s: %s", hello->peer_id, hello->role,
		       (unsigned long long)hello->array_id, from, why);
	else
		dm_log(dm, "refused connection from %s: %s", from, why);
	ret = fi_reject(dm->fab.pep, info->handle, NULL, 0);
	if (ret)
		dm_log(dm, "fi_reject %s: %s", from, fi_strerror(-ret));
}

static void dm_on_connreq(struct tpt_dm *dm, struct fi_eq_cm_entry *entry,
			  size_t datalen)
{
	struct fi_info *info = entry->info;
	const struct sockaddr *src = NULL;
	socklen_t srclen = 0;
	uint8_t token[TPT_DM_TOKEN_LEN], answer[DM_HELLO_ANSWER_LEN];
	struct tpt_dm_hello hello;
	struct tpt_dm_peer *peer;
	uint64_t scope = 0;
	char from[64];
	int ret;

	if (info->dest_addr && (info->addr_format == FI_SOCKADDR ||
				info->addr_format == FI_SOCKADDR_IN ||
				info->addr_format == FI_SOCKADDR_IN6)) {
		src = info->dest_addr;
		srclen = (socklen_t)info->dest_addrlen;
	}
	dm_format_addr(src, srclen, from, sizeof(from));

	if (dm_hello_decode(entry->data, datalen, &hello)) {
		dm_refuse(dm, info, NULL, from, "malformed hello");
		goto out;
	}
	if (dm->closing) {
		dm_refuse(dm, info, &hello, from, "context closing");
		goto out;
	}
	if (!dm->cfg.accept) {
		dm_refuse(dm, info, &hello, from, "no accept policy");
		goto out;
	}
	dm->callbacks_run++;
	ret = dm->cfg.accept(dm->cfg.accept_arg, &hello, src, srclen, token,
			     &scope);
	if (ret) {
		dm_refuse(dm, info, &hello, from,
			  strerror(ret < 0 ? -ret : ret));
		goto out;
	}
	/* Checked here, not left to the owner: no owner can forget it. */
	if (!tpt_dm_hello_proves(&hello, token)) {
		dm_refuse(dm, info, &hello, from, "wrong proof of the token");
		goto out;
	}
	if (!dm_counter_fresh(dm, &hello)) {
		dm->stats.replayed_hellos++;
		dm_refuse(dm, info, &hello, from, "replayed hello (counter "
			  "not above the last one accepted)");
		goto out;
	}
	dm_hello_answer(&hello, token, answer);

	peer = dm_peer_alloc(dm);
	if (!peer) {
		dm_refuse(dm, info, &hello, from, "out of memory");
		goto out;
	}
	peer->accepted = true;
	peer->hello = hello;
	if (src && srclen <= sizeof(peer->src)) {
		memcpy(&peer->src, src, srclen);
		peer->srclen = srclen;
	}
	snprintf(peer->addr_str, sizeof(peer->addr_str), "%s", from);
	/* The connection lives in the scope the owner named: its endpoint
	 * reaches that scope's registrations and no others. */
	if (dm_scope_get(dm, scope, &peer->scope) ||
	    tpt_dm_fabric_ep_open(&dm->fab, &peer->scope->dom, info, peer,
				  &peer->ep)) {
		dm_refuse(dm, info, &hello, from, dm->fab.errbuf);
		dm_peer_free(peer);
		goto out;
	}
	ret = fi_accept(peer->ep, answer, sizeof(answer));
	if (ret) {
		dm_log(dm, "fi_accept %s: %s", from, fi_strerror(-ret));
		fi_close(&peer->ep->fid);
		dm_peer_free(peer);
		goto out;
	}
	peer->state = DM_PEER_ACCEPTING;
	dm_list_add_tail(&dm->peers, &peer->link);
out:
	fi_freeinfo(info);
}

static void dm_on_connected(struct tpt_dm *dm, struct tpt_dm_peer *peer,
			    const uint8_t *data, size_t len)
{
	uint8_t answer[DM_HELLO_ANSWER_LEN];
	tpt_dm_connect_cb cb;

	if (peer->state == DM_PEER_ACCEPTING) {
		peer->state = DM_PEER_UP;
		if (dm->peer_up_cb)
			dm->peer_up_cb(peer, dm->peer_up_arg);
		return;
	}
	if (peer->state != DM_PEER_CONNECTING)
		return;
	/* Mutual: whoever answered must know the token too, or it is not
	 * the peer the list named (an address taken over, say). */
	dm_hello_answer(&peer->hello, peer->hello.token, answer);
	if (len < sizeof(answer) || !memeql_sec(data, answer, sizeof(answer))) {
		dm->stats.refused_peers++;
		dm_log(dm, "peer %s accepted without proving that it knows "
		       "the token: dropped", peer->addr_str);
		dm_peer_teardown(peer, -EACCES, false);
		return;
	}
	peer->state = DM_PEER_UP;
	cb = peer->connect_cb;
	peer->connect_cb = NULL;
	if (cb) {
		dm->callbacks_run++;
		cb(peer, 0, peer->connect_arg);
	}
}

/* What a failed or lost connection means to the owner. */
static int dm_cm_errno(int fi_err)
{
	/* libfabric's codes below FI_ERRNO_OFFSET are errno values. */
	switch (fi_err) {
	case ECONNREFUSED:
		return -ECONNREFUSED;
	case ETIMEDOUT:
		return -ETIMEDOUT;
	case EHOSTUNREACH:
	case ENETUNREACH:
		return -EHOSTUNREACH;
	default:
		return -ECONNRESET;
	}
}

static void dm_on_eq_error(struct tpt_dm *dm)
{
	struct fi_eq_err_entry err;
	struct tpt_dm_peer *peer;
	ssize_t ret;

	memset(&err, 0, sizeof(err));
	ret = fi_eq_readerr(dm->fab.eq, &err, 0);
	if (ret < 0) {
		if (ret != -FI_EAGAIN)
			dm_log(dm, "fi_eq_readerr: %s", fi_strerror((int)-ret));
		return;
	}
	if (!err.fid || (dm->fab.pep && err.fid == &dm->fab.pep->fid)) {
		dm_log(dm, "listener error: %s",
		       fi_eq_strerror(dm->fab.eq, err.prov_errno, err.err_data,
				      NULL, 0));
		return;
	}
	peer = err.fid->context;
	if (!peer || peer->state == DM_PEER_DOWN)
		return;
	if (peer->state != DM_PEER_ACCEPTING && err.prov_errno)
		dm_log(dm, "peer %s: connection error: %s (%s)", peer->addr_str,
		       fi_strerror(err.err),
		       fi_eq_strerror(dm->fab.eq, err.prov_errno, err.err_data,
				      NULL, 0));
	else if (peer->state != DM_PEER_ACCEPTING)
		dm_log(dm, "peer %s: connection error: %s", peer->addr_str,
		       fi_strerror(err.err));
	if (peer->state == DM_PEER_CONNECTING)
		dm_peer_teardown(peer, dm_cm_errno(err.err), false);
	else
		dm_peer_teardown(peer, -ECONNRESET, true);
}

int dm_eq_progress(struct tpt_dm *dm)
{
	/* A cm entry followed by room for any provider's connection data. */
	union {
		struct fi_eq_cm_entry cm;
		uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
	} ev;
	struct tpt_dm_peer *peer;
	uint32_t event;
	ssize_t ret;
	int handled = 0;

	for (;;) {
		ret = fi_eq_read(dm->fab.eq, &event, &ev, sizeof(ev), 0);
		if (ret == -FI_EAGAIN)
			break;
		if (ret == -FI_EAVAIL) {
			dm_on_eq_error(dm);
			handled++;
			continue;
		}
		if (ret < 0)
			return dm_error(dm, tpt_dm_fabric_errno(ret), "fi_eq_read: %s",
					fi_strerror((int)-ret));
		handled++;
		switch (event) {
		case FI_CONNREQ:
			dm_on_connreq(dm, &ev.cm,
				      (size_t)ret - sizeof(ev.cm));
			break;
		case FI_CONNECTED:
			peer = ev.cm.fid->context;
			if (peer)
				dm_on_connected(dm, peer, ev.cm.data,
						(size_t)ret - sizeof(ev.cm));
			break;
		case FI_SHUTDOWN:
			peer = ev.cm.fid->context;
			if (!peer || peer->state == DM_PEER_DOWN)
				break;
			if (peer->state == DM_PEER_UP)
				dm_log(dm, "peer %s went away", peer->addr_str);
			dm_peer_teardown(peer, -ECONNRESET, true);
			break;
		default:
			dm_log(dm, "unexpected EQ event %u", event);
			break;
		}
	}
	return handled;
}
