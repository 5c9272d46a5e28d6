#include "iser/tpt_dm_provider.h"
#include "iser/tpt_dm_fabric.h"

#include <stdlib.h>

void tpt_dm_fabric_env(void)
{
	/*
	 * libfabric's registration cache (verbs) keeps a released buffer's
	 * remote key valid and hands it out again, so a peer's stale STag
	 * would still reach memory that now holds other data.  Our buffers
	 * are registered once (pool) or per request, so the cache buys
	 * little.  It is read once, at libfabric's first call: set it before
	 * any, unless the operator chose otherwise.
	 */
	setenv("FI_MR_CACHE_MAX_COUNT", "0", 0);
}

bool tpt_dm_provider_usable(const char *prov_name)
{
	struct fi_info *hints, *info = NULL;
	bool usable;

	tpt_dm_fabric_env();
	/* With the datamover's own hints: usable means tpt_dm_open can
	 * use it. */
	hints = tpt_dm_fabric_hints(prov_name);
	if (!hints)
		return false;
	usable = fi_getinfo(TPT_DM_FI_VERSION, NULL, NULL, 0, hints,
			    &info) == 0;
	if (info)
		fi_freeinfo(info);
	fi_freeinfo(hints);
	return usable;
}

const char *tpt_dm_provider_choose(void)
{
	static const char *const preference[] = { "verbs", "tcp" };
	const char *forced = getenv("TPT_DM_PROVIDER");
	size_t i;

	if (forced && *forced)
		return tpt_dm_provider_usable(forced) ? forced : NULL;
	for (i = 0; i < sizeof(preference) / sizeof(preference[0]); i++)
		if (tpt_dm_provider_usable(preference[i]))
			return preference[i];
	return NULL;
}
