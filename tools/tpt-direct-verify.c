/* tpt-direct-verify: random writes and reads on a LUN through
 * libtptinitiator (host-direct on a TPT-mode array, plain iSCSI
 * otherwise), checked against a byte model - tpt-iscsi-verify's load, for
 * the extended host.
 *
 * The model is in memory: the region --offset/--span of the LUN, first
 * read whole (or taken as zeroes with --zero).  Requests are random in
 * place, log-uniform in size from one block to --max-bs, half of them
 * aligned to their size, --qd in flight, and never overlapping one in
 * flight, so every read is checked when it completes.  A failed write
 * leaves its blocks unknown (not checked again).  --final-check reads
 * the whole region back at the end.
 *
 * --sequential walks the region in order instead, each request where
 * the one before ended, so that the library merges adjacent ones into
 * one command (its merge_max, --merge).
 *
 * Prints one line of key=value: ops writes reads bytes errors mismatches
 * direct(yes|no) direct_in direct_out plain_in plain_out refused_peers
 * commands merged.
 * Exit status: 0 neither errors nor mismatches, 1 otherwise, 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/tpt_init_args.h"
#include "initiator/tpt_initiator.h"
#include "tool_model.h"

#define PROG "tpt-direct-verify"
#define MAX_QD 128

struct verify;

struct io {
	struct verify *v;
	struct model_req req;		/* blocks within the region */
};

struct verify {
	struct tpt_init *ctx;
	struct tool_model m;		/* the region, in memory */
	unsigned int qd;
	struct io io[MAX_QD];
	uint64_t bytes, errors;
	bool lost;
};

static void io_done(struct tpt_init *ctx, int status, void *arg)
{
	struct io *io = arg;
	struct verify *v = io->v;
	size_t len = (size_t)io->req.blocks * v->m.bs;

	if (status) {
		v->errors++;
		/* The context's error is its last one, which with
		 * requests in flight may be another's: said as such. */
		if (v->errors <= 16)
			fprintf(stderr, PROG ": %s of %zu bytes at %" PRIu64
				" failed: %s (the library's last error: %s)\n",
				io->req.write ? "write" : "read", len,
				v->m.base + io->req.blk * v->m.bs,
				strerror(-status), tpt_init_error(ctx));
		if (status == -ENOTCONN || status == -ECANCELED)
			v->lost = true;
	} else {
		v->bytes += len;
	}
	model_completed(&v->m, &io->req, !status);
}

static int issue(struct verify *v, struct io *io, bool write, uint64_t blk,
		 uint32_t blocks)
{
	size_t len = (size_t)blocks * v->m.bs;
	uint64_t at = v->m.base + blk * v->m.bs;
	int ret;

	model_prepare(&v->m, &io->req, write, blk, blocks);
	if (write) {
		ret = tpt_init_pwrite_async(v->ctx, io->req.buf, len, at,
					    model_rnd(&v->m) % 8 ? 0 :
					    TPT_INIT_FUA, io_done, io);
	} else {
		ret = tpt_init_pread_async(v->ctx, io->req.buf, len, at,
					   io_done, io);
	}
	if (ret) {
		fprintf(stderr, PROG ": cannot queue: %s\n",
			tpt_init_error(v->ctx));
		return -1;
	}
	model_sent(&v->m, &io->req);
	return 0;
}

static void service(struct verify *v)
{
	struct pollfd fds[TPT_INIT_MAX_FDS];
	int n = tpt_init_get_fds(v->ctx, fds);

	if (poll(fds, (nfds_t)n, tpt_init_poll_timeout_ms(v->ctx)) < 0 &&
	    errno != EINTR)
		return;
	if (tpt_init_service(v->ctx, fds, n) < 0)
		v->lost = true;
}

static void drain(struct verify *v)
{
	while (v->m.inflight)
		service(v);
}

/* Reads the whole region, max-size pieces, qd at a time. */
static void check_all(struct verify *v)
{
	uint64_t blk = 0;
	unsigned int i;

	while (blk < v->m.blocks && !v->lost) {
		for (i = 0; i < v->qd && blk < v->m.blocks; i++) {
			uint32_t n = v->m.max_blocks;

			if (v->io[i].req.busy)
				continue;
			if (n > v->m.blocks - blk)
				n = (uint32_t)(v->m.blocks - blk);
			if (issue(v, &v->io[i], false, blk, n)) {
				v->errors++;
				return;
			}
			blk += n;
		}
		service(v);
	}
	drain(v);
}

/* SIGINT or SIGTERM: no new request; what is in flight completes and the
 * run ends as at its limit (final check, summary). */
static volatile sig_atomic_t stop_asked;

