/*
 * libFuzzer target for the TPT codec: every decoder and validator gets the
 * same arbitrary bytes.  Nothing may crash, and whatever a strict decoder
 * accepts must re-encode to exactly the bytes it came from.  The sense
 * parser is lenient by design (it reads other devices' sense too), so for
 * it the property is that build and parse agree on what it understood.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scsi/tpt_cdb.h"
#include "scsi/tpt_sense.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Large structures live outside the stack that ASan inflates. */
static struct tpt_xfer_list xfer_list;
static struct tpt_peer_list peer_list;
static struct tpt_slot_table slot_table;
static uint8_t out[TPT_PEER_LIST_LEN(TPT_PEER_MAX)];

static void same_bytes(const uint8_t *data, size_t size, int n)
{
	if (n < 0 || (size_t)n > size || memcmp(data, out, (size_t)n) != 0)
		abort();
}

/* Returns the CDB length, or 0 if the bytes do not start with a CDB. */
static size_t fuzz_cdb(const uint8_t *data, size_t size, struct tpt_cdb *cdb)
{
	struct tpt_field_ptr where;
	int n;

	if (tpt_cdb_decode(data, size, cdb, &where))
		return 0;
	n = tpt_cdb_encode(cdb, out, sizeof(out));
	same_bytes(data, size, n);
	if (!tpt_cdb_info(cdb->opcode))
		abort();
	tpt_cdb_check_capacity(cdb, size >= 8 ? tpt_get_be(data, 8) : 0);
	return (size_t)n;
}

/* Whether the list names a slot, as RESULT SLOT or to read from. */
static bool names_slot(const struct tpt_xfer_list *list)
{
	uint16_t i;

	for (i = 0; i < list->count; i++)
		if (list->desc[i].flags & TPT_XFER_SLOT)
			return true;
	return list->result_slot != TPT_SLOT_NONE;
}

static bool host_pieces_ok(const struct tpt_xfer_list *l, uint32_t bs)
{
	uint16_t i;

	if (!l->count || l->count > TPT_HOST_DESC_MAX)
		return false;
	for (i = 0; i < l->count; i++)
		if (l->desc[i].peer != TPT_PEER_ID_INITIATOR ||
		    l->desc[i].flags != l->desc[0].flags ||
		    (l->desc[i].flags & TPT_XFER_SLOT) ||
		    l->desc[i].length % bs)
			return false;
	return true;
}

static bool names_initiator(const struct tpt_xfer_list *list)
{
	uint16_t i;

	for (i = 0; i < list->count; i++)
		if (list->desc[i].peer == TPT_PEER_ID_INITIATOR)
			return true;
	return false;
}

static bool skips_ok(const struct tpt_xfer_list *list, uint8_t opcode,
		     uint32_t bs)
{
	uint64_t at = 0;
	uint16_t i;

	for (i = 0; i < list->count; at += list->desc[i++].length) {
		const struct tpt_xfer_desc *d = &list->desc[i];

		if (d->peer != TPT_PEER_ID_NONE)
			continue;
		if ((opcode != TPT_OP_PREP_READ &&
		     opcode != TPT_OP_PREP_WRITE) || !i ||
		    i + 1 == list->count || d->flags || d->stag || d->offset)
			return false;
		if (opcode == TPT_OP_PREP_WRITE &&
		    (at % bs || d->length % bs))
			return false;
	}
	return true;
}

/* A list that passed covers its range once, or a READ PARITY command's
 * 1-31 times with every descriptor inside one pass and weighted as its
 * pass is; only READ PARITY lists have weights. */
static bool passes_ok(const struct tpt_xfer_list *list,
		      const struct tpt_cdb *cdb, uint32_t block_size)
{
	uint64_t range = (uint64_t)cdb->transfer_length * block_size, at = 0;
	unsigned int passes = tpt_xfer_list_passes(list, cdb, block_size);
	bool parity = cdb->opcode >= TPT_OP_READ_PARITY_PART_TMP &&
		      cdb->opcode <= TPT_OP_READ_PARITY_COMP_BLOCK;
	uint16_t i;

	if (list->total_length != passes * range ||
	    passes > (parity ? TPT_XOR_PASSES_MAX : 1))
		return false;
	for (i = 0; i < list->count; at += list->desc[i++].length) {
		if (at / range != (at + list->desc[i].length - 1) / range)
			return false;
		if (list->desc[i].gf_exp &&
		    (!parity || list->desc[i].gf_exp > TPT_GF_EXP_MAX))
			return false;
		if (list->desc[i].gf_exp !=
		    tpt_xfer_list_pass_gf_exp(list, range, at / range))
			return false;
	}
	return true;
}

