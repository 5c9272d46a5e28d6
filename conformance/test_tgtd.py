"""Our tgtd serving plain LUNs to stock libiscsi on loopback."""
import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from tptlib import paths
from tptlib.tgtd import TgtadmError, inline_reads, read_stats

IO = str(paths.tool("tpt-iscsi-io"))


def io(*args, data=None, check=True):
    r = subprocess.run([IO, *map(str, args)], input=data, capture_output=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"tpt-iscsi-io {args[:1]} exited {r.returncode}: {r.stderr.decode()}")
    return r


def test_write_then_read_back_and_on_disk(file_lun):
    t, url, backing = file_lun
    data = os.urandom(3 << 20)           # spans several 1 MiB commands
    io("write", url, 2048, data=data)
    assert io("read", url, 2048, len(data) // 512).stdout == data
    with open(backing, "rb") as f:
        f.seek(2048 * 512)
        assert f.read(len(data)) == data


def test_targets_offer_large_data_segments_without_initial_r2t(file_lun):
    """patches/tgt/0017, docs/target.md: a new target offers 256 KiB data
    segments, InitialR2T=No and a 256 KiB first burst (stock tgt: 8192,
    Yes, 64 KiB), and each can be set back per target."""
    t, url, backing = file_lun

    def offered():
        out = t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show", "--tid", 1).stdout
        return dict(kv.strip().split("=", 1) for kv in out.splitlines() if "=" in kv)

    keys = offered()
    assert keys["MaxRecvDataSegmentLength"] == "262144", keys
    assert keys["InitialR2T"] == "No", keys
    assert keys["FirstBurstLength"] == "262144", keys
    # A 1 MiB write: its first 256 KiB as immediate data, the rest
    # solicited; a 256 KiB one all immediate.
    data, burst = os.urandom(1 << 20), os.urandom(256 << 10)
    io("write", url, 0, data=data)
    io("write", url, 512, data=burst)
    expect = data[:256 << 10] + burst + data[512 << 10:]
    assert io("read", url, 0, len(data) // 512).stdout == expect
    for name, value in (("InitialR2T", "Yes"), ("MaxRecvDataSegmentLength", "8192"),
                        ("FirstBurstLength", "65536")):
        t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "update", "--tid", 1,
                 "--name", name, "--value", value)
    keys = offered()
    assert (keys["InitialR2T"], keys["MaxRecvDataSegmentLength"],
            keys["FirstBurstLength"]) == ("Yes", "8192", "65536"), keys
    io("write", url, 4096, data=data)
    assert io("read", url, 4096, len(data) // 512).stdout == data


@pytest.mark.parametrize("where", ["workdir", "shm"])
def test_file_lun_reads_zero_copy_and_in_the_event_loop(tgtd_factory, where):
    """READs of a file LUN: a file in memory (tmpfs) is read in the event
    loop, 16 KiB and more spliced into a pipe and from it to the socket;
    a file system with RWF_NOWAIT has READs up to 32 KiB whose blocks are
    cached copied in the event loop, and 16 KiB to 1 MiB spliced by a
    worker (usr/tpt_inline_read.h, usr/tpt_data_pipe.h).  Whichever way,
    the host gets the file's bytes, also where a READ is several Data-In
    PDUs (libiscsi takes 256 KiB per PDU) and over a hole."""
    t = tgtd_factory()
    iqn = t.new_target(1, "iqn.2026-11.org.tptraid:reads")
    if where == "shm":
        if not os.path.isdir("/dev/shm"):
            pytest.skip("no /dev/shm")
        backing = Path("/dev/shm") / f"tpt-test-reads-{os.getpid()}-{t.control_port}.img"
    else:
        backing = t.dir / "reads.img"
    try:
        with open(backing, "wb") as f:
            f.truncate(256 << 20)
        t.new_lun(1, 1, str(backing))
        url = t.url(iqn, 1)
        how = inline_reads(backing)
        data = os.urandom(3 << 20)
        io("write", url, 0, data=data)
        before = read_stats(t)
        assert before["busy"] == 0, before
        reads = [(8, 8), (1, 32), (8, 128), (2048, 2048)]      # 4k, 16k (unaligned), 64k, 1m
        for lba, blocks in reads:
            assert io("read", url, lba, blocks).stdout == data[lba * 512:(lba + blocks) * 512]
        hole = (128 << 20) // 512
        assert io("read", url, hole, 2048).stdout == bytes(1 << 20)     # never written
        after = read_stats(t)
        delta = {k: after[k] - before[k] for k in before}
        assert after["busy"] == 0 and delta["pipe Read into a buffer instead"] == 0, after
        if how == "memory":
            assert (delta["inline Copied"], delta["inline Spliced"], delta["pipe READs"]) == \
                (1, 4, 4), delta
            assert delta["pipe Bytes"] == (16 << 10) + (64 << 10) + (2 << 20)
        elif how == "nowait":
            assert (delta["inline Copied"], delta["inline Spliced"], delta["pipe READs"]) == \
                (2, 0, 3), delta
            assert delta["pipe Bytes"] == (64 << 10) + (2 << 20)
        # A WRITE after a READ completed is seen by the next READ, not the
        # pages the last one sent.
        io("write", url, 2048, data=bytes(64 << 10))
        assert io("read", url, 2048, 128).stdout == bytes(64 << 10)
    finally:
        t.stop()
        backing.unlink(missing_ok=True)


def test_load_generator_runs_between_its_gates(file_lun):
    """tpt-iscsi-load --gate (how the benchmarks leave login and logout out
    of what they sample): 'ready' once logged in, the run after a line on
    stdin, the result line, logout after another line; stdin ending
    before the run is an error, not a hang."""
    t, url, backing = file_lun
    load = [str(paths.tool("tpt-iscsi-load")), "--gate", "--pattern", "seq-read",
            "--bs", "4k", "--seconds", "0.2", url]
    r = subprocess.run(load, input="", capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stdout == "ready\n", (r.stdout, r.stderr)
    assert "standard input ended" in r.stderr, r.stderr
    p = subprocess.Popen(load, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        p.stdin.write("go\n")
        p.stdin.flush()
        result = p.stdout.readline()
        assert result.startswith("ops=") and " direct=no " in result, result
        assert p.poll() is None          # still logged in, waiting
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_capacity_matches_backing_file(file_lun):
    t, url, backing = file_lun
    out = io("capacity", url).stdout.decode()
    assert "block_size 512" in out and f"blocks {(256 << 20) // 512}" in out


def test_several_instances_side_by_side(tgtd_factory):
    daemons = [tgtd_factory() for _ in range(3)]
    urls = []
    for i, t in enumerate(daemons):
        iqn = t.new_target(1, f"iqn.2026-11.org.tptraid:side{i}")
        t.new_file_lun(1, 1, 16 << 20)
        urls.append(t.url(iqn, 1))
    assert len({t.port for t in daemons}) == 3
    for i, url in enumerate(urls):
        io("write", url, 0, data=bytes([i + 1]) * 4096)
    for i, url in enumerate(urls):
        assert io("read", url, 0, 8).stdout == bytes([i + 1]) * 4096


def test_refused_writes_change_nothing(file_lun):
    t, url, backing = file_lun
    before = backing.read_bytes()[:1 << 20]
    r = io("write", url, 0, data=b"x" * 1000, check=False)     # not whole blocks
    assert r.returncode == 1 and b"not a multiple" in r.stderr
    r = io("write", url, (256 << 20) // 512 - 1, data=b"y" * 1024, check=False)
    assert r.returncode == 1 and b"beyond" in r.stderr
    assert backing.read_bytes()[:1 << 20] == before


@pytest.mark.parametrize("args", [
    ("--mode", "logicalunit", "--op", "new", "--tid", "1", "--lun", "2", "--backing-store", "/nonexistent/file"),
    ("--mode", "target", "--op", "new", "--tid", "0", "--targetname", "iqn.2026-11.org.tptraid:zero"),
    ("--mode", "logicalunit", "--op", "new", "--tid", "99", "--lun", "1", "--backing-store", "/dev/null"),
    ("--mode", "nonsense", "--op", "show"),
])
def test_bad_tgtadm_requests_are_refused_not_fatal(file_lun, args):
    t, url, backing = file_lun
    with pytest.raises(TgtadmError) as e:
        t.tgtadm("--lld", "iscsi", *args)
    assert e.value.stderr.strip(), "refusal without a message"
    assert t.alive()
    assert io("capacity", url).returncode == 0


def test_a_refused_param_is_tgtadms_answer_whatever_follows(file_lun, tgtd_factory):
    """--params applies keys left to right and stops at the first it
    refuses, whose error tgtadm exits with; before, only the last key's
    result was the answer, so "tpt=on,tpt_dm=..." on a fresh tgtd (the
    datamover's address must come first) exited 0 with the LU not in TPT
    mode."""
    t, url, backing = file_lun

    def params(p):
        return t.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update",
                        "--tid", 1, "--lun", 1, "--params", p)

    with pytest.raises(TgtadmError):
        params("no_such_key=1,readonly=0")
    with pytest.raises(TgtadmError):
        params(f"tpt=on,tpt_dm={t.host}:0")
    # A name, not an address: peers would be handed it as the endpoint.
    with pytest.raises(TgtadmError):
        params("tpt_dm=localhost:0,tpt=on")
    assert "tpt_dm=localhost: not a numeric IPv4 or IPv6 address" in t.log()
    show = t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert "TPT mode: on" not in show, show
    params(f"tpt_dm={t.host}:0,tpt=on")
    show = t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert "TPT mode: on" in show, show
    assert "TPT transfer timeout: 10 s" in show, show
    for bad in ("0", "3601", "ten", ""):
        with pytest.raises(TgtadmError):
            params(f"tpt_xfer_timeout={bad}")
    params("tpt_xfer_timeout=4")
    show = t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert "TPT transfer timeout: 4 s" in show, show
    assert t.alive() and io("capacity", url).returncode == 0


def test_a_model_used_on_a_larger_span_does_not_claim_the_new_blocks(file_lun, tmp_path):
    """tpt-iscsi-verify with a model made for 1 MiB, then run on 2 MiB of a
    LUN whose second MiB holds data: the blocks the span adds are unknown,
    not zeroes (before, every one was a mismatch)."""
    t, url, backing = file_lun
    io("write", url, 2048, data=os.urandom(1 << 20))
    verify = str(paths.tool("tpt-iscsi-verify"))
    model = tmp_path / "model"
    for args in (("--span", "1m", "--zero", "--ops", "50"), ("--span", "2m", "--verify")):
        r = subprocess.run([verify, "--model", str(model), *args, url], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0 and "mismatches=0" in r.stdout, r.stdout + r.stderr
        if "--ops" in args:     # exactly that many commands of load
            counts = dict(kv.split("=") for kv in r.stdout.split() if "=" in kv)
            assert int(counts["writes"]) + int(counts["reads"]) == 50, r.stdout


def test_stopped_daemon_releases_its_control_port(tgtd_factory):
    t = tgtd_factory()
    t.new_target(1, "iqn.2026-11.org.tptraid:gone")
    t.stop()
    assert not t.alive()
    # tgtd holds this lock for as long as it owns the control port.
    with open(f"{t.ipc_socket}.{t.control_port}.lock", "w") as f:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
