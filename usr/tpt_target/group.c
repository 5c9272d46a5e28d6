/*
 * Requests ("groups") at a target: their buffers and how they end.
 *
 * A group is keyed by (I_T nexus, LU, group number).  It holds ranges of
 * buffered data: staged data that WRITE NEW DATA writes, and results other
 * commands or other targets read.  Every way a group ends releases all of
 * its buffers and leaves a tombstone saying why, so a late command naming
 * the group gets that reason rather than "unknown group":
 * WRITE NEW DATA, TPT RELEASE, task management, an idle timeout, or the
 * loss of the nexus (docs/protocol.md section 8).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "list.h"
#include "tgtd.h"
#include "log.h"
#include "work.h"
#include "scsi/tpt_parity.h"
#include "tpt_target.h"

static const enum tpt_sense_reason release_reason[] = {
	[TPT_RELEASE_DONE] = TPT_SENSE_RELEASED_BY_COMMAND,
	[TPT_RELEASE_COMMAND] = TPT_SENSE_RELEASED_BY_COMMAND,
	[TPT_RELEASE_TASK_MGMT] = TPT_SENSE_RELEASED_BY_TASK_MGMT,
	[TPT_RELEASE_TIMEOUT] = TPT_SENSE_RELEASED_BY_TIMEOUT,
	[TPT_RELEASE_NEXUS_LOSS] = TPT_SENSE_RELEASED_BY_NEXUS_LOSS,
};

static uint64_t now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static void tpt_tombstone_add(struct tpt_session *s, uint32_t number,
			      enum tpt_release_why why)
{
	unsigned int i = s->next_tombstone++ % TPT_TOMBSTONES;

	s->tombstones[i].group = number;
	s->tombstones[i].why = why;
	s->tombstones[i].used = true;
}

/* The most recent release of @number, if remembered. */
static bool tpt_tombstone_find(const struct tpt_session *s, uint32_t number,
			       enum tpt_release_why *why)
{
	unsigned int n;

	for (n = 1; n <= TPT_TOMBSTONES; n++) {
		unsigned int i = (s->next_tombstone - n) % TPT_TOMBSTONES;

		if (s->tombstones[i].used && s->tombstones[i].group == number) {
			*why = s->tombstones[i].why;
			return true;
		}
	}
	return false;
}

static void tpt_tombstone_clear(struct tpt_session *s, uint32_t number)
{
	unsigned int i;

	for (i = 0; i < TPT_TOMBSTONES; i++)
		if (s->tombstones[i].used && s->tombstones[i].group == number)
			s->tombstones[i].used = false;
}

enum tpt_sense_reason tpt_group_get(struct tpt_session *s, struct tpt_lu *tlu,
				    uint32_t number, enum tpt_group_kind kind,
				    bool create, struct tpt_group **out)
{
	enum tpt_release_why why;
	struct tpt_group *g;

	list_for_each_entry(g, &s->groups, link) {
		if (g->number != number || g->tlu != tlu)
			continue;
		if (g->doomed)
			return release_reason[g->doom_why];
		if (g->kind != kind)
			return TPT_SENSE_GROUP_IN_USE;
		g->last_used = s->clock;
		*out = g;
		return TPT_SENSE_NONE;
	}
	if (!create) {
		if (tpt_tombstone_find(s, number, &why))
			return release_reason[why];
		if (!s->unknown_group_logged)
			eprintf("tpt: group %u is unknown on I_T nexus %" PRIu64
				" (%u groups open, no release of it among the "
				"last %u): a command named a group this nexus "
				"never opened\n", number, s->itn_id,
				s->nr_groups, TPT_TOMBSTONES);
		s->unknown_group_logged = true;
		return TPT_SENSE_UNKNOWN_GROUP;
	}

	if (s->nr_groups >= tpt_bounds.session_groups)
		return tpt_bound_refuse(s, TPT_BOUND_SESSION_GROUPS);
	if (tpt_bound_use.groups >= tpt_bounds.groups_max)
		return tpt_bound_refuse(s, TPT_BOUND_GROUPS);
	g = calloc(1, sizeof(*g));
	if (!g)
		return TPT_SENSE_POOL_EXHAUSTED;
	s->nr_groups++;
	tpt_bound_use.groups++;
	if (s->nr_groups > tpt_bound_use.peak_session_groups)
		tpt_bound_use.peak_session_groups = s->nr_groups;
	g->session = s;
	g->tlu = tlu;
	g->number = number;
	g->kind = kind;
	g->last_used = s->clock;
	INIT_LIST_HEAD(&g->ranges);
	INIT_LIST_HEAD(&g->preps);
	list_add_tail(&g->link, &s->groups);
	/* The controller reuses a number only for a new request. */
	tpt_tombstone_clear(s, number);
	*out = g;
	return TPT_SENSE_NONE;
}

