"""The extended host (issue 13): libtptinitiator, through its tools
(tpt-dd, tpt-direct-verify) and the nbdkit plugin, against real clusters.

- On a Baseline array (and any LU that does not know TPT HOST KEY) the
  library falls back to plain READ(16)/WRITE(16) and says so.
- On a TPT array: integrity against a byte model at QD 8 with random sizes
  512 B-4 MiB, alongside an unmodified libiscsi client on the same LUN;
  the controller's counters keep host_in/host_out for bytes that cross it
  and count host-direct bytes apart (direct_in/direct_out).  Until the
  controller serves TPT HOST READ/WRITE the same tests check the fallback
  on a TPT array.
- Members killed or hung under a direct host's load (RAID-5, RAID-6, RAID-1):
  no error, no wrong byte, degraded reads straight to the host, and the
  same bytes after the boxes catch up.
- fio's nbd engine through nbdkit with verify=crc32c.
- The library's datamover admits only target boxes proving this
  session's key: rogue peers are refused, logged and counted, and the
  I/O goes on.
- Bad input to the tools and the plugin is a clear error, not a hang."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from tptlib import cluster, net, paths
from tptlib.client import TptClient
from tptlib.tgtd import SANITIZER_MARKERS
from test_failures import (FAIL_TIMEOUT, array_state, close_link, counters, kill,
                           restart_target, scrub, show, wait_state)

MiB = 1 << 20
PLUGIN = paths.BUILD / "lib" / "nbdkit-tptraid-plugin.so"
SAN = os.environ.get("TPT_SAN") == "1"


def nbdkit_env():
    """Debian's nbdkit is no ASan program: a sanitizer-built plugin needs
    the runtimes loaded first (and nbdkit's own leaks are not ours)."""
    env = dict(os.environ)
    if SAN:
        libs = [subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True,
                               text=True).stdout.strip() for lib in ("libasan.so", "libubsan.so")]
        env["LD_PRELOAD"] = " ".join(libs)
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    return env


def run(tool, *args, timeout=120, **kw):
    r = subprocess.run([str(paths.tool(tool)), *map(str, args)], capture_output=True,
                       timeout=timeout, **kw)
    err = r.stderr.decode(errors="replace") if isinstance(r.stderr, bytes) else r.stderr
    assert not any(m in err for m in SANITIZER_MARKERS), err[-6000:]
    return r


def kv(text):
    """key=value words of a summary line."""
    return dict(re.findall(r"(\w+)=(\S+)", text))


def array_stats(c):
    out = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    line = re.search(r"TPT-RAID counters: (.*)", out).group(1).split()
    return {k: int(v) for k, v in zip(line[::2], line[1::2])}


