/* tpt-iscsi-load: keep a fixed number of READ(16) or WRITE(16) commands
 * outstanding against one iSCSI LUN over one session, with stock
 * libiscsi's asynchronous interface, and report what got through.
 *
 *   tpt-iscsi-load --pattern seq-write --bs 1m --seconds 5 URL
 *
 * Prints one line, ops=N bytes=N seconds=F mbps=F iops=F direct=yes|no
 * commands=N (MB/s in 10^6 bytes per second; commands: SCSI commands
 * sent, fewer than ops where --direct merged adjacent requests), for
 * scripts/bench/array and
 * scripts/bench/direct to parse.  Any SCSI
 * error, short transfer or stall ends the run with exit status 1 after
 * the outstanding commands drain, and nothing is printed on stdout.
 *
 * Commands are sized --bs and aligned to --bs inside the --span bytes
 * from --offset (default: the first bytes of the LUN), so several loads
 * can share one LUN without overlapping.  Sequential patterns walk the
 * span from its start and wrap; random ones pick aligned offsets uniformly.  Write data is random,
 * generated once before the clock starts, one buffer per queue slot;
 * reads land in per-slot buffers libiscsi fills in place.
 *
 * --direct drives the same load through libtptinitiator, the extended
 * host, instead: the targets move the data to and from this process and
 * the controller only plans.  Everything but the submit, completion and
 * poll calls is shared, so the two clients differ only in the path the
 * bytes take.  --direct (=on) fails unless the session is direct and
 * every byte moved by RMA, so a benchmark cannot measure a silent
 * fallback to plain iSCSI; --direct=auto takes what the LUN offers. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "initiator/tpt_initiator.h"
#include "initiator/tpt_init_args.h"
#include "tool_iscsi.h"

#define PROG "tpt-iscsi-load"
#define DEFAULT_INITIATOR "iqn.2026-11.org.tptraid:tpt-iscsi-load"
#define DEFAULT_QD 16
#define DEFAULT_SECONDS 5.0
#define DEFAULT_TIMEOUT 60.0
#define MAX_QD 1024
#define MAX_BS (32u << 20)

enum pattern {
	SEQ_READ,
	SEQ_WRITE,
	RAND_READ,
	RAND_WRITE,
};

static const char *const pattern_names[] = {
	[SEQ_READ] = "seq-read",
	[SEQ_WRITE] = "seq-write",
	[RAND_READ] = "rand-read",
	[RAND_WRITE] = "rand-write",
};

struct load_opts {
	const char *url;
	const char *initiator;
	enum pattern pattern;
	unsigned int qd;
	uint64_t bs;
	double seconds;
	uint64_t bytes;		/* 0: run for --seconds instead */
	uint64_t span;		/* 0: the whole LUN from offset */
	uint64_t offset;	/* where the span starts */
	double timeout;
	uint64_t seed;
	bool use_lib;		/* --direct given: through libtptinitiator */
	enum tpt_init_direct direct;
	unsigned int merge;	/* --direct: merge_max, 0 the library's */
	bool gate;		/* --gate: wait on stdin around the run */
};

struct slot {
	struct load *load;
	unsigned char *buf;
	struct scsi_task *task;	/* in flight from this slot, or NULL */
	bool busy;		/* --direct: in flight */
};

