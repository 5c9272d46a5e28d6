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

	CHECK_EQ(tpt_array_spec_parse(" raid=5; dm=10.0.0.1:4400 ;" M(0) ";" M(1)
				      ";" M(2) ";", &s, err, sizeof(err)), 0);
	CHECK_EQ(s.mode, TPT_MODE_TPT);
	CHECK_EQ(s.unit_bytes, 64 << 10);
	CHECK(!strcmp(s.dm_addr, "10.0.0.1"));
	CHECK_EQ(s.dm_port, 4400);

	CHECK_EQ(tpt_array_spec_parse("raid=5;dm=a:1;write_intent=no;"
				      "assume_clean=yes;" M(0) ";" M(1) ";"
				      M(2), &s, err, sizeof(err)), 0);
	CHECK(!s.write_intent);
	CHECK(s.assume_clean);
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
		{ "raid=6;" M(0) ";" M(1) ";" M(2), "raid=6" },
		{ "raid=5;unit=3k;dm=a:1;" M(0) ";" M(1) ";" M(2), "unit=3k" },
		{ "raid=5;unit=2m;dm=a:1;" M(0) ";" M(1) ";" M(2), "unit=2m" },
		{ "raid=5;mode=fast;" M(0) ";" M(1) ";" M(2), "mode=fast" },
		{ "raid=5;dm=a:1;" M(0) ";" M(1), "at least 3" },
		{ "raid=5;" M(0) ";" M(1) ";" M(2), "needs dm=" },
		{ "raid=5;dm=nope;" M(0) ";" M(1) ";" M(2), "dm=nope" },
		{ "raid=5;dm=a:1;member=http://x/y/1;" M(1) ";" M(2), "member=http" },
		{ "raid=5;dm=a:1;member=iscsi://x/iqn.a/;" M(1) ";" M(2), "member=iscsi://x/iqn.a/" },
		{ "raid=5;dm=a:1;" M(0) ";" M(0) ";" M(2), "named twice" },
		{ "raid=5;dm=a:1;colour=red;" M(0), "colour" },
		{ "raid=5;dm=a:1;oops;" M(0), "oops" },
		{ "raid=5;dm=a:1;initiator=bob;" M(0) ";" M(1) ";" M(2), "initiator=bob" },
		{ "raid=5;dm=a:1;write_intent=off;" M(0) ";" M(1) ";" M(2), "write_intent=off" },
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

int main(void)
{
	RUN(full_spec_parses);
	RUN(bad_specs_name_their_fault);
	UNIT_EXIT();
}
