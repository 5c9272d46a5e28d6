/*
 * What the controller writes about an array and reads back after a
 * restart: the member superblock (controller/member_sb.c), the region
 * record (controller/intent_file.c) and the state file
 * (controller/state_file.c).  Byte layouts as their comments give them,
 * round trips, and refusal of anything damaged.
 */
#include "controller/intent_file.h"
#include "controller/member_sb.h"
#include "controller/state_file.h"
#include "scsi/tpt_cdb.h"
#include "test/unit/unit.h"

#include <isa-l/crc.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void superblock_layout(void)
{
	struct tpt_member_sb sb = {
		.array_id = 0x0123456789abcdefULL, .event = 42, .position = 3,
		.nr_members = 5, .raid_level = 5, .unit_bytes = 65536,
		.member_blocks = 1000448, .block_size = 512,
	}, back;
	static uint8_t buf[TPT_SB_LEN];

	static const uint8_t key[TPT_ARRAY_KEY_LEN] = { 1, 2, 3, 4 };
	uint8_t check[TPT_SB_KEY_CHECK_LEN];

	CHECK(!tpt_member_sb_binds(&sb));
	tpt_member_sb_key_check(sb.array_id, key, sb.key_check);
	CHECK(tpt_member_sb_binds(&sb));
	CHECK_EQ(tpt_member_sb_encode(&sb, buf, sizeof(buf)), TPT_SB_LEN);
	CHECK_MEM(buf, "TPTRAIDM", 8);
	CHECK_EQ(tpt_get_be(&buf[8], 4), 2);
	CHECK_EQ(tpt_get_be(&buf[12], 4), 96);
	CHECK_EQ(tpt_get_be(&buf[16], 8), 0x0123456789abcdefULL);
	CHECK_EQ(tpt_get_be(&buf[24], 8), 42);
	CHECK_EQ(tpt_get_be(&buf[32], 4), 3);
	CHECK_EQ(tpt_get_be(&buf[36], 4), 5);
	CHECK_EQ(tpt_get_be(&buf[44], 4), 65536);
	CHECK_EQ(tpt_get_be(&buf[48], 8), 1000448);
	CHECK_EQ(tpt_get_be(&buf[56], 4), 512);
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), 0);
	/* Field by field: the struct's tail padding is never written. */
	CHECK_EQ(back.array_id, sb.array_id);
	CHECK_EQ(back.event, sb.event);
	CHECK_EQ(back.position, sb.position);
	CHECK_EQ(back.nr_members, sb.nr_members);
	CHECK_EQ(back.raid_level, sb.raid_level);
	CHECK_EQ(back.unit_bytes, sb.unit_bytes);
	CHECK_EQ(back.member_blocks, sb.member_blocks);
	CHECK_EQ(back.block_size, sb.block_size);
	CHECK_MEM(back.key_check, sb.key_check, TPT_SB_KEY_CHECK_LEN);
	CHECK_MEM(&buf[60], sb.key_check, TPT_SB_KEY_CHECK_LEN);

	/* The check tells keys and arrays apart, and is not the key. */
	tpt_member_sb_key_check(sb.array_id, key, check);
	CHECK_MEM(check, sb.key_check, sizeof(check));
	tpt_member_sb_key_check(sb.array_id + 1, key, check);
	CHECK(memcmp(check, sb.key_check, sizeof(check)));
	{
		uint8_t other[TPT_ARRAY_KEY_LEN] = { 1, 2, 3, 5 };

		tpt_member_sb_key_check(sb.array_id, other, check);
		CHECK(memcmp(check, sb.key_check, sizeof(check)));
	}

	/* A flipped bit anywhere, in the key check too, a reserved byte
	 * set: damaged. */
	buf[25] ^= 1;
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), -EINVAL);
	buf[25] ^= 1;
	buf[70] ^= 1;
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), -EINVAL);
	buf[70] ^= 1;
	buf[4000] = 1;
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), -EINVAL);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), -ENOENT);
	CHECK_EQ(tpt_member_sb_decode(buf, 100, &back), -EINVAL);
	sb.array_id = 0;
	CHECK_EQ(tpt_member_sb_encode(&sb, buf, sizeof(buf)), -EINVAL);
	sb.array_id = 1;
	sb.position = 5;	/* beyond the members */
	tpt_member_sb_encode(&sb, buf, sizeof(buf));
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), -EINVAL);
	sb.position = TPT_SB_SPARE;
	tpt_member_sb_encode(&sb, buf, sizeof(buf));
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), 0);

	/* Version 1 (no key check, the CRC of bytes 0-59 at 60) is still
	 * read, as binding nothing. */
	sb.position = 2;
	tpt_member_sb_encode(&sb, buf, sizeof(buf));
	tpt_put_be(&buf[8], 1, 4);
	tpt_put_be(&buf[12], 64, 4);
	memset(&buf[60], 0, 36);
	tpt_put_be(&buf[60], crc32_iscsi(buf, 60, 0xffffffffu), 4);
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), 0);
	CHECK_EQ(back.position, 2);
	CHECK_EQ(back.array_id, sb.array_id);
	CHECK(!tpt_member_sb_binds(&back));
	buf[70] = 1;		/* beyond version 1's fields */
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), -EINVAL);
	buf[70] = 0;
	tpt_put_be(&buf[12], 96, 4);	/* version 1 with version 2's length */
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), -EINVAL);
	tpt_put_be(&buf[8], 3, 4);
	CHECK_EQ(tpt_member_sb_decode(buf, sizeof(buf), &back), -EINVAL);

	/* Where it lives: the last MiB of the member. */
	CHECK_EQ(tpt_member_sb_lba(4096, 512), 2048);
	CHECK_EQ(tpt_member_sb_lba(1024, 4096), 768);
	CHECK_EQ(tpt_member_sb_lba(2048, 512), 0);
	CHECK_EQ(tpt_member_sb_lba(4096, 3000), 0);
}

