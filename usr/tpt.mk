# TPT-RAID additions to tgt's usr/Makefile (included by patch 0001).
# TPT_TOP, TPT_LIBDIR and TPT_VERSION come from the fork's top-level Makefile.

TPT_VERSION ?= 0.0.0
EXTRAVERSION := +tpt$(TPT_VERSION)

# Shared by both programs: the hooks tgt calls, the process's datamover,
# the kept data buffers of iSCSI/TCP commands, their zero-copy READs and
# the READs that complete in the event loop.
TPT_OBJS = tpt_hooks.o tpt_datamover.o tpt_data_buf.o tpt_data_pipe.o \
	tpt_inline_read.o
# The TPT target: LUs in TPT mode execute the TPT command set.
TPT_OBJS += $(addprefix tpt_target/, lu.o nexus.o peer_link.o group.o bounds.o \
	xfer.o cmd.o cmd_setup.o cmd_read.o cmd_write.o cmd_parity.o disk_io.o \
	plain_io.o sb_binding.o)
# The controller: tptraid LUs are arrays over TPT targets.
TPT_OBJS += $(addprefix tpt_controller/, bs_tptraid.o array.o array_assemble.o \
	array_members.o member.o \
	member_fence.o member_bind.o array_files.o recovery.o check.o mode_tpt.o mode_baseline.o \
	array_show.o array_params.o hosts.o read_repair.o lost_units.o replace.o)
TGTD_OBJS += $(TPT_OBJS)
INCLUDES += -I$(TPT_TOP)
TPT_LIBS = $(TPT_LIBDIR)/libtptctl.a $(TPT_LIBDIR)/libtptiser.a \
	$(TPT_LIBDIR)/libtptscsi.a
LIBS += $(TPT_LIBS) -liscsi -lfabric -lisal -lnettle
# tgt's rule knows only its objects: relink when one of ours changes.
tgtd: $(TPT_LIBS)

# Our files meet our own bar, not just tgt's.
$(TPT_OBJS): CFLAGS += -Wextra -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers
