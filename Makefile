# TPT-RAID: a protocol-extension fork of tgt (stgt).
#
#   make            fetch pinned upstream tgt, patch, overlay, build, stage
#   make check      unit tests, fuzz smoke runs, then the pytest suites
#   make demo       a local TPT-RAID cluster doing real I/O with stock libiscsi
#   make bench      datamover, array, recovery, host-direct, Tables I/II and
#                   scalability (modelled switch) benchmarks, printed as
#                   ratios, collected into build/bench/results.md and .json
#   make bench-smoke every benchmark once, tiny and short (make check runs it)
#   make soak       the cut-link tests for longer: SOAK_CYCLES (40) cuts and
#                   restores of a member's link under one load, both modes;
#                   then CHAOS_FAULTS (12) random faults, one box at a
#                   time, under one load (CHAOS_SEED to repeat a run)
#   make install    tgtd, tgtadm, tgt-admin, the tools, libtptinitiator, the
#                   nbdkit plugin, man pages and the systemd unit under
#                   $(DESTDIR)$(PREFIX) (/usr/local): tpt-raid(7)
#   make deps       install the Debian packages all of this needs (check and
#                   demo do it first)
#   make SAN=1 ...  the same with AddressSanitizer and UBSan
#
# Everything generated lives under build/ (or build-san/ with SAN=1).

TPT_VERSION := 0.1.0
TGT_DIR_NAME := tgt-1.0.85

TOP := $(abspath .)
ifeq ($(SAN),1)
BUILD ?= $(TOP)/build-san
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD ?= $(TOP)/build
SAN_FLAGS :=
endif
# The upstream source package is the same for both builds.
UPSTREAM := $(TOP)/build/upstream/$(TGT_DIR_NAME)
TGT := $(BUILD)/tgt
STAGE := $(BUILD)/stage
OBJ := $(BUILD)/obj
LIBDIR := $(BUILD)/lib
BINDIR := $(STAGE)/bin

CC := gcc
PYTHON := /usr/bin/python3
OUR_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror \
	-Wstrict-prototypes -Wmissing-prototypes -Wshadow -I$(TOP) $(SAN_FLAGS)
OUR_LDFLAGS := $(SAN_FLAGS)

# ---------------------------------------------------------------------------
# Our libraries: scsi/ (codec, sense, parity) and iser/ (datamover).

SCSI_SRCS := $(wildcard scsi/*.c)
ISER_SRCS := $(wildcard iser/*.c)
CTL_SRCS := $(wildcard controller/*.c)
SCSI_OBJS := $(SCSI_SRCS:%.c=$(OBJ)/%.o)
ISER_OBJS := $(ISER_SRCS:%.c=$(OBJ)/%.o)
CTL_OBJS := $(CTL_SRCS:%.c=$(OBJ)/%.o)
LIBTPTSCSI := $(LIBDIR)/libtptscsi.a
LIBTPTISER := $(LIBDIR)/libtptiser.a
LIBTPTCTL := $(LIBDIR)/libtptctl.a
# Link order: the controller uses the datamover, which uses the codec.
TPT_LIBS := $(LIBTPTCTL) $(LIBTPTISER) $(LIBTPTSCSI)
TPT_EXT_LIBS := -lfabric -lisal -lnettle
# The extended host's library (below, with its rules).
INIT_SRCS := $(wildcard initiator/*.c)
PIC_OBJ := $(BUILD)/obj-pic
INIT_PIC_OBJS := $(patsubst %.c,$(PIC_OBJ)/%.o,$(INIT_SRCS) $(ISER_SRCS) $(SCSI_SRCS))
LIBTPTINIT := $(LIBDIR)/libtptinitiator.a
INIT_EXT_LIBS := -liscsi $(TPT_EXT_LIBS)
NBDKIT_PLUGIN := $(LIBDIR)/nbdkit-tptraid-plugin.so

UNIT_SRCS := $(wildcard test/unit/*/test_*.c)
UNIT_BINS := $(UNIT_SRCS:%.c=$(BUILD)/%)
UNIT_HDRS := $(wildcard test/unit/*.h test/unit/*/*.h)

