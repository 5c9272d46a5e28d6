"""scripts/tpt-cluster, the local cluster launcher, run the way a user runs
it: start a small cluster in a private directory on free ports, check
status, do I/O through the URL it printed, kill and restart a target, stop
(twice).  Whatever happens, the cluster is stopped at the end."""
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tptlib import paths
from tptlib.tgtd import SANITIZER_MARKERS

LAUNCHER = paths.TOP / "scripts" / "tpt-cluster"
DM_OFFSET = 100     # the documented layout: portals P.., datamovers P+100..
TARGETS = 3


def run(*args, check=True, timeout=120):
    env = dict(os.environ, TPT_BUILD=str(paths.BUILD))
    r = subprocess.run([str(LAUNCHER), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise AssertionError(f"tpt-cluster {' '.join(map(str, args))} exited {r.returncode}:\n"
                             f"{r.stdout}\n{r.stderr}")
    return r


def range_free(base, n):
    """Every port the launcher takes for n target daemons at --base-port base."""
    for port in [base + i for i in range(n + 1)] + [base + DM_OFFSET + i for i in range(n + 1)]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def pick_base(n, rnd=random.Random()):
    """A random base port whose whole range is free, below the kernel's
    ephemeral ports (where tptlib.net.free_port and every client connection
    take theirs), so nothing grabs one between this check and tgtd's bind."""
    for _ in range(50):
        base = rnd.randrange(10000, 30000)
        if range_free(base, n):
            return base
    pytest.skip("no free port range found for the cluster")


def start(cluster_dir, n=TARGETS, *extra):
    """start, retrying on another range when a port was taken meanwhile."""
    for _ in range(3):
        base = pick_base(n)
        r = run("start", "--dir", cluster_dir, "--targets", n, "--member-size", "8M",
                "--base-port", base, *extra, check=False)
        if r.returncode == 0:
            return r, base
        if "is in use" not in r.stderr:
            break
    raise AssertionError(f"tpt-cluster start exited {r.returncode}:\n{r.stdout}\n{r.stderr}")


def sourced(path):
    """The variables of a shell file, sourced by bash as a user's script would."""
    r = subprocess.run(["bash", "-c", 'set -a; . "$1"; env -0', "_", str(path)],
                       capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]})
    return dict(item.split("=", 1) for item in r.stdout.split("\0") if "=" in item)


def load_env(cluster_dir):
    """DIR/cluster.env."""
    return sourced(cluster_dir / "cluster.env")


def daemons(env):
    return env["TPT_CLUSTER_DAEMONS"].split()


def var(env, daemon, key):
    return env[f"{daemon.upper()}_{key}"]


def tgtd_running(pid, port):
    """pid is a live (not zombie) tgtd serving the portal on port."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return any(a.endswith(b"/tgtd") for a in cmd) and f"portal=127.0.0.1:{port}".encode() in cmd


def tgtds_on_ports(ports):
    """PIDs of any tgtd whose portal is one of ports (whoever started it)."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            if any(tgtd_running(int(p.name), port) for port in ports):
                found.append(int(p.name))
    return found


def stop_leaving_nothing(cluster_dir, ports):
    """tpt-cluster stop, then no tgtd may be left on the cluster's ports
    (any that is, is killed before the assertion fails)."""
    run("stop", "--dir", cluster_dir, check=False)
    leftovers = tgtds_on_ports(ports) if ports else []
    for pid in leftovers:
        os.kill(pid, 9)
    assert leftovers == [], f"tgtd left running after stop: {leftovers}"


