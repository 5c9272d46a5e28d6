/* Datamover connections: the hello on the wire, accepting a peer on the
 * list, refusing one that is not (anti-spoofing, paper III-B), and the
 * connect callback's promises. */
#include "iser/tpt_dm_priv.h"
#include "test/unit/iser/test_dm_harness.h"

static void hello_wire_format(void)
{
	struct tpt_dm_hello hello = dm_test_hello(0x0102), back;
	/* The proof is HMAC-SHA256 over "H" and bytes 0-23, keyed with the
	 * token, cut to 16 bytes (computed apart, with Python's hmac). */
	static const uint8_t expect[DM_HELLO_WIRE_LEN] = {
		0x54, 0x50, 0x44, 0x4d,	/* "TPDM" */
		0x02,			/* version */
		TPT_DM_ROLE_TARGET,
		0x01, 0x02,		/* peer id, big-endian */
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x13, 0x47, 0xf8, 0xee, 0x60, 0xe7, 0x21, 0x0d,
		0xb3, 0x3f, 0x6d, 0x2f, 0x95, 0xc5, 0x05, 0xd5,
	};
	static const uint8_t expect_answer[DM_HELLO_ANSWER_LEN] = {
		0xd8, 0xfb, 0xd6, 0xe8, 0x68, 0x80, 0xd0, 0x65,
		0xc4, 0x9f, 0x5e, 0x56, 0x77, 0x6a, 0x61, 0x17,
	};
	uint8_t wire[DM_HELLO_WIRE_LEN + 4], answer[DM_HELLO_ANSWER_LEN];
	uint8_t other[TPT_DM_TOKEN_LEN];

	hello.counter = 0x0102030405060708ULL;
	memset(wire, 0xa5, sizeof(wire));
	dm_hello_encode(&hello, wire);
	CHECK_MEM(wire, expect, DM_HELLO_WIRE_LEN);
	CHECK_EQ(wire[DM_HELLO_WIRE_LEN], 0xa5);

	memset(&back, 0xff, sizeof(back));
	CHECK_EQ(dm_hello_decode(wire, DM_HELLO_WIRE_LEN, &back), 0);
	CHECK_EQ(back.role, TPT_DM_ROLE_TARGET);
	CHECK_EQ(back.peer_id, 0x0102);
	CHECK(back.array_id == DM_TEST_ARRAY_ID);
	CHECK(back.counter == 0x0102030405060708ULL);
	/* The token itself never travels. */
	memset(other, 0, sizeof(other));
	CHECK_MEM(back.token, other, TPT_DM_TOKEN_LEN);
	CHECK(tpt_dm_hello_proves(&back, dm_test_token));
	dm_hello_answer(&back, dm_test_token, answer);
	CHECK_MEM(answer, expect_answer, sizeof(answer));

	/* Another token, or any signed field changed, and the proof fails. */
	memcpy(other, dm_test_token, sizeof(other));
	other[15] ^= 1;
	CHECK(!tpt_dm_hello_proves(&back, other));
	back.counter++;
	CHECK(!tpt_dm_hello_proves(&back, dm_test_token));
	back.counter--;
	back.peer_id ^= 1;
	CHECK(!tpt_dm_hello_proves(&back, dm_test_token));

	/* Trailing bytes from a later version are ignored. */
	CHECK_EQ(dm_hello_decode(wire, sizeof(wire), &back), 0);
	CHECK_EQ(dm_hello_decode(wire, DM_HELLO_WIRE_LEN - 1, &back), -EPROTO);
	wire[0] ^= 1;
	CHECK_EQ(dm_hello_decode(wire, DM_HELLO_WIRE_LEN, &back), -EPROTO);
	wire[0] ^= 1;
	wire[4] = 1;	/* version 1 sent the token in clear */
	CHECK_EQ(dm_hello_decode(wire, DM_HELLO_WIRE_LEN, &back), -EPROTO);
}

static void open_rejects_bad_config(void)
{
	struct tpt_dm_config cfg = {
		.pool_bytes = 1 << 20,
		.pool_buf_bytes = 2 << 20,
		.log = dm_test_log,
	};
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *dm = (struct tpt_dm *)&cfg;

	cfg.log_arg = &policy;
	CHECK_EQ(tpt_dm_open(&cfg, &dm), -EINVAL);
	CHECK(dm == NULL);
	CHECK(strstr(policy.log, "pool_buf_bytes") != NULL);

	cfg.pool_buf_bytes = 0;
	cfg.provider = "no-such-provider";
	CHECK(tpt_dm_open(&cfg, &dm) < 0);
}