FUZZ_SRCS := $(wildcard test/fuzz/fuzz_*.c)
# `make fuzz FUZZERS="fuzz_a fuzz_b"` runs only those.
FUZZERS ?= $(FUZZ_SRCS:test/fuzz/%.c=%)
FUZZ_BINS := $(FUZZERS:%=$(BUILD)/test/fuzz/%)
FUZZ_SECONDS ?= 10
# libFuzzer's -seed: 0 draws a new one each run, which is how a run finds
# inputs the last ones did not.
FUZZ_SEED ?= 0
# make check's smoke run: short, as it runs every fuzzer, and from a fixed
# seed, so that a clean clone's run is the same run each time.
CHECK_FUZZ_SECONDS ?= 5
CHECK_FUZZ_SEED ?= 1

# Our command-line tools: each is one C file tools/NAME.c or a folder
# tools/NAME/ of C files and its own headers; tools/*.h serve them all.
# TOOL_LDLIBS_NAME is what tool NAME alone links.
TOOL_SRCS := $(wildcard tools/*.c)
TOOL_DIRS := $(sort $(dir $(wildcard tools/*/*.c)))
TOOL_BINS := $(TOOL_SRCS:tools/%.c=$(BINDIR)/%) $(TOOL_DIRS:tools/%/=$(BINDIR)/%)
TOOL_LDLIBS_tpt-client := -ljansson
# Tools on the extended host's library (it carries its own datamover);
# tpt-iscsi-load uses it only for --direct.
INIT_TOOLS := tpt-dd tpt-direct-verify tpt-iscsi-load
$(foreach t,$(INIT_TOOLS),$(eval TOOL_LDLIBS_$(t) := $$(LIBTPTINIT) $$(INIT_EXT_LIBS)))
# Every tool reads sizes with that library's parser (tpt_init_parse_size());
# from the archive these take that object alone.
ARGS_TOOLS := tpt-iscsi-io tpt-iscsi-verify tpt-dm-bench tpt-fi-rma-bench
$(foreach t,$(ARGS_TOOLS),$(eval TOOL_LDLIBS_$(t) := $$(LIBTPTINIT)))

.PHONY: all
all: tgt libs initiator tools unit-bins fault-libs

.PHONY: tools
tools: $(TOOL_BINS)

