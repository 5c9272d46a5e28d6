/* tpt-scrub: check the parity of every stripe of a RAID-5 or RAID-6
 * array, or that the copies of a RAID-1 array agree, by reading its
 * members directly.
 *
 *   tpt-scrub [--raid 1|5|6] [--unit BYTES] [--progress] URL0 ... URLn-1
 *
 * In RAID-5 the blocks at one member LBA of all members XOR to zero
 * whichever member holds the parity, and in RAID-1 they are all equal, so
 * the check needs the member order only to name a bad stripe.  RAID-6's
 * Q weights each data unit by its place in the stripe, so there the
 * member order and --unit must be the array's: the layout says which
 * member holds P, Q and each data unit (controller/raid6.c).  Run it on
 * a quiescent array: a write in flight leaves its stripe inconsistent
 * until WRITE NEW DATA completes on every member.  Members of a running
 * TPT array refuse plain reads to anyone but their controller unless
 * their LU has tpt_plain_io=read.
 * Exit status: 0 clean, 1 mismatches or I/O errors, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "scsi/tpt_parity.h"
#include "controller/array_spec.h"
#include "controller/member_sb.h"
#include "controller/raid_level.h"
#include "tool_iscsi.h"

#define MAX_MEMBERS 32
#define CHUNK (1u << 20)

struct member {
	struct tool_lun lu;
	uint8_t *buf;
};

/* Which unit of the stripe being read is the one wrong (RAID-6, mirrors
 * of 3 or more), from the syndromes of each run of its blocks that
 * disagrees (the level's check_locate, as the controller's check reads
 * them): a stripe names a position only if every such run names the same
 * one.  Named once the scan is past the stripe. */
#define LOCATE_CLEAN (-2)
struct locate {
	uint64_t stripe;
	int wrong;			/* LOCATE_CLEAN, -1 (none) or position */
	uint64_t named;
};

static void locate_flush(struct locate *l)
{
	if (l->wrong >= 0) {
		printf("wrong unit: stripe %" PRIu64 ": position %d's, the "
		       "others agree\n", l->stripe, l->wrong);
		l->named++;
	}
	l->wrong = LOCATE_CLEAN;
}

/* A run of @len bytes of @stripe with the syndromes @syn (RAID-6: SP and
 * SQ; a mirror: copy i+1 XOR copy 0), any of them not zero. */
static void locate_run(struct locate *l, const struct raid_level_ops *level,
		       const struct raid_geometry *g, uint64_t stripe,
		       const uint8_t *const *syn, uint64_t len)
{
	int wrong;

	if (stripe != l->stripe) {
		locate_flush(l);
		l->stripe = stripe;
	}
	wrong = level->check_locate(g, stripe, syn, len);
	l->wrong = l->wrong == LOCATE_CLEAN || l->wrong == wrong ? wrong : -1;
}

/* A mirror's block at @off that differs between copies: its syndromes
 * (copy i+1 XOR copy 0) into @syn_buf, (n-1) blocks, for locate_run(). */
static void mirror_locate(struct locate *l, const struct raid_level_ops *level,
			  const struct member *m, unsigned int n,
			  uint64_t stripe, uint32_t off, uint32_t bs,
			  uint8_t *syn_buf)
{
	const struct raid_geometry g = { .members = n };
	const uint8_t *syn[MAX_MEMBERS];
	unsigned int j;

	for (j = 1; j < n; j++) {
		uint8_t *s = syn_buf + (uint64_t)(j - 1) * bs;
		const void *pair[2] = { m[j].buf + off, m[0].buf + off };

		if (tpt_xor(s, pair, 2, bs))
			return;
		syn[j - 1] = s;
	}
	locate_run(l, level, &g, stripe, syn, bs);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: tpt-scrub [--raid 1|5|6] [--unit BYTES] [--progress] URL0 ... URLn-1\n"
		"\n"
		"Reads the members of a RAID-5 array (--raid 5, the default) and checks\n"
		"that every stripe's blocks XOR to zero, of a RAID-6 array (--raid 6)\n"
		"and checks every stripe's P and Q against its data, or of a RAID-1\n"
		"array (--raid 1) and checks that every member holds the same blocks;\n"
		"RAID-6 and mirrors of 3 or more name the one wrong unit of a stripe\n"
		"where one alone is ('wrong unit: stripe S: position P's').\n"
		"--unit (default 65536) names stripes in reports; RAID-6 needs the\n"
		"array's unit and its members in the array's order.  Members of a\n"
		"running TPT array must allow plain reads (tgtadm ... --params\n"
		"tpt_plain_io=read on their LU).  Exit: 0 clean, 1 mismatch or error,\n"
		"2 usage.\n");
}