static void intent_round_trip(void)
{
	uint8_t intent[3], missed[3][3], got_i[3], got_m[3][3];
	struct tpt_intent_record r = {
		.seq = 7, .array_id = 99, .nr_regions = 20,
		.region_stripes = 64, .nr_positions = 3,
		.missing_since = { 0, 5, 0 },
		.intent = intent,
	}, back = {
		.nr_regions = 20, .region_stripes = 64, .nr_positions = 3,
		.intent = got_i,
	};
	size_t len = tpt_intent_copy_len(20, 3, TPT_INTENT_VERSION);
	uint8_t *buf = calloc(1, len);
	unsigned int p;

	CHECK_EQ(len, 4096);
	memset(intent, 0, sizeof(intent));
	memset(missed, 0, sizeof(missed));
	intent[0] = 0x81;
	intent[2] = 0x08;	/* region 19 */
	missed[1][1] = 0x40;
	for (p = 0; p < 3; p++) {
		r.missed[p] = missed[p];
		back.missed[p] = got_m[p];
	}
	CHECK_EQ(tpt_intent_encode(&r, buf, len), (int)len);
	CHECK_MEM(buf, "TPTRAIDI", 8);
	CHECK_EQ(tpt_get_be(&buf[16], 8), 7);
	CHECK_EQ(tpt_get_be(&buf[48 + 8], 8), 5);
	CHECK_EQ(buf[48 + 24], 0x81);
	CHECK_EQ(tpt_intent_decode(buf, len, &back), 0);
	CHECK_EQ(back.seq, 7);
	CHECK_EQ(back.array_id, 99);
	CHECK_EQ(back.missing_since[1], 5);
	CHECK_MEM(got_i, intent, 3);
	CHECK_MEM(got_m[1], missed[1], 3);

	/* Torn, or for another geometry: refused. */
	buf[100] ^= 0x10;
	CHECK_EQ(tpt_intent_decode(buf, len, &back), -EINVAL);
	buf[100] ^= 0x10;
	back.nr_regions = 21;
	CHECK_EQ(tpt_intent_decode(buf, len, &back), -EINVAL);
	back.nr_regions = 20;
	/* A bit past the last region. */
	intent[2] = 0x10;
	tpt_intent_encode(&r, buf, len);
	CHECK_EQ(tpt_intent_decode(buf, len, &back), -EINVAL);
	memset(buf, 0, len);
	CHECK_EQ(tpt_intent_decode(buf, len, &back), -ENOENT);
	CHECK_EQ(tpt_intent_copy_len(0, 3, 2), 0);
	CHECK_EQ(tpt_intent_copy_len(10, 0, 2), 0);
	CHECK_EQ(tpt_intent_copy_len(10, 33, 2), 0);
	CHECK_EQ(tpt_intent_copy_len(10, 3, 0), 0);
	CHECK_EQ(tpt_intent_copy_len(10, 3, 3), 0);
	free(buf);
}

