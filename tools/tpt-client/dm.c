/* tpt-client's datamover side (iser/tpt_dm.h): opening it, the peers it
 * lets in and connects to, the buffers it registers, Put_Data and
 * Get_Data, and its counters.  main.c's event loop runs its progress. */
#include "client.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_ALIGN 64
/* The client's own datamover pool: it serves from buffers it registers
 * itself, so the pool only has to exist. */
#define CLIENT_POOL_BYTES (4u << 20)
#define CLIENT_POOL_BUF_BYTES (1u << 20)


/* A peer dm_allow announced. */
struct allowed_peer {
	struct item item;	/* unnamed */
	uint16_t peer_id;
	uint8_t token[TPT_DM_TOKEN_LEN];
	bool match_array;
	uint64_t array_id;
	uint8_t role;		/* 0: any */
	uint64_t scope;		/* what it is admitted into */
};

enum link_state {
	LINK_CONNECTING,
	LINK_UP,
	LINK_FAILED,
	LINK_DOWN,
};

/* A datamover connection we opened with dm_connect, or one a peer
 * opened to us ("accepted-<peer id>"): either end may start RMA. */
struct dm_link {
	struct item item;	/* name: the link's */
	struct tpt_dm_peer *peer;
	enum link_state state;
	int status;
	bool accepted;		/* the datamover owns the peer */
};

struct dm_buffer {
	struct item item;	/* name: the buffer's */
	void *mem;
	size_t size;
	struct tpt_dm_buf *buf;
	unsigned int inflight;	/* our own puts/gets using it */
};

/* One dm_put/dm_get; outlives its request when that timed out. */
struct dm_op {
	struct item item;	/* unnamed */
	struct dm_buffer *buf;
	bool done;
	bool abandoned;
	int status;
};

static const struct word roles[] = {
	{ "host", TPT_DM_ROLE_HOST },
	{ "controller", TPT_DM_ROLE_CONTROLLER },
	{ "target", TPT_DM_ROLE_TARGET },
	{ NULL, 0 },
};

/* What a buffer lets peers do: Get_Data from it, Put_Data into it. */
static const struct word accesses[] = {
	{ "r", TPT_DM_ACCESS_REMOTE_READ },
	{ "w", TPT_DM_ACCESS_REMOTE_WRITE },
	{ "rw", TPT_DM_ACCESS_REMOTE_READ | TPT_DM_ACCESS_REMOTE_WRITE },
	{ NULL, 0 },
};

static int get_token(struct request *rq, uint8_t token[TPT_DM_TOKEN_LEN])
{
	unsigned char *bytes;
	size_t len;

	if (get_hex(rq, "token", true, &bytes, &len) < 0)
		return -1;
	if (len != TPT_DM_TOKEN_LEN) {
		free(bytes);
		return fail(rq, "field 'token' must be %d hex digits",
			    2 * TPT_DM_TOKEN_LEN);
	}
	memcpy(token, bytes, len);
	free(bytes);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Datamover callbacks */

static void dm_log(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "tpt-client: dm: %s\n", msg);
}

static void format_addr(const struct sockaddr *sa, socklen_t len, char *out,
			size_t outlen)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (!sa || getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
			       NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(out, outlen, "?");
	else
		snprintf(out, outlen, "%s:%s", host, serv);
}

/* The anti-spoofing check of paper III-B, as a host or controller does
 * it: only peers announced with dm_allow get in, and only with their
 * token (and array and role, when dm_allow named them), into the scope
 * dm_allow named. */
static int dm_accept(void *arg, const struct tpt_dm_hello *hello,
		     const struct sockaddr *src, socklen_t srclen,
		     uint8_t token[TPT_DM_TOKEN_LEN], uint64_t *scope)
{
	struct client *c = arg;
	char from[NI_MAXHOST + NI_MAXSERV + 2];

	format_addr(src, srclen, from, sizeof(from));
	ITEM_FOR_EACH(struct allowed_peer, a, c->allowed) {
		if (a->peer_id != hello->peer_id ||
		    !tpt_dm_hello_proves(hello, a->token))
			continue;
		if (a->match_array && a->array_id != hello->array_id)
			continue;
		if (a->role && a->role != hello->role)
			continue;
		memcpy(token, a->token, TPT_DM_TOKEN_LEN);
		*scope = a->scope;
		c->accepted_peers++;
		fprintf(stderr, "tpt-client: dm: accepted %s peer %u from %s\n",
			word_text(roles, hello->role), hello->peer_id, from);
		return 0;
	}
	c->refused_by_allow_list++;
	fprintf(stderr, "tpt-client: dm: refused %s peer %u (array %" PRIu64
		") from %s: not on the allow list\n",
		word_text(roles, hello->role), hello->peer_id, hello->array_id,
		from);
	return -EACCES;
}

static void dm_connected(struct tpt_dm_peer *peer, int status, void *arg)
{
	struct dm_link *link = arg;

	(void)peer;
	if (link->state != LINK_CONNECTING)
		return;
	link->status = status;
	link->state = status ? LINK_FAILED : LINK_UP;
}

static void dm_peer_down(struct tpt_dm_peer *peer, void *arg)
{
	struct client *c = arg;

	c->peers_down++;
	ITEM_FOR_EACH(struct dm_link, link, c->links) {
		if (link->peer == peer) {
			fprintf(stderr, "tpt-client: dm: peer %s went down\n",
				link->item.name);
			link->state = LINK_DOWN;
			/* An accepted peer's handle dies with this call. */
			if (link->accepted)
				link->peer = NULL;
			return;
		}
	}
}

static void link_free(struct client *c, struct dm_link *link);

/* A peer that connected to us, as a link of its own: tests play a host
 * or controller that turns RMA on the connection a target opened. */
static void dm_peer_up(struct tpt_dm_peer *peer, void *arg)
{
	struct client *c = arg;
	struct dm_link *link;
	char name[32];

	snprintf(name, sizeof(name), "accepted-%u",
		 tpt_dm_peer_hello(peer)->peer_id);
	link = item_find(c->links, name);
	if (link)
		link_free(c, link);
	link = item_new(&c->links, sizeof(*link), name);
	if (!link)
		return;
	link->peer = peer;
	link->state = LINK_UP;
	link->accepted = true;
}

static void dm_op_done(int status, void *arg)
{
	struct dm_op *op = arg;

	op->done = true;
	op->status = status;
	op->buf->inflight--;
}

void dm_reap_ops(struct client *c)
{
	struct item *it, *next;

	for (it = c->ops; it; it = next) {
		struct dm_op *op = (struct dm_op *)(void *)it;

		next = it->next;
		if (op->done && op->abandoned)
			item_delete(&c->ops, op);
	}
}

/* ------------------------------------------------------------------ */
/* open, allow, connect, disconnect */

static int need_dm(struct client *c, struct request *rq)
{
	if (!c->dm)
		return fail(rq, "the datamover is not open (dm_open first)");
	return 0;
}

int op_dm_open(struct client *c, struct request *rq)
{
	const char *role_text, *listen = "127.0.0.1", *provider = NULL;
	long long port = 0, peer_id = 0;
	uint64_t array_id = 0;
	size_t pool_bytes = CLIENT_POOL_BYTES;
	struct tpt_dm_config cfg;
	struct reply r;
	int role, rc;

	if (c->dm)
		return fail(rq, "the datamover is already open");
	if (get_str(rq, "role", true, &role_text) ||
	    get_str(rq, "listen", false, &listen) < 0 ||
	    get_str(rq, "provider", false, &provider) < 0 ||
	    get_int(rq, "port", false, 0, 65535, &port) < 0 ||
	    get_int(rq, "peer_id", false, 0, 65535, &peer_id) < 0 ||
	    get_u64(rq, "array_id", false, &array_id) < 0 ||
	    get_size(rq, "pool_bytes", false, MAX_BUF_BYTES, &pool_bytes) < 0)
		return -1;
	if (word_value(rq, "role", role_text, roles, &role))
		return -1;
	if (pool_bytes < CLIENT_POOL_BUF_BYTES)
		return fail(rq, "pool_bytes must be at least %u",
			    CLIENT_POOL_BUF_BYTES);

	memset(&cfg, 0, sizeof(cfg));
	cfg.provider = provider && provider[0] ? provider : NULL;
	cfg.listen_addr = listen[0] ? listen : NULL;
	cfg.listen_port = (uint16_t)port;
	cfg.pool_bytes = pool_bytes;
	cfg.pool_buf_bytes = CLIENT_POOL_BUF_BYTES;
	cfg.accept = dm_accept;
	cfg.accept_arg = c;
	cfg.log = dm_log;
	rc = tpt_dm_open(&cfg, &c->dm);
	if (rc < 0) {
		c->dm = NULL;
		return fail_errno(rq, rc, "tpt_dm_open: %s", strerror(-rc));
	}
	tpt_dm_set_peer_down_cb(c->dm, dm_peer_down, c);
	tpt_dm_set_peer_up_cb(c->dm, dm_peer_up, c);
	c->dm_role = (enum tpt_dm_role)role;
	c->dm_peer_id = (uint16_t)peer_id;
	c->dm_array_id = array_id;
	c->dm_error[0] = '\0';

	r = reply_new(rq, true);
	reply_int(&r, "port", cfg.listen_addr ? tpt_dm_listen_port(c->dm) : 0);
	reply_str(&r, "provider", tpt_dm_provider_name(c->dm));
	return reply_send(&r);
}

int op_dm_allow(struct client *c, struct request *rq)
{
	struct allowed_peer *a;
	long long peer_id;
	uint8_t token[TPT_DM_TOKEN_LEN];
	const char *role_text = NULL;
	uint64_t array_id = 0, scope = 0;
	int role = 0, has_array = 1;

	if (get_int(rq, "peer_id", true, 0, 65535, &peer_id) ||
	    get_token(rq, token) ||
	    (has_array = get_u64(rq, "array_id", false, &array_id)) < 0 ||
	    get_str(rq, "role", false, &role_text) < 0 ||
	    get_u64(rq, "scope", false, &scope) < 0)
		return -1;
	if (role_text && word_value(rq, "role", role_text, roles, &role))
		return -1;
	a = item_new(&c->allowed, sizeof(*a), NULL);
	if (!a)
		return fail(rq, "out of memory");
	a->peer_id = (uint16_t)peer_id;
	memcpy(a->token, token, sizeof(token));
	a->match_array = has_array == 0;
	a->array_id = array_id;
	a->role = (uint8_t)role;
	a->scope = scope;
	return reply_ok(rq);
}

static void link_free(struct client *c, struct dm_link *link)
{
	if (link->peer && c->dm && !link->accepted)
		tpt_dm_disconnect(link->peer);
	item_delete(&c->links, link);
}

int op_dm_connect(struct client *c, struct request *rq)
{
	const char *name, *addr, *role_text = NULL;
	long long port, peer_id;
	struct tpt_dm_hello hello;
	struct dm_link *link;
	uint64_t scope = 0;
	long long deadline;
	int role, rc;

	if (need_dm(c, rq) || get_name(rq, "name", &name) ||
	    get_name(rq, "addr", &addr) ||
	    get_int(rq, "port", true, 1, 65535, &port) ||
	    get_str(rq, "role", false, &role_text) < 0 ||
	    get_timeout(rq, &deadline))
		return -1;
	memset(&hello, 0, sizeof(hello));
	role = c->dm_role;
	if (role_text && word_value(rq, "role", role_text, roles, &role))
		return -1;
	peer_id = c->dm_peer_id;
	hello.array_id = c->dm_array_id;
	if (get_int(rq, "peer_id", false, 0, 65535, &peer_id) < 0 ||
	    get_u64(rq, "array_id", false, &hello.array_id) < 0 ||
	    get_u64(rq, "counter", false, &hello.counter) < 0 ||
	    get_u64(rq, "scope", false, &scope) < 0 ||
	    get_token(rq, hello.token))
		return -1;
	hello.role = (uint8_t)role;
	hello.peer_id = (uint16_t)peer_id;

	link = item_find(c->links, name);
	if (link && (link->state == LINK_CONNECTING || link->state == LINK_UP))
		return fail(rq, "datamover link '%s' is %s", name,
			    link->state == LINK_UP ? "already up" :
			    "still connecting");
	if (link)
		link_free(c, link);
	link = item_new(&c->links, sizeof(*link), name);
	if (!link)
		return fail(rq, "out of memory");
	link->state = LINK_CONNECTING;
	rc = tpt_dm_connect(c->dm, scope, addr, (uint16_t)port, &hello,
			    dm_connected, link, &link->peer);
	if (rc < 0) {
		fail_errno(rq, rc, "tpt_dm_connect: %s", tpt_dm_strerror(c->dm));
		link->peer = NULL;
		link_free(c, link);
		return -1;
	}
	while (link->state == LINK_CONNECTING && ms_left(deadline))
		progress_once(c, ms_left(deadline), false);
	if (link->state == LINK_UP)
		return reply_ok(rq);
	if (link->state == LINK_CONNECTING)
		return fail(rq, "datamover connect timed out");
	return fail_errno(rq, link->status, "datamover connect failed: %s",
			  strerror(-link->status));
}

