/* tpt-dm-bench: Put_Data / Get_Data throughput over the TPT-RAID
 * datamover between two processes.
 *
 * The program forks: the child is the passive side (a host lending a
 * registered region, served from its own event loop), the parent the
 * active side (a target moving the data).  For each operation and size
 * the parent keeps --inflight transfers outstanding for --seconds and
 * prints MB/s.  tools/tpt-fi-rma-bench.c does the same with raw libfabric
 * calls; scripts/bench/datamover compares the two. */
#include "iser/tpt_dm.h"
#include "iser/tpt_dm_provider.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool_bench.h"

#define PROG "tpt-dm-bench"

struct dm_opts {
	struct bench_opts b;	/* the options both benchmarks take */
	size_t chunk_bytes;
	unsigned int max_inflight;
};

/* What the passive child lends the parent, sent up a pipe. */
struct lent_region {
	uint64_t port;
	uint64_t stag;
	uint64_t rma_base;
	uint64_t len;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " [OPTIONS]\n"
		"\n"
		"Put_Data/Get_Data throughput over the TPT-RAID datamover\n"
		"between this process and a forked passive peer.\n"
		"\n"
		BENCH_USAGE_OPTIONS
		"  --inflight N         transfers kept outstanding (16)\n"
		"  --seconds S          measuring time per size and op (2)\n"
		"  --chunk BYTES        datamover chunk_bytes (its default)\n"
		"  --max-inflight N     datamover RMA chunks per peer (its default)\n"
		"  --help               this text\n"
		"\n"
		BENCH_USAGE_OUTPUT);
}

/* Our own options, beyond tool_bench.h's. */
static int dm_option(void *ctx, int c, const char *arg)
{
	struct dm_opts *o = ctx;
	size_t v;

	switch (c) {
	case 'c':
		if (bench_parse_size(arg, &o->chunk_bytes)) {
			fprintf(stderr, PROG ": invalid --chunk '%s'\n", arg);
			return -1;
		}
		return 0;
	case 'm':
		if (bench_parse_size(arg, &v) || v > 65536) {
			fprintf(stderr, PROG ": invalid --max-inflight '%s'\n",
				arg);
			return -1;
		}
		o->max_inflight = (unsigned int)v;
		return 0;
	default:
		usage(stderr);
		return -1;
	}
}

static int parse_args(int argc, char **argv, struct dm_opts *o)
{
	static const struct option longopts[] = {
		BENCH_LONGOPTS,
		{ "chunk", required_argument, NULL, 'c' },
		{ "max-inflight", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct bench_tool tool = {
		.prog = PROG,
		.usage = usage,
		.option = dm_option,
		.ctx = o,
	};

	memset(o, 0, sizeof(*o));
	return bench_parse_args(argc, argv, longopts, &tool, &o->b);
}

static const uint8_t bench_token[TPT_DM_TOKEN_LEN] = "tpt-dm-bench-key";

/* The one peer, the active child, knows the bench's token; the datamover
 * checks its proof.  Everything here is in the default scope: there is
 * only the one pair to keep apart from nobody. */
static int bench_accept(void *arg, const struct tpt_dm_hello *hello,
			const struct sockaddr *src, socklen_t srclen,
			uint8_t token[TPT_DM_TOKEN_LEN], uint64_t *scope)
{
	(void)arg;
	(void)hello;
	(void)src;
	(void)srclen;
	(void)scope;
	memcpy(token, bench_token, TPT_DM_TOKEN_LEN);
	return 0;
}

/* --- the passive child --- */

static int serve(void *ctx, int to_parent, int from_parent)
{
	const struct bench_opts *o = &((const struct dm_opts *)ctx)->b;
	struct tpt_dm_config cfg = {
		.provider = o->provider,
		.listen_addr = o->addr,
		/* Nothing of ours moves from here: a token pool. */
		.pool_bytes = 64 << 10,
		.pool_buf_bytes = 64 << 10,
		.accept = bench_accept,
	};
	struct lent_region lent;
	struct tpt_dm_buf *region_buf;
	struct tpt_dm *dm;
	struct pollfd pfd[2];
	void *region;
	int ret;

	ret = tpt_dm_open(&cfg, &dm);
	if (ret) {
		fprintf(stderr, PROG ": passive side: open: %s\n",
			strerror(-ret));
		return 1;
	}
	lent.len = (uint64_t)o->inflight * bench_max_size(o);
	if (posix_memalign(&region, 4096, lent.len)) {
		fprintf(stderr, PROG ": passive side: out of memory\n");
		return 1;
	}
	memset(region, 0, lent.len);
	ret = tpt_dm_register(dm, 0, region, lent.len,
			      TPT_DM_ACCESS_REMOTE_READ |
			      TPT_DM_ACCESS_REMOTE_WRITE, &region_buf);
	if (ret) {
		fprintf(stderr, PROG ": passive side: register: %s\n",
			tpt_dm_strerror(dm));
		return 1;
	}
	lent.port = tpt_dm_listen_port(dm);
	lent.stag = tpt_dm_buf_stag(region_buf);
	lent.rma_base = tpt_dm_buf_rma_base(region_buf);
	if (write(to_parent, &lent, sizeof(lent)) != sizeof(lent))
		return 1;

	/* The passive side works too: the tcp provider moves the bytes of
	 * every RMA aimed at us from inside our progress calls. */
	pfd[0].fd = tpt_dm_event_fd(dm);
	pfd[1].fd = from_parent;
	pfd[0].events = pfd[1].events = POLLIN;
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, PROG ": passive side: poll: %s\n",
				strerror(errno));
			return 1;
		}
		if (pfd[1].revents)
			break;	/* the parent is done */
		if (tpt_dm_progress(dm) < 0) {
			fprintf(stderr, PROG ": passive side: %s\n",
				tpt_dm_strerror(dm));
			return 1;
		}
	}
	tpt_dm_buf_release(region_buf);
	tpt_dm_close(dm);
	free(region);
	return 0;
}