static void fuzz_xfer_list(const uint8_t *data, size_t size,
			   const struct tpt_cdb *cdb)
{
	static const uint32_t block_sizes[] = { 512, 4096 };
	struct tpt_field_ptr where;
	uint64_t list_len;
	size_t i;

	if (tpt_xfer_list_decode(data, size, &xfer_list, &where))
		return;
	list_len = TPT_XFER_LIST_LEN(xfer_list.count);
	if (list_len + tpt_xfer_list_inline_len(&xfer_list) != size)
		abort();
	if (xfer_list.result_slot >= TPT_SLOT_MAX &&
	    xfer_list.result_slot != TPT_SLOT_NONE)
		abort();
	same_bytes(data, size,
		   tpt_xfer_list_encode(&xfer_list, out, sizeof(out)));
	if (!cdb)
		return;
	for (i = 0; i < sizeof(block_sizes) / sizeof(block_sizes[0]); i++) {
		if (tpt_xfer_list_check(&xfer_list, cdb, block_sizes[i],
					&where))
			continue;
		/* READ MEDIUM's list is the header alone, nobody else's. */
		if ((cdb->opcode == TPT_OP_READ_MEDIUM) != !xfer_list.count)
			abort();
		/* PREP READ and SEND RESULT write to their passive sides and
		 * export nothing. */
		if ((cdb->opcode == TPT_OP_PREP_READ ||
		     cdb->opcode == TPT_OP_SEND_RESULT) &&
		    names_slot(&xfer_list))
			abort();
		/* A host command's list is the initiator's buffer, in up to
		 * TPT_HOST_DESC_MAX pieces of whole blocks addressed alike,
		 * and only a host command's names the initiator. */
		if ((cdb->opcode == TPT_OP_HOST_READ ||
		     cdb->opcode == TPT_OP_HOST_WRITE) &&
		    !host_pieces_ok(&xfer_list, block_sizes[i]))
			abort();
		if (names_initiator(&xfer_list) &&
		    cdb->opcode != TPT_OP_HOST_READ &&
		    cdb->opcode != TPT_OP_HOST_WRITE)
			abort();
		/* Skipped bytes: a PREP READ's, or a PREP WRITE's whole
		 * blocks, between moved ones, with no memory named. */
		if (!skips_ok(&xfer_list, cdb->opcode, block_sizes[i]))
			abort();
		if (xfer_list.count &&
		    !passes_ok(&xfer_list, cdb, block_sizes[i]))
			abort();
		/* A weighted operand is a READ PARITY command's own. */
		if (xfer_list.operand_gf_exp &&
		    (cdb->opcode < TPT_OP_READ_PARITY_PART_TMP ||
		     cdb->opcode > TPT_OP_READ_PARITY_COMP_BLOCK ||
		     cdb->opcode == TPT_OP_READ_PARITY_COMP_BLOCK ||
		     (cdb->opcode != TPT_OP_READ_PARITY_COMP_TMP &&
		      cdb->parity_mode == TPT_PARITY_COPY)))
			abort();
	}
}

static void fuzz_peer_list(const uint8_t *data, size_t size)
{
	struct tpt_field_ptr where;
	uint16_t i;

	if (tpt_peer_list_decode(data, size, &peer_list, &where))
		return;
	same_bytes(data, size,
		   tpt_peer_list_encode(&peer_list, out, sizeof(out)));
	for (i = 0; i < peer_list.count; i++)
		if (tpt_peer_list_find(&peer_list, peer_list.peer[i].id) !=
		    &peer_list.peer[i])
			abort();
	if (!tpt_peer_list_find(&peer_list, peer_list.self_id))
		abort();
}

static void fuzz_host_key(const uint8_t *data, size_t size)
{
	struct tpt_field_ptr where;
	struct tpt_host_key key;

	if (!tpt_host_key_decode(data, size, &key, &where))
		same_bytes(data, size,
			   tpt_host_key_encode(&key, out, sizeof(out)));
}

