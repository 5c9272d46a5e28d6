/* Put_Data / Get_Data between two datamover contexts on loopback: byte
 * exact transfers at and around the chunk size, many ops queued behind
 * the in-flight limit, pool back-pressure, pool buffers that expose only
 * the length asked for, access rights and stale STags
 * (paper III-G: Register_Buffer / Deregister_Buffer / Put_Data /
 * Get_Data). */
#include "iser/tpt_dm_priv.h"
#include "test/unit/iser/test_dm_harness.h"

#define KIB 1024u
#define MIB (1024u * 1024u)
#define CHUNK DM_TEST_CHUNK	/* the harness's chunk_bytes */

struct pair {
	struct dm_test_policy policy;
	struct tpt_dm *passive;	/* lends buffers, like a host */
	struct tpt_dm *active;	/* moves the data, like a target */
	struct tpt_dm_peer *peer;
	struct dm_test_down active_down, passive_down;
};

static bool pair_open(struct pair *p)
{
	int status;

	memset(p, 0, sizeof(*p));
	p->passive = dm_test_open(true, &p->policy);
	p->active = dm_test_open(false, &p->policy);
	tpt_dm_set_peer_down_cb(p->active, dm_test_down_cb, &p->active_down);
	tpt_dm_set_peer_down_cb(p->passive, dm_test_down_cb, &p->passive_down);
	p->peer = dm_test_connect(p->active, p->passive, DM_TEST_PEER_ID,
				  &status);
	CHECK_EQ(status, 0);
	return p->peer && !status;
}

static void pair_close(struct pair *p)
{
	tpt_dm_disconnect(p->peer);
	tpt_dm_close(p->active);
	tpt_dm_close(p->passive);
}

/* One transfer, run to completion; returns its status. */
static int transfer(struct pair *p, bool put, struct tpt_dm_buf *local,
		    size_t local_off, struct tpt_dm_buf *remote,
		    size_t remote_off, size_t len)
{
	struct dm_test_op op = { 0 };
	uint64_t addr = tpt_dm_buf_rma_base(remote) + remote_off;
	int ret;

	if (put)
		ret = tpt_dm_put(p->peer, local, local_off,
				 tpt_dm_buf_stag(remote), addr, len,
				 dm_test_op_cb, &op);
	else
		ret = tpt_dm_get(p->peer, local, local_off,
				 tpt_dm_buf_stag(remote), addr, len,
				 dm_test_op_cb, &op);
	if (ret)
		return ret;
	if (!dm_test_pump2(p->active, p->passive, &op.done))
		return -ETIMEDOUT;
	CHECK_EQ(op.calls, 1);
	return op.status;
}

static void put_and_get_sizes(void)
{
	static const size_t sizes[] = { 4 * KIB, 1 * MIB, 3 * MIB + MIB / 2 };
	struct tpt_dm_buf *local, *remote;
	struct tpt_dm_stats before, after;
	uint8_t *expect;
	struct pair p;
	size_t i;

	if (!pair_open(&p))
		goto out;
	expect = malloc(DM_TEST_POOL_BUF);
	CHECK_EQ(tpt_dm_buf_get(p.active, 0, DM_TEST_POOL_BUF, 0, &local), 0);
	CHECK_EQ(tpt_dm_buf_get(p.passive, 0, DM_TEST_POOL_BUF,
				TPT_DM_ACCESS_REMOTE_READ |
				TPT_DM_ACCESS_REMOTE_WRITE, &remote), 0);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i], chunks = (len + CHUNK - 1) / CHUNK;
		/* Odd offsets on both sides catch off-by-chunk errors. */
		size_t local_off = 4 * KIB + 3 * i, remote_off = 8 * KIB + i;

		/* Put_Data: the passive side's buffer gets our bytes, and
		 * nothing around them changes. */
		dm_test_fill(tpt_dm_buf_addr(local), DM_TEST_POOL_BUF,
			     (uint32_t)(1 + i));
		memset(tpt_dm_buf_addr(remote), 0x5a, DM_TEST_POOL_BUF);
		tpt_dm_get_stats(p.active, &before);
		CHECK_EQ(transfer(&p, true, local, local_off, remote,
				  remote_off, len), 0);
		tpt_dm_get_stats(p.active, &after);
		CHECK_MEM((uint8_t *)tpt_dm_buf_addr(remote) + remote_off,
			  (uint8_t *)tpt_dm_buf_addr(local) + local_off, len);
		CHECK_EQ(((uint8_t *)tpt_dm_buf_addr(remote))[remote_off - 1],
			 0x5a);
		CHECK_EQ(((uint8_t *)tpt_dm_buf_addr(remote))[remote_off + len],
			 0x5a);
		CHECK_EQ(after.puts - before.puts, 1);
		CHECK_EQ(after.rma_ops - before.rma_ops, chunks);
		CHECK_EQ(after.bytes_put - before.bytes_put, len);

		/* Get_Data: fresh bytes over there come back here. */
		dm_test_fill(tpt_dm_buf_addr(remote), DM_TEST_POOL_BUF,
			     (uint32_t)(100 + i));
		memcpy(expect, tpt_dm_buf_addr(local), DM_TEST_POOL_BUF);
		memcpy(expect + local_off,
		       (uint8_t *)tpt_dm_buf_addr(remote) + remote_off, len);
		tpt_dm_get_stats(p.active, &before);
		CHECK_EQ(transfer(&p, false, local, local_off, remote,
				  remote_off, len), 0);
		tpt_dm_get_stats(p.active, &after);
		CHECK_MEM(tpt_dm_buf_addr(local), expect, DM_TEST_POOL_BUF);
		CHECK_EQ(after.gets - before.gets, 1);
		CHECK_EQ(after.rma_ops - before.rma_ops, chunks);
		CHECK_EQ(after.bytes_got - before.bytes_got, len);
	}
	tpt_dm_buf_release(local);
	tpt_dm_buf_release(remote);
	free(expect);
