/* Shared by the datamover tests: contexts on loopback, an accept policy,
 * and an event loop that calls tpt_dm_progress() only when a context's
 * event fd is readable — so every test also checks that the fd wakes us
 * for everything, the passive side of RMA included — with a deadline so
 * that a lost wake-up fails the test instead of hanging it. */
#ifndef TPT_TEST_DM_HARNESS_H
#define TPT_TEST_DM_HARNESS_H

#include "iser/tpt_dm.h"
#include "iser/tpt_dm_provider.h"
#include "test/unit/unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DM_TEST_DEADLINE_MS 10000
#define DM_TEST_POOL_BUF (4u << 20)
#define DM_TEST_CHUNK (256u << 10)
#define DM_TEST_POOL_BUFS 4u
#define DM_TEST_PEER_ID 7
#define DM_TEST_ARRAY_ID 0x1122334455667788ULL
#define DM_TEST_REFUSED_ID 99

static inline void dm_test_require_provider(void)
{
	if (!tpt_dm_provider_choose()) {
		printf("no usable libfabric provider\n");
		exit(UNIT_SKIP);
	}
}

/* The accepting side's view of who knocked, and the scope it admits
 * peers into (0 unless a test sets it). */
struct dm_test_policy {
	uint64_t scope;
	bool refuse_all;	/* from now on, nobody is admitted */
	int calls;
	struct tpt_dm_hello last;
	char last_src[INET6_ADDRSTRLEN];
	char log[1024];
	int log_lines;
};

static const uint8_t dm_test_token[TPT_DM_TOKEN_LEN] = {
	0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
	0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
};

/* Every peer must know dm_test_token, except the refused id, which is
 * turned away whatever it knows. */
static inline int dm_test_accept(void *arg, const struct tpt_dm_hello *hello,
				 const struct sockaddr *src, socklen_t srclen,
				 uint8_t token[TPT_DM_TOKEN_LEN],
				 uint64_t *scope)
{
	struct dm_test_policy *policy = arg;

	policy->calls++;
	policy->last = *hello;
	policy->last_src[0] = '\0';
	if (src && srclen >= sizeof(struct sockaddr_in) &&
	    src->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)src)->sin_addr,
			  policy->last_src, sizeof(policy->last_src));
	if (hello->peer_id == DM_TEST_REFUSED_ID || policy->refuse_all)
		return -EPERM;
	memcpy(token, dm_test_token, TPT_DM_TOKEN_LEN);
	*scope = policy->scope;
	return 0;
}

static inline void dm_test_log(void *arg, const char *msg)
{
	struct dm_test_policy *policy = arg;
	size_t used = strlen(policy->log);

	policy->log_lines++;
	snprintf(policy->log + used, sizeof(policy->log) - used, "%s\n", msg);
}

/* Where the test contexts listen and connect: loopback, except where the
 * provider cannot use it (RDMA CM over soft-RoCE needs the device's
 * address): TPT_DM_TEST_ADDR. */
static inline const char *dm_test_addr(void)
{
	const char *a = getenv("TPT_DM_TEST_ADDR");

	return a && *a ? a : "127.0.0.1";
}

static inline struct tpt_dm *dm_test_open(bool listen,
					  struct dm_test_policy *policy)
{
	struct tpt_dm_config cfg = {
		.listen_addr = listen ? dm_test_addr() : NULL,
		.pool_bytes = DM_TEST_POOL_BUFS * DM_TEST_POOL_BUF,
		.pool_buf_bytes = DM_TEST_POOL_BUF,
		/* Small chunks, so test-sized transfers exercise splitting. */
		.chunk_bytes = DM_TEST_CHUNK,
		.accept = listen ? dm_test_accept : NULL,
		.accept_arg = policy,
		.log = policy ? dm_test_log : NULL,
		.log_arg = policy,
	};
	struct tpt_dm *dm = NULL;
	int ret = tpt_dm_open(&cfg, &dm);

	if (ret) {
		fprintf(stderr, "tpt_dm_open: %d\n", ret);
		exit(1);
	}
	return dm;
}

static inline struct tpt_dm_hello dm_test_hello(uint16_t peer_id)
{
	struct tpt_dm_hello hello;

	memset(&hello, 0, sizeof(hello));
	hello.role = TPT_DM_ROLE_TARGET;
	hello.peer_id = peer_id;
	hello.array_id = DM_TEST_ARRAY_ID;
	memcpy(hello.token, dm_test_token, TPT_DM_TOKEN_LEN);
	return hello;
}

