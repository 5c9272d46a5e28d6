/*
 * TPT-RAID command set codec: the CDBs, the data-out parameter lists, the
 * slot table TPT REPORT SLOTS returns and the in-slot header of
 * docs/protocol.md, which is normative.
 * Pure functions over caller buffers: no I/O, no allocation.
 *
 * Decoders judge wire data.  They return an enum tpt_sense_reason and, for
 * ILLEGAL REQUEST reasons, point @where (which may be NULL) at the field
 * they reject, ready for tpt_sense_build().  Encoders return the number of
 * bytes written, -ENOSPC when the buffer is short (except the slot table's,
 * which truncates as SPC data-in does) or -EINVAL when the structure is
 * one the decoder would reject: whatever encodes, decodes to the same
 * structure.
 */
#ifndef TPT_SCSI_TPT_CDB_H
#define TPT_SCSI_TPT_CDB_H

#include <arpa/inet.h>
#include <stdbool.h>

#include "scsi/tpt_sense.h"

enum tpt_opcode {
	TPT_OP_XDWRITE_10 = 0x50,		/* SBC-2 */
	TPT_OP_WRITE_16 = 0x8a,			/* SBC-3 */
	TPT_OP_PRE_FETCH_16 = 0x90,		/* SBC-3 */
	TPT_OP_SET_PEER_LIST = 0xc0,
	TPT_OP_HOST_KEY = 0xc1,
	TPT_OP_RELEASE = 0xc2,
	TPT_OP_REPORT_SLOTS = 0xc3,
	TPT_OP_PREP_READ = 0xc4,
	TPT_OP_PREP_WRITE = 0xc5,
	TPT_OP_READ_NEW_BLOCK = 0xc6,
	TPT_OP_XDWRITE_16 = 0xc7,
	TPT_OP_READ_PARITY_PART_TMP = 0xc8,
	TPT_OP_READ_PARITY_PART_BLOCK = 0xc9,
	TPT_OP_READ_PARITY_COMP_TMP = 0xca,
	TPT_OP_READ_PARITY_COMP_BLOCK = 0xcb,
	TPT_OP_WRITE_NEW_DATA = 0xcc,
	TPT_OP_REPORT_ENDPOINT = 0xcd,
	TPT_OP_READ_MEDIUM = 0xce,
	TPT_OP_SEND_RESULT = 0xcf,
	/* From an extended host to the controller (protocol.md 4.19). */
	TPT_OP_HOST_READ = 0xd0,
	TPT_OP_HOST_WRITE = 0xd1,
};

#define TPT_CDB_MAX_LEN 16

/*
 * Single-bit flags of CDB byte 1.  Bit positions follow SBC where SBC has
 * the flag, so values repeat across opcodes; tpt_cdb_decode() accepts only
 * the ones the opcode defines.
 */
#define TPT_CDB_FINAL		0x01	/* PREP READ, PREP WRITE */
#define TPT_CDB_RELEASE_ALL	0x01	/* TPT RELEASE */
#define TPT_CDB_RELEASE_UNBIND	0x02	/* TPT RELEASE, with ALL only */
#define TPT_CDB_IMMED		0x02	/* PRE-FETCH(16) */
#define TPT_CDB_FUA_NV		0x02	/* XDWRITE(10) */
#define TPT_CDB_DISABLE_WRITE	0x04	/* XDWRITE(10/16): must be set */
#define TPT_CDB_FUA		0x08	/* XDWRITE(10/16), WRITE NEW DATA,
					 * TPT HOST WRITE */
#define TPT_CDB_DPO		0x10	/* XDWRITE(10) */

/* PARITY MODE, byte 1 bits 5-4 of READ PARITY PART TMP/BLOCK. */
#define TPT_CDB_PARITY_SHIFT	4

/* The local operand a READ PARITY PART command XORs the fetched data into. */
enum tpt_parity_mode {
	TPT_PARITY_XOR_MEDIUM = 0,	/* old contents of the LBA range */
	TPT_PARITY_XOR_GROUP = 1,	/* the group's result for the range */
	TPT_PARITY_COPY = 2,		/* none: the fetched data as is */
};