static int member_open(struct member *m, const char *url_text)
{
	const struct tool_iscsi_login how = {
		.prog = "tpt-scrub",
		.initiator = "iqn.2026-11.org.tptraid:tpt-scrub",
		/* libiscsi's default, which we have always used. */
		.digest = ISCSI_HEADER_DIGEST_NONE_CRC32C,
		/* A member's lost session fails the scrub, rather than
		 * being logged in again unnoticed. */
		.noautoreconnect = true,
		/* Name the member that failed: several may share a portal. */
		.name_url = true,
	};

	if (tool_lun_open(&how, url_text, &m->lu))
		return -1;
	m->buf = aligned_alloc(TPT_PARITY_ALIGN, CHUNK);
	return m->buf ? 0 : -1;
}

static int member_read(struct member *m, uint64_t lba, uint32_t bytes)
{
	struct scsi_task *task;
	int ok;

	task = iscsi_read16_sync(m->lu.iscsi, m->lu.lun, lba, bytes,
				 m->lu.block_size, 0, 0, 0, 0, 0);
	ok = task && task->status == SCSI_STATUS_GOOD &&
	     task->datain.size == (int)bytes;
	if (ok)
		memcpy(m->buf, task->datain.data, bytes);
	else if (task && task->status == SCSI_STATUS_CHECK_CONDITION &&
		 task->sense.key == SCSI_SENSE_ILLEGAL_REQUEST &&
		 task->sense.ascq == 0x2002)
		fprintf(stderr, "tpt-scrub: READ at %" PRIu64 " refused "
			"(ACCESS DENIED): the member belongs to a running TPT "
			"array, whose members serve plain reads only where the "
			"operator allows them (tgtadm --op update --mode "
			"logicalunit ... --params tpt_plain_io=read)\n", lba);
	else
		fprintf(stderr, "tpt-scrub: READ at %" PRIu64 " failed: %s\n",
			lba, iscsi_get_error(m->lu.iscsi));
	if (task)
		scsi_free_scsi_task(task);
	return ok ? 0 : -1;
}

/*
 * RAID-6: into @sum, for the @nblk blocks read at member LBA @lba, P XOR
 * the data and Q XOR the data weighted as Q weights them, ORed together
 * (zero only where both agree); stripe by stripe, as each has its own
 * P and Q members and data order; each run's verdict into @loc.  0, or
 * -1 when ISA-L refuses.
 */
