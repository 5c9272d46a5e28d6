/* Datamover failure paths: the passive side going away with transfers
 * outstanding (paper III-D: "the passive target may be down") or going
 * silent (the stall limit), closing or disconnecting with transfers in
 * flight, callbacks that tear things down themselves, and the bounded
 * operation table. */
#include "test/unit/iser/test_dm_harness.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB 1024u
#define BIG (3u * 1024u * 1024u + 512u * 1024u)

struct pair {
	struct dm_test_policy policy;
	struct tpt_dm *passive;
	struct tpt_dm *active;
	struct tpt_dm_peer *peer;
	struct dm_test_down active_down, passive_down;
	struct tpt_dm_buf *local, *remote;
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
	CHECK_EQ(tpt_dm_buf_get(p->active, 0, DM_TEST_POOL_BUF, 0, &p->local),
		 0);
	CHECK_EQ(tpt_dm_buf_get(p->passive, 0, DM_TEST_POOL_BUF,
				TPT_DM_ACCESS_REMOTE_READ |
				TPT_DM_ACCESS_REMOTE_WRITE, &p->remote), 0);
	return p->peer && !status && p->local && p->remote;
}

/* Gets and puts of BIG bytes that cannot finish while the passive side
 * does not progress: a read needs its answer, and a write its delivery
 * acknowledgement. */
static void start_ops(struct pair *p, int count, struct dm_test_group *g)
{
	int i, ret;

	g->left = count;
	for (i = 0; i < count; i++) {
		if (i % 2)
			ret = tpt_dm_put(p->peer, p->local, 0,
					 tpt_dm_buf_stag(p->remote),
					 tpt_dm_buf_rma_base(p->remote), BIG,
					 dm_test_group_cb, g);
		else
			ret = tpt_dm_get(p->peer, p->local, 0,
					 tpt_dm_buf_stag(p->remote),
					 tpt_dm_buf_rma_base(p->remote), BIG,
					 dm_test_group_cb, g);
		CHECK_EQ(ret, 0);
	}
}

/* The peer-down callback comes after every op has been failed. */
struct ordered_down {
	struct dm_test_down down;
	struct dm_test_group *group;
	int ops_left_at_down;
};

static void ordered_down_cb(struct tpt_dm_peer *peer, void *arg)
{
	struct ordered_down *od = arg;

	od->ops_left_at_down = od->group->left;
	dm_test_down_cb(peer, &od->down);
}

static void passive_close_fails_outstanding(void)
{
	struct dm_test_group group = { 0 };
	struct ordered_down od = { .group = &group, .ops_left_at_down = -1 };
	struct pair p;

	if (!pair_open(&p))
		return;
	tpt_dm_set_peer_down_cb(p.active, ordered_down_cb, &od);
	start_ops(&p, 6, &group);
	/* The passive side vanishes without ever serving them. */
	tpt_dm_close(p.passive);
	CHECK(dm_test_pump2(p.active, NULL, &group.done));
	CHECK_EQ(group.failed, 6);
	CHECK_EQ(group.last_status, -ECONNRESET);
	CHECK(dm_test_pump2(p.active, NULL, &od.down.done));
	CHECK_EQ(od.down.calls, 1);
	CHECK(od.down.peer == p.peer);
	CHECK_EQ(od.ops_left_at_down, 0);
	CHECK_EQ(tpt_dm_get(p.peer, p.local, 0, 1, 0, 16, NULL, NULL),
		 -ENOTCONN);
	tpt_dm_buf_release(p.local);
	tpt_dm_disconnect(p.peer);
	tpt_dm_close(p.active);
}