out:
	pair_close(&p);
}

/* More ops than chunk slots: they queue FIFO and all finish. */
static void many_ops_in_flight(void)
{
	enum { OPS = 48, LEN = 3 * CHUNK / 2 };
	struct tpt_dm_buf *local, *remote;
	struct dm_test_group group = { .left = OPS };
	struct pair p;
	int i;

	if (!pair_open(&p))
		goto out;
	CHECK_EQ(tpt_dm_buf_get(p.active, 0, DM_TEST_POOL_BUF, 0, &local), 0);
	CHECK_EQ(tpt_dm_buf_get(p.passive, 0, DM_TEST_POOL_BUF,
				TPT_DM_ACCESS_REMOTE_WRITE, &remote), 0);
	dm_test_fill(tpt_dm_buf_addr(local), DM_TEST_POOL_BUF, 42);
	memset(tpt_dm_buf_addr(remote), 0, DM_TEST_POOL_BUF);
	/* 48 x 384 KiB spread over the 4 MiB buffer: later ops overwrite
	 * earlier ones' ranges with the same bytes. */
	for (i = 0; i < OPS; i++) {
		size_t off = (size_t)i * 64 * KIB;

		CHECK_EQ(tpt_dm_put(p.peer, local, off, tpt_dm_buf_stag(remote),
				    tpt_dm_buf_rma_base(remote) + off, LEN,
				    dm_test_group_cb, &group), 0);
	}
	CHECK(dm_test_pump2(p.active, p.passive, &group.done));
	CHECK_EQ(group.failed, 0);
	CHECK_MEM(tpt_dm_buf_addr(remote), tpt_dm_buf_addr(local),
		  (OPS - 1) * 64 * KIB + LEN);
	tpt_dm_buf_release(local);
	tpt_dm_buf_release(remote);
out:
	pair_close(&p);
}

/* A provider queue that is full (-FI_EAGAIN) holds chunks back until
 * progress retries them: first with nothing of ours in flight (only the
 * wake-up can bring us back), then in the middle of a pipeline. */
