#include "iser/tpt_dm_provider.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>

#define TPT_FI_VERSION FI_VERSION(1, 17)

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
	hints = fi_allocinfo();
	if (!hints)
		return false;
	hints->caps = FI_MSG | FI_RMA;
	hints->ep_attr->type = FI_EP_MSG;
	/* The modes the datamover handles (tpt_dm.c asks for the same):
	 * without them verbs, which needs FI_MR_LOCAL, never matches. */
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov_name);
	usable = hints->fabric_attr->prov_name &&
		 fi_getinfo(TPT_FI_VERSION, NULL, NULL, 0, hints, &info) == 0;
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
