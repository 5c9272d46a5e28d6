/* Internals of the datamover (tpt_dm.h), shared by its source files:
 *
 *   tpt_dm.c       context: open/close, the event fd, progress, errors
 *   tpt_dm_scope.c scopes: a libfabric domain and its CQ per scope id
 *   tpt_dm_peer.c  hello codec, connect/accept, EQ events, peer teardown
 *   tpt_dm_buf.c   pool, registrations (in their scope)
 *   tpt_dm_rma.c   Put_Data/Get_Data: chunking, posting, CQ completions
 *
 * and the libfabric set-up they stand on, which tools/tpt-fi-rma-bench
 * shares: tpt_dm_fabric.h (fabric, domains, queues, endpoints, MR keys).
 *
 * Everything runs on the owner's thread: no locks.  Memory the provider
 * may still reference (chunk contexts, peers owning them) is only freed
 * once the provider has handed it back, and a scope's domain only closed
 * once nothing lives in it, see dm_reap(). */
#ifndef TPT_ISER_DM_PRIV_H
#define TPT_ISER_DM_PRIV_H

#include "iser/tpt_dm.h"
#include "iser/tpt_dm_fabric.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* --- intrusive doubly linked list --- */

struct dm_list {
	struct dm_list *next, *prev;
};

static inline void dm_list_init(struct dm_list *head)
{
	head->next = head->prev = head;
}

static inline bool dm_list_empty(const struct dm_list *head)
{
	return head->next == head;
}

static inline void dm_list_add_tail(struct dm_list *head, struct dm_list *n)
{
	n->prev = head->prev;
	n->next = head;
	head->prev->next = n;
	head->prev = n;
}

