/* tpt-fi-rma-bench: fi_write / fi_read throughput with plain libfabric
 * between two processes — the yardstick for tpt-dm-bench.
 *
 * Same shape as tpt-dm-bench: the program forks, the child is the passive
 * side (one registered region, a connected endpoint, and a loop that
 * keeps the provider progressing), the parent keeps --inflight RMA
 * operations outstanding for --seconds per size and prints MB/s.  No
 * datamover code is involved: fabric, domain, EQ, CQ, endpoint and MRs
 * are set up here, straight from the libfabric man pages. */
#include "iser/tpt_dm_provider.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "tool_bench.h"

#define PROG "tpt-fi-rma-bench"
#define FIVERSION FI_VERSION(1, 17)
#define REQUESTED_KEY 0x7470740aULL
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

/* The libfabric objects of one side. */
struct fabric_side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_cq *cq;
	struct fid_pep *pep;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *region;
	size_t region_len;
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

static struct fi_info *make_hints(const char *provider)
{
	struct fi_info *hints = fi_allocinfo();

	if (!hints)
		return NULL;
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
		      FI_REMOTE_WRITE;
	hints->ep_attr->type = FI_EP_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(provider);
	return hints;
}

static int open_queues(struct fabric_side *f, const char *side)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_CONTEXT,
		.wait_obj = FI_WAIT_UNSPEC,
		.size = 4096,
	};
	int ret;

	ret = fi_fabric(f->info->fabric_attr, &f->fabric, NULL);
	if (ret)
		return fi_fail(side, "fi_fabric", ret);
	ret = fi_domain(f->fabric, f->info, &f->domain, NULL);
	if (ret)
		return fi_fail(side, "fi_domain", ret);
	ret = fi_eq_open(f->fabric, &eq_attr, &f->eq, NULL);
	if (ret)
		return fi_fail(side, "fi_eq_open", ret);
	ret = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
	if (ret)
		return fi_fail(side, "fi_cq_open", ret);
	return 0;
}

static int register_region(struct fabric_side *f, size_t len, uint64_t access,
			   const char *side)
{
	uint64_t key = 0;
	int ret;

	if (posix_memalign(&f->region, 4096, len)) {
		fprintf(stderr, PROG ": %s: out of memory\n", side);
		return -1;
	}
	memset(f->region, 0, len);
	f->region_len = len;
	if (!(f->info->domain_attr->mr_mode & FI_MR_PROV_KEY))
		key = REQUESTED_KEY;
	ret = fi_mr_reg(f->domain, f->region, len, access, 0, key, 0, &f->mr,
			NULL);
	if (ret)
		return fi_fail(side, "fi_mr_reg", ret);
	return 0;
}

static int bind_and_enable(struct fabric_side *f, struct fi_info *info,
			   const char *side)
{
	int ret;

	ret = fi_endpoint(f->domain, info, &f->ep, NULL);
	if (ret)
		return fi_fail(side, "fi_endpoint", ret);
	ret = fi_ep_bind(f->ep, &f->eq->fid, 0);
	if (!ret)
		ret = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_enable(f->ep);
	if (ret)
		return fi_fail(side, "endpoint setup", ret);
	return 0;
}

/* Blocks on the EQ for the next event, which must be `want`. */
static int wait_cm_event(struct fabric_side *f, uint32_t want,
			 struct fi_eq_cm_entry *entry, const char *side)
{
	struct fi_eq_err_entry err;
	uint32_t event;
	ssize_t ret;