/* The same with a real process that dies: the kernel closes its socket. */
static void passive_process_dies(void)
{
	struct dm_test_group group = { 0 };
	struct dm_test_down down = { 0 };
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *active;
	struct tpt_dm_buf *local;
	struct tpt_dm_peer *peer;
	struct tpt_dm_hello hello = dm_test_hello(DM_TEST_PEER_ID);
	struct dm_test_connect c = { 0 };
	uint64_t lent[3];	/* port, stag, rma base */
	int to_parent[2], to_child[2], i, wstatus;
	pid_t child;

	CHECK_EQ(pipe(to_parent), 0);
	CHECK_EQ(pipe(to_child), 0);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		struct tpt_dm *passive = dm_test_open(true, &policy);
		struct tpt_dm_buf *buf;
		struct pollfd pfd[2];

		if (tpt_dm_buf_get(passive, 0, DM_TEST_POOL_BUF,
				   TPT_DM_ACCESS_REMOTE_READ |
				   TPT_DM_ACCESS_REMOTE_WRITE, &buf))
			_exit(2);
		lent[0] = tpt_dm_listen_port(passive);
		lent[1] = tpt_dm_buf_stag(buf);
		lent[2] = tpt_dm_buf_rma_base(buf);
		if (write(to_parent[1], lent, sizeof(lent)) != sizeof(lent))
			_exit(2);
		/* Serve until the parent says it is connected, then play
		 * dead: no more progress, and later the kill. */
		pfd[0].fd = tpt_dm_event_fd(passive);
		pfd[1].fd = to_child[0];
		pfd[0].events = pfd[1].events = POLLIN;
		while (poll(pfd, 2, DM_TEST_DEADLINE_MS) > 0 &&
		       !(pfd[1].revents & POLLIN))
			tpt_dm_progress(passive);
		pause();
		_exit(0);
	}
	CHECK_EQ(read(to_parent[0], lent, sizeof(lent)), sizeof(lent));
	active = dm_test_open(false, &policy);
	tpt_dm_set_peer_down_cb(active, dm_test_down_cb, &down);
	CHECK_EQ(tpt_dm_connect(active, 0, "127.0.0.1", (uint16_t)lent[0],
				&hello, dm_test_connect_cb, &c, &peer), 0);
	CHECK(dm_test_pump2(active, NULL, &c.done));
	CHECK_EQ(c.status, 0);
	CHECK_EQ(write(to_child[1], "x", 1), 1);
	CHECK_EQ(tpt_dm_buf_get(active, 0, DM_TEST_POOL_BUF, 0, &local), 0);
	group.left = 4;
	for (i = 0; i < 4; i++)
		CHECK_EQ(tpt_dm_get(peer, local, 0, lent[1], lent[2], BIG,
				    dm_test_group_cb, &group), 0);
	kill(child, SIGKILL);
	waitpid(child, &wstatus, 0);
	CHECK(dm_test_pump2(active, NULL, &group.done));
	CHECK_EQ(group.failed, 4);
	CHECK_EQ(group.last_status, -ECONNRESET);
	CHECK(dm_test_pump2(active, NULL, &down.done));
	CHECK(down.peer == peer);
	tpt_dm_buf_release(local);
	tpt_dm_disconnect(peer);
	tpt_dm_close(active);
	close(to_parent[0]);
	close(to_parent[1]);
	close(to_child[0]);
	close(to_child[1]);
}

static void close_with_ops_in_flight(void)
{
	struct dm_test_group group = { 0 };
	struct pair p;

	if (!pair_open(&p))
		return;
	start_ops(&p, 5, &group);
	/* Every callback runs, inside the close. */
	tpt_dm_close(p.active);
	CHECK(group.done);
	CHECK_EQ(group.failed, 5);
	CHECK_EQ(group.last_status, -ECANCELED);
	CHECK_EQ(p.active_down.calls, 0);
	/* The other side sees its accepted peer go. */
	CHECK(dm_test_pump2(p.passive, NULL, &p.passive_down.done));
	CHECK_EQ(p.passive_down.peer_id, DM_TEST_PEER_ID);
	tpt_dm_close(p.passive);
}

static void disconnect_with_ops_in_flight(void)
{
	struct dm_test_group group = { 0 };
	struct pair p;

	if (!pair_open(&p))
		return;
	start_ops(&p, 5, &group);
	tpt_dm_disconnect(p.peer);
	CHECK(group.done);
	CHECK_EQ(group.failed, 5);
	CHECK_EQ(group.last_status, -ECANCELED);
	CHECK(dm_test_pump2(p.active, p.passive, &p.passive_down.done));
	/* Our own disconnect is no peer-down. */
	CHECK_EQ(p.active_down.calls, 0);
	tpt_dm_buf_release(p.local);
	tpt_dm_buf_release(p.remote);
	tpt_dm_close(p.active);
	tpt_dm_close(p.passive);
}

