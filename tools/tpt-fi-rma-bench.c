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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define PROG "tpt-fi-rma-bench"
#define FIVERSION FI_VERSION(1, 17)
#define MAX_SIZES 8
#define MAX_INFLIGHT 4096
#define WARMUP_SECONDS 0.2
#define STALL_MS 10000
#define REQUESTED_KEY 0x7470740aULL
/* How long the passive side blocks in the CQ before looking at its pipe. */
#define PASSIVE_WAIT_MS 100

struct bench_opts {
	const char *addr;
	const char *provider;
	size_t sizes[MAX_SIZES];
	int nr_sizes;
	bool do_put, do_get;
	unsigned int inflight;
	double seconds;
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
		"  --addr ADDR          numeric address to listen on (127.0.0.1)\n"
		"  --provider NAME      libfabric provider (default: TPT_DM_PROVIDER,\n"
		"                       else verbs, else tcp)\n"
		"  --sizes LIST         transfer sizes in bytes (65536,1048576)\n"
		"  --ops LIST           put, get or put,get (put,get)\n"
		"  --inflight N         operations kept outstanding (16)\n"
		"  --seconds S          measuring time per size and op (2)\n"
		"  --transmit-complete  plain fi_write: complete when sent, not when\n"
		"                       delivered (the datamover asks for delivery)\n"
		"  --busy-poll          spin on the CQ instead of blocking in it\n"
		"  --help               this text\n"
		"\n"
		"Prints one line per op and size: op, bytes, MB/s (10^6 B/s).\n"
		"Exit status: 0 success, 1 transfer error, 2 usage error.\n");
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-' || v == 0)
		return -1;
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (*end)
		return -1;
	*out = (size_t)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
	static const struct option longopts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "provider", required_argument, NULL, 'p' },
		{ "sizes", required_argument, NULL, 's' },
		{ "ops", required_argument, NULL, 'o' },
		{ "inflight", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 't' },
		{ "transmit-complete", no_argument, NULL, 'T' },
		{ "busy-poll", no_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *list, *tok, *save;
	size_t v;
	int c;

	memset(o, 0, sizeof(*o));
	o->addr = "127.0.0.1";
	o->sizes[0] = 64 << 10;
	o->sizes[1] = 1 << 20;
	o->nr_sizes = 2;
	o->do_put = o->do_get = true;
	o->inflight = 16;
	o->seconds = 2;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			o->addr = optarg;
			break;
		case 'p':
			o->provider = optarg;
			break;
		case 's':
			o->nr_sizes = 0;
			list = strdup(optarg);
			for (tok = strtok_r(list, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				if (o->nr_sizes == MAX_SIZES ||
				    parse_size(tok, &o->sizes[o->nr_sizes])) {
					fprintf(stderr, PROG ": invalid size "
						"'%s' (at most %d sizes)\n",
						tok, MAX_SIZES);
					free(list);
					return -1;
				}
				o->nr_sizes++;
			}
			free(list);
			if (!o->nr_sizes) {
				fprintf(stderr, PROG ": --sizes is empty\n");
				return -1;
			}
			break;
		case 'o':
			o->do_put = strstr(optarg, "put") != NULL;
			o->do_get = strstr(optarg, "get") != NULL;
			if (!o->do_put && !o->do_get) {
				fprintf(stderr, PROG ": --ops takes put, get "
					"or put,get\n");
				return -1;
			}
			break;
		case 'n':
			if (parse_size(optarg, &v) || v > MAX_INFLIGHT) {
				fprintf(stderr, PROG ": invalid --inflight "
					"'%s' (1..%d)\n", optarg, MAX_INFLIGHT);
				return -1;
			}
			o->inflight = (unsigned int)v;
			break;
		case 't':
			o->seconds = strtod(optarg, NULL);
			if (!(o->seconds > 0 && o->seconds < 3600)) {
				fprintf(stderr, PROG ": invalid --seconds "
					"'%s'\n", optarg);
				return -1;
			}
			break;
		case 'T':
			o->transmit_complete = true;
			break;
		case 'B':
			o->busy_poll = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	return 0;
}

static size_t max_size(const struct bench_opts *o)
{
	size_t m = 0;
	int i;

	for (i = 0; i < o->nr_sizes; i++)
		if (o->sizes[i] > m)
			m = o->sizes[i];
	return m;
}

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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

	ret = fi_eq_sread(f->eq, &event, entry, sizeof(*entry), STALL_MS, 0);
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

static int serve(const struct bench_opts *o, const char *provider,
		 int to_parent, int from_parent)
{
	static const char side[] = "passive side";
	struct fabric_side f = { 0 };
	struct fi_info *hints = make_hints(provider);
	struct fi_eq_cm_entry entry;
	struct fi_cq_entry comp[16];
	struct sockaddr_storage name;
	size_t namelen = sizeof(name);
	struct lent_region lent;
	unsigned long spins = 0;
	int ret, rc = 1;

	ret = fi_getinfo(FIVERSION, o->addr, NULL, FI_SOURCE | FI_NUMERICHOST,
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
	lent.len = (uint64_t)o->inflight * max_size(o);
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
	const struct bench_opts *o;
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

static int run_phase(struct run *r, double seconds, double *mbps)
{
	struct fi_cq_entry comp[64];
	struct fi_cq_err_entry err;
	uintptr_t deferred[MAX_INFLIGHT];
	double start = now_seconds(), end = start + seconds, elapsed;
	unsigned int i, n;
	ssize_t ret;

	r->bytes = 0;
	r->unposted = 0;
	for (i = 0; i < r->o->inflight; i++)
		if (post_or_defer(r, i, deferred))
			return -1;
	while (r->outstanding || r->unposted) {
		if (r->o->busy_poll || !r->outstanding)
			ret = fi_cq_read(r->f.cq, comp, 64);
		else
			ret = fi_cq_sread(r->f.cq, comp, 64, NULL, STALL_MS);
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(r->f.cq, &err, 0);
			return fi_fail("active side", "completion", err.err);
		}
		if (ret == -FI_EAGAIN && !r->o->busy_poll && r->outstanding) {
			fprintf(stderr, PROG ": no completion for %d s\n",
				STALL_MS / 1000);
			return -1;
		}
		if (ret < 0 && ret != -FI_EAGAIN)
			return fi_fail("active side", "reading the CQ", ret);
		for (i = 0; ret > 0 && i < (unsigned int)ret; i++) {
			r->outstanding--;
			r->bytes += r->size;
			if (now_seconds() < end &&
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
	elapsed = now_seconds() - start;
	*mbps = (double)r->bytes / elapsed / 1e6;
	return 0;
}

static int drive(const struct bench_opts *o, const char *provider,
		 const struct lent_region *lent, int done_fd)
{
	static const char side[] = "active side";
	struct run r = { .o = o, .lent = *lent };
	struct fi_info *hints = make_hints(provider);
	struct fi_eq_cm_entry entry;
	char service[8];
	int pass, s, ret, rc = 1;
	double mbps;

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
	if (register_region(&r.f, (size_t)o->inflight * max_size(o),
			    FI_READ | FI_WRITE, side))
		goto out;
	r.desc = fi_mr_desc(r.f.mr);

	printf("# " PROG " provider=%s inflight=%u seconds=%g%s%s\n",
	       r.f.info->fabric_attr->prov_name, o->inflight, o->seconds,
	       o->transmit_complete ? " transmit-complete" :
	       (r.write_flags & FI_DELIVERY_COMPLETE) ? " delivery-complete"
						      : "",
	       o->busy_poll ? " busy-poll" : "");
	printf("%-4s %10s %10s\n", "op", "bytes", "MB/s");
	for (pass = 0; pass < 2; pass++) {
		r.put = pass == 0;
		if ((r.put && !o->do_put) || (!r.put && !o->do_get))
			continue;
		for (s = 0; s < o->nr_sizes; s++) {
			r.size = o->sizes[s];
			if (run_phase(&r, WARMUP_SECONDS, &mbps) ||
			    run_phase(&r, o->seconds, &mbps))
				goto out;
			printf("%-4s %10zu %10.1f\n", r.put ? "put" : "get",
			       r.size, mbps);
			fflush(stdout);
		}
	}
	rc = 0;
out:
	close(done_fd);
	close_side(&r.f);
	fi_freeinfo(hints);
	return rc;
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct lent_region lent;
	const char *provider;
	int to_parent[2], to_child[2], wstatus, rc;
	pid_t child;

	if (parse_args(argc, argv, &o))
		return 2;
	provider = o.provider ? o.provider : tpt_dm_provider_choose();
	if (!provider || !tpt_dm_provider_usable(provider)) {
		fprintf(stderr, PROG ": libfabric provider %s is not usable\n",
			provider ? provider : "(none found)");
		return 1;
	}
	if (pipe(to_parent) || pipe(to_child)) {
		fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
		return 1;
	}
	fflush(stdout);
	child = fork();
	if (child < 0) {
		fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
		return 1;
	}
	if (child == 0) {
		close(to_parent[0]);
		close(to_child[1]);
		_exit(serve(&o, provider, to_parent[1], to_child[0]));
	}
	close(to_parent[1]);
	close(to_child[0]);
	if (read(to_parent[0], &lent, sizeof(lent)) != sizeof(lent)) {
		fprintf(stderr, PROG ": the passive side did not start\n");
		waitpid(child, &wstatus, 0);
		return 1;
	}
	rc = drive(&o, provider, &lent, to_child[1]);
	if (waitpid(child, &wstatus, 0) == child &&
	    (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus)) && !rc) {
		fprintf(stderr, PROG ": the passive side failed\n");
		rc = 1;
	}
	return rc;
}
