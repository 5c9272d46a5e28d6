/* tpt-iscsi-io: read and write a range of blocks of an iSCSI LUN with
 * stock libiscsi, the way a storage engineer pokes at a LUN by hand.
 *
 *   tpt-iscsi-io write iscsi://host:port/iqn/lun LBA  < data
 *   tpt-iscsi-io read  iscsi://host:port/iqn/lun LBA BLOCKS  > data
 *   tpt-iscsi-io capacity iscsi://host:port/iqn/lun
 *
 * Data moves in chunks of at most --chunk bytes (default 1 MiB); a write
 * whose input is not a whole number of blocks is refused before anything
 * is sent, so a short read of stdin never leaves a partial block behind. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "initiator/tpt_init_args.h"
#include "tool_iscsi.h"

#define DEFAULT_INITIATOR "iqn.2026-11.org.tptraid:tpt-iscsi-io"
#define DEFAULT_CHUNK (1u << 20)

static void usage(FILE *out)
{
	fprintf(out,
		"usage: tpt-iscsi-io [--initiator IQN] [--chunk BYTES] COMMAND URL ...\n"
		"\n"
		"  capacity URL               print block size and number of blocks\n"
		"  read URL LBA BLOCKS        write BLOCKS blocks from LBA to stdout\n"
		"  write URL LBA              write stdin (whole blocks) at LBA\n"
		"\n"
		"URL is iscsi://[user[%%password]@]host[:port]/target-iqn/lun.\n"
		"Exit status: 0 success, 1 I/O or SCSI error, 2 usage error.\n");
}

/* A decimal number (as dd reads its operands: 010 is ten, not eight),
 * with a k, m or g suffix (1024-based) where @suffix allows it: every
 * tool's sizes (tpt_init_parse_size()). */
static int parse_u64(const char *s, const char *what, bool suffix,
		     uint64_t *out)
{
	if ((suffix || strspn(s, "0123456789") == strlen(s)) &&
	    !tpt_init_parse_size(s, out))
		return 0;
	fprintf(stderr, "tpt-iscsi-io: invalid %s '%s'%s\n", what, s,
		suffix ? " (a decimal number of bytes, or with k, m or g)" :
		" (a decimal number)");
	return -1;
}

static int task_failed(struct iscsi_context *iscsi, struct scsi_task *task,
		       const char *what)
{
	if (!task) {
		fprintf(stderr, "tpt-iscsi-io: %s failed: %s\n", what,
			iscsi_get_error(iscsi));
		return 1;
	}
	if (task->status != SCSI_STATUS_GOOD) {
		fprintf(stderr, "tpt-iscsi-io: %s failed: status 0x%02x "
			"sense key 0x%x ASC/ASCQ 0x%04x: %s\n", what,
			task->status, task->sense.key, task->sense.ascq,
			iscsi_get_error(iscsi));
		scsi_free_scsi_task(task);
		return 1;
	}
	return 0;
}

static int check_range(const struct tool_lun *h, uint64_t lba,
		       uint64_t blocks)
{
	if (lba > h->nr_blocks || blocks > h->nr_blocks - lba) {
		fprintf(stderr, "tpt-iscsi-io: LBA %" PRIu64 " + %" PRIu64
			" blocks is beyond the LUN's %" PRIu64 " blocks\n",
			lba, blocks, h->nr_blocks);
		return -1;
	}
	return 0;
}

static int do_read(struct tool_lun *h, uint64_t lba, uint64_t blocks,
		   uint32_t chunk_blocks)
{
	while (blocks) {
		uint32_t n = blocks < chunk_blocks ? (uint32_t)blocks : chunk_blocks;
		struct scsi_task *task;

		task = iscsi_read16_sync(h->iscsi, h->lun, lba,
					 n * h->block_size, h->block_size,
					 0, 0, 0, 0, 0);
		if (task_failed(h->iscsi, task, "READ(16)"))
			return 1;
		if (task->datain.size != (int)(n * h->block_size) ||
		    fwrite(task->datain.data, 1, task->datain.size, stdout) !=
			    (size_t)task->datain.size) {
			fprintf(stderr, "tpt-iscsi-io: short read or write to stdout\n");
			scsi_free_scsi_task(task);
			return 1;
		}
		scsi_free_scsi_task(task);
		lba += n;
		blocks -= n;
	}
	return fflush(stdout) ? 1 : 0;
}

