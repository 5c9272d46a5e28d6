/* The TPT-RAID datamover: one-sided RMA between targets, hosts and the
 * controller over libfabric (provider "tcp" without RDMA hardware, "verbs"
 * with it), shaped after the paper's iSER primitives (III-G):
 *
 *   Register_Buffer / Deregister_Buffer  tpt_dm_buf_get/put, tpt_dm_register
 *   Put_Data (RMA write to a peer STag)  tpt_dm_put
 *   Get_Data (RMA read from a peer STag) tpt_dm_get
 *
 * Async-first, like libiscsi: every operation takes a completion callback
 * and nothing blocks.  The owner polls one file descriptor
 * (tpt_dm_event_fd) from its own event loop — tgtd's epoll loop in our
 * targets — and calls tpt_dm_progress() when it is readable; callbacks run
 * from inside tpt_dm_progress() only.
 *
 * Scopes keep the arrays of one process apart.  Every registration and
 * every peer belongs to one scope, named by a 64-bit id the owner chooses
 * (0: the default scope, for owners with nothing to keep apart).  Each
 * scope is a libfabric domain of its own, so a peer reaches only the
 * registrations of its scope: an STag of another scope, even the exact
 * one, fails like an unknown one.  Owners name the scope of an array
 * after its authenticated identity (id and key), never after anything a
 * stranger can copy.  A scope is opened by the first registration or
 * peer that names it and closed when the last is gone.
 *
 * Errors are negative errno values; tpt_dm_strerror() has the detail of the
 * last failure on a context. */
#ifndef TPT_ISER_DM_H
#define TPT_ISER_DM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct tpt_dm;
struct tpt_dm_peer;
struct tpt_dm_buf;

/* What a connecting peer presents in the connection request, and what the
 * accepting side checks against the peer list its controller delivered
 * (anti-spoofing, paper III-B).  Sent as libfabric connection data
 * (docs/protocol.md 6.5; the wire layout is in iser/tpt_dm_priv.h).
 *
 * The secret never travels: the connecting side proves that it knows the
 * accepting side's token (its AUTH TOKEN in the peer list, or a host's
 * key) with an HMAC over the hello and a counter that only grows, and
 * the accepting side proves it knows the same token in its answer.  A
 * hello that is short, lacks the magic or has another version is refused
 * before the accept callback sees it; so is one whose counter is not
 * above the last one accepted from that (array, role, peer id), which is
 * what makes a recorded hello useless. */
#define TPT_DM_TOKEN_LEN 16
enum tpt_dm_role {
	TPT_DM_ROLE_TARGET = 1,
	TPT_DM_ROLE_CONTROLLER = 2,
	TPT_DM_ROLE_HOST = 3,
};
struct tpt_dm_hello {
	uint8_t role;			/* enum tpt_dm_role */
	uint16_t peer_id;		/* the sender's id in the peer list */
	uint64_t array_id;		/* which array's peer list */
	/* tpt_dm_connect: the accepting side's token, the key of the
	 * proof; it is not sent.  Zero in a hello the accept callback
	 * gets. */
	uint8_t token[TPT_DM_TOKEN_LEN];
	/* tpt_dm_connect: 0 lets the datamover pick the next value of its
	 * clock-based counter (a tool may set one, to replay).  Accept:
	 * what the peer sent. */
	uint64_t counter;
	/* Accept: the proof the peer sent, for tpt_dm_hello_proves. */
	uint8_t proof[TPT_DM_TOKEN_LEN];
};

/* For the accept callback: true when @hello was made with @token (the one
 * this side expects the peer to know).  Compares in constant time. */
bool tpt_dm_hello_proves(const struct tpt_dm_hello *hello,
			 const uint8_t token[TPT_DM_TOKEN_LEN]);

/* Decide on an incoming connection: return 0 to accept, a negative errno
 * to refuse (the datamover logs the refusal with the source address).
 * src is the address the request came from.  Accepting means naming, in
 * @token, the token this peer must know (tpt_dm_hello_proves tells which
 * of several candidates it used), and in @scope (0 when left alone) the
 * scope its connection lives in: that of whatever admitted it, so that
 * it reaches those registrations only.  The datamover checks the proof
 * and the counter itself and refuses the peer when either fails. */
typedef int (*tpt_dm_accept_fn)(void *arg, const struct tpt_dm_hello *hello,
				const struct sockaddr *src, socklen_t srclen,
				uint8_t token[TPT_DM_TOKEN_LEN],
				uint64_t *scope);

struct tpt_dm_config {
	const char *provider;	/* NULL: tpt_dm_provider_choose() */
	const char *listen_addr;/* NULL: do not listen (pure initiator) */
	uint16_t listen_port;	/* 0: ephemeral, see tpt_dm_listen_port() */
	size_t pool_bytes;	/* pre-registered pool; 0: 64 MiB */
	size_t pool_buf_bytes;	/* size of one pool buffer; 0: 1 MiB */
	size_t chunk_bytes;	/* large transfers are split into chunks of
				 * this size, 0: 1 MiB */
	unsigned int max_inflight;	/* RMA chunks in flight per peer; 0: 16 */
	tpt_dm_accept_fn accept;	/* NULL: refuse every incoming peer */
	void *accept_arg;
	/* Log sink for refusals and transport errors; NULL: stderr. */
	void (*log)(void *arg, const char *msg);
	void *log_arg;
};