/* CONTROL bits a TPT target accepts; NACA and LINK are not supported. */
#define TPT_CDB_CONTROL_VENDOR	0xc0

/* Field limits of the vendor 16-byte CDBs (protocol.md explains why). */
#define TPT_VENDOR_LBA_MAX	((UINT64_C(1) << 48) - 1)
#define TPT_VENDOR_LENGTH_MAX	((UINT32_C(1) << 24) - 1)

/*
 * No TPT command is bidirectional: the controller's initiator can only
 * send one direction per command.
 */
enum tpt_data_dir {
	TPT_DATA_NONE,
	TPT_DATA_OUT,		/* a data-out parameter list */
	TPT_DATA_IN,		/* the slot table of TPT REPORT SLOTS */
};

enum tpt_param_list {
	TPT_PARAM_NONE,
	TPT_PARAM_XFER_LIST,
	TPT_PARAM_PEER_LIST,
	TPT_PARAM_HOST_KEY,
};

struct tpt_cdb_info {
	const char *name;
	uint8_t dir;		/* enum tpt_data_dir */
	uint8_t param;		/* enum tpt_param_list: what data-out holds */
};

/* A decoded CDB.  Fields an opcode does not have are zero. */
struct tpt_cdb {
	uint8_t opcode;
	uint8_t flags;			/* TPT_CDB_* of byte 1 */
	uint8_t parity_mode;		/* enum tpt_parity_mode */
	uint8_t control;
	uint32_t transfer_length;	/* logical blocks */
	/*
	 * The TPT request id.  In XDWRITE(10) and PRE-FETCH(16) it is the
	 * 5-bit SBC GROUP NUMBER field.
	 */
	uint32_t group;
	/*
	 * PARAMETER LIST LENGTH of the setup commands, ALLOCATION LENGTH of
	 * TPT REPORT SLOTS.
	 */
	uint32_t param_len;
	uint64_t lba;
	/* The slot geometry TPT REPORT SLOTS asks for. */
	uint32_t slot_payload_size;	/* bytes */
	uint16_t slot_count;
};

/* Static facts about @opcode, or NULL if it is not a TPT command. */
const struct tpt_cdb_info *tpt_cdb_info(uint8_t opcode);

/*
 * Decode and validate the CDB in @cdb[0..len).  @len may exceed the CDB
 * length (iSCSI always carries 16 bytes); the excess is ignored.
 */
enum tpt_sense_reason tpt_cdb_decode(const uint8_t *cdb, size_t len,
				     struct tpt_cdb *out,
				     struct tpt_field_ptr *where);

int tpt_cdb_encode(const struct tpt_cdb *cdb, uint8_t *buf, size_t len);

/* LBA OUT OF RANGE unless the command's blocks lie below @nr_blocks. */
enum tpt_sense_reason tpt_cdb_check_capacity(const struct tpt_cdb *cdb,
					     uint64_t nr_blocks);

/*
 * Transfer list: the data-out of every command that moves data with a
 * one-sided transfer, and of READ MEDIUM.  A header naming the slot that
 * receives the command's result, then one descriptor per contiguous piece
 * of the passive side's memory, in LBA order, then the inline data of any
 * descriptors whose peer is TPT_PEER_ID_CONTROLLER.  READ MEDIUM has no
 * passive side: its list is the header alone.
 */
#define TPT_XFER_HDR_LEN	16
#define TPT_XFER_DESC_LEN	24
#define TPT_XFER_DESC_MAX	256
#define TPT_XFER_LIST_LEN(n) \
	(TPT_XFER_HDR_LEN + TPT_XFER_DESC_LEN * (size_t)(n))

/* Peer ids: 0-ffefh name peer-list entries; fff0h-fffch are reserved. */
#define TPT_PEER_ID_MAX		0xffef
/*
 * No passive side: the descriptor's LENGTH bytes of the command's range
 * are not moved.  Only inside a PREP READ's list (protocol.md 5.1), so
 * that one command covers a member's run across the unit it holds parity
 * in; FLAGS, STAG and OFFSET zero.
 */
