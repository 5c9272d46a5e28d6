/*
 * The hooks of usr/tpt.h that concern both programs in a tgtd: the TPT
 * target (usr/tpt_target/) and the controller (usr/tpt_controller/).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "spc.h"
#include "util.h"
#include "tpt.h"
#include "tpt_data_pipe.h"
#include "tpt_inline_read.h"

/* One "key=value" of --params that spc did not know: the controller's
 * (a tptraid LU) or the target's. */
static tgtadm_err tpt_lu_param(struct scsi_lu *lu, char *p)
{
	char *value = strchr(p, '=');

	if (!value)
		return TGTADM_UNKNOWN_PARAM;
	*value++ = '\0';
	/* An array's LU takes the array's keys only: a target's (tpt=on)
	 * would have it execute the TPT command set itself. */
	if (tptraid_lu(lu))
		return tptraid_param(lu, p, value);
	return tpt_target_param(lu, p, value);
}

tgtadm_err tpt_sbc_lu_config(struct scsi_lu *lu, char *params)
{
	return lu_config(lu, params, tpt_lu_param);
}

void tpt_it_nexus_destroy(int tid, uint64_t itn_id)
{
	tpt_target_it_nexus_destroy(tid, itn_id);
	tptraid_it_nexus_destroy(tid, itn_id);
}

void tpt_lu_show(struct scsi_lu *lu, struct concat_buf *b)
{
	tpt_target_show(lu, b);
	tptraid_show(lu, b);
}

void tpt_system_show(struct concat_buf *b)
{
	struct tpt_data_pipe_stats s;
	struct tpt_inline_read_stats r;

	tpt_data_pipe_stats(&s);
	concat_printf(b, "Zero-copy READ data (iSCSI/TCP, file LUNs):\n");
	concat_printf(b, _TAB1 "READs: %" PRIu64 "\n", s.reads);
	concat_printf(b, _TAB1 "Bytes: %" PRIu64 "\n", s.bytes);
	concat_printf(b, _TAB1 "Read into a buffer instead: %" PRIu64 "\n",
		      s.fallbacks);
	concat_printf(b, _TAB1 "Pipes: %u open, %u in use\n", s.open, s.busy);
	tpt_inline_read_stats(&r);
	concat_printf(b, "READs done in the event loop (file LUNs):\n");
	concat_printf(b, _TAB1 "Copied: %llu\n", r.copied);
	concat_printf(b, _TAB1 "Spliced: %llu\n", r.spliced);
	concat_printf(b, _TAB1 "Left to a worker, would wait: %llu\n",
		      r.would_wait);
}