static inline void dm_list_del(struct dm_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

/* Moves every entry of from to the tail of to, leaving from empty. */
static inline void dm_list_splice_tail(struct dm_list *to, struct dm_list *from)
{
	if (dm_list_empty(from))
		return;
	from->next->prev = to->prev;
	to->prev->next = from->next;
	from->prev->next = to;
	to->prev = from->prev;
	dm_list_init(from);
}

#define dm_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* --- the hello on the wire (connection data of fi_connect) ---
 *
 *   0  u32  magic "TPDM" (0x5450444d)
 *   4  u8   version (2)
 *   5  u8   role (enum tpt_dm_role)
 *   6  u16  peer_id
 *   8  u64  array_id
 *  16  u64  counter
 *  24  u8[16] proof: HMAC-SHA256 keyed with the token over "H" and
 *             bytes 0-23, first 16 bytes
 *
 * The acceptor answers with 16 bytes of fi_accept connection data: the
 * same HMAC over "A" and bytes 0-23.  All integers big-endian. */
#define DM_HELLO_WIRE_LEN 40
#define DM_HELLO_SIGNED_LEN 24
#define DM_HELLO_ANSWER_LEN 16
#define DM_HELLO_MAGIC 0x5450444dU
#define DM_HELLO_VERSION 2

/* Fills in hello->proof from hello->token, then the wire form. */
void dm_hello_encode(struct tpt_dm_hello *hello,
		     uint8_t wire[DM_HELLO_WIRE_LEN]);
/* 0, or -EPROTO for a short, foreign or other-version hello. */
int dm_hello_decode(const uint8_t *wire, size_t len,
		    struct tpt_dm_hello *hello);
/* The acceptor's answer to @hello, keyed with @token. */
void dm_hello_answer(const struct tpt_dm_hello *hello,
		     const uint8_t token[TPT_DM_TOKEN_LEN],
		     uint8_t answer[DM_HELLO_ANSWER_LEN]);

/* The last counter accepted from one (array, role, peer id): entries are
 * made only for hellos the owner accepted, so strangers cannot grow the
 * table. */
struct dm_seen_peer {
	struct dm_list link;
	uint64_t array_id;
	uint8_t role;
	uint16_t peer_id;
	uint64_t counter;
};

/* --- scopes --- */

/* One scope (tpt_dm.h): a domain of the context's fabric and its CQ,
 * open while a registration or a peer is in it.  Its peers' endpoints
 * reach only its registrations. */
struct dm_scope {
	struct dm_list link;	/* dm->scopes */
	struct tpt_dm *dm;
	uint64_t id;
	struct tpt_dm_domain dom;
	int cq_fd;		/* the CQ's wait fd, in dm->epoll_fd */
	unsigned int refs;	/* registrations and peers in it */
};

/* --- buffers --- */

struct tpt_dm_buf {
	struct tpt_dm *dm;
	void *addr;
	size_t len;		/* registered bytes (a pool buffer's: what
				 * tpt_dm_buf_get asked for) */
	struct dm_scope *scope;	/* NULL: not registered right now */
	struct fid_mr *mr;	/* NULL: not registered right now */
	uint64_t stag;
	uint64_t mr_access;	/* FI_* access the MR was registered with */
	bool from_pool;
	bool in_use;		/* pool: handed out by tpt_dm_buf_get */
	struct tpt_dm_buf *next_free;	/* pool free list */
	struct dm_list link;	/* caller registrations: dm->user_bufs */
};

/* --- Put/Get operations and their chunks --- */

struct dm_op {
	struct dm_list link;	/* peer->queued, peer->posted, or free */
	struct tpt_dm_peer *peer;
	bool is_put;
	bool in_use;
	struct tpt_dm_buf *local;
	size_t local_off;
	uint64_t stag;
	uint64_t rma_addr;
	size_t len;
	size_t posted_bytes;	/* how much of len is handed to chunks */
	unsigned int chunks_out;/* chunks posted and not yet completed */
	tpt_dm_done_cb cb;
	void *arg;
	int status;		/* 0, or this op's own transport error */
	struct dm_op *next_free;
};

/* One RMA posted to the provider: its op_context.  op is NULL once the
 * op has been failed or cancelled while the provider still owns the
 * chunk (an orphan: its completion only returns the slot). */
struct dm_chunk {
	struct tpt_dm_peer *peer;
	struct dm_op *op;
	size_t len;
	struct dm_chunk *next_free;
};

/* --- peers --- */

enum dm_peer_state {
	DM_PEER_CONNECTING,	/* fi_connect sent, waiting for FI_CONNECTED */
	DM_PEER_ACCEPTING,	/* fi_accept sent, waiting for FI_CONNECTED */
	DM_PEER_UP,
	DM_PEER_DOWN,		/* endpoint closed */
};

struct tpt_dm_peer {
	struct dm_list link;	/* dm->peers */
	struct tpt_dm *dm;
	struct dm_scope *scope;	/* held until the peer is freed */
	struct fid_ep *ep;	/* NULL once closed */
	enum dm_peer_state state;
	bool accepted;		/* incoming: the datamover owns the handle */
	bool released;		/* the owner is done with the handle */
	bool kick_pending;	/* posting stopped on -FI_EAGAIN */
	int fail_pending;	/* a post failed outside progress: teardown
				 * with this status at the next progress */
	struct tpt_dm_hello hello;	/* ours (connect) or theirs (accept) */
	/* Accepted: where it came from, for tpt_dm_readmit(). */
	struct sockaddr_storage src;
	socklen_t srclen;
	tpt_dm_connect_cb connect_cb;
	void *connect_arg;
	struct dm_list queued;	/* ops with chunks still to post, FIFO */
	struct dm_list posted;	/* ops fully posted, chunks in flight */
	struct dm_chunk *chunks;/* max_inflight slots */
	struct dm_chunk *free_chunks;
	unsigned int chunks_posted;	/* slots the provider owns */
	/* tpt_dm_peer_set_stall_limit(): seconds, 0 for none; and when the
	 * peer last moved (dm_now_ms()): its connect began, an operation
	 * started with none outstanding, or a chunk completed. */
	unsigned int stall_limit;
	uint64_t last_progress;
	char addr_str[64];	/* for logs */
};

/* --- the context --- */

struct tpt_dm {
	struct tpt_dm_config cfg;	/* defaults filled in */
	char *provider;
	bool provider_is_verbs;	/* its CQ errors need decoding */
	/* libfabric's fabric, EQ and listener, MR keys, put flags, the last
	 * error's words */
	struct tpt_dm_fabric fab;
	struct dm_list scopes;	/* struct dm_scope */

	int epoll_fd;		/* tpt_dm_event_fd */
	int wake_fd;		/* eventfd: "call tpt_dm_progress again" */
	bool wake_pending;	/* wake_fd holds a count */
	bool eq_trywait_ok;	/* fi_trywait accepts the EQ */
	bool trywait_failed;	/* ... but not a CQ: logged once */

	/* fi_writemsg flags of a put's chunks before its last (the last
	 * takes fab.write_flags) */
	uint64_t early_write_flags;

	/* pool */
	void *pool_mem;
	size_t pool_map_len;
	struct tpt_dm_buf *pool;
	size_t pool_count;
	struct tpt_dm_buf *pool_free;
	struct dm_list user_bufs;

	/* operation table: bounded, see tpt_dm_put */
	struct dm_op *ops;
	size_t op_count;
	struct dm_op *op_free;

	struct dm_list peers;
	/* hellos: the counter of our last one, the peers' last ones */
	uint64_t last_counter;
	struct dm_list seen_peers;	/* struct dm_seen_peer */
	void (*peer_down_cb)(struct tpt_dm_peer *peer, void *arg);
	void (*peer_up_cb)(struct tpt_dm_peer *peer, void *arg);
	void *peer_up_arg;
	void *peer_down_arg;

	/* Test hook: the next this many posts fail with -FI_EAGAIN, the
	 * provider's "queue full" that tcp never gives in practice. */
	unsigned int inject_post_eagain;

	int busy;		/* >0: inside progress/disconnect/close,
				 * peers and scopes are reaped when it drops
				 * to 0 */
	int callbacks_run;
	bool closing;
	struct tpt_dm_stats stats;
};

/* tpt_dm.c */
int dm_error(struct tpt_dm *dm, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void dm_log(struct tpt_dm *dm, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void dm_wake(struct tpt_dm *dm);
/* Frees the peers nobody needs any more, then closes the scopes nothing
 * lives in.  Does nothing while busy: only safe outside callbacks and
 * provider walks. */
void dm_reap(struct tpt_dm *dm);

/* tpt_dm_scope.c */
/* The scope with @id, opened if need be, with one more reference. */
int dm_scope_get(struct tpt_dm *dm, uint64_t id, struct dm_scope **out);
/* Drops a reference; a scope left empty closes now, or in dm_reap()
 * while the context is busy. */
void dm_scope_put(struct dm_scope *scope);
void dm_scopes_reap(struct tpt_dm *dm);
/* At close: every scope, whatever still refers to it. */
void dm_scopes_close(struct tpt_dm *dm);

/* Milliseconds on CLOCK_MONOTONIC: how the stall limit measures. */
static inline uint64_t dm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* tpt_dm_peer.c */
int dm_eq_progress(struct tpt_dm *dm);
/* Closes the endpoint (so the provider stops touching memory), fails
 * every op with status (ops already on their way with a transport error
 * keep it), and tells the owner: connect callback for a peer still
 * connecting, peer-down callback for one that was up and notify_down. */
void dm_peer_teardown(struct tpt_dm_peer *peer, int status, bool notify_down);
void dm_peer_reap(struct tpt_dm *dm);
/* Frees the peer and drops its scope. */
void dm_peer_free(struct tpt_dm_peer *peer);
void dm_seen_peers_free(struct tpt_dm *dm);

/* tpt_dm_buf.c */
int dm_pool_open(struct tpt_dm *dm);
void dm_bufs_close(struct tpt_dm *dm);

/* tpt_dm_rma.c */
int dm_ops_open(struct tpt_dm *dm);
void dm_ops_close(struct tpt_dm *dm);
/* Handles completions of @scope until its CQ is empty or a batch limit:
 * *more then says that entries may be left. */
int dm_cq_progress(struct tpt_dm *dm, struct dm_scope *scope, bool *more);
/* Posts queued chunks of peer while slots and the provider allow. */
void dm_peer_kick(struct tpt_dm_peer *peer);
/* Takes every op off the peer's lists, orphans its chunks and runs the
 * callbacks with status (or the op's own error). */
void dm_peer_fail_ops(struct tpt_dm_peer *peer, int status);

#endif
