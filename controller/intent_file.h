/*
 * The controller's persistent record of an array's regions, kept beside
 * its state file (docs/controller.md, "What the controller keeps"):
 *
 *   - the write-intent bits: regions that may have writes in flight.  A
 *     bit is on disk before any write of its region reaches a member and
 *     cleared lazily once the region has been idle; after a crash of the
 *     controller exactly these regions have their parity resynchronised,
 *     which closes the RAID-5 write hole (protocol.md 9.2), as md's
 *     write-intent bitmap does;
 *   - per position, the missed-write bits: regions written while the
 *     position had no usable box, valid since event MISSING SINCE - what a
 *     returning member must catch up on, across restarts too;
 *   - the unwritten bits: of the regions a parity resync has yet to do
 *     (their write-intent bits kept), those no host has written since it
 *     was due (a new array's first resync): their parity may disagree
 *     only with contents nobody wrote, so a box lost there is rebuilt
 *     from it after a restart as before one.  Cleared on disk before a
 *     write of the region reaches a member.
 *
 * The file holds two copies, written alternately; each carries a sequence
 * number and a CRC32C, so a write torn by a crash leaves the other copy,
 * and the valid copy with the higher sequence number is the record.
 * Pure: no I/O.
 */
#ifndef TPT_CONTROLLER_INTENT_FILE_H
#define TPT_CONTROLLER_INTENT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "controller/raid_level.h"

#define TPT_INTENT_VERSION 2

struct tpt_intent_record {
	uint64_t seq;			/* grows with every copy written */
	uint64_t array_id;
	uint64_t nr_regions;
	uint32_t region_stripes;
	uint32_t nr_positions;
	/* Per position: the event since which missed[] is kept, 0: none. */
	uint64_t missing_since[RAID_MAX_MEMBERS];
	uint8_t *intent;		/* (nr_regions + 7) / 8 bytes */
	uint8_t *missed[RAID_MAX_MEMBERS];
	/* The same size; optional (NULL: none set, or not wanted). */
	uint8_t *unwritten;
	uint32_t version;		/* decoded: the copy's */
};

/* Bytes of one copy of @version for an array of @nr_regions regions and
 * @nr_positions positions: a multiple of 4096, or 0 when impossible. */
size_t tpt_intent_copy_len(uint64_t nr_regions, uint32_t nr_positions,
			   uint32_t version);

/* Encode @r as the current version into @buf of tpt_intent_copy_len()
 * bytes (an unwritten bit only with its intent bit): that length, or
 * -EINVAL. */
int tpt_intent_encode(const struct tpt_intent_record *r, uint8_t *buf,
		      size_t len);

/*
 * Decode one copy into @out, whose nr_regions, region_stripes and
 * nr_positions say what the array expects and whose bitmaps point to
 * storage of the right sizes.  Either version; @len at least the
 * copy's length for its version.  0; -ENOENT when @buf holds no copy
 * (never written); -EINVAL when it is damaged, of an unknown version or
 * of another geometry.
 */
int tpt_intent_decode(const uint8_t *buf, size_t len,
		      struct tpt_intent_record *out);

#endif