static void ask_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " [OPTIONS] URL\n\n"
		"Random writes and reads through libtptinitiator, checked\n"
		"against an in-memory model of a region of the LUN.\n\n"
		"  --offset BYTES   the region's start (0)\n"
		"  --span BYTES     the region's length (to the LUN's end)\n"
		"  --qd N           requests in flight (8, at most %d)\n"
		"  --ops N          stop after N requests (1000)\n"
		"  --seconds S      or run for S seconds\n"
		"  --max-bs BYTES   largest request (4m)\n"
		"  --max-io BYTES   largest SCSI command (the library's 4m)\n"
		"  --seed N         random seed (1)\n"
		"  --zero           the region holds zeroes (else read first)\n"
		"  --final-check    read the whole region back at the end\n"
		"  --sequential     each request where the last ended\n"
		"  --merge N        adjacent requests one command may carry\n"
		"                   (the library's %d; 1: never merge)\n"
		"  --direct auto|on|off  (auto)\n"
		"  --direct-retry S after a lost path, direct again in S s\n"
		"                   (the library's 60)\n"
		"  --dm ADDR[:PORT] where the datamover listens\n"
		"  --initiator IQN  initiator name\n"
		"  --timeout S      login and command timeout (30)\n\n"
		"SIGINT or SIGTERM ends the run early: requests in flight\n"
		"complete, then the final check and the summary.\n"
		"Prints: ops= writes= reads= bytes= errors= mismatches= direct=\n"
		"direct_in= direct_out= plain_in= plain_out= refused_peers=\n"
		"commands= merged= path_fallbacks=\n"
		"Exit status: 0 no error and no mismatch, 1 otherwise, 2 usage.\n",
		MAX_QD, TPT_INIT_MERGE_MAX);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "offset", required_argument, NULL, 'O' },
		{ "span", required_argument, NULL, 's' },
		{ "qd", required_argument, NULL, 'q' },
		{ "ops", required_argument, NULL, 'o' },
		{ "seconds", required_argument, NULL, 't' },
		{ "max-bs", required_argument, NULL, 'b' },
		{ "max-io", required_argument, NULL, 'x' },
		{ "seed", required_argument, NULL, 'r' },
		{ "zero", no_argument, NULL, 'z' },
		{ "final-check", no_argument, NULL, 'f' },
		{ "sequential", no_argument, NULL, 'S' },
		{ "merge", required_argument, NULL, 'M' },
		{ "direct", required_argument, NULL, 'd' },
		{ "direct-retry", required_argument, NULL, 'R' },
		{ "dm", required_argument, NULL, 'm' },
		{ "initiator", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tpt_init_config cfg = {
		.initiator_name = "iqn.2026-11.org.tptraid:tpt-direct-verify",
	};
	struct verify v = {
		.qd = 8,
		.m = {
			.prog = PROG,
			.log_sizes = true,
			.seed = 1,
			.say_lun_byte = true,
		},
	};
	uint64_t offset = 0, span = 0, ops = 1000, seconds = 0, max_bs = 4 << 20;
	uint64_t x;
	size_t buf_len;
	bool zero = false, final_check = false;
	struct tpt_init_stats st;
	char dm_addr[64], err[512];
	double deadline;
	unsigned int i;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'O': if (tpt_init_parse_size(optarg, &offset)) goto bad; break;
		case 's': if (tpt_init_parse_size(optarg, &span)) goto bad; break;
		case 'q':
			if (tpt_init_parse_size(optarg, &x) || !x || x > MAX_QD)
				goto bad;
			v.qd = (unsigned int)x;
			break;
		case 'o': if (tpt_init_parse_size(optarg, &ops)) goto bad; break;
		case 't': if (tpt_init_parse_size(optarg, &seconds)) goto bad; break;
		case 'b':
			if (tpt_init_parse_size(optarg, &max_bs) || !max_bs ||
			    max_bs > (64u << 20))
				goto bad;
			break;
		case 'x':
			if (tpt_init_parse_size(optarg, &x) || x > (64u << 20))
				goto bad;
			cfg.max_io = (size_t)x;
			break;
		case 'r':
			if (tpt_init_parse_size(optarg, &v.m.seed))
				goto bad;
			break;
		case 'z': zero = true; break;
		case 'f': final_check = true; break;
		case 'S': v.m.sequential = true; break;
		case 'M':
			if (tpt_init_parse_size(optarg, &x) || !x ||
			    x > TPT_INIT_MERGE_MAX)
				goto bad;
			cfg.merge_max = (unsigned int)x;
			break;
		case 'd': if (tpt_init_parse_direct(optarg, &cfg.direct)) goto bad; break;
		case 'R':
			if (tpt_init_parse_size(optarg, &x) || !x || x > 3600)
				goto bad;
			cfg.direct_retry_s = (unsigned int)x;
			break;
		case 'm':
			if (tpt_init_parse_endpoint(optarg, dm_addr,
						    sizeof(dm_addr),
						    &cfg.dm_port))
				goto bad;
			cfg.dm_addr = dm_addr[0] ? dm_addr : NULL;
			break;
		case 'i': cfg.initiator_name = optarg; break;
		case 'T':
			if (tpt_init_parse_size(optarg, &x) || !x || x > 3600)
				goto bad;
			cfg.timeout_s = (unsigned int)x;
			break;
		case 'h': usage(stdout); return 0;
		default: goto bad;
		}
	}
	if (optind + 1 != argc)
		goto bad;
	cfg.url = argv[optind];
	/* The library's own queue holds what we do not: ours is the limit. */
	cfg.queue_depth = v.qd;
	if ((ret = tpt_init_new(&cfg, &v.ctx, err, sizeof(err)))) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	/* A controller gone mid-run fails its requests, which we report,
	 * rather than killing us silently (tpt_initiator.h). */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, ask_stop);
	signal(SIGTERM, ask_stop);
	if (tpt_init_connect(v.ctx)) {
		fprintf(stderr, PROG ": %s\n", tpt_init_error(v.ctx));
		tpt_init_close(v.ctx);
		return 1;
	}
	v.m.bs = tpt_init_block_size(v.ctx);
	if (!span)
		span = offset < tpt_init_size(v.ctx) ?
			tpt_init_size(v.ctx) - offset : 0;
	if (offset % v.m.bs || span % v.m.bs || !span ||
	    offset > tpt_init_size(v.ctx) ||
	    span > tpt_init_size(v.ctx) - offset || span > (16ULL << 30)) {
		fprintf(stderr, PROG ": --offset/--span: whole blocks inside "
			"the LUN (%" PRIu64 " bytes), at most 16g\n",
			tpt_init_size(v.ctx));
		tpt_init_close(v.ctx);
		return 2;
	}
	v.m.base = offset;
	v.m.blocks = span / v.m.bs;
	v.m.max_blocks = (uint32_t)(max_bs / v.m.bs) ?
			 (uint32_t)(max_bs / v.m.bs) : 1;
	v.m.data = calloc(v.m.blocks, v.m.bs);
	v.m.unknown = calloc(v.m.blocks, 1);
	v.m.busy = calloc(v.m.blocks, 1);
	if (!v.m.data || !v.m.unknown || !v.m.busy)
		return 1;
	buf_len = ((size_t)v.m.max_blocks * v.m.bs + 4095) / 4096 * 4096;
	for (i = 0; i < v.qd; i++) {
		v.io[i].v = &v;
		v.io[i].req.buf = aligned_alloc(4096, buf_len);
		if (!v.io[i].req.buf)
			return 1;
	}
	if (!zero) {
		/* Whatever the region holds now is what it should hold. */
		v.m.learning = true;
		check_all(&v);
		v.m.learning = false;
		v.m.reads = v.bytes = 0;
	}
	deadline = seconds ? model_now() + (double)seconds : 0;
	while (!v.lost && !stop_asked &&
	       (seconds ? model_now() < deadline :
			   v.m.writes + v.m.reads < ops)) {
		for (i = 0; i < v.qd && !v.lost && !stop_asked; i++) {
			uint64_t blk;
			uint32_t n;

			if (!seconds && v.m.writes + v.m.reads >= ops)
				break;
			if (v.io[i].req.busy ||
			    !model_pick_range(&v.m, &blk, &n))
				continue;
			if (issue(&v, &v.io[i], model_rnd(&v.m) % 2, blk, n)) {
				v.errors++;
				v.lost = true;
			}
		}
		service(&v);
	}
	drain(&v);
	if (final_check && !v.lost)
		check_all(&v);
	tpt_init_get_stats(v.ctx, &st);
	printf("ops=%" PRIu64 " writes=%" PRIu64 " reads=%" PRIu64
	       " bytes=%" PRIu64 " errors=%" PRIu64 " mismatches=%" PRIu64
	       " direct=%s direct_in=%" PRIu64 " direct_out=%" PRIu64
	       " plain_in=%" PRIu64 " plain_out=%" PRIu64
	       " refused_peers=%" PRIu64 " commands=%" PRIu64
	       " merged=%" PRIu64 " path_fallbacks=%" PRIu64 "\n",
	       v.m.writes + v.m.reads,
	       v.m.writes, v.m.reads, v.bytes, v.errors, v.m.mismatches,
	       tpt_init_is_direct(v.ctx) ? "yes" : "no", st.direct_bytes_in,
	       st.direct_bytes_out, st.plain_bytes_in, st.plain_bytes_out,
	       st.refused_peers, st.commands, st.merged, st.path_fallbacks);
	tpt_init_close(v.ctx);
	for (i = 0; i < v.qd; i++)
		free(v.io[i].req.buf);
	free(v.m.data);
	free(v.m.unknown);
	free(v.m.busy);
	return v.errors || v.m.mismatches || v.lost ? 1 : 0;
bad:
	usage(stderr);
	return 2;
}