static void provider_queue_full(void)
{
	enum { OPS = 6, LEN = 5 * CHUNK / 2 };
	struct tpt_dm_buf *local, *remote;
	struct dm_test_group group = { .left = OPS };
	struct dm_test_op first = { 0 };
	struct tpt_dm_stats st;
	struct pair p;
	int i;

	if (!pair_open(&p))
		goto out;
	CHECK_EQ(tpt_dm_buf_get(p.active, 0, DM_TEST_POOL_BUF, 0, &local), 0);
	CHECK_EQ(tpt_dm_buf_get(p.passive, 0, DM_TEST_POOL_BUF,
				TPT_DM_ACCESS_REMOTE_WRITE |
				TPT_DM_ACCESS_REMOTE_READ, &remote), 0);
	dm_test_fill(tpt_dm_buf_addr(local), DM_TEST_POOL_BUF, 5);
	memset(tpt_dm_buf_addr(remote), 0, DM_TEST_POOL_BUF);

	p.active->inject_post_eagain = 3;
	CHECK_EQ(tpt_dm_put(p.peer, local, 0, tpt_dm_buf_stag(remote),
			    tpt_dm_buf_rma_base(remote), LEN, dm_test_op_cb,
			    &first), 0);
	tpt_dm_get_stats(p.active, &st);
	CHECK_EQ(st.rma_ops, 0);
	CHECK(dm_test_pump2(p.active, p.passive, &first.done));
	CHECK_EQ(first.status, 0);
	CHECK_MEM(tpt_dm_buf_addr(remote), tpt_dm_buf_addr(local), LEN);

	memset(tpt_dm_buf_addr(remote), 0, DM_TEST_POOL_BUF);
	for (i = 0; i < OPS; i++) {
		size_t off = (size_t)i * LEN;

		CHECK_EQ(tpt_dm_put(p.peer, local, off, tpt_dm_buf_stag(remote),
				    tpt_dm_buf_rma_base(remote) + off, LEN,
				    dm_test_group_cb, &group), 0);
		/* Refusals land in the middle of the pipeline too. */
		if (i == 2)
			p.active->inject_post_eagain = 4;
	}
	CHECK(dm_test_pump2(p.active, p.passive, &group.done));
	CHECK_EQ(group.failed, 0);
	CHECK_MEM(tpt_dm_buf_addr(remote), tpt_dm_buf_addr(local), OPS * LEN);
	tpt_dm_buf_release(local);
	tpt_dm_buf_release(remote);
out:
	pair_close(&p);
}

static void pool_back_pressure(void)
{
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *dm = dm_test_open(false, &policy);
	struct tpt_dm_buf *bufs[DM_TEST_POOL_BUFS], *extra = NULL;
	struct tpt_dm_stats st;
	uint64_t old_stag;
	unsigned int i;

	CHECK_EQ(tpt_dm_buf_get(dm, 0, DM_TEST_POOL_BUF + 1, 0, &extra),
		 -EINVAL);
	CHECK_EQ(tpt_dm_buf_get(dm, 0, 1, 0x80, &extra), -EINVAL);
	for (i = 0; i < DM_TEST_POOL_BUFS; i++) {
		int ret = tpt_dm_buf_get(dm, 0, 1 + i * 1000,
					 TPT_DM_ACCESS_REMOTE_READ, &bufs[i]);

		CHECK_EQ(ret, 0);
		CHECK(tpt_dm_buf_len(bufs[i]) >= 1 + i * 1000);
	}
	CHECK_EQ(tpt_dm_buf_get(dm, 0, 4096, 0, &extra), -EAGAIN);
	CHECK(extra == NULL);
	CHECK_EQ(tpt_dm_buf_get(dm, 0, 4096, 0, &extra), -EAGAIN);
	tpt_dm_get_stats(dm, &st);
	CHECK_EQ(st.pool_exhausted, 2);
	/* Distinct buffers, distinct STags. */
	for (i = 1; i < DM_TEST_POOL_BUFS; i++) {
		CHECK(tpt_dm_buf_addr(bufs[i]) != tpt_dm_buf_addr(bufs[0]));
		CHECK(tpt_dm_buf_stag(bufs[i]) != tpt_dm_buf_stag(bufs[0]));
	}
	old_stag = tpt_dm_buf_stag(bufs[2]);
	tpt_dm_buf_release(bufs[2]);
	CHECK_EQ(tpt_dm_buf_get(dm, 0, 4096, TPT_DM_ACCESS_REMOTE_WRITE,
				&extra), 0);
	CHECK(extra != NULL);
	/* Recycled memory, but never under the old STag. */
	if (extra)
		CHECK(tpt_dm_buf_stag(extra) != old_stag);
	tpt_dm_buf_release(extra);
	for (i = 0; i < DM_TEST_POOL_BUFS; i++)
		if (i != 2)
			tpt_dm_buf_release(bufs[i]);
	tpt_dm_close(dm);
}

/* A pool buffer handed out for N bytes is registered for N bytes: the
 * rest of the pool buffer, whatever an earlier request left in it, is out
 * of reach of peers and of our own transfers alike. */
