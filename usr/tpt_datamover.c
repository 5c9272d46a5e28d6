/*
 * The process-wide datamover and the event-loop glue around it
 * (usr/tpt_datamover.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include <nettle/sha2.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "tpt_datamover.h"

#define TPT_DM_DEFAULT_POOL_MB 128

static LIST_HEAD(dm_users);

static struct {
	struct tpt_dm *dm;
	char addr[64];
	uint16_t port;
	unsigned int pool_mb;
} dm_conf = {
	.pool_mb = TPT_DM_DEFAULT_POOL_MB,
};

void tpt_datamover_register(struct tpt_datamover_user *u)
{
	struct tpt_datamover_user *o;

	list_for_each_entry(o, &dm_users, link)
		if (o == u)
			return;
	list_add_tail(&u->link, &dm_users);
}

/*
 * A scope id: the first 8 bytes of SHA-256 over @label, @head (a
 * big-endian number) and @secret.  Never 0, the default scope.  The value
 * stays in this process; a stranger who does not know the secret cannot
 * aim at it.
 */
_Static_assert(TPT_ARRAY_KEY_LEN == TPT_AUTH_TOKEN_LEN,
	       "array keys and host keys are hashed alike");

static uint64_t scope_hash(const char *label, size_t label_len,
			   const uint8_t *head, size_t head_len,
			   const uint8_t secret[TPT_AUTH_TOKEN_LEN])
{
	uint8_t digest[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;
	uint64_t scope = 0;
	unsigned int i;

	sha256_init(&ctx);
	sha256_update(&ctx, label_len, (const uint8_t *)label);
	sha256_update(&ctx, head_len, head);
	sha256_update(&ctx, TPT_AUTH_TOKEN_LEN, secret);
	sha256_digest(&ctx, sizeof(digest), digest);
	for (i = 0; i < sizeof(scope); i++)
		scope = scope << 8 | digest[i];
	return scope ? scope : 1;
}

/* A hash of the id and the key, so that two arrays that share an id but
 * not a key (a stranger's copy) never share a scope. */
uint64_t tpt_datamover_scope(uint64_t array_id,
			     const uint8_t key[TPT_ARRAY_KEY_LEN])
{
	static const char label[] = "TPT-RAID datamover scope";
	uint8_t id[8];

	tpt_put_be(id, array_id, sizeof(id));
	return scope_hash(label, sizeof(label), id, sizeof(id), key);
}

uint64_t tpt_datamover_host_scope(uint64_t array_scope, uint16_t peer_id,
				  const uint8_t token[TPT_AUTH_TOKEN_LEN])
{
	static const char label[] = "TPT-RAID host scope";
	uint8_t head[10];

	tpt_put_be(head, array_scope, 8);
	tpt_put_be(head + 8, peer_id, 2);
	return scope_hash(label, sizeof(label), head, sizeof(head), token);
}

struct tpt_dm *tpt_datamover(void)
{
	return dm_conf.dm;
}

const char *tpt_datamover_addr(void)
{
	return dm_conf.addr;
}

int tpt_datamover_endpoint(struct tpt_endpoint *ep)
{
	memset(ep, 0, sizeof(*ep));
	if (!dm_conf.dm)
		return -EINVAL;
	if (inet_pton(AF_INET, dm_conf.addr, ep->addr) == 1)
		ep->family = TPT_AF_IPV4;
	else if (inet_pton(AF_INET6, dm_conf.addr, ep->addr) == 1)
		ep->family = TPT_AF_IPV6;
	else
		return -EINVAL;
	ep->port = tpt_dm_listen_port(dm_conf.dm);
	return 0;
}

static int parse_port(const char *s, unsigned int *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > 65535)
		return -1;
	*out = v;
	return 0;
}