/* --- the active parent --- */

struct bench;

struct slot {
	struct bench *b;
	unsigned int index;
	struct tpt_dm_buf *buf;
};

struct bench {
	const struct dm_opts *o;
	struct tpt_dm *dm;
	struct tpt_dm_peer *peer;
	struct lent_region lent;
	struct slot *slots;
	bool put;
	size_t size;
	double end;
	unsigned int outstanding;
	uint64_t bytes;
	int error;
	bool connected;
	int connect_status;
};

static int slot_start(struct slot *s);

static void slot_done(int status, void *arg)
{
	struct slot *s = arg;
	struct bench *b = s->b;

	b->outstanding--;
	if (status) {
		if (!b->error)
			fprintf(stderr, PROG ": %s of %zu bytes failed: %s\n",
				b->put ? "put" : "get", b->size,
				strerror(-status));
		b->error = status;
		return;
	}
	b->bytes += b->size;
	if (!b->error && bench_now() < b->end)
		slot_start(s);
}

static int slot_start(struct slot *s)
{
	struct bench *b = s->b;
	uint64_t remote = b->lent.rma_base + (uint64_t)s->index * b->size;
	int ret;

	if (b->put)
		ret = tpt_dm_put(b->peer, s->buf, 0, b->lent.stag, remote,
				 b->size, slot_done, s);
	else
		ret = tpt_dm_get(b->peer, s->buf, 0, b->lent.stag, remote,
				 b->size, slot_done, s);
	if (ret) {
		fprintf(stderr, PROG ": starting a %s: %s\n",
			b->put ? "put" : "get", tpt_dm_strerror(b->dm));
		b->error = ret;
		return ret;
	}
	b->outstanding++;
	return 0;
}

/* Runs the event loop until nothing is outstanding (or *flag is set). */
static int run_loop(struct bench *b, const bool *flag)
{
	struct pollfd pfd = { .fd = tpt_dm_event_fd(b->dm), .events = POLLIN };
	int ret;

	while (flag ? !*flag : b->outstanding > 0) {
		ret = poll(&pfd, 1, BENCH_STALL_MS);
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0) {
			fprintf(stderr, PROG ": poll: %s\n", strerror(errno));
			return -1;
		}
		if (ret == 0) {
			fprintf(stderr, PROG ": no progress for %d s\n",
				BENCH_STALL_MS / 1000);
			return -1;
		}
		if (tpt_dm_progress(b->dm) < 0) {
			fprintf(stderr, PROG ": %s\n", tpt_dm_strerror(b->dm));
			return -1;
		}
	}
	return 0;
}

