/*
 * The member superblock's byte layout (controller/member_sb.h), big-endian:
 *
 *   0-7    MAGIC "TPTRAIDM"
 *   8-11   VERSION (2)
 *   12-15  FIELDS LENGTH (96)
 *   16-23  ARRAY ID (non-zero)
 *   24-31  EVENT COUNT
 *   32-35  POSITION (FFFFFFFFh: spare)
 *   36-39  MEMBERS
 *   40-43  RAID LEVEL
 *   44-47  STRIPE UNIT, bytes
 *   48-55  MEMBER BLOCKS
 *   56-59  BLOCK SIZE
 *   60-91  KEY CHECK (all zero: the array binds no member)
 *   92-95  CRC32C of bytes 0-91
 *   96-4095 zero
 *
 * Version 1, which is read but no longer written, ends with the CRC32C
 * of bytes 0-59 at 60-63 (fields length 64) and has no key check.
 */
#include "controller/member_sb.h"

#include <errno.h>
#include <string.h>

#include <isa-l/crc.h>
#include <nettle/hmac.h>

#include "scsi/tpt_cdb.h"

static const uint8_t sb_magic[8] = { 'T', 'P', 'T', 'R', 'A', 'I', 'D', 'M' };

#define SB_KEY_CHECK 60
#define SB_CRC (TPT_SB_FIELDS_LEN - 4)

static const char key_check_label[] = "TPT-RAID member binding";

static uint32_t sb_crc(const uint8_t *buf, size_t covered)
{
	return crc32_iscsi((unsigned char *)buf, covered, 0xffffffffu);
}

void tpt_member_sb_key_check(uint64_t array_id, const uint8_t *key,
			     uint8_t out[TPT_SB_KEY_CHECK_LEN])
{
	struct hmac_sha256_ctx ctx;
	uint8_t id[8];

	tpt_put_be(id, array_id, 8);
	hmac_sha256_set_key(&ctx, TPT_ARRAY_KEY_LEN, key);
	hmac_sha256_update(&ctx, sizeof(key_check_label) - 1,
			   (const uint8_t *)key_check_label);
	hmac_sha256_update(&ctx, sizeof(id), id);
	hmac_sha256_digest(&ctx, TPT_SB_KEY_CHECK_LEN, out);
}

int tpt_member_sb_binds(const struct tpt_member_sb *sb)
{
	uint8_t any = 0;
	size_t i;

	for (i = 0; i < TPT_SB_KEY_CHECK_LEN; i++)
		any |= sb->key_check[i];
	return any != 0;
}

int tpt_member_sb_encode(const struct tpt_member_sb *sb, uint8_t *buf,
			 size_t len)
{
	if (len < TPT_SB_LEN || !sb->array_id)
		return -EINVAL;
	memset(buf, 0, TPT_SB_LEN);
	memcpy(buf, sb_magic, sizeof(sb_magic));
	tpt_put_be(&buf[8], TPT_SB_VERSION, 4);
	tpt_put_be(&buf[12], TPT_SB_FIELDS_LEN, 4);
	tpt_put_be(&buf[16], sb->array_id, 8);
	tpt_put_be(&buf[24], sb->event, 8);
	tpt_put_be(&buf[32], sb->position, 4);
	tpt_put_be(&buf[36], sb->nr_members, 4);
	tpt_put_be(&buf[40], sb->raid_level, 4);
	tpt_put_be(&buf[44], sb->unit_bytes, 4);
	tpt_put_be(&buf[48], sb->member_blocks, 8);
	tpt_put_be(&buf[56], sb->block_size, 4);
	memcpy(&buf[SB_KEY_CHECK], sb->key_check, TPT_SB_KEY_CHECK_LEN);
	tpt_put_be(&buf[SB_CRC], sb_crc(buf, SB_CRC), 4);
	return TPT_SB_LEN;
}

int tpt_member_sb_decode(const uint8_t *buf, size_t len,
			 struct tpt_member_sb *out)
{
	size_t i, fields;

	memset(out, 0, sizeof(*out));
	if (len < TPT_SB_LEN)
		return -EINVAL;
	if (memcmp(buf, sb_magic, sizeof(sb_magic)))
		return -ENOENT;
	switch (tpt_get_be(&buf[8], 4)) {
	case 1:
		fields = TPT_SB_V1_FIELDS_LEN;
		break;
	case TPT_SB_VERSION:
		fields = TPT_SB_FIELDS_LEN;
		memcpy(out->key_check, &buf[SB_KEY_CHECK],
		       TPT_SB_KEY_CHECK_LEN);
		break;
	default:
		return -EINVAL;
	}
	if (tpt_get_be(&buf[12], 4) != fields ||
	    tpt_get_be(&buf[fields - 4], 4) != sb_crc(buf, fields - 4))
		return -EINVAL;
	for (i = fields; i < TPT_SB_LEN; i++)
		if (buf[i])
			return -EINVAL;
	out->array_id = tpt_get_be(&buf[16], 8);
	out->event = tpt_get_be(&buf[24], 8);
	out->position = (uint32_t)tpt_get_be(&buf[32], 4);
	out->nr_members = (uint32_t)tpt_get_be(&buf[36], 4);
	out->raid_level = (uint32_t)tpt_get_be(&buf[40], 4);
	out->unit_bytes = (uint32_t)tpt_get_be(&buf[44], 4);
	out->member_blocks = tpt_get_be(&buf[48], 8);
	out->block_size = (uint32_t)tpt_get_be(&buf[56], 4);
	if (!out->array_id || !out->nr_members || !out->block_size ||
	    (out->position != TPT_SB_SPARE &&
	     out->position >= out->nr_members))
		return -EINVAL;
	return 0;
}

uint64_t tpt_member_sb_lba(uint64_t nr_blocks, uint32_t block_size)
{
	uint64_t reserved;

	if (!block_size || TPT_SB_RESERVED_BYTES % block_size)
		return 0;
	reserved = TPT_SB_RESERVED_BYTES / block_size;
	return nr_blocks > reserved ? nr_blocks - reserved : 0;
}