int tpt_dm_open(const struct tpt_dm_config *cfg, struct tpt_dm **out);
/* Closes every peer, fails their outstanding operations with -ECANCELED
 * (callbacks run; so do those of pending connects, with -ECANCELED),
 * deregisters every buffer.  Not from inside a datamover callback. */
void tpt_dm_close(struct tpt_dm *dm);

int tpt_dm_event_fd(const struct tpt_dm *dm);
/* Runs connection events and completions; never blocks.  Returns the
 * number of callbacks run, or a negative errno on a fatal context error.
 * Called from inside one of our callbacks it does nothing and returns 0.
 * When work is left over, the event fd stays readable. */
int tpt_dm_progress(struct tpt_dm *dm);
uint16_t tpt_dm_listen_port(const struct tpt_dm *dm);
const char *tpt_dm_provider_name(const struct tpt_dm *dm);
/* Whether RMA addresses are virtual addresses (FI_MR_VIRT_ADDR
 * providers such as verbs) rather than offsets into a registration
 * (tcp): the VIRT ADDR flag of a transfer descriptor. */
bool tpt_dm_virt_addr(const struct tpt_dm *dm);
const char *tpt_dm_strerror(const struct tpt_dm *dm);

/* --- peers --- */

/* status is 0 once connected, or a negative errno (-ECONNREFUSED when the
 * other side refused us, -EACCES when it accepted without proving that it
 * knows the token, -ECANCELED when disconnected or closed first).  Runs
 * exactly once. */
typedef void (*tpt_dm_connect_cb)(struct tpt_dm_peer *peer, int status,
				  void *arg);

/* A connection in @scope: its Put/Get take local buffers of that scope.
 * addr is a numeric IPv4/IPv6 address: resolving a name could block.  The
 * handle in *out is the owner's until tpt_dm_disconnect(), whatever
 * becomes of the connection (refused, failed, gone down): a dead peer
 * answers -ENOTCONN to tpt_dm_put/get but must still be disconnected. */
int tpt_dm_connect(struct tpt_dm *dm, uint64_t scope, const char *addr,
		   uint16_t port, const struct tpt_dm_hello *hello,
		   tpt_dm_connect_cb cb, void *arg, struct tpt_dm_peer **out);
/* Fails the peer's outstanding operations with -ECANCELED (and a pending
 * connect), then frees it.  No peer-down callback follows.  Safe from
 * inside callbacks. */
void tpt_dm_disconnect(struct tpt_dm_peer *peer);
/* Asks the accept policy again about every accepted connection and ends
 * those it no longer admits, or would admit into another scope, as if
 * they had gone down (their operations fail with -ECONNRESET, the
 * peer-down callback runs): the owner calls it when what its policy
 * rests on changed, e.g. a peer list that no longer names a peer. */
void tpt_dm_readmit(struct tpt_dm *dm);
/*
 * A peer that moves nothing for @seconds while it has operations
 * outstanding (no chunk completes), or whose connection is not up
 * @seconds after tpt_dm_connect(), is dropped by the next
 * tpt_dm_expire_stalled() as if its transport had failed: its operations
 * fail with -ETIMEDOUT, a pending connect's callback gets -ETIMEDOUT, an
 * up peer's peer-down callback runs.  0 (the default): never.  For peers
 * the owner has no other way to find gone: a connection whose packets
 * vanish (a cable out, a route lost) keeps its operations waiting as
 * long as TCP retransmits, a quarter of an hour.
 */
void tpt_dm_peer_set_stall_limit(struct tpt_dm_peer *peer,
				 unsigned int seconds);
/* Drops the peers past their stall limit: the owner calls it about once a
 * second.  How many it dropped. */
unsigned int tpt_dm_expire_stalled(struct tpt_dm *dm);
/* For accepted peers: who they said they were. */
const struct tpt_dm_hello *tpt_dm_peer_hello(const struct tpt_dm_peer *peer);
/* The scope the peer's connection lives in: its transfers take local
 * buffers registered there. */
uint64_t tpt_dm_peer_scope(const struct tpt_dm_peer *peer);
/* Called when an accepted or connected peer goes away (shutdown by the
 * other side or a transport error); outstanding operations have already
 * been failed with -ECONNRESET.  Not called for peers the owner
 * disconnected.  An accepted peer belongs to the datamover: its handle is
 * valid during the callback only (tpt_dm_peer_hello says who it was). */
void tpt_dm_set_peer_down_cb(struct tpt_dm *dm,
			     void (*cb)(struct tpt_dm_peer *peer, void *arg),
			     void *arg);