struct tpt_group *tpt_group_find(struct tpt_session *s, struct tpt_lu *tlu,
				 uint32_t number)
{
	struct tpt_group *g;

	list_for_each_entry(g, &s->groups, link)
		if (g->number == number && g->tlu == tlu && !g->doomed)
			return g;
	return NULL;
}

void tpt_group_hold(struct tpt_group *g)
{
	g->inflight++;
	g->last_used = g->session->clock;
}

static void tpt_group_unlink(struct tpt_group *g)
{
	g->session->nr_groups--;
	tpt_bound_use.groups--;
	list_del(&g->link);
	free(g);
}

static void tpt_group_free(struct tpt_group *g)
{
	struct tpt_range *r, *rtmp;
	struct tpt_prep *p, *ptmp;

	list_for_each_entry_safe(p, ptmp, &g->preps, link)
		tpt_prep_free(p);
	list_for_each_entry_safe(r, rtmp, &g->ranges, link)
		tpt_range_free(r);
	tpt_tombstone_add(g->session, g->number, g->doom_why);
	g->tlu->stats.groups_released[g->doom_why]++;
	tpt_group_unlink(g);
}

bool tpt_group_forget_unused(struct tpt_group *g)
{
	if (g->inflight != 1 || g->doomed || !list_empty(&g->ranges) ||
	    !list_empty(&g->preps))
		return false;
	tpt_group_unlink(g);
	return true;
}

void tpt_group_unhold(struct tpt_group *g)
{
	g->last_used = g->session->clock;
	if (!--g->inflight && g->doomed)
		tpt_group_free(g);
}

void tpt_group_release(struct tpt_group *g, enum tpt_release_why why)
{
	if (!g->doomed) {
		g->doomed = true;
		g->doom_why = why;
	}
	if (!g->inflight)
		tpt_group_free(g);
}

static void tpt_release_matching(struct tpt_session *s, struct tpt_lu *tlu,
				 enum tpt_release_why why)
{
	struct tpt_group *g, *tmp;

	list_for_each_entry_safe(g, tmp, &s->groups, link)
		if (!tlu || g->tlu == tlu)
			tpt_group_release(g, why);
}

void tpt_session_release_groups(struct tpt_session *s, struct tpt_lu *tlu,
				enum tpt_release_why why)
{
	if (s) {
		tpt_release_matching(s, tlu, why);
		return;
	}
	for (s = tpt_session_first(); s; s = tpt_session_next(s))
		tpt_release_matching(s, tlu, why);
}

/* ---- idle timeout ---- */

/*
 * A nexus that has sent a command within this many seconds is active: its
 * groups age.  One that has gone quiet is not ending its requests, it has
 * lost its controller (a link out, the controller hung or gone): the
 * groups wait, and WRITE NEW DATA still finds them when the link is back.
 * A controller that is gone for good ends the nexus (8.3), and the nexus's
 * buffers are bounded meanwhile (tpt_session_pool_mb).
 */
#define TPT_NEXUS_ACTIVE 3

static struct tgt_work timeout_work;

void tpt_session_heard(struct tpt_session *s)
{
	s->heard = now_seconds();
}

