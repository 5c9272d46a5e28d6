/*
 * The datamover of this tgtd process: one libfabric endpoint and one
 * registered buffer pool (iser/tpt_dm.h), driven from tgtd's event loop
 * and shared by its two users, the TPT target (LUs in TPT mode,
 * usr/tpt_target/) and the controller (tptraid arrays,
 * usr/tpt_controller/).
 *
 * Each user registers a tpt_datamover_user: incoming connections are
 * offered to every user until one admits them, and a peer going away is
 * told to every user.  Opening the datamover starts nothing else: the
 * target's disk workers and timers are the target's business.
 *
 * Both users keep each array in a datamover scope of its own
 * (iser/tpt_dm.h), named by tpt_datamover_scope(): an array's slots,
 * buffers and host data are reachable only through connections admitted
 * for that array, whoever else this process serves.
 */
#ifndef __TPT_DATAMOVER_H__
#define __TPT_DATAMOVER_H__

#include <stdint.h>
#include <sys/socket.h>

#include "list.h"
#include "iser/tpt_dm.h"
#include "scsi/tpt_cdb.h"

/* Pool buffers: a 1 MiB piece (the largest stripe unit) and room for a
 * slot header, page aligned. */
#define TPT_DATAMOVER_BUF_BYTES ((1u << 20) + 4096)

struct tpt_datamover_user {
	const char *name;		/* "target", "controller": for logs */
	/* 0 when this user admits the peer, with the token its hello
	 * proved (tpt_dm_hello_proves) in @token and the scope of the
	 * array it was admitted for in @scope; a negative errno otherwise
	 * (the datamover logs a refusal nobody admitted). */
	int (*accept)(const struct tpt_dm_hello *hello,
		      const struct sockaddr *src, socklen_t srclen,
		      uint8_t token[TPT_DM_TOKEN_LEN], uint64_t *scope);
	/* An accepted or connected peer went away (tpt_dm.h). */
	void (*peer_down)(struct tpt_dm_peer *peer);
	struct list_head link;
};

/* Idempotent; users stay registered for the life of the process. */
void tpt_datamover_register(struct tpt_datamover_user *u);

/*
 * The datamover scope of the array with @array_id and @key: its
 * authenticated identity, not its id alone, which travels in clear and a
 * stranger's list may copy.  Never 0 (the default scope), and the same
 * for the target and the controller sides of one process.
 */
uint64_t tpt_datamover_scope(uint64_t array_id,
			     const uint8_t key[TPT_ARRAY_KEY_LEN]);

/*
 * The scope of a target's connection to the host @peer_id with key
 * @token of the array in @array_scope: the host's alone.  The host is the
 * passive end of a connection a target opened, but either end of a
 * libfabric endpoint may start RMA: in the array's scope the host could
 * read the target's slots, in its own it finds nothing registered but
 * the pieces of its own transfers (docs/protocol.md 6.4).
 */
uint64_t tpt_datamover_host_scope(uint64_t array_scope, uint16_t peer_id,
				  const uint8_t token[TPT_AUTH_TOKEN_LEN]);

/*
 * Where the datamover listens, "ADDR:PORT" (port 0: any free one).  Before
 * it is open this sets the address; once open, only the address it
 * listens on is accepted.  0, or -EINVAL with a line in the log.
 */
int tpt_datamover_set_portal(const char *addr_port);
/* Pool size in MiB, 8..65536, before the datamover opens. */
int tpt_datamover_set_pool_mb(unsigned int mb);
unsigned int tpt_datamover_pool_mb(void);

/* Open it on the configured portal if not open yet: 0 or -errno (logged). */
int tpt_datamover_open(void);

/* NULL until open. */
struct tpt_dm *tpt_datamover(void);
/* The listening address as configured, "" before any. */
const char *tpt_datamover_addr(void);
/* This datamover as a peer-list endpoint: 0, or -EINVAL when not open
 * or its address is not a numeric IPv4/IPv6 one. */
int tpt_datamover_endpoint(struct tpt_endpoint *ep);

#endif
