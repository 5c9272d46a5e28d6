/*
 * The definition of a TPT-RAID array as an engineer types it to tgtadm:
 *
 *   tgtadm --lld iscsi --mode logicalunit --op new --tid 1 --lun 1 \
 *     --bstype tptraid --backing-store /var/lib/tptraid/array1 \
 *     --bsopts "raid=5;unit=64k;mode=tpt;dm=127.0.0.1:4400;\
 *               member=iscsi://127.0.0.1:3261/iqn.2026-11.org.example:t0/1;\
 *               member=iscsi://127.0.0.1:3262/iqn.2026-11.org.example:t1/1;\
 *               member=iscsi://127.0.0.1:3263/iqn.2026-11.org.example:t2/1;\
 *               spare=iscsi://127.0.0.1:3264/iqn.2026-11.org.example:t3/1"
 *
 * tgt separates its own parameters with commas, so the options use
 * semicolons (as tgt's rbd and glfs stores do).  Parsing is kept apart from
 * the I/O path; it never half-applies: either the whole spec is valid or the
 * caller gets one line naming the offending part.
 */
#ifndef TPT_CONTROLLER_ARRAY_SPEC_H
#define TPT_CONTROLLER_ARRAY_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TPT_SPEC_MAX_MEMBERS 32
#define TPT_SPEC_MAX_SPARES 8
#define TPT_SPEC_URL_MAX 256
/* RFC 7143 12.1.3: CHAP without IPsec needs secrets of 96 random bits. */
#define TPT_SPEC_CHAP_SECRET_MIN 12
#define TPT_SPEC_UNIT_MIN (4u << 10)
#define TPT_SPEC_UNIT_MAX (1u << 20)

enum tpt_array_mode {
	TPT_MODE_TPT,		/* targets move data and compute parity */
	TPT_MODE_BASELINE,	/* the paper's in-band controller */
};

/* How a full stripe's parity is gathered (protocol.md 7.4): at its
 * calculator one block per step (star), pairwise in rounds (binary
 * tree), or by the parity target from every data block in one command
 * (flat); auto picks by the number of members and the unit.  Zero is
 * auto. */
enum tpt_parity_gather {
	TPT_GATHER_AUTO, TPT_GATHER_STAR, TPT_GATHER_TREE, TPT_GATHER_FLAT,
};

/* How a rebuild gathers a lost unit from the N-1 others (protocol.md
 * 7.5): pairwise among them in rounds first (binary tree), so that no box
 * takes in more than ceil(log2(N-1)) units per unit rebuilt, or by the
 * rebuilt target from all of them in one command (flat).  Zero, the
 * default, is the tree. */
enum tpt_rebuild_gather {
	TPT_REBUILD_TREE, TPT_REBUILD_FLAT,
};

struct tpt_array_spec {
	unsigned int raid_level;	/* 1 or 5 */
	uint32_t unit_bytes;		/* stripe unit: 4 KiB .. 1 MiB, power of 2 */
	enum tpt_array_mode mode;
	char dm_addr[64];		/* controller's datamover listener */
	uint16_t dm_port;
	char initiator[224];		/* IQN the controller logs in with */
	unsigned int nr_members;
	char member[TPT_SPEC_MAX_MEMBERS][TPT_SPEC_URL_MAX];
	unsigned int nr_spares;
	char spare[TPT_SPEC_MAX_SPARES][TPT_SPEC_URL_MAX];
	unsigned int fail_timeout;	/* seconds a member may stay silent */
	unsigned int rebuild_rate;	/* MB/s of recovery, 0: unthrottled */
	/* A new array's members are known to agree (all zero, say): no
	 * initial resync of its parity. */
	bool assume_clean;
	/* Start even after a crash that left writes in flight while a
	 * member was missing (as md's start_dirty_degraded). */
	bool start_dirty_degraded;
	/* Record the regions with writes in flight (md's write-intent
	 * bitmap).  Without it every region counts as in flight while the
	 * array runs: a controller crash resyncs the whole array. */
	bool write_intent;
	/* Send the parity target PRE-FETCH beside a small write's XDWRITE
	 * (protocol.md 7.2, the paper's Table II): its old parity is read
	 * while the data target works, for one more command per stripe. */
	bool prefetch;
	enum tpt_parity_gather parity_gather;
	enum tpt_rebuild_gather rebuild_gather;
};

#define TPT_SPEC_FAIL_TIMEOUT_DEFAULT 8
#define TPT_SPEC_FAIL_TIMEOUT_MAX 300
#define TPT_SPEC_REBUILD_RATE_MAX 1000000

/* unit=BYTES (also tpt-scrub's --unit), fail_timeout=S and
 * rebuild_rate=MB/s values, the last two also for tgtadm --op update: 0
 * with the value in *out, or -EINVAL with a message in @err. */
int tpt_spec_unit(const char *value, uint32_t *out, char *err,
		  size_t errlen);
int tpt_spec_fail_timeout(const char *value, unsigned int *out, char *err,
			  size_t errlen);
int tpt_spec_rebuild_rate(const char *value, unsigned int *out, char *err,
			  size_t errlen);
/*
 * A member URL as the spec takes it:
 *   iscsi://[user%secret@]host[:port]/target-iqn/lun
 *	[?target_user=NAME&target_password=SECRET]
 * user%secret is CHAP towards the member, the arguments mutual CHAP (what
 * the member answers with).  Secrets are at least
 * TPT_SPEC_CHAP_SECRET_MIN characters, and differ between directions.
 */
int tpt_spec_member_url(const char *value, char *err, size_t errlen);
/*
 * @text (one URL or a whole spec) with every iscsi:// URL's user%secret@
 * and ?arguments left out: what logs, show output and messages print.
 * Truncated to fit @outlen.
 */
void tpt_spec_hide_secrets(const char *text, char *out, size_t outlen);
/* Do two member URLs name the same box, whatever their credentials? */
bool tpt_spec_same_box(const char *a, const char *b);

/*
 * Parse @opts into @out.  Returns 0, or -EINVAL with a one-line message in
 * @err (e.g. "unit=3k: stripe unit must be a power of two from 4k to 1m").
 */
int tpt_array_spec_parse(const char *opts, struct tpt_array_spec *out,
			 char *err, size_t errlen);

/*
 * @opts as one line, each item "key=value" as the parser reads it (the
 * whitespace and line breaks around items and after values left out),
 * joined by ';': what the state file records, and what a definition
 * given again is compared with.  0, or -E2BIG when it does not fit
 * @outlen.  It parses to the same array as @opts, or fails as @opts does.
 */
int tpt_array_spec_canonical(const char *opts, char *out, size_t outlen);

const char *tpt_array_mode_name(enum tpt_array_mode mode);

#endif
