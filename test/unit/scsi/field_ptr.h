/*
 * Checking the field pointer a codec decoder or validator returns, shared
 * by the scsi/ unit tests: NO_PTR when the reason carries none, NO_BIT
 * when it points at a whole field.
 */
#ifndef TPT_TEST_UNIT_SCSI_FIELD_PTR_H
#define TPT_TEST_UNIT_SCSI_FIELD_PTR_H

#include <stdbool.h>

#include "scsi/tpt_sense.h"
#include "test/unit/unit.h"

#define NO_PTR (-1)
#define NO_BIT (-1)

static inline void check_where(const struct tpt_field_ptr *w, bool in_cdb,
			       int byte, int bit)
{
	if (byte == NO_PTR) {
		CHECK(!w->valid);
		return;
	}
	CHECK(w->valid);
	CHECK_EQ(w->in_cdb, in_cdb);
	CHECK_EQ(w->byte, byte);
	CHECK_EQ(w->bit_valid, bit != NO_BIT);
	if (bit != NO_BIT)
		CHECK_EQ(w->bit, bit);
}

#endif