static void tpt_group_timeouts(void *data)
{
	uint64_t now = now_seconds();
	struct tpt_session *s;

	(void)data;
	for (s = tpt_session_first(); s; s = tpt_session_next(s)) {
		struct tpt_group *g, *tmp;

		if (now - s->heard < TPT_NEXUS_ACTIVE)
			s->clock++;
		list_for_each_entry_safe(g, tmp, &s->groups, link) {
			if (g->inflight || g->doomed ||
			    s->clock - g->last_used < g->tlu->group_timeout)
				continue;
			eprintf("tpt: group %u of nexus %" PRIu64 " idle for "
				"%us of the nexus's activity: releasing its "
				"buffers\n", g->number, s->itn_id,
				g->tlu->group_timeout);
			tpt_group_release(g, TPT_RELEASE_TIMEOUT);
		}
	}
	add_work(&timeout_work, 1);
}

void tpt_group_timeouts_start(void)
{
	timeout_work.func = tpt_group_timeouts;
	add_work(&timeout_work, 1);
}

/* ---- ranges ---- */

enum tpt_sense_reason tpt_range_alloc(struct tpt_group *g, uint64_t lba,
				      uint32_t nr_blocks, uint16_t slot,
				      bool lazy, struct tpt_range **out)
{
	struct tpt_session *s = g->session;
	uint64_t bytes = (uint64_t)nr_blocks * tpt_lu_block_size(g->tlu);
	uint32_t granule = slot == TPT_SLOT_NONE ? TPT_PRIVATE_PIECE :
						   s->slot_payload;
	unsigned int i, n;
	struct tpt_range *r;

	/* Slot headers name the LBA of each piece: pieces hold whole blocks. */
	if (!granule || granule % tpt_lu_block_size(g->tlu))
		return TPT_SENSE_INVALID_PARAM_FIELD;
	n = (bytes + granule - 1) / granule;
	if (slot != TPT_SLOT_NONE) {
		if ((uint32_t)slot + n > s->nr_slots)
			return TPT_SENSE_INVALID_PARAM_FIELD;
		for (i = 0; i < n; i++)
			if (s->slots[slot + i].owner)
				return TPT_SENSE_SLOT_IN_USE;
	} else if ((uint64_t)g->held_pieces + n >
		   (uint64_t)tpt_bounds.group_mb * (1u << 20) / granule) {
		return tpt_bound_refuse(s, TPT_BOUND_GROUP_HELD);
	} else if ((uint64_t)s->held_pieces + n >
		   (uint64_t)tpt_bounds.session_mb * (1u << 20) / granule) {
		return tpt_bound_refuse(s, TPT_BOUND_SESSION_HELD);
	}
	r = calloc(1, sizeof(*r) + n * sizeof(r->piece[0]));
	if (!r)
		return TPT_SENSE_POOL_EXHAUSTED;
	INIT_LIST_HEAD(&r->link);
	r->group = g;
	if (slot == TPT_SLOT_NONE) {
		r->held_pieces = n;
		g->held_pieces += n;
		s->held_pieces += n;
		tpt_bound_use.held_pieces += n;
		if (s->held_pieces > tpt_bound_use.peak_session_held_pieces)
			tpt_bound_use.peak_session_held_pieces = s->held_pieces;
	}
	r->lba = lba;
	r->nr_blocks = nr_blocks;
	r->piece_bytes = granule;
	r->nr_pieces = n;
	for (i = 0; i < n; i++) {
		struct tpt_piece *p = &r->piece[i];

		p->len = i + 1 < n ? granule : bytes - (uint64_t)granule * i;
		if (slot != TPT_SLOT_NONE) {
			p->slot = slot + i;
			p->dmb = s->slots[p->slot].dmb;
			s->slots[p->slot].owner = r;
			continue;
		}
		p->slot = -1;
		if (!lazy) {
			int err = tpt_piece_get(r, i);

			if (!err)
				continue;
			r->nr_pieces = i;
			tpt_range_free(r);
			return err == -EDQUOT ?
				tpt_bound_refuse(s, TPT_BOUND_SESSION_POOL) :
				TPT_SENSE_POOL_EXHAUSTED;
		}
	}
	*out = r;
	return TPT_SENSE_NONE;
}