/* A bench_phase_fn: the slots restart their transfers until b->end. */
static int run_phase(void *ctx, bool put, size_t size, double end,
		     uint64_t *bytes)
{
	struct bench *b = ctx;
	unsigned int i;

	b->put = put;
	b->size = size;
	b->end = end;
	b->bytes = 0;
	for (i = 0; i < b->o->b.inflight; i++)
		if (slot_start(&b->slots[i]))
			break;
	if (run_loop(b, NULL) || b->error)
		return -1;
	*bytes = b->bytes;
	return 0;
}

static void on_connect(struct tpt_dm_peer *peer, int status, void *arg)
{
	struct bench *b = arg;

	(void)peer;
	b->connected = true;
	b->connect_status = status;
}

/* A bench_drive_fn: measures over the connection to the child. */
static int drive(void *ctx, const void *lent_arg, int done_fd)
{
	const struct dm_opts *dmo = ctx;
	const struct bench_opts *o = &dmo->b;
	const struct lent_region *lent = lent_arg;
	struct tpt_dm_config cfg = {
		.provider = o->provider,
		.pool_buf_bytes = bench_max_size(o),
		.pool_bytes = (size_t)o->inflight * bench_max_size(o),
		.chunk_bytes = dmo->chunk_bytes,
		.max_inflight = dmo->max_inflight,
	};
	struct tpt_dm_hello hello = {
		.role = TPT_DM_ROLE_TARGET,
		.peer_id = 1,
	};
	struct bench b = { .o = dmo, .lent = *lent };
	unsigned int i;
	int ret, rc = 1;

	memcpy(hello.token, bench_token, TPT_DM_TOKEN_LEN);
	ret = tpt_dm_open(&cfg, &b.dm);
	if (ret) {
		fprintf(stderr, PROG ": open: %s\n", strerror(-ret));
		return 1;
	}
	b.slots = calloc(o->inflight, sizeof(*b.slots));
	if (!b.slots)
		goto out;
	for (i = 0; i < o->inflight; i++) {
		b.slots[i].b = &b;
		b.slots[i].index = i;
		ret = tpt_dm_buf_get(b.dm, 0, bench_max_size(o), 0,
				     &b.slots[i].buf);
		if (ret) {
			fprintf(stderr, PROG ": buffer: %s\n",
				tpt_dm_strerror(b.dm));
			goto out;
		}
		memset(tpt_dm_buf_addr(b.slots[i].buf), (int)i,
		       bench_max_size(o));
	}
	ret = tpt_dm_connect(b.dm, 0, o->addr, (uint16_t)lent->port, &hello,
			     on_connect, &b, &b.peer);
	if (ret) {
		fprintf(stderr, PROG ": connect: %s\n", tpt_dm_strerror(b.dm));
		goto out;
	}
	if (run_loop(&b, &b.connected))
		goto out;
	if (b.connect_status) {
		fprintf(stderr, PROG ": connect to %s:%u: %s\n", o->addr,
			(unsigned int)lent->port, strerror(-b.connect_status));
		goto out;
	}

	printf("# " PROG " provider=%s inflight=%u seconds=%g\n",
	       tpt_dm_provider_name(b.dm), o->inflight, o->seconds);
	if (bench_table(o, run_phase, &b))
		goto out;
	rc = 0;
out:
	close(done_fd);
	tpt_dm_disconnect(b.peer);
	if (b.slots)
		for (i = 0; i < o->inflight; i++)
			tpt_dm_buf_release(b.slots[i].buf);
	free(b.slots);
	tpt_dm_close(b.dm);
	return rc;
}

int main(int argc, char **argv)
{
	struct dm_opts o;
	struct lent_region lent;

	if (parse_args(argc, argv, &o))
		return 2;
	/* Only a check: with no --provider the datamover chooses itself. */
	if (!bench_provider(PROG, o.b.provider))
		return 1;
	return bench_fork(PROG, &lent, sizeof(lent), serve, drive, &o);
}
