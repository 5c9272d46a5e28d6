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
 * Prints one line of key=value: ops writes reads bytes errors mismatches
 * direct(yes|no) direct_in direct_out plain_in plain_out refused_peers.
 * Exit status: 0 neither errors nor mismatches, 1 otherwise, 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "initiator/tpt_init_args.h"
#include "initiator/tpt_initiator.h"

#define PROG "tpt-direct-verify"
#define MAX_QD 128

struct verify;

struct io {
	struct verify *v;
	bool busy, write;
	uint64_t blk;			/* first block, within the region */
	uint32_t blocks;
	uint8_t *buf;
};

struct verify {
	struct tpt_init *ctx;
	uint32_t bs;
	uint64_t base;			/* the region's first byte on the LUN */
	uint64_t blocks;		/* the region's blocks */
	uint32_t max_blocks;
	unsigned int qd, inflight;
	uint64_t seed;
	uint8_t *model, *unknown, *busy;	/* bytes; a byte per block */
	struct io io[MAX_QD];
	uint64_t writes, reads, bytes, errors, mismatches, reported;
	bool lost;
	bool learning;			/* first pass: reads fill the model */
};

static uint64_t rnd(struct verify *v)
{
	uint64_t z = (v->seed += 0x9e3779b97f4a7c15);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
	return z ^ (z >> 31);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void check_read(struct verify *v, const struct io *io)
{
	uint32_t i;

	for (i = 0; i < io->blocks; i++) {
		uint64_t b = io->blk + i;

		if (v->learning) {
			memcpy(v->model + b * v->bs, io->buf + (size_t)i * v->bs,
			       v->bs);
			continue;
		}
		if (v->unknown[b] || !memcmp(io->buf + (size_t)i * v->bs,
					     v->model + b * v->bs, v->bs))
			continue;
		v->mismatches++;
		if (v->reported++ < 16)
			fprintf(stderr, PROG ": block %" PRIu64 " (LUN byte "
				"%" PRIu64 ") does not read back as written\n",
				b, v->base + b * v->bs);
	}
}

static void io_done(struct tpt_init *ctx, int status, void *arg)
{
	struct io *io = arg;
	struct verify *v = io->v;
	size_t len = (size_t)io->blocks * v->bs;

	if (status) {
		v->errors++;
		if (v->errors <= 16)
			fprintf(stderr, PROG ": %s of %zu bytes at %" PRIu64
				" failed: %s\n", io->write ? "write" : "read",
				len, v->base + io->blk * v->bs,
				tpt_init_error(ctx));
		if (status == -ENOTCONN || status == -ECANCELED)
			v->lost = true;
	} else if (io->write) {
		memcpy(v->model + io->blk * v->bs, io->buf, len);
		memset(v->unknown + io->blk, 0, io->blocks);
		v->bytes += len;
	} else {
		check_read(v, io);
		v->bytes += len;
	}
	memset(v->busy + io->blk, 0, io->blocks);
	io->busy = false;
	v->inflight--;
}

/* Log-uniform from one block to max_blocks: a random power of two, then
 * a random size below the next one, so small and large both come up
 * often. */
static uint32_t pick_size(struct verify *v)
{
	unsigned int bits = 0, k;
	uint32_t n;

	while (bits < 31 && (2u << bits) <= v->max_blocks)
		bits++;
	k = (unsigned int)(rnd(v) % (bits + 1));
	n = (1u << k) + (uint32_t)(rnd(v) % (1u << k));
	return n > v->max_blocks ? v->max_blocks : n;
}

static bool pick_range(struct verify *v, uint64_t *blk, uint32_t *blocks)
{
	unsigned int tries;
	uint32_t i;

	for (tries = 0; tries < 16; tries++) {
		uint32_t n = pick_size(v);
		uint64_t at;

		if (n > v->blocks)
			n = (uint32_t)v->blocks;
		at = rnd(v) % (v->blocks - n + 1);
		if (rnd(v) % 2)
			at -= at % n;
		for (i = 0; i < n && !v->busy[at + i]; i++)
			;
		if (i == n) {
			*blk = at;
			*blocks = n;
			return true;
		}
	}
	return false;
}

static int issue(struct verify *v, struct io *io, bool write, uint64_t blk,
		 uint32_t blocks)
{
	size_t len = (size_t)blocks * v->bs, i;
	int ret;

	io->write = write;
	io->blk = blk;
	io->blocks = blocks;
	if (write) {
		for (i = 0; i + 8 <= len; i += 8) {
			uint64_t r = rnd(v);

			memcpy(io->buf + i, &r, 8);
		}
		/* Unknown until acknowledged. */
		memset(v->unknown + blk, 1, blocks);
		ret = tpt_init_pwrite_async(v->ctx, io->buf, len,
					    v->base + blk * v->bs,
					    rnd(v) % 8 ? 0 : TPT_INIT_FUA,
					    io_done, io);
	} else {
		ret = tpt_init_pread_async(v->ctx, io->buf, len,
					   v->base + blk * v->bs, io_done, io);
	}
	if (ret) {
		fprintf(stderr, PROG ": cannot queue: %s\n",
			tpt_init_error(v->ctx));
		return -1;
	}
	memset(v->busy + blk, 1, blocks);
	io->busy = true;
	v->inflight++;
	if (write)
		v->writes++;
	else
		v->reads++;
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
	while (v->inflight)
		service(v);
}

/* Reads the whole region, max-size pieces, qd at a time. */
static void check_all(struct verify *v)
{
	uint64_t blk = 0;
	unsigned int i;

	while (blk < v->blocks && !v->lost) {
		for (i = 0; i < v->qd && blk < v->blocks; i++) {
			uint32_t n = v->max_blocks;

			if (v->io[i].busy)
				continue;
			if (n > v->blocks - blk)
				n = (uint32_t)(v->blocks - blk);
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
		"  --direct auto|on|off  (auto)\n"
		"  --dm ADDR[:PORT] where the datamover listens\n"
		"  --initiator IQN  initiator name\n"
		"  --timeout S      login and command timeout (30)\n\n"
		"Prints: ops= writes= reads= bytes= errors= mismatches= direct=\n"
		"direct_in= direct_out= plain_in= plain_out= refused_peers=\n"
		"Exit status: 0 no error and no mismatch, 1 otherwise, 2 usage.\n",
		MAX_QD);
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
		{ "direct", required_argument, NULL, 'd' },
		{ "dm", required_argument, NULL, 'm' },
		{ "initiator", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tpt_init_config cfg = {
		.initiator_name = "iqn.2026-11.org.tptraid:tpt-direct-verify",
	};
	struct verify v = { .qd = 8, .seed = 1 };
	uint64_t offset = 0, span = 0, ops = 1000, seconds = 0, max_bs = 4 << 20;
	uint64_t x;
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
		case 'r': if (tpt_init_parse_size(optarg, &v.seed)) goto bad; break;
		case 'z': zero = true; break;
		case 'f': final_check = true; break;
		case 'd': if (tpt_init_parse_direct(optarg, &cfg.direct)) goto bad; break;
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
	if (tpt_init_connect(v.ctx)) {
		fprintf(stderr, PROG ": %s\n", tpt_init_error(v.ctx));
		tpt_init_close(v.ctx);
		return 1;
	}
	v.bs = tpt_init_block_size(v.ctx);
	if (!span)
		span = offset < tpt_init_size(v.ctx) ?
			tpt_init_size(v.ctx) - offset : 0;
	if (offset % v.bs || span % v.bs || !span ||
	    offset > tpt_init_size(v.ctx) ||
	    span > tpt_init_size(v.ctx) - offset || span > (16ULL << 30)) {
		fprintf(stderr, PROG ": --offset/--span: whole blocks inside "
			"the LUN (%" PRIu64 " bytes), at most 16g\n",
			tpt_init_size(v.ctx));
		tpt_init_close(v.ctx);
		return 2;
	}
	v.base = offset;
	v.blocks = span / v.bs;
	v.max_blocks = (uint32_t)(max_bs / v.bs) ? (uint32_t)(max_bs / v.bs) : 1;
	v.model = calloc(v.blocks, v.bs);
	v.unknown = calloc(v.blocks, 1);
	v.busy = calloc(v.blocks, 1);
	if (!v.model || !v.unknown || !v.busy)
		return 1;
	for (i = 0; i < v.qd; i++) {
		v.io[i].v = &v;
		v.io[i].buf = aligned_alloc(4096, ((size_t)v.max_blocks * v.bs +
						   4095) / 4096 * 4096);
		if (!v.io[i].buf)
			return 1;
	}
	if (!zero) {
		/* Whatever the region holds now is what it should hold. */
		v.learning = true;
		check_all(&v);
		v.learning = false;
		v.reads = v.bytes = 0;
	}
	deadline = seconds ? now_s() + (double)seconds : 0;
	while (!v.lost && (seconds ? now_s() < deadline :
			   v.writes + v.reads < ops)) {
		for (i = 0; i < v.qd && !v.lost; i++) {
			uint64_t blk;
			uint32_t n;

			if (!seconds && v.writes + v.reads >= ops)
				break;
			if (v.io[i].busy || !pick_range(&v, &blk, &n))
				continue;
			if (issue(&v, &v.io[i], rnd(&v) % 2, blk, n)) {
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
	       " refused_peers=%" PRIu64 "\n", v.writes + v.reads, v.writes,
	       v.reads, v.bytes, v.errors, v.mismatches,
	       tpt_init_is_direct(v.ctx) ? "yes" : "no", st.direct_bytes_in,
	       st.direct_bytes_out, st.plain_bytes_in, st.plain_bytes_out,
	       st.refused_peers);
	tpt_init_close(v.ctx);
	for (i = 0; i < v.qd; i++)
		free(v.io[i].buf);
	free(v.model);
	free(v.unknown);
	free(v.busy);
	return v.errors || v.mismatches || v.lost ? 1 : 0;
bad:
	usage(stderr);
	return 2;
}