/* Called when an accepted peer's connection is up.  Its handle stays
 * valid until the peer-down callback (or tpt_dm_close): the owner may
 * Put/Get with it, as either end of a connection can, and must not
 * disconnect it.  Owners that only ever serve as the passive side need
 * not set it. */
void tpt_dm_set_peer_up_cb(struct tpt_dm *dm,
			   void (*cb)(struct tpt_dm_peer *peer, void *arg),
			   void *arg);

/* --- buffers (Register_Buffer / Deregister_Buffer) --- */

#define TPT_DM_ACCESS_REMOTE_READ 0x1	/* peers may Get_Data from it */
#define TPT_DM_ACCESS_REMOTE_WRITE 0x2	/* peers may Put_Data into it */

/* A pool buffer with len bytes (1..pool_buf_bytes) registered in @scope,
 * which is all that its STag reaches and all that transfers may use:
 * -EAGAIN when the pool is exhausted (back-pressure: retry after some
 * buffer is returned), -EINVAL when len is 0 or too large. */
int tpt_dm_buf_get(struct tpt_dm *dm, uint64_t scope, size_t len,
		   unsigned int access, struct tpt_dm_buf **out);
/* Register caller memory (e.g. the controller's copy of host data) in
 * @scope. */
int tpt_dm_register(struct tpt_dm *dm, uint64_t scope, void *addr,
		    size_t len, unsigned int access, struct tpt_dm_buf **out);
/* Deregister; a pool buffer returns to the pool unregistered (the next
 * tpt_dm_buf_get registers it under a new STag).  Any STag handed out for
 * it is stale from here on: peers' accesses to it fail, as those of peers
 * of another scope always do.  With the tcp provider the passive side
 * drops the connection on such an access, so the initiator's operation
 * fails with -ECONNRESET and both sides see peer-down; verbs fails it
 * with a remote access error (-EACCES) and the connection goes the same
 * way.  Not while a transfer of ours uses the buffer as its local side. */
void tpt_dm_buf_release(struct tpt_dm_buf *buf);

void *tpt_dm_buf_addr(const struct tpt_dm_buf *buf);
/* Usable bytes: the registered length (for a pool buffer, the len that
 * tpt_dm_buf_get asked for). */
size_t tpt_dm_buf_len(const struct tpt_dm_buf *buf);
/* The STag peers use to address this buffer, and the RMA address of its
 * first byte in the provider's addressing (0 for offset-addressed
 * providers like tcp, the virtual address for FI_MR_VIRT_ADDR ones like
 * verbs).  A transfer descriptor carries stag and base + offset. */
uint64_t tpt_dm_buf_stag(const struct tpt_dm_buf *buf);
uint64_t tpt_dm_buf_rma_base(const struct tpt_dm_buf *buf);

/* --- Put_Data / Get_Data --- */

/* status is 0, or a negative errno: -ECONNRESET/-ETIMEDOUT/-EIO when the
 * passive side failed or went away (the "passive peer may be down" case),
 * -EACCES when it refused the STag (providers that report remote access
 * errors, like verbs; see tpt_dm_buf_release for tcp), -ECANCELED on
 * disconnect/close. */
typedef void (*tpt_dm_done_cb)(int status, void *arg);

/* Write len bytes from local[local_off..] to the peer's (stag, rma_addr).
 * Transfers above chunk_bytes are split and pipelined; cb runs once, after
 * the last chunk completed or the first one failed.  A put completes once
 * the data is in the passive side's memory (delivery complete, where the
 * provider offers it), not merely sent.
 *
 * Returns 0 (cb will run, never from inside this call), or without
 * running cb: -EINVAL (len 0, range outside local, buffer not this
 * context's or in another scope than the peer), -ENOTCONN (peer not
 * connected or gone down), -EAGAIN (the
 * context's table of outstanding operations is full: back-pressure, retry
 * after completions).  cb may be NULL. */
int tpt_dm_put(struct tpt_dm_peer *peer, struct tpt_dm_buf *local,
	       size_t local_off, uint64_t stag, uint64_t rma_addr, size_t len,
	       tpt_dm_done_cb cb, void *arg);
/* Read len bytes from the peer's (stag, rma_addr) into local[local_off..].
 * Returns and completes like tpt_dm_put. */
int tpt_dm_get(struct tpt_dm_peer *peer, struct tpt_dm_buf *local,
	       size_t local_off, uint64_t stag, uint64_t rma_addr, size_t len,
	       tpt_dm_done_cb cb, void *arg);

/* Counters for Tables I/II of the paper: RMA operations initiated and
 * bytes moved by this context. */
struct tpt_dm_stats {
	uint64_t puts, gets;		/* Put_Data / Get_Data calls */
	uint64_t rma_ops;		/* fi_write/fi_read posted (chunks) */
	uint64_t bytes_put, bytes_got;
	uint64_t refused_peers;		/* every refusal, replays included */
	uint64_t replayed_hellos;	/* counter not above the last one */
	uint64_t pool_exhausted;	/* tpt_dm_buf_get -EAGAIN answers */
};
void tpt_dm_get_stats(const struct tpt_dm *dm, struct tpt_dm_stats *st);

#endif