struct load {
	const struct load_opts *o;
	struct tool_lun lu;	/* geometry always; the session if plain */
	struct tpt_init *ctx;	/* --direct: the extended host */
	uint64_t lun_bytes;
	uint64_t span;
	uint64_t nr_units;	/* --bs sized units in the span */
	uint64_t next_unit;	/* sequential patterns */
	uint64_t rng;
	struct slot *slots;
	unsigned int outstanding;
	uint64_t issued_bytes;
	uint64_t done_ops;
	uint64_t done_bytes;
	uint64_t nr_errors;
	bool failed;
	bool stopping;
	bool closing;		/* context being torn down: just free tasks */
	struct timespec last_progress;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " [OPTIONS] URL\n"
		"\n"
		"Drives READ(16)/WRITE(16) at a fixed queue depth over one iSCSI\n"
		"session and prints: ops=N bytes=N seconds=F mbps=F iops=F\n"
		"direct=yes|no commands=N\n"
		"\n"
		"  --pattern P       seq-read, seq-write, rand-read or rand-write\n"
		"                    (required)\n"
		"  --bs BYTES        bytes per command, a multiple of the LUN's\n"
		"                    block size (required)\n"
		"  --qd N            commands kept outstanding (%u)\n"
		"  --seconds S       stop issuing after S seconds (%.0f)\n"
		"  --bytes N         stop issuing after N bytes instead\n"
		"  --span BYTES      use only BYTES of the LUN from --offset\n"
		"                    (default: the rest of it)\n"
		"  --offset BYTES    where the span starts, a multiple of --bs (0)\n"
		"  --timeout S       fail if no command completes for S seconds\n"
		"                    (%.0f)\n"
		"  --seed N          random offset seed (1)\n"
		"  --initiator IQN   initiator name (%s)\n"
		"  --direct[=MODE]   through libtptinitiator (the extended\n"
		"                    host); MODE on (the default: fail unless\n"
		"                    every byte moves host-direct), auto or off\n"
		"  --merge N         --direct: send up to N adjacent requests\n"
		"                    as one command (64; 1: never merge)\n"
		"  --gate            logged in, print 'ready' and wait for a\n"
		"                    line on standard input before the first\n"
		"                    command; after the result line, wait for\n"
		"                    another before logging out (a caller can\n"
		"                    then measure the run alone)\n"
		"  --help            this text\n"
		"\n"
		"BYTES and N take k, m, g suffixes (powers of 1024).  URL is\n"
		"iscsi://[user[%%password]@]host[:port]/target-iqn/lun.  MB/s is\n"
		"10^6 bytes per second; direct= says whether the data moved\n"
		"host-direct.  Exit status: 0 success, 1 I/O, SCSI or\n"
		"connection error (the sense is printed), 2 usage error.\n",
		DEFAULT_QD, DEFAULT_SECONDS, DEFAULT_TIMEOUT, DEFAULT_INITIATOR);
}

static int parse_size(const char *s, const char *what, uint64_t *out)
{
	if (!tpt_init_parse_size(s, out))
		return 0;
	fprintf(stderr, PROG ": invalid %s '%s' (a decimal number, with k, m "
		"or g for powers of 1024)\n", what, s);
	return -1;
}

static int parse_seconds(const char *s, const char *what, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || !(*out > 0) || *out > 1e6) {
		fprintf(stderr, PROG ": invalid %s '%s'\n", what, s);
		return -1;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct load_opts *o)
{
	static const struct option longopts[] = {
		{ "pattern", required_argument, NULL, 'p' },
		{ "bs", required_argument, NULL, 'b' },
		{ "qd", required_argument, NULL, 'q' },
		{ "seconds", required_argument, NULL, 's' },
		{ "bytes", required_argument, NULL, 'n' },
		{ "span", required_argument, NULL, 'S' },
		{ "offset", required_argument, NULL, 'o' },
		{ "timeout", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, 'r' },
		{ "initiator", required_argument, NULL, 'i' },
		{ "direct", optional_argument, NULL, 'd' },
		{ "merge", required_argument, NULL, 'm' },
		{ "gate", no_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_pattern = false;
	uint64_t v;
	unsigned int i;
	int c;

	memset(o, 0, sizeof(*o));
	o->initiator = DEFAULT_INITIATOR;
	o->qd = DEFAULT_QD;
	o->seconds = DEFAULT_SECONDS;
	o->timeout = DEFAULT_TIMEOUT;
	o->seed = 1;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			for (i = 0; i < sizeof(pattern_names) /
				    sizeof(pattern_names[0]); i++)
				if (!strcmp(optarg, pattern_names[i]))
					break;
			if (i == sizeof(pattern_names) / sizeof(pattern_names[0])) {
				fprintf(stderr, PROG ": unknown pattern '%s'"
					" (seq-read, seq-write, rand-read,"
					" rand-write)\n", optarg);
				return -1;
			}
			o->pattern = (enum pattern)i;
			have_pattern = true;
			break;
		case 'b':
			if (parse_size(optarg, "--bs", &o->bs))
				return -1;
			if (!o->bs || o->bs > MAX_BS) {
				fprintf(stderr, PROG ": --bs must be 1..%u\n",
					MAX_BS);
				return -1;
			}
			break;
		case 'q':
			if (parse_size(optarg, "--qd", &v))
				return -1;
			if (!v || v > MAX_QD) {
				fprintf(stderr, PROG ": --qd must be 1..%u\n",
					MAX_QD);
				return -1;
			}
			o->qd = (unsigned int)v;
			break;
		case 's':
			if (parse_seconds(optarg, "--seconds", &o->seconds))
				return -1;
			break;
		case 'n':
			if (parse_size(optarg, "--bytes", &o->bytes))
				return -1;
			if (!o->bytes) {
				fprintf(stderr, PROG ": --bytes must be > 0\n");
				return -1;
			}
			break;
		case 'S':
			if (parse_size(optarg, "--span", &o->span))
				return -1;
			if (!o->span) {
				fprintf(stderr, PROG ": --span must be > 0\n");
				return -1;
			}
			break;
		case 'o':
			if (parse_size(optarg, "--offset", &o->offset))
				return -1;
			break;
		case 't':
			if (parse_seconds(optarg, "--timeout", &o->timeout))
				return -1;
			break;
		case 'r':
			if (parse_size(optarg, "--seed", &o->seed))
				return -1;
			break;
		case 'i':
			o->initiator = optarg;
			break;
		case 'd':
			o->use_lib = true;
			o->direct = TPT_INIT_DIRECT_ON;
			if (optarg && tpt_init_parse_direct(optarg, &o->direct)) {
				fprintf(stderr, PROG ": --direct takes on, auto"
					" or off\n");
				return -1;
			}
			break;
		case 'm':
			if (parse_size(optarg, "--merge", &v) || !v ||
			    v > TPT_INIT_MERGE_MAX) {
				fprintf(stderr, PROG ": --merge takes 1-%d\n",
					TPT_INIT_MERGE_MAX);
				return -1;
			}
			o->merge = (unsigned int)v;
			break;
		case 'g':
			o->gate = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, PROG ": %s\n", optind < argc ?
			"exactly one URL expected" : "no URL given");
		return -1;
	}
	o->url = argv[optind];
	if (!have_pattern) {
		fprintf(stderr, PROG ": --pattern is required\n");
		return -1;
	}
	if (!o->bs) {
		fprintf(stderr, PROG ": --bs is required\n");
		return -1;
	}
	return 0;
}