void tpt_range_attach(struct tpt_range *r, unsigned int flags)
{
	r->flags = flags;
	list_add_tail(&r->link, &r->group->ranges);
}

static void tpt_range_destroy(struct tpt_range *r)
{
	struct tpt_session *s = r->group->session;
	unsigned int i;

	r->group->held_pieces -= r->held_pieces;
	s->held_pieces -= r->held_pieces;
	tpt_bound_use.held_pieces -= r->held_pieces;
	for (i = 0; i < r->nr_pieces; i++) {
		struct tpt_piece *p = &r->piece[i];

		if (p->slot < 0) {
			tpt_piece_put(r, i);
			continue;
		}
		if (p->slot < s->nr_slots && s->slots[p->slot].owner == r)
			s->slots[p->slot].owner = NULL;
	}
	free(r);
}

/* A reader arriving late must see the slots are not this data any more
 * (protocol.md, in-slot header). */
static void tpt_range_unpublish(struct tpt_range *r)
{
	unsigned int i;

	for (i = 0; i < r->nr_pieces; i++)
		if (r->piece[i].slot >= 0)
			memset(tpt_dm_buf_addr(r->piece[i].dmb), 0,
			       TPT_SLOT_HDR_LEN);
}

/*
 * Release a range.  One that another command of the group still works
 * with (a disk I/O or transfer on its buffers, an operand to XOR) leaves
 * the group at once but keeps its memory, and its slots stay claimed,
 * until that command lets go (protocol.md 8.3, "a buffer in use"): a
 * controller in error must not make the target use freed memory.
 */
void tpt_range_free(struct tpt_range *r)
{
	if (r->released)
		return;
	list_del_init(&r->link);
	tpt_range_unpublish(r);
	if (r->holders) {
		r->flags = 0;
		r->released = true;
		return;
	}
	tpt_range_destroy(r);
}

void tpt_range_hold(struct tpt_range *r)
{
	r->holders++;
}

void tpt_range_unhold(struct tpt_range *r)
{
	if (!--r->holders && r->released)
		tpt_range_destroy(r);
}

int tpt_piece_get(struct tpt_range *r, unsigned int i)
{
	struct tpt_session *s = r->group->session;
	struct tpt_piece *p = &r->piece[i];
	int err;

	if (p->dmb)
		return 0;
	if (s->pool_bufs >= tpt_bound_session_pool_bufs())
		return -EDQUOT;
	/* Local only, but the local side of Get/Put on the array's links,
	 * which take buffers of their own scope (verbs: their domain). */
	err = tpt_dm_buf_get(tpt_datamover(), s->scope, p->len, 0, &p->dmb);
	if (err == -EAGAIN && !s->pool_logged) {
		/* The controller retries (protocol.md 8.4), maybe for long:
		 * one line per nexus says why it waits. */
		s->pool_logged = true;
		eprintf("tpt: the datamover pool (tpt_pool_mb=%u) is exhausted: "
			"nexus %" PRIu64 " is asked to retry (logged once per "
			"nexus)\n", tpt_datamover_pool_mb(), s->itn_id);
	}
	if (err)
		return err;
	s->pool_bufs++;
	tpt_bound_use.pool_bufs++;
	if (s->pool_bufs > tpt_bound_use.peak_session_pool_bufs)
		tpt_bound_use.peak_session_pool_bufs = s->pool_bufs;
	return 0;
}

void tpt_piece_put(struct tpt_range *r, unsigned int i)
{
	struct tpt_piece *p = &r->piece[i];

	if (p->slot < 0 && p->dmb) {
		tpt_dm_buf_release(p->dmb);
		p->dmb = NULL;
		r->group->session->pool_bufs--;
		tpt_bound_use.pool_bufs--;
	}
}

void tpt_prep_free(struct tpt_prep *p)
{
	list_del(&p->link);
	if (p->range)
		tpt_range_free(p->range);
	free(p->xl);
	free(p->inline_data);
	free(p);
}

