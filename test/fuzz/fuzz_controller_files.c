/*
 * libFuzzer target for what the controller parses: the array definition
 * (--bsopts), the state file, a member superblock and a region-record
 * copy.  The first byte picks the parser; the rest is its input.  Nothing
 * may crash, and what parses must format back to something that parses
 * to the same thing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "controller/array_spec.h"
#include "controller/intent_file.h"
#include "controller/member_sb.h"
#include "controller/state_file.h"
#include "scsi/tpt_sense.h"

static void fuzz_spec(const uint8_t *data, size_t size)
{
	struct tpt_array_spec *spec = malloc(sizeof(*spec));
	char *text = malloc(size + 1), err[256];

	memcpy(text, data, size);
	text[size] = '\0';
	tpt_array_spec_parse(text, spec, err, sizeof(err));
	free(text);
	free(spec);
}

static void fuzz_state(const uint8_t *data, size_t size)
{
	struct tpt_state *st = malloc(sizeof(*st)), *back = malloc(sizeof(*back));
	char err[256], *buf = malloc(1 << 16);
	int n;

	if (!tpt_state_parse((const char *)data, size, st, err, sizeof(err))) {
		n = tpt_state_format(st, buf, 1 << 16);
		if (n < 0 || tpt_state_parse(buf, (size_t)n, back, err,
					     sizeof(err)) ||
		    memcmp(st, back, sizeof(*st)))
			abort();
	}
	free(buf);
	free(st);
	free(back);
}

static void fuzz_sb(const uint8_t *data, size_t size)
{
	static uint8_t block[TPT_SB_LEN], again[TPT_SB_LEN];
	struct tpt_member_sb sb;

	memset(block, 0, sizeof(block));
	memcpy(block, data, size < sizeof(block) ? size : sizeof(block));
	/* Version 1 is read but written as the current version. */
	if (!tpt_member_sb_decode(block, sizeof(block), &sb) &&
	    tpt_get_be(&block[8], 4) == TPT_SB_VERSION) {
		if (tpt_member_sb_encode(&sb, again, sizeof(again)) != TPT_SB_LEN ||
		    memcmp(block, again, sizeof(block)))
			abort();
	}
}

static void fuzz_intent(const uint8_t *data, size_t size)
{
	static uint8_t copy[8192], again[8192];
	uint8_t intent[16], missed[4][16], unwritten[16];
	uint8_t got_i[16], got_m[4][16], got_u[16];
	struct tpt_intent_record r = {
		.nr_regions = 100, .region_stripes = 64, .nr_positions = 4,
		.intent = intent, .unwritten = unwritten,
	}, back = r;
	size_t len = tpt_intent_copy_len(100, 4, TPT_INTENT_VERSION);
	unsigned int p;

	for (p = 0; p < 4; p++) {
		r.missed[p] = missed[p];
		back.missed[p] = got_m[p];
	}
	back.intent = got_i;
	back.unwritten = got_u;
	memset(copy, 0, sizeof(copy));
	memcpy(copy, data, size < len ? size : len);
	if (!tpt_intent_decode(copy, len, &r)) {
		/* Written again as this version: the same bytes when it was
		 * one, the same record either way. */
		if (tpt_intent_encode(&r, again, len) != (int)len ||
		    (r.version == TPT_INTENT_VERSION &&
		     memcmp(copy, again, len)) ||
		    tpt_intent_decode(again, len, &back) ||
		    memcmp(got_i, intent, 13) || memcmp(got_u, unwritten, 13) ||
		    back.seq != r.seq || back.array_id != r.array_id)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] % 4) {
	case 0: fuzz_spec(data + 1, size - 1); break;
	case 1: fuzz_state(data + 1, size - 1); break;
	case 2: fuzz_sb(data + 1, size - 1); break;
	default: fuzz_intent(data + 1, size - 1); break;
	}
	return 0;
}