#define TPT_PEER_ID_NONE	0xfffd
/* The command's initiator: a host's own buffer, in TPT HOST READ and
 * WRITE only (protocol.md 4.19). */
#define TPT_PEER_ID_INITIATOR	0xfffe
/* Pieces of a host's buffer one TPT HOST READ or WRITE may name. */
#define TPT_HOST_DESC_MAX	64
/* The controller itself: the data travels inline in this data-out. */
#define TPT_PEER_ID_CONTROLLER	0xffff

/* Descriptor flags. */
#define TPT_XFER_VIRT_ADDR	0x01	/* OFFSET is a virtual address */
/*
 * The passive side is another target's result slot: OFFSET names the
 * slot's header, LENGTH the payload bytes wanted, and the active target
 * checks the header before it uses the payload.
 */
#define TPT_XFER_SLOT		0x02

/* RESULT SLOT: keep the result private on the executing target. */
#define TPT_SLOT_NONE		0xffff

/*
 * A READ PARITY command's list may cover its range up to this many times
 * over, each pass one source block, and the target XORs the passes
 * (protocol.md 5.1): a stripe's parity from all of its data blocks in one
 * command.  One pass per data member of the widest array.
 */
#define TPT_XOR_PASSES_MAX	31

/*
 * GF EXPONENT FFh is reserved: every non-zero element of GF(2^8) is a
 * power of 2 below it, and a multiplier of zero, which would drop the
 * pass, has no exponent at all.
 */
#define TPT_GF_EXP_MAX		254

struct tpt_xfer_desc {
	uint16_t peer;
	uint8_t flags;
	/* The bytes are multiplied by 2^gf_exp in GF(2^8) before they are
	 * XORed in; 0: plain XOR (READ PARITY only, protocol.md 3.1). */
	uint8_t gf_exp;
	uint32_t length;	/* bytes */
	uint64_t stag;
	uint64_t offset;
};

struct tpt_xfer_list {
	uint16_t count;
	/* First of the slots that receive the result, or TPT_SLOT_NONE. */
	uint16_t result_slot;
	/* The local operand is multiplied by 2^operand_gf_exp before the
	 * passes are XORed into it; 0: as it is (protocol.md 3.1). */
	uint8_t operand_gf_exp;
	uint64_t total_length;
	struct tpt_xfer_desc desc[TPT_XFER_DESC_MAX];
};

/*
 * Decode the whole data-out of a transfer-list command: @len must be the
 * list plus exactly the inline data its controller descriptors announce.
 * A list of no descriptors decodes (its TOTAL LENGTH is then not a sum);
 * tpt_xfer_list_check() decides whether the command may have one.
 */
enum tpt_sense_reason tpt_xfer_list_decode(const uint8_t *buf, size_t len,
					   struct tpt_xfer_list *out,
					   struct tpt_field_ptr *where);

/* Writes the header and descriptors; the caller appends any inline data. */
int tpt_xfer_list_encode(const struct tpt_xfer_list *list, uint8_t *buf,
			 size_t len);

/* Bytes of inline data that follow the descriptors. */
uint64_t tpt_xfer_list_inline_len(const struct tpt_xfer_list *list);

/*
 * Check a decoded list against its decoded CDB.  TPT HOST READ and WRITE
 * must name exactly one piece, the initiator's buffer (PASSIVE PEER ID
 * TPT_PEER_ID_INITIATOR, no slot, no result), which no other command may
 * name.  Otherwise: READ MEDIUM's must have no
 * descriptors and every other command's at least one, TOTAL LENGTH must
 * equal TRANSFER LENGTH blocks of @block_size bytes (a READ PARITY
 * command's may be up to TPT_XOR_PASSES_MAX times that, with no
 * descriptor crossing from one pass into the next), inline data is only
 * allowed where the controller can be the data source, and slots only
 * where the command reads its passive sides and has a result (not in
 * PREP READ and SEND RESULT, which write to theirs): a SLOT descriptor
 * must begin on a block boundary of the range, so that the LBA its slot
 * header must carry is defined.  An opcode that takes no transfer list
 * gets INVALID FIELD IN CDB at byte 0.  Whether the RESULT SLOT exists on
 * this target is the target's to check.
 */
