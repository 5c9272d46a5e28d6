/* Datamover scopes (tpt_dm.h): one context keeps the registrations of two
 * scopes apart.  A peer admitted into scope B does not reach a scope-A
 * buffer even with its exact STag, while a peer of scope A does; a local
 * buffer of another scope than the peer is refused before anything is
 * posted; a scope's domain closes once its last buffer and peer are gone
 * (under ASan, nothing of it leaks). */
#include "iser/tpt_dm_priv.h"
#include "test/unit/iser/test_dm_harness.h"

#define KIB 1024u
#define LEN (64u * KIB)
#define SCOPE_A 0xa11ce5c0de000001ULL
#define SCOPE_B 0xb0b5c0de00000002ULL
#define PEER_A 1
#define PEER_B 2

static unsigned int scope_count(const struct tpt_dm *dm)
{
	const struct dm_list *pos;
	unsigned int n = 0;

	for (pos = dm->scopes.next; pos != &dm->scopes; pos = pos->next)
		n++;
	return n;
}

static bool scope_open(const struct tpt_dm *dm, uint64_t id)
{
	const struct dm_list *pos;

	for (pos = dm->scopes.next; pos != &dm->scopes; pos = pos->next)
		if (dm_container_of(pos, struct dm_scope, link)->id == id)
			return true;
	return false;
}

/* A passive context with one buffer in each of two scopes, and an active
 * one with a connection admitted into each. */
struct two {
	struct dm_test_policy policy;
	struct tpt_dm *passive, *active;
	struct tpt_dm_buf *in_a, *in_b;	/* passive, remote read and write */
	struct tpt_dm_buf *local;	/* active, default scope */
	struct tpt_dm_peer *peer_a, *peer_b;
	struct dm_test_down active_down, passive_down;
};

static struct tpt_dm_peer *connect_into(struct two *t, uint64_t scope,
					uint16_t peer_id)
{
	struct tpt_dm_peer *peer;
	int status;

	t->policy.scope = scope;
	peer = dm_test_connect(t->active, t->passive, peer_id, &status);
	CHECK_EQ(status, 0);
	return status ? NULL : peer;
}

static bool two_open(struct two *t)
{
	const unsigned int rw = TPT_DM_ACCESS_REMOTE_READ |
				TPT_DM_ACCESS_REMOTE_WRITE;

	memset(t, 0, sizeof(*t));
	t->passive = dm_test_open(true, &t->policy);
	t->active = dm_test_open(false, &t->policy);
	tpt_dm_set_peer_down_cb(t->active, dm_test_down_cb, &t->active_down);
	tpt_dm_set_peer_down_cb(t->passive, dm_test_down_cb,
				&t->passive_down);
	CHECK_EQ(tpt_dm_buf_get(t->passive, SCOPE_A, LEN, rw, &t->in_a), 0);
	CHECK_EQ(tpt_dm_buf_get(t->passive, SCOPE_B, LEN, rw, &t->in_b), 0);
	CHECK_EQ(tpt_dm_buf_get(t->active, 0, LEN, 0, &t->local), 0);
	CHECK_EQ(scope_count(t->passive), 2);
	t->peer_a = connect_into(t, SCOPE_A, PEER_A);
	t->peer_b = connect_into(t, SCOPE_B, PEER_B);
	/* The connections made no scope of their own on the passive side. */
	CHECK_EQ(scope_count(t->passive), 2);
	return t->in_a && t->in_b && t->local && t->peer_a && t->peer_b;
}

static void two_close(struct two *t)
{
	tpt_dm_disconnect(t->peer_a);
	tpt_dm_disconnect(t->peer_b);
	tpt_dm_close(t->active);
	tpt_dm_close(t->passive);
}

