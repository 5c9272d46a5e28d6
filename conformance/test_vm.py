"""A real Linux initiator against our tgtd: a Debian kernel with open-iscsi
booted under qemu (scripts/vm/), run time printed in the closing figures.

- iSCSI over TCP: the guest logs in to a LUN of our tgtd on the host's
  loopback (qemu user networking: the guest's 10.0.2.2:PORT is the host's
  127.0.0.1:PORT), makes an ext4 file system, writes files with known
  checksums, logs out and in again, verifies them and runs fsck -n.
  The plain LUN's sessions carry HeaderDigest and DataDigest CRC32C, so
  the reads our tgtd would splice from the file's pages (patches/tgt
  0018) must go from a buffer, digested.
  iscsi_cycle() takes the portal, IQN and LUN, so any target can be put
  through the same cycle.  Every login is mutual CHAP, the TPT-RAID arrays
  are CHAP on every hop (tptlib.cluster.start(chap=True), as tpt-cluster
  start --chap): the guest gets a host-chap.env (scripts/vm/run --chap, by
  qemu's fw_cfg) and first checks that a login with a wrong secret, and
  one facing a target that answers with a wrong one, are refused.
- iSER over soft-RoCE: rdma_rxe on the guest's eth0, our tgtd (ISCSI_RDMA=1)
  inside the guest with its iSER portal on the rxe address, and the same
  cycle (mutual CHAP, a wrong secret refused) through an open-iscsi iface
  with iface.transport_name=iser, i.e. the kernel's ib_iser against the
  fork's iSER code.
- Our datamover (test_dm_rma, tpt-dm-bench) with libfabric's verbs provider
  over that rxe device, and test_dm_scope, since there each datamover scope
  is a protection domain of its own.

Skipped, with the reason, when qemu is missing or the image cannot be built
(no Debian archive reachable, not root for apt-get download)."""
import hashlib
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tptlib import paths
from tptlib.tgtd import Chap

VM_SCRIPTS = paths.TOP / "scripts" / "vm"
HOST_FROM_GUEST = "10.0.2.2"    # qemu user networking: the host's loopback
IQN = "iqn.2026-11.org.tptraid:vm-plain"
BUILD_TIMEOUT = 900             # the first build downloads ~80 MB of packages
BOOT_TIMEOUT = 180              # qemu's hard limit; a TCG run takes ~30 s

STEP_RE = re.compile(r"^=== VMTEST (\S+) (OK|FAIL|SKIP) ([0-9.]+)s(?: (.*))?$")
SUM_RE = re.compile(r"^=== VMTEST (sum|readsum) (\S+) (\S+) ([0-9a-f]{64})$")
TOTAL_RE = re.compile(r"^=== VMTEST TIME total ([0-9.]+)s$")
CYCLE = ("discovery", "login", "mkfs", "write", "logout", "relogin", "verify", "fsck", "logout2")
# The guest's CHAP refusals (scripts/vm/guest-init refused_login): iscsiadm's
# exit status and what iscsid logged.  A wrong secret: the target refuses
# (ISCSI_ERR_LOGIN_AUTH_FAILED); a target answering with a wrong one: the
# kernel initiator's iscsid refuses it (ISCSI_ERR_FATAL_LOGIN).
CHAP_REFUSALS = {
    "chap_wrong_secret": re.compile(r"^refused: iscsiadm exit 24 \(.*authorization failure\); "
                                    r"iscsid: .*login rejected: Initiator failed authentication"),
    "chap_wrong_answer": re.compile(r"^refused: iscsiadm exit 19 \(.*\); "
                                    r"iscsid: .*received incorrect CHAP response from target"),
}
# What our tgtd logs when it refuses the guest's wrong secret.
TGTD_REFUSED = "authentication of iqn.2026-11.org.tptraid:vm-guest failed"

