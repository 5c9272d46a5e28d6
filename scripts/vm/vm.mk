# The test VM (scripts/vm/): included by the top-level Makefile, which
# defines TOP (the repository) and BUILD (build/ or build-san/).
#
#   make vm-image   build or refresh $(BUILD)/vm/{vmlinuz,initrd.img}
#                   (Debian packages + our tgtd; a no-op when nothing changed)
#   make vm-shell   boot it with a shell on this terminal, our tgtd serving
#                   a LUN on the host (VM_SHELL_ARGS: more options for
#                   scripts/vm/shell, e.g. VM_SHELL_ARGS=--isolated)
#   make vm-test    only the VM tests of the conformance suite
#
# `make check` runs the VM tests as part of the pytest suites
# (conformance/test_vm.py builds the image itself, or skips with the reason).

VM_SCRIPTS := $(TOP)/scripts/vm
VM_SHELL_ARGS ?= --tgtd
PYTHON ?= /usr/bin/python3

.PHONY: vm-image
vm-image: all
	$(VM_SCRIPTS)/build-image --build $(BUILD)

.PHONY: vm-shell
vm-shell: vm-image
	$(VM_SCRIPTS)/shell --build $(BUILD) $(VM_SHELL_ARGS)

.PHONY: vm-test
vm-test: all
	TPT_BUILD=$(BUILD) TPT_SAN=$(SAN) $(PYTHON) -m pytest $(TOP)/conformance/test_vm.py $(PYTEST_ARGS)