/* Read all of stdin first: a write must be refused whole if the input
 * is not a whole number of blocks or does not fit the LUN. */
static unsigned char *slurp_stdin(size_t *len)
{
	size_t cap = 1u << 20, used = 0;
	unsigned char *buf = malloc(cap), *bigger;
	size_t n;

	while (buf && (n = fread(buf + used, 1, cap - used, stdin)) > 0) {
		used += n;
		if (used == cap) {
			bigger = realloc(buf, cap * 2);
			if (!bigger) {
				free(buf);
				return NULL;
			}
			buf = bigger;
			cap *= 2;
		}
	}
	if (buf && ferror(stdin)) {
		free(buf);
		return NULL;
	}
	*len = used;
	return buf;
}

static int do_write(struct tool_lun *h, uint64_t lba, uint32_t chunk_blocks)
{
	size_t len, off = 0;
	unsigned char *data = slurp_stdin(&len);
	int ret = 1;

	if (!data) {
		fprintf(stderr, "tpt-iscsi-io: cannot read stdin\n");
		return 1;
	}
	if (len % h->block_size) {
		fprintf(stderr, "tpt-iscsi-io: input is %zu bytes, not a multiple "
			"of the %u-byte block size; nothing written\n",
			len, h->block_size);
		goto out;
	}
	if (check_range(h, lba, len / h->block_size))
		goto out;
	while (off < len) {
		size_t n = len - off;
		struct scsi_task *task;

		if (n > (size_t)chunk_blocks * h->block_size)
			n = (size_t)chunk_blocks * h->block_size;
		task = iscsi_write16_sync(h->iscsi, h->lun, lba, data + off,
					  n, h->block_size, 0, 0, 0, 0, 0);
		if (task_failed(h->iscsi, task, "WRITE(16)"))
			goto out;
		scsi_free_scsi_task(task);
		off += n;
		lba += n / h->block_size;
	}
	ret = 0;
out:
	free(data);
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "initiator", required_argument, NULL, 'i' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tool_iscsi_login how = {
		.prog = "tpt-iscsi-io",
		.initiator = DEFAULT_INITIATOR,
		.digest = ISCSI_HEADER_DIGEST_NONE_CRC32C,
		/* A lost session is an error to report, not a reason to
		 * spin. */
		.noautoreconnect = true,
	};
	const char *cmd;
	struct tool_lun h = { 0 };
	uint64_t chunk = DEFAULT_CHUNK, lba = 0, blocks = 0;
	uint32_t chunk_blocks;
	int c, ret = 2, nargs;

	while ((c = getopt_long(argc, argv, "i:c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			how.initiator = optarg;
			break;
		case 'c':
			if (parse_u64(optarg, "chunk size", true, &chunk))
				return 2;
			if (!chunk || chunk > (64u << 20)) {
				fprintf(stderr, "tpt-iscsi-io: --chunk must be 1..64 MiB\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	nargs = argc - optind;
	if (nargs < 2) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind];
	if (!strcmp(cmd, "capacity") && nargs == 2) {
		;
	} else if (!strcmp(cmd, "read") && nargs == 4) {
		if (parse_u64(argv[optind + 2], "LBA", false, &lba) ||
		    parse_u64(argv[optind + 3], "block count", false, &blocks))
			return 2;
	} else if (!strcmp(cmd, "write") && nargs == 3) {
		if (parse_u64(argv[optind + 2], "LBA", false, &lba))
			return 2;
	} else {
		fprintf(stderr, "tpt-iscsi-io: unknown command or wrong number "
			"of arguments for '%s'\n", cmd);
		usage(stderr);
		return 2;
	}

	if (tool_lun_open(&how, argv[optind + 1], &h)) {
		ret = 1;
		goto out;
	}
	chunk_blocks = chunk / h.block_size ? (uint32_t)(chunk / h.block_size) : 1;
	if (!strcmp(cmd, "capacity")) {
		printf("block_size %u\nblocks %" PRIu64 "\n", h.block_size,
		       h.nr_blocks);
		ret = 0;
	} else if (!strcmp(cmd, "read")) {
		ret = check_range(&h, lba, blocks) ? 1 :
			do_read(&h, lba, blocks, chunk_blocks);
	} else {
		ret = do_write(&h, lba, chunk_blocks);
	}
out:
	tool_lun_close(&h, true);
	return ret;
}