static void fuzz_endpoint_report(const uint8_t *data, size_t size)
{
	struct tpt_endpoint_report r;
	struct tpt_field_ptr where;

	if (!tpt_endpoint_report_decode(data, size, &r, &where))
		same_bytes(data, size,
			   tpt_endpoint_report_encode(&r, out, sizeof(out)));
}

static void fuzz_slot_table(const uint8_t *data, size_t size)
{
	struct tpt_field_ptr where;
	size_t cut;

	if (tpt_slot_table_decode(data, size, &slot_table, &where))
		return;
	same_bytes(data, size,
		   tpt_slot_table_encode(&slot_table, out, sizeof(out)));
	/* A short allocation length gets a prefix and the full length. */
	cut = data[size - 1] % size;
	memset(out, 0xa5, size);
	if (tpt_slot_table_encode(&slot_table, out, cut) != (int)size ||
	    tpt_slot_table_encode(&slot_table, NULL, 0) != (int)size ||
	    memcmp(data, out, cut) != 0)
		abort();
	for (; cut < size; cut++)
		if (out[cut] != 0xa5)
			abort();
}

/* The first TPT_SLOT_HDR_LEN bytes as a header some target fetched. */
static void fuzz_slot_header(const uint8_t *data, size_t size)
{
	struct tpt_slot_header h;
	uint8_t enc[TPT_SLOT_HDR_LEN];

	if (size < TPT_SLOT_HDR_LEN)
		return;
	h.state = data[5];
	h.group = (uint32_t)tpt_get_be(&data[8], 4);
	h.length = (uint32_t)tpt_get_be(&data[12], 4);
	h.lba = tpt_get_be(&data[16], 8);
	tpt_slot_header_encode(&h, enc);
	/* Accepted exactly when it is the header a producer would write. */
	if ((tpt_slot_header_check(data, h.group, h.lba, h.length) ==
	     TPT_SENSE_NONE) !=
	    (h.state == TPT_SLOT_STATE_VALID &&
	     memcmp(data, enc, TPT_SLOT_HDR_LEN) == 0))
		abort();
	/* A producer's header passes only the reader that expects it. */
	if (tpt_slot_header_check(enc, h.group, h.lba, h.length) !=
	    (h.state == TPT_SLOT_STATE_VALID ? TPT_SENSE_NONE :
					       TPT_SENSE_SLOT_STALE) ||
	    tpt_slot_header_check(enc, h.group + 1, h.lba, h.length) !=
	    TPT_SENSE_SLOT_STALE ||
	    tpt_slot_header_check(enc, h.group, h.lba ^ 1, h.length) !=
	    TPT_SENSE_SLOT_STALE ||
	    tpt_slot_header_check(enc, h.group, h.lba, h.length + 1) !=
	    TPT_SENSE_SLOT_STALE)
		abort();
}

static void fuzz_sense(const uint8_t *data, size_t size)
{
	struct tpt_sense first, again;
	int n;

	if (tpt_sense_parse(data, size, &first))
		return;
	n = tpt_sense_build(out, sizeof(out), first.reason, &first.info);
	if (n < 0) {
		/* Only sense we do not build may be refused. */
		if (tpt_sense_code(first.reason))
			abort();
		return;
	}
	if (tpt_sense_parse(out, (size_t)n, &again) ||
	    again.reason != first.reason ||
	    again.info.information != first.info.information ||
	    again.info.info_valid != first.info.info_valid ||
	    again.info.cmd_specific != first.info.cmd_specific ||
	    memcmp(&again.info.field, &first.info.field,
		   sizeof(first.info.field)) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tpt_cdb cdb;
	size_t cdb_len = fuzz_cdb(data, size, &cdb);

	/* After a valid CDB, the rest is that command's data-out. */
	if (cdb_len)
		fuzz_xfer_list(data + cdb_len, size - cdb_len, &cdb);
	fuzz_xfer_list(data, size, NULL);
	fuzz_peer_list(data, size);
	fuzz_host_key(data, size);
	fuzz_endpoint_report(data, size);
	fuzz_slot_table(data, size);
	fuzz_slot_header(data, size);
	fuzz_sense(data, size);
	return 0;
}
