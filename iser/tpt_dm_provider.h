/* Datamover provider selection.
 *
 * The datamover moves data with libfabric RMA; which libfabric provider
 * carries it is chosen at run time: "verbs" where RDMA hardware (or
 * soft-RoCE) is present, "tcp" otherwise.  TPT_DM_PROVIDER in the
 * environment forces one. */
#ifndef TPT_ISER_DM_PROVIDER_H
#define TPT_ISER_DM_PROVIDER_H

#include <stdbool.h>

/* True when libfabric offers connected-endpoint RMA through the named
 * provider on this machine. */
bool tpt_dm_provider_usable(const char *prov_name);

/* The provider to use: TPT_DM_PROVIDER if set, else the first usable of
 * "verbs" and "tcp".  NULL when none is usable. */
const char *tpt_dm_provider_choose(void);

/* Process-wide libfabric settings the datamover relies on; call before
 * the first libfabric call (tpt_dm_open and the helpers above do). */
void tpt_dm_fabric_env(void);

#endif