enum tpt_sense_reason tpt_xfer_list_check(const struct tpt_xfer_list *list,
					  const struct tpt_cdb *cdb,
					  uint32_t block_size,
					  struct tpt_field_ptr *where);

/* How many times a checked list covers its command's range: 1, or for a
 * READ PARITY command the number of blocks it XORs per block of range. */
unsigned int tpt_xfer_list_passes(const struct tpt_xfer_list *list,
				  const struct tpt_cdb *cdb,
				  uint32_t block_size);

/* The GF EXPONENT of pass @pass of a checked list whose passes are
 * @pass_bytes long: every descriptor of a pass has the same. */
uint8_t tpt_xfer_list_pass_gf_exp(const struct tpt_xfer_list *list,
				  uint64_t pass_bytes, unsigned int pass);

/*
 * Result slots: buffers a target registers once per I_T nexus and reports
 * with TPT REPORT SLOTS, so that the controller can name where each
 * exported result goes instead of learning an STag per command.  Each
 * slot is a TPT_SLOT_HDR_LEN header followed by the payload.
 */
#define TPT_SLOT_HDR_LEN	64
#define TPT_SLOT_TABLE_HDR_LEN	16
#define TPT_SLOT_ENTRY_LEN	16
#define TPT_SLOT_MAX		1024
#define TPT_SLOT_TABLE_LEN(n) \
	(TPT_SLOT_TABLE_HDR_LEN + TPT_SLOT_ENTRY_LEN * (size_t)(n))
/* SLOT PAYLOAD SIZE: a non-zero multiple of the unit, at most the max. */
#define TPT_SLOT_PAYLOAD_UNIT	512
#define TPT_SLOT_PAYLOAD_MAX	(UINT32_C(16) << 20)

/* The slot table: the data-in of TPT REPORT SLOTS. */
struct tpt_slot_entry {
	uint64_t stag;
	uint64_t offset;	/* RMA address of the slot's header */
};

struct tpt_slot_table {
	uint16_t count;
	uint8_t flags;			/* TPT_XFER_VIRT_ADDR */
	uint32_t payload_size;		/* bytes after each header */
	struct tpt_slot_entry slot[TPT_SLOT_MAX];
};

/*
 * SPC allocation-length semantics: writes the part of the table that fits
 * in @len bytes (@buf may be NULL when @len is 0) and returns the length
 * of the whole table, or -EINVAL for a table the decoder would reject.
 */
int tpt_slot_table_encode(const struct tpt_slot_table *t, uint8_t *buf,
			  size_t len);

/* @len must be the whole table: a truncated one is a length error. */
enum tpt_sense_reason tpt_slot_table_decode(const uint8_t *buf, size_t len,
					    struct tpt_slot_table *out,
					    struct tpt_field_ptr *where);

/* In-slot header, written by the producing target into its own memory. */
#define TPT_SLOT_MAGIC		UINT32_C(0x54505453)	/* "TPTS" */
#define TPT_SLOT_VERSION	1
#define TPT_SLOT_STATE_FREE	0
#define TPT_SLOT_STATE_VALID	1

struct tpt_slot_header {
	uint8_t state;		/* TPT_SLOT_STATE_* */
	uint32_t group;
	uint32_t length;	/* payload bytes valid */
	uint64_t lba;		/* of the first block of the payload */
};

void tpt_slot_header_encode(const struct tpt_slot_header *h,
			    uint8_t buf[TPT_SLOT_HDR_LEN]);

/*
 * The reading target's check of a header it fetched with the payload:
 * TPT_SENSE_NONE if it is the valid header of @length bytes of group
 * @group starting at @lba, else TPT_SENSE_SLOT_STALE.
 */
enum tpt_sense_reason
tpt_slot_header_check(const uint8_t buf[TPT_SLOT_HDR_LEN], uint32_t group,
		      uint64_t lba, uint32_t length);

/* Peer list: the data-out of TPT SET PEER LIST. */
#define TPT_PEER_LIST_HDR_LEN	32
#define TPT_PEER_ENTRY_LEN	40
#define TPT_PEER_MAX		1024
#define TPT_PEER_LIST_LEN(n) \
	(TPT_PEER_LIST_HDR_LEN + TPT_PEER_ENTRY_LEN * (size_t)(n))
