/* tool_model.h: the byte model tpt-iscsi-verify and tpt-direct-verify
 * check a LUN against, and the random requests they put on it.
 *
 * The two tools send their commands through different code (stock
 * libiscsi; libtptinitiator) and keep the model in different places
 * (files mapped from --model DIR; memory), so each keeps its own I/O,
 * loop and summary line.  What both must do alike lives here once:
 * the random source (seeded by --seed, so a run can be repeated), a
 * request's place and size that no request in flight overlaps, its
 * random payload, and the bookkeeping that makes every read checkable
 * when it completes: a block is busy while a request on it is in
 * flight, and unknown from the moment a write to it goes out until
 * that write is acknowledged (a failed write leaves it unknown).
 *
 * Header-only (static inline) so single-file tools can include it
 * without the build knowing about it.  Mismatches go to stderr prefixed
 * with the tool's name, which the caller sets in prog. */
#ifndef TPT_TOOLS_TOOL_MODEL_H
#define TPT_TOOLS_TOOL_MODEL_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Mismatches told on stderr one by one; the rest only count. */
#define MODEL_REPORTED_MAX 16

/* A region of a LUN and what each of its blocks should read.  Blocks
 * are numbered from the region's start. */
struct tool_model {
	const char *prog;
	uint32_t bs;
	uint64_t blocks;
	uint32_t max_blocks;		/* the largest request */
	bool log_sizes;			/* sizes log-uniform, else uniform */
	uint64_t seed;
	uint8_t *data;			/* what each block should read */
	uint8_t *unknown;		/* a byte per block: content unknown */
	uint8_t *busy;			/* a byte per block: in flight */
	bool learning;			/* reads fill data, are not checked */
	/* Mismatch messages also name the block's byte on the LUN. */
	bool say_lun_byte;
	uint64_t base;			/* the region's first byte on the LUN */
	/* Requests walk the region in order, each where the last ended
	 * (wrapping), instead of landing anywhere. */
	bool sequential;
	uint64_t next;			/* sequential: the next block */
	unsigned int inflight;
	uint64_t writes, reads;		/* sent */
	uint64_t mismatches, reported;
};

/* A tool's request, as far as the model is concerned; the tool keeps
 * it in its own, with what its I/O path needs. */
struct model_req {
	uint8_t *buf;			/* room for max_blocks */
	uint64_t blk;
	uint32_t blocks;
	bool write;
	bool busy;			/* sent and not yet completed */
};

/* Seconds on the monotonic clock. */
static inline double model_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* splitmix64: cheap, and the same seed gives the same run. */
static inline uint64_t model_rnd(struct tool_model *m)
{
	uint64_t z = (m->seed += 0x9e3779b97f4a7c15);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
	return z ^ (z >> 31);
}

/* One block to max_blocks.  Log-uniform is a random power of two, then
 * a random size below the next one, so small and large both come up
 * often. */
static inline uint32_t model_pick_size(struct tool_model *m)
{
	unsigned int bits = 0, k;
	uint32_t n;

	if (!m->log_sizes)
		return 1 + (uint32_t)(model_rnd(m) % m->max_blocks);
	while (bits < 31 && (2u << bits) <= m->max_blocks)
		bits++;
	k = (unsigned int)(model_rnd(m) % (bits + 1));
	n = (1u << k) + (uint32_t)(model_rnd(m) % (1u << k));
	return n > m->max_blocks ? m->max_blocks : n;
}

/* A random range of blocks that no request in flight touches; false
 * when a few tries found none (try again once some complete). */
static inline bool model_pick_range(struct tool_model *m, uint64_t *blk,
				    uint32_t *blocks)
{
	unsigned int tries;
	uint32_t i;

	for (tries = 0; tries < 16; tries++) {
		uint32_t n = model_pick_size(m);
		uint64_t at;

		if (n > m->blocks)
			n = (uint32_t)m->blocks;
		if (m->sequential) {
			at = m->next + n <= m->blocks ? m->next : 0;
		} else {
			at = model_rnd(m) % (m->blocks - n + 1);
			/* Often aligned, so whole units and stripes come
			 * up. */
			if (model_rnd(m) % 2)
				at -= at % n;
		}
		for (i = 0; i < n && !m->busy[at + i]; i++)
			;
		if (i == n) {
			*blk = at;
			*blocks = n;
			m->next = at + n;
			return true;
		}
		/* In order or not at all: wait for the blocks ahead. */
		if (m->sequential)
			break;
	}
	return false;
}

/* Random bytes to write, 8 at a time (@len whole blocks). */
static inline void model_fill(struct tool_model *m, uint8_t *buf, size_t len)
{
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t r = model_rnd(m);

		memcpy(buf + i, &r, 8);
	}
}

/* A read of the blocks returned @buf: compares it with the known
 * blocks, or takes it as what they hold while learning. */
static inline void model_check(struct tool_model *m, uint64_t blk,
			       uint32_t blocks, const uint8_t *buf)
{
	uint32_t i;

	for (i = 0; i < blocks; i++) {
		uint64_t b = blk + i;
		const uint8_t *got = buf + (size_t)i * m->bs;

		if (m->learning) {
			memcpy(m->data + b * m->bs, got, m->bs);
			continue;
		}
		if (m->unknown[b] || !memcmp(got, m->data + b * m->bs, m->bs))
			continue;
		m->mismatches++;
		if (m->reported++ >= MODEL_REPORTED_MAX)
			continue;
		if (m->say_lun_byte)
			fprintf(stderr, "%s: block %" PRIu64 " (LUN byte "
				"%" PRIu64 ") does not read back as written\n",
				m->prog, b, m->base + b * m->bs);
		else
			fprintf(stderr, "%s: block %" PRIu64 " does not read "
				"back as written\n", m->prog, b);
	}
}

/* Readies @req to go out, before the tool sends it: a write gets
 * random bytes, and its blocks are unknown until it is acknowledged, so
 * a model kept in files is right whenever the tool stops. */
static inline void model_prepare(struct tool_model *m, struct model_req *req,
				 bool write, uint64_t blk, uint32_t blocks)
{
	req->write = write;
	req->blk = blk;
	req->blocks = blocks;
	if (write) {
		model_fill(m, req->buf, (size_t)blocks * m->bs);
		memset(m->unknown + blk, 1, blocks);
	}
}

/* @req went out: no other request may touch its blocks until it
 * completes. */
static inline void model_sent(struct tool_model *m, struct model_req *req)
{
	memset(m->busy + req->blk, 1, req->blocks);
	req->busy = true;
	m->inflight++;
	if (req->write)
		m->writes++;
	else
		m->reads++;
}

/* @req completed, and succeeded if @ok: a write's blocks now hold what
 * it wrote, a read is checked (or learnt).  A failed write leaves its
 * blocks unknown. */
static inline void model_completed(struct tool_model *m,
				   struct model_req *req, bool ok)
{
	if (ok && req->write) {
		memcpy(m->data + req->blk * m->bs, req->buf,
		       (size_t)req->blocks * m->bs);
		memset(m->unknown + req->blk, 0, req->blocks);
	} else if (ok) {
		model_check(m, req->blk, req->blocks, req->buf);
	}
	memset(m->busy + req->blk, 0, req->blocks);
	req->busy = false;
	m->inflight--;
}

#endif
