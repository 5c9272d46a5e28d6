#include "iser/tpt_dm_provider.h"
#include "test/unit/unit.h"

#include <stdlib.h>

static void tcp_provider_is_usable(void)
{
	CHECK(tpt_dm_provider_usable("tcp"));
	CHECK(!tpt_dm_provider_usable("no-such-provider"));
}

static void choice_honours_environment(void)
{
	const char *p;

	unsetenv("TPT_DM_PROVIDER");
	p = tpt_dm_provider_choose();
	CHECK(p != NULL);
	setenv("TPT_DM_PROVIDER", "tcp", 1);
	p = tpt_dm_provider_choose();
	CHECK(p && !strcmp(p, "tcp"));
	setenv("TPT_DM_PROVIDER", "no-such-provider", 1);
	CHECK(tpt_dm_provider_choose() == NULL);
	unsetenv("TPT_DM_PROVIDER");
}

int main(void)
{
	RUN(tcp_provider_is_usable);
	RUN(choice_honours_environment);
	UNIT_EXIT();
}