# A second expansion ($$) finds a tool's own files once the stem ($*) is
# known.
.SECONDEXPANSION:
$(BINDIR)/%: $$(wildcard tools/$$*.c tools/$$*/*.c tools/$$*/*.h) $(wildcard tools/*.h) $(TPT_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(OUR_CFLAGS) $(filter %.c,$^) -o $@ $(OUR_LDFLAGS) $(TPT_LIBS) -liscsi $(TOOL_LDLIBS_$*) $(TPT_EXT_LIBS)

$(INIT_TOOLS:%=$(BINDIR)/%) $(ARGS_TOOLS:%=$(BINDIR)/%): $(LIBTPTINIT)

.PHONY: libs
libs: $(TPT_LIBS)

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(OUR_CFLAGS) -MMD -MP -c $< -o $@

$(LIBTPTSCSI): $(SCSI_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBTPTISER): $(ISER_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBTPTCTL): $(CTL_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

-include $(SCSI_OBJS:.o=.d) $(ISER_OBJS:.o=.d) $(CTL_OBJS:.o=.d)

# ---------------------------------------------------------------------------
# libtptinitiator (initiator/): the extended host, docs/initiator.md.
# Position-independent and self-contained, so that a shared object (the
# nbdkit plugin) can link it: the archive carries PIC builds of the codec
# and the datamover, compiled apart in obj-pic/.  Programs link it with
# $(INIT_EXT_LIBS).

.PHONY: initiator
initiator: $(LIBTPTINIT) $(NBDKIT_PLUGIN)

$(PIC_OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(OUR_CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(LIBTPTINIT): $(INIT_PIC_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# nbdkit's own symbols (nbdkit_error, ...) come from the nbdkit process.
$(NBDKIT_PLUGIN): $(wildcard initiator/nbdkit/*.c initiator/nbdkit/*.h) $(LIBTPTINIT)
	@mkdir -p $(dir $@)
	$(CC) $(OUR_CFLAGS) -fPIC -shared $(filter %.c,$^) -o $@ $(OUR_LDFLAGS) \
		$(LIBTPTINIT) $(INIT_EXT_LIBS) -lpthread

-include $(INIT_PIC_OBJS:.o=.d)

# ---------------------------------------------------------------------------
# Upstream tgt: fetch, patch, overlay, build, stage.

TGT_PATCHES := $(shell sed -e 's/[[:space:]]*\#.*//' -e '/^$$/d' patches/tgt/series)
OVERLAY := $(shell find usr -type f)

.PHONY: fetch
fetch: $(UPSTREAM)/.tpt-fetched

$(UPSTREAM)/.tpt-fetched: scripts/fetch-upstream
	scripts/fetch-upstream
	touch $@

# A change to the series or any patch rebuilds the tree from pristine.
$(TGT)/.tpt-patched: $(UPSTREAM)/.tpt-fetched patches/tgt/series $(TGT_PATCHES:%=patches/tgt/%)
	rm -rf $(TGT)
	mkdir -p $(dir $(TGT))
	cp -a $(UPSTREAM) $(TGT)
	TGT_TREE=$(TGT) scripts/tgt-quilt push -a -q --fuzz=0
	touch $@

.PHONY: tgt-tree
tgt-tree: $(TGT)/.tpt-patched

$(TGT)/.tpt-overlaid: $(TGT)/.tpt-patched $(OVERLAY)
	cp -p --parents $(OVERLAY) $(TGT)/
	touch $@

# DEB_HOST_MULTIARCH is how Debian's aio-detection patch finds eventfd.h.
TGT_MAKE_ARGS := ISCSI_RDMA=1 TPT_TOP=$(TOP) TPT_LIBDIR=$(LIBDIR) \
	TPT_VERSION=$(TPT_VERSION) PREFIX=$(STAGE) \
	DEB_HOST_MULTIARCH=$(shell $(CC) -print-multiarch)

# tgt's makefile does not track flags: rebuild from clean when they change.
# DESTDIR (make install's) is never tgt's: it would go into tgtd's BSDIR.
TGT_ARGS_STAMP := $(TGT)/.tpt-args
TGT_ARGS_NOW := $(TGT_MAKE_ARGS) SAN=$(SAN)

.PHONY: tgt
tgt: $(TGT)/.tpt-overlaid $(TPT_LIBS)
	@if [ "$$(cat $(TGT_ARGS_STAMP) 2>/dev/null)" != "$(TGT_ARGS_NOW)" ]; then \
		$(MAKE) -C $(TGT) clean-programs >/dev/null; \
		echo "$(TGT_ARGS_NOW)" >$(TGT_ARGS_STAMP); \
	fi
	CFLAGS="$(SAN_FLAGS)" LDFLAGS="$(SAN_FLAGS)" $(MAKE) -C $(TGT) $(TGT_MAKE_ARGS) DESTDIR= programs
	CFLAGS="$(SAN_FLAGS)" LDFLAGS="$(SAN_FLAGS)" $(MAKE) -C $(TGT) $(TGT_MAKE_ARGS) DESTDIR= install-programs >/dev/null
	@$(STAGE)/sbin/tgtd --version

# ---------------------------------------------------------------------------
# Tests.

.PHONY: unit-bins
unit-bins: $(UNIT_BINS)

$(BUILD)/test/unit/%: test/unit/%.c $(UNIT_HDRS) $(TPT_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(OUR_CFLAGS) $< -o $@ $(OUR_LDFLAGS) $(TPT_LIBS) $(TPT_EXT_LIBS)

# The extended host's tests link its own library (PIC, self-contained).
$(BUILD)/test/unit/initiator/%: test/unit/initiator/%.c $(UNIT_HDRS) $(LIBTPTINIT)
	@mkdir -p $(dir $@)
	$(CC) $(OUR_CFLAGS) $< -o $@ $(OUR_LDFLAGS) $(LIBTPTINIT) $(INIT_EXT_LIBS)

# Faults the conformance tests inject into real processes (LD_PRELOAD):
# built without the sanitizers, which they run beside.
FAULT_LIBS := $(BUILD)/test/fault/libtpt-bad-sectors.so
.PHONY: fault-libs
fault-libs: $(FAULT_LIBS)

$(BUILD)/test/fault/libtpt-bad-sectors.so: test/fault/bad_sectors.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -fPIC -shared $< -o $@ -ldl

.PHONY: unit
unit: $(UNIT_BINS)
	@scripts/run-unit $(UNIT_BINS)

FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined

# Every fuzz target links the pure libraries' sources: the codec and the
# controller's parsers.
$(BUILD)/test/fuzz/%: test/fuzz/%.c $(SCSI_SRCS) $(CTL_SRCS) $(wildcard scsi/*.h controller/*.h test/fuzz/*.h)
	@mkdir -p $(dir $@)
	clang -std=c11 -D_GNU_SOURCE $(FUZZ_CFLAGS) -I$(TOP) \
		$< $(SCSI_SRCS) $(CTL_SRCS) -o $@ -lisal -lnettle

# The login-key fuzzer compiles upstream's iSCSI login code from the patched
# tree (tgt's own dialect, gnu11).  It includes iscsid.c for its static key
# scanners; lld's --gc-sections then drops the rest of tgtd, which this link
# does not have (GNU ld keeps it and fails on its undefined symbols).
TGT_LOGIN_SRCS := $(addprefix $(TGT)/usr/iscsi/,param.c md5.c sha1.c)
$(BUILD)/test/fuzz/fuzz_iscsi_login_keys: test/fuzz/fuzz_iscsi_login_keys.c $(TGT)/.tpt-patched
	@mkdir -p $(dir $@)
	clang -std=gnu11 -D_GNU_SOURCE $(FUZZ_CFLAGS) \
		-I$(TGT)/usr/iscsi -I$(TGT)/usr \
		-ffunction-sections -fdata-sections -fuse-ld=lld -Wl,--gc-sections \
		$< $(TGT_LOGIN_SRCS) -o $@

# The hello fuzzer includes the datamover's peer code for its static
# replay check; the rest of the datamover comes with it, and so do the
# libraries the datamover links (nothing here opens a fabric).
DM_HELLO_SRCS := $(filter-out iser/tpt_dm_peer.c,$(ISER_SRCS)) $(SCSI_SRCS)
$(BUILD)/test/fuzz/fuzz_dm_hello: test/fuzz/fuzz_dm_hello.c $(ISER_SRCS) $(SCSI_SRCS) $(wildcard iser/*.h scsi/*.h test/fuzz/*.h)
	@mkdir -p $(dir $@)
	clang -std=c11 -D_GNU_SOURCE $(FUZZ_CFLAGS) -I$(TOP) \
		$< $(DM_HELLO_SRCS) -o $@ $(TPT_EXT_LIBS)

# The extended host's parsers: their one file, on their own.
$(BUILD)/test/fuzz/fuzz_init_args: test/fuzz/fuzz_init_args.c initiator/tpt_init_args.c initiator/tpt_init_args.h initiator/tpt_initiator.h
	@mkdir -p $(dir $@)
	clang -std=c11 -D_GNU_SOURCE $(FUZZ_CFLAGS) -I$(TOP) \
		$< initiator/tpt_init_args.c -o $@

# Each fuzzer grows its corpus in $(BUILD)/fuzz-corpus/NAME, starting from
# the seeds in test/fuzz/corpus/NAME and the keywords in test/fuzz/NAME.dict
# when they exist; its log is $(BUILD)/fuzz-NAME.log.
.PHONY: fuzz
fuzz: $(FUZZ_BINS)
	@for f in $(FUZZ_BINS); do \
		n=$$(basename $$f); \
		mkdir -p $(BUILD)/fuzz-corpus/$$n; \
		echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
		$$f -max_total_time=$(FUZZ_SECONDS) -seed=$(FUZZ_SEED) \
			-print_final_stats=1 \
			$$([ -f test/fuzz/$$n.dict ] && echo -dict=test/fuzz/$$n.dict) \
			$(BUILD)/fuzz-corpus/$$n \
			$$([ -d test/fuzz/corpus/$$n ] && echo test/fuzz/corpus/$$n) \
			2>$(BUILD)/fuzz-$$n.log \
			|| { tail -n 40 $(BUILD)/fuzz-$$n.log; exit 1; }; \
		grep -h '^#[0-9]' $(BUILD)/fuzz-$$n.log | tail -n 1; \
	done

PYTEST_ARGS ?=
.PHONY: pytest
# The slowest tests named at the end: where the suite's time goes, for
# whoever keeps make check inside CI's limit.
pytest: all
	TPT_BUILD=$(BUILD) TPT_SAN=$(SAN) $(PYTHON) -m pytest conformance \
		--durations=25 $(PYTEST_ARGS)

# The README's commands work on a fresh machine: they install what is missing.
.PHONY: deps
deps:
	@scripts/install-deps

.PHONY: check
check: deps
	$(MAKE) --no-print-directory all
	$(MAKE) --no-print-directory unit
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS) \
		FUZZ_SEED=$(CHECK_FUZZ_SEED)
	$(MAKE) --no-print-directory pytest

# Benchmarks print ratios measured in one run; they assert nothing.
.PHONY: bench
bench: deps
	@scripts/install-deps --bench
	$(MAKE) --no-print-directory all
	TPT_BINDIR=$(BINDIR) scripts/bench/datamover
	TPT_BUILD=$(BUILD) scripts/bench/array
	TPT_BUILD=$(BUILD) scripts/bench/recovery
	TPT_BUILD=$(BUILD) TPT_BINDIR=$(BINDIR) scripts/bench/direct
	TPT_BUILD=$(BUILD) TPT_BINDIR=$(BINDIR) scripts/bench/direct --raid 1 --units 32k,128k
	TPT_BUILD=$(BUILD) TPT_BINDIR=$(BINDIR) scripts/bench/direct --raid 6 --units 32k,128k
	TPT_BUILD=$(BUILD) TPT_BINDIR=$(BINDIR) scripts/bench/tables
	TPT_BUILD=$(BUILD) TPT_BINDIR=$(BINDIR) scripts/bench/scale
	TPT_BUILD=$(BUILD) TPT_BINDIR=$(BINDIR) scripts/bench/gather
	scripts/bench/report

# The benchmarks run small and short, results in pytest's tmp_path (never
# build/bench): that each still runs, not what it measures.
.PHONY: bench-smoke
bench-smoke: all
	TPT_BUILD=$(BUILD) TPT_SAN=$(SAN) $(PYTHON) -m pytest conformance/test_bench.py $(PYTEST_ARGS)

# Opt-in, minutes per mode: what make check's 5 cuts catch only sometimes,
# and faults in random order and timing (each run prints its seed).
SOAK_CYCLES ?= 40
CHAOS_FAULTS ?= 12
CHAOS_SEED ?=
.PHONY: soak
soak: all
	TPT_BUILD=$(BUILD) TPT_SAN=$(SAN) TPT_SOAK_CYCLES=$(SOAK_CYCLES) \
		TPT_CHAOS_FAULTS=$(CHAOS_FAULTS) TPT_CHAOS_SEED=$(CHAOS_SEED) \
		$(PYTHON) -m pytest conformance/test_failures.py \
		conformance/test_controller_link.py conformance/test_chaos.py \
		-k "link or random" $(PYTEST_ARGS)

.PHONY: demo
demo: deps
	$(MAKE) --no-print-directory all
	TPT_BUILD=$(BUILD) scripts/demo

# ---------------------------------------------------------------------------
# make install: what a target or controller box and an extended host need.
# PREFIX=/usr puts the unit and the nbdkit plugin where systemd and nbdkit
# look without being told; the default keeps clear of Debian's tgt.

PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
MULTIARCH := $(shell $(CC) -print-multiarch)
sbindir := $(PREFIX)/sbin
bindir := $(PREFIX)/bin
# Test and benchmark drivers (the conformance suites and make bench run them),
# and the unit's stop script.
libexecdir := $(PREFIX)/libexec/tpt-raid
libdir := $(PREFIX)/lib
includedir := $(PREFIX)/include
mandir := $(PREFIX)/share/man
docdir := $(PREFIX)/share/doc/tpt-raid
unitdir := $(PREFIX)/lib/systemd/system
nbdkitplugindir := $(PREFIX)/lib/$(MULTIARCH)/nbdkit/plugins

# Tools an operator or a host runs; the rest of tools/ goes to libexecdir.
USER_TOOLS := tpt-iscsi-io tpt-dd tpt-scrub tpt-iscsi-verify
DRIVER_TOOLS := $(filter-out $(USER_TOOLS),$(notdir $(TOOL_BINS)))
OUR_MANPAGES := $(wildcard man/*.[1-9])
# tgt's own pages for the programs we install, from its DocBook sources.
TGT_MANPAGES := $(addprefix $(TGT)/doc/manpages/,tgtd.8 tgtadm.8 tgt-admin.8 targets.conf.5)

$(TGT_MANPAGES): $(TGT)/.tpt-patched
	$(MAKE) -C $(TGT)/doc $(@:$(TGT)/doc/%=%) >/dev/null 2>&1
	@test -s $@ || { echo "cannot build $@ (xsltproc, docbook-xsl: make deps)"; exit 1; }

SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@SBINDIR@|$(sbindir)|g' \
	-e 's|@BINDIR@|$(bindir)|g' -e 's|@LIBDIR@|$(libdir)|g' \
	-e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@VERSION@|$(TPT_VERSION)|g' \
	-e 's|@LIBEXECDIR@|$(libexecdir)|g'

.PHONY: install
install: all $(TGT_MANPAGES)
	install -d $(addprefix $(DESTDIR),$(sbindir) $(bindir) $(libexecdir) \
		$(libdir)/pkgconfig $(includedir) $(nbdkitplugindir) $(unitdir) \
		$(docdir)/examples $(foreach n,1 3 5 7 8,$(mandir)/man$(n)))
	install -m 755 $(STAGE)/sbin/tgtd $(STAGE)/sbin/tgtadm \
		$(TGT)/scripts/tgt-admin $(DESTDIR)$(sbindir)
	install -m 755 $(USER_TOOLS:%=$(BINDIR)/%) $(DESTDIR)$(bindir)
	install -m 755 $(DRIVER_TOOLS:%=$(BINDIR)/%) dist/tpt-tgtd-stop \
		$(DESTDIR)$(libexecdir)
	install -m 644 $(LIBTPTINIT) $(DESTDIR)$(libdir)
	install -m 644 initiator/tpt_initiator.h $(DESTDIR)$(includedir)
	$(SUBST) dist/tptinitiator.pc.in >$(DESTDIR)$(libdir)/pkgconfig/tptinitiator.pc
	install -m 755 $(NBDKIT_PLUGIN) $(DESTDIR)$(nbdkitplugindir)
	$(SUBST) dist/tpt-tgtd.service.in >$(DESTDIR)$(unitdir)/tpt-tgtd.service
	install -m 644 dist/examples/*.conf $(DESTDIR)$(docdir)/examples
	install -m 644 docs/*.md $(DESTDIR)$(docdir)
	@for m in $(OUR_MANPAGES) $(TGT_MANPAGES); do \
		n=$${m##*.}; install -m 644 $$m $(DESTDIR)$(mandir)/man$$n || exit 1; \
	done

# The VM host test (issue 5): image building and a shell in the guest.
-include scripts/vm/vm.mk

.PHONY: clean
clean:
	rm -rf $(TGT) $(OBJ) $(LIBDIR) $(STAGE) $(BUILD)/test

.PHONY: distclean
distclean:
	rm -rf build build-san
