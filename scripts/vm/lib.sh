# shellcheck shell=bash disable=SC2034
# Shared by the scripts under scripts/vm/: where things live.  Sourced, not run.
#
#   VM_TOP    the repository
#   VM_BUILD  the build directory: --build DIR, else $TPT_BUILD, else $VM_TOP/build
#   VM_DIR    $VM_BUILD/vm: the image (vmlinuz, initrd.img), its stamp and logs
#   VM_DEBS   $VM_TOP/build/vm/debs: downloaded packages, shared by build and build-san

VM_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

vm_die() {
	echo "${VM_PROG:-vm}: $*" >&2
	exit 1
}

# vm_set_build DIR: fix VM_BUILD and what derives from it.
vm_set_build() {
	VM_BUILD=$(realpath -m "$1")
	VM_DIR=$VM_BUILD/vm
	VM_DEBS=$VM_TOP/build/vm/debs
}
vm_set_build "${TPT_BUILD:-$VM_TOP/build}"

# The guest's user-mode network, as qemu's slirp lays it out.
VM_GUEST_ADDR=10.0.2.15
VM_HOST_ADDR=10.0.2.2

# The fw_cfg item scripts/vm/run --chap puts a host-chap.env in; the guest
# reads /sys/firmware/qemu_fw_cfg/by_name/$VM_CHAP_FW_CFG/raw.
VM_CHAP_FW_CFG=opt/org.tptraid/chap