def status_lines(out):
    """{daemon: 'alive'|'DEAD'} from `tpt-cluster status`."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s+(controller|t\d+)\s+.*?\s(alive|DEAD)\s+pid",
                                                        out, re.M)}


@pytest.fixture
def cluster_dir():
    d = Path(tempfile.mkdtemp(prefix="tptc-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_start_status_io_kill_restart_stop(cluster_dir):
    pids_seen = {}
    ports = []
    try:
        r, base = start(cluster_dir)
        ports = [base + i for i in range(TARGETS + 1)]
        env = load_env(cluster_dir)
        assert env["TPT_CLUSTER_STATE"] == "running"
        assert daemons(env) == ["controller"] + [f"t{i}" for i in range(TARGETS)]
        for d in daemons(env):
            pids_seen[int(var(env, d, "PID"))] = int(var(env, d, "PORT"))
            # What start printed: role, PID, portal, datamover, tgtadm.
            assert re.search(rf"^\s+{d}\s+.*pid {var(env, d, 'PID')}\s+iscsi 127.0.0.1:{var(env, d, 'PORT')}",
                             r.stdout, re.M), r.stdout
            assert f"TGT_IPC_SOCKET={cluster_dir}/{d}/ipc" in r.stdout
            assert f"-C {var(env, d, 'CONTROL_PORT')}" in r.stdout
            assert tgtd_running(int(var(env, d, "PID")), var(env, d, "PORT"))
        urls = re.findall(r"^\s+(iscsi://\S+)$", r.stdout, re.M)
        assert urls == [env["TPT_CLUSTER_URL"]], r.stdout
        url = urls[0]
        assert url == f"iscsi://127.0.0.1:{base}/{env['TPT_CLUSTER_IQN']}/1"
        assert len(env["TPT_CLUSTER_MEMBER_URLS"].split()) == TARGETS

        st = run("status", "--dir", cluster_dir)
        assert status_lines(st.stdout) == {d: "alive" for d in daemons(env)}, st.stdout
        assert "TPT-RAID counters:" in st.stdout
        assert len(re.findall(r"TPT-RAID member \d+: .* up ", st.stdout)) == TARGETS, st.stdout

        # Through the URL it printed, with stock libiscsi.
        data = os.urandom(1 << 20)
        io = str(paths.tool("tpt-iscsi-io"))
        subprocess.run([io, "write", url, "2048"], input=data, check=True, timeout=60)
        back = subprocess.run([io, "read", url, "2048", str(len(data) // 512)],
                              capture_output=True, check=True, timeout=60).stdout
        assert back == data

        # A dead box.
        pid1 = int(var(env, "t1", "PID"))
        k = run("kill-target", "1", "--dir", cluster_dir)
        assert "SIGKILL" in k.stdout and str(pid1) in k.stdout
        assert not tgtd_running(pid1, var(env, "t1", "PORT"))
        st = run("status", "--dir", cluster_dir, check=False)
        assert st.returncode == 3, st.stdout + st.stderr
        want = {d: "alive" for d in daemons(env)}
        want["t1"] = "DEAD"
        assert status_lines(st.stdout) == want, st.stdout

        # Back on the same ports and backing file.
        rr = run("restart-target", "1", "--dir", cluster_dir)
        env2 = load_env(cluster_dir)
        new_pid = int(var(env2, "t1", "PID"))
        assert new_pid != pid1 and str(new_pid) in rr.stdout
        pids_seen[new_pid] = int(var(env2, "t1", "PORT"))
        for key in ("PORT", "DM_PORT", "CONTROL_PORT", "BACKING", "URL"):
            assert var(env2, "t1", key) == var(env, "t1", key)
        assert tgtd_running(new_pid, var(env2, "t1", "PORT"))
        st = run("status", "--dir", cluster_dir)
        assert status_lines(st.stdout) == {d: "alive" for d in daemons(env)}, st.stdout
        # Its target, LUN and TPT mode, as at start.
        show = subprocess.run([str(paths.TGTADM), "-C", var(env2, "t1", "CONTROL_PORT"),
                               "--lld", "iscsi", "--mode", "target", "--op", "show"],
                              env=dict(os.environ, TGT_IPC_SOCKET=var(env2, "t1", "IPC")),
                              capture_output=True, text=True, check=True).stdout
        assert var(env2, "t1", "IQN") in show and var(env2, "t1", "BACKING") in show
        assert "TPT mode: on" in show and f"127.0.0.1:{var(env2, 't1', 'DM_PORT')}" in show

        s = run("stop", "--dir", cluster_dir)
        assert "stopped" in s.stdout
        env3 = load_env(cluster_dir)
        assert env3["TPT_CLUSTER_STATE"] == "stopped"
        for d in daemons(env3):
            pids_seen[int(var(env3, d, "PID"))] = int(var(env3, d, "PORT"))
        assert [p for p, port in pids_seen.items() if tgtd_running(p, port)] == []
        assert tgtds_on_ports(ports) == []
        # Pid and socket files gone; data and logs kept.
        left = sorted(str(p.relative_to(cluster_dir)) for p in cluster_dir.rglob("*"))
        assert not [p for p in left if p.endswith(".pid") or "/ipc." in p], left
        assert all((cluster_dir / f"t{i}" / "member.img").exists() for i in range(TARGETS))
        assert (cluster_dir / "controller" / "tgtd.log").exists()

        again = run("stop", "--dir", cluster_dir)
        assert "nothing running" in again.stdout
        st = run("status", "--dir", cluster_dir, check=False)
        assert st.returncode == 3
        assert set(status_lines(st.stdout).values()) == {"DEAD"}
    finally:
        stop_leaving_nothing(cluster_dir, ports)
        for log in cluster_dir.glob("*/tgtd.log"):
            text = log.read_text(errors="replace")
            assert not any(m in text for m in SANITIZER_MARKERS), f"{log}:\n{text[-6000:]}"


@pytest.mark.parametrize("args, says", [
    (["--unit", "3k"], "--unit 3k"),
    (["--unit", "2m"], "--unit 2m"),
    (["--mode", "fast"], "--mode fast"),
    (["--targets", "2"], "--targets 2"),
    (["--raid", "7"], "--raid 7"),
    (["--raid", "6", "--targets", "3"], "--targets 3"),
    (["--raid", "1", "--targets", "1"], "--targets 1"),
])
def test_bad_start_options_start_nothing(cluster_dir, args, says):
    d = cluster_dir / "c"
    base = pick_base(TARGETS)
    try:
        r = run("start", "--dir", d, "--targets", TARGETS, "--member-size", "8M",
                "--base-port", base, *args, check=False)
        assert r.returncode == 2
        assert r.stdout == ""
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], r.stderr
        assert not d.exists()
        assert tgtds_on_ports([base + i for i in range(TARGETS + 1)]) == []
    finally:
        run("stop", "--dir", d, check=False)


def test_a_mirror_keeps_its_data_with_one_box_left(cluster_dir):
    """start --raid 1: a 2-way mirror, written through its URL; its first
    box killed, every byte still reads back."""
    ports = []
    try:
        r, base = start(cluster_dir, 2, "--raid", "1")
        ports = [base + i for i in range(3)]
        assert "TPT-RAID-1 LUN (8M, mode tpt, unit 64k, 2 members x 8M)" in r.stdout, r.stdout
        env = load_env(cluster_dir)
        assert env["TPT_CLUSTER_RAID"] == "1"
        assert "raid=1;" in env["TPT_CLUSTER_BSOPTS"]
        url = env["TPT_CLUSTER_URL"]
        data = os.urandom(1 << 20)
        io = str(paths.tool("tpt-iscsi-io"))
        subprocess.run([io, "write", url, "0"], input=data, check=True, timeout=60)
        run("kill-target", "0", "--dir", cluster_dir)
        back = subprocess.run([io, "read", url, "0", str(len(data) // 512)],
                              capture_output=True, check=True, timeout=60).stdout
        assert back == data
        st = run("status", "--dir", cluster_dir, check=False)
        assert "RAID-1" in st.stdout, st.stdout
    finally:
        stop_leaving_nothing(cluster_dir, ports)


def test_refuses_busy_port_and_running_cluster(cluster_dir):
    base = pick_base(TARGETS)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", base + 2))
        squatter.listen()
        r = run("start", "--dir", cluster_dir, "--targets", TARGETS, "--member-size", "8M",
                "--base-port", base, check=False)
    assert r.returncode == 1
    assert f"port {base + 2}" in r.stderr and "in use" in r.stderr, r.stderr
    assert tgtds_on_ports([base + i for i in range(TARGETS + 1)]) == []
    try:
        start(cluster_dir)
        again = run("start", "--dir", cluster_dir, "--targets", TARGETS, "--member-size", "8M",
                    "--base-port", pick_base(TARGETS), check=False)
        assert again.returncode == 1 and "a cluster is running" in again.stderr, again.stderr
    finally:
        run("stop", "--dir", cluster_dir, check=False)


def tgtadm(env, daemon, *args):
    return subprocess.run([str(paths.TGTADM), "-C", var(env, daemon, "CONTROL_PORT"), "--lld", "iscsi",
                           *map(str, args)], env=dict(os.environ, TGT_IPC_SOCKET=var(env, daemon, "IPC")),
                          capture_output=True, text=True, check=True).stdout


def set_account(env, daemon, user, secret, outgoing=False):
    """Give daemon's target 1 the account user with another secret."""
    tgtadm(env, daemon, "--mode", "account", "--op", "delete", "--user", user)
    tgtadm(env, daemon, "--mode", "account", "--op", "new", "--user", user, "--password", secret)
    tgtadm(env, daemon, "--mode", "account", "--op", "bind", "--tid", 1, "--user", user,
           *(["--outgoing"] if outgoing else []))


