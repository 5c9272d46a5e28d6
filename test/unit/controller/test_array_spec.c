#include "controller/array_spec.h"
#include "test/unit/unit.h"

#include <errno.h>

#define M(n) "member=iscsi://127.0.0.1:326" #n "/iqn.2026-11.org.tptraid:t" #n "/1"

static void full_spec_parses(void)
{
	struct tpt_array_spec s;
	char err[256] = "";

	CHECK_EQ(tpt_array_spec_parse("raid=5;unit=1m;mode=baseline;" M(0) ";"
				      M(1) ";" M(2) ";spare=iscsi://h/iqn.x:s/2",
				      &s, err, sizeof(err)), 0);
	CHECK_EQ(s.raid_level, 5);
	CHECK_EQ(s.unit_bytes, 1 << 20);
	CHECK_EQ(s.mode, TPT_MODE_BASELINE);
	CHECK_EQ(s.nr_members, 3);
	CHECK_EQ(s.nr_spares, 1);
	CHECK(!strcmp(s.member[2], "iscsi://127.0.0.1:3262/iqn.2026-11.org.tptraid:t2/1"));
	CHECK(!strcmp(s.initiator, "iqn.2026-11.org.tptraid:controller"));
	CHECK(s.write_intent);
	CHECK(!s.assume_clean);
	CHECK(!s.prefetch);
	CHECK_EQ(s.parity_gather, TPT_GATHER_AUTO);
	CHECK_EQ(s.rebuild_gather, TPT_REBUILD_TREE);

	CHECK_EQ(tpt_array_spec_parse("raid=1;mode=baseline;" M(0) ";" M(1),
				      &s, err, sizeof(err)), 0);
	CHECK_EQ(s.raid_level, 1);
	CHECK_EQ(s.nr_members, 2);

	CHECK_EQ(tpt_array_spec_parse(" raid=5; dm=10.0.0.1:4400 ;" M(0) ";" M(1)
				      ";" M(2) ";", &s, err, sizeof(err)), 0);
	CHECK_EQ(s.mode, TPT_MODE_TPT);
	CHECK_EQ(s.unit_bytes, 64 << 10);
	CHECK(!strcmp(s.dm_addr, "10.0.0.1"));
	CHECK_EQ(s.dm_port, 4400);
	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=[fd00::1]:4400;" M(0) ";" M(1)
				      ";" M(2), &s, err, sizeof(err)), 0);
	CHECK(!strcmp(s.dm_addr, "fd00::1"));
	CHECK_EQ(s.dm_port, 4400);

	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=10.0.0.1:1;write_intent=no;"
				      "assume_clean=yes;prefetch=yes;" M(0) ";"
				      M(1) ";" M(2), &s, err, sizeof(err)), 0);
	CHECK(!s.write_intent);
	CHECK(s.assume_clean);
	CHECK(s.prefetch);

	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=10.0.0.1:1;parity_gather=star;" M(0)
				      ";" M(1) ";" M(2), &s, err, sizeof(err)), 0);
	CHECK_EQ(s.parity_gather, TPT_GATHER_STAR);
	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=10.0.0.1:1;parity_gather=tree;" M(0)
				      ";" M(1) ";" M(2), &s, err, sizeof(err)), 0);
	CHECK_EQ(s.parity_gather, TPT_GATHER_TREE);
	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=10.0.0.1:1;parity_gather=flat;" M(0)
				      ";" M(1) ";" M(2), &s, err, sizeof(err)), 0);
	CHECK_EQ(s.parity_gather, TPT_GATHER_FLAT);
	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=10.0.0.1:1;rebuild_gather=flat;" M(0)
				      ";" M(1) ";" M(2), &s, err, sizeof(err)), 0);
	CHECK_EQ(s.rebuild_gather, TPT_REBUILD_FLAT);
	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=10.0.0.1:1;rebuild_gather=tree;" M(0)
				      ";" M(1) ";" M(2), &s, err, sizeof(err)), 0);
	CHECK_EQ(s.rebuild_gather, TPT_REBUILD_TREE);
}

/* Each bad spec is refused with a message naming the bad part, and the
 * output is left untouched. */