/* One transfer through @peer to @remote's STag, run to completion. */
static int transfer(struct two *t, struct tpt_dm_peer *peer, bool put,
		    uint64_t stag, uint64_t rma_addr)
{
	struct dm_test_op op = { 0 };
	int ret;

	if (put)
		ret = tpt_dm_put(peer, t->local, 0, stag, rma_addr, LEN,
				 dm_test_op_cb, &op);
	else
		ret = tpt_dm_get(peer, t->local, 0, stag, rma_addr, LEN,
				 dm_test_op_cb, &op);
	if (ret)
		return ret;
	if (!dm_test_pump2(t->active, t->passive, &op.done))
		return -ETIMEDOUT;
	CHECK_EQ(op.calls, 1);
	return op.status;
}

static int transfer_to(struct two *t, struct tpt_dm_peer *peer, bool put,
		       const struct tpt_dm_buf *remote)
{
	return transfer(t, peer, put, tpt_dm_buf_stag(remote),
			tpt_dm_buf_rma_base(remote));
}

/* What the initiator sees of an access its passive side does not allow:
 * tcp drops the connection, verbs reports a remote access error. */
static void check_refused(int status)
{
	CHECK(status == -ECONNRESET || status == -EACCES);
}

/* Scope B's peer with the exact STag of scope A's buffer, both ways: the
 * access fails, the buffer keeps its bytes, the connection goes; scope
 * A's peer goes on reading and writing it. */
static void other_scope_stag_fails(void)
{
	uint8_t *a_mem, *local_mem;
	struct two t;
	int pass;

	if (!two_open(&t))
		goto out;
	a_mem = tpt_dm_buf_addr(t.in_a);
	local_mem = tpt_dm_buf_addr(t.local);

	/* Each scope's own peer reaches its own buffer. */
	dm_test_fill(a_mem, LEN, 1);
	CHECK_EQ(transfer_to(&t, t.peer_a, false, t.in_a), 0);
	CHECK_MEM(local_mem, a_mem, LEN);
	dm_test_fill(local_mem, LEN, 2);
	CHECK_EQ(transfer_to(&t, t.peer_a, true, t.in_a), 0);
	CHECK_MEM(a_mem, local_mem, LEN);
	CHECK_EQ(transfer_to(&t, t.peer_b, true, t.in_b), 0);
	CHECK_MEM(tpt_dm_buf_addr(t.in_b), local_mem, LEN);

	for (pass = 0; pass < 2; pass++) {
		bool put = pass == 1;
		int passive_downs = t.passive_down.calls;

		dm_test_fill(a_mem, LEN, 3);
		dm_test_fill(local_mem, LEN, 4);
		t.active_down.done = t.passive_down.done = false;
		check_refused(transfer_to(&t, t.peer_b, put, t.in_a));
		/* Nothing of A came out, nothing went in. */
		CHECK(memcmp(local_mem, a_mem, 16) != 0);
		dm_test_fill(local_mem, LEN, 3);
		CHECK_MEM(a_mem, local_mem, LEN);
		/* Both ends lose the connection, and only that one. */
		CHECK(dm_test_pump2(t.active, t.passive,
				    &t.active_down.done));
		CHECK(t.active_down.peer == t.peer_b);
		CHECK(dm_test_pump2(t.active, t.passive,
				    &t.passive_down.done));
		CHECK_EQ(t.passive_down.calls, passive_downs + 1);
		CHECK_EQ(t.passive_down.peer_id, PEER_B);

		/* A's peer is not disturbed. */
		CHECK_EQ(transfer_to(&t, t.peer_a, false, t.in_a), 0);
		CHECK_MEM(local_mem, a_mem, LEN);

		/* B again, for the next pass. */
		tpt_dm_disconnect(t.peer_b);
		t.peer_b = connect_into(&t, SCOPE_B, PEER_B);
		if (!t.peer_b)
			break;
	}
	/* B's peer still reaches B's buffer. */
	if (t.peer_b)
		CHECK_EQ(transfer_to(&t, t.peer_b, false, t.in_b), 0);
	tpt_dm_buf_release(t.local);
	tpt_dm_buf_release(t.in_a);
	tpt_dm_buf_release(t.in_b);
out:
	two_close(&t);
}

/* The same with caller memory registered in scope A (the controller's
 * host data), and with an STag nobody handed out. */