/* A copy's CRC32C made right after a test changed its bytes. */
static void intent_seal(uint8_t *buf, size_t len)
{
	memset(&buf[44], 0, 4);
	tpt_put_be(&buf[44], crc32_iscsi(buf, (int)len, 0xffffffffu), 4);
}

/* The unwritten bits: kept only with their intent bits, after the
 * per-position maps; a version 1 copy (none) still read. */
static void intent_unwritten(void)
{
	uint8_t intent[2] = { 0x0f, 0x01 }, unwritten[2] = { 0x0a, 0x01 };
	uint8_t got_i[2], got_u[2] = { 0xff, 0xff };
	struct tpt_intent_record r = {
		.seq = 3, .array_id = 5, .nr_regions = 9,
		.region_stripes = 64, .nr_positions = 2,
		.intent = intent, .unwritten = unwritten,
	}, back = {
		.nr_regions = 9, .region_stripes = 64, .nr_positions = 2,
		.intent = got_i, .unwritten = got_u,
	};
	/* Where the unwritten bits start: header, 2 x MISSING SINCE, the
	 * intent bits and 2 positions' missed bits. */
	size_t len = tpt_intent_copy_len(9, 2, 2), at = 48 + 16 + 2 + 2 * 2;
	uint8_t *buf = calloc(1, len);

	CHECK_EQ(len, tpt_intent_copy_len(9, 2, 1));
	CHECK_EQ(tpt_intent_encode(&r, buf, len), (int)len);
	CHECK_EQ(tpt_get_be(&buf[8], 4), 2);
	CHECK_EQ(buf[at], 0x0a);
	CHECK_EQ(buf[at + 1], 0x01);
	CHECK_EQ(tpt_intent_decode(buf, len, &back), 0);
	CHECK_EQ(back.version, 2);
	CHECK_MEM(got_u, unwritten, 2);
	/* Not wanted: decoded all the same. */
	back.unwritten = NULL;
	CHECK_EQ(tpt_intent_decode(buf, len, &back), 0);
	back.unwritten = got_u;

	/* An unwritten bit without its intent bit: never a resync's. */
	buf[at] |= 0x10;
	intent_seal(buf, len);
	CHECK_EQ(tpt_intent_decode(buf, len, &back), -EINVAL);
	/* Never written so: kept only with its intent bit. */
	unwritten[0] = 0x1a;
	CHECK_EQ(tpt_intent_encode(&r, buf, len), (int)len);
	CHECK_EQ(buf[at], 0x0a);
	unwritten[0] = 0x0a;

	/* Version 1: the bytes after the missed maps are zero; no region
	 * is unwritten.  Such bytes set there are a damaged copy. */
	CHECK_EQ(tpt_intent_encode(&r, buf, len), (int)len);
	tpt_put_be(&buf[8], 1, 4);
	intent_seal(buf, len);
	CHECK_EQ(tpt_intent_decode(buf, len, &back), -EINVAL);
	buf[at] = buf[at + 1] = 0;
	intent_seal(buf, len);
	CHECK_EQ(tpt_intent_decode(buf, len, &back), 0);
	CHECK_EQ(back.version, 1);
	CHECK_EQ(got_u[0] | got_u[1], 0);
	CHECK_MEM(got_i, intent, 2);
	/* A version this code does not know. */
	tpt_put_be(&buf[8], 3, 4);
	intent_seal(buf, len);
	CHECK_EQ(tpt_intent_decode(buf, len, &back), -EINVAL);
	CHECK_EQ(tpt_intent_decode(buf, 40, &back), -EINVAL);
	free(buf);
}