static inline long dm_test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Runs the contexts until *done is true or the deadline passes. */
static inline bool dm_test_pump(struct tpt_dm **dms, int count,
				const bool *done)
{
	long deadline = dm_test_now_ms() + DM_TEST_DEADLINE_MS;
	struct pollfd pfd[4];
	int i, ret;

	while (!*done) {
		long left = deadline - dm_test_now_ms();

		if (left <= 0) {
			fprintf(stderr, "deadline passed, nothing happened\n");
			return false;
		}
		for (i = 0; i < count; i++) {
			pfd[i].fd = tpt_dm_event_fd(dms[i]);
			pfd[i].events = POLLIN;
			pfd[i].revents = 0;
		}
		ret = poll(pfd, (nfds_t)count, (int)left);
		if (ret < 0 && errno != EINTR)
			return false;
		for (i = 0; i < count; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			ret = tpt_dm_progress(dms[i]);
			if (ret < 0) {
				fprintf(stderr, "progress: %d (%s)\n", ret,
					tpt_dm_strerror(dms[i]));
				return false;
			}
		}
	}
	return true;
}

static inline bool dm_test_pump2(struct tpt_dm *a, struct tpt_dm *b,
				 const bool *done)
{
	struct tpt_dm *dms[2] = { a, b };

	return dm_test_pump(dms, b ? 2 : 1, done);
}

/* --- callbacks that record what happened --- */

struct dm_test_connect {
	bool done;
	int status;
	struct tpt_dm_peer *peer;
};

static inline void dm_test_connect_cb(struct tpt_dm_peer *peer, int status,
				      void *arg)
{
	struct dm_test_connect *c = arg;

	c->done = true;
	c->status = status;
	c->peer = peer;
}

struct dm_test_op {
	bool done;
	int status;
	int calls;
};

static inline void dm_test_op_cb(int status, void *arg)
{
	struct dm_test_op *op = arg;

	op->calls++;
	op->done = true;
	op->status = status;
}

/* Counts down a group of ops; done when all finished. */
struct dm_test_group {
	int left;
	bool done;
	int failed;
	int last_status;
};

static inline void dm_test_group_cb(int status, void *arg)
{
	struct dm_test_group *g = arg;

	if (status) {
		g->failed++;
		g->last_status = status;
	}
	if (--g->left == 0)
		g->done = true;
}

struct dm_test_down {
	bool done;
	int calls;
	struct tpt_dm_peer *peer;
	uint16_t peer_id;
};

static inline void dm_test_down_cb(struct tpt_dm_peer *peer, void *arg)
{
	struct dm_test_down *d = arg;

	d->done = true;
	d->calls++;
	d->peer = peer;
	d->peer_id = tpt_dm_peer_hello(peer)->peer_id;
}

/* Connects active (in @scope) to passive and runs both until the connect
 * finished; the passive side admits it into policy->scope. */
static inline struct tpt_dm_peer *dm_test_connect_in(struct tpt_dm *active,
						     uint64_t scope,
						     struct tpt_dm *passive,
						     uint16_t peer_id,
						     int *status)
{
	struct tpt_dm_hello hello = dm_test_hello(peer_id);
	struct dm_test_connect c = { 0 };
	struct tpt_dm_peer *peer = NULL;
	int ret;

	ret = tpt_dm_connect(active, scope, dm_test_addr(),
			     tpt_dm_listen_port(passive), &hello,
			     dm_test_connect_cb, &c, &peer);
	if (ret) {
		fprintf(stderr, "tpt_dm_connect: %d (%s)\n", ret,
			tpt_dm_strerror(active));
		*status = ret;
		return NULL;
	}
	if (!dm_test_pump2(active, passive, &c.done)) {
		*status = -ETIMEDOUT;
		return peer;
	}
	*status = c.status;
	return peer;
}

/* The same in the default scope. */
static inline struct tpt_dm_peer *dm_test_connect(struct tpt_dm *active,
						  struct tpt_dm *passive,
						  uint16_t peer_id,
						  int *status)
{
	return dm_test_connect_in(active, 0, passive, peer_id, status);
}

static inline void dm_test_fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;
	uint32_t x = seed * 2654435761u + 1;
	size_t i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

#endif
