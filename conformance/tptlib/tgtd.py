"""Our tgtd as a real process on loopback, and tgtadm against it.

Each instance gets its own directory (log, backing files, management
socket), its own iSCSI portal port and its own control port, so any number
of them can run side by side and next to a system tgtd."""
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from . import net, paths

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


class TgtadmError(RuntimeError):
    def __init__(self, args, rc, out, err):
        self.rc, self.stdout, self.stderr = rc, out, err
        super().__init__(f"tgtadm {' '.join(map(str, args))} exited {rc}: "
                         f"{err.strip() or out.strip()}")


class Tgtd:
    """One tgtd process.  Use start()/stop() or the tgtd_factory fixture."""

    def __init__(self, workdir: Path, name: str, control_port: int, host: str = "127.0.0.1",
                 netns: str = None):
        self.dir = Path(workdir)
        self.name = name
        self.host = host
        # A network namespace to run in (ip netns exec): a box whose link
        # a test can cut.  tgtadm reaches it through its unix socket.
        self.netns = netns
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
            if self.netns:
                net.wait_listening_in(self.netns, self.port, timeout, self.alive)
            else:
                net.wait_listening(self.host, self.port, timeout, self.alive)
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

    def new_target(self, tid: int, iqn: str, bind: str = "ALL"):
        self.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "new",
                    "--tid", tid, "--targetname", iqn)
        if bind:
            self.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "bind",
                        "--tid", tid, "--initiator-address", bind)
        return iqn

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
