/* tpt-iscsi-verify: random writes and reads on a LUN, checked against a
 * byte model, with commands in flight all the time - the load the
 * failure tests put on an array while they kill its members.
 *
 * The model lives in two files of a directory (--model DIR), mapped into
 * memory: DIR/data holds what every block of the span should read, and
 * DIR/unknown marks, a byte per block, blocks whose content is not known:
 * a write that was sent but not acknowledged may or may not have reached
 * them.  A block is marked before its write goes out and cleared when the
 * write is acknowledged, so the files are right whenever this process
 * stops, even killed; a later run (--verify) checks the LUN against them,
 * after a controller was restarted, say.  A write that fails leaves its
 * blocks unknown; every other block must read back exactly.
 *
 * Writes and reads are random in place and size and never overlap a
 * command in flight, so every read can be checked when it completes.
 * Prints one line: writes=N reads=N errors=N mismatches=N, and each
 * error and mismatch on stderr.  Exit status: 0 when there were neither,
 * 1 otherwise, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "initiator/tpt_init_args.h"
#include "tool_iscsi.h"
#include "tool_model.h"

#define PROG "tpt-iscsi-verify"
#define MAX_QD 64

struct verify;

struct io {
	struct verify *v;
	struct model_req req;		/* blocks within the span */
	struct scsi_task *task;
};

struct verify {
	struct tool_lun lun;
	/* The span; data is DIR/data and unknown DIR/unknown, mapped. */
	struct tool_model m;
	unsigned int qd;
	struct io io[MAX_QD];
	uint64_t errors;
	bool stop, lost;
};

/* Map DIR/NAME, @size bytes, created (zero) when absent, resized when it
 * is of another size; its size before in *@was. */
static uint8_t *map_file(const char *dir, const char *name, size_t size,
			 size_t *was)
{
	char path[4096];
	struct stat st;
	uint8_t *p;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0 && !fstat(fd, &st))
		*was = (size_t)st.st_size;
	if (fd < 0 || fstat(fd, &st) ||
	    ((size_t)st.st_size != size && ftruncate(fd, (off_t)size))) {
		fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fprintf(stderr, PROG ": mmap %s: %s\n", path, strerror(errno));
		return NULL;
	}
	return p;
}

static void io_done(struct iscsi_context *iscsi, int status,
		    void *command_data, void *private_data)
{
	struct io *io = private_data;
	struct verify *v = io->v;

	(void)command_data;
	if (status != SCSI_STATUS_GOOD) {
		v->errors++;
		if (v->errors <= 16)
			tool_iscsi_report(PROG, io->req.write ? "WRITE(16)" :
					  "READ(16)", iscsi, status, io->task);
		if (status == SCSI_STATUS_CANCELLED ||
		    status == SCSI_STATUS_ERROR || status == SCSI_STATUS_TIMEOUT)
			v->lost = true;
	}
	model_completed(&v->m, &io->req, status == SCSI_STATUS_GOOD);
	scsi_free_scsi_task(io->task);
	io->task = NULL;
}

static int issue(struct verify *v, struct io *io, bool write, uint64_t lba,
		 uint32_t blocks)
{
	uint32_t bs = v->lun.block_size;

	model_prepare(&v->m, &io->req, write, lba, blocks);
	if (write) {
		io->task = iscsi_write16_task(v->lun.iscsi, v->lun.lun, lba,
					      io->req.buf, blocks * bs, bs, 0,
					      0, 0, 0, 0, io_done, io);
	} else {
		io->task = iscsi_read16_task(v->lun.iscsi, v->lun.lun, lba,
					     blocks * bs, bs, 0, 0, 0, 0, 0,
					     io_done, io);
		if (io->task && scsi_task_add_data_in_buffer(io->task,
							     (int)(blocks * bs),
							     io->req.buf)) {
			fprintf(stderr, PROG ": out of memory\n");
			return -1;
		}
	}
	if (!io->task) {
		fprintf(stderr, PROG ": cannot queue a command: %s\n",
			iscsi_get_error(v->lun.iscsi));
		return -1;
	}
	model_sent(&v->m, &io->req);
	return 0;
}

