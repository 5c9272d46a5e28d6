"""Port allocation, readiness checks, and network namespaces: a box whose
link a test cuts (Link), and boxes on a modelled switch with shaped links
(Switch)."""
import json
import os
import re
import signal
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


def wait_listening(host: str, port: int, timeout: float, alive=lambda: True,
                   netns: str = None) -> None:
    """Until something listens on host:port (in network namespace netns if
    given).  Asks the kernel (ss) rather than connecting: a probe that
    connects and hangs up is a connection the listener must handle, and
    libfabric 1.17's tcp provider leaks memory for each one that ends
    before its connection request (docs/protocol.md 10)."""
    cmd = ["ss", "-Hltn", f"src {host} and sport = :{port}" if host else f"sport = :{port}"]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    where = f"{host}:{port}" + (f" in {netns}" if netns else "")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"process died before listening on {where}")
        if subprocess.run(cmd, capture_output=True, text=True).stdout.strip():
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {where} after {timeout}s")


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

    def slow(self, bytes_per_s: int):
        """What goes towards the box passes at bytes_per_s after a first
        3,000 bytes (tbf; this kernel has no netem): a slow link, each
        exchange with the box that sends more taking longer.  0 ends it."""
        if bytes_per_s:
            subprocess.run(["tc", "qdisc", "replace", "dev", self.host_if, "root", "tbf",
                            "rate", f"{bytes_per_s * 8}bit", "burst", "3000",
                            "limit", "1000000"], capture_output=True, text=True, check=True)
        else:
            subprocess.run(["tc", "qdisc", "del", "dev", self.host_if, "root"],
                           capture_output=True, text=True, check=False)

    def close(self):
        _ip("link", "del", self.host_if, check=False)
        _ip("netns", "del", self.name, check=False)


def _tc(netns: str, *args, check=True):
    return subprocess.run(["tc", "-n", netns, *args], capture_output=True, text=True,
                          check=check)


class Port:
    """A box on a Switch: network namespace NAME, its interface BOX_IF at
    BOX_ADDR, joined to the switch's bridge by SWITCH_IF.  ROLE says what
    the box is (a bench's own label)."""

    def __init__(self, name: str, role: str, box_addr: str, switch_if: str):
        self.name, self.role, self.box_addr = name, role, box_addr
        self.box_if, self.switch_if = "eth0", switch_if