/* tpt_dm_readmit(): a connection the policy still admits stays and
 * works; once the policy says no (the owner's peer list dropped the
 * peer), the connection ends as if it had gone down, on both sides, and
 * transfers waiting on it fail. */
static void readmit_ends_what_is_no_longer_admitted(void)
{
	struct dm_test_group group = { 0 };
	struct dm_test_op op = { 0 };
	struct pair p;

	if (!pair_open(&p))
		return;
	tpt_dm_readmit(p.passive);
	CHECK_EQ(tpt_dm_put(p.peer, p.local, 0, tpt_dm_buf_stag(p.remote),
			    tpt_dm_buf_rma_base(p.remote), 4 * KIB,
			    dm_test_op_cb, &op), 0);
	CHECK(dm_test_pump2(p.active, p.passive, &op.done));
	CHECK_EQ(op.status, 0);
	CHECK_EQ(p.passive_down.calls, 0);

	p.policy.refuse_all = true;
	start_ops(&p, 4, &group);
	tpt_dm_readmit(p.passive);
	CHECK_EQ(p.passive_down.calls, 1);
	CHECK_EQ(p.passive_down.peer_id, DM_TEST_PEER_ID);
	CHECK(strstr(p.policy.log, "no longer admitted") != NULL);
	CHECK(dm_test_pump2(p.active, NULL, &group.done));
	CHECK_EQ(group.failed, 4);
	CHECK_EQ(group.last_status, -ECONNRESET);
	CHECK(dm_test_pump2(p.active, NULL, &p.active_down.done));
	tpt_dm_buf_release(p.local);
	tpt_dm_buf_release(p.remote);
	tpt_dm_disconnect(p.peer);
	tpt_dm_close(p.active);
	tpt_dm_close(p.passive);
}

/* An owner that reacts to the first failure by dropping the peer and its
 * buffer from inside the callback. */
struct drop_on_failure {
	struct tpt_dm_peer *peer;
	struct tpt_dm_buf *buf;
	int calls;
	bool done;
	int expect;
};

static void drop_on_failure_cb(int status, void *arg)
{
	struct drop_on_failure *d = arg;

	CHECK(status < 0);
	if (d->calls++ == 0) {
		tpt_dm_disconnect(d->peer);
		tpt_dm_buf_release(d->buf);
	}
	if (d->calls == d->expect)
		d->done = true;
}

static void callbacks_may_tear_down(void)
{
	struct drop_on_failure drop = { .expect = 4 };
	struct pair p;
	int i;

	if (!pair_open(&p))
		return;
	drop.peer = p.peer;
	drop.buf = p.local;
	for (i = 0; i < drop.expect; i++)
		CHECK_EQ(tpt_dm_get(p.peer, p.local, 0,
				    tpt_dm_buf_stag(p.remote),
				    tpt_dm_buf_rma_base(p.remote), BIG,
				    drop_on_failure_cb, &drop), 0);
	tpt_dm_close(p.passive);
	CHECK(dm_test_pump2(p.active, NULL, &drop.done));
	CHECK_EQ(drop.calls, drop.expect);
	/* Released in a callback: no peer-down for it. */
	CHECK_EQ(p.active_down.calls, 0);
	tpt_dm_close(p.active);
}

/* The operation table is bounded: -EAGAIN, then room again. */
static void operation_table_back_pressure(void)
{
	struct dm_test_group group = { 0 };
	struct dm_test_op last = { 0 };
	struct pair p;
	int started = 0, ret;

	if (!pair_open(&p))
		return;
	for (;;) {
		ret = tpt_dm_put(p.peer, p.local, 0, tpt_dm_buf_stag(p.remote),
				 tpt_dm_buf_rma_base(p.remote), 4 * KIB,
				 dm_test_group_cb, &group);
		if (ret)
			break;
		group.left++;
		started++;
		if (started > 100000)
			break;
	}
	CHECK_EQ(ret, -EAGAIN);
	CHECK(started >= 1024);
	CHECK(dm_test_pump2(p.active, p.passive, &group.done));
	CHECK_EQ(group.failed, 0);
	CHECK_EQ(tpt_dm_put(p.peer, p.local, 0, tpt_dm_buf_stag(p.remote),
			    tpt_dm_buf_rma_base(p.remote), 4 * KIB,
			    dm_test_op_cb, &last), 0);
	CHECK(dm_test_pump2(p.active, p.passive, &last.done));
	CHECK_EQ(last.status, 0);
	tpt_dm_disconnect(p.peer);
	tpt_dm_close(p.active);
	tpt_dm_close(p.passive);
}