static void other_scope_registration_and_guess_fail(void)
{
	uint8_t *host = calloc(1, LEN);
	struct tpt_dm_buf *reg = NULL;
	struct two t;

	if (!two_open(&t))
		goto out;
	CHECK_EQ(tpt_dm_register(t.passive, SCOPE_A, host, LEN,
				 TPT_DM_ACCESS_REMOTE_READ, &reg), 0);
	if (!reg)
		goto out;
	memset(host, 0x5a, LEN);
	CHECK_EQ(transfer_to(&t, t.peer_a, false, reg), 0);
	CHECK_EQ(((uint8_t *)tpt_dm_buf_addr(t.local))[LEN - 1], 0x5a);
	memset(tpt_dm_buf_addr(t.local), 0, LEN);
	check_refused(transfer_to(&t, t.peer_b, false, reg));
	CHECK_EQ(((uint8_t *)tpt_dm_buf_addr(t.local))[0], 0);
	/* A guess fails in any scope, and costs the guesser its connection:
	 * the real STag with its low bits changed (verbs keys are the low
	 * 32 bits only). */
	check_refused(transfer(&t, t.peer_a, false,
			       tpt_dm_buf_stag(reg) ^ 0xa5,
			       tpt_dm_buf_rma_base(reg)));
	tpt_dm_buf_release(reg);
	tpt_dm_buf_release(t.local);
	tpt_dm_buf_release(t.in_a);
	tpt_dm_buf_release(t.in_b);
out:
	two_close(&t);
	free(host);
}

/* A connection takes local buffers of its own scope only: another scope's
 * is refused with -EINVAL at once, no callback, nothing posted. */
static void local_buffer_of_other_scope_is_einval(void)
{
	struct tpt_dm_buf *remote = NULL, *mine = NULL, *theirs = NULL;
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *passive, *active;
	struct tpt_dm_stats st;
	struct tpt_dm_peer *peer;
	struct dm_test_op op = { 0 };
	int status;

	passive = dm_test_open(true, &policy);
	active = dm_test_open(false, &policy);
	CHECK_EQ(tpt_dm_buf_get(passive, 0, LEN, TPT_DM_ACCESS_REMOTE_READ,
				&remote), 0);
	peer = dm_test_connect_in(active, SCOPE_A, passive, PEER_A, &status);
	CHECK_EQ(status, 0);
	CHECK_EQ(tpt_dm_buf_get(active, SCOPE_A, LEN, 0, &mine), 0);
	CHECK_EQ(tpt_dm_buf_get(active, SCOPE_B, LEN, 0, &theirs), 0);
	if (status || !remote || !mine || !theirs)
		goto out;
	CHECK_EQ(tpt_dm_get(peer, theirs, 0, tpt_dm_buf_stag(remote),
			    tpt_dm_buf_rma_base(remote), LEN, dm_test_op_cb,
			    &op), -EINVAL);
	CHECK_EQ(tpt_dm_put(peer, theirs, 0, tpt_dm_buf_stag(remote),
			    tpt_dm_buf_rma_base(remote), LEN, dm_test_op_cb,
			    &op), -EINVAL);
	CHECK(strstr(tpt_dm_strerror(active), "another scope") != NULL);
	tpt_dm_get_stats(active, &st);
	CHECK_EQ(st.gets + st.puts, 0);
	CHECK_EQ(op.calls, 0);
	/* The default scope is a scope like the others. */
	tpt_dm_buf_release(theirs);
	CHECK_EQ(tpt_dm_buf_get(active, 0, LEN, 0, &theirs), 0);
	CHECK_EQ(tpt_dm_get(peer, theirs, 0, tpt_dm_buf_stag(remote),
			    tpt_dm_buf_rma_base(remote), LEN, NULL, NULL),
		 -EINVAL);
	/* Its own scope's buffer works. */
	CHECK_EQ(tpt_dm_get(peer, mine, 0, tpt_dm_buf_stag(remote),
			    tpt_dm_buf_rma_base(remote), LEN, dm_test_op_cb,
			    &op), 0);
	CHECK(dm_test_pump2(active, passive, &op.done));
	CHECK_EQ(op.status, 0);
out:
	tpt_dm_buf_release(mine);
	tpt_dm_buf_release(theirs);
	tpt_dm_buf_release(remote);
	tpt_dm_disconnect(peer);
	tpt_dm_close(active);
	tpt_dm_close(passive);
}

