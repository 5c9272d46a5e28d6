/*
 * The member superblock: what each member of an array carries about the
 * array, like md's superblock, so that a member that comes back is never
 * trusted blindly (docs/controller.md, "Member metadata").
 *
 * It lives at the start of a reserved area at the end of every member's
 * LU (TPT_SB_RESERVED_BYTES, outside the array's data), is written by the
 * controller with ordinary WRITE(16), and carries the array's identity,
 * the member's position in the layout and the array's event count, which
 * grows with every change of membership.  A member whose superblock names
 * another array is foreign; one whose event count is older than the
 * array's missed the writes since.  A version, a length and a CRC32C make
 * a torn or foreign block visible rather than misread.
 */
#ifndef TPT_CONTROLLER_MEMBER_SB_H
#define TPT_CONTROLLER_MEMBER_SB_H

#include <stddef.h>
#include <stdint.h>

#define TPT_SB_VERSION 2
/* Bytes written; the fields take the first TPT_SB_FIELDS_LEN, the rest is zero. */
#define TPT_SB_LEN 4096
#define TPT_SB_FIELDS_LEN 96
/* Version 1, still read: no key check, the CRC at byte 60. */
#define TPT_SB_V1_FIELDS_LEN 64
#define TPT_SB_KEY_CHECK_LEN 32
/* Reserved at the end of every member: room for later metadata. */
#define TPT_SB_RESERVED_BYTES (1u << 20)
/* POSITION of a spare: not in the layout. */
#define TPT_SB_SPARE 0xffffffffu

struct tpt_member_sb {
	uint64_t array_id;
	uint64_t event;			/* membership changes so far */
	uint32_t position;		/* 0..N-1, or TPT_SB_SPARE */
	uint32_t nr_members;		/* N */
	uint32_t raid_level;
	uint32_t unit_bytes;
	uint64_t member_blocks;		/* blocks of the array's data per member */
	uint32_t block_size;
	/* tpt_member_sb_key_check() of the array's id and key; all zero in a
	 * Baseline array's (its members bind to nothing) and in version 1. */
	uint8_t key_check[TPT_SB_KEY_CHECK_LEN];
};

_Static_assert(TPT_SB_FIELDS_LEN <= TPT_SB_LEN, "superblock fits its block");

/* Encode into @buf of at least TPT_SB_LEN bytes: TPT_SB_LEN, or -EINVAL
 * for a superblock that could never be decoded (array id 0). */
int tpt_member_sb_encode(const struct tpt_member_sb *sb, uint8_t *buf,
			 size_t len);

/*
 * Decode the superblock block @buf (@len bytes, at least TPT_SB_LEN).
 * 0; -ENOENT when the block holds no superblock (no magic: a member that
 * never was in an array); -EINVAL for a damaged or unknown one (bad CRC,
 * another version, a reserved byte set, impossible fields).
 */
int tpt_member_sb_decode(const uint8_t *buf, size_t len,
			 struct tpt_member_sb *out);

/* Whether @sb carries a key check (a `tpt` array's, version 2). */
int tpt_member_sb_binds(const struct tpt_member_sb *sb);

/*
 * The key check of array @array_id's key @key (TPT_ARRAY_KEY_LEN bytes):
 * HMAC-SHA256 keyed with the key over "TPT-RAID member binding" and the
 * id, big-endian.  It shows whether a key is the array's without telling
 * the key to whoever reads the member's last MiB.
 */
void tpt_member_sb_key_check(uint64_t array_id, const uint8_t *key,
			     uint8_t out[TPT_SB_KEY_CHECK_LEN]);

/* The first block of the reserved area of a member of @nr_blocks blocks
 * of @block_size bytes, or 0 when it is too small to hold one. */
uint64_t tpt_member_sb_lba(uint64_t nr_blocks, uint32_t block_size);

#endif