/* Everything pair_open() opened, whatever became of the connection. */
static void pair_close(struct pair *p)
{
	tpt_dm_buf_release(p->local);
	tpt_dm_disconnect(p->peer);
	tpt_dm_buf_release(p->remote);
	tpt_dm_close(p->active);
	tpt_dm_close(p->passive);
}

/* Runs @dm alone for @ms milliseconds. */
static void pump_for(struct tpt_dm *dm, long ms)
{
	long end = dm_test_now_ms() + ms;
	struct pollfd pfd = { .fd = tpt_dm_event_fd(dm), .events = POLLIN };

	while (dm_test_now_ms() < end) {
		pfd.revents = 0;
		if (poll(&pfd, 1, (int)(end - dm_test_now_ms())) > 0)
			CHECK(tpt_dm_progress(dm) >= 0);
	}
}

/* A passive side that stops serving, its connection up: without a stall
 * limit the operations wait; with one, tpt_dm_expire_stalled() leaves
 * them alone until nothing has moved for the limit, then fails them
 * with -ETIMEDOUT and runs peer-down, as a transport error would. */
static void stalled_peer_is_dropped(void)
{
	struct dm_test_group group = { 0 };
	struct ordered_down od = { .group = &group, .ops_left_at_down = -1 };
	struct pair p;

	if (!pair_open(&p))
		return;
	tpt_dm_set_peer_down_cb(p.active, ordered_down_cb, &od);
	start_ops(&p, 4, &group);
	pump_for(p.active, 300);
	CHECK_EQ(tpt_dm_expire_stalled(p.active), 0);
	tpt_dm_peer_set_stall_limit(p.peer, 1);
	CHECK_EQ(tpt_dm_expire_stalled(p.active), 0);
	CHECK_EQ(group.left, 4);
	pump_for(p.active, 800);
	CHECK_EQ(tpt_dm_expire_stalled(p.active), 1);
	CHECK(group.done);
	CHECK_EQ(group.failed, 4);
	CHECK_EQ(group.last_status, -ETIMEDOUT);
	CHECK_EQ(od.down.calls, 1);
	CHECK_EQ(od.ops_left_at_down, 0);
	CHECK_EQ(tpt_dm_expire_stalled(p.active), 0);
	CHECK_EQ(tpt_dm_get(p.peer, p.local, 0, 1, 0, 16, NULL, NULL),
		 -ENOTCONN);
	pair_close(&p);
}

/* An idle peer never stalls, however long: the clock runs only while
 * operations wait, and starts again with the first after a quiet spell. */
static void idle_peer_is_kept(void)
{
	struct dm_test_op op = { 0 };
	struct pair p;

	if (!pair_open(&p))
		return;
	tpt_dm_peer_set_stall_limit(p.peer, 1);
	pump_for(p.active, 1200);
	CHECK_EQ(tpt_dm_expire_stalled(p.active), 0);
	CHECK_EQ(tpt_dm_put(p.peer, p.local, 0, tpt_dm_buf_stag(p.remote),
			    tpt_dm_buf_rma_base(p.remote), 64 * KIB,
			    dm_test_op_cb, &op), 0);
	CHECK_EQ(tpt_dm_expire_stalled(p.active), 0);
	CHECK(dm_test_pump2(p.active, p.passive, &op.done));
	CHECK_EQ(op.status, 0);
	CHECK_EQ(tpt_dm_expire_stalled(p.active), 0);
	pair_close(&p);
}

int main(void)
{
	/* SIGPIPE stays fatal on purpose: writing to a dead peer's socket
	 * must surface as an error from the datamover, never as a signal. */
	dm_test_require_provider();
	RUN(passive_close_fails_outstanding);
	RUN(passive_process_dies);
	RUN(close_with_ops_in_flight);
	RUN(disconnect_with_ops_in_flight);
	RUN(callbacks_may_tear_down);
	RUN(readmit_ends_what_is_no_longer_admitted);
	RUN(operation_table_back_pressure);
	RUN(stalled_peer_is_dropped);
	RUN(idle_peer_is_kept);
	UNIT_EXIT();
}