static int service(struct verify *v, int timeout_ms)
{
	struct pollfd pfd = {
		.fd = iscsi_get_fd(v->lun.iscsi),
		.events = (short)iscsi_which_events(v->lun.iscsi),
	};

	if (poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR)
		return -1;
	if (iscsi_service(v->lun.iscsi, pfd.revents) < 0) {
		fprintf(stderr, PROG ": session lost: %s\n",
			iscsi_get_error(v->lun.iscsi));
		v->lost = true;
		return -1;
	}
	return 0;
}

/* Reads of the whole span, in max-size pieces, one at a time. */
static void check_all(struct verify *v)
{
	uint64_t lba;

	for (lba = 0; lba < v->m.blocks && !v->lost;) {
		uint32_t n = v->m.max_blocks;

		if (n > v->m.blocks - lba)
			n = (uint32_t)(v->m.blocks - lba);
		if (issue(v, &v->io[0], false, lba, n))
			return;
		while (v->m.inflight && !v->lost)
			if (service(v, 1000))
				return;
		lba += n;
	}
}

/* SIGINT or SIGTERM: no new command; what is in flight completes and the
 * run ends as at its limit (summary line, exit status). */
static volatile sig_atomic_t stop_asked;

static void ask_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " --model DIR [OPTIONS] URL\n\n"
		"Random writes and reads checked against the byte model in DIR\n"
		"(DIR/data, DIR/unknown; created when absent: the LUN is then\n"
		"read once to start it, unless --zero says it holds zeroes).\n\n"
		"  --span BYTES     use the first BYTES of the LUN (all)\n"
		"  --qd N           commands in flight (8, at most %d)\n"
		"  --seconds S      run for S seconds (10)\n"
		"  --ops N          stop after N commands instead\n"
		"  --max-bs BYTES   largest command (256k)\n"
		"  --seed N         random seed (1)\n"
		"  --zero           a new model starts all zeroes\n"
		"  --verify         no load: read the whole span and check it\n"
		"  --final-check    after the load, check the whole span too\n"
		"  --initiator IQN  initiator name\n\n"
		"SIGINT or SIGTERM ends the load early: commands in flight\n"
		"complete and are checked, then the summary is printed.\n"
		"Exit status: 0 no error and no mismatch, 1 otherwise, 2 usage.\n",
		MAX_QD);
}

