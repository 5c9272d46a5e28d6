/*
 * TPT-RAID hooks called from tgt's own files (patches/tgt/0003-*, 0004-*).
 * The TPT target lives in tpt_target/, the controller in tpt_controller/,
 * the datamover they share in tpt_datamover.[ch].
 */
#ifndef __TPT_H__
#define __TPT_H__

#include <stdbool.h>

#include "tgtadm_error.h"

struct scsi_lu;
struct scsi_cmd;
struct concat_buf;

/* sbc's lu_config: our "tpt=..." keys first, the rest to spc. */
tgtadm_err tpt_sbc_lu_config(struct scsi_lu *lu, char *params);
/* sbc's lu_exit: drop the LU's TPT state, then spc's exit. */
void tpt_sbc_lu_exit(struct scsi_lu *lu);
/* An I_T nexus went away: the target releases every request buffer it
 * owned, the controller forgets the extended host it registered. */
void tpt_it_nexus_destroy(int tid, uint64_t itn_id);
void tpt_target_it_nexus_destroy(int tid, uint64_t itn_id);
void tptraid_it_nexus_destroy(int tid, uint64_t itn_id);
/* An in-flight command is being aborted; tgt completes the TMF when the
 * command completes, which this makes happen soon. */
void tpt_cmd_abort(struct scsi_cmd *cmd);

/* ... made of each program's own keys: TGTADM_UNKNOWN_PARAM when @key is
 * not theirs. */
tgtadm_err tpt_target_param(struct scsi_lu *lu, const char *key,
			    const char *value);
tgtadm_err tptraid_param(struct scsi_lu *lu, const char *key,
			 const char *value);
/* Whether @lu is an array's (the tptraid backing store). */
bool tptraid_lu(struct scsi_lu *lu);

/* Extra lines for the LU in tgtadm --op show: TPT mode, arrays. */
void tpt_lu_show(struct scsi_lu *lu, struct concat_buf *b);
/* ... made of each program's own lines (nothing for LUs not theirs). */
void tpt_target_show(struct scsi_lu *lu, struct concat_buf *b);
void tptraid_show(struct scsi_lu *lu, struct concat_buf *b);

/* Extra lines for tgtadm --mode sys --op show: zero-copy READs. */
void tpt_system_show(struct concat_buf *b);

/* Indent of those lines, under tgt's own LU lines. */
#define TPT_SHOW_INDENT "            "

#endif
