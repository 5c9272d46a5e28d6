/*
 * The byte layout of one copy of the region record
 * (controller/intent_file.h), big-endian:
 *
 *   0-7    MAGIC "TPTRAIDI"
 *   8-11   VERSION (2; 1 is read too)
 *   12-15  POSITIONS (n, 1..32)
 *   16-23  SEQUENCE NUMBER
 *   24-31  ARRAY ID (non-zero)
 *   32-39  REGIONS (r)
 *   40-43  STRIPES PER REGION
 *   44-47  CRC32C of the whole copy with these four bytes zero
 *   48..   MISSING SINCE, 8 bytes per position
 *   then   the write-intent bits, ceil(r / 8) bytes, region 0 in bit 0
 *   then   per position its missed-write bits, ceil(r / 8) bytes each
 *   then   (version 2) the unwritten bits, ceil(r / 8) bytes, each set
 *          only with its region's write-intent bit
 *   then   zero to the copy's length
 *
 * Version 1 has no unwritten bits: decoded, none is set.
 */
#include "controller/intent_file.h"

#include <errno.h>
#include <string.h>

#include <isa-l/crc.h>

#include "scsi/tpt_cdb.h"

#define IF_HDR_LEN 48
#define IF_CRC 44

static const uint8_t if_magic[8] = { 'T', 'P', 'T', 'R', 'A', 'I', 'D', 'I' };

static uint64_t map_bytes(uint64_t nr_regions)
{
	return (nr_regions + 7) / 8;
}

size_t tpt_intent_copy_len(uint64_t nr_regions, uint32_t nr_positions,
			   uint32_t version)
{
	uint64_t len;

	if (!nr_regions || !nr_positions || nr_positions > RAID_MAX_MEMBERS ||
	    nr_regions > (UINT64_C(1) << 40) || !version ||
	    version > TPT_INTENT_VERSION)
		return 0;
	len = IF_HDR_LEN + 8ULL * nr_positions +
	      map_bytes(nr_regions) * (1ULL + nr_positions + (version >= 2));
	return (size_t)((len + 4095) & ~UINT64_C(4095));
}

static uint32_t copy_crc(const uint8_t *buf, size_t len)
{
	static const uint8_t zero[4];
	uint32_t crc;

	crc = crc32_iscsi((unsigned char *)buf, IF_CRC, 0xffffffffu);
	crc = crc32_iscsi((unsigned char *)zero, 4, crc);
	return crc32_iscsi((unsigned char *)buf + IF_CRC + 4,
			   (int)(len - IF_CRC - 4), crc);
}

int tpt_intent_encode(const struct tpt_intent_record *r, uint8_t *buf,
		      size_t len)
{
	size_t want = tpt_intent_copy_len(r->nr_regions, r->nr_positions,
					  TPT_INTENT_VERSION);
	uint64_t mb = map_bytes(r->nr_regions), at, i;
	uint32_t p;

	if (!want || len < want || !r->array_id || !r->region_stripes ||
	    !r->intent)
		return -EINVAL;
	memset(buf, 0, want);
	memcpy(buf, if_magic, sizeof(if_magic));
	tpt_put_be(&buf[8], TPT_INTENT_VERSION, 4);
	tpt_put_be(&buf[12], r->nr_positions, 4);
	tpt_put_be(&buf[16], r->seq, 8);
	tpt_put_be(&buf[24], r->array_id, 8);
	tpt_put_be(&buf[32], r->nr_regions, 8);
	tpt_put_be(&buf[40], r->region_stripes, 4);
	at = IF_HDR_LEN;
	for (p = 0; p < r->nr_positions; p++, at += 8)
		tpt_put_be(&buf[at], r->missing_since[p], 8);
	memcpy(&buf[at], r->intent, mb);
	at += mb;
	for (p = 0; p < r->nr_positions; p++, at += mb)
		if (r->missed[p])
			memcpy(&buf[at], r->missed[p], mb);
	/* An unwritten region is one a resync has yet to do: never one
	 * without its intent bit, which would be refused when read (a
	 * record that could not be written would hold writes back). */
	for (i = 0; r->unwritten && i < mb; i++)
		buf[at + i] = r->unwritten[i] & r->intent[i];
	tpt_put_be(&buf[IF_CRC], copy_crc(buf, want), 4);
	return (int)want;
}

/* Bits past the last region must be zero: a copy that sets them was not
 * written for this many regions. */
static int check_tail(const uint8_t *map, uint64_t nr_regions)
{
	unsigned int used = nr_regions % 8;

	return used && (map[map_bytes(nr_regions) - 1] >> used) ? -EINVAL : 0;
}

int tpt_intent_decode(const uint8_t *buf, size_t len,
		      struct tpt_intent_record *out)
{
	uint64_t mb = map_bytes(out->nr_regions), at;
	uint32_t p, version;
	size_t want, i;

	if (len < IF_HDR_LEN)
		return -EINVAL;
	if (memcmp(buf, if_magic, sizeof(if_magic)))
		return -ENOENT;
	version = (uint32_t)tpt_get_be(&buf[8], 4);
	want = tpt_intent_copy_len(out->nr_regions, out->nr_positions, version);
	if (!want || len < want ||
	    tpt_get_be(&buf[12], 4) != out->nr_positions ||
	    tpt_get_be(&buf[32], 8) != out->nr_regions ||
	    tpt_get_be(&buf[40], 4) != out->region_stripes ||
	    tpt_get_be(&buf[IF_CRC], 4) != copy_crc(buf, want))
		return -EINVAL;
	out->seq = tpt_get_be(&buf[16], 8);
	out->array_id = tpt_get_be(&buf[24], 8);
	if (!out->array_id)
		return -EINVAL;
	at = IF_HDR_LEN;
	for (p = 0; p < out->nr_positions; p++, at += 8)
		out->missing_since[p] = tpt_get_be(&buf[at], 8);
	if (check_tail(&buf[at], out->nr_regions))
		return -EINVAL;
	memcpy(out->intent, &buf[at], mb);
	at += mb;
	for (p = 0; p < out->nr_positions; p++, at += mb) {
		if (check_tail(&buf[at], out->nr_regions))
			return -EINVAL;
		if (out->missed[p])
			memcpy(out->missed[p], &buf[at], mb);
	}
	if (out->unwritten)
		memset(out->unwritten, 0, mb);
	if (version >= 2) {
		for (i = 0; i < mb; i++)
			if (buf[at + i] & ~out->intent[i])
				return -EINVAL;
		if (out->unwritten)
			memcpy(out->unwritten, &buf[at], mb);
		at += mb;
	}
	out->version = version;
	for (i = at; i < want; i++)
		if (buf[i])
			return -EINVAL;
	return 0;
}