def direct_verify(url, *args, timeout=180):
    r = run("tpt-direct-verify", *args, url, timeout=timeout, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    res = kv(r.stdout)
    assert res["errors"] == "0" and res["mismatches"] == "0", r.stdout + r.stderr
    return {k: (v if k == "direct" else int(v)) for k, v in res.items()}


def controller_is_direct(c):
    """Whether this build's controller serves host-direct requests (its
    counters then have direct_in/direct_out)."""
    return "direct_in" in array_stats(c)


# -- bad input ---------------------------------------------------------------

def test_bad_input_is_a_clear_error(workdir):
    assert run("tpt-dd", "--help", text=True).returncode == 0
    for args, rc, says in [
        ((), 2, "exactly one of if= and of="),
        (("iscsi://127.0.0.1/iqn.x/1", "if=-", "of=-"), 2, "exactly one"),
        (("iscsi://127.0.0.1/iqn.x/1", "of=-", "bs=12q"), 2, "not a size"),
        (("iscsi://127.0.0.1/iqn.x/1", "of=-", "--qd", "0"), 2, "--qd"),
        (("iscsi://127.0.0.1/iqn.x/1", "of=-", "--dm", "host.example:1"), 2, "--dm"),
        (("iscsi://127.0.0.1/iqn.x/1", "of=-", "--direct", "maybe"), 2, "--direct"),
        (("iscsi://nowhere", "of=-"), 2, "bad URL"),
        (("iscsi://127.0.0.1/iqn.x/1", "of=-", "bogus=1"), 2, "unknown"),
    ]:
        r = run("tpt-dd", *args, text=True)
        assert r.returncode == rc and says in r.stderr, (args, r.stderr)
    # Nobody listens: refused at once, exit 1, with the portal named.
    port = net.free_port("127.0.0.1")
    r = run("tpt-dd", f"iscsi://127.0.0.1:{port}/iqn.x/1", "of=-", "--timeout", "5", text=True)
    assert r.returncode == 1 and f"127.0.0.1:{port}" in r.stderr, r.stderr
    for bad in (("--qd", "1000"), ("--merge", "0"), ("--merge", "65")):
        r = run("tpt-direct-verify", *bad, "iscsi://127.0.0.1/iqn.x/1", text=True)
        assert r.returncode == 2, (bad, r.stderr)
    r = run("tpt-iscsi-load", "--pattern", "seq-read", "--bs", "4k", "--direct", "--merge", "65",
            "iscsi://127.0.0.1/iqn.x/1", text=True)
    assert r.returncode == 2 and "--merge" in r.stderr, r.stderr
    if shutil.which("nbdkit"):
        for args, says in [(["url=iscsi://nowhere"], "bad URL"),
                           (["url=iscsi://127.0.0.1/iqn.x/1", "max_io=1000"], "max_io"),
                           (["url=iscsi://127.0.0.1/iqn.x/1", "dm=a:b:c:"], "dm="),
                           (["url=iscsi://127.0.0.1/iqn.x/1", "merge=0"], "merge="),
                           (["url=iscsi://127.0.0.1/iqn.x/1", "merge=65"], "merge="),
                           (["url=iscsi://127.0.0.1/iqn.x/1", "colour=red"], "unknown")]:
            r = subprocess.run(["nbdkit", "--exit-with-parent", "-U", str(workdir / "s"),
                                str(PLUGIN), *args], capture_output=True, text=True, timeout=30,
                               env=nbdkit_env())
            assert r.returncode != 0 and says in r.stderr, (args, r.stderr)
            assert not any(m in r.stderr for m in SANITIZER_MARKERS), r.stderr


# -- fallback ----------------------------------------------------------------

def test_fallback_on_a_baseline_array(tgtd_factory, workdir, report):
    """A Baseline array answers TPT HOST KEY with INVALID COMMAND OPERATION
    CODE: the library works as a plain libiscsi initiator and says so, and
    every byte crosses the controller (host_in/host_out)."""
    c = cluster.start(tgtd_factory, n=3, mode="baseline", member_bytes=24 << 20)
    data = os.urandom(3 * MiB)
    src = workdir / "in.bin"
    src.write_bytes(data)
    before = array_stats(c)
    w = run("tpt-dd", c.url, f"if={src}", "bs=1m", "seek=1", "--qd", "2", "conv=fsync",
            text=True)
    assert w.returncode == 0 and "mode=plain" in w.stderr, w.stderr
    # Flushing is for writes: refused when reading, with a word why.
    x = run("tpt-dd", c.url, "of=-", "conv=fsync", text=True)
    assert x.returncode == 2 and "for writing the LUN" in x.stderr, x.stderr
    assert kv(w.stderr)["bytes"] == str(len(data))
    r = run("tpt-dd", c.url, "of=-", "bs=512k", "skip=2", "count=6")
    assert r.returncode == 0, r.stderr
    assert r.stdout == data
    after = array_stats(c)
    assert after["host_in"] - before["host_in"] == len(data)
    assert after["host_out"] - before["host_out"] == len(data)
    # SIGPIPE is ignored (a controller that reset the session would
    # raise it too): a reader gone is an error that says so.
    dd = subprocess.Popen([str(paths.tool("tpt-dd")), c.url, "of=-", "bs=64k", "--qd", "1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert len(dd.stdout.read(4096)) == 4096
    dd.stdout.close()
    err = dd.stderr.read().decode()
    assert dd.wait(timeout=60) == 1 and "write: Broken pipe" in err, (dd.returncode, err)
    res = direct_verify(c.url, "--offset", "8m", "--span", "32m", "--zero", "--qd", "8",
                        "--ops", "150", "--final-check")
    assert res["direct"] == "no" and res["direct_in"] == res["direct_out"] == 0
    assert res["plain_in"] > 0 and res["plain_out"] > 0
    report(f"baseline fallback: {res['ops']} requests, {res['bytes'] >> 20} MiB, plain")


# -- integrity and counters on a TPT array ------------------------------------

def test_direct_integrity_counters_and_a_stock_client(tgtd_factory, workdir, report):
    c = cluster.start(tgtd_factory, n=5, mode="tpt", member_bytes=24 << 20)
    direct = controller_is_direct(c)
    # Alone first: what the controller's counters say of direct I/O.
    before = array_stats(c)
    res = direct_verify(c.url, "--offset", "16m", "--span", "48m", "--zero", "--qd", "8",
                        "--ops", "120", "--max-bs", "4m")
    after = array_stats(c)
    if direct:
        assert res["direct"] == "yes"
        assert res["plain_in"] == res["plain_out"] == 0
        # Host bytes that cross the controller: none.
        assert after["host_in"] == before["host_in"]
        assert after["host_out"] == before["host_out"]
        # Host-direct bytes, counted apart: writes come in, reads go out.
        assert after["direct_in"] - before["direct_in"] == res["direct_out"]
        assert after["direct_out"] - before["direct_out"] == res["direct_in"]
        assert res["refused_peers"] == 0
    else:
        # Until the controller serves TPT HOST READ/WRITE: the fallback.
        assert res["direct"] == "no"
        assert after["host_in"] - before["host_in"] == res["plain_out"]
        assert after["host_out"] - before["host_out"] == res["plain_in"]

    # Then with an unmodified libiscsi client on the same LUN, at once:
    # its region the first 16 MiB, ours the rest, random sizes up to 4 MiB.
    model = workdir / "model"
    stock = subprocess.Popen(
        [str(paths.tool("tpt-iscsi-verify")), "--model", str(model), "--zero", "--span", "16m",
         "--ops", "300", "--qd", "8", "--max-bs", "256k", "--final-check", c.url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    res2 = direct_verify(c.url, "--offset", "16m", "--span", "48m", "--qd", "8", "--ops", "200",
                         "--max-bs", "4m", "--seed", "7", "--final-check")
    out, err = stock.communicate(timeout=180)
    assert stock.returncode == 0, out + err
    assert "errors=0 mismatches=0" in out, out + err
    assert res2["direct"] == ("yes" if direct else "no")
    st = array_stats(c)
    assert st["failed"] == 0
    report(f"host-direct {'on' if direct else 'off (controller lacks it: fallback)'}: "
           f"{res['ops'] + res2['ops']} requests QD 8 512B-4MiB, "
           f"{(res['bytes'] + res2['bytes']) >> 20} MiB verified, with a stock client beside")


def test_full_stripes_on_raid6_direct_and_proxied(tgtd_factory, workdir, report):
    """RAID-6 of 6, 32 KiB units: an extended host's and a stock client's
    writes of up to 1 MiB, many of them whole stripes, where each member's
    one PREP WRITE skips its P and Q units, side by side in one skip
    (protocol.md 4.5, 7.8); both byte models clean, no member failed."""
    c = cluster.start(tgtd_factory, n=6, mode="tpt", raid=6, unit=32 << 10,
                      member_bytes=16 << 20)
    model = workdir / "model6"
    stock = subprocess.Popen(
        [str(paths.tool("tpt-iscsi-verify")), "--model", str(model), "--zero", "--span", "16m",
         "--ops", "150", "--qd", "8", "--max-bs", "1m", "--final-check", c.url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    res = direct_verify(c.url, "--offset", "16m", "--span", "32m", "--zero", "--sequential",
                        "--qd", "8", "--ops", "300", "--max-bs", "1m", "--seed", "3",
                        "--final-check")
    out, err = stock.communicate(timeout=180)
    assert stock.returncode == 0, out + err
    assert "errors=0 mismatches=0" in out, out + err
    assert res["direct"] == "yes", res
    st = array_stats(c)
    assert st["failed"] == 0 and st["member_failures"] == 0, st
    report(f"RAID-6 of 6, 32k units: {res['ops']} direct requests up to 1 MiB and 150 stock "
           f"ones, full stripes with P and Q skipped, byte models clean")


def test_adjacent_requests_go_as_one_command(tgtd_factory, report):
    """The library sends queued requests that continue one another as one
    TPT HOST READ/WRITE naming each one's buffer (protocol.md 4.19): every
    byte still lands where its own request said (a byte model, reads and
    writes in random runs), the controller plans them once, and
    merge_max 1 turns it off."""
    c = cluster.start(tgtd_factory, n=5, mode="tpt", member_bytes=16 << 20)
    before = array_stats(c)
    res = direct_verify(c.url, "--sequential", "--zero", "--span", "16m", "--qd", "16",
                        "--ops", "2000", "--max-bs", "64k", "--seed", "5", "--final-check")
    after = array_stats(c)
    assert res["direct"] == "yes" and res["merged"] > 0, res
    # Each command carried one request or a run of them: fewer commands
    # than requests, and every request in one.
    assert res["commands"] < res["ops"] <= res["commands"] + res["merged"], res
    assert after["failed"] == before["failed"]
    assert after["host_in"] == before["host_in"] and after["host_out"] == before["host_out"]
    unmerged = direct_verify(c.url, "--sequential", "--span", "16m", "--qd", "16",
                             "--ops", "300", "--max-bs", "64k", "--seed", "6",
                             "--merge", "1")
    assert unmerged["merged"] == 0 and unmerged["commands"] >= unmerged["ops"], unmerged
    st = array_stats(c)
    assert st["failed"] == 0 and st["member_failures"] == 0
    report(f"merged requests: {res['ops']} sequential requests 512 B-64 KiB at QD 16 "
           f"(reads and writes in random runs) and the final check's reads went as "
           f"{res['commands']} commands ({res['merged']} merged), byte model clean")


# -- rogue datamover peers ------------------------------------------------------

def test_rogue_datamover_peers_are_refused(tgtd_factory, report):
    """protocol.md 6.4: a host admits a connection only from a target that
    proves the host's key.  A stranger with a made-up key, and peers
    claiming the host or controller role, are refused and logged while the
    host's I/O carries on."""
    c = cluster.start(tgtd_factory, n=5, mode="tpt", member_bytes=24 << 20)
    if not controller_is_direct(c):
        pytest.skip("this controller does not serve host-direct requests")
    port = net.free_port("127.0.0.1")
    host = subprocess.Popen(
        [str(paths.tool("tpt-direct-verify")), "--dm", f"127.0.0.1:{port}", "--seconds", "5",
         "--zero", "--span", "16m", "--qd", "4", "--max-bs", "256k", c.url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rogue = TptClient(timeout=60)
    rogue.start()
    try:
        net.wait_listening("127.0.0.1", port, 30, lambda: host.poll() is None)
        rogue.dm_open("target", listen="127.0.0.1")
        for i, role in enumerate(["target", "host", "controller"]):
            r = rogue.dm_connect(f"rogue{i}", "127.0.0.1", port, os.urandom(16), role=role,
                                 peer_id=i, check=False, timeout_ms=5000)
            assert not r["ok"] and r.get("errno_name") == "ECONNREFUSED", r
    finally:
        rogue.close()
    out, err = host.communicate(timeout=120)
    assert host.returncode == 0, out + err
    res = kv(out)
    assert res["direct"] == "yes" and res["errors"] == "0" and res["mismatches"] == "0", out
    assert int(res["refused_peers"]) >= 3, out
    assert err.count("refused peer") >= 3, err
    report(f"host datamover: {res['refused_peers']} rogue peers refused during "
           f"{res['ops']} direct requests")


# -- the controller lost ----------------------------------------------------------

def test_controller_lost_mid_io_fails_requests_not_hangs(tgtd_factory):
    """The controller's box dies under direct I/O: every request in flight
    fails with the session, the library does not log in again behind the
    caller's back (the key died with the session), and the tool exits 1."""
    c = cluster.start(tgtd_factory, n=3, mode="tpt", member_bytes=16 << 20)
    host = subprocess.Popen(
        [str(paths.tool("tpt-direct-verify")), "--seconds", "60", "--zero", "--span", "8m",
         "--qd", "8", "--max-bs", "1m", "--timeout", "20", c.url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Running once the controller has counted some of its requests.
    for _ in range(200):
        if array_stats(c)["reads"] + array_stats(c)["writes"] > 20 or host.poll() is not None:
            break
        time.sleep(0.05)
    c.controller.killed_on_purpose = True
    c.controller.kill()
    out, err = host.communicate(timeout=90)
    assert host.returncode == 1, out + err
    assert "session lost" in err, err
    assert not any(m in err for m in SANITIZER_MARKERS), err[-6000:]
    assert kv(out)["mismatches"] == "0", out


# -- fio through nbdkit --------------------------------------------------------

@pytest.mark.skipif(not shutil.which("nbdkit") or not shutil.which("fio"),
                    reason="nbdkit and fio: scripts/install-deps")
def test_fio_verify_through_nbdkit(tgtd_factory, workdir, report):
    c = cluster.start(tgtd_factory, n=5, mode="tpt", member_bytes=24 << 20)
    sock = workdir / "nbd.sock"
    nbd = subprocess.Popen(["nbdkit", "--foreground", "--exit-with-parent", "-U", str(sock),
                            str(PLUGIN), f"url={c.url}", "qd=8"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=nbdkit_env())
    try:
        for _ in range(100):
            if sock.exists() or nbd.poll() is not None:
                break
            time.sleep(0.1)
        assert sock.exists(), nbd.communicate(timeout=10)
        before = array_stats(c)
        r = subprocess.run(
            ["fio", "--name=verify", "--ioengine=nbd", f"--uri=nbd+unix:///?socket={sock}",
             "--rw=randwrite", "--bsrange=4k-1m", "--size=32m", "--iodepth=8",
             "--verify=crc32c", "--verify_fatal=1", "--do_verify=1",
             "--verify_state_save=0"],
            capture_output=True, text=True, timeout=300, cwd=workdir)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "verify" not in r.stderr.lower() or "bad" not in r.stderr.lower(), r.stderr
        assert re.search(r"err=\s*0", r.stdout), r.stdout
        # nbdcopy (libnbd) both ways: another NBD client, whole-export reads.
        uri = f"nbd+unix:///?socket={sock}"
        src, back = workdir / "src.img", workdir / "back.img"
        src.write_bytes(os.urandom(8 * MiB))
        for args in ([str(src), uri], [uri, str(back)]):
            r = subprocess.run(["nbdcopy", *args], capture_output=True, text=True,
                               timeout=120, cwd=workdir)
            assert r.returncode == 0, r.stdout + r.stderr
        with open(back, "rb") as f:
            assert f.read(8 * MiB) == src.read_bytes()
        after = array_stats(c)
    finally:
        nbd.terminate()
        _, nbd_err = nbd.communicate(timeout=30)
    assert not any(m in nbd_err for m in SANITIZER_MARKERS), nbd_err[-6000:]
    if controller_is_direct(c):
        assert after["host_in"] == before["host_in"] and after["host_out"] == before["host_out"]
        assert after["direct_in"] - before["direct_in"] >= 32 * MiB
    else:
        assert after["host_in"] - before["host_in"] >= 32 * MiB
    report(f"fio nbd engine (verify=crc32c, 32 MiB randwrite 4k-1m QD 8) and nbdcopy "
           f"through nbdkit, "
           f"{'host-direct' if controller_is_direct(c) else 'plain fallback'}")


# -- a member lost under direct I/O ------------------------------------------------

def read_region(c, path, span):
    r = run("tpt-dd", c.url, f"of={path}", "bs=1m", f"count={span >> 20}", "--direct", "on",
            "--quiet", text=True)
    assert r.returncode == 0, r.stderr
    return path.read_bytes()


@pytest.mark.parametrize("raid,n,how", [(5, 5, "kill"), (6, 6, "kill"), (5, 5, "hang"),
                                        (1, 3, "kill")])
def test_direct_host_keeps_its_data_through_lost_members(tgtd_factory, workdir, raid, n, how,
                                                         report):
    """Members lost under an extended host's load: killed (one for
    RAID-5 and a 3-way mirror, two one after the other for RAID-6) or hung (SIGSTOP past
    fail_timeout, then woken: what it does late must not reach the host's
    buffers, now holding other requests).  The host sees no error and
    every byte it wrote reads back; degraded reads go from the targets
    straight to it (no host byte crosses the controller); the boxes
    return and catch up, and the array then reads the same bytes, also
    with another member gone."""
    span = 12 * MiB
    c = cluster.start(tgtd_factory, n=n, mode="tpt", raid=raid, unit=32 << 10,
                      member_bytes=16 << 20, extra_opts=(f"fail_timeout={FAIL_TIMEOUT}",))
    before = array_stats(c)
    host = subprocess.Popen(
        [str(paths.tool("tpt-direct-verify")), "--seconds", "16", "--zero", "--span", str(span),
         "--qd", "8", "--max-bs", "1m", "--seed", str(raid), "--final-check", c.url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lost = [1, 4] if raid == 6 else [1]
    time.sleep(3)
    for i in lost:
        if how == "kill":
            kill(c.targets[i])
            time.sleep(FAIL_TIMEOUT + 2)
        else:
            os.killpg(c.targets[i].proc.pid, signal.SIGSTOP)
            time.sleep(FAIL_TIMEOUT + 4)
            assert array_state(c) == "degraded"
            os.killpg(c.targets[i].proc.pid, signal.SIGCONT)
    out, err = host.communicate(timeout=240)
    assert host.returncode == 0, out + err
    res = kv(out)
    assert res["direct"] == "yes" and res["errors"] == "0" and res["mismatches"] == "0", out
    assert not any(m in err for m in SANITIZER_MARKERS), err[-6000:]
    after = array_stats(c)
    assert after["host_in"] == before["host_in"] and after["host_out"] == before["host_out"]
    assert counters(c)["member_failures"] == len(lost)
    if how == "kill":
        assert array_state(c) == "degraded"
        degraded = read_region(c, workdir / "degraded", span)
        for i in lost:
            restart_target(c, i)
    wait_state(c, {"optimal"}, timeout=120)
    optimal = read_region(c, workdir / "optimal", span)
    if how == "kill":
        assert optimal == degraded
    scrub(c)
    kill(c.targets[0])
    assert read_region(c, workdir / "without0", span) == optimal
    report(f"RAID-{raid} of {n}: {res['ops']} direct requests, {len(lost)} member(s) "
           f"{'killed' if how == 'kill' else 'hung'} "
           f"under them: no error, no wrong byte; caught up, the same bytes read back")


def moving_direct(c, host):
    """Once the extended host's data moves direct, and a second more: it
    then has requests at the targets.  A fixed wait was not enough when
    the host's login was slow (while the namespaces of the test before
    went away)."""
    deadline = time.monotonic() + 30
    while True:
        st = array_stats(c)
        if st["direct_in"] + st["direct_out"]:
            break
        assert time.monotonic() < deadline and host.poll() is None, st
        time.sleep(0.1)
    time.sleep(1)


def went_on_plain(c, host, stock):
    """The extended host and the stock client beside it, run to their
    end: neither saw an error or a wrong byte, the extended host fell
    back to plain SCSI, and no member was failed for the host's trouble.
    The extended host's summary."""
    out, err = host.communicate(timeout=120)
    if err is None:
        err = host.stderr_path.read_text()
    sout, serr = stock.communicate(timeout=120)
    assert host.returncode == 0, out + err
    res = kv(out)
    assert res["errors"] == "0" and res["mismatches"] == "0", out + err
    assert "falling back to plain SCSI" in err, \
        out + err + "".join(t.log()[-1500:] for t in c.targets) + c.controller.log()[-3000:]
    assert stock.returncode == 0 and "errors=0 mismatches=0" in sout, sout + serr
    assert counters(c)["member_failures"] == 0, show(c)
    assert array_state(c) == "optimal", show(c)
    return res

@pytest.mark.skipif(not net.netns_usable(), reason="needs network namespaces (root, iproute2)")
def test_direct_host_cut_from_one_target(tgtd_factory, workdir, report):
    """Every box on a switch; the route between the extended host and
    target 2 is lost under the host's load, while both still reach the
    controller and each other.  Before, target 2's transfers to the host
    waited on TCP until the controller's command timeout failed target 2
    for it: a host's network could degrade the array for every host (or,
    cut from two targets, fail it), and its requests got MEDIUM ERROR.
    Now target 2 drops its link to the host after tpt_xfer_timeout
    (10 s) without a transfer moving, its commands fail with the
    passive-peer sense naming the host (protocol.md 9.1), the controller
    fails that host's request alone, and the library sends it again
    through the controller: the host sees no error and no wrong byte, no
    member is failed, and a stock client beside it sees nothing either.
    While the route stays lost, the host tries direct again after
    --direct-retry (1 s here; the library's default is 60) and the wait
    doubles each time it is lost again, though requests that never touch
    target 2 complete direct meanwhile (before, those reset the wait, so
    the host retried every second).  The route comes back: the host goes
    direct again and stays direct.  Before, it stayed plain for the rest
    of its session."""
    sw, c = net.Switch(), None
    span = 8 * MiB
    try:
        boxes = [sw.add_box(f"t{i}") for i in range(4)]
        ctl, hbox = sw.add_box("ctl"), sw.add_box("h0")
        c = cluster.start(tgtd_factory, n=4, mode="tpt", unit=32 << 10, member_bytes=16 << 20,
                          boxes=dict(enumerate(boxes)), controller_box=ctl,
                          extra_opts=(f"fail_timeout={FAIL_TIMEOUT}",))
        for t in c.targets:
            t.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 1,
                     "--lun", 1, "--params", "tpt_xfer_timeout=3")
        stock = subprocess.Popen(
            [*sw.exec_prefix(hbox), str(paths.tool("tpt-iscsi-verify")), "--model",
             str(workdir / "model"), "--zero", "--span", str(span), "--seconds", "24", "--qd", "4",
             "--max-bs", "256k", "--final-check", c.url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Until the test stops it (SIGTERM) once it is direct again.
        host_err = workdir / "host.err"
        with open(host_err, "w") as err_file:
            host = subprocess.Popen(
                [*sw.exec_prefix(hbox), str(paths.tool("tpt-direct-verify")), "--offset",
                 str(span), "--span", str(span), "--zero", "--seconds", "120", "--qd", "8",
                 "--max-bs", "1m", "--direct-retry", "1", "--final-check", c.url],
                stdout=subprocess.PIPE, stderr=err_file, text=True)
        host.stderr_path = host_err
        moving_direct(c, host)
        sw.cut_pair(boxes[2], hbox, True)
        # Lost at 1 s, then again after retries 1 and 2 s later: each
        # found it lost after target 2's 3 s.
        deadline = time.monotonic() + 60
        while "plain SCSI; direct again in 4 s" not in host_err.read_text():
            assert time.monotonic() < deadline and host.poll() is None, \
                host_err.read_text() + c.targets[2].log()[-3000:]
            time.sleep(0.2)
        waits = re.findall(r"plain SCSI; direct again in (\d+) s", host_err.read_text())
        assert waits == ["1", "2", "4"], host_err.read_text()
        sw.cut_pair(boxes[2], hbox, False)
        # Direct again, and holding: no fall-back for 5 s after the last
        # "host-direct again" (target 2 gives up after 3).  Retries at
        # 8 and 16 s at the most if the path were still lost.
        deadline, held_from = time.monotonic() + 60, None
        while True:
            err = host_err.read_text()
            direct = err.rfind("host-direct again") > err.rfind("plain SCSI;")
            if not direct:
                held_from = None
            elif held_from is None:
                held_from = time.monotonic()
            elif time.monotonic() - held_from >= 5:
                break
            assert time.monotonic() < deadline and host.poll() is None, \
                err + c.targets[2].log()[-3000:]
            time.sleep(0.2)
        host.send_signal(signal.SIGTERM)
        res = went_on_plain(c, host, stock)
        err = host_err.read_text()
        assert int(res["direct_out"]) > 0 and int(res["plain_out"]) > 0, res
        assert res["direct"] == "yes" and int(res["path_fallbacks"]) >= 1, \
            str(res) + err + c.targets[2].log()[-3000:]
        report(f"the route between a direct host and target 2 lost under load: "
               f"{res['ops']} requests, no error (the library went on through the "
               f"controller: {int(res['plain_out']) >> 20} MiB written plain after "
               f"{int(res['direct_out']) >> 20} MiB direct), no member failed, the stock "
               f"client beside it clean; the route back, direct again")
    finally:
        for t in ([c.controller] + c.targets) if c else ():
            t.stop()
        sw.close()


def test_hung_direct_host_fails_alone(tgtd_factory, workdir, report):
    """An extended host stopped (SIGSTOP) with requests in flight, past
    the targets' tpt_xfer_timeout (set to 3 s here): each target
    drops its link to the host, the host's requests fail alone (TIMED
    OUT naming it) and release their stripes, no member is failed, and a
    stock client beside it goes on untouched.  Woken, the host finds
    them failed and sends them again plain (libtptinitiator), without
    an error or a wrong byte.  A stop that finds no transfer waiting on
    the host (a READ's data fits in the sockets' buffers) fails nothing:
    the host is stopped again."""
    span = 8 * MiB
    c = cluster.start(tgtd_factory, n=4, mode="tpt", unit=32 << 10, member_bytes=16 << 20,
                      extra_opts=(f"fail_timeout={FAIL_TIMEOUT}",))
    for t in c.targets:
        t.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 1,
                 "--lun", 1, "--params", "tpt_xfer_timeout=3")
    stock = subprocess.Popen(
        [str(paths.tool("tpt-iscsi-verify")), "--model", str(workdir / "model"), "--zero",
         "--span", str(span), "--seconds", "20", "--qd", "4", "--max-bs", "256k",
         "--final-check", c.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Until the test stops it (SIGTERM).
    host = subprocess.Popen(
        [str(paths.tool("tpt-direct-verify")), "--offset", str(span), "--span", str(span),
         "--zero", "--seconds", "120", "--qd", "8", "--max-bs", "1m", "--final-check", c.url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    moving_direct(c, host)
    stops = 0
    while not any("no transfer moved for" in t.log() for t in c.targets):
        assert stops < 4, "".join(t.log()[-1500:] for t in c.targets)
        os.kill(host.pid, signal.SIGSTOP)
        time.sleep(6)
        os.kill(host.pid, signal.SIGCONT)
        stops += 1
        time.sleep(1)
    host.send_signal(signal.SIGTERM)
    res = went_on_plain(c, host, stock)
    report(f"a direct host stopped 6 s with requests in flight ({stops} "
           f"stop{'s' if stops > 1 else ''}): "
           f"{res['ops']} requests, no error (sent on plain after it woke), no member "
           f"failed, the stock client clean")

@pytest.mark.skipif(not net.netns_usable(), reason="needs network namespaces (root, iproute2)")
def test_direct_host_across_a_cut_link(tgtd_factory, workdir, report):
    """Target 2's cable pulled under an extended host's load and left
    out: target 2 is failed, the host sees no error and no wrong byte
    (its requests finish degraded, direct), and once the cable is back
    and the box caught up the region reads the same bytes."""
    link, c = net.Link(0), None
    span = 8 * MiB
    try:
        c = cluster.start(tgtd_factory, n=4, mode="tpt", unit=32 << 10, host=link.host_addr,
                          boxes={2: link}, member_bytes=16 << 20,
                          extra_opts=(f"fail_timeout={FAIL_TIMEOUT}",))
        host = subprocess.Popen(
            [str(paths.tool("tpt-direct-verify")), "--seconds", "12", "--zero", "--span",
             str(span), "--qd", "8", "--max-bs", "1m", "--final-check", c.url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        link.cut()
        out, err = host.communicate(timeout=120)
        assert host.returncode == 0, out + err
        res = kv(out)
        assert res["direct"] == "yes" and res["errors"] == "0" and res["mismatches"] == "0"
        assert int(res["plain_out"]) == 0, out
        assert array_state(c) == "degraded"
        degraded = read_region(c, workdir / "degraded", span)
        link.restore()
        wait_state(c, {"optimal"}, timeout=60)
        assert read_region(c, workdir / "optimal", span) == degraded
        scrub(c)
        report(f"target 2's cable pulled under a direct host: {res['ops']} requests, no "
               f"error, all direct; caught up, the same bytes")
    finally:
        close_link(c, link)
