/*
 * What tgtadm --op show prints under a tptraid LU: the array, its
 * members and the counters of the paper's Tables I and II
 * (docs/controller.md, "Watching it").
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "list.h"
#include "tgtd.h"
#include "util.h"
#include "tpt.h"
#include "tpt_controller.h"

void tptraid_show(struct scsi_lu *lu, struct concat_buf *b)
{
	struct tpt_array *a = tptraid_array_of(lu);
	struct tpt_array_counters st;
	unsigned int i;

	if (!a)
		return;
	tpt_array_get_counters(a, &st);
	concat_printf(b, TPT_SHOW_INDENT "TPT-RAID: %s mode %s unit %u members "
		      "%u array_id %016" PRIx64 "\n", a->level->name,
		      a->mode->name, a->spec.unit_bytes, a->nr_members,
		      a->array_id);
	for (i = 0; i < a->nr_members; i++) {
		const struct tpt_member *m = &a->member[i];

		concat_printf(b, TPT_SHOW_INDENT "TPT-RAID member %u: %s %s "
			      "commands %" PRIu64 " errors %" PRIu64 "\n", i,
			      m->url, m->up ? "up" : "DOWN", m->stats.cmds,
			      m->stats.errors);
	}
	concat_printf(b, TPT_SHOW_INDENT "TPT-RAID counters: reads %" PRIu64
		      " writes %" PRIu64 " host_in %" PRIu64 " host_out %" PRIu64
		      " target_in %" PRIu64 " target_out %" PRIu64 " xored %"
		      PRIu64 " pdus %" PRIu64 " rma_ops %" PRIu64 " failed %"
		      PRIu64 "\n", st.reads, st.writes, st.host_bytes_in,
		      st.host_bytes_out, st.target_bytes_in, st.target_bytes_out,
		      st.bytes_xored, st.pdus, st.rma_ops, st.failed);
}