static void bad_specs_name_their_fault(void)
{
	static const struct {
		const char *spec;
		const char *mention;
	} cases[] = {
		{ "", "no array options" },
		{ "raid=7;" M(0) ";" M(1) ";" M(2), "raid=7" },
		{ "raid=6;" M(0) ";" M(1) ";" M(2), "RAID-6 needs at least 4" },
		{ "raid=5;unit=3k;dm=10.0.0.1:1;" M(0) ";" M(1) ";" M(2), "unit=3k" },
		{ "raid=5;unit=2m;dm=10.0.0.1:1;" M(0) ";" M(1) ";" M(2), "unit=2m" },
		/* (2^54 + 64)k and (2^54 + 1)k: 64k and 1k modulo 2^64. */
		{ "raid=5;unit=18014398509482048k;dm=10.0.0.1:1;" M(0) ";" M(1) ";" M(2),
		  "unit=18014398509482048k" },
		{ "raid=5;rebuild_rate=18014398509481985k;dm=10.0.0.1:1;" M(0) ";" M(1)
		  ";" M(2), "rebuild_rate=18014398509481985k" },
		{ "raid=5;dm=10.0.0.1:18014398509481985k;" M(0) ";" M(1) ";" M(2),
		  "dm=10.0.0.1:18014398509481985k" },
		{ "raid=5;mode=fast;" M(0) ";" M(1) ";" M(2), "mode=fast" },
		{ "raid=5;dm=10.0.0.1:1;" M(0) ";" M(1), "at least 3" },
		{ "raid=1;dm=10.0.0.1:1;" M(0), "RAID-1 needs at least 2" },
		{ "raid=15;dm=10.0.0.1:1;" M(0) ";" M(1), "raid=15" },
		{ "raid=;dm=10.0.0.1:1;" M(0) ";" M(1), "raid=" },
		{ "raid=5;" M(0) ";" M(1) ";" M(2), "needs dm=" },
		{ "raid=5;dm=nope;" M(0) ";" M(1) ";" M(2), "dm=nope" },
		{ "raid=5;dm=box1:4400;" M(0) ";" M(1) ";" M(2),
		  "dm=box1: not a numeric IPv4 or IPv6 address" },
		{ "raid=5;dm=10.0.0.1:1;member=http://x/y/1;" M(1) ";" M(2), "member=http" },
		{ "raid=5;dm=10.0.0.1:1;member=iscsi://x/iqn.a/;" M(1) ";" M(2), "member=iscsi://x/iqn.a/" },
		{ "raid=5;dm=10.0.0.1:1;" M(0) ";" M(0) ";" M(2), "named twice" },
		{ "raid=5;dm=10.0.0.1:1;colour=red;" M(0), "colour" },
		{ "raid=5;dm=10.0.0.1:1;oops;" M(0), "oops" },
		{ "raid=5;dm=10.0.0.1:1;initiator=bob;" M(0) ";" M(1) ";" M(2), "initiator=bob" },
		{ "raid=5;dm=10.0.0.1:1;write_intent=off;" M(0) ";" M(1) ";" M(2), "write_intent=off" },
		{ "raid=5;dm=10.0.0.1:1;prefetch=1;" M(0) ";" M(1) ";" M(2), "prefetch=1" },
		{ "raid=5;dm=10.0.0.1:1;parity_gather=ring;" M(0) ";" M(1) ";" M(2),
		  "parity_gather=ring" },
		{ "raid=5;dm=10.0.0.1:1;rebuild_gather=star;" M(0) ";" M(1) ";" M(2),
		  "rebuild_gather=star" },
	};
	struct tpt_array_spec s;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "";

		memset(&s, 0xa5, sizeof(s));
		CHECK_EQ(tpt_array_spec_parse(cases[i].spec, &s, err, sizeof(err)),
			 -EINVAL);
		if (!strstr(err, cases[i].mention))
			fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, err,
				cases[i].mention);
		CHECK(strstr(err, cases[i].mention) != NULL);
		CHECK_EQ(((unsigned char *)&s)[0], 0xa5);
	}
}

#define SECRET "0123456789abcdef"
#define TSECRET "fedcba9876543210"
#define CHAP_URL "iscsi://ctl%" SECRET "@127.0.0.1:3261/iqn.x:t0/1"

/* CHAP towards a member, one-way and mutual, is part of its URL. */
static void member_urls_carry_chap(void)
{
	struct tpt_array_spec s;
	char err[256] = "";

	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=10.0.0.1:1;member=" CHAP_URL ";"
				      "member=" CHAP_URL "?target_user=t1&"
				      "target_password=" TSECRET ";" M(2),
				      &s, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "named twice") != NULL);
	CHECK(!strstr(err, SECRET));
	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=10.0.0.1:1;member=" CHAP_URL ";"
				      "member=iscsi://ctl%" SECRET "@h:1/iqn.x:t1/1"
				      "?target_user=t1&target_password=" TSECRET
				      ";" M(2), &s, err, sizeof(err)), 0);
	CHECK(!strcmp(s.member[1], "iscsi://ctl%" SECRET "@h:1/iqn.x:t1/1"
		      "?target_user=t1&target_password=" TSECRET));
	CHECK_EQ(tpt_spec_member_url(CHAP_URL, err, sizeof(err)), 0);
}