static const char good_state[] =
	"# comment\n"
	"tptraid-state 1\n"
	"array 65c854e8e9b3c6ab\n"
	"key 00112233445566778899aabbccddeeff\n"
	"spec raid=5;unit=64k;member=iscsi://h/iqn.x:a/1\n"
	"box 0 iscsi://h:3261/iqn.x:a/1\n"
	"box 1 iscsi://h:3262/iqn.x:b/1\n"
	"box 2 iscsi://h:3263/iqn.x:c/1\n"
	"box 3 iscsi://h:3264/iqn.x:d/1\n"
	"box 4 removed\n"
	"position 0 0\n"
	"position 1 3\n"
	"position 2 -1\n"
	"held 2\n"
	"held 1\n"
	"rebuild_rate 0\n"
	"fail_timeout 12\n"
	"check 1024 3\n"
	"check_located 1 0 2 0\n"
	"lost 1 7\n"
	"lost 2 3\n"
	"lost 2 18446744073709551615\n"
	"creating yes\n";

static void expect_refused(const char *text, const char *why)
{
	struct tpt_state *st = malloc(sizeof(*st));
	char err[256] = "";

	CHECK_EQ(tpt_state_parse(text, strlen(text), st, err, sizeof(err)),
		 -EINVAL);
	if (!strstr(err, why)) {
		fprintf(stderr, "expected \"%s\" in \"%s\"\n", why, err);
		unit_failures++;
	}
	free(st);
}

