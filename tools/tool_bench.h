/* tool_bench.h: the scaffolding tpt-dm-bench and tpt-fi-rma-bench share.
 *
 * The two benchmarks measure the same thing through different code
 * (our datamover, plain libfabric), and scripts/bench/datamover sets
 * their tables side by side, so everything around the transfers lives
 * here once: the options both take, the provider check, forking the
 * passive peer that lends a region up a pipe, and the timed loop over
 * ops and sizes that prints the table.  What moves the bytes stays in
 * each tool.
 *
 * Header-only (static inline) so single-file tools can include it
 * without the build knowing about it.  Messages go to stderr prefixed
 * with the tool's name, which the caller passes in. */
#ifndef TPT_TOOLS_TOOL_BENCH_H
#define TPT_TOOLS_TOOL_BENCH_H

#include "initiator/tpt_init_args.h"
#include "iser/tpt_dm_provider.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_MAX_SIZES 8
#define BENCH_MAX_INFLIGHT 4096
#define BENCH_WARMUP_SECONDS 0.2
/* A transfer that makes no progress for this long means a hang. */
#define BENCH_STALL_MS 10000

/* The options both benchmarks take. */
struct bench_opts {
	const char *addr;
	const char *provider;
	size_t sizes[BENCH_MAX_SIZES];
	int nr_sizes;
	bool do_put, do_get;
	unsigned int inflight;
	double seconds;
};

/* Their long options, to open a tool's table: the tool adds its own,
 * then { "help", no_argument, NULL, 'h' } and the zeroed end.  A tool's
 * own options must not use these vals (nor 'h'). */
#define BENCH_LONGOPTS							\
	{ "addr", required_argument, NULL, 'a' },			\
	{ "provider", required_argument, NULL, 'p' },			\
	{ "sizes", required_argument, NULL, 's' },			\
	{ "ops", required_argument, NULL, 'o' },			\
	{ "inflight", required_argument, NULL, 'n' },			\
	{ "seconds", required_argument, NULL, 't' }

/* For a tool's usage text: the first of the common options, whose
 * defaults bench_parse_args() sets (--inflight and --seconds follow in
 * the tool's own words), and, at the end, what bench_table() prints and
 * the exit statuses. */
#define BENCH_USAGE_OPTIONS						\
	"  --addr ADDR          numeric address to listen on (127.0.0.1)\n" \
	"  --provider NAME      libfabric provider (default: TPT_DM_PROVIDER,\n" \
	"                       else verbs, else tcp)\n"			\
	"  --sizes LIST         transfer sizes in bytes (65536,1048576)\n" \
	"  --ops LIST           put, get or put,get (put,get)\n"
#define BENCH_USAGE_OUTPUT						\
	"Prints one line per op and size: op, bytes, MB/s (10^6 B/s).\n"	\
	"Exit status: 0 success, 1 transfer error, 2 usage error.\n"

/* What a tool adds to the common option parsing. */
struct bench_tool {
	const char *prog;		/* prefix of messages */
	void (*usage)(FILE *out);
	/* Takes one of the tool's own options: 0, or -1 after a message. */
	int (*option)(void *ctx, int c, const char *arg);
	void *ctx;
};

/* A byte count, as every tool reads one (tpt_init_parse_size(): decimal,
 * an optional k, m or g suffix, 1024-based), here not zero.  -1, without
 * a message, when s is anything else. */
static inline int bench_parse_size(const char *s, size_t *out)
{
	uint64_t v;

	if (tpt_init_parse_size(s, &v) || !v || v > SIZE_MAX)
		return -1;
	*out = (size_t)v;
	return 0;
}

static inline int bench_parse_sizes(const char *prog, const char *arg,
				    struct bench_opts *o)
{
	char *list, *tok, *save;

	o->nr_sizes = 0;
	list = strdup(arg);
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nr_sizes == BENCH_MAX_SIZES ||
		    bench_parse_size(tok, &o->sizes[o->nr_sizes])) {
			fprintf(stderr, "%s: invalid size '%s' (at most %d "
				"sizes)\n", prog, tok, BENCH_MAX_SIZES);
			free(list);
			return -1;
		}
		o->nr_sizes++;
	}
	free(list);
	if (!o->nr_sizes) {
		fprintf(stderr, "%s: --sizes is empty\n", prog);
		return -1;
	}
	return 0;
}

/* Parses argv with longopts (BENCH_LONGOPTS, the tool's own, help):
 * the common options into *o, the tool's through t->option.  --help
 * prints t->usage and exits 0.  -1 after a message on a usage error. */
static inline int bench_parse_args(int argc, char **argv,
				   const struct option *longopts,
				   const struct bench_tool *t,
				   struct bench_opts *o)
{
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
			if (bench_parse_sizes(t->prog, optarg, o))
				return -1;
			break;
		case 'o':
			o->do_put = strstr(optarg, "put") != NULL;
			o->do_get = strstr(optarg, "get") != NULL;
			if (!o->do_put && !o->do_get) {
				fprintf(stderr, "%s: --ops takes put, get or "
					"put,get\n", t->prog);
				return -1;
			}
			break;
		case 'n':
			if (bench_parse_size(optarg, &v) ||
			    v > BENCH_MAX_INFLIGHT) {
				fprintf(stderr, "%s: invalid --inflight '%s' "
					"(1..%d)\n", t->prog, optarg,
					BENCH_MAX_INFLIGHT);
				return -1;
			}
			o->inflight = (unsigned int)v;
			break;
		case 't':
			o->seconds = strtod(optarg, NULL);
			if (!(o->seconds > 0 && o->seconds < 3600)) {
				fprintf(stderr, "%s: invalid --seconds '%s'\n",
					t->prog, optarg);
				return -1;
			}
			break;
		case 'h':
			t->usage(stdout);
			exit(0);
		case '?':
			t->usage(stderr);
			return -1;
		default:
			if (t->option(t->ctx, c, optarg))
				return -1;
			break;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", t->prog,
			argv[optind]);
		return -1;
	}
	return 0;
}