/* Scopes open with their first buffer or peer and close with the last,
 * on both sides of a connection. */
static void scopes_close_when_empty(void)
{
	struct tpt_dm_buf *a1 = NULL, *a2 = NULL, *user = NULL;
	struct dm_test_policy policy = { 0 };
	struct dm_test_down passive_down = { 0 };
	struct tpt_dm *passive, *active;
	struct tpt_dm_peer *peer;
	uint8_t *mem = malloc(LEN);
	int status;

	passive = dm_test_open(true, &policy);
	active = dm_test_open(false, &policy);
	tpt_dm_set_peer_down_cb(passive, dm_test_down_cb, &passive_down);
	CHECK_EQ(scope_count(passive), 0);
	CHECK_EQ(scope_count(active), 0);

	/* Buffers: the scope lives as long as any of them. */
	CHECK_EQ(tpt_dm_buf_get(passive, SCOPE_A, LEN, 0, &a1), 0);
	CHECK_EQ(tpt_dm_register(passive, SCOPE_A, mem, LEN, 0, &user), 0);
	CHECK_EQ(scope_count(passive), 1);
	CHECK(scope_open(passive, SCOPE_A));
	tpt_dm_buf_release(a1);
	CHECK(scope_open(passive, SCOPE_A));
	tpt_dm_buf_release(user);
	CHECK_EQ(scope_count(passive), 0);
	/* A failed get leaves no scope behind. */
	CHECK_EQ(tpt_dm_buf_get(passive, SCOPE_B, DM_TEST_POOL_BUF + 1, 0,
				&a1), -EINVAL);
	CHECK_EQ(tpt_dm_buf_get(passive, SCOPE_B, 0, 0, &a1), -EINVAL);
	CHECK_EQ(scope_count(passive), 0);

	/* Peers: an accepted one holds the scope it was admitted into
	 * until it is gone, a connected one until it is disconnected. */
	CHECK_EQ(tpt_dm_buf_get(passive, SCOPE_A, LEN, 0, &a2), 0);
	policy.scope = SCOPE_B;
	peer = dm_test_connect_in(active, SCOPE_A, passive, PEER_A, &status);
	CHECK_EQ(status, 0);
	CHECK_EQ(scope_count(passive), 2);
	CHECK(scope_open(passive, SCOPE_B));
	CHECK_EQ(scope_count(active), 1);
	CHECK(scope_open(active, SCOPE_A));
	tpt_dm_disconnect(peer);
	CHECK_EQ(scope_count(active), 0);
	CHECK(dm_test_pump2(active, passive, &passive_down.done));
	/* The accepted peer is freed at the end of the progress call that
	 * saw it go, and its scope with it. */
	CHECK_EQ(scope_count(passive), 1);
	CHECK(scope_open(passive, SCOPE_A));
	tpt_dm_buf_release(a2);
	CHECK_EQ(scope_count(passive), 0);

	/* What is left at close is closed with it. */
	CHECK_EQ(tpt_dm_buf_get(active, SCOPE_B, LEN, 0, &a1), 0);
	CHECK_EQ(tpt_dm_register(active, SCOPE_A, mem, LEN, 0, &user), 0);
	CHECK_EQ(scope_count(active), 2);
	tpt_dm_close(active);
	tpt_dm_close(passive);
	free(mem);
}

int main(void)
{
	dm_test_require_provider();
	RUN(other_scope_stag_fails);
	RUN(other_scope_registration_and_guess_fail);
	RUN(local_buffer_of_other_scope_is_einval);
	RUN(scopes_close_when_empty);
	UNIT_EXIT();
}