static void state_file(void)
{
	struct tpt_state *st = malloc(sizeof(*st)), *back = malloc(sizeof(*back));
	char err[256], *buf = malloc(1 << 16);
	int n;

	CHECK_EQ(tpt_state_parse(good_state, strlen(good_state), st, err,
				 sizeof(err)), 0);
	CHECK_EQ(st->array_id, 0x65c854e8e9b3c6abULL);
	CHECK_EQ(st->nr_boxes, 5);
	CHECK(!st->box[4][0] && !st->held[4]);
	CHECK_EQ(st->nr_positions, 3);
	CHECK_EQ(st->position[1], 3);
	CHECK_EQ(st->position[2], -1);
	CHECK(!strcmp(st->box[3], "iscsi://h:3264/iqn.x:d/1"));
	CHECK_EQ(st->key[0], 0x00);
	CHECK_EQ(st->key[15], 0xff);
	CHECK(st->has_rebuild_rate && st->rebuild_rate == 0);
	CHECK(st->has_fail_timeout && st->fail_timeout == 12);
	CHECK(st->has_check && st->check_from == 1024 &&
	      st->check_mismatches == 3);
	n = tpt_state_format(st, buf, 1 << 16);
	CHECK(n > 0);
	CHECK(strstr(buf, "\ncheck 1024 3\n") != NULL);
	CHECK(st->creating && strstr(buf, "\ncreating yes\n") != NULL);
	CHECK(st->nr_check_located == 3 && st->check_located[1] == 2 &&
	      st->check_located_kept == 1);
	CHECK(strstr(buf, "\ncheck_located 1 0 2 0\n") != NULL);
	CHECK(strstr(buf, "\nkey 00112233445566778899aabbccddeeff\n") != NULL);
	CHECK(st->nr_lost == 3 && st->lost[0].position == 1 &&
	      st->lost[0].stripe == 7 && st->lost[2].stripe == UINT64_MAX);
	CHECK(strstr(buf, "\nlost 1 7\nlost 2 3\nlost 2 18446744073709551615\n"));
	CHECK(!st->held[0] && st->held[1] && st->held[2] && !st->held[3]);
	CHECK(strstr(buf, "\nposition 2 -1\nheld 1\nheld 2\n"));
	CHECK(strstr(buf, "\nbox 3 iscsi://h:3264/iqn.x:d/1\nbox 4 removed\n"));
	CHECK_EQ(tpt_state_parse(buf, (size_t)n, back, err, sizeof(err)), 0);
	CHECK_MEM(back, st, sizeof(*st));
	CHECK_EQ(tpt_state_format(st, buf, 20), -ENOSPC);
	/* Stripes the check could not read: a third value, only when any. */
	CHECK_EQ(st->check_unreadable, 0);
	st->check_unreadable = 2;
	n = tpt_state_format(st, buf, 1 << 16);
	CHECK(n > 0 && strstr(buf, "\ncheck 1024 3 2\n") != NULL);
	CHECK_EQ(tpt_state_parse(buf, (size_t)n, back, err, sizeof(err)), 0);
	CHECK_MEM(back, st, sizeof(*st));
	st->check_unreadable = 1022;
	CHECK_EQ(tpt_state_format(st, buf, 1 << 16), -EINVAL);

	expect_refused("array 0000000000000001\n", "line 1: not a tptraid");
	expect_refused("tptraid-state 2\n", "tptraid-state 1");
	expect_refused("tptraid-state 1\narray 12\n", "line 2: array");
	expect_refused("tptraid-state 1\narray 0000000000000000\n", "array");
	expect_refused("tptraid-state 1\narray 0000000000000001\nspec x\n"
		       "box 1 iscsi://h/iqn.x:a/1\n", "line 4: box 1: ids");
	expect_refused("tptraid-state 1\narray 0000000000000001\nspec x\n"
		       "box 0 http://h/\n", "line 4: box");
	expect_refused("tptraid-state 1\narray 0000000000000001\nspec x\n"
		       "box 0 iscsi://h/iqn.x:a b/1\n",
		       "line 4: box 0: one URL, without spaces");
	expect_refused("tptraid-state 1\narray 0000000000000001\nspec x\n"
		       "box 0 iscsi://h/iqn.x:a/1\nposition 0 1\n",
		       "line 5: position 0: box 1");
	expect_refused("tptraid-state 1\narray 0000000000000001\nspec x\n"
		       "box 0 iscsi://h/iqn.x:a/1\nposition 0 0\n"
		       "position 1 0\n", "serves two positions");
	expect_refused("tptraid-state 1\narray 0000000000000001\nspec x\n"
		       "box 0 iscsi://h/iqn.x:a/1\n", "no box or position");
	expect_refused("tptraid-state 1\nfrob 1\n", "line 2: frob: unknown");
	expect_refused("tptraid-state 1\nkey 00\n", "line 2: key");
	expect_refused("tptraid-state 1\nkey 0000000000000000000000000000"
		       "0000\n", "line 2: key");
	expect_refused("tptraid-state 1\nkey 00112233445566778899AABBCCDDEE"
		       "FF\n", "line 2: key");
	/* A file from before keys existed still parses, without one. */
	{
		static const char no_key[] = "tptraid-state 1\n"
			"array 0000000000000001\nspec x\n"
			"box 0 iscsi://h/iqn.x:a/1\nposition 0 0\n";
		static const uint8_t zero[TPT_STATE_KEY_LEN];

		CHECK_EQ(tpt_state_parse(no_key, strlen(no_key), st, err,
					 sizeof(err)), 0);
		CHECK_MEM(st->key, zero, sizeof(zero));
	}
	expect_refused("tptraid-state 1\narray 0000000000000001\n",
		       "spec lines are required");
	expect_refused("tptraid-state 1\nfail_timeout 0\n",
		       "line 2: fail_timeout=0: expected 1..");
	expect_refused("tptraid-state 1\nrebuild_rate -1\n",
		       "line 2: rebuild_rate=-1: expected 0");
	expect_refused("tptraid-state 1\nrebuild_rate 5\nrebuild_rate 5\n",
		       "line 3: rebuild_rate: at most once");
	expect_refused("tptraid-state 1\ncheck 1024\n",
		       "line 2: check: expected two values");
	expect_refused("tptraid-state 1\ncheck 3 4\n",
		       "line 2: check: at most once, FROM, MISMATCHES and "
		       "optionally UNREADABLE");
	expect_refused("tptraid-state 1\ncheck 5 3 3\n",
		       "line 2: check: at most once, FROM, MISMATCHES");
	expect_refused("tptraid-state 1\ncheck 5 0 x\n", "line 2: check");
	expect_refused("tptraid-state 1\ncheck 5 0 1 2\n", "line 2: check");
	expect_refused("tptraid-state 1\ncheck 5 0 \n", "line 2: check");
	expect_refused("tptraid-state 1\ncheck 0x10 0\n", "line 2: check");
	expect_refused("tptraid-state 1\ncheck 5 0\ncheck 5 0\n",
		       "line 3: check: at most once");
	expect_refused("tptraid-state 1\ncheck_located\n",
		       "line 2: expected KEY VALUE");
	expect_refused("tptraid-state 1\ncheck_located x 1\n",
		       "line 2: check_located: at most once");
	expect_refused("tptraid-state 1\ncheck_located 0 1\ncheck_located 0 1\n",
		       "line 3: check_located: at most once");
	expect_refused("tptraid-state 1\ncheck_located 0 1 -2\n",
		       "line 2: check_located: at most 32 counts, decimal");
	{
		/* Only with a check, a count per position, no more located
		 * than mismatched, KEPT no more than located. */
		static const char *const bad[] = {
			"check_located 0 1\n",
			"check 9 3\ncheck_located 0 1 1\n",
			"check 9 3\ncheck_located 0 1 2 1\n",
			"check 9 3\ncheck_located 2 1 0 0\n",
		};
		char text[512];
		unsigned int i;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			snprintf(text, sizeof(text), "tptraid-state 1\n"
				 "array 0000000000000001\nspec x\n"
				 "box 0 iscsi://h/iqn.x:a/1\nposition 0 0\n"
				 "position 1 -1\nposition 2 -1\n%s", bad[i]);
			expect_refused(text, "check_located: only with check");
		}
	}
	expect_refused("tptraid-state 1\nlost 1\n",
		       "line 2: lost: expected two values");
	expect_refused("tptraid-state 1\nlost 1 x\n", "line 2: lost: POSITION");
	expect_refused("tptraid-state 1\nlost 32 1\n", "line 2: lost: POSITION");
	expect_refused("tptraid-state 1\nlost 1 5\nlost 1 5\n",
		       "line 3: lost: POSITION STRIPE (decimal), in ascending");
	expect_refused("tptraid-state 1\nlost 1 5\nlost 0 9\n",
		       "line 3: lost: POSITION");
	expect_refused("tptraid-state 1\narray 0000000000000001\nspec x\n"
		       "box 0 iscsi://h/iqn.x:a/1\nposition 0 0\nlost 1 0\n",
		       "lost: position 1 is not listed");
	{
		/* At most TPT_STATE_LOST_MAX, and the format refuses what
		 * would not parse back. */
		char *text = malloc(64 * (TPT_STATE_LOST_MAX + 2));
		size_t at = 0;
		unsigned int i;

		at += (size_t)sprintf(text, "tptraid-state 1\n");
		for (i = 0; i <= TPT_STATE_LOST_MAX; i++)
			at += (size_t)sprintf(text + at, "lost 0 %u\n", i);
		expect_refused(text, "line 514: lost: POSITION STRIPE");
		free(text);
		CHECK_EQ(tpt_state_parse(good_state, strlen(good_state), st,
					 err, sizeof(err)), 0);
		st->lost[1].stripe = 7;
		st->lost[1].position = 1;
		CHECK_EQ(tpt_state_format(st, buf, 1 << 16), -EINVAL);
		st->lost[1].position = 3;
		CHECK_EQ(tpt_state_format(st, buf, 1 << 16), -EINVAL);
	}
	expect_refused("tptraid-state 1\nheld 0\n",
		       "line 2: held 0: a box listed before, not removed, "
		       "at most once");
	expect_refused("tptraid-state 1\nbox 0 iscsi://h/iqn.x:a/1\nheld 0\n"
		       "held 0\n", "line 4: held 0: a box listed before");
	expect_refused("tptraid-state 1\nbox 0 iscsi://h/iqn.x:a/1\nheld x\n",
		       "line 3: held x: a box listed before");
	/* A removed id serves nothing and is not held. */
	expect_refused("tptraid-state 1\nbox 0 removed\nheld 0\n",
		       "line 3: held 0: a box listed before, not removed");
	expect_refused("tptraid-state 1\nbox 0 iscsi://h/iqn.x:a/1\n"
		       "box 1 removed\nposition 0 1\n",
		       "line 4: position 0: box 1 is not listed before, or "
		       "removed");
	CHECK_EQ(tpt_state_parse(good_state, strlen(good_state), st, err,
				 sizeof(err)), 0);
	st->held[4] = true;
	CHECK_EQ(tpt_state_format(st, buf, 1 << 16), -EINVAL);
	{
		/* A replace under way: a spare into a position that has a
		 * box. */
		static const char head[] =
			"tptraid-state 1\narray 65c854e8e9b3c6ab\n"
			"spec raid=5;unit=64k;member=iscsi://h/iqn.x:a/1\n"
			"box 0 iscsi://h:3261/iqn.x:a/1\n"
			"box 1 iscsi://h:3262/iqn.x:b/1\n"
			"box 2 iscsi://h:3263/iqn.x:c/1\n"
			"position 0 0\nposition 1 -1\n";
		char text[512];

		snprintf(text, sizeof(text), "%sreplace 0 2\n", head);
		CHECK_EQ(tpt_state_parse(text, strlen(text), st, err,
					 sizeof(err)), 0);
		CHECK(st->has_replace && st->replace_position == 0 &&
		      st->replace_box == 2);
		n = tpt_state_format(st, buf, 1 << 16);
		CHECK(n > 0 && strstr(buf, "\nposition 1 -1\nreplace 0 2\n"));
		CHECK_EQ(tpt_state_parse(buf, (size_t)n, back, err,
					 sizeof(err)), 0);
		CHECK_MEM(back, st, sizeof(*st));
		st->replace_box = 0;	/* serves position 0 */
		CHECK_EQ(tpt_state_format(st, buf, 1 << 16), -EINVAL);
		snprintf(text, sizeof(text), "%sreplace 0 0\n", head);
		expect_refused(text, "line 9: replace: position 0 with a box, "
			       "by a spare that is not held");
		snprintf(text, sizeof(text), "%sreplace 1 2\n", head);
		expect_refused(text, "line 9: replace: position 1 with a box");
		snprintf(text, sizeof(text), "%sreplace 2 2\n", head);
		expect_refused(text, "line 9: replace: position 2 with a box");
		snprintf(text, sizeof(text), "%sreplace 0 2\nheld 2\n", head);
		expect_refused(text, "line 10: replace: position 0 with a box, "
			       "by a spare that is not held");
		snprintf(text, sizeof(text), "%sheld 2\nreplace 0 2\n", head);
		expect_refused(text, "line 10: replace: at most once, POSITION "
			       "and a BOX listed before, neither removed nor "
			       "held");
		snprintf(text, sizeof(text), "%sreplace 0 2\nreplace 0 2\n",
			 head);
		expect_refused(text, "line 10: replace: at most once");
		snprintf(text, sizeof(text), "%sreplace 0 3\n", head);
		expect_refused(text, "line 9: replace: at most once");
		snprintf(text, sizeof(text), "%sreplace 0\n", head);
		expect_refused(text, "line 9: replace: expected two values");
	}
	expect_refused("tptraid-state 1\ncreating no\n",
		       "line 2: creating: at most once, \"creating yes\"");
	expect_refused("tptraid-state 1\ncreating yes\ncreating yes\n",
		       "line 3: creating: at most once");
	/* Untuned and no check interrupted: no lines, and none written. */
	{
		static const char plain[] = "tptraid-state 1\n"
			"array 0000000000000001\nspec x\n"
			"box 0 iscsi://h/iqn.x:a/1\nposition 0 0\n";

		CHECK_EQ(tpt_state_parse(plain, strlen(plain), st, err,
					 sizeof(err)), 0);
		CHECK(!st->has_rebuild_rate && !st->has_fail_timeout &&
		      !st->has_check && !st->creating);
		n = tpt_state_format(st, buf, 1 << 16);
		CHECK(n > 0 && !strstr(buf, "rebuild_rate") &&
		      !strstr(buf, "fail_timeout") && !strstr(buf, "check") &&
		      !strstr(buf, "creating") && !strstr(buf, "lost") &&
		      !strstr(buf, "held"));
	}
	free(st);
	free(back);
	free(buf);
}

int main(void)
{
	RUN(superblock_layout);
	RUN(intent_round_trip);
	RUN(intent_unwritten);
	RUN(state_file);
	return unit_failures ? 1 : 0;
}