/* The libfabric provider to use: the one asked for if it is usable,
 * else tpt_dm_provider_choose()'s.  NULL after a message if none is. */
static inline const char *bench_provider(const char *prog,
					 const char *wanted)
{
	const char *provider = wanted ? wanted : tpt_dm_provider_choose();

	/* What tpt_dm_provider_choose() picks is usable by definition. */
	if (!provider || (wanted && !tpt_dm_provider_usable(wanted))) {
		fprintf(stderr, "%s: libfabric provider %s is not usable\n",
			prog, wanted ? wanted : "(none found)");
		return NULL;
	}
	return provider;
}

static inline size_t bench_max_size(const struct bench_opts *o)
{
	size_t m = 0;
	int i;

	for (i = 0; i < o->nr_sizes; i++)
		if (o->sizes[i] > m)
			m = o->sizes[i];
	return m;
}

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --- forking the passive peer --- */

/* The passive child: lends a region, writes what the parent needs to
 * reach it (lent_len bytes) to to_parent, then serves until from_parent
 * becomes readable (the parent closed it).  Returns the child's exit
 * status. */
typedef int bench_serve_fn(void *ctx, int to_parent, int from_parent);

/* The active parent, given what the child lent: measures, and closes
 * done_fd, the child's signal to stop, before hanging up so that the
 * child does not report the parent's leaving as a loss.  Returns the
 * exit status. */
typedef int bench_drive_fn(void *ctx, const void *lent, int done_fd);

/* Forks: the child runs serve, the parent drive once the child has
 * written lent_len bytes into *lent.  Returns the exit status: drive's,
 * or 1 if the child did not start or failed. */
static inline int bench_fork(const char *prog, void *lent, size_t lent_len,
			     bench_serve_fn *serve, bench_drive_fn *drive,
			     void *ctx)
{
	int to_parent[2], to_child[2], wstatus, rc;
	pid_t child;

	if (pipe(to_parent) || pipe(to_child)) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		return 1;
	}
	fflush(stdout);
	child = fork();
	if (child < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		return 1;
	}
	if (child == 0) {
		close(to_parent[0]);
		close(to_child[1]);
		_exit(serve(ctx, to_parent[1], to_child[0]));
	}
	close(to_parent[1]);
	close(to_child[0]);
	if (read(to_parent[0], lent, lent_len) != (ssize_t)lent_len) {
		fprintf(stderr, "%s: the passive side did not start\n", prog);
		waitpid(child, &wstatus, 0);
		return 1;
	}
	rc = drive(ctx, lent, to_child[1]);
	if (waitpid(child, &wstatus, 0) == child &&
	    (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus)) && !rc) {
		fprintf(stderr, "%s: the passive side failed\n", prog);
		rc = 1;
	}
	return rc;
}

/* --- the timed loop and its table --- */

/* One phase of one op and size: keep o->inflight transfers of size
 * bytes going (puts if put, else gets) until bench_now() reaches end,
 * let them finish, and set *bytes to what moved.  0, or -1 after a
 * message. */
typedef int bench_phase_fn(void *ctx, bool put, size_t size, double end,
			   uint64_t *bytes);

static inline int bench_time_phase(bench_phase_fn *phase, void *ctx,
				   bool put, size_t size, double seconds,
				   double *mbps)
{
	double start = bench_now(), elapsed;
	uint64_t bytes = 0;

	if (phase(ctx, put, size, start + seconds, &bytes))
		return -1;
	elapsed = bench_now() - start;
	*mbps = (double)bytes / elapsed / 1e6;
	return 0;
}

/* Prints the table scripts/bench/datamover reads: a heading, then per
 * op (put, then get, as --ops asks) and size one line of op, bytes and
 * MB/s (10^6 B/s) over --seconds, after an unreported warm-up.  0, or
 * -1 when a phase failed. */
static inline int bench_table(const struct bench_opts *o,
			      bench_phase_fn *phase, void *ctx)
{
	double mbps;
	bool put;
	int pass, s;

	printf("%-4s %10s %10s\n", "op", "bytes", "MB/s");
	for (pass = 0; pass < 2; pass++) {
		put = pass == 0;
		if ((put && !o->do_put) || (!put && !o->do_get))
			continue;
		for (s = 0; s < o->nr_sizes; s++) {
			if (bench_time_phase(phase, ctx, put, o->sizes[s],
					     BENCH_WARMUP_SECONDS, &mbps) ||
			    bench_time_phase(phase, ctx, put, o->sizes[s],
					     o->seconds, &mbps))
				return -1;
			printf("%-4s %10zu %10.1f\n", put ? "put" : "get",
			       o->sizes[s], mbps);
			fflush(stdout);
		}
	}
	return 0;
}

#endif