static void connect_and_accept(void)
{
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *passive = dm_test_open(true, &policy);
	struct tpt_dm *active = dm_test_open(false, NULL);
	struct tpt_dm_peer *peer;
	int status;

	CHECK(tpt_dm_listen_port(passive) != 0);
	CHECK(tpt_dm_provider_name(passive) != NULL);
	peer = dm_test_connect(active, passive, DM_TEST_PEER_ID, &status);
	CHECK(peer != NULL);
	CHECK_EQ(status, 0);
	CHECK_EQ(policy.calls, 1);
	CHECK_EQ(policy.last.role, TPT_DM_ROLE_TARGET);
	CHECK_EQ(policy.last.peer_id, DM_TEST_PEER_ID);
	CHECK(policy.last.array_id == DM_TEST_ARRAY_ID);
	/* The acceptor sees a proof, never the token. */
	CHECK(tpt_dm_hello_proves(&policy.last, dm_test_token));
	CHECK(policy.last.counter != 0);
	CHECK(!strcmp(policy.last_src, "127.0.0.1"));
	if (peer)
		CHECK_EQ(tpt_dm_peer_hello(peer)->peer_id, DM_TEST_PEER_ID);
	tpt_dm_disconnect(peer);
	tpt_dm_close(active);
	tpt_dm_close(passive);
}

static void refused_peer(void)
{
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *passive = dm_test_open(true, &policy);
	struct tpt_dm *active = dm_test_open(false, NULL);
	struct tpt_dm_stats st;
	struct tpt_dm_peer *peer;
	char needle[32];
	int status;

	peer = dm_test_connect(active, passive, DM_TEST_REFUSED_ID, &status);
	CHECK(peer != NULL);
	CHECK_EQ(status, -ECONNREFUSED);
	tpt_dm_get_stats(passive, &st);
	CHECK_EQ(st.refused_peers, 1);
	CHECK_EQ(policy.calls, 1);
	/* The refusal names the claimed id and where it came from. */
	snprintf(needle, sizeof(needle), "peer id %u", DM_TEST_REFUSED_ID);
	CHECK(strstr(policy.log, "refused") != NULL);
	CHECK(strstr(policy.log, needle) != NULL);
	CHECK(strstr(policy.log, "127.0.0.1") != NULL);
	/* A refused handle is dead but still the owner's to free. */
	if (peer) {
		struct tpt_dm_buf *buf;

		CHECK_EQ(tpt_dm_buf_get(active, 0, 4096, 0, &buf), 0);
		CHECK_EQ(tpt_dm_put(peer, buf, 0, 1, 0, 4096, NULL, NULL),
			 -ENOTCONN);
		tpt_dm_buf_release(buf);
	}
	tpt_dm_disconnect(peer);

	/* The same context still takes peers that are on the list. */
	peer = dm_test_connect(active, passive, DM_TEST_PEER_ID, &status);
	CHECK_EQ(status, 0);
	tpt_dm_disconnect(peer);
	tpt_dm_close(active);
	tpt_dm_close(passive);
}

static void wrong_token_refused(void)
{
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *passive = dm_test_open(true, &policy);
	struct tpt_dm *active = dm_test_open(false, NULL);
	struct tpt_dm_hello hello = dm_test_hello(DM_TEST_PEER_ID);
	struct dm_test_connect c = { 0 };
	struct tpt_dm_stats st;
	struct tpt_dm_peer *peer = NULL;

	hello.token[3] ^= 0x80;
	CHECK_EQ(tpt_dm_connect(active, 0, "127.0.0.1",
				tpt_dm_listen_port(passive), &hello,
				dm_test_connect_cb, &c, &peer), 0);
	CHECK(dm_test_pump2(active, passive, &c.done));
	CHECK_EQ(c.status, -ECONNREFUSED);
	CHECK(c.peer == peer);
	tpt_dm_get_stats(passive, &st);
	CHECK_EQ(st.refused_peers, 1);
	tpt_dm_disconnect(peer);
	tpt_dm_close(active);
	tpt_dm_close(passive);
}

/* A hello recorded off the wire is no use: the same counter again, or a
 * lower one, is refused although its proof is right. */
