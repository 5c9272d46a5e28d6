"""Our tgtd as a real process on loopback, and tgtadm against it.

Each instance gets its own directory (log, backing files, management
socket), its own iSCSI portal port and its own control port, so any number
of them can run side by side and next to a system tgtd."""
import os
import re
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import net, paths

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def new_chap_secret() -> str:
    """A CHAP secret as scripts/tpt-cluster makes one: 128 random bits as
    32 hex digits."""
    return secrets.token_hex(16)


@dataclass
class Chap:
    """Mutual CHAP for one target: the initiator logs in as user/secret and
    the target answers as user_in/secret_in (open-iscsi's username,
    password, username_in, password_in)."""
    user: str
    secret: str
    user_in: str
    secret_in: str

    @classmethod
    def new(cls, user: str, user_in: str) -> "Chap":
        return cls(user, new_chap_secret(), user_in, new_chap_secret())

    def host_env(self) -> str:
        """What scripts/tpt-cluster start --chap writes to host-chap.env
        (the variables libiscsi reads; scripts/vm/run --chap takes it)."""
        return (f"export LIBISCSI_CHAP_USERNAME={self.user}\n"
                f"export LIBISCSI_CHAP_PASSWORD={self.secret}\n"
                f"export LIBISCSI_CHAP_TARGET_USERNAME={self.user_in}\n"
                f"export LIBISCSI_CHAP_TARGET_PASSWORD={self.secret_in}\n")

    def write_host_env(self, path: Path) -> Path:
        """host_env() in a file only its owner can read."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.host_env())
        return Path(path)

    def url(self, url: str) -> str:
        """An iscsi:// URL with these credentials, as the controller takes
        a member's (docs/controller.md, "CHAP")."""
        return (f"iscsi://{self.user}%{self.secret}@{url.removeprefix('iscsi://')}"
                f"?target_user={self.user_in}&target_password={self.secret_in}")


class TgtadmError(RuntimeError):
    def __init__(self, args, rc, out, err):
        self.rc, self.stdout, self.stderr = rc, out, err
        super().__init__(f"tgtadm {' '.join(map(str, args))} exited {rc}: "
                         f"{err.strip() or out.strip()}")