int op_dm_disconnect(struct client *c, struct request *rq)
{
	const char *name;
	struct dm_link *link;

	if (need_dm(c, rq) || get_name(rq, "name", &name))
		return -1;
	link = item_find(c->links, name);
	if (!link)
		return fail(rq, "no datamover link '%s'", name);
	link_free(c, link);
	return reply_ok(rq);
}

/* ------------------------------------------------------------------ */
/* Registered buffers */

/* release: false after tpt_dm_close(), which deregistered everything. */
static void buffer_free(struct client *c, struct dm_buffer *b, bool release)
{
	if (release && b->buf)
		tpt_dm_buf_release(b->buf);
	free(b->mem);
	item_delete(&c->bufs, b);
}

static int get_buffer(struct client *c, struct request *rq, const char *key,
		      struct dm_buffer **out)
{
	const char *name;

	if (get_name(rq, key, &name))
		return -1;
	*out = item_find(c->bufs, name);
	if (!*out)
		return fail(rq, "no buffer '%s'", name);
	return 0;
}

/* offset and len must lie inside the buffer. */
static int get_range(struct request *rq, const struct dm_buffer *b,
		     size_t len, size_t *offset)
{
	if (get_size(rq, "offset", true, MAX_BUF_BYTES, offset))
		return -1;
	if (*offset > b->size || len > b->size - *offset)
		return fail(rq, "%zu bytes at offset %zu do not fit buffer '%s' "
			    "of %zu bytes", len, *offset, b->item.name,
			    b->size);
	return 0;
}