# The guest writes these (scripts/vm/guest-init FILES): the line
# "tpt-raid vmtest NAME" repeated and cut to SIZE bytes, plus 2 MiB of
# random bytes whose checksum only the guest knows.
PATTERN_FILES = {"small": 4096, "odd": 1048699, "large": 6291456}


def pattern_sha256(name: str, size: int) -> str:
    line = f"tpt-raid vmtest {name}\n".encode()
    data = (line * (size // len(line) + 1))[:size]
    return hashlib.sha256(data).hexdigest()


@dataclass
class Step:
    status: str
    seconds: float
    detail: str


@dataclass
class VmRun:
    """One boot of the test VM: the console and what the guest reported."""
    rc: int
    wall: float
    console: str
    steps: dict = field(default_factory=dict)
    sums: dict = field(default_factory=dict)        # (kind, label) -> {file: sha256}
    guest_total: float = None
    result: str = None

    @classmethod
    def parse(cls, rc, wall, console):
        run = cls(rc, wall, console)
        for line in console.splitlines():
            if m := STEP_RE.match(line):
                run.steps[m[1]] = Step(m[2], float(m[3]), m[4] or "")
            elif m := SUM_RE.match(line):
                run.sums.setdefault((m[1], m[2]), {})[m[3]] = m[4]
            elif m := TOTAL_RE.match(line):
                run.guest_total = float(m[1])
            elif line.startswith("=== VMTEST RESULT: "):
                run.result = line.split(": ", 1)[1].strip()
        return run

    def tail(self, lines=60) -> str:
        return "\n".join(self.console.splitlines()[-lines:])

    def require(self, name) -> Step:
        """The step, which must have passed."""
        step = self.steps.get(name)
        if step is None:
            pytest.fail(f"the guest never reported step {name} (qemu exit {self.rc}, "
                        f"{self.wall:.1f}s); console tail:\n{self.tail()}", pytrace=False)
        if step.status != "OK":
            pytest.fail(f"VM step {name} {step.status}: {step.detail}\nconsole tail:\n{self.tail()}",
                        pytrace=False)
        return step


def run_vm(test: str, log: Path, portal: str = None, iqn: str = None, lun: int = 1,
           isolated: bool = False, on_line=None, chap: Chap = None,
           digest: bool = False) -> VmRun:
    """Boot the image with vmtest=TEST (scripts/vm/run) and parse its console.
    on_line(line), if given, sees each console line as the guest prints it.
    chap: the guest logs in to PORTAL with it (a host-chap.env next to the
    log, handed over by scripts/vm/run --chap).  digest: the TCP logins ask
    for HeaderDigest and DataDigest CRC32C, and a session without both fails
    the login step."""
    cmd = [str(VM_SCRIPTS / "run"), "--build", str(paths.BUILD), "--test", test,
           "--lun", str(lun), "--timeout", str(BOOT_TIMEOUT), "--log", str(log)]
    if portal:
        cmd += ["--portal", portal]
    if iqn:
        cmd += ["--iqn", iqn]
    if isolated:
        cmd.append("--isolated")
    if chap:
        cmd += ["--chap", str(chap.write_host_env(log.with_name(log.stem + "-host-chap.env")))]
    if digest:
        cmd += ["--append", "digest=crc32c"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    seen = 0
    while on_line and proc.poll() is None and time.monotonic() - t0 < BOOT_TIMEOUT + 60:
        text = log.read_text(errors="replace") if log.exists() else ""
        lines = text.splitlines()
        for line in lines[seen:len(lines) - 1]:
            on_line(line)
        seen = max(seen, len(lines) - 1)
        time.sleep(0.1)
    _, err = proc.communicate(timeout=BOOT_TIMEOUT + 60)
    wall = time.monotonic() - t0
    console = log.read_text(errors="replace") if log.exists() else ""
    run = VmRun.parse(proc.returncode, wall, console)
    if run.result is None:
        pytest.fail(f"the VM gave no verdict: {err.strip()}\nconsole tail:\n{run.tail()}",
                    pytrace=False)
    return run


def check_cycle(run: VmRun, label: str, transport: str, chap: Chap = None,
                refusals=tuple(CHAP_REFUSALS)):
    """Every step of one discovery/login/mkfs/checksum/fsck cycle passed and
    the files read back after a fresh login are the ones written.  With
    chap (mutual CHAP as chap.user, the target answering as chap.user_in):
    before the first login the guest was refused with a wrong secret and
    refused a target answering with a wrong one (the REFUSALS)."""
    if chap:
        assert run.require(f"{label}.chap").detail == (
            f"mutual CHAP: we log in as {chap.user}, the target must answer as {chap.user_in}")
        for s in refusals:
            detail = run.require(f"{label}.{s}").detail
            said = CHAP_REFUSALS[s]
            assert said.match(detail), f"{label}.{s}: {detail}"
        for secret in filter(None, (chap.secret, chap.secret_in)):
            assert secret not in run.console, "a CHAP secret is on the console"
    elif f"{label}.chap" in run.steps:
        pytest.fail(f"{label}: the guest used CHAP where the test gave none", pytrace=False)
    for s in CYCLE:
        run.require(f"{label}.{s}")
    for s in ("login", "relogin"):
        assert run.steps[f"{label}.{s}"].detail.startswith(f"{transport}: "), \
            f"{label}.{s} session is not over {transport}: {run.steps[f'{label}.{s}'].detail}"
    written = run.sums.get(("sum", label), {})
    read = run.sums.get(("readsum", label), {})
    assert set(written) == set(PATTERN_FILES) | {"random"}, f"files written: {sorted(written)}"
    assert read == written, f"checksums after re-login differ: wrote {written}, read {read}"
    for name, size in PATTERN_FILES.items():
        assert written[name] == pattern_sha256(name, size), f"{name}: the guest wrote other data"


def cycle_figures(run: VmRun, label: str) -> str:
    return ", ".join(f"{s} {run.steps[f'{label}.{s}'].seconds:.1f}s"
                     for s in ("login", "mkfs", "write", "relogin", "verify", "fsck"))


def iscsi_cycle(log: Path, portal: str, iqn: str, lun: int = 1, with_rdma: bool = False,
                chap: Chap = None, digest: bool = False) -> VmRun:
    """The whole TCP cycle against any target the guest can reach: PORTAL as
    the guest sees it (10.0.2.2:PORT for the host's 127.0.0.1:PORT), with
    mutual CHAP when chap is given.  With with_rdma the same boot goes on
    with the soft-RoCE steps (vmtest=all)."""
    run = run_vm("all" if with_rdma else "iscsi", log, portal=portal, iqn=iqn, lun=lun, chap=chap,
                 digest=digest)
    run.require("modules")
    run.require("net")
    check_cycle(run, "tcp", "tcp", chap)
    if digest:
        assert "DataDigest CRC32C" in run.require("tcp.login").detail
    return run


def chap_figures(run: VmRun, label: str) -> str:
    return ", ".join(f"{what} refused in {run.steps[f'{label}.{s}'].seconds:.1f}s"
                     for s, what in (("chap_wrong_secret", "wrong secret"),
                                     ("chap_wrong_answer", "wrong answer"))
                     if f"{label}.{s}" in run.steps)


def phase_seconds(run: VmRun, *prefixes) -> float:
    return sum(s.seconds for name, s in run.steps.items() if name.startswith(prefixes))


@pytest.fixture(scope="module")
def vm_image():
    """The kernel and initramfs, built or found up to date."""
    if not (VM_SCRIPTS / "build-image").exists():
        pytest.skip(f"{VM_SCRIPTS / 'build-image'} is missing")
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 not found (Debian package qemu-system-x86)")
    r = subprocess.run([str(VM_SCRIPTS / "build-image"), "--build", str(paths.BUILD), "--quiet"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT)
    lines = r.stderr.strip().splitlines()
    if r.returncode == 3:
        pytest.skip(f"VM image cannot be built: {lines[-1] if lines else 'no reason given'}")
    if r.returncode != 0:
        pytest.fail(f"scripts/vm/build-image exited {r.returncode}:\n" + "\n".join(lines[-30:]),
                    pytrace=False)


# A boot costs ~7 s of kernel start and module loading under TCG: the first
# test boots with vmtest=all and leaves the run here for the RDMA tests.
_boots = {}


def test_vm_iscsi_tcp_on_plain_lun(vm_image, tgtd_factory, workdir, report):
    t = tgtd_factory()
    chap = Chap.new("host", "array")
    iqn = t.new_target(1, IQN, chap=chap)
    t.new_file_lun(1, 1, 256 << 20)
    # tgt offers no digest unless told to.
    for name in ("HeaderDigest", "DataDigest"):
        t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "update", "--tid", 1,
                 "--name", name, "--value", "CRC32C,None")
    log = workdir / "console.log"
    try:
        run = iscsi_cycle(log, f"{HOST_FROM_GUEST}:{t.port}", iqn, lun=1, with_rdma=True, chap=chap,
                          digest=True)
    finally:
        # The RDMA steps of this boot stand on their own: keep them even
        # when a TCP step failed.
        if log.exists():
            _boots["all"] = VmRun.parse(None, 0.0, log.read_text(errors="replace"))
    _boots["all"] = run
    report(f"VM boot, iSCSI/TCP + iSER/soft-RoCE + datamover (qemu TCG, 1 vCPU): {run.wall:.1f}s wall, "
           f"guest {run.guest_total}s")
    report(f"  iSCSI/TCP vs our tgtd (plain 256 MiB LUN), mutual CHAP, header and data "
           f"digests CRC32C: PASS in "
           f"{phase_seconds(run, 'tcp.'):.1f}s ({cycle_figures(run, 'tcp')}; {chap_figures(run, 'tcp')})")
    assert TGTD_REFUSED in t.log()
    assert t.alive()


@pytest.fixture
def rdma_run(vm_image, tmp_path, report):
    """The soft-RoCE steps: from the first test's boot when it ran, else a
    boot of their own (vmtest=rdma, no network path to the host)."""
    if "all" not in _boots and "rdma" not in _boots:
        run = _boots["rdma"] = run_vm("rdma", tmp_path / "console.log", isolated=True)
        report(f"VM boot, iSER/soft-RoCE + datamover (qemu TCG, 1 vCPU): {run.wall:.1f}s wall, "
               f"guest {run.guest_total}s")
    return _boots.get("all") or _boots["rdma"]


def test_vm_iser_over_rxe(rdma_run, report):
    run = rdma_run
    run.require("rdma.rxe")
    run.require("iser.tgtd")
    assert "transport_name=iser" in run.require("iser.iface").detail
    # The guest's tgtd requires mutual CHAP with secrets the guest made.
    assert run.steps["iser.tgtd"].detail.endswith(", mutual CHAP")
    # An iSER login costs the guest 1.5 s: only the refusal that is our
    # iSER code's; the wrong answer is iscsid's check, as over TCP.
    check_cycle(run, "iser", "iser", Chap("host", "", "array", ""), refusals=("chap_wrong_secret",))
    report(f"  iSER over soft-RoCE (rxe0, our tgtd in the guest, kernel ib_iser), mutual CHAP: PASS in "
           f"{phase_seconds(run, 'rdma.', 'iser.'):.1f}s ({cycle_figures(run, 'iser')}; "
           f"{chap_figures(run, 'iser')})")


def rxe_step(run, report, step, what):
    """The guest's @step over rxe0: skipped where the guest could not run
    it, else it must have passed."""
    run.require("rdma.rxe")
    dm = run.steps.get(step)
    assert dm is not None, f"the guest never ran the {what} step:\n{run.tail()}"
    if dm.status == "SKIP":
        report(f"  {what} over libfabric verbs on rxe0: SKIPPED: {dm.detail}")
        pytest.skip(dm.detail)
    assert dm.status == "OK", f"{what} over verbs on rxe0: {dm.detail}\n{run.tail()}"
    return dm


def test_vm_datamover_verbs_over_rxe(rdma_run, report):
    run = rdma_run
    dm = rxe_step(run, report, "dm.verbs", "datamover")
    bench = run.require("dm.bench")
    report(f"  datamover over libfabric verbs on rxe0: test_dm_rma PASS in {dm.seconds:.1f}s; "
           f"tpt-dm-bench {bench.detail}")


def test_vm_datamover_scopes_over_rxe(rdma_run, report):
    """test_dm_scope over verbs: each scope its own protection domain, so
    another scope's exact rkey is a remote access error."""
    dm = rxe_step(rdma_run, report, "dm.scope", "datamover scopes")
    report(f"  datamover scopes over libfabric verbs on rxe0: test_dm_scope PASS in "
           f"{dm.seconds:.1f}s")


@pytest.mark.parametrize("mode", ["tpt"])
def test_vm_iscsi_tcp_on_tptraid_lun(vm_image, tgtd_factory, workdir, report, mode):
    """The same cycle, with the kernel initiator on a TPT-RAID-5 LUN over
    five targets, mutual CHAP on every hop: mkfs, files, fsck on the array,
    then the parity of every stripe checked from the members."""
    from tptlib import cluster

    c = cluster.start(tgtd_factory, n=5, mode=mode, unit=64 << 10, member_bytes=80 << 20,
                      chap=True)
    run = iscsi_cycle(workdir / "console-tptraid.log",
                      f"{HOST_FROM_GUEST}:{c.controller.port}", c.iqn, lun=1, chap=c.chap)
    report(f"VM iSCSI/TCP vs a TPT-RAID-5 LUN ({mode}, 5 targets, mutual CHAP on every hop): PASS in "
           f"{phase_seconds(run, 'tcp.'):.1f}s ({cycle_figures(run, 'tcp')}; {chap_figures(run, 'tcp')}), "
           f"{run.wall:.1f}s wall")
    assert TGTD_REFUSED in c.controller.log()
    cluster.allow_plain_reads(c.targets)
    r = subprocess.run([str(paths.tool("tpt-scrub")), "--unit", str(c.unit), *c.target_urls],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and " 0 mismatches" in r.stdout, r.stdout + r.stderr
    assert c.controller.alive()


def test_vm_tptraid_target_killed_mid_copy(vm_image, tgtd_factory, workdir, report):
    """The kernel initiator copies checksummed files onto ext4 on a TPT-RAID
    LUN, and a target box is killed as the copy starts: the guest's kernel
    logs no I/O error, the files read back after a fresh login, fsck -n is
    clean, and the controller says the array is degraded."""
    from tptlib import cluster

    c = cluster.start(tgtd_factory, n=5, mode="tpt", unit=64 << 10, member_bytes=80 << 20,
                      extra_opts=("fail_timeout=3",), chap=True)
    victim = c.targets[2]

    def kill_at_copy(line):
        if "VMTEST tcp.mkfs OK" in line and victim.alive():
            victim.killed_on_purpose = True
            victim.kill()

    run = run_vm("iscsi", workdir / "console-kill.log",
                 portal=f"{HOST_FROM_GUEST}:{c.controller.port}", iqn=c.iqn, lun=1,
                 on_line=kill_at_copy, chap=c.chap)
    run.require("modules")
    run.require("net")
    check_cycle(run, "tcp", "tcp", c.chap)
    kernel = run.require("tcp.kernel")
    assert not victim.alive(), "the target was never killed"
    report(f"VM on a TPT-RAID-5 LUN (mutual CHAP on every hop), target 2 killed as the copy began: "
           f"PASS ({cycle_figures(run, 'tcp')}; {chap_figures(run, 'tcp')}; {kernel.detail}), "
           f"{run.wall:.1f}s wall")
    show = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert "state degraded" in show, show