class Switch:
    """A modelled switch: every box in a network namespace of its own, each
    joined by a veth pair to one Linux bridge, which lives in a namespace
    of its own too (the "switch").  Nothing is added to the namespace this
    runs in, so neither its firewall nor its bridge netfilter sees the
    traffic, and deleting the namespaces removes every veth and the bridge
    with them.  shape() makes every port a full-duplex link of one rate: a
    token bucket on both ends of each veth (the box's end shapes what it
    sends, the switch's end what it receives).

    Names carry this process's pid (tptsw<pid>-<role>), so sweep_stale()
    can tell the leftovers of a run that was killed from a live run's."""

    PREFIX = "tptsw"
    SUBNET = "10.233.0"

    def __init__(self):
        self.tag = f"{self.PREFIX}{os.getpid()}"
        self.netns = f"{self.tag}-switch"
        self.ports = []
        self.rate = None
        self._namespaces = []
        self._add_netns(self.netns)
        try:
            _ip("-n", self.netns, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.netns, "link", "set", "br0", "up")
        except Exception:
            self.close()
            raise

    def _add_netns(self, name):
        _ip("netns", "add", name)
        self._namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def add_box(self, role: str) -> Port:
        """A new box ROLE (letters and digits) on its own port."""
        if not re.fullmatch(r"[a-z0-9]{1,8}", role):
            raise ValueError(f"box role {role!r}: 1-8 lower-case letters or digits")
        index = len(self.ports) + 1
        if index > 250:
            raise ValueError("a switch has at most 250 ports")
        port = Port(f"{self.tag}-{role}", role, f"{self.SUBNET}.{index}", f"p{index}")
        self._add_netns(port.name)
        _ip("-n", self.netns, "link", "add", port.switch_if, "type", "veth", "peer", "name",
            port.box_if, "netns", port.name)
        _ip("-n", self.netns, "link", "set", port.switch_if, "master", "br0")
        _ip("-n", self.netns, "link", "set", port.switch_if, "up")
        _ip("-n", port.name, "addr", "add", f"{port.box_addr}/24", "dev", port.box_if)
        _ip("-n", port.name, "link", "set", port.box_if, "up")
        self.ports.append(port)
        if self.rate:
            self._shape_port(port, *self.rate)
        return port

    @staticmethod
    def burst(bytes_per_s: float) -> int:
        """The token bucket of a port of bytes_per_s: 4 ms at the rate, and
        at least 256 KiB.  A token bucket passes a packet only once it
        holds the packet's bytes, and veth hands it whole GSO packets of up
        to 64 KiB: the burst must exceed that or tbf splits them in
        software."""
        return max(256 << 10, int(bytes_per_s * 0.004))

    def shape(self, bytes_per_s: float, queue_s: float = 0.5):
        """Every port, present and future, a full-duplex link of
        bytes_per_s (tc counts Ethernet frames: headers are part of it),
        with burst(bytes_per_s) and a queue of queue_s seconds at the
        rate (queue_bytes())."""
        burst = self.burst(bytes_per_s)
        self.rate = (bytes_per_s, burst, queue_s)
        for port in self.ports:
            self._shape_port(port, bytes_per_s, burst, queue_s)

    def _shape_port(self, port, bytes_per_s, burst, queue_s):
        spec = ["root", "tbf", "rate", f"{int(bytes_per_s * 8)}bit", "burst", str(burst),
                "limit", str(self.queue_bytes(bytes_per_s, burst, queue_s))]
        _tc(port.name, "qdisc", "replace", "dev", port.box_if, *spec)
        _tc(self.netns, "qdisc", "replace", "dev", port.switch_if, *spec)

    @staticmethod
    def queue_bytes(bytes_per_s, burst, queue_s=0.5):
        """A port's queue: queue_s seconds at its rate, half a second by
        default.  Storage fabrics are
        lossless (InfiniBand credits, Ethernet pause frames): a sender
        waits rather than loses packets, and a deep queue is how a token
        bucket gets near that.  A shallow one drops the many-to-one bursts
        of striping (incast), and TCP's 200 ms retransmission timeouts,
        not the link, set the pace."""
        return int(bytes_per_s * queue_s) + burst

    def drops(self) -> int:
        """Packets every shaped port has dropped so far, both ends."""
        total = 0
        for port in self.ports:
            for netns, dev in ((port.name, port.box_if), (self.netns, port.switch_if)):
                r = _tc(netns, "-s", "-j", "qdisc", "show", "dev", dev, check=False)
                try:
                    total += sum(q.get("drops", 0) for q in json.loads(r.stdout or "[]"))
                except ValueError:
                    pass
        return total

    def port(self, port: Port, updown: str):
        """Port's cable pulled ("down") or plugged back ("up"), at the
        switch: nothing is heard, no reset."""
        _ip("-n", self.netns, "link", "set", port.switch_if, updown)

    @staticmethod
    def cut_pair(a: Port, b: Port, cut: bool):
        """Boxes a and b lose the route to each other (cut) or get it
        back, each still reaching every other box."""
        for x, y in ((a, b), (b, a)):
            _ip("-n", x.name, "route", "add" if cut else "del", "blackhole",
                f"{y.box_addr}/32")

    def exec_prefix(self, port: Port):
        """What runs a command inside port's box."""
        return ["ip", "netns", "exec", port.name]

    def kill_processes(self, port: Port):
        """SIGKILL whatever still runs in port's box: only what we started
        there can be in it."""
        _kill_in(port.name)

    def close(self):
        """Remove every namespace, boxes first (a veth goes with either
        end), killing what still runs in them (stop daemons properly
        first)."""
        for name in reversed(self._namespaces):
            _kill_in(name)
            _ip("netns", "del", name, check=False)
        self._namespaces = []
        self.ports = []

    @classmethod
    def sweep_stale(cls) -> list:
        """Remove what a killed earlier run left: namespaces named after a
        process that no longer exists, and what still runs in them (that
        run's daemons).  Returns the names removed."""
        r = _ip("netns", "list", check=False)
        removed = []
        for line in r.stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            m = re.fullmatch(rf"{cls.PREFIX}(\d+)-[a-z0-9]+", name)
            if not m or _pid_alive(int(m.group(1))):
                continue
            _kill_in(name)
            _ip("netns", "del", name, check=False)
            removed.append(name)
        return removed


def _kill_in(netns: str):
    for pid in _ip("netns", "pids", netns, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
