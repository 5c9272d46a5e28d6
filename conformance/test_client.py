"""tpt-client, the raw-CDB co-process the suites drive targets with, against
our tgtd serving a plain file LUN, and two clients' datamovers against
each other."""
import os
import signal
import struct

import pytest

from tptlib.client import (CHECK_CONDITION, GOOD, TMF_FUNCTION_COMPLETE, TMF_TASK_DOES_NOT_EXIST,
                           RequestFailed, TptClient, asc_ascq, sense_key)

LUN_BYTES = 256 << 20
BLOCK = 512


def read_capacity16():
    return bytes([0x9E, 0x10]) + bytes(8) + struct.pack(">I", 32) + bytes(2)


def read10(lba, blocks):
    return struct.pack(">BBIBHB", 0x28, 0, lba, 0, blocks, 0)


def write10(lba, blocks):
    return struct.pack(">BBIBHB", 0x2A, 0, lba, 0, blocks, 0)


def clean_exit(*clients):
    problems = [c.problems() for c in clients]
    assert not any(problems), "\n".join(problems)


@pytest.fixture
def client(workdir):
    c = TptClient(stderr_path=workdir / "client.stderr")
    with c:
        yield c
        assert c.alive(), f"tpt-client died:\n{c.stderr_text()}"
    clean_exit(c)


@pytest.fixture
def session(file_lun, client):
    t, url, backing = file_lun
    client.login("t0", url)
    client.clear_unit_attentions("t0")
    return client, t, backing


def test_login_leaves_unit_attentions_to_the_test(file_lun, client):
    t, url, _ = file_lun
    client.login("t0", url)
    r = client.command("t0", bytes(6))                  # TEST UNIT READY
    assert r["status"] == CHECK_CONDITION and sense_key(r["sense"]) == 0x6
    assert asc_ascq(r["sense"])[0] == 0x29              # power on / reset
    assert client.clear_unit_attentions("t0") == []