	ret = fi_eq_sread(f->eq, &event, entry, sizeof(*entry), BENCH_STALL_MS,
			  0);
	if (ret == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		fi_eq_readerr(f->eq, &err, 0);
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

static void close_side(struct fabric_side *f)
{
	if (f->ep)
		fi_close(&f->ep->fid);
	if (f->pep)
		fi_close(&f->pep->fid);
	if (f->mr)
		fi_close(&f->mr->fid);
	if (f->cq)
		fi_close(&f->cq->fid);
	if (f->eq)
		fi_close(&f->eq->fid);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	if (f->info)
		fi_freeinfo(f->info);
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
	struct fi_info *hints = make_hints(o->b.provider);
	struct fi_eq_cm_entry entry;
	struct fi_cq_entry comp[16];
	struct sockaddr_storage name;
	size_t namelen = sizeof(name);
	struct lent_region lent;
	unsigned long spins = 0;
	int ret, rc = 1;

	ret = fi_getinfo(FIVERSION, o->b.addr, NULL, FI_SOURCE | FI_NUMERICHOST,
			 hints, &f.info);
	if (ret) {
		fi_fail(side, "fi_getinfo", ret);
		goto out;
	}
	if (open_queues(&f, side))
		goto out;
	ret = fi_passive_ep(f.fabric, f.info, &f.pep, NULL);
	if (!ret)
		ret = fi_pep_bind(f.pep, &f.eq->fid, 0);
	if (!ret)
		ret = fi_listen(f.pep);
	if (!ret)
		ret = fi_getname(&f.pep->fid, &name, &namelen);
	if (ret) {
		fi_fail(side, "listening", ret);
		goto out;
	}
	lent.len = (uint64_t)o->b.inflight * bench_max_size(&o->b);
	if (register_region(&f, lent.len, FI_REMOTE_READ | FI_REMOTE_WRITE,
			    side))
		goto out;
	lent.port = ntohs(((struct sockaddr_in *)&name)->sin_port);
	lent.key = fi_mr_key(f.mr);
	lent.rma_base = (f.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ?
			(uint64_t)(uintptr_t)f.region : 0;
	if (write(to_parent, &lent, sizeof(lent)) != sizeof(lent))
		goto out;

	if (wait_cm_event(&f, FI_CONNREQ, &entry, side))
		goto out;
	ret = bind_and_enable(&f, entry.info, side);
	if (!ret) {
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
			ret = (int)fi_cq_read(f.cq, comp, 16);
			if (++spins % 4096 == 0 && parent_done(from_parent))
				break;
		} else {
			ret = (int)fi_cq_sread(f.cq, comp, 16, NULL,
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
	fi_freeinfo(hints);
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
			ret = fi_cq_read(r->f.cq, comp, 64);
		else
			ret = fi_cq_sread(r->f.cq, comp, 64, NULL,
					  BENCH_STALL_MS);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(r->f.cq, &err, 0);
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
	struct fi_info *hints = make_hints(o->provider);
	struct fi_eq_cm_entry entry;
	char service[8];
	int ret, rc = 1;

	snprintf(service, sizeof(service), "%u", (unsigned int)lent->port);
	hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	ret = fi_getinfo(FIVERSION, o->addr, service, FI_NUMERICHOST, hints,
			 &r.f.info);
	if (ret) {
		hints->tx_attr->op_flags = 0;
		ret = fi_getinfo(FIVERSION, o->addr, service, FI_NUMERICHOST,
				 hints, &r.f.info);
	}
	if (ret) {
		fi_fail(side, "fi_getinfo", ret);
		goto out;
	}
	r.write_flags = FI_COMPLETION;
	if (r.f.info->tx_attr->op_flags & FI_DELIVERY_COMPLETE)
		r.write_flags |= FI_DELIVERY_COMPLETE;
	if (open_queues(&r.f, side) || bind_and_enable(&r.f, r.f.info, side))
		goto out;
	ret = fi_connect(r.f.ep, r.f.info->dest_addr, NULL, 0);
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

	printf("# " PROG " provider=%s inflight=%u seconds=%g%s%s\n",
	       r.f.info->fabric_attr->prov_name, o->inflight, o->seconds,
	       ro->transmit_complete ? " transmit-complete" :
	       (r.write_flags & FI_DELIVERY_COMPLETE) ? " delivery-complete"
						      : "",
	       ro->busy_poll ? " busy-poll" : "");
	if (bench_table(o, run_phase, &r))
		goto out;
	rc = 0;
out:
	close(done_fd);
	close_side(&r.f);
	fi_freeinfo(hints);
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