static void pool_buffer_exposes_only_its_length(void)
{
	enum { ASKED = 10000 };
	struct tpt_dm_buf *local, *remote;
	uint8_t *rest;
	struct pair p;
	int status;

	if (!pair_open(&p))
		goto out;
	CHECK_EQ(tpt_dm_buf_get(p.active, 0, ASKED, 0, &local), 0);
	CHECK_EQ(tpt_dm_buf_get(p.passive, 0, ASKED,
				TPT_DM_ACCESS_REMOTE_READ, &remote), 0);
	CHECK_EQ(tpt_dm_buf_len(local), ASKED);
	CHECK_EQ(tpt_dm_buf_len(remote), ASKED);
	/* Bytes an earlier user of the pool buffer left past ASKED. */
	rest = (uint8_t *)tpt_dm_buf_addr(remote) + ASKED;
	memset(rest, 0xee, 4096);
	dm_test_fill(tpt_dm_buf_addr(remote), ASKED, 11);
	CHECK_EQ(transfer(&p, false, local, 0, remote, 0, ASKED), 0);
	CHECK_MEM(tpt_dm_buf_addr(local), tpt_dm_buf_addr(remote), ASKED);
	/* Locally nothing past ASKED, before anything is posted. */
	CHECK_EQ(tpt_dm_get(p.peer, local, 1, tpt_dm_buf_stag(remote),
			    tpt_dm_buf_rma_base(remote), ASKED, NULL, NULL),
		 -EINVAL);
	CHECK_EQ(tpt_dm_get(p.peer, local, ASKED, tpt_dm_buf_stag(remote),
			    tpt_dm_buf_rma_base(remote), 1, NULL, NULL),
		 -EINVAL);
	/* Remotely the registration ends at ASKED: reading one byte past
	 * it fails like a wrong STag. */
	tpt_dm_buf_release(local);
	CHECK_EQ(tpt_dm_buf_get(p.active, 0, DM_TEST_POOL_BUF, 0, &local), 0);
	memset(tpt_dm_buf_addr(local), 0, 2 * ASKED);
	status = transfer(&p, false, local, 0, remote, ASKED, 16);
	CHECK(status == -ECONNRESET || status == -EACCES);
	CHECK_EQ(((uint8_t *)tpt_dm_buf_addr(local))[0], 0);
	tpt_dm_buf_release(local);
	tpt_dm_buf_release(remote);
out:
	pair_close(&p);
}

static void caller_memory(void)
{
	enum { LEN = 600 * KIB + 17 };
	struct tpt_dm_buf *local, *remote;
	uint8_t *host_mem = malloc(LEN), *data = malloc(LEN);
	struct pair p;

	if (!pair_open(&p))
		goto out;
	/* The controller's or a host's own memory, registered in place. */
	CHECK_EQ(tpt_dm_register(p.passive, 0, host_mem, LEN,
				 TPT_DM_ACCESS_REMOTE_WRITE |
				 TPT_DM_ACCESS_REMOTE_READ, &remote), 0);
	CHECK_EQ(tpt_dm_register(p.active, 0, data, LEN, 0, &local), 0);
	CHECK(tpt_dm_buf_addr(remote) == host_mem);
	CHECK_EQ(tpt_dm_buf_len(remote), LEN);
	dm_test_fill(data, LEN, 7);
	memset(host_mem, 0, LEN);
	CHECK_EQ(transfer(&p, true, local, 0, remote, 0, LEN), 0);
	CHECK_MEM(host_mem, data, LEN);
	/* Local range checks: nothing leaves a registered region. */
	CHECK_EQ(tpt_dm_put(p.peer, local, 1, tpt_dm_buf_stag(remote),
			    tpt_dm_buf_rma_base(remote), LEN, NULL, NULL),
		 -EINVAL);
	CHECK_EQ(tpt_dm_get(p.peer, local, 0, tpt_dm_buf_stag(remote),
			    tpt_dm_buf_rma_base(remote), 0, NULL, NULL),
		 -EINVAL);
	tpt_dm_buf_release(local);
	tpt_dm_buf_release(remote);
out:
	pair_close(&p);
	free(host_mem);
	free(data);
}

/* An access the passive side did not grant must fail on the initiator
 * (and, on a connected endpoint, costs the connection). */