static double since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) +
	       (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* xorshift64*: offsets and write data need to be spread, not secret. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static bool is_write(enum pattern p)
{
	return p == SEQ_WRITE || p == RAND_WRITE;
}

static int submit(struct slot *s);

/* One command from slot s has ended (ok: in full): count it and keep the
 * queue full.  Both clients' completions end here. */
static void settle(struct slot *s, bool ok)
{
	struct load *l = s->load;

	l->outstanding--;
	clock_gettime(CLOCK_MONOTONIC, &l->last_progress);
	if (!ok) {
		l->failed = true;
	} else {
		l->done_ops++;
		l->done_bytes += l->o->bs;
	}
	if (!l->failed && !l->stopping && submit(s))
		l->failed = true;
}

/* --direct's completion. */
static void lib_done(struct tpt_init *ctx, int status, void *arg)
{
	struct slot *s = arg;
	struct load *l = s->load;

	s->busy = false;
	if (l->closing) {
		l->outstanding--;
		return;
	}
	/* The first failure says what went wrong, as below. */
	if (status && !l->nr_errors++)
		fprintf(stderr, PROG ": %s: %s\n", is_write(l->o->pattern) ?
			"write" : "read", tpt_init_error(ctx));
	settle(s, !status);
}

static void io_done(struct iscsi_context *iscsi, int status,
		    void *command_data, void *private_data)
{
	struct slot *s = private_data;
	struct load *l = s->load;
	/* The task we queued, whatever command_data says: on errors
	 * libiscsi may pass NULL there, and the task is still ours to free. */
	struct scsi_task *task = s->task;
	const char *what = is_write(l->o->pattern) ? "WRITE(16)" : "READ(16)";
	bool ok = false;

	(void)iscsi;
	(void)command_data;
	s->task = NULL;
	if (l->closing) {
		l->outstanding--;
		scsi_free_scsi_task(task);
		return;
	}
	if (status != SCSI_STATUS_GOOD) {
		/* The first failure says what went wrong; the rest only
		 * count (a dead session fails every queued command). */
		if (!l->nr_errors++)
			tool_iscsi_report(PROG, what, l->lu.iscsi, status,
					  task);
	} else if (task->residual_status != SCSI_RESIDUAL_NO_RESIDUAL &&
		   task->residual) {
		fprintf(stderr, PROG ": %s: %s of %zu bytes\n", what,
			task->residual_status == SCSI_RESIDUAL_UNDERFLOW ?
			"underflow" : "overflow", (size_t)task->residual);
	} else {
		ok = true;
	}
	scsi_free_scsi_task(task);
	settle(s, ok);
}

static uint64_t next_offset(struct load *l)
{
	uint64_t unit;

	if (l->o->pattern == SEQ_READ || l->o->pattern == SEQ_WRITE) {
		unit = l->next_unit++;
		if (l->next_unit == l->nr_units)
			l->next_unit = 0;
	} else {
		unit = rng_next(&l->rng) % l->nr_units;
	}
	return l->o->offset + unit * l->o->bs;
}

/* Issue one command from slot s, unless the byte budget is spent. */
static int submit(struct slot *s)
{
	struct load *l = s->load;
	const struct load_opts *o = l->o;
	uint64_t offset = next_offset(l), lba = offset / l->lu.block_size;
	struct scsi_task *task;
	int ret;

	if (o->bytes && l->issued_bytes >= o->bytes)
		return 0;
	if (l->ctx) {
		ret = is_write(o->pattern) ?
			tpt_init_pwrite_async(l->ctx, s->buf, o->bs, offset, 0,
					      lib_done, s) :
			tpt_init_pread_async(l->ctx, s->buf, o->bs, offset,
					     lib_done, s);
		if (ret) {
			fprintf(stderr, PROG ": cannot queue request: %s\n",
				tpt_init_error(l->ctx));
			return -1;
		}
		s->busy = true;
		l->outstanding++;
		l->issued_bytes += o->bs;
		return 0;
	}
	if (is_write(o->pattern)) {
		task = iscsi_write16_task(l->lu.iscsi, l->lu.lun, lba, s->buf,
					  (uint32_t)o->bs, (int)l->lu.block_size,
					  0, 0, 0, 0, 0, io_done, s);
	} else {
		task = iscsi_read16_task(l->lu.iscsi, l->lu.lun, lba,
					 (uint32_t)o->bs, (int)l->lu.block_size,
					 0, 0, 0, 0, 0, io_done, s);
		/* Before the event loop runs again: Data-In goes straight
		 * into our buffer, not one libiscsi allocates. */
		if (task && scsi_task_add_data_in_buffer(task, (int)o->bs,
							 s->buf)) {
			fprintf(stderr, PROG ": cannot attach read buffer\n");
			return -1;
		}
	}
	if (!task) {
		fprintf(stderr, PROG ": cannot queue command: %s\n",
			iscsi_get_error(l->lu.iscsi));
		return -1;
	}
	s->task = task;
	l->outstanding++;
	l->issued_bytes += o->bs;
	return 0;
}

/* --direct: the extended host's session.  Its pool holds one request
 * per slot (max_io = --bs up to the library's default command size), so
 * its registration stays small for small requests. */
static int lib_open(struct load *l)
{
	const struct load_opts *o = l->o;
	struct tpt_init_config cfg = {
		.url = o->url,
		.initiator_name = o->initiator,
		.direct = o->direct,
		.queue_depth = o->qd,
		.max_io = o->bs < (4u << 20) ? (o->bs + 511) / 512 * 512 :
			  (4u << 20),
		.timeout_s = o->timeout < 1 ? 1 : (unsigned int)o->timeout,
		.merge_max = o->merge,
	};
	char err[512];

	if (tpt_init_new(&cfg, &l->ctx, err, sizeof(err))) {
		fprintf(stderr, PROG ": %s\n", err);
		return -1;
	}
	if (tpt_init_connect(l->ctx)) {
		fprintf(stderr, PROG ": connect: %s\n", tpt_init_error(l->ctx));
		return -1;
	}
	l->lu.block_size = tpt_init_block_size(l->ctx);
	l->lu.nr_blocks = tpt_init_size(l->ctx) / l->lu.block_size;
	l->lun_bytes = tpt_init_size(l->ctx);
	return 0;
}

/* --direct=on: every byte done moved by RMA and none through the
 * controller, else the run fails (a fallback must not pass for a
 * direct measurement).  0, or -1 after a message. */
static int check_direct(struct load *l)
{
	struct tpt_init_stats st;
	uint64_t rma;

	if (!l->ctx || l->o->direct != TPT_INIT_DIRECT_ON)
		return 0;
	tpt_init_get_stats(l->ctx, &st);
	rma = is_write(l->o->pattern) ? st.direct_bytes_out : st.direct_bytes_in;
	if (tpt_init_is_direct(l->ctx) && rma >= l->done_bytes &&
	    !st.plain_bytes_in && !st.plain_bytes_out)
		return 0;
	fprintf(stderr, PROG ": --direct: not host-direct: %" PRIu64 " of %"
		PRIu64 " bytes by RMA, %" PRIu64 " in and %" PRIu64 " out "
		"through the controller\n", rma, l->done_bytes,
		st.plain_bytes_in, st.plain_bytes_out);
	return -1;
}

static int lun_open(struct load *l)
{
	const struct tool_iscsi_login how = {
		.prog = PROG,
		.initiator = l->o->initiator,
		.digest = ISCSI_HEADER_DIGEST_NONE,
	};

	if (tool_lun_open(&how, l->o->url, &l->lu))
		return -1;
	/* A dropped connection is an error to report, not to paper over.
	 * Set once logged in, as it always was, not through
	 * how.noautoreconnect: a drop during iscsi_full_connect_sync's own
	 * commands is still retried by libiscsi. */
	iscsi_set_noautoreconnect(l->lu.iscsi, 1);
	l->lun_bytes = l->lu.nr_blocks * l->lu.block_size;
	return 0;
}

static int check_geometry(struct load *l)
{
	const struct load_opts *o = l->o;

	if (o->bs % l->lu.block_size) {
		fprintf(stderr, PROG ": --bs %" PRIu64 " is not a multiple of"
			" the LUN's %u-byte blocks\n", o->bs, l->lu.block_size);
		return -1;
	}
	if (o->offset % o->bs || o->offset >= l->lun_bytes) {
		fprintf(stderr, PROG ": --offset %" PRIu64 " is not a multiple"
			" of --bs inside the LUN (%" PRIu64 " bytes)\n",
			o->offset, l->lun_bytes);
		return -1;
	}
	l->span = o->span ? o->span : l->lun_bytes - o->offset;
	if (l->span > l->lun_bytes - o->offset) {
		fprintf(stderr, PROG ": --span %" PRIu64 " from --offset %"
			PRIu64 " ends past the LUN (%" PRIu64 " bytes)\n",
			l->span, o->offset, l->lun_bytes);
		return -1;
	}
	l->nr_units = l->span / o->bs;
	if (!l->nr_units) {
		fprintf(stderr, PROG ": --bs %" PRIu64 " does not fit in %"
			PRIu64 " bytes\n", o->bs, l->span);
		return -1;
	}
	return 0;
}

static int alloc_slots(struct load *l)
{
	const struct load_opts *o = l->o;
	uint64_t *p, *end;
	unsigned int i;

	l->slots = calloc(o->qd, sizeof(*l->slots));
	if (!l->slots)
		goto oom;
	for (i = 0; i < o->qd; i++) {
		l->slots[i].load = l;
		if (posix_memalign((void **)&l->slots[i].buf, 4096, o->bs))
			goto oom;
		if (!is_write(o->pattern)) {
			memset(l->slots[i].buf, 0, o->bs);
			continue;
		}
		p = (uint64_t *)l->slots[i].buf;
		end = p + o->bs / sizeof(*p);
		while (p < end)
			*p++ = rng_next(&l->rng);
		/* --bs need not be a multiple of 8; finish bytewise. */
		memset(end, 0x5a, o->bs % sizeof(*p));
	}
	return 0;
oom:
	fprintf(stderr, PROG ": out of memory for %u buffers of %" PRIu64
		" bytes\n", o->qd, o->bs);
	return -1;
}

static void free_slots(struct load *l)
{
	unsigned int i;

	if (!l->slots)
		return;
	for (i = 0; i < l->o->qd; i++)
		free(l->slots[i].buf);
	free(l->slots);
}

/* One round of --direct's event loop: poll what the library names, at
 * most 100 ms so the deadline and stall checks run.  0, or -1 after a
 * message once the session is lost. */
static int lib_service(struct load *l)
{
	struct pollfd fds[TPT_INIT_MAX_FDS];
	int n = tpt_init_get_fds(l->ctx, fds);
	int ms = tpt_init_poll_timeout_ms(l->ctx);

	if (ms < 0 || ms > 100)
		ms = 100;
	if (poll(fds, (nfds_t)n, ms) < 0) {
		if (errno != EINTR) {
			perror(PROG ": poll");
			return -1;
		}
		for (int i = 0; i < n; i++)
			fds[i].revents = 0;
	}
	if (tpt_init_service(l->ctx, fds, n) < 0) {
		fprintf(stderr, PROG ": session lost: %s\n",
			tpt_init_error(l->ctx));
		return -1;
	}
	return 0;
}

/* Run the event loop until nothing is outstanding.  Issuing stops at
 * the deadline (or byte budget) or on the first error; what is in flight
 * then drains so the session logs out cleanly. */
static int run(struct load *l, double *elapsed)
{
	const struct load_opts *o = l->o;
	struct timespec t0;
	struct pollfd pfd;
	unsigned int i;
	int n, ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	l->last_progress = t0;
	for (i = 0; i < o->qd && !l->failed; i++)
		if (submit(&l->slots[i]))
			l->failed = true;

	while (l->outstanding) {
		if (!l->stopping && (l->failed ||
				     (!o->bytes && since(&t0) >= o->seconds)))
			l->stopping = true;
		if (l->ctx) {
			if ((ret = lib_service(l)))
				return ret;
			goto progress;
		}
		pfd.fd = iscsi_get_fd(l->lu.iscsi);
		pfd.events = (short)iscsi_which_events(l->lu.iscsi);
		pfd.revents = 0;
		if (pfd.fd < 0 || !pfd.events) {
			fprintf(stderr, PROG ": connection lost: %s\n",
				iscsi_get_error(l->lu.iscsi));
			return -1;
		}
		n = poll(&pfd, 1, 100);
		if (n < 0 && errno != EINTR) {
			perror(PROG ": poll");
			return -1;
		}
		if (iscsi_service(l->lu.iscsi, n > 0 ? pfd.revents : 0) < 0) {
			fprintf(stderr, PROG ": connection error: %s\n",
				iscsi_get_error(l->lu.iscsi));
			return -1;
		}
progress:
		if (l->outstanding && since(&l->last_progress) > o->timeout) {
			fprintf(stderr, PROG ": stalled: %u commands outstanding"
				", none completed for %.0f s\n",
				l->outstanding, o->timeout);
			return -1;
		}
	}
	*elapsed = since(&t0);
	if (l->nr_errors > 1)
		fprintf(stderr, PROG ": %" PRIu64 " commands failed in all\n",
			l->nr_errors);
	return l->failed ? -1 : 0;
}

/* --gate: @word (if any) on stdout, then a line from stdin.  0, or -1
 * when stdin ends first. */
static int gate(const char *word)
{
	char line[64];

	if (word) {
		printf("%s\n", word);
		fflush(stdout);
	}
	return fgets(line, sizeof(line), stdin) ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct load_opts o;
	struct load l;
	double elapsed = 0;
	struct tpt_init_stats st = { 0 };
	int rc = 1;

	if (parse_args(argc, argv, &o)) {
		fprintf(stderr, "try '" PROG " --help'\n");
		return 2;
	}
	memset(&l, 0, sizeof(l));
	l.o = &o;
	l.rng = o.seed * 0x9e3779b97f4a7c15ull + 1;

	if ((o.use_lib ? lib_open(&l) : lun_open(&l)) || check_geometry(&l) ||
	    alloc_slots(&l))
		goto out;
	if (o.gate && gate("ready")) {
		fprintf(stderr, PROG ": --gate: standard input ended\n");
		goto out;
	}
	if (run(&l, &elapsed) || check_direct(&l))
		goto out;
	if (!(elapsed > 0))
		elapsed = 1e-9;
	if (l.ctx)
		tpt_init_get_stats(l.ctx, &st);
	printf("ops=%" PRIu64 " bytes=%" PRIu64 " seconds=%.3f mbps=%.1f"
	       " iops=%.1f direct=%s commands=%" PRIu64 "\n", l.done_ops,
	       l.done_bytes, elapsed, (double)l.done_bytes / elapsed / 1e6,
	       (double)l.done_ops / elapsed,
	       l.ctx && tpt_init_is_direct(l.ctx) ? "yes" : "no",
	       l.ctx ? st.commands : l.done_ops);
	rc = fflush(stdout) ? 1 : 0;
	if (o.gate)
		gate(NULL);	/* logs out either way */
out:
	l.closing = true;
	/* Logout only over a healthy session with nothing queued. */
	tool_lun_close(&l.lu, !l.outstanding);
	/* Cancels what is still queued (lib_done only counts it down). */
	tpt_init_close(l.ctx);
	free_slots(&l);
	return rc;
}