class Tgtd:
    """One tgtd process.  Use start()/stop() or the tgtd_factory fixture."""

    def __init__(self, workdir: Path, name: str, control_port: int, host: str = "127.0.0.1",
                 netns: str = None, env: dict = None):
        self.dir = Path(workdir)
        self.name = name
        self.host = host
        # A network namespace to run in (ip netns exec): a box whose link
        # a test can cut.  tgtadm reaches it through its unix socket.
        self.netns = netns
        # What this tgtd's environment adds (a fault library, tptlib.faults).
        self.extra_env = dict(env or {})
        self.control_port = control_port
        self.port = None
        self.proc = None
        self.log_path = self.dir / "tgtd.log"
        # tgtd and tgtadm both append ".<control port>" to this path.
        self.ipc_socket = str(self.dir / "ipc")
        self._logf = None

    # -- life cycle -------------------------------------------------------
    @property
    def env(self):
        env = dict(os.environ)
        env["TGT_IPC_SOCKET"] = self.ipc_socket
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")
        env.update(self.extra_env)
        return env

    def start(self, port: int = None, timeout: float = 10.0, extra_args=()):
        self.dir.mkdir(parents=True, exist_ok=True)
        # A namespace has ports of its own: any port is free there.
        self.port = port or net.free_port("127.0.0.1" if self.netns else self.host)
        self._logf = open(self.log_path, "ab")
        cmd = [str(paths.TGTD), "-f", "-C", str(self.control_port),
               "--iscsi", f"portal={self.host}:{self.port}", *extra_args]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=self._logf,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        try:
            net.wait_listening(self.host, self.port, timeout, self.alive, netns=self.netns)
            self._wait_mgmt(timeout)
        except Exception:
            self.kill()
            raise RuntimeError(f"{self.name} did not start; log:\n{self.log()}")
        return self

    def _wait_mgmt(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            r = self.tgtadm("--mode", "system", "--op", "show", check=False)
            if r.returncode == 0:
                return
            if time.monotonic() > deadline or not self.alive():
                raise TimeoutError(f"{self.name}: management socket not ready: {r.stderr}")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 5.0):
        """Delete every target, ask tgtd to exit, SIGKILL as a last resort
        (tgtd does not reliably exit on SIGTERM while sessions exist)."""
        if self.proc is None:
            return
        if self.alive():
            try:
                for tid in self.target_ids():
                    self.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "delete",
                                "--force", "--tid", str(tid), check=False, timeout=timeout)
                self.tgtadm("--mode", "system", "--op", "delete", check=False,
                            timeout=timeout)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                # A daemon that no longer answers tgtadm is hung: say so
                # in the log the failure report prints, then kill it.
                with open(self.log_path, "a") as f:
                    f.write("tptlib: tgtd did not answer tgtadm; killed\n")
                self.kill()
        self._close()

    def kill(self, sig=signal.SIGKILL):
        if self.alive():
            os.killpg(self.proc.pid, sig)
            self.proc.wait(10)
        self._close()

    def _close(self):
        if self._logf:
            self._logf.close()
            self._logf = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def sanitizer_reports(self) -> str:
        text = self.log()
        return text if any(m in text for m in SANITIZER_MARKERS) else ""

    # -- tgtadm -----------------------------------------------------------
    def tgtadm(self, *args, check=True, timeout=30):
        cmd = [str(paths.TGTADM), "-C", str(self.control_port), *map(str, args)]
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise TgtadmError(args, r.returncode, r.stdout, r.stderr)
        return r

    def target_ids(self):
        r = self.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show", check=False)
        return [int(m) for m in re.findall(r"^Target (\d+):", r.stdout, re.M)]

    def new_target(self, tid: int, iqn: str, bind: str = "ALL", chap: Chap = None):
        """With chap, the target requires it (mutual) before it is bound
        to any initiator."""
        self.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "new",
                    "--tid", tid, "--targetname", iqn)
        if chap:
            self.require_chap(tid, chap)
        if bind:
            self.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "bind",
                        "--tid", tid, "--initiator-address", bind)
        return iqn

    def require_chap(self, tid: int, chap: Chap):
        """Target tid accepts only chap.user/secret and answers as
        chap.user_in/secret_in (tgt accounts; the second one --outgoing)."""
        for user, secret in ((chap.user, chap.secret), (chap.user_in, chap.secret_in)):
            self.tgtadm("--lld", "iscsi", "--mode", "account", "--op", "new",
                        "--user", user, "--password", secret)
        self.tgtadm("--lld", "iscsi", "--mode", "account", "--op", "bind", "--tid", tid,
                    "--user", chap.user)
        self.tgtadm("--lld", "iscsi", "--mode", "account", "--op", "bind", "--tid", tid,
                    "--user", chap.user_in, "--outgoing")

    def new_lun(self, tid: int, lun: int, backing_store: str, bstype: str = None,
                bsopts: str = None, blocksize: int = None):
        args = ["--lld", "iscsi", "--mode", "logicalunit", "--op", "new",
                "--tid", tid, "--lun", lun, "--backing-store", backing_store]
        if bstype:
            args += ["--bstype", bstype]
        if bsopts:
            args += ["--bsopts", bsopts]
        if blocksize:
            args += ["--blocksize", blocksize]
        self.tgtadm(*args)

    def new_file_lun(self, tid: int, lun: int, size: int, **kw) -> Path:
        """A LUN over a sparse file of `size` bytes in this instance's dir."""
        path = self.dir / f"lun-t{tid}-l{lun}.img"
        with open(path, "wb") as f:
            f.truncate(size)
        self.new_lun(tid, lun, str(path), **kw)
        return path

    def url(self, iqn: str, lun: int) -> str:
        return f"iscsi://{self.host}:{self.port}/{iqn}/{lun}"


def read_stats(t):
    """tgtadm --mode sys --op show's READ counters (usr/tpt_hooks.c)."""
    out = t.tgtadm("--mode", "sys", "--op", "show").stdout
    pipe = out.split("Zero-copy READ data", 1)[1].split("READs done in the event loop", 1)[0]
    inline = out.split("READs done in the event loop", 1)[1]
    stats = {"pipe " + k: int(v) for k, v in
             re.findall(r"^\s+(READs|Bytes|Read into a buffer instead): (\d+)$", pipe, re.M)}
    stats["open"], stats["busy"] = map(int, re.search(r"Pipes: (\d+) open, (\d+) in use",
                                                      pipe).groups())
    stats.update({"inline " + k: int(v) for k, v in
                  re.findall(r"^\s+(Copied|Spliced|Left to a worker, would wait): (\d+)$",
                             inline, re.M)})
    return stats


def inline_reads(path):
    """How our tgtd may read a LUN over `path` in its event loop
    (usr/tpt_inline_read.h): 'memory' (tmpfs without swap), 'nowait' (a
    file system with RWF_NOWAIT), or None where this test cannot tell."""
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True,
                        text=True, check=True).stdout.strip()
    if fs == "tmpfs":
        with open("/proc/swaps") as f:
            return "memory" if len(f.read().splitlines()) <= 1 else None
    return "nowait" if fs in ("ext2/ext3", "xfs", "btrfs") else None