/* What logs and show output print: no secret of either direction. */
static void secrets_are_hidden(void)
{
	char out[256];

	tpt_spec_hide_secrets("raid=5;member=" CHAP_URL "?target_user=t&"
			      "target_password=" TSECRET ";" M(1), out,
			      sizeof(out));
	CHECK(!strcmp(out, "raid=5;member=iscsi://127.0.0.1:3261/iqn.x:t0/1;"
		      "member=iscsi://127.0.0.1:3261/iqn.2026-11.org.tptraid:t1/1"));
	tpt_spec_hide_secrets("http://u%" SECRET "@h/x/1 tail", out, sizeof(out));
	CHECK(!strcmp(out, "http://h/x/1 tail"));
	tpt_spec_hide_secrets(CHAP_URL, out, 12);
	CHECK(!strcmp(out, "iscsi://127"));
}

/* A bad CHAP part is refused, saying why, never showing the secret. */
static void bad_chap_is_refused_without_showing_secrets(void)
{
	static const struct {
		const char *url;
		const char *mention;
	} cases[] = {
		{ "iscsi://ctl@h/iqn.x:a/1", "no secret" },
		{ "iscsi://ctl%@h/iqn.x:a/1", "shorter than 12" },
		{ "iscsi://%" SECRET "@h/iqn.x:a/1", "no user" },
		{ "iscsi://ctl%short-pass1@h/iqn.x:a/1", "shorter than 12" },
		{ "iscsi://ctl%" SECRET ",x@h/iqn.x:a/1", "','" },
		{ CHAP_URL "?target_user=t", "both target_user" },
		{ CHAP_URL "?target_password=" TSECRET, "both target_user" },
		{ CHAP_URL "?target_user=t&target_password=short", "shorter than 12" },
		{ CHAP_URL "?target_user=t&target_password=" SECRET, "both directions" },
		{ "iscsi://h/iqn.x:a/1?target_user=t&target_password=" TSECRET,
		  "without user%secret@" },
		{ CHAP_URL "?header_digest=none", "unknown URL argument 'header_digest'" },
		{ "iscsi://ctl%" SECRET "@h/iqn.x:a/", "expected iscsi://" },
		/* A second '@' would make the URL with its secrets hidden
		 * name another host. */
		{ "iscsi://ctl%" SECRET "@h@x/iqn.x:a/1", "expected iscsi://" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "";

		CHECK_EQ(tpt_spec_member_url(cases[i].url, err, sizeof(err)),
			 -EINVAL);
		if (!strstr(err, cases[i].mention))
			fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, err,
				cases[i].mention);
		CHECK(strstr(err, cases[i].mention) != NULL);
		CHECK(!strstr(err, SECRET) && !strstr(err, TSECRET));
	}
}

/* A definition over several lines is recorded as one, which parses to
 * the same array; a buffer too small says so. */
static void canonical_spec_is_one_line(void)
{
	static const char text[] = "raid=5;\n\tunit=128k ;\n"
				   "  dm=10.0.0.1:4400   \n;;" M(0) ";\n"
				   M(1) "\n;" M(2) "\n";
	static const char want[] = "raid=5;unit=128k;dm=10.0.0.1:4400;" M(0)
				   ";" M(1) ";" M(2);
	struct tpt_array_spec a, b;
	char out[512], err[256];

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	CHECK_EQ(tpt_array_spec_canonical(text, out, sizeof(out)), 0);
	CHECK(!strcmp(out, want));
	CHECK_EQ(tpt_array_spec_parse(text, &a, err, sizeof(err)), 0);
	CHECK_EQ(tpt_array_spec_parse(out, &b, err, sizeof(err)), 0);
	CHECK_MEM(&a, &b, sizeof(a));
	/* Already one line: unchanged. */
	CHECK_EQ(tpt_array_spec_canonical(want, out, sizeof(out)), 0);
	CHECK(!strcmp(out, want));
	/* Whatever follows a value's first blank is not read, as the
	 * parser: gone from the record too. */
	CHECK_EQ(tpt_array_spec_canonical("raid=5 six;unit=4k", out,
					  sizeof(out)), 0);
	CHECK(!strcmp(out, "raid=5;unit=4k"));
	CHECK_EQ(tpt_array_spec_canonical(want, out, 10), -E2BIG);
	CHECK_EQ(tpt_array_spec_canonical("", out, sizeof(out)), 0);
	CHECK(!strcmp(out, ""));
}

int main(void)
{
	RUN(full_spec_parses);
	RUN(bad_specs_name_their_fault);
	RUN(member_urls_carry_chap);
	RUN(secrets_are_hidden);
	RUN(bad_chap_is_refused_without_showing_secrets);
	RUN(canonical_spec_is_one_line);
	UNIT_EXIT();
}
