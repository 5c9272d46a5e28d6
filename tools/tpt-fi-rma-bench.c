/* tpt-fi-rma-bench: fi_write / fi_read throughput with plain libfabric
 * between two processes — the yardstick for tpt-dm-bench.
 *
 * Same shape as tpt-dm-bench: the program forks, the child is the passive
 * side (one registered region, a connected endpoint, and a loop that
 * keeps the provider progressing), the parent keeps --inflight RMA
 * operations outstanding for --seconds per size and prints MB/s.  No
 * datamover code is on the data path: the fabric, domain, EQ, CQ,
 * endpoint and MRs are set up as the datamover sets up its own
 * (iser/tpt_dm_fabric.h), then this side posts fi_write/fi_read itself
 * and reads the CQ. */
#include "iser/tpt_dm_fabric.h"

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

#define PROG "tpt-fi-rma-bench"
/* How long the passive side blocks in the CQ before looking at its pipe. */
#define PASSIVE_WAIT_MS 100

struct rma_opts {
	/* The options both benchmarks take; after parsing, .provider is
	 * the one in use (given or chosen). */
	struct bench_opts b;
	bool transmit_complete;
	bool busy_poll;
};

struct lent_region {
	uint64_t port;
	uint64_t key;
	uint64_t rma_base;
	uint64_t len;
};

/* The libfabric objects of one side: one domain, like a datamover with
 * one scope. */
struct fabric_side {
	struct tpt_dm_fabric fab;
	struct tpt_dm_domain dom;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *region;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " [OPTIONS]\n"
		"\n"
		"fi_write/fi_read throughput with plain libfabric between this\n"
		"process and a forked passive peer (the baseline for tpt-dm-bench).\n"
		"\n"
		BENCH_USAGE_OPTIONS
		"  --inflight N         operations kept outstanding (16)\n"
		"  --seconds S          measuring time per size and op (2)\n"
		"  --transmit-complete  plain fi_write: complete when sent, not when\n"
		"                       delivered (the datamover asks for delivery)\n"
		"  --busy-poll          spin on the CQ instead of blocking in it\n"
		"  --help               this text\n"
		"\n"
		BENCH_USAGE_OUTPUT);
}

/* Our own options, beyond tool_bench.h's. */
static int rma_option(void *ctx, int c, const char *arg)
{
	struct rma_opts *o = ctx;

	(void)arg;
	switch (c) {
	case 'T':
		o->transmit_complete = true;
		return 0;
	case 'B':
		o->busy_poll = true;
		return 0;
	default:
		usage(stderr);
		return -1;
	}
}