#define TPT_AUTH_TOKEN_LEN	16
#define TPT_ARRAY_KEY_LEN	16
#define TPT_ADDR_LEN		16

enum tpt_peer_role {
	TPT_ROLE_TARGET = 1,
	TPT_ROLE_CONTROLLER = 2,
	TPT_ROLE_HOST = 3,
};

/* IANA address family numbers. */
enum tpt_addr_family {
	TPT_AF_IPV4 = 1,
	TPT_AF_IPV6 = 2,
};

/* Where a peer's datamover listens. */
struct tpt_endpoint {
	uint8_t family;			/* enum tpt_addr_family */
	uint16_t port;
	uint8_t addr[TPT_ADDR_LEN];	/* IPv4: first 4 bytes, rest zero */
};

/* Whether @addr is a numeric IPv4 or IPv6 address: what an endpoint
 * carries, so what a datamover may be told to listen on (a host name
 * would only fail when the endpoint is reported). */
static inline bool tpt_addr_is_numeric(const char *addr)
{
	unsigned char bin[16];

	return inet_pton(AF_INET, addr, bin) == 1 ||
	       inet_pton(AF_INET6, addr, bin) == 1;
}

struct tpt_peer {
	uint16_t id;
	uint8_t role;			/* enum tpt_peer_role */
	struct tpt_endpoint ep;
	/* What whoever connects to this peer must present. */
	uint8_t token[TPT_AUTH_TOKEN_LEN];
};

struct tpt_peer_list {
	uint64_t array_id;
	uint32_t generation;
	uint16_t self_id;		/* the receiving target's own id */
	uint16_t count;
	/* The array's secret: a target serves TPT commands for an array
	 * only to nexuses that delivered it (docs/protocol.md 5.5). */
	uint8_t array_key[TPT_ARRAY_KEY_LEN];
	struct tpt_peer peer[TPT_PEER_MAX];	/* ascending id order */
};

enum tpt_sense_reason tpt_peer_list_decode(const uint8_t *buf, size_t len,
					   struct tpt_peer_list *out,
					   struct tpt_field_ptr *where);
int tpt_peer_list_encode(const struct tpt_peer_list *list, uint8_t *buf,
			 size_t len);

/* The entry with @id, or NULL. */
const struct tpt_peer *tpt_peer_list_find(const struct tpt_peer_list *list,
					  uint16_t id);

/*
 * Endpoint report: the data-in of TPT REPORT ENDPOINT, where a target's
 * datamover listens and through which libfabric provider.  It needs no
 * peer list, so a controller can build the list from the reports.
 */
#define TPT_ENDPOINT_REPORT_LEN	32
#define TPT_ENDPOINT_VERSION	1
#define TPT_PROVIDER_LEN	8

struct tpt_endpoint_report {
	struct tpt_endpoint ep;
	char provider[TPT_PROVIDER_LEN + 1];	/* NUL-terminated */
};

/* Returns TPT_ENDPOINT_REPORT_LEN, writing what fits in @len (SPC
 * allocation-length semantics), or -EINVAL for an invalid report. */
int tpt_endpoint_report_encode(const struct tpt_endpoint_report *r,
			       uint8_t *buf, size_t len);
enum tpt_sense_reason tpt_endpoint_report_decode(const uint8_t *buf,
						 size_t len,
						 struct tpt_endpoint_report *out,
						 struct tpt_field_ptr *where);

/* Host key: the data-out of TPT HOST KEY, laid out like a peer entry. */
#define TPT_HOST_KEY_LEN	TPT_PEER_ENTRY_LEN

struct tpt_host_key {
	struct tpt_endpoint ep;
	uint8_t key[TPT_AUTH_TOKEN_LEN];
};

enum tpt_sense_reason tpt_host_key_decode(const uint8_t *buf, size_t len,
					  struct tpt_host_key *out,
					  struct tpt_field_ptr *where);
int tpt_host_key_encode(const struct tpt_host_key *key, uint8_t *buf,
			size_t len);

#endif