static void access_is_enforced(void)
{
	struct tpt_dm_buf *local, *read_only;
	struct pair p;
	int status;

	if (!pair_open(&p))
		goto out;
	CHECK_EQ(tpt_dm_buf_get(p.active, 0, 64 * KIB, 0, &local), 0);
	CHECK_EQ(tpt_dm_buf_get(p.passive, 0, 64 * KIB,
				TPT_DM_ACCESS_REMOTE_READ, &read_only), 0);
	CHECK_EQ(transfer(&p, false, local, 0, read_only, 0, 64 * KIB), 0);
	memset(tpt_dm_buf_addr(read_only), 0x77, 64 * KIB);
	dm_test_fill(tpt_dm_buf_addr(local), 64 * KIB, 3);
	status = transfer(&p, true, local, 0, read_only, 0, 64 * KIB);
	CHECK(status < 0);
	CHECK(status != -ETIMEDOUT);
	CHECK_EQ(((uint8_t *)tpt_dm_buf_addr(read_only))[0], 0x77);
	CHECK(dm_test_pump2(p.active, p.passive, &p.active_down.done));
	CHECK(p.active_down.peer == p.peer);
	tpt_dm_buf_release(local);
	tpt_dm_buf_release(read_only);
out:
	pair_close(&p);
}

/* Deregister_Buffer: an STag handed out before the release must not reach
 * the memory any more, whether it is recycled or not. */
static void stale_stag_after_release(void)
{
	struct tpt_dm_buf *local, *remote, *reused;
	uint64_t stale_stag, stale_addr;
	struct dm_test_op op = { 0 };
	int pass;

	for (pass = 0; pass < 2; pass++) {
		bool put = pass == 0;
		struct pair p;

		if (!pair_open(&p)) {
			pair_close(&p);
			continue;
		}
		CHECK_EQ(tpt_dm_buf_get(p.active, 0, 64 * KIB, 0, &local), 0);
		CHECK_EQ(tpt_dm_buf_get(p.passive, 0, 64 * KIB,
					TPT_DM_ACCESS_REMOTE_READ |
					TPT_DM_ACCESS_REMOTE_WRITE, &remote),
			 0);
		dm_test_fill(tpt_dm_buf_addr(local), 64 * KIB, 9);
		CHECK_EQ(transfer(&p, put, local, 0, remote, 0, 64 * KIB), 0);
		stale_stag = tpt_dm_buf_stag(remote);
		stale_addr = tpt_dm_buf_rma_base(remote);
		tpt_dm_buf_release(remote);
		/* The pool hands the same memory out again at once. */
		CHECK_EQ(tpt_dm_buf_get(p.passive, 0, 64 * KIB,
					TPT_DM_ACCESS_REMOTE_READ |
					TPT_DM_ACCESS_REMOTE_WRITE, &reused),
			 0);
		memset(tpt_dm_buf_addr(reused), 0x33, 64 * KIB);

		memset(&op, 0, sizeof(op));
		if (put)
			CHECK_EQ(tpt_dm_put(p.peer, local, 0, stale_stag,
					    stale_addr, 64 * KIB,
					    dm_test_op_cb, &op), 0);
		else
			CHECK_EQ(tpt_dm_get(p.peer, local, 0, stale_stag,
					    stale_addr, 64 * KIB,
					    dm_test_op_cb, &op), 0);
		CHECK(dm_test_pump2(p.active, p.passive, &op.done));
		CHECK(op.status < 0);
		CHECK_EQ(op.calls, 1);
		CHECK_EQ(((uint8_t *)tpt_dm_buf_addr(reused))[0], 0x33);
		CHECK_EQ(((uint8_t *)tpt_dm_buf_addr(reused))[64 * KIB - 1],
			 0x33);
		/* Both ends learn that the connection is gone. */
		CHECK(dm_test_pump2(p.active, p.passive,
				    &p.passive_down.done));
		CHECK_EQ(p.active_down.calls, 1);
		CHECK_EQ(p.passive_down.calls, 1);
		CHECK_EQ(p.passive_down.peer_id, DM_TEST_PEER_ID);
		/* A dead peer takes no new work. */
		CHECK_EQ(tpt_dm_put(p.peer, local, 0, stale_stag, stale_addr,
				    64, NULL, NULL), -ENOTCONN);
		tpt_dm_buf_release(local);
		tpt_dm_buf_release(reused);
		pair_close(&p);
	}
}

int main(void)
{
	dm_test_require_provider();
	RUN(put_and_get_sizes);
	RUN(many_ops_in_flight);
	RUN(provider_queue_full);
	RUN(pool_back_pressure);
	RUN(pool_buffer_exposes_only_its_length);
	RUN(caller_memory);
	RUN(access_is_enforced);
	RUN(stale_stag_after_release);
	UNIT_EXIT();
}