static int parse_args(int argc, char **argv, struct rma_opts *o)
{
	static const struct option longopts[] = {
		BENCH_LONGOPTS,
		{ "transmit-complete", no_argument, NULL, 'T' },
		{ "busy-poll", no_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct bench_tool tool = {
		.prog = PROG,
		.usage = usage,
		.option = rma_option,
		.ctx = o,
	};

	memset(o, 0, sizeof(*o));
	return bench_parse_args(argc, argv, longopts, &tool, &o->b);
}

static int fi_fail(const char *side, const char *what, ssize_t ret)
{
	fprintf(stderr, PROG ": %s: %s: %s\n", side, what,
		fi_strerror((int)(ret < 0 ? -ret : ret)));
	return -1;
}

/* A set-up step failed: tpt_dm_fabric.c left why in fab.errbuf. */
static int fab_fail(const struct fabric_side *f, const char *side)
{
	fprintf(stderr, PROG ": %s: %s\n", side, f->fab.errbuf);
	return -1;
}

static int register_region(struct fabric_side *f, size_t len, uint64_t access,
			   const char *side)
{
	if (posix_memalign(&f->region, 4096, len)) {
		fprintf(stderr, PROG ": %s: out of memory\n", side);
		return -1;
	}
	memset(f->region, 0, len);
	if (tpt_dm_fabric_mr_reg(&f->fab, &f->dom, f->region, len, access,
				 NULL, &f->mr))
		return fab_fail(f, side);
	return 0;
}

/* Blocks on the EQ for the next event, which must be `want`. */
static int wait_cm_event(struct fabric_side *f, uint32_t want,
			 struct fi_eq_cm_entry *entry, const char *side)
{
	struct fi_eq_err_entry err;
	uint32_t event;
	ssize_t ret;

	ret = fi_eq_sread(f->fab.eq, &event, entry, sizeof(*entry),
			  BENCH_STALL_MS, 0);
	if (ret == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		fi_eq_readerr(f->fab.eq, &err, 0);
		return fi_fail(side, "connection", err.err);
	}
	if (ret < 0)
		return fi_fail(side, "waiting for a connection event", ret);
	if (event != want) {
		fprintf(stderr, PROG ": %s: unexpected connection event %u\n",
			side, event);
		return -1;
	}
	return 0;
}

/* The fabric (listening on addr, when given) and the side's domain. */
static int open_side(struct fabric_side *f, const char *provider,
		     const char *addr)
{
	if (tpt_dm_fabric_open(&f->fab, provider, addr, 0))
		return -1;
	return tpt_dm_fabric_domain_open(&f->fab, &f->dom);
}

static void close_side(struct fabric_side *f)
{
	if (f->ep)
		fi_close(&f->ep->fid);
	if (f->mr)
		fi_close(&f->mr->fid);
	tpt_dm_fabric_domain_close(&f->dom);
	tpt_dm_fabric_close(&f->fab);
	free(f->region);
}

/* --- the passive child --- */

static bool parent_done(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) > 0;
}

/* A bench_serve_fn. */
static int serve(void *ctx, int to_parent, int from_parent)
{
	static const char side[] = "passive side";
	const struct rma_opts *o = ctx;
	struct fabric_side f = { 0 };
	struct fi_eq_cm_entry entry;
	struct fi_cq_entry comp[16];
	struct lent_region lent;
	unsigned long spins = 0;
	int ret, rc = 1;

	if (open_side(&f, o->b.provider, o->b.addr)) {
		fab_fail(&f, side);
		goto out;
	}
	lent.len = (uint64_t)o->b.inflight * bench_max_size(&o->b);
	if (register_region(&f, lent.len, FI_REMOTE_READ | FI_REMOTE_WRITE,
			    side))
		goto out;
	lent.port = f.fab.listen_port;
	lent.key = fi_mr_key(f.mr);
	lent.rma_base = tpt_dm_fabric_rma_base(&f.fab, f.region);
	if (write(to_parent, &lent, sizeof(lent)) != sizeof(lent))
		goto out;

	if (wait_cm_event(&f, FI_CONNREQ, &entry, side))
		goto out;
	ret = tpt_dm_fabric_ep_open(&f.fab, &f.dom, entry.info, NULL, &f.ep);
	if (ret) {
		fab_fail(&f, side);
	} else {
		ret = fi_accept(f.ep, NULL, 0);
		if (ret)
			fi_fail(side, "fi_accept", ret);
	}
	fi_freeinfo(entry.info);
	if (ret || wait_cm_event(&f, FI_CONNECTED, &entry, side))
		goto out;

	/* The tcp provider moves incoming RMA data only while somebody
	 * reads the CQ: keep reading it until the parent is done. */
	for (;;) {
		if (o->busy_poll) {
			ret = (int)fi_cq_read(f.dom.cq, comp, 16);
			if (++spins % 4096 == 0 && parent_done(from_parent))
				break;
		} else {
			ret = (int)fi_cq_sread(f.dom.cq, comp, 16, NULL,
					       PASSIVE_WAIT_MS);
			if (parent_done(from_parent))
				break;
		}
		if (ret < 0 && ret != -FI_EAGAIN) {
			fi_fail(side, "reading the CQ", ret);
			goto out;
		}
	}
	rc = 0;
out:
	close_side(&f);
	return rc;
}

/* --- the active parent --- */

struct run {
	const struct rma_opts *o;
	struct fabric_side f;
	struct lent_region lent;
	void *desc;
	uint64_t write_flags;
	bool put;
	size_t size;
	uint64_t bytes;
	unsigned int outstanding;
	unsigned int unposted;	/* posts refused with -FI_EAGAIN */
};

/* The op context is the slot number, so every op has its own area. */
static ssize_t post_one(struct run *r, uintptr_t slot)
{
	char *local = (char *)r->f.region + slot * r->size;
	uint64_t remote = r->lent.rma_base + slot * r->size;
	struct iovec iov = { .iov_base = local, .iov_len = r->size };
	struct fi_rma_iov rma_iov = {
		.addr = remote,
		.len = r->size,
		.key = r->lent.key,
	};
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &r->desc,
		.iov_count = 1,
		.rma_iov = &rma_iov,
		.rma_iov_count = 1,
		.context = (void *)slot,
	};

	if (!r->put)
		return fi_read(r->f.ep, local, r->size, r->desc, 0, remote,
			       r->lent.key, (void *)slot);
	if (r->o->transmit_complete)
		return fi_write(r->f.ep, local, r->size, r->desc, 0, remote,
				r->lent.key, (void *)slot);
	return fi_writemsg(r->f.ep, &msg, r->write_flags);
}