/* Every tool's sizes: decimal, k, m or g for powers of 1024. */
static int parse_bytes(const char *s, uint64_t *out)
{
	return tpt_init_parse_size(s, out) ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "span", required_argument, NULL, 's' },
		{ "qd", required_argument, NULL, 'q' },
		{ "seconds", required_argument, NULL, 't' },
		{ "ops", required_argument, NULL, 'o' },
		{ "max-bs", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 'r' },
		{ "zero", no_argument, NULL, 'z' },
		{ "verify", no_argument, NULL, 'v' },
		{ "final-check", no_argument, NULL, 'f' },
		{ "initiator", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tool_iscsi_login how = {
		.prog = PROG,
		.initiator = "iqn.2026-11.org.tptraid:tpt-iscsi-verify",
		.digest = ISCSI_HEADER_DIGEST_NONE_CRC32C,
		.noautoreconnect = true,
	};
	uint64_t span = 0, max_bs = 256 << 10, ops = 0, seconds = 10, v64;
	size_t was = 0, was_blocks = 0;
	const char *model = NULL;
	bool zero = false, verify_only = false, final_check = false, fresh;
	struct verify v = { .qd = 8, .m = { .prog = PROG, .seed = 1 } };
	double deadline;
	char path[4096];
	unsigned int i;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 's': if (parse_bytes(optarg, &span)) goto bad; break;
		case 'q':
			if (parse_bytes(optarg, &v64) || !v64 || v64 > MAX_QD)
				goto bad;
			v.qd = (unsigned int)v64;
			break;
		case 't': if (parse_bytes(optarg, &seconds)) goto bad; break;
		case 'o': if (parse_bytes(optarg, &ops)) goto bad; break;
		case 'b': if (parse_bytes(optarg, &max_bs) || !max_bs) goto bad; break;
		case 'r': if (parse_bytes(optarg, &v.m.seed)) goto bad; break;
		case 'z': zero = true; break;
		case 'v': verify_only = true; break;
		case 'f': final_check = true; break;
		case 'i': how.initiator = optarg; break;
		case 'h': usage(stdout); return 0;
		default: goto bad;
		}
	}
	if (optind + 1 != argc || !model)
		goto bad;
	if (tool_lun_open(&how, argv[optind], &v.lun))
		return 1;
	v.m.bs = v.lun.block_size;
	v.m.blocks = span ? span / v.lun.block_size : v.lun.nr_blocks;
	if (!v.m.blocks || v.m.blocks > v.lun.nr_blocks ||
	    v.m.blocks > (1ULL << 32)) {
		fprintf(stderr, PROG ": --span out of the LUN\n");
		return 2;
	}
	v.m.max_blocks = (uint32_t)(max_bs / v.lun.block_size);
	if (!v.m.max_blocks)
		v.m.max_blocks = 1;
	if (mkdir(model, 0755) && errno != EEXIST) {
		fprintf(stderr, PROG ": %s: %s\n", model, strerror(errno));
		tool_lun_close(&v.lun, true);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/data", model);
	fresh = access(path, F_OK) != 0;
	v.m.data = map_file(model, "data", v.m.blocks * v.lun.block_size,
			    &was);
	v.m.unknown = map_file(model, "unknown", v.m.blocks, &was_blocks);
	/* A model of a smaller span, used on a larger one: what it never
	 * covered is not known (it reads as zeroes only with --zero). */
	if (v.m.unknown && !fresh && !zero && was_blocks < v.m.blocks)
		memset(v.m.unknown + was_blocks, 1, v.m.blocks - was_blocks);
	v.m.busy = calloc(v.m.blocks, 1);
	for (i = 0; i < v.qd; i++) {
		v.io[i].v = &v;
		v.io[i].req.buf = aligned_alloc(4096, (size_t)v.m.max_blocks *
						v.lun.block_size);
		if (!v.io[i].req.buf)
			return 1;
	}
	if (!v.m.data || !v.m.unknown || !v.m.busy)
		return 1;
	if (fresh && !zero) {
		/* Whatever the LUN holds now is what it should hold: the
		 * first pass learns it into the model. */
		v.m.learning = true;
		check_all(&v);
		v.m.learning = false;
	}
	if (verify_only) {
		check_all(&v);
	} else {
		/* --ops counts the load's commands as they are sent: not the
		 * first pass's reads, and never more than asked for. */
		uint64_t sent = 0;

		signal(SIGINT, ask_stop);
		signal(SIGTERM, ask_stop);
		deadline = model_now() + (double)seconds;
		while (!v.lost && !stop_asked &&
		       (ops ? sent < ops : model_now() < deadline)) {
			for (i = 0; i < v.qd && !v.lost; i++) {
				uint64_t lba;
				uint32_t n;

				if ((ops && sent >= ops) || v.io[i].req.busy ||
				    !model_pick_range(&v.m, &lba, &n))
					continue;
				if (issue(&v, &v.io[i], model_rnd(&v.m) % 3 != 0,
					  lba, n))
					return 1;
				sent++;
			}
			if (service(&v, 100))
				break;
		}
		while (v.m.inflight && !v.lost)
			if (service(&v, 1000))
				break;
		if (final_check && !v.lost)
			check_all(&v);
	}
	printf("writes=%" PRIu64 " reads=%" PRIu64 " errors=%" PRIu64
	       " mismatches=%" PRIu64 "\n", v.m.writes, v.m.reads, v.errors,
	       v.m.mismatches);
	msync(v.m.data, v.m.blocks * v.lun.block_size, MS_SYNC);
	msync(v.m.unknown, v.m.blocks, MS_SYNC);
	tool_lun_close(&v.lun, !v.lost);
	for (i = 0; i < v.qd; i++)
		free(v.io[i].req.buf);
	free(v.m.busy);
	munmap(v.m.data, v.m.blocks * v.lun.block_size);
	munmap(v.m.unknown, v.m.blocks);
	return v.errors || v.m.mismatches || v.lost ? 1 : 0;
bad:
	usage(stderr);
	return 2;
}