int op_buf(struct client *c, struct request *rq)
{
	const char *name, *access_text;
	struct dm_buffer *b;
	struct reply r;
	uint64_t scope = 0;
	size_t size;
	int access, rc;

	if (need_dm(c, rq) || get_name(rq, "name", &name) ||
	    get_size(rq, "size", true, MAX_BUF_BYTES, &size) ||
	    get_str(rq, "access", true, &access_text) ||
	    get_u64(rq, "scope", false, &scope) < 0)
		return -1;
	if (!size)
		return fail(rq, "a buffer needs at least one byte");
	if (word_value(rq, "access", access_text, accesses, &access))
		return -1;
	if (item_find(c->bufs, name))
		return fail(rq, "buffer '%s' already exists", name);

	b = item_new(&c->bufs, sizeof(*b), name);
	if (!b)
		return fail(rq, "out of memory");
	b->size = size;
	b->mem = aligned_alloc(BUF_ALIGN,
			       (size + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN);
	if (!b->mem) {
		buffer_free(c, b, false);
		return fail(rq, "out of memory for %zu bytes", size);
	}
	memset(b->mem, 0, size);
	rc = tpt_dm_register(c->dm, scope, b->mem, size, (unsigned int)access,
			     &b->buf);
	if (rc < 0) {
		fail_errno(rq, rc, "tpt_dm_register: %s",
			   tpt_dm_strerror(c->dm));
		buffer_free(c, b, false);
		return -1;
	}
	r = reply_new(rq, true);
	reply_u64(&r, "stag", tpt_dm_buf_stag(b->buf));
	reply_u64(&r, "rma_base", tpt_dm_buf_rma_base(b->buf));
	reply_int(&r, "size", (long long)size);
	return reply_send(&r);
}

int op_buf_write(struct client *c, struct request *rq)
{
	struct dm_buffer *b;
	unsigned char *data;
	size_t len, offset;

	if (need_dm(c, rq) || get_buffer(c, rq, "name", &b) ||
	    get_hex(rq, "data", true, &data, &len))
		return -1;
	if (get_range(rq, b, len, &offset)) {
		free(data);
		return -1;
	}
	if (len)
		memcpy((char *)b->mem + offset, data, len);
	free(data);
	return reply_ok(rq);
}

int op_buf_read(struct client *c, struct request *rq)
{
	struct dm_buffer *b;
	struct reply r;
	size_t len, offset;

	if (need_dm(c, rq) || get_buffer(c, rq, "name", &b) ||
	    get_size(rq, "len", true, MAX_BUF_BYTES, &len) ||
	    get_range(rq, b, len, &offset))
		return -1;
	r = reply_new(rq, true);
	reply_hex(&r, "data", (char *)b->mem + offset, len);
	return reply_send(&r);
}

int op_buf_release(struct client *c, struct request *rq)
{
	struct dm_buffer *b;

	if (need_dm(c, rq) || get_buffer(c, rq, "name", &b))
		return -1;
	if (b->inflight)
		return fail(rq, "buffer '%s' is in use by %u of our transfers",
			    b->item.name, b->inflight);
	buffer_free(c, b, true);
	return reply_ok(rq);
}

/* ------------------------------------------------------------------ */
/* Put_Data / Get_Data, stats */

/* dm_put (Put_Data: our buffer -> peer's STag) and dm_get (Get_Data). */
static int dm_transfer(struct client *c, struct request *rq, bool put)
{
	const char *peer_name;
	struct dm_link *link;
	struct dm_buffer *b;
	struct dm_op *op;
	uint64_t stag, rma_addr;
	size_t len, offset;
	long long deadline;
	int rc;

	if (need_dm(c, rq) || get_name(rq, "peer", &peer_name) ||
	    get_buffer(c, rq, "buf", &b) ||
	    get_u64(rq, "stag", true, &stag) ||
	    get_u64(rq, "rma_addr", true, &rma_addr) ||
	    get_size(rq, "len", true, MAX_BUF_BYTES, &len) ||
	    get_range(rq, b, len, &offset) || get_timeout(rq, &deadline))
		return -1;
	link = item_find(c->links, peer_name);
	if (!link)
		return fail(rq, "no datamover link '%s'", peer_name);
	if (link->state != LINK_UP)
		return fail(rq, "datamover link '%s' is not up", peer_name);

	op = item_new(&c->ops, sizeof(*op), NULL);
	if (!op)
		return fail(rq, "out of memory");
	op->buf = b;
	b->inflight++;
	if (put)
		rc = tpt_dm_put(link->peer, b->buf, offset, stag, rma_addr, len,
				dm_op_done, op);
	else
		rc = tpt_dm_get(link->peer, b->buf, offset, stag, rma_addr, len,
				dm_op_done, op);
	if (rc < 0) {
		fail_errno(rq, rc, "%s: %s", put ? "tpt_dm_put" : "tpt_dm_get",
			   tpt_dm_strerror(c->dm));
		op->done = true;
		b->inflight--;
	} else {
		while (!op->done && ms_left(deadline))
			progress_once(c, ms_left(deadline), false);
		if (!op->done)
			fail(rq, "transfer timed out");
		else if (op->status)
			fail_errno(rq, op->status, "transfer failed: %s",
				   strerror(-op->status));
	}
	if (!op->done) {
		op->abandoned = true;	/* dm_reap_ops frees it later */
		return -1;
	}
	item_delete(&c->ops, op);
	return rq->err[0] ? -1 : reply_ok(rq);
}

int op_dm_put(struct client *c, struct request *rq)
{
	return dm_transfer(c, rq, true);
}

int op_dm_get(struct client *c, struct request *rq)
{
	return dm_transfer(c, rq, false);
}

int op_stats(struct client *c, struct request *rq)
{
	struct tpt_dm_stats st;
	struct reply r;

	if (need_dm(c, rq))
		return -1;
	tpt_dm_get_stats(c->dm, &st);
	r = reply_new(rq, true);
	reply_u64(&r, "puts", st.puts);
	reply_u64(&r, "gets", st.gets);
	reply_u64(&r, "rma_ops", st.rma_ops);
	reply_u64(&r, "bytes_put", st.bytes_put);
	reply_u64(&r, "bytes_got", st.bytes_got);
	reply_u64(&r, "refused_peers", st.refused_peers);
	reply_u64(&r, "pool_exhausted", st.pool_exhausted);
	reply_u64(&r, "accepted_peers", c->accepted_peers);
	reply_u64(&r, "refused_by_allow_list", c->refused_by_allow_list);
	reply_u64(&r, "peers_down", c->peers_down);
	if (c->dm_error[0])
		reply_str(&r, "dm_error", c->dm_error);
	return reply_send(&r);
}

/* ------------------------------------------------------------------ */
/* Stop */

void dm_shutdown(struct client *c)
{
	if (c->dm) {
		/* Runs the callbacks of whatever is outstanding, frees the
		 * peers and deregisters every buffer. */
		tpt_dm_close(c->dm);
		c->dm = NULL;
	}
	while (c->links)
		link_free(c, (struct dm_link *)(void *)c->links);
	while (c->bufs)
		buffer_free(c, (struct dm_buffer *)(void *)c->bufs, false);
	item_delete_all(&c->ops);
	item_delete_all(&c->allowed);
}