def host_io(url, chap, *args, data=None):
    """tpt-iscsi-io with libiscsi's CHAP variables (as host-chap.env sets
    them) in place of any the caller has."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBISCSI_CHAP_")}
    env.update(chap)
    return subprocess.run([str(paths.tool("tpt-iscsi-io")), *args[:1], url, *args[1:]], input=data,
                          capture_output=True, env=env, timeout=60)


def wait_log(path, text, after=0, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = path.read_text(errors="replace")[after:]
        if text in log:
            return log
        time.sleep(0.2)
    raise AssertionError(f"{path} never said {text!r}:\n{log[-3000:]}")


def test_chap_on_every_hop(cluster_dir, report):
    """start --chap: mutual CHAP host -> controller and controller ->
    members.  The right secrets carry I/O; a wrong secret at either hop,
    in either direction, is refused; no secret shows in a daemon's
    arguments, a log or cluster.env."""
    ports = []
    try:
        t0 = time.monotonic()
        r, base = start(cluster_dir, TARGETS, "--chap")
        report(f"tpt-cluster start --chap, {TARGETS} targets: {time.monotonic() - t0:.1f} s")
        ports = [base + i for i in range(TARGETS + 1)]
        env = load_env(cluster_dir)
        assert env["TPT_CLUSTER_CHAP"] == "yes"
        host_file, secrets_file = cluster_dir / "host-chap.env", cluster_dir / "chap.secrets"
        for f in (host_file, secrets_file):
            assert f.stat().st_mode & 0o077 == 0, oct(f.stat().st_mode)
        assert str(host_file) in r.stdout
        chap = {k: v for k, v in sourced(host_file).items()
                if k.startswith("LIBISCSI_CHAP_")}
        assert chap["LIBISCSI_CHAP_USERNAME"] == "host" and chap["LIBISCSI_CHAP_TARGET_USERNAME"] == "array"
        secrets = sourced(secrets_file)
        ours = {v for k, v in secrets.items() if k.endswith(("_CHAP_SECRET", "_CHAP_ANSWER"))}
        assert len(ours) == 2 * (TARGETS + 1)       # one per hop and direction
        assert all(re.fullmatch(r"[0-9a-f]{32}", s) for s in ours)
        url = env["TPT_CLUSTER_URL"]

        # Host -> controller: the right secrets carry I/O ...
        data = os.urandom(1 << 20)
        w = host_io(url, chap, "write", "0", data=data)
        assert w.returncode == 0, w.stderr
        back = host_io(url, chap, "read", "0", str(len(data) // 512))
        assert back.returncode == 0 and back.stdout == data, back.stderr
        # ... none, or a wrong one, is refused by the controller ...
        for creds in ({}, dict(chap, LIBISCSI_CHAP_PASSWORD="0" * 32)):
            bad = host_io(url, creds, "read", "0", "8")
            assert bad.returncode != 0 and b"Authentication failure" in bad.stderr, bad.stderr
        # ... and a controller that answers wrongly is refused by the host.
        bad = host_io(url, dict(chap, LIBISCSI_CHAP_TARGET_PASSWORD="0" * 32), "read", "0", "8")
        assert bad.returncode != 0 and b"Invalid CHAP_R" in bad.stderr, bad.stderr

        # Controller -> members: a member refuses anyone without its secret.
        member0 = var(env, "t0", "URL")
        bad = host_io(member0, chap, "read", "0", "8")
        assert bad.returncode != 0 and b"Authentication failure" in bad.stderr, bad.stderr
        # A controller with the wrong secret for member 1 assembles the
        # array without it, saying why ...
        log = cluster_dir / "controller" / "tgtd.log"
        # The write's intent marks clear 2 s after it: a crash with marks
        # and a member missing would rightly keep the array down.
        time.sleep(4)
        run("kill-controller", "--dir", cluster_dir)
        set_account(env, "t1", "controller", "f" * 32)
        mark = len(log.read_text(errors="replace"))
        run("restart-controller", "--dir", cluster_dir)
        wait_log(log, "member 1 (iscsi://127.0.0.1:%d/" % int(var(env, "t1", "PORT")), mark)
        said = wait_log(log, "Authentication failure", mark)
        assert re.search(r"member 1 \(\S+\) unreachable: login failed: .*Authentication failure", said), said
        # ... and one whose member answers wrongly (a box posing as it).
        run("kill-controller", "--dir", cluster_dir)
        set_account(env, "t1", "controller", secrets["T1_CHAP_SECRET"])
        set_account(env, "t1", "t1", "e" * 32, outgoing=True)
        mark = len(log.read_text(errors="replace"))
        run("restart-controller", "--dir", cluster_dir)
        said = wait_log(log, "Invalid CHAP_R response from the target", mark)
        assert re.search(r"member 1 \(\S+\) unreachable: login failed: .*Invalid CHAP_R", said), said
        # The right answer again: member 1 is taken back, the data is whole.
        set_account(env, "t1", "t1", secrets["T1_CHAP_ANSWER"], outgoing=True)
        wait_log(log, "the array is optimal", mark, timeout=60)
        back = host_io(url, chap, "read", "0", str(len(data) // 512))
        assert back.returncode == 0 and back.stdout == data, back.stderr

        # No secret in any process's arguments, any log or cluster.env.
        leaks = []
        for p in Path("/proc").iterdir():
            try:
                cmdline = (p / "cmdline").read_bytes() if p.name.isdigit() else b""
            except OSError:
                continue
            leaks += [f"pid {p.name}" for s in ours if s.encode() in cmdline]
        for f in [cluster_dir / "cluster.env", *cluster_dir.glob("*/tgtd.log")]:
            leaks += [str(f) for s in ours if s in f.read_text(errors="replace")]
        assert leaks == [], leaks
        st = run("status", "--dir", cluster_dir)
        assert "CHAP: mutual" in st.stdout and str(host_file) in st.stdout, st.stdout
    finally:
        stop_leaving_nothing(cluster_dir, ports)


def test_make_demo_runs_to_the_end(report):
    """scripts/demo, what `make demo` runs (the README's first command),
    passes end to end on a free port range. Before, nothing ran it: it
    failed at a check an earlier change had made untrue, unnoticed."""
    base = pick_base(6)             # five targets and a spare
    env = dict(os.environ, TPT_BUILD=str(paths.BUILD), DEMO_PORT=str(base))
    r = subprocess.run([str(paths.TOP / "scripts" / "demo")], capture_output=True, text=True,
                       timeout=600, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "== demo OK" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]
    report(re.search(r"== (demo OK in [0-9.]+ s)", r.stdout).group(1))
