/*
 * Unit tests for libtptinitiator's pure parts: the parsers of user words
 * (initiator/tpt_init_args.h) and the context's refusals before anything
 * goes on the wire (bad configuration, requests before connect).
 */
#include <errno.h>
#include <stdint.h>

#include "initiator/tpt_init_args.h"
#include "initiator/tpt_initiator.h"
#include "test/unit/unit.h"

static void test_size(void)
{
	uint64_t v = 0;

	CHECK_EQ(tpt_init_parse_size("0", &v), 0);
	CHECK_EQ(v, 0);
	CHECK_EQ(tpt_init_parse_size("4096", &v), 0);
	CHECK_EQ(v, 4096);
	CHECK_EQ(tpt_init_parse_size("4k", &v), 0);
	CHECK_EQ(v, 4096);
	CHECK_EQ(tpt_init_parse_size("4M", &v), 0);
	CHECK_EQ(v, 4 << 20);
	CHECK_EQ(tpt_init_parse_size("2g", &v), 0);
	CHECK_EQ(v, 2ULL << 30);
	CHECK_EQ(tpt_init_parse_size("18446744073709551615", &v), 0);
	CHECK(v == UINT64_MAX);
	CHECK_EQ(tpt_init_parse_size("18446744073709551616", &v), -ERANGE);
	/* 2^54 k is 2^64: no wrap to 0. */
	CHECK_EQ(tpt_init_parse_size("18014398509481984k", &v), -ERANGE);
	CHECK_EQ(tpt_init_parse_size("", &v), -EINVAL);
	CHECK_EQ(tpt_init_parse_size("-1", &v), -EINVAL);
	CHECK_EQ(tpt_init_parse_size("+1", &v), -EINVAL);
	CHECK_EQ(tpt_init_parse_size(" 1", &v), -EINVAL);
	CHECK_EQ(tpt_init_parse_size("1 ", &v), -EINVAL);
	CHECK_EQ(tpt_init_parse_size("1kk", &v), -EINVAL);
	CHECK_EQ(tpt_init_parse_size("1kb", &v), -EINVAL);
	CHECK_EQ(tpt_init_parse_size("k", &v), -EINVAL);
	CHECK_EQ(tpt_init_parse_size(NULL, &v), -EINVAL);
}

static void test_endpoint(void)
{
	char a[64];
	uint16_t p = 7;

	CHECK_EQ(tpt_init_parse_endpoint("10.0.0.1", a, sizeof(a), &p), 0);
	CHECK(!strcmp(a, "10.0.0.1") && p == 0);
	CHECK_EQ(tpt_init_parse_endpoint("10.0.0.1:4420", a, sizeof(a), &p), 0);
	CHECK(!strcmp(a, "10.0.0.1") && p == 4420);
	CHECK_EQ(tpt_init_parse_endpoint(":4420", a, sizeof(a), &p), 0);
	CHECK(!strcmp(a, "") && p == 4420);
	CHECK_EQ(tpt_init_parse_endpoint("[::1]:9", a, sizeof(a), &p), 0);
	CHECK(!strcmp(a, "::1") && p == 9);
	CHECK_EQ(tpt_init_parse_endpoint("[fe80::1]", a, sizeof(a), &p), 0);
	CHECK(!strcmp(a, "fe80::1") && p == 0);
	CHECK_EQ(tpt_init_parse_endpoint("fe80::1", a, sizeof(a), &p), 0);
	CHECK(!strcmp(a, "fe80::1") && p == 0);
	/* Names could block in the resolver: numeric only. */
	CHECK_EQ(tpt_init_parse_endpoint("host.example:1", a, sizeof(a), &p),
		 -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint("10.0.0.1:0", a, sizeof(a), &p), -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint("10.0.0.1:65536", a, sizeof(a), &p),
		 -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint("10.0.0.1:1k", a, sizeof(a), &p),
		 -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint("10.0.0.1:", a, sizeof(a), &p), -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint("", a, sizeof(a), &p), -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint(":", a, sizeof(a), &p), -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint("[10.0.0.1]:5", a, sizeof(a), &p),
		 -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint("[::1", a, sizeof(a), &p), -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint("[::1]x", a, sizeof(a), &p), -EINVAL);
	CHECK_EQ(tpt_init_parse_endpoint("10.0.0.1", a, 4, &p), -EINVAL);
}

static void test_direct(void)
{
	enum tpt_init_direct d;

	CHECK_EQ(tpt_init_parse_direct("auto", &d), 0);
	CHECK_EQ(d, TPT_INIT_DIRECT_AUTO);
	CHECK_EQ(tpt_init_parse_direct("on", &d), 0);
	CHECK_EQ(d, TPT_INIT_DIRECT_ON);
	CHECK_EQ(tpt_init_parse_direct("off", &d), 0);
	CHECK_EQ(d, TPT_INIT_DIRECT_OFF);
	CHECK_EQ(tpt_init_parse_direct("yes", &d), -EINVAL);
	CHECK_EQ(tpt_init_parse_direct("", &d), -EINVAL);
}

static void test_context_refusals(void)
{
	struct tpt_init_config cfg = { .url = "iscsi://127.0.0.1/iqn.x:y/1" };
	struct tpt_init *ctx;
	char err[256], buf[512];

	CHECK_EQ(tpt_init_new(&(struct tpt_init_config){ 0 }, &ctx, err,
			      sizeof(err)), -EINVAL);
	CHECK(ctx == NULL);
	cfg.url = "iscsi://nowhere";
	CHECK_EQ(tpt_init_new(&cfg, &ctx, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "bad URL") != NULL);
	cfg.url = "iscsi://127.0.0.1/iqn.x:y/1";
	cfg.max_io = 1000;
	CHECK_EQ(tpt_init_new(&cfg, &ctx, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "max_io") != NULL);
	cfg.max_io = 0;
	cfg.queue_depth = 100000;
	CHECK_EQ(tpt_init_new(&cfg, &ctx, err, sizeof(err)), -EINVAL);
	cfg.queue_depth = 0;
	cfg.target_user = "array";	/* mutual CHAP without ours */
	CHECK_EQ(tpt_init_new(&cfg, &ctx, err, sizeof(err)), -EINVAL);
	cfg.target_user = NULL;

	CHECK_EQ(tpt_init_new(&cfg, &ctx, err, sizeof(err)), 0);
	/* Nothing before connect, and no callback for a refusal. */
	CHECK_EQ(tpt_init_pread_async(ctx, buf, sizeof(buf), 0, NULL, NULL),
		 -ENOTCONN);
	CHECK_EQ(tpt_init_flush(ctx), -ENOTCONN);
	CHECK(!tpt_init_is_direct(ctx));
	CHECK(!strcmp(tpt_init_dm_endpoint(ctx), ""));
	tpt_init_close(ctx);
	tpt_init_close(NULL);
}

int main(void)
{
	RUN(test_size);
	RUN(test_endpoint);
	RUN(test_direct);
	RUN(test_context_refusals);
	UNIT_EXIT();
}