def test_read_capacity_16(session):
    c, t, _ = session
    r = c.command("t0", read_capacity16(), inlen=32)
    assert r["ok"] and r["status"] == GOOD and r["sense"] == b""
    last_lba, block_len = struct.unpack(">QI", r["data"][:12])
    assert (last_lba + 1, block_len) == (LUN_BYTES // BLOCK, BLOCK)


def test_write10_read10_round_trip(session):
    c, t, backing = session
    data = os.urandom(8 * BLOCK)
    w = c.command("t0", write10(100, 8), data=data)
    assert w["status"] == GOOD and w["data"] == b"" and w["residual"] == 0
    r = c.command("t0", read10(100, 8), inlen=len(data))
    assert r["status"] == GOOD and r["data"] == data
    assert r["residual_kind"] == "none"
    with open(backing, "rb") as f:
        f.seek(100 * BLOCK)
        assert f.read(len(data)) == data


def test_check_condition_carries_sense(session):
    c, _, _ = session
    r = c.command("t0", read10(LUN_BYTES // BLOCK, 1), inlen=BLOCK)
    assert r["ok"] and r["status"] == CHECK_CONDITION
    assert sense_key(r["sense"]) == 0x5                 # ILLEGAL REQUEST
    assert asc_ascq(r["sense"]) == (0x21, 0x00)         # LBA out of range
    assert r["data"] == b""


def test_underflow_residual(session):
    c, _, _ = session
    # The CDB asks for one block, the expected transfer length says two.
    r = c.command("t0", read10(0, 1), inlen=2 * BLOCK)
    assert r["status"] == GOOD and len(r["data"]) == BLOCK
    assert (r["residual_kind"], r["residual"]) == ("underflow", BLOCK)


def test_many_in_flight_reported_in_asked_order(session):
    c, _, _ = session
    blocks = {f"w{i}": os.urandom(BLOCK) for i in range(8)}
    for i, (tag, data) in enumerate(blocks.items()):
        c.send("t0", tag, write10(1000 + i, 1), dir="out", data=data)
    tags = list(blocks)[::-1]
    results = c.wait(tags + ["nosuch"])
    assert [r["tag"] for r in results] == tags + ["nosuch"]
    assert all(r["ok"] and r["status"] == GOOD for r in results[:-1])
    assert not results[-1]["ok"] and results[-1]["error"] == "unknown tag"
    for i in range(8):
        c.send("t0", f"r{i}", read10(1000 + i, 1), dir="in", inlen=BLOCK)
    results = c.wait([f"r{i}" for i in range(8)])
    assert [r["data"] for r in results] == list(blocks.values())


def test_deep_queue_and_large_transfers(session):
    c, _, backing = session
    big = os.urandom(4 << 20)                         # several R2T bursts
    assert c.command("t0", write10(4096, len(big) // BLOCK), data=big)["status"] == GOOD
    tags = [f"q{i}" for i in range(200)]
    for i, tag in enumerate(tags):
        c.send("t0", tag, read10(4096 + i * 8, 8), dir="in", inlen=8 * BLOCK)
    results = c.wait(tags, timeout_ms=30000)
    assert all(r["ok"] and r["status"] == GOOD for r in results)
    assert b"".join(r["data"] for r in results) == big[:200 * 8 * BLOCK]
    assert c.command("t0", read10(4096, len(big) // BLOCK), inlen=len(big))["data"] == big


def test_tags_in_flight_or_uncollected_are_not_reused(session):
    c, _, _ = session
    c.send("t0", "a", read10(0, 1), dir="in", inlen=BLOCK)
    with pytest.raises(RequestFailed):
        c.send("t0", "a", read10(0, 1), dir="in", inlen=BLOCK)
    (r,) = c.wait(["a"])
    assert r["ok"]
    (again,) = c.wait(["a"])
    assert not again["ok"] and "already collected" in again["error"]
    c.send("t0", "a", read10(0, 1), dir="in", inlen=BLOCK)     # collected: reusable
    assert c.wait(["a"])[0]["ok"]


def test_abort_task_on_completed_command(session):
    c, t, _ = session
    c.send("t0", "done", read10(0, 1), dir="in", inlen=BLOCK)
    assert c.wait(["done"])[0]["ok"]
    r = c.abort("t0", "done")
    assert r["response"] in (TMF_FUNCTION_COMPLETE, TMF_TASK_DOES_NOT_EXIST), r
    assert r["cancelled"] is False
    # The session survives the TMF.
    assert c.command("t0", read10(0, 1), inlen=BLOCK)["status"] == GOOD
    assert t.alive()


@pytest.mark.parametrize("line", [
    "garbage",
    "{",
    '{"op":"login","id":1',
    '{"op":"stats","id":1} trailing',
    '{"op":"stats","id":"1"}',
    '{"op":"stats"}',
    '{"op":"stats","id":1.5}',
    '{"op":"nosuch","id":1}',
    '{"op":"wait","id":1,"tags":"a"}',
    '{"op":"wait","id":1,"tags":[1,2]}',
    '{"op":"send","id":1,"name":{"nested":1}}',
    '{"op":"send","id":1,"name":"t0","tag":"x","cdb":"zz","dir":"none"}',
    '{"op":"send","id":1,"name":"t0","tag":"x","cdb":"' + "00" * 17 + '","dir":"none"}',
    '{"op":"send","id":1,"name":"t0","tag":"x","cdb":"00","dir":"sideways"}',
    '{"op":"send","id":1,"name":"t0","tag":"x","cdb":"00","dir":"in"}',
    '{"op":"send","id":1,"name":"t0","tag":"x","cdb":"00","dir":"none","inlen":4}',
    '{"op":"send","id":1,"name":"t0","tag":"x","cdb":"00","dir":"none","in_len":4}',
    '{"op":"login","id":1,"id":2,"name":"a","url":"b"}',
    '{"op":"buf","id":1,"name":"x","size":99999999999999999999999}',
    '{"op":"stats","id":1,"x":"\\ud800"}',
    '{"op":"stats","id":1,"x":"\\u0000"}',
    '{"op":"stats","id":1,"x":"\x01"}',
    b"\xff\xfe{}",
    "[]",
])
def test_malformed_requests_get_an_error_and_the_client_survives(session, line):
    c, _, _ = session
    r = c.raw(line)
    assert r["ok"] is False and r["error"], r
    # Still serving, session intact.
    assert c.command("t0", read10(0, 1), inlen=BLOCK)["status"] == GOOD


def test_overlong_line_is_refused(workdir):
    with TptClient(stderr_path=workdir / "client.stderr", args=["--max-line", "4096"]) as c:
        r = c.raw(b'{"op":"buf_write","id":1,"data":"' + b"00" * 4096 + b'"}')
        assert r["ok"] is False and "longer" in r["error"]
        assert c.raw('{"op":"wait","id":7,"tags":[]}') == {"id": 7, "ok": True, "done": True}
    clean_exit(c)


def test_login_failures_are_reported(file_lun, client):
    t, url, _ = file_lun
    bad = url.replace(":file/", ":nosuchtarget/")
    with pytest.raises(RequestFailed, match="login"):
        client.login("bad", bad)
    with pytest.raises(RequestFailed, match="URL"):
        client.login("bad", "not-a-url")
    client.login("good", url)
    with pytest.raises(RequestFailed, match="already exists"):
        client.login("good", url)


def test_drop_leaves_the_target_serving(session):
    c, t, _ = session
    c.send("t0", "inflight", read10(0, 1), dir="in", inlen=BLOCK)
    c.drop("t0")
    (r,) = c.wait(["inflight"])
    # Either it made it back before the drop or it was cancelled by it.
    assert r["ok"] or "dropped" in r["error"], r
    with pytest.raises(RequestFailed):
        c.send("t0", "after", read10(0, 1), dir="in", inlen=BLOCK)
    c.login("t1", t.url("iqn.2026-11.org.tptraid:file", 1))
    c.clear_unit_attentions("t1")
    assert c.command("t1", read10(0, 1), inlen=BLOCK)["status"] == GOOD
    c.logout("t1")
    assert t.alive()


def test_wait_times_out_and_the_command_stays_pending(session):
    c, t, _ = session
    os.kill(t.proc.pid, signal.SIGSTOP)
    try:
        c.send("t0", "slow", read10(0, 1), dir="in", inlen=BLOCK)
        (r,) = c.wait(["slow"], timeout_ms=300)
        assert not r["ok"] and r["error"] == "timeout"
    finally:
        os.kill(t.proc.pid, signal.SIGCONT)
    (r,) = c.wait(["slow"])
    assert r["ok"] and r["status"] == GOOD and len(r["data"]) == BLOCK


def test_target_death_fails_the_session(session):
    c, t, _ = session
    os.kill(t.proc.pid, signal.SIGSTOP)
    c.send("t0", "orphan", read10(0, 1), dir="in", inlen=BLOCK)
    t.killed_on_purpose = True
    t.kill()
    (r,) = c.wait(["orphan"])
    assert not r["ok"] and "connection lost" in r["error"], r
    with pytest.raises(RequestFailed, match="not logged in"):
        c.send("t0", "next", read10(0, 1), dir="in", inlen=BLOCK)
    with pytest.raises(RequestFailed, match="already failed"):
        c.logout("t0")


# -- datamover --------------------------------------------------------------

TOKEN = bytes(range(16))


@pytest.fixture
def two_clients(workdir):
    with TptClient(stderr_path=workdir / "host.stderr") as host, \
         TptClient(stderr_path=workdir / "ctl.stderr") as ctl:
        yield host, ctl
    clean_exit(host, ctl)


def test_buffers_register_and_hold_bytes(client):
    info = client.dm_open("host", peer_id=7, array_id=1 << 63)
    assert info["port"] > 0 and info["provider"]
    b = client.buf("h0", 4096, "rw")
    assert b["size"] == 4096 and b["stag"] >= 0 and b["rma_base"] >= 0
    client.buf_write("h0", 100, b"\x01\x02\x03")
    assert client.buf_read("h0", 99, 5) == b"\x00\x01\x02\x03\x00"
    with pytest.raises(RequestFailed, match="do not fit"):
        client.buf_read("h0", 4000, 100)
    with pytest.raises(RequestFailed, match="already exists"):
        client.buf("h0", 16, "r")
    client.buf_release("h0")
    with pytest.raises(RequestFailed, match="no buffer"):
        client.buf_read("h0", 0, 1)
    assert client.stats()["puts"] == 0


def test_unknown_peers_are_refused_until_allowed(two_clients):
    host, ctl = two_clients
    port = host.dm_open("host", peer_id=1, array_id=42)["port"]
    ctl.dm_open("controller", listen="", peer_id=2, array_id=42)

    r = ctl.dm_connect("p", "127.0.0.1", port, TOKEN, role="target", peer_id=9, check=False)
    assert not r["ok"], r
    host.dm_allow(9, TOKEN, array_id=42)
    r = ctl.dm_connect("p", "127.0.0.1", port, bytes(16), role="target", peer_id=9,
                       check=False)
    assert not r["ok"], "wrong token accepted"
    r = ctl.dm_connect("p", "127.0.0.1", port, TOKEN, role="target", peer_id=9,
                       array_id=43, check=False)
    assert not r["ok"], "wrong array accepted"
    ctl.dm_connect("p", "127.0.0.1", port, TOKEN, role="target", peer_id=9)
    st = host.stats()
    assert st["accepted_peers"] == 1 and st["refused_by_allow_list"] == 3


def test_put_and_get_between_two_clients(two_clients):
    host, ctl = two_clients
    port = host.dm_open("host", peer_id=1)["port"]
    host.dm_allow(5, TOKEN)
    ctl.dm_open("target", listen="", peer_id=5)
    ctl.dm_connect("h", "127.0.0.1", port, TOKEN)

    data = os.urandom(1 << 20)
    hb = host.buf("in", len(data), "w")
    src = host.buf("out", len(data), "r")
    host.buf_write("out", 0, data[::-1])
    ctl.buf("local", len(data), "rw")
    ctl.buf_write("local", 0, data)

    ctl.dm_put("h", "local", 0, hb["stag"], hb["rma_base"], len(data))
    assert host.buf_read("in", 0, len(data)) == data
    ctl.dm_get("h", "local", 0, src["stag"], src["rma_base"] + 4096, 8192)
    assert ctl.buf_read("local", 0, 8192) == data[::-1][4096:4096 + 8192]

    # Access rights hold: "out" is read-only for peers, "in" write-only.
    with pytest.raises(RequestFailed):
        ctl.dm_put("h", "local", 0, src["stag"], src["rma_base"], 64, timeout_ms=5000)
    st = ctl.stats()
    assert st["puts"] >= 1 and st["gets"] == 1 and st["bytes_got"] == 8192


def test_released_buffer_stag_is_stale(two_clients):
    host, ctl = two_clients
    port = host.dm_open("host", peer_id=1)["port"]
    host.dm_allow(5, TOKEN)
    ctl.dm_open("target", listen="", peer_id=5)
    ctl.dm_connect("h", "127.0.0.1", port, TOKEN)
    hb = host.buf("gone", 4096, "rw")
    ctl.buf("local", 4096, "rw")
    host.buf_release("gone")
    with pytest.raises(RequestFailed):
        ctl.dm_put("h", "local", 0, hb["stag"], hb["rma_base"], 4096, timeout_ms=5000)
