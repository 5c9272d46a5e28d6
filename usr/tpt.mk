# TPT-RAID additions to tgt's usr/Makefile (included by patch 0001).
# TPT_TOP, TPT_LIBDIR and TPT_VERSION come from the fork's top-level Makefile.

TPT_VERSION ?= 0.0.0
EXTRAVERSION := +tpt$(TPT_VERSION)

TPT_OBJS = tpt_lu.o tpt_session.o tpt_group.o tpt_xfer.o tpt_cmd.o \
	tpt_cmd_setup.o tpt_cmd_read.o tpt_cmd_write.o tpt_cmd_parity.o \
	tpt_io.o bs_tptraid.o tpt_ctl_array.o tpt_ctl_baseline.o tpt_ctl_tpt.o
TGTD_OBJS += $(TPT_OBJS)
INCLUDES += -I$(TPT_TOP)
LIBS += $(TPT_LIBDIR)/libtptctl.a $(TPT_LIBDIR)/libtptiser.a \
	$(TPT_LIBDIR)/libtptscsi.a -liscsi -lfabric -lisal

# Our files meet our own bar, not just tgt's.
$(TPT_OBJS): CFLAGS += -Wextra -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers
