/* tpt-dd: copy between a file (or stdin/stdout) and a TPT-RAID LUN through
 * libtptinitiator, dd's way, for scripts.  Host-direct when the LUN is a
 * TPT-mode array, plain iSCSI otherwise; the summary line says which.
 *
 *   tpt-dd URL if=FILE|-   file -> LUN (write)
 *   tpt-dd URL of=FILE|-   LUN -> file (read)
 *
 * skip= counts bs-blocks into the input, seek= into the output, as in dd
 *
 * bs= sizes each request; up to --qd requests are in flight, kept in
 * order by a ring of buffers so that a pipe on the other side sees the
 * bytes in sequence.  Exit status: 0 done, 1 an I/O error, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "initiator/tpt_init_args.h"
#include "initiator/tpt_initiator.h"

#define PROG "tpt-dd"
#define MAX_QD 64

struct slot {
	uint8_t *buf;
	size_t len;
	bool busy;
	int status;
};

struct dd {
	struct tpt_init *ctx;
	bool to_lun;		/* if= given: write the LUN */
	int fd;			/* the file side */
	uint64_t bs, count, skip, seek;
	bool have_count, fua, fsync, quiet;
	unsigned int qd;
	struct slot slot[MAX_QD];
	uint64_t bytes;
	int error;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " URL if=FILE|- [OPTIONS]   (write the LUN)\n"
		"       " PROG " URL of=FILE|- [OPTIONS]   (read the LUN)\n\n"
		"URL: iscsi://[user[%%password]@]host[:port]/IQN/LUN\n"
		"  bs=N        bytes per request, a multiple of the LUN's block size (1m)\n"
		"  count=N     copy N requests of bs bytes (default: to the input's end)\n"
		"  skip=N      start N bs-blocks into the input\n"
		"  seek=N      start N bs-blocks into the output\n"
		"  oflag=fua   writes with FUA\n"
		"  conv=fsync  SYNCHRONIZE CACHE once every write is done: what\n"
		"              was written is on the LUN's media before " PROG " ends\n"
		"  --qd N      requests in flight (8, at most %d)\n"
		"  --max-io N  largest SCSI command; bigger requests are split (4m)\n"
		"  --dm ADDR[:PORT]  where the datamover listens (the address of\n"
		"              the iSCSI connection, an ephemeral port)\n"
		"  --direct auto|on|off  host-direct: try, insist, never (auto)\n"
		"  --timeout S login and command timeout in seconds (30)\n"
		"  --quiet     no summary line\n"
		"N takes a k, m or g suffix.  CHAP secrets may come from\n"
		"LIBISCSI_CHAP_PASSWORD (and _TARGET_...) instead of the URL.\n"
		"Prints on stderr: bytes=N seconds=S MB/s=R mode=direct|plain\n"
		"Exit status: 0 done, 1 I/O error, 2 usage.\n", MAX_QD);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void io_done(struct tpt_init *ctx, int status, void *arg)
{
	struct slot *s = arg;

	(void)ctx;
	s->busy = false;
	s->status = status;
}

/* Runs the library's loop until @s is no longer busy. */
static int wait_slot(struct dd *d, struct slot *s)
{
	while (s->busy) {
		struct pollfd fds[TPT_INIT_MAX_FDS];
		int n = tpt_init_get_fds(d->ctx, fds);

		if (poll(fds, (nfds_t)n, tpt_init_poll_timeout_ms(d->ctx)) < 0 &&
		    errno != EINTR)
			return -errno;
		tpt_init_service(d->ctx, fds, n);
	}
	return s->status;
}

