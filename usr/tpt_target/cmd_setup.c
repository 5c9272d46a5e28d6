/*
 * Session setup and teardown commands: TPT REPORT ENDPOINT (where this
 * target's datamover listens, for the controller to put in peer lists),
 * TPT SET PEER LIST (the paper's target list, III-B), TPT REPORT SLOTS (how
 * the controller learns the STags of this target's buffers once per
 * session) and TPT RELEASE.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tgtd.h"
#include "scsi.h"
#include "tpt_target.h"

int tpt_exec_report_endpoint(struct tpt_cmd *tc)
{
	struct scsi_cmd *cmd = tc->scmd;
	struct tpt_endpoint_report r;
	int len;

	memset(&r, 0, sizeof(r));
	if (tpt_datamover_endpoint(&r.ep))
		return TPT_SENSE_INTERNAL_FAILURE;
	strncpy(r.provider, tpt_dm_provider_name(tpt_datamover()),
		TPT_PROVIDER_LEN);
	len = tpt_endpoint_report_encode(&r, scsi_get_in_buffer(cmd),
					 scsi_get_in_length(cmd));
	if (len < 0)
		return TPT_SENSE_INTERNAL_FAILURE;
	scsi_set_in_resid_by_actual(cmd, len);
	return TPT_SENSE_NONE;
}

int tpt_exec_set_peer_list(struct tpt_cmd *tc)
{
	struct scsi_cmd *cmd = tc->scmd;
	struct tpt_field_ptr where = { 0 };
	struct tpt_peer_list *pl;
	enum tpt_sense_reason r;

	pl = malloc(sizeof(*pl));
	if (!pl)
		return TPT_SENSE_POOL_EXHAUSTED;
	r = tpt_peer_list_decode(scsi_get_out_buffer(cmd),
				 scsi_get_out_length(cmd), pl, &where);
	if (r) {
		if (where.valid) {
			tc->failure = r;
			tc->failure_info.field = where;
		}
	} else {
		r = tpt_session_set_peers(tc->session, tc->tlu, pl);
	}
	free(pl);
	return r;
}

int tpt_exec_report_slots(struct tpt_cmd *tc)
{
	struct scsi_cmd *cmd = tc->scmd;
	struct tpt_slot_table *t;
	enum tpt_sense_reason r;
	int len;

	if (!tc->session->peers)
		return TPT_SENSE_PEER_LIST_MISSING;
	r = tpt_session_reserve_slots(tc->session, tc->cdb.slot_payload_size,
				      tc->cdb.slot_count);
	if (r)
		return r;
	t = malloc(sizeof(*t));
	if (!t)
		return TPT_SENSE_POOL_EXHAUSTED;
	tpt_session_fill_slot_table(tc->session, t);
	len = tpt_slot_table_encode(t, scsi_get_in_buffer(cmd),
				    scsi_get_in_length(cmd));
	free(t);
	if (len < 0)
		return TPT_SENSE_INTERNAL_FAILURE;
	scsi_set_in_resid_by_actual(cmd, len);
	return TPT_SENSE_NONE;
}

int tpt_exec_release(struct tpt_cmd *tc)
{
	struct tpt_group *g;

	if (tc->cdb.flags & TPT_CDB_RELEASE_ALL) {
		list_for_each_entry(g, &tc->session->groups, link)
			if (g->tlu == tc->tlu)
				tpt_group_abort_cmds(g, TPT_SENSE_RELEASED_BY_COMMAND);
		tpt_session_release_groups(tc->session, tc->tlu,
					   TPT_RELEASE_COMMAND);
		if (tc->cdb.flags & TPT_CDB_RELEASE_UNBIND)
			tpt_lu_unbind(tc->tlu, tc->session);
		return TPT_SENSE_NONE;
	}
	/* Releasing what is gone already is not an error: the controller
	 * may repeat a release it is unsure arrived. */
	g = tpt_group_find(tc->session, tc->tlu, tc->cdb.group);
	if (g) {
		tpt_group_abort_cmds(g, TPT_SENSE_RELEASED_BY_COMMAND);
		tpt_group_release(g, TPT_RELEASE_COMMAND);
	}
	return TPT_SENSE_NONE;
}
