#include "iser/tpt_dm_provider.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>

#define TPT_FI_VERSION FI_VERSION(1, 17)

bool tpt_dm_provider_usable(const char *prov_name)
{
	struct fi_info *hints, *info = NULL;
	bool usable;

	hints = fi_allocinfo();
	if (!hints)
		return false;
	hints->caps = FI_MSG | FI_RMA;
	hints->ep_attr->type = FI_EP_MSG;
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