static void replayed_hello_refused(void)
{
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *passive = dm_test_open(true, &policy);
	struct tpt_dm *active = dm_test_open(false, NULL);
	struct tpt_dm_hello hello = dm_test_hello(DM_TEST_PEER_ID);
	uint16_t port = tpt_dm_listen_port(passive);
	uint64_t counters[] = { 1000, 1000, 999, 1001 };
	int expect[] = { 0, -ECONNREFUSED, -ECONNREFUSED, 0 };
	struct tpt_dm_stats st;
	unsigned int i;

	for (i = 0; i < 4; i++) {
		struct dm_test_connect c = { 0 };
		struct tpt_dm_peer *peer = NULL;

		hello.counter = counters[i];
		CHECK_EQ(tpt_dm_connect(active, 0, "127.0.0.1", port, &hello,
					dm_test_connect_cb, &c, &peer), 0);
		CHECK(dm_test_pump2(active, passive, &c.done));
		CHECK_EQ(c.status, expect[i]);
		tpt_dm_disconnect(peer);
	}
	tpt_dm_get_stats(passive, &st);
	CHECK_EQ(st.replayed_hellos, 2);
	CHECK_EQ(st.refused_peers, 2);
	CHECK(strstr(policy.log, "replayed hello") != NULL);

	/* Another peer id has a counter of its own. */
	hello.peer_id = DM_TEST_PEER_ID + 1;
	hello.counter = 5;
	{
		struct dm_test_connect c = { 0 };
		struct tpt_dm_peer *peer = NULL;

		CHECK_EQ(tpt_dm_connect(active, 0, "127.0.0.1", port, &hello,
					dm_test_connect_cb, &c, &peer), 0);
		CHECK(dm_test_pump2(active, passive, &c.done));
		CHECK_EQ(c.status, 0);
		tpt_dm_disconnect(peer);
	}
	tpt_dm_close(active);
	tpt_dm_close(passive);
}

static void no_policy_refuses_everyone(void)
{
	struct tpt_dm_config cfg = {
		.listen_addr = "127.0.0.1",
		.pool_bytes = 1 << 20,
		.log = dm_test_log,
	};
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *passive = NULL, *active = dm_test_open(false, NULL);
	struct tpt_dm_stats st;
	struct tpt_dm_peer *peer;
	int status;

	cfg.log_arg = &policy;
	CHECK_EQ(tpt_dm_open(&cfg, &passive), 0);
	if (!passive)
		return;
	peer = dm_test_connect(active, passive, DM_TEST_PEER_ID, &status);
	CHECK_EQ(status, -ECONNREFUSED);
	tpt_dm_get_stats(passive, &st);
	CHECK_EQ(st.refused_peers, 1);
	tpt_dm_disconnect(peer);
	tpt_dm_close(active);
	tpt_dm_close(passive);
}

static void connect_to_closed_port(void)
{
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *passive = dm_test_open(true, &policy);
	struct tpt_dm *active = dm_test_open(false, &policy);
	struct tpt_dm_peer *peer;
	uint16_t port = tpt_dm_listen_port(passive);
	struct tpt_dm_hello hello = dm_test_hello(DM_TEST_PEER_ID);
	struct dm_test_connect c = { 0 };

	/* Nobody listens there any more. */
	tpt_dm_close(passive);
	CHECK_EQ(tpt_dm_connect(active, 0, "127.0.0.1", port, &hello,
				dm_test_connect_cb, &c, &peer), 0);
	CHECK(dm_test_pump2(active, NULL, &c.done));
	CHECK(c.status < 0);
	tpt_dm_disconnect(peer);

	/* Names would need a blocking lookup: refused up front. */
	CHECK(tpt_dm_connect(active, 0, "localhost.invalid", port, &hello,
			     dm_test_connect_cb, &c, &peer) < 0);
	tpt_dm_close(active);
}

static void cancel_pending_connects(void)
{
	struct dm_test_policy policy = { 0 };
	struct tpt_dm *passive = dm_test_open(true, &policy);
	struct tpt_dm *active = dm_test_open(false, NULL);
	struct tpt_dm_hello hello = dm_test_hello(DM_TEST_PEER_ID);
	struct dm_test_connect by_disconnect = { 0 }, by_close = { 0 };
	struct tpt_dm_peer *p1, *p2;
	uint16_t port = tpt_dm_listen_port(passive);

	CHECK_EQ(tpt_dm_connect(active, 0, "127.0.0.1", port, &hello,
				dm_test_connect_cb, &by_disconnect, &p1), 0);
	CHECK_EQ(tpt_dm_connect(active, 0, "127.0.0.1", port, &hello,
				dm_test_connect_cb, &by_close, &p2), 0);
	tpt_dm_disconnect(p1);
	CHECK(by_disconnect.done);
	CHECK_EQ(by_disconnect.status, -ECANCELED);
	tpt_dm_close(active);
	CHECK(by_close.done);
	CHECK_EQ(by_close.status, -ECANCELED);
	tpt_dm_close(passive);
}

int main(void)
{
	dm_test_require_provider();
	RUN(hello_wire_format);
	RUN(open_rejects_bad_config);
	RUN(connect_and_accept);
	RUN(refused_peer);
	RUN(wrong_token_refused);
	RUN(replayed_hello_refused);
	RUN(no_policy_refuses_everyone);
	RUN(connect_to_closed_port);
	RUN(cancel_pending_connects);
	UNIT_EXIT();
}
