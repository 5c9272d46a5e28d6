/*
 * The hooks of usr/tpt.h that concern both programs in a tgtd: the TPT
 * target (usr/tpt_target/) and the controller (usr/tpt_controller/).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "list.h"
#include "tgtd.h"
#include "tpt.h"

void tpt_lu_show(struct scsi_lu *lu, struct concat_buf *b)
{
	tpt_target_show(lu, b);
	tptraid_show(lu, b);
}