int tpt_datamover_set_portal(const char *value)
{
	const char *colon = strrchr(value, ':');
	char addr[sizeof(dm_conf.addr)];
	unsigned int port;
	size_t alen;

	if (!colon || colon == value || parse_port(colon + 1, &port)) {
		eprintf("tpt_dm=%s: expected ADDR:PORT\n", value);
		return -EINVAL;
	}
	/* [IPV6]:PORT, or the address as it is. */
	if (value[0] == '[' && colon[-1] == ']')
		value++, colon--;
	alen = colon - value;
	if (alen >= sizeof(dm_conf.addr)) {
		eprintf("tpt_dm=%s: address too long\n", value);
		return -EINVAL;
	}
	memcpy(addr, value, alen);
	addr[alen] = '\0';
	/* Handed to peers as this target's endpoint: a name would only fail
	 * then, at the first TPT REPORT ENDPOINT. */
	if (!tpt_addr_is_numeric(addr)) {
		eprintf("tpt_dm=%s: not a numeric IPv4 or IPv6 address\n",
			addr);
		return -EINVAL;
	}
	if (dm_conf.dm) {
		if (strncmp(dm_conf.addr, value, alen) || dm_conf.addr[alen] ||
		    (port && port != tpt_dm_listen_port(dm_conf.dm))) {
			eprintf("tpt_dm=%s: the datamover already listens on "
				"%s:%u\n", value, dm_conf.addr,
				tpt_dm_listen_port(dm_conf.dm));
			return -EINVAL;
		}
		return 0;
	}
	memcpy(dm_conf.addr, addr, alen + 1);
	dm_conf.port = port;
	return 0;
}

int tpt_datamover_set_pool_mb(unsigned int mb)
{
	if (mb < 8 || mb > 65536) {
		eprintf("tpt_pool_mb=%u: expected 8..65536\n", mb);
		return -EINVAL;
	}
	if (dm_conf.dm && mb != dm_conf.pool_mb) {
		eprintf("tpt_pool_mb: the datamover is already running with "
			"%u MiB\n", dm_conf.pool_mb);
		return -EINVAL;
	}
	dm_conf.pool_mb = mb;
	return 0;
}

unsigned int tpt_datamover_pool_mb(void)
{
	return dm_conf.pool_mb;
}

static void dm_log(void *arg, const char *msg)
{
	(void)arg;
	eprintf("tpt datamover: %s\n", msg);
}

static void dm_event(int fd, int events, void *data)
{
	(void)fd;
	(void)events;
	if (tpt_dm_progress(data) < 0)
		eprintf("tpt datamover: progress failed: %s\n",
			tpt_dm_strerror(data));
}

static int dm_accept(void *arg, const struct tpt_dm_hello *hello,
		     const struct sockaddr *src, socklen_t srclen,
		     uint8_t token[TPT_DM_TOKEN_LEN], uint64_t *scope)
{
	struct tpt_datamover_user *u;

	(void)arg;
	list_for_each_entry(u, &dm_users, link)
		if (u->accept && !u->accept(hello, src, srclen, token, scope))
			return 0;
	return -EPERM;
}

static void dm_peer_down(struct tpt_dm_peer *peer, void *arg)
{
	struct tpt_datamover_user *u;

	(void)arg;
	list_for_each_entry(u, &dm_users, link)
		if (u->peer_down)
			u->peer_down(peer);
}

int tpt_datamover_open(void)
{
	struct tpt_dm_config cfg = {
		.listen_addr = dm_conf.addr,
		.listen_port = dm_conf.port,
		.pool_bytes = (size_t)dm_conf.pool_mb << 20,
		.pool_buf_bytes = TPT_DATAMOVER_BUF_BYTES,
		.accept = dm_accept,
		.log = dm_log,
	};
	int err;

	if (dm_conf.dm)
		return 0;
	if (!dm_conf.addr[0]) {
		eprintf("tpt datamover: no address: give tpt_dm=ADDR:PORT "
			"(target) or dm=ADDR:PORT (controller)\n");
		return -EINVAL;
	}
	err = tpt_dm_open(&cfg, &dm_conf.dm);
	if (err) {
		eprintf("tpt datamover: cannot open on %s:%u: %s\n",
			dm_conf.addr, dm_conf.port, strerror(-err));
		return err;
	}
	if (tgt_event_add(tpt_dm_event_fd(dm_conf.dm), EPOLLIN, dm_event,
			  dm_conf.dm)) {
		tpt_dm_close(dm_conf.dm);
		dm_conf.dm = NULL;
		return -EIO;
	}
	tpt_dm_set_peer_down_cb(dm_conf.dm, dm_peer_down, NULL);
	eprintf("tpt datamover (%s) listening on %s:%u\n",
		tpt_dm_provider_name(dm_conf.dm), dm_conf.addr,
		tpt_dm_listen_port(dm_conf.dm));
	return 0;
}
