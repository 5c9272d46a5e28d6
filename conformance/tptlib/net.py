"""Port allocation, readiness checks, and network namespaces for boxes
whose link a test cuts."""
import os
import socket
import subprocess
import time


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago.  The kernel does not hand the
    same ephemeral port out again right away, which is good enough for
    daemons we start immediately afterwards."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_listening(host: str, port: int, timeout: float, alive=lambda: True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"process died before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def wait_listening_in(netns: str, port: int, timeout: float, alive=lambda: True) -> None:
    """As wait_listening, for a listener inside network namespace netns."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"process died before listening on port {port} in {netns}")
        r = subprocess.run(["ip", "netns", "exec", netns, "ss", "-Hltn", f"sport = :{port}"],
                           capture_output=True, text=True)
        if r.stdout.strip():
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on port {port} in {netns} after {timeout}s")


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Link:
    """A box behind its own link: network namespace NAME joined to this one
    by a veth pair, this side HOST_ADDR, the box's side BOX_ADDR (a /30).
    cut() and restore() take the link down and up as a pulled cable would:
    no reset, nothing more is heard.  close() removes it all."""

    def __init__(self, index: int):
        tag = f"{os.getpid() % 10000}x{index}"
        self.name = f"tptbox{tag}"
        self.host_if, self.box_if = f"tpth{tag}", f"tptb{tag}"
        base = 4 * (index % 60)
        self.host_addr = f"10.231.{os.getpid() % 250}.{base + 1}"
        self.box_addr = f"10.231.{os.getpid() % 250}.{base + 2}"
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.box_if)
            _ip("link", "set", self.box_if, "netns", self.name)
            _ip("addr", "add", f"{self.host_addr}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            _ip("-n", self.name, "addr", "add", f"{self.box_addr}/30", "dev", self.box_if)
            _ip("-n", self.name, "link", "set", self.box_if, "up")
            _ip("-n", self.name, "link", "set", "lo", "up")
        except Exception:
            self.close()
            raise

    def cut(self):
        _ip("link", "set", self.host_if, "down")

    def restore(self):
        _ip("link", "set", self.host_if, "up")

    def close(self):
        _ip("link", "del", self.host_if, check=False)
        _ip("netns", "del", self.name, check=False)


def netns_usable() -> bool:
    """Whether this machine lets us make network namespaces (root, iproute2)."""
    probe = f"tptprobe{os.getpid()}"
    try:
        if _ip("netns", "add", probe, check=False).returncode:
            return False
        _ip("netns", "del", probe, check=False)
        return True
    except FileNotFoundError:
        return False