struct tpt_range *tpt_range_find(struct tpt_group *g, uint64_t lba,
				 uint32_t nr_blocks, unsigned int flags)
{
	struct tpt_range *r;

	list_for_each_entry(r, &g->ranges, link)
		if (r->lba == lba && r->nr_blocks == nr_blocks &&
		    (r->flags & flags))
			return r;
	return NULL;
}

void *tpt_piece_data(const struct tpt_range *r, unsigned int i)
{
	char *base = tpt_dm_buf_addr(r->piece[i].dmb);

	return r->piece[i].slot < 0 ? base : base + TPT_SLOT_HDR_LEN;
}

void tpt_range_publish(struct tpt_range *r)
{
	uint32_t bs = tpt_lu_block_size(r->group->tlu);
	unsigned int i;

	for (i = 0; i < r->nr_pieces; i++) {
		struct tpt_slot_header h = {
			.state = TPT_SLOT_STATE_VALID,
			.group = r->group->number,
			.length = r->piece[i].len,
			.lba = r->lba + (uint64_t)i * r->piece_bytes / bs,
		};

		if (r->piece[i].slot >= 0)
			tpt_slot_header_encode(&h, tpt_dm_buf_addr(r->piece[i].dmb));
	}
}

uint64_t tpt_range_pass_pos(const struct tpt_range *dst, unsigned int pass)
{
	return (uint64_t)pass * dst->nr_blocks *
	       tpt_lu_block_size(dst->group->tlu);
}

/*
 * Walk the byte intersections of @dst with every source at once, over the
 * same LBAs: ranges whose pieces may have different granules (slots vs
 * private buffers), a source possibly holding several passes back to
 * back.  One ISA-L call per intersection reads each source once and
 * writes @dst once, where folding a pass at a time read and wrote @dst
 * again for every pass (and copied the first).
 */
int tpt_range_fold(struct tpt_range *dst, const struct tpt_fold_src *src,
		   unsigned int n, bool acc, uint8_t acc_gf_exp)
{
	const void *ptr[TPT_XOR_PASSES_MAX + 1];
	uint8_t gf_exp[TPT_XOR_PASSES_MAX + 1];
	uint64_t bytes = (uint64_t)dst->nr_blocks *
			 tpt_lu_block_size(dst->group->tlu);
	uint64_t pos = 0;
	unsigned int k;

	if (!n || n > TPT_XOR_PASSES_MAX + 1)
		return -EINVAL;
	for (k = 0; k < n; k++)
		gf_exp[k] = src[k].gf_exp;
	dst->group->tlu->stats.bytes_xored += (acc ? n : n - 1) * bytes;
	while (pos < bytes) {
		unsigned int di = pos / dst->piece_bytes;
		uint64_t doff = pos - (uint64_t)di * dst->piece_bytes;
		uint64_t len = dst->piece[di].len - doff;
		void *d = (char *)tpt_piece_data(dst, di) + doff;
		int err;

		for (k = 0; k < n; k++) {
			const struct tpt_range *r = src[k].range;
			uint64_t spos = src[k].pos + pos;
			unsigned int si = spos / r->piece_bytes;
			uint64_t soff = spos - (uint64_t)si * r->piece_bytes;

			if (r->piece[si].len - soff < len)
				len = r->piece[si].len - soff;
			ptr[k] = (const char *)tpt_piece_data(r, si) + soff;
		}
		err = acc ? tpt_gf_scale(d, acc_gf_exp, len) : 0;
		if (!err)
			err = tpt_gf_fold(d, ptr, gf_exp, n, len, acc);
		if (err)
			return err;
		pos += len;
	}
	return 0;
}

struct tpt_range *tpt_range_overlapping(struct tpt_group *g, uint64_t lba,
					uint32_t nr_blocks, unsigned int flags)
{
	struct tpt_range *r;

	list_for_each_entry(r, &g->ranges, link)
		if ((r->flags & flags) && r->lba < lba + nr_blocks &&
		    lba < r->lba + r->nr_blocks)
			return r;
	return NULL;
}