static int raid6_syndromes(const struct raid_level_ops *level,
			   uint32_t unit_blocks, unsigned int n,
			   const struct member *m, uint64_t lba, uint32_t nblk,
			   uint32_t bs, uint8_t *sum, struct locate *loc)
{
	static uint8_t q_syn[CHUNK] __attribute__((aligned(TPT_PARITY_ALIGN)));
	const struct raid_geometry g = { .members = n,
					 .unit_blocks = unit_blocks,
					 .member_blocks = UINT64_MAX / n /
							  unit_blocks *
							  unit_blocks };
	const uint8_t *syn[2];
	uint32_t at, len, i, d;

	for (at = 0; at < nblk; at += len) {
		uint64_t stripe = (lba + at) / unit_blocks;
		const void *src[MAX_MEMBERS];
		uint8_t exp[MAX_MEMBERS];
		unsigned int p = level->parity_member(&g, stripe, 0);
		unsigned int q = level->parity_member(&g, stripe, 1);

		len = unit_blocks - (uint32_t)((lba + at) % unit_blocks);
		if (len > nblk - at)
			len = nblk - at;
		src[0] = m[p].buf + (uint64_t)at * bs;
		exp[0] = 0;
		for (d = 0; d < n - 2; d++) {
			src[d + 1] = m[level->data_member(&g, stripe, d)].buf +
				     (uint64_t)at * bs;
			exp[d + 1] = 0;
		}
		if (tpt_gf_fold(sum + (uint64_t)at * bs, src, exp, n - 1,
				(uint64_t)len * bs, false))
			return -1;
		src[0] = m[q].buf + (uint64_t)at * bs;
		for (d = 0; d < n - 2; d++)
			exp[d + 1] = (uint8_t)d;
		if (tpt_gf_fold(q_syn, src, exp, n - 1, (uint64_t)len * bs,
				false))
			return -1;
		syn[0] = sum + (uint64_t)at * bs;
		syn[1] = q_syn;
		if (!raid_unit_zero(syn[0], (uint64_t)len * bs) ||
		    !raid_unit_zero(q_syn, (uint64_t)len * bs))
			locate_run(loc, level, &g, stripe, syn,
				   (uint64_t)len * bs);
		for (i = 0; i < len * bs; i++)
			sum[(uint64_t)at * bs + i] |= q_syn[i];
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "raid", required_argument, NULL, 'r' },
		{ "unit", required_argument, NULL, 'u' },
		{ "progress", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct member m[MAX_MEMBERS] = { 0 };
	uint64_t blocks, lba, mismatches = 0, last_bad = UINT64_MAX;
	struct locate loc = { .stripe = UINT64_MAX, .wrong = LOCATE_CLEAN };
	uint32_t unit = 65536;
	char err[256];
	const void *srcs[MAX_MEMBERS];
	uint8_t *sum;
	const struct raid_level_ops *level = &raid5_level;
	bool progress = false, copies = false;
	int c, n, i, ret = 1;
	uint32_t bs;

	while ((c = getopt_long(argc, argv, "r:u:ph", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (strcmp(optarg, "1") && strcmp(optarg, "5") &&
			    strcmp(optarg, "6")) {
				fprintf(stderr, "tpt-scrub: --raid=%s: RAID "
					"levels 1, 5 and 6 are supported\n",
					optarg);
				return 2;
			}
			level = raid_level_find((unsigned int)(optarg[0] - '0'));
			copies = level->copies;
			break;
		case 'u':
			/* As the array definition's unit=. */
			if (tpt_spec_unit(optarg, &unit, err, sizeof(err))) {
				fprintf(stderr, "tpt-scrub: --%s\n", err);
				return 2;
			}
			break;
		case 'p':
			progress = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	n = argc - optind;
	if (n < (int)level->min_members || n > MAX_MEMBERS) {
		fprintf(stderr, "tpt-scrub: %d member URLs: a RAID-%u array "
			"has %u to %d\n", n, level->level, level->min_members,
			MAX_MEMBERS);
		usage(stderr);
		return 2;
	}
	for (i = 0; i < n; i++)
		if (member_open(&m[i], argv[optind + i]))
			goto out;
	bs = m[0].lu.block_size;
	blocks = m[0].lu.nr_blocks;
	for (i = 1; i < n; i++) {
		if (m[i].lu.block_size != bs) {
			fprintf(stderr, "tpt-scrub: members disagree on the "
				"block size\n");
			goto out;
		}
		if (m[i].lu.nr_blocks < blocks)
			blocks = m[i].lu.nr_blocks;
	}
	if (!bs || unit % bs) {
		fprintf(stderr, "tpt-scrub: --unit %" PRIu32 " is not a "
			"multiple of the members' %u-byte blocks\n", unit, bs);
		ret = 2;
		goto out;
	}
	/* The array uses whole stripe units of the smallest member, short
	 * of the metadata each keeps at its end (controller/member_sb.h). */
	blocks = tpt_member_sb_lba(blocks, bs);
	blocks -= blocks % (unit / bs);
	sum = aligned_alloc(TPT_PARITY_ALIGN, CHUNK);
	if (!sum)
		goto out;
	for (lba = 0; lba < blocks;) {
		uint32_t nblk = CHUNK / bs, off;

		if (nblk > blocks - lba)
			nblk = blocks - lba;
		for (i = 0; i < n; i++) {
			if (member_read(&m[i], lba, nblk * bs))
				goto out_sum;
			srcs[i] = m[i].buf;
		}
		if (level == &raid6_level ?
		    raid6_syndromes(level, unit / bs, (unsigned int)n, m, lba,
				    nblk, bs, sum, &loc) :
		    !copies && tpt_xor(sum, srcs, n, nblk * bs)) {
			fprintf(stderr, "tpt-scrub: XOR failed\n");
			goto out_sum;
		}
		for (off = 0; off < nblk * bs; off += bs) {
			uint64_t stripe = (lba * bs + off) / unit;
			bool bad = false;
			uint32_t j;

			for (j = 1; copies && j < (uint32_t)n && !bad; j++)
				bad = memcmp(m[j].buf + off, m[0].buf + off, bs);
			for (j = 0; !copies && j < bs && !bad; j++)
				bad = sum[off + j];
			/* Every block that differs votes, not only a
			 * stripe's first; a mirror has no use for sum
			 * but as room for the syndromes. */
			if (bad && copies && n >= 3)
				mirror_locate(&loc, level, m, (unsigned int)n,
					      stripe, off, bs, sum);
			if (!bad || stripe == last_bad)
				continue;
			last_bad = stripe;
			mismatches++;
			printf("mismatch: stripe %" PRIu64 " (member LBA %"
			       PRIu64 ")\n", stripe, lba + off / bs);
		}
		lba += nblk;
		if (progress)
			fprintf(stderr, "\rtpt-scrub: %" PRIu64 "%%",
				lba * 100 / blocks);
	}
	if (progress)
		fprintf(stderr, "\n");
	locate_flush(&loc);
	if (level->check_locate && (!copies || n >= 3))
		printf("scrub: %" PRIu64 " stripes checked, %" PRIu64
		       " mismatches, %" PRIu64 " with one wrong unit named\n",
		       blocks * bs / unit, mismatches, loc.named);
	else
		printf("scrub: %" PRIu64 " stripes checked, %" PRIu64
		       " mismatches\n", blocks * bs / unit, mismatches);
	ret = mismatches ? 1 : 0;
out_sum:
	free(sum);
out:
	for (i = 0; i < n; i++) {
		tool_lun_close(&m[i].lu, true);
		free(m[i].buf);
	}
	return ret;
}