/* Reads up to @len bytes, short only at the end of the input. */
static ssize_t read_full(int fd, uint8_t *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, buf + got, len - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (!r)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int write_full(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t r = write(fd, buf, len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		buf += r;
		len -= (size_t)r;
	}
	return 0;
}

/* Skips @bytes of the input: a seek, or reading them on a pipe. */
static int skip_input(int fd, uint64_t bytes, uint8_t *scratch, size_t n)
{
	if (lseek(fd, (off_t)bytes, SEEK_CUR) >= 0)
		return 0;
	while (bytes) {
		ssize_t r = read_full(fd, scratch, bytes < n ? bytes : n);

		if (r <= 0)
			return -1;
		bytes -= (uint64_t)r;
	}
	return 0;
}

static int fail_io(struct dd *d, const char *what, int status)
{
	fprintf(stderr, PROG ": %s failed: %s\n", what,
		status == -EIO || status == -ETIMEDOUT || status == -ENOTCONN ||
		status == -EINVAL ? tpt_init_error(d->ctx) : strerror(-status));
	d->error = 1;
	return -1;
}

/* The slots in flight, oldest first: requests complete in any order but
 * are retired in the order they were sent, so the output sees the bytes
 * in sequence. */
struct ring {
	unsigned int head;	/* the oldest in flight */
	unsigned int tail;	/* the next to send */
	unsigned int busy;
};

/* Sends the tail slot, its buffer ready, as a request of @len bytes at
 * LUN byte @at: a write if to_lun, a read otherwise. */
static int send_tail(struct dd *d, struct ring *r, uint64_t at, size_t len)
{
	struct slot *s = &d->slot[r->tail];
	int ret;

	s->len = len;
	s->busy = true;
	if (d->to_lun)
		ret = tpt_init_pwrite_async(d->ctx, s->buf, len, at,
					    d->fua ? TPT_INIT_FUA : 0,
					    io_done, s);
	else
		ret = tpt_init_pread_async(d->ctx, s->buf, len, at, io_done, s);
	if (ret) {
		s->busy = false;
		return fail_io(d, d->to_lun ? "write" : "read", ret);
	}
	r->tail = (r->tail + 1) % d->qd;
	r->busy++;
	return 0;
}

/* Waits for the head slot and retires it: a read's bytes go to the
 * file first, and count only once they are there. */
static int retire_head(struct dd *d, struct ring *r)
{
	struct slot *s = &d->slot[r->head];
	int ret = wait_slot(d, s);

	if (ret)
		return fail_io(d, d->to_lun ? "write" : "read", ret);
	if (!d->to_lun && write_full(d->fd, s->buf, s->len)) {
		fprintf(stderr, PROG ": write: %s\n", strerror(errno));
		return -1;
	}
	d->bytes += s->len;
	r->head = (r->head + 1) % d->qd;
	r->busy--;
	return 0;
}

/* LUN -> file. */
static int copy_from_lun(struct dd *d)
{
	uint64_t size = tpt_init_size(d->ctx), at = d->skip * d->bs, end;
	struct ring r = { 0 };

	if (at > size) {
		fprintf(stderr, PROG ": skip=%" PRIu64 " passes the LUN's end\n",
			d->skip);
		return -1;
	}
	end = d->have_count && d->count * d->bs < size - at ?
		at + d->count * d->bs : size;
	for (;;) {
		while (r.busy < d->qd && at < end) {
			size_t len = end - at < d->bs ? end - at : d->bs;

			if (send_tail(d, &r, at, len))
				return -1;
			at += len;
		}
		if (!r.busy)
			return 0;
		if (retire_head(d, &r))
			return -1;
	}
}

/* File -> LUN. */
static int copy_to_lun(struct dd *d)
{
	uint64_t at = d->seek * d->bs, size = tpt_init_size(d->ctx), left;
	uint32_t bs = tpt_init_block_size(d->ctx);
	struct ring ring = { 0 };
	bool eof = false;

	left = d->have_count ? d->count : UINT64_MAX;
	for (;;) {
		while (ring.busy < d->qd && !eof && left) {
			ssize_t r = read_full(d->fd, d->slot[ring.tail].buf,
					      d->bs);

			if (r < 0) {
				fprintf(stderr, PROG ": read: %s\n",
					strerror(errno));
				return -1;
			}
			if ((size_t)r < d->bs)
				eof = true;
			if (!r)
				break;
			if ((size_t)r % bs) {
				fprintf(stderr, PROG ": the input ends in a "
					"partial block (%zd bytes is not a "
					"multiple of %u)\n", r, bs);
				return -1;
			}
			if (at > size || (uint64_t)r > size - at) {
				fprintf(stderr, PROG ": the input passes the "
					"LUN's end (%" PRIu64 " bytes)\n", size);
				return -1;
			}
			if (send_tail(d, &ring, at, (size_t)r))
				return -1;
			at += (size_t)r;
			left--;
		}
		if (!ring.busy)
			return 0;
		if (retire_head(d, &ring))
			return -1;
	}
}

/* Waits for every request still in flight after a failure: their
 * buffers must outlive them. */
static void drain(struct dd *d)
{
	unsigned int i;

	for (i = 0; i < d->qd; i++)
		wait_slot(d, &d->slot[i]);
}

static int size_arg(const char *name, const char *v, uint64_t *out)
{
	if (tpt_init_parse_size(v, out)) {
		fprintf(stderr, PROG ": %s=%s: not a size (N, Nk, Nm, Ng)\n",
			name, v);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct tpt_init_config cfg = {
		.initiator_name = "iqn.2026-11.org.tptraid:tpt-dd",
	};
	struct dd d = { .bs = 1 << 20, .qd = 8, .fd = -1 };
	const char *url = NULL, *in = NULL, *out = NULL;
	char dm_addr[64], err[512];
	uint64_t v;
	double t0, dt;
	unsigned int i;
	int a, ret;

	for (a = 1; a < argc; a++) {
		const char *arg = argv[a], *next = a + 1 < argc ? argv[a + 1] : NULL;

		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strncmp(arg, "if=", 3)) {
			in = arg + 3;
		} else if (!strncmp(arg, "of=", 3)) {
			out = arg + 3;
		} else if (!strncmp(arg, "bs=", 3)) {
			if (size_arg("bs", arg + 3, &d.bs))
				return 2;
		} else if (!strncmp(arg, "count=", 6)) {
			if (size_arg("count", arg + 6, &d.count))
				return 2;
			d.have_count = true;
		} else if (!strncmp(arg, "skip=", 5)) {
			if (size_arg("skip", arg + 5, &d.skip))
				return 2;
		} else if (!strncmp(arg, "seek=", 5)) {
			if (size_arg("seek", arg + 5, &d.seek))
				return 2;
		} else if (!strcmp(arg, "oflag=fua")) {
			d.fua = true;
		} else if (!strcmp(arg, "conv=fsync")) {
			d.fsync = true;
		} else if (!strcmp(arg, "--quiet")) {
			d.quiet = true;
		} else if (!strcmp(arg, "--qd") && next) {
			if (size_arg("--qd", next, &v) || !v || v > MAX_QD) {
				fprintf(stderr, PROG ": --qd: 1..%d\n", MAX_QD);
				return 2;
			}
			d.qd = (unsigned int)v;
			a++;
		} else if (!strcmp(arg, "--max-io") && next) {
			if (size_arg("--max-io", next, &v) || v > SIZE_MAX) {
				fprintf(stderr, PROG ": --max-io: a size in "
					"bytes\n");
				return 2;
			}
			cfg.max_io = (size_t)v;
			a++;
		} else if (!strcmp(arg, "--timeout") && next) {
			if (size_arg("--timeout", next, &v) || !v || v > 3600) {
				fprintf(stderr, PROG ": --timeout: 1..3600 "
					"seconds\n");
				return 2;
			}
			cfg.timeout_s = (unsigned int)v;
			a++;
		} else if (!strcmp(arg, "--dm") && next) {
			if (tpt_init_parse_endpoint(next, dm_addr,
						    sizeof(dm_addr),
						    &cfg.dm_port)) {
				fprintf(stderr, PROG ": --dm %s: not ADDR, "
					"ADDR:PORT, [IPV6]:PORT or :PORT "
					"(numeric)\n", next);
				return 2;
			}
			cfg.dm_addr = dm_addr[0] ? dm_addr : NULL;
			a++;
		} else if (!strcmp(arg, "--direct") && next) {
			if (tpt_init_parse_direct(next, &cfg.direct)) {
				fprintf(stderr, PROG ": --direct: auto, on "
					"or off\n");
				return 2;
			}
			a++;
		} else if (!strncmp(arg, "iscsi://", 8) && !url) {
			url = arg;
		} else {
			fprintf(stderr, PROG ": unknown or incomplete "
				"argument '%s'\n", arg);
			usage(stderr);
			return 2;
		}
	}
	if (!url || !!in == !!out) {
		fprintf(stderr, PROG ": need an iscsi:// URL and exactly one "
			"of if= and of=\n");
		usage(stderr);
		return 2;
	}
	if (out && (d.fua || d.fsync)) {
		fprintf(stderr, PROG ": oflag=fua and conv=fsync are for "
			"writing the LUN (if=)\n");
		return 2;
	}
	if (!d.bs || d.bs > (1u << 30)) {
		fprintf(stderr, PROG ": bs: 1..1g\n");
		return 2;
	}
	d.to_lun = in != NULL;
	cfg.url = url;
	cfg.queue_depth = d.qd;
	if (d.to_lun)
		d.fd = strcmp(in, "-") ? open(in, O_RDONLY | O_CLOEXEC) : 0;
	else
		d.fd = strcmp(out, "-") ? open(out, O_WRONLY | O_CREAT |
					       O_CLOEXEC | (d.seek ? 0 : O_TRUNC),
					       0644) : 1;
	if (d.fd < 0) {
		fprintf(stderr, PROG ": %s: %s\n", d.to_lun ? in : out,
			strerror(errno));
		return 1;
	}
	ret = tpt_init_new(&cfg, &d.ctx, err, sizeof(err));
	if (ret) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	/* A controller gone mid-copy is an I/O error that says so, not a
	 * silent death (tpt_initiator.h); so is a closed output pipe. */
	signal(SIGPIPE, SIG_IGN);
	ret = tpt_init_connect(d.ctx);
	if (ret) {
		fprintf(stderr, PROG ": %s\n", tpt_init_error(d.ctx));
		tpt_init_close(d.ctx);
		return 1;
	}
	if (d.bs % tpt_init_block_size(d.ctx)) {
		fprintf(stderr, PROG ": bs=%" PRIu64 " is not a multiple of "
			"the LUN's block size %u\n", d.bs,
			tpt_init_block_size(d.ctx));
		tpt_init_close(d.ctx);
		return 2;
	}
	for (i = 0; i < d.qd; i++) {
		d.slot[i].buf = aligned_alloc(4096, (d.bs + 4095) / 4096 * 4096);
		if (!d.slot[i].buf) {
			fprintf(stderr, PROG ": out of memory\n");
			return 1;
		}
	}
	if (!d.to_lun && d.seek && lseek(d.fd, (off_t)(d.seek * d.bs),
					 SEEK_SET) < 0) {
		fprintf(stderr, PROG ": seek in the output: %s\n",
			strerror(errno));
		ret = -1;
	} else if (d.to_lun && d.skip &&
		   skip_input(d.fd, d.skip * d.bs, d.slot[0].buf, d.bs)) {
		fprintf(stderr, PROG ": cannot skip %" PRIu64 " bytes of the "
			"input\n", d.skip * d.bs);
		ret = -1;
	}
	t0 = now_s();
	if (!ret)
		ret = d.to_lun ? copy_to_lun(&d) : copy_from_lun(&d);
	drain(&d);
	if (!ret && d.fsync && tpt_init_flush(d.ctx)) {
		fprintf(stderr, PROG ": SYNCHRONIZE CACHE: %s\n",
			tpt_init_error(d.ctx));
		ret = -1;
	}
	dt = now_s() - t0;
	if (!d.quiet)
		fprintf(stderr, "bytes=%" PRIu64 " seconds=%.3f MB/s=%.1f "
			"mode=%s\n", d.bytes, dt, dt > 0 ? d.bytes / dt / 1e6 :
			0.0, tpt_init_is_direct(d.ctx) ? "direct" : "plain");
	tpt_init_close(d.ctx);
	if (d.fd > 2 && close(d.fd)) {
		fprintf(stderr, PROG ": close: %s\n", strerror(errno));
		ret = -1;
	}
	for (i = 0; i < d.qd; i++)
		free(d.slot[i].buf);
	return ret ? 1 : 0;
}
