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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "tpt-dm-bench"
#define MAX_SIZES 8
#define WARMUP_SECONDS 0.2
/* A transfer that makes no progress for this long means a hang. */
#define STALL_MS 10000

struct bench_opts {
	const char *addr;
	const char *provider;
	size_t sizes[MAX_SIZES];
	int nr_sizes;
	bool do_put, do_get;
	unsigned int inflight;
	double seconds;
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
		"  --addr ADDR          numeric address to listen on (127.0.0.1)\n"
		"  --provider NAME      libfabric provider (default: TPT_DM_PROVIDER,\n"
		"                       else verbs, else tcp)\n"
		"  --sizes LIST         transfer sizes in bytes (65536,1048576)\n"
		"  --ops LIST           put, get or put,get (put,get)\n"
		"  --inflight N         transfers kept outstanding (16)\n"
		"  --seconds S          measuring time per size and op (2)\n"
		"  --chunk BYTES        datamover chunk_bytes (its default)\n"
		"  --max-inflight N     datamover RMA chunks per peer (its default)\n"
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
		{ "chunk", required_argument, NULL, 'c' },
		{ "max-inflight", required_argument, NULL, 'm' },
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
			if (parse_size(optarg, &v) || v > 4096) {
				fprintf(stderr, PROG ": invalid --inflight "
					"'%s' (1..4096)\n", optarg);
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
		case 'c':
			if (parse_size(optarg, &o->chunk_bytes)) {
				fprintf(stderr, PROG ": invalid --chunk '%s'\n",
					optarg);
				return -1;
			}
			break;
		case 'm':
			if (parse_size(optarg, &v) || v > 65536) {
				fprintf(stderr, PROG ": invalid --max-inflight "
					"'%s'\n", optarg);
				return -1;
			}
			o->max_inflight = (unsigned int)v;
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

static const uint8_t bench_token[TPT_DM_TOKEN_LEN] = "tpt-dm-bench-key";

static int bench_accept(void *arg, const struct tpt_dm_hello *hello,
			const struct sockaddr *src, socklen_t srclen)
{
	(void)arg;
	(void)src;
	(void)srclen;
	return memcmp(hello->token, bench_token, TPT_DM_TOKEN_LEN) ? -EACCES
								   : 0;
}

/* --- the passive child --- */

static int serve(const struct bench_opts *o, int to_parent, int from_parent)
{
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
	lent.len = (uint64_t)o->inflight * max_size(o);
	if (posix_memalign(&region, 4096, lent.len)) {
		fprintf(stderr, PROG ": passive side: out of memory\n");
		return 1;
	}
	memset(region, 0, lent.len);
	ret = tpt_dm_register(dm, region, lent.len,
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
	const struct bench_opts *o;
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
	if (!b->error && now_seconds() < b->end)
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
		ret = poll(&pfd, 1, STALL_MS);
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0) {
			fprintf(stderr, PROG ": poll: %s\n", strerror(errno));
			return -1;
		}
		if (ret == 0) {
			fprintf(stderr, PROG ": no progress for %d s\n",
				STALL_MS / 1000);
			return -1;
		}
		if (tpt_dm_progress(b->dm) < 0) {
			fprintf(stderr, PROG ": %s\n", tpt_dm_strerror(b->dm));
			return -1;
		}
	}
	return 0;
}

static int run_phase(struct bench *b, double seconds, double *mbps)
{
	double start = now_seconds(), elapsed;
	unsigned int i;

	b->end = start + seconds;
	b->bytes = 0;
	for (i = 0; i < b->o->inflight; i++)
		if (slot_start(&b->slots[i]))
			break;
	if (run_loop(b, NULL) || b->error)
		return -1;
	elapsed = now_seconds() - start;
	*mbps = (double)b->bytes / elapsed / 1e6;
	return 0;
}

static void on_connect(struct tpt_dm_peer *peer, int status, void *arg)
{
	struct bench *b = arg;

	(void)peer;
	b->connected = true;
	b->connect_status = status;
}

/* Measures; closes done_fd, the passive child's signal to stop, before
 * hanging up so that the child does not report our leaving as a loss. */
static int drive(const struct bench_opts *o, const struct lent_region *lent,
		 int done_fd)
{
	struct tpt_dm_config cfg = {
		.provider = o->provider,
		.pool_buf_bytes = max_size(o),
		.pool_bytes = (size_t)o->inflight * max_size(o),
		.chunk_bytes = o->chunk_bytes,
		.max_inflight = o->max_inflight,
	};
	struct tpt_dm_hello hello = {
		.role = TPT_DM_ROLE_TARGET,
		.peer_id = 1,
	};
	struct bench b = { .o = o, .lent = *lent };
	unsigned int i;
	int pass, s, ret, rc = 1;
	double mbps;

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
		ret = tpt_dm_buf_get(b.dm, max_size(o), 0, &b.slots[i].buf);
		if (ret) {
			fprintf(stderr, PROG ": buffer: %s\n",
				tpt_dm_strerror(b.dm));
			goto out;
		}
		memset(tpt_dm_buf_addr(b.slots[i].buf), (int)i, max_size(o));
	}
	ret = tpt_dm_connect(b.dm, o->addr, (uint16_t)lent->port, &hello,
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
	printf("%-4s %10s %10s\n", "op", "bytes", "MB/s");
	for (pass = 0; pass < 2; pass++) {
		b.put = pass == 0;
		if ((b.put && !o->do_put) || (!b.put && !o->do_get))
			continue;
		for (s = 0; s < o->nr_sizes; s++) {
			b.size = o->sizes[s];
			if (run_phase(&b, WARMUP_SECONDS, &mbps) ||
			    run_phase(&b, o->seconds, &mbps))
				goto out;
			printf("%-4s %10zu %10.1f\n", b.put ? "put" : "get",
			       b.size, mbps);
			fflush(stdout);
		}
	}
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
	struct bench_opts o;
	struct lent_region lent;
	int to_parent[2], to_child[2], wstatus, rc;
	ssize_t got;
	pid_t child;

	if (parse_args(argc, argv, &o))
		return 2;
	if (o.provider ? !tpt_dm_provider_usable(o.provider)
		       : !tpt_dm_provider_choose()) {
		fprintf(stderr, PROG ": libfabric provider %s is not usable\n",
			o.provider ? o.provider : "(none found)");
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
		_exit(serve(&o, to_parent[1], to_child[0]));
	}
	close(to_parent[1]);
	close(to_child[0]);
	got = read(to_parent[0], &lent, sizeof(lent));
	if (got != sizeof(lent)) {
		fprintf(stderr, PROG ": the passive side did not start\n");
		waitpid(child, &wstatus, 0);
		return 1;
	}
	rc = drive(&o, &lent, to_child[1]);
	if (waitpid(child, &wstatus, 0) == child &&
	    (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus)) && !rc) {
		fprintf(stderr, PROG ": the passive side failed\n");
		rc = 1;
	}
	return rc;
}