static int post_or_defer(struct run *r, uintptr_t slot, uintptr_t *deferred)
{
	ssize_t ret = post_one(r, slot);

	if (ret == -FI_EAGAIN) {
		deferred[r->unposted++] = slot;
		return 0;
	}
	if (ret)
		return fi_fail("active side", r->put ? "fi_write" : "fi_read",
			       ret);
	r->outstanding++;
	return 0;
}

/* A bench_phase_fn: completions repost their slot until end. */
static int run_phase(void *ctx, bool put, size_t size, double end,
		     uint64_t *bytes)
{
	struct run *r = ctx;
	struct fi_cq_entry comp[64];
	struct fi_cq_err_entry err;
	uintptr_t deferred[BENCH_MAX_INFLIGHT];
	unsigned int i, n;
	ssize_t ret;

	r->put = put;
	r->size = size;
	r->bytes = 0;
	r->unposted = 0;
	for (i = 0; i < r->o->b.inflight; i++)
		if (post_or_defer(r, i, deferred))
			return -1;
	while (r->outstanding || r->unposted) {
		if (r->o->busy_poll || !r->outstanding)
			ret = fi_cq_read(r->f.dom.cq, comp, 64);
		else
			ret = fi_cq_sread(r->f.dom.cq, comp, 64, NULL,
					  BENCH_STALL_MS);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(r->f.dom.cq, &err, 0);
			return fi_fail("active side", "completion", err.err);
		}
		if (ret == -FI_EAGAIN && !r->o->busy_poll && r->outstanding) {
			fprintf(stderr, PROG ": no completion for %d s\n",
				BENCH_STALL_MS / 1000);
			return -1;
		}
		if (ret < 0 && ret != -FI_EAGAIN)
			return fi_fail("active side", "reading the CQ", ret);
		for (i = 0; ret > 0 && i < (unsigned int)ret; i++) {
			r->outstanding--;
			r->bytes += r->size;
			if (bench_now() < end &&
			    post_or_defer(r, (uintptr_t)comp[i].op_context,
					  deferred))
				return -1;
		}
		/* Retry posts the provider had no room for. */
		n = r->unposted;
		r->unposted = 0;
		for (i = 0; i < n; i++)
			if (post_or_defer(r, deferred[i], deferred))
				return -1;
	}
	*bytes = r->bytes;
	return 0;
}

/* A bench_drive_fn. */
static int drive(void *ctx, const void *lent_arg, int done_fd)
{
	static const char side[] = "active side";
	const struct rma_opts *ro = ctx;
	const struct bench_opts *o = &ro->b;
	const struct lent_region *lent = lent_arg;
	struct run r = { .o = ro, .lent = *lent };
	struct fi_info *dest = NULL;
	struct fi_eq_cm_entry entry;
	int ret, rc = 1;

	if (open_side(&r.f, o->provider, NULL) ||
	    tpt_dm_fabric_dest_info(&r.f.fab, o->addr, (uint16_t)lent->port,
				    &dest) ||
	    tpt_dm_fabric_ep_open(&r.f.fab, &r.f.dom, dest, NULL, &r.f.ep)) {
		fab_fail(&r.f, side);
		goto out;
	}
	ret = fi_connect(r.f.ep, dest->dest_addr, NULL, 0);
	if (ret) {
		fi_fail(side, "fi_connect", ret);
		goto out;
	}
	if (wait_cm_event(&r.f, FI_CONNECTED, &entry, side))
		goto out;
	if (register_region(&r.f, (size_t)o->inflight * bench_max_size(o),
			    FI_READ | FI_WRITE, side))
		goto out;
	r.desc = fi_mr_desc(r.f.mr);
	r.write_flags = r.f.fab.write_flags;

	printf("# " PROG " provider=%s inflight=%u seconds=%g%s%s\n",
	       r.f.fab.info->fabric_attr->prov_name, o->inflight, o->seconds,
	       ro->transmit_complete ? " transmit-complete" :
	       (r.write_flags & FI_DELIVERY_COMPLETE) ? " delivery-complete"
						      : "",
	       ro->busy_poll ? " busy-poll" : "");
	if (bench_table(o, run_phase, &r))
		goto out;
	rc = 0;
out:
	close(done_fd);
	if (dest)
		fi_freeinfo(dest);
	close_side(&r.f);
	return rc;
}

int main(int argc, char **argv)
{
	struct rma_opts o;
	struct lent_region lent;

	if (parse_args(argc, argv, &o))
		return 2;
	o.b.provider = bench_provider(PROG, o.b.provider);
	if (!o.b.provider)
		return 1;
	return bench_fork(PROG, &lent, sizeof(lent), serve, drive, &o);
}
