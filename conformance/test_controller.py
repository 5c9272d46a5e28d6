"""The controller: a TPT-RAID-5 LUN (our tgtd, --bstype tptraid) over five of
our tgtd targets, in TPT and in Baseline mode, served to stock libiscsi.

Integrity is checked byte for byte against a model of the LUN, and the
parity of every stripe by tpt-scrub reading the members directly."""
import os
import random
import re
import struct
import subprocess
import threading
import time

import pytest

from tptlib import cluster, net, paths, proto
from tptlib.client import GOOD

RESERVATION_CONFLICT = 0x18

BS = 512
MEMBERS = 5


def scrub(c):
    cluster.allow_plain_reads(c.targets)
    r = subprocess.run([str(paths.tool("tpt-scrub")), "--unit", str(c.unit), *c.target_urls],
                       capture_output=True, text=True, timeout=300)
    m = re.search(r"scrub: (\d+) stripes checked, (\d+) mismatches", r.stdout)
    assert m, r.stdout + r.stderr
    return int(m.group(1)), int(m.group(2)), r


def lu_param(ctl, p, check=True):
    """tgtadm --op update of the array's LU: a runtime parameter."""
    return ctl.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update",
                      "--tid", 1, "--lun", 1, "--params", p, check=check)


def ctl_show(ctl):
    return ctl.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout


def wait_show(ctl, pattern, timeout=30):
    """The controller's show output once pattern is in it."""
    deadline = time.monotonic() + timeout
    while True:
        out = ctl_show(ctl)
        if re.search(pattern, out):
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"no {pattern!r} in:\n{out}")
        time.sleep(0.1)


def log_in_and_write(client, c, nbytes):
    """Session "a" to the array, its unit attentions cleared, and nbytes of
    random data written from LBA 0: those bytes, to change and compare."""
    client.login("a", c.url)
    client.clear_unit_attentions("a")
    data = bytearray(os.urandom(nbytes))
    assert client.command("a", proto.write16_cdb(0, len(data) // BS),
                          data=bytes(data))["status"] == GOOD
    return data


def array_stats(c):
    out = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    line = re.search(r"TPT-RAID counters: (.*)", out).group(1).split()
    return {k: int(v) for k, v in zip(line[::2], line[1::2])}


def extent(rnd, nblocks, max_bytes=4 << 20):
    # Sizes from 512 B to 4 MiB, log-uniform, anywhere on the LUN.
    size = int(2 ** rnd.uniform(9, 22)) // BS * BS or BS
    size = min(size, max_bytes)
    lba = rnd.randrange(0, nblocks - size // BS)
    return lba, size // BS


@pytest.mark.parametrize("mode", ["tpt", "baseline"])
@pytest.mark.parametrize("unit", [4 << 10, 64 << 10, 1 << 20], ids=["4k", "64k", "1m"])
def test_random_io_matches_model(tgtd_factory, client, mode, unit, report):
    c = cluster.start(tgtd_factory, n=MEMBERS, mode=mode, unit=unit, member_bytes=24 << 20)
    client.login("a", c.url)
    client.clear_unit_attentions("a")
    rc = client.command("a", bytes([0x9E, 0x10]) + bytes(8) + struct.pack(">I", 32) + bytes(2), inlen=32)
    nblocks = struct.unpack(">Q", rc["data"][:8])[0] + 1
    assert nblocks == (MEMBERS - 1) * cluster.data_bytes(24 << 20, unit) // BS
    model = bytearray(nblocks * BS)
    rnd = random.Random(f"{mode}-{unit}")
    tag = 0
    for batch in range(10):
        # Writes in flight together, never overlapping: the result is
        # then the model's whatever order they complete in.
        taken = []
        writes = []
        while len(writes) < 6:
            lba, n = extent(rnd, nblocks)
            if any(lba < b + m and b < lba + n for b, m in taken):
                continue
            taken.append((lba, n))
            data = rnd.randbytes(n * BS)
            tag += 1
            client.send("a", f"w{tag}", proto.write16_cdb(lba, n), dir="out", data=data)
            writes.append((f"w{tag}", lba, data))
        for r, (_, lba, data) in zip(client.wait([w[0] for w in writes], timeout_ms=120000), writes):
            assert r["ok"] and r["status"] == GOOD, r
            model[lba * BS:lba * BS + len(data)] = data
        # Reads in flight together: just written, and anywhere.
        reads = [(lba, len(d) // BS) for _, lba, d in writes[:3]] + \
                [extent(rnd, nblocks) for _ in range(3)]
        tags = []
        for lba, n in reads:
            tag += 1
            client.send("a", f"r{tag}", proto.read16_cdb(lba, n), dir="in", inlen=n * BS)
            tags.append(f"r{tag}")
        for r, (lba, n) in zip(client.wait(tags, timeout_ms=120000), reads):
            assert r["ok"] and r["status"] == GOOD, r
            assert r["data"] == bytes(model[lba * BS:(lba + n) * BS]), f"batch {batch} lba {lba}"
    client.logout("a")
    stripes, bad, _ = scrub(c)
    assert bad == 0 and stripes == cluster.data_bytes(24 << 20, unit) // unit
    st = array_stats(c)
    report(f"{mode} unit {unit >> 10}k: {st['writes']} writes {st['reads']} reads, "
           f"controller xored {st['xored']} bytes, {st['pdus']} PDUs to targets")
    if mode == "tpt":
        # Only the parity of the full stripes of the stock host's writes,
        # which it holds (controller.md, "How a request runs").
        assert st["xored"] <= st["host_in"]
    assert st["failed"] == 0


@pytest.mark.parametrize("mode", ["tpt", "baseline"])
def test_sequential_write_counters(tgtd_factory, client, mode, report):
    """Table I: a full-stripe write moves 2N-1 blocks through the
    controller in both modes: an unmodified host's data is in the
    controller either way, so TPT mode, too, computes the parity of its
    full stripes and writes every unit (one WRITE per member for all four
    stripes of a request, where Baseline sends one per unit); a
    single-block write in Baseline moves 5.  Other pieces of an unmodified
    host's data travel in the commands' PDUs in TPT mode (inline in
    XDWRITE, plain READ(16) where no parity is needed): a single-block
    WRITE is 4 commands (no PRE-FETCH by default) whose only one-sided
    transfer is the delta between targets, a single-block READ one command
    and none."""
    unit = 64 << 10
    c = cluster.start(tgtd_factory, n=MEMBERS, mode=mode, unit=unit, member_bytes=24 << 20)
    client.login("a", c.url)
    client.clear_unit_attentions("a")
    total = 64 << 20
    chunk = (MEMBERS - 1) * unit * 4          # whole stripes per command
    tags = []
    for i, off in enumerate(range(0, total, chunk)):
        client.send("a", f"w{i}", proto.write16_cdb(off // BS, chunk // BS), dir="out",
                    data=os.urandom(chunk))
        tags.append(f"w{i}")
        if len(tags) == 8:
            assert all(r["status"] == GOOD for r in client.wait(tags, timeout_ms=120000))
            tags = []
    assert all(r["status"] == GOOD for r in client.wait(tags, timeout_ms=120000))
    st = array_stats(c)
    assert st["host_in"] == total
    report(f"{mode}: 64 MiB sequential write: controller moved {st['target_out']} bytes "
           f"to targets, xored {st['xored']}, {st['pdus']} PDUs")
    n = MEMBERS
    # Full stripes: N-1 data units in from the host, N units out, the
    # parity folded from N-1 units: N-2 XORs per stripe.
    assert st["target_out"] == total * n // (n - 1)
    assert st["target_in"] == 0
    assert st["xored"] == total * (n - 2) // (n - 1)
    if mode == "tpt":
        # A WRITE per member per request of four stripes, 1/4 of Baseline's.
        assert st["pdus"] == (total // chunk) * n
        for write, want in ((True, {"pdus": 4, "rma_ops": 1, "target_out": BS}),
                            (False, {"pdus": 1, "rma_ops": 0, "target_in": BS})):
            before = array_stats(c)
            if write:
                r = client.command("a", proto.write16_cdb(3, 1), dir="out", data=os.urandom(BS))
            else:
                r = client.command("a", proto.read16_cdb(3, 1), inlen=BS)
            assert r["status"] == GOOD
            after = array_stats(c)
            got = {k: after[k] - before[k] for k in want}
            assert got == want, (write, got)
    else:
        before = array_stats(c)
        r = client.command("a", proto.write16_cdb(3, 1), dir="out", data=os.urandom(BS))
        assert r["status"] == GOOD
        after = array_stats(c)
        moved = (after["host_in"] - before["host_in"]) + (after["target_in"] - before["target_in"]) \
            + (after["target_out"] - before["target_out"])
        assert moved == 5 * BS                     # Table I, Baseline single block
    client.logout("a")
    assert scrub(c)[1] == 0


@pytest.mark.parametrize("bsopts, says", [
    ("raid=5;unit=3k;mode=baseline;member=iscsi://127.0.0.1:1/iqn.x:a/1", "unit=3k"),
    ("raid=7;mode=baseline", "raid=7"),
    ("raid=5;mode=fast", "mode=fast"),
    ("raid=5;mode=baseline;member=iscsi://127.0.0.1:1/iqn.x:a/1;"
     "member=iscsi://127.0.0.1:2/iqn.x:b/1;member=iscsi://127.0.0.1:3/iqn.x:c/1", "unreachable: login failed"),
])
def test_bad_array_definitions_are_refused_whole(tgtd_factory, bsopts, says):
    from tptlib.tgtd import TgtadmError
    c = tgtd_factory(name="controller")
    c.new_target(1, "iqn.2026-11.org.tptraid:array")
    with pytest.raises(TgtadmError):
        c.new_lun(1, 1, str(c.dir / "array.state"), bstype="tptraid", bsopts=bsopts)
    assert says in c.log(), c.log()[-2000:]
    out = c.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert "LUN: 1" not in out
    assert c.alive()
    # A creation that failed leaves no state file behind (one is written
    # before the members are claimed, and removed once they are given
    # back): the same path can define another array.
    assert not (c.dir / "array.state").exists()


CTL_SECRET = "controller-secret-1"     # the controller's, towards members
MEMBER_SECRET = "member-answer-22"      # each member's own, for mutual CHAP


def chap_members(tgtd_factory, n=3):
    """n targets that require CHAP from the controller and answer with
    their own name and secret (tgtadm accounts, the second --outgoing)."""
    targets, urls = [], []
    for i in range(n):
        t = tgtd_factory(name=f"target{i}")
        iqn = t.new_target(1, f"iqn.2026-11.org.tptraid:chap{i}")
        t.new_file_lun(1, 1, 8 << 20)
        for user, secret in (("ctl", CTL_SECRET), (f"box{i}", MEMBER_SECRET)):
            t.tgtadm("--lld", "iscsi", "--mode", "account", "--op", "new", "--user", user,
                     "--password", secret)
        t.tgtadm("--lld", "iscsi", "--mode", "account", "--op", "bind", "--tid", 1, "--user", "ctl")
        t.tgtadm("--lld", "iscsi", "--mode", "account", "--op", "bind", "--tid", 1,
                 "--user", f"box{i}", "--outgoing")
        urls.append(f"iscsi://ctl%{CTL_SECRET}@127.0.0.1:{t.port}/{iqn}/1"
                    f"?target_user=box{i}&target_password={MEMBER_SECRET}")
        targets.append(t)
    return targets, urls


def test_members_behind_chap(tgtd_factory, client):
    """A member that requires CHAP is reached with
    iscsi://user%secret@...?target_user=..&target_password=.. (mutual: the
    controller checks the member's answer too).  A wrong secret in either
    direction, or a short one, is refused with a clear line in the log,
    and no secret is ever printed."""
    from tptlib.tgtd import TgtadmError
    targets, urls = chap_members(tgtd_factory)
    c = tgtd_factory(name="controller")
    ciqn = c.new_target(1, "iqn.2026-11.org.tptraid:chaparray")
    opts = "raid=5;unit=64k;mode=baseline;" + ";".join(f"member={u}" for u in urls)
    c.new_lun(1, 1, str(c.dir / "array.state"), bstype="tptraid", bsopts=opts)
    client.login("a", c.url(ciqn, 1))
    client.clear_unit_attentions("a")
    data = os.urandom(256 << 10)
    blocks = len(data) // BS
    assert client.command("a", proto.write16_cdb(0, blocks), dir="out",
                          data=data)["status"] == GOOD
    assert client.command("a", proto.read16_cdb(0, blocks), dir="in",
                          inlen=len(data))["data"] == data
    show = c.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert f"127.0.0.1:{targets[0].port}/iqn.2026-11.org.tptraid:chap0/1" in show, show

    def refused(tid, bad, says):
        c.new_target(tid, f"iqn.2026-11.org.tptraid:bad{tid}")
        before = len(c.log())
        with pytest.raises(TgtadmError):
            c.new_lun(tid, 1, str(c.dir / f"array{tid}.state"), bstype="tptraid", bsopts=bad)
        said = c.log()[before:]
        assert says in said, said
        return said

    # The controller's secret wrong: the member refuses the login.
    said = refused(2, opts.replace(f"%{CTL_SECRET}@", "%wrong-secret-1@"), "Authentication failure")
    assert f"member 0 (iscsi://127.0.0.1:{targets[0].port}/" in said, said
    # The member's answer wrong (a box posing as the member): the
    # controller refuses it.
    refused(3, opts.replace(f"target_password={MEMBER_SECRET}", "target_password=wrong-answer-2"),
            "Invalid CHAP_R response from the target")
    refused(4, opts.replace(f"%{CTL_SECRET}@", "%short@", 1), "shorter than 12 characters")
    refused(5, opts.replace(f"target_password={MEMBER_SECRET}", f"target_password={CTL_SECRET}", 1),
            "one CHAP secret in both directions")
    for t in [c, *targets]:
        log = t.log()
        for secret in (CTL_SECRET, MEMBER_SECRET, "wrong-secret-1", "wrong-answer-2", "%short@"):
            assert secret not in log, f"{t.name} logged a secret:\n{log[-3000:]}"
    assert (c.dir / "array.state").stat().st_mode & 0o077 == 0


def access_denied(r):
    return r["status"] == 2 and proto.parse_sense(r["sense"]).code == proto.SENSE["ACCESS_DENIED"]


def test_tuning_set_with_tgtadm_survives_a_restart(tgtd_factory, client):
    """fail_timeout and rebuild_rate set on a running array are kept in its
    state file and win over the definition when the controller comes back
    from that file alone; a bad value is refused and changes nothing."""
    c = cluster.start(tgtd_factory, n=3, mode="tpt", unit=64 << 10, member_bytes=16 << 20)
    ctl = c.controller

    def tune(params, check=True):
        return ctl.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update",
                          "--tid", 1, "--lun", 1, "--params", params, check=check)

    def tuning():
        show = ctl.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
        m = re.search(r"TPT-RAID tuning: (.*)", show)
        assert m, show
        return m.group(1)

    assert "(set)" not in tuning()
    tune("fail_timeout=7")
    tune("rebuild_rate=55")
    assert tune("fail_timeout=0", check=False).returncode != 0
    assert tuning() == "fail_timeout 7 s (set) rebuild_rate 55 MB/s (set)"
    # The state file is written by the controller's file thread, after
    # tgtadm has its answer (array_save_state()).
    state = ctl.dir / "array.state"
    for _ in range(100):
        text = state.read_text()
        if "\nfail_timeout 7\n" in text and "\nrebuild_rate 55\n" in text:
            break
        time.sleep(0.05)
    assert "\nfail_timeout 7\n" in text and "\nrebuild_rate 55\n" in text, text
    ctl.stop()
    ctl.start(port=ctl.port)
    ctl.new_target(1, c.iqn)
    ctl.new_lun(1, 1, str(state), bstype="tptraid")
    assert tuning() == "fail_timeout 7 s (set) rebuild_rate 55 MB/s (set)"
    client.login("a", c.url)
    client.clear_unit_attentions("a")
    data = os.urandom(64 << 10)
    assert client.command("a", proto.write16_cdb(0, len(data) // BS), data=data)["status"] == GOOD
    assert client.command("a", proto.read16_cdb(0, len(data) // BS),
                          inlen=len(data))["data"] == data


def test_member_credentials_come_from_the_array_definition_only(tgtd_factory, monkeypatch):
    """libiscsi fills a URL without credentials from LIBISCSI_CHAP_* in the
    environment; a controller's environment is the shell of whoever
    started tgtd, so it ignores them: a member URL without user%secret@
    logs in without CHAP, even with the right secret in the environment."""
    from tptlib.tgtd import TgtadmError
    targets, urls = chap_members(tgtd_factory, n=3)
    monkeypatch.setenv("LIBISCSI_CHAP_USERNAME", "ctl")
    monkeypatch.setenv("LIBISCSI_CHAP_PASSWORD", CTL_SECRET)
    c = tgtd_factory(name="controller")
    c.new_target(1, "iqn.2026-11.org.tptraid:envarray")
    bare = [re.sub(r"ctl%[^@]*@", "", u.split("?")[0]) for u in urls]
    opts = "raid=5;unit=64k;mode=baseline;" + ";".join(f"member={u}" for u in bare)
    with pytest.raises(TgtadmError):
        c.new_lun(1, 1, str(c.dir / "array.state"), bstype="tptraid", bsopts=opts)
    assert "Authentication failure" in c.log() or "login" in c.log().lower(), c.log()[-2000:]


@pytest.mark.parametrize("mode", ["tpt", "baseline"])
def test_members_are_reserved_for_the_array(tgtd_factory, client, mode):
    """The controller holds each member with a persistent reservation (WRITE
    EXCLUSIVE, the array id as key): another initiator gets RESERVATION
    CONFLICT for a write and for a TPT command, so a nexus the controller
    gave up on can change nothing either.  The member is also bound to the
    array's key, in Baseline mode too (a peer list naming the box alone,
    usr/tpt_controller/member_bind.c), so a stranger may not even read it,
    nor preempt the reservation with the (public) array id.  Stopping the
    array gives the boxes back."""
    c = cluster.start(tgtd_factory, n=3, mode=mode, unit=64 << 10, member_bytes=16 << 20)
    client.login("array", c.url)
    client.clear_unit_attentions("array")
    assert client.command("array", proto.write16_cdb(0, 8),
                          data=os.urandom(8 * BS))["status"] == GOOD
    client.login("rogue", c.target_urls[1])
    client.clear_unit_attentions("rogue")
    r = client.command("rogue", proto.read16_cdb(0, 8), inlen=8 * BS)
    assert access_denied(r), r
    r = client.command("rogue", proto.write16_cdb(0, 8), data=bytes(8 * BS))
    assert r["status"] == RESERVATION_CONFLICT, r
    r = client.command("rogue", proto.release_cdb(0, all_groups=True), dir="none")
    assert r["status"] == RESERVATION_CONFLICT, r
    # The reservation key is shown to anyone; registering and preempting
    # with it is refused all the same.
    pr_out = bytes([0x5F, 0x06, 0x01, 0, 0, 0, 0, 0, 24, 0])
    r = client.command("rogue", pr_out, data=bytes(8) + (0xBAD).to_bytes(8, "big") + bytes(8))
    assert access_denied(r), r
    assert "bound to array" in c.targets[1].log()
    # The array is untouched and still works.
    data = os.urandom(8 * BS)
    assert client.command("array", proto.write16_cdb(8, 8), data=data)["status"] == GOOD
    assert client.command("array", proto.read16_cdb(8, 8), inlen=8 * BS)["data"] == data
    client.logout("array")
    c.controller.stop()
    r = client.command("rogue", proto.write16_cdb(0, 8), data=bytes(8 * BS))
    if r["status"] == 2:        # the release's UNIT ATTENTION first
        r = client.command("rogue", proto.write16_cdb(0, 8), data=bytes(8 * BS))
    assert r["status"] == GOOD, r


def state_file_has(state, line, present=True):
    """Until the state file has the whole line `line` (present) or not:
    the controller's files thread writes it after the change, not with
    the tgtadm answer.  The text it found."""
    for _ in range(200):
        text = state.read_text()
        if (f"\n{line}\n" in text) == present:
            return text
        time.sleep(0.05)
    raise AssertionError(text)


def test_operator_removes_boxes_and_a_new_spare_takes_the_free_id(tgtd_factory, client):
    """remove=URL (md's --remove) takes a spare, or a box held out with
    fail=, out of the array for good: gone from show and from the state
    file (its id kept as "box N removed"), not connected, also after a
    restart; a position it held has no box, and the array runs degraded
    until the next spare=URL, which takes the lowest free id and is
    rebuilt into that position. Refused for a box that serves a position
    and is not held out. Before, a held box stayed in the array and counted
    towards its 40 boxes, and a spare could not be taken out at all."""
    c = cluster.start(tgtd_factory, n=3, spares=1, unit=64 << 10, member_bytes=16 << 20)
    ctl = c.controller
    state = ctl.dir / "array.state"

    stripe = 2 * (64 << 10)
    data = log_in_and_write(client, c, 8 * stripe)

    box1, spare = c.target_urls[1], c.target_urls[3]
    assert lu_param(ctl, f"remove={box1}", check=False).returncode != 0
    assert "serves position 1: fail=URL takes it out first" in ctl.log()
    lu_param(ctl, f"remove={spare}")
    out = wait_show(ctl, r"TPT-RAID: .* state optimal")
    assert "TPT-RAID member 3:" not in out, out
    state_file_has(state, "box 3 removed")
    assert lu_param(ctl, f"fail={spare}", check=False).returncode != 0   # no such box now
    lu_param(ctl, f"fail={box1}")
    wait_show(ctl, r"TPT-RAID member 1: \S+ held position 1")
    lu_param(ctl, f"remove={box1}")
    out = wait_show(ctl, r"TPT-RAID: .* state degraded")
    assert "TPT-RAID member 1:" not in out, out
    state_file_has(state, "box 1 removed")
    text = state_file_has(state, "position 1 -1")
    assert "held" not in text, text
    assert "its position has no box until a spare is rebuilt into it" in ctl.log()

    new = os.urandom(3 * stripe)
    data[stripe:4 * stripe] = new
    assert client.command("a", proto.write16_cdb(stripe // BS, len(new) // BS),
                          data=new)["status"] == GOOD

    # A restart keeps them out: nothing is connected to them.
    client.logout("a")
    ctl.stop()
    mark = len(ctl.log())
    ctl.start(port=ctl.port)
    ctl.new_target(1, c.iqn)
    ctl.new_lun(1, 1, str(state), bstype="tptraid")
    out = ctl_show(ctl)
    assert re.search(r"TPT-RAID: .* state degraded", out), out
    assert "TPT-RAID member 1:" not in out and "TPT-RAID member 3:" not in out, out
    assert "position 1 has no member" in ctl.log()[mark:]

    # A new box: the lowest free id, rebuilt into the empty position.
    t = tgtd_factory(name="newbox")
    iqn = t.new_target(1, f"{cluster.IQN}:newbox")
    t.new_file_lun(1, 1, 16 << 20)
    cluster.tpt_on(t)
    new_url = t.url(iqn, 1)
    lu_param(ctl, f"spare={new_url}")
    assert "spare 1 added" in ctl.log()[mark:]
    wait_show(ctl, r"TPT-RAID: .* state optimal", timeout=60)
    out = wait_show(ctl, r"TPT-RAID member 1: \S+ up position 1")
    assert "TPT-RAID member 3:" not in out, out
    state_file_has(state, f"box 1 {new_url}")
    client.login("a", c.url)
    client.clear_unit_attentions("a")
    r = client.command("a", proto.read16_cdb(0, len(data) // BS), inlen=len(data))
    assert r["status"] == GOOD and r["data"] == bytes(data)
    client.logout("a")
    cluster.allow_plain_reads([c.targets[0], t, c.targets[2]])
    r = subprocess.run([str(paths.tool("tpt-scrub")), "--unit", str(c.unit),
                        c.target_urls[0], new_url, c.target_urls[2]],
                       capture_output=True, text=True, timeout=300)
    assert re.search(r"scrub: \d+ stripes checked, 0 mismatches", r.stdout), r.stdout + r.stderr

@pytest.mark.parametrize("mode", ["tpt", "baseline"])
def test_dead_member_is_failed_and_io_goes_on(tgtd_factory, client, mode):
    """A killed box is failed within fail_timeout; the write that needed it
    completes GOOD, degraded, and reads back; the show output says which
    member is gone; the controller still stops promptly.  (The full
    failure matrix is test_failures.py.)"""
    import signal
    import time

    c = cluster.start(tgtd_factory, n=3, mode=mode, unit=64 << 10, member_bytes=16 << 20,
                      extra_opts=("fail_timeout=3",))
    client.login("a", c.url)
    client.clear_unit_attentions("a")
    stripe = 2 * (64 << 10)
    assert client.command("a", proto.write16_cdb(0, stripe // BS), dir="out",
                          data=os.urandom(stripe))["status"] == GOOD
    c.targets[1].killed_on_purpose = True
    c.targets[1].kill(signal.SIGKILL)
    data = os.urandom(stripe)
    r = client.command("a", proto.write16_cdb(0, stripe // BS), dir="out", data=data,
                       timeout_ms=60000)
    assert r["ok"] and r["status"] == GOOD, r
    r = client.command("a", proto.read16_cdb(0, stripe // BS), dir="in", inlen=stripe)
    assert r["status"] == GOOD and r["data"] == data
    out = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert re.search(r"TPT-RAID member 1: \S+ failed", out), out
    assert re.search(r"TPT-RAID: .* state degraded", out), out
    client.logout("a")
    t0 = time.monotonic()
    c.controller.stop()
    assert time.monotonic() - t0 < 10
    assert "tgtd did not answer" not in c.controller.log()


@pytest.mark.skipif(not net.netns_usable(), reason="needs network namespaces (root, iproute2)")
@pytest.mark.parametrize("mode", ["tpt", "baseline"])
def test_controller_crash_during_creation_creates_it_again(tgtd_factory, client, mode,
                                                           report):
    """kill -9 of the controller while it creates an array, two members
    claimed (bound to the new array's key in TPT mode) and reserved with
    its id, the third behind a slow link still being claimed: the state
    file written before any member was claimed ("creating yes") has the
    id and the key, and the next start from it creates the array again
    with them, the members taking the same key.  Before, both died with
    the process, and the members refused every controller until freed by
    hand."""
    import time

    link, c = net.Link(0), None
    try:
        c = cluster.start(tgtd_factory, n=3, mode=mode, unit=64 << 10, member_bytes=16 << 20,
                          host=link.host_addr, boxes={2: link}, create=False)
        state = c.controller.dir / "array.state"
        # What goes to the third box passes at 1 kB/s once its login and
        # superblock read have used the first 3 kB: its claim and its
        # superblock's write take seconds after the other two are done.
        link.slow(1000)

        def create():
            try:
                c.controller.new_lun(1, 1, str(state), bstype="tptraid", bsopts=c.spec)
            except Exception:       # the controller is killed under it
                pass

        creating = threading.Thread(target=create, daemon=True)
        creating.start()
        deadline = time.monotonic() + 60
        while not (state.exists() and "\ncreating yes\n" in state.read_text()):
            assert time.monotonic() < deadline, c.controller.log()[-3000:]
            time.sleep(0.05)
        text = state.read_text()
        array_id = re.search(r"^array (\w+)$", text, re.M).group(1)
        key = re.search(r"^key (\w+)$", text, re.M).group(1)
        if mode == "tpt":
            while not all(f"bound to array {array_id.lstrip('0')}" in t.log()
                          for t in c.targets[:2]):
                assert time.monotonic() < deadline, [t.log()[-1000:] for t in c.targets[:2]]
                time.sleep(0.05)
        time.sleep(0.3)
        assert creating.is_alive(), c.controller.log()[-3000:]
        c.controller.killed_on_purpose = True
        c.controller.kill()
        creating.join(timeout=60)
        link.slow(0)
        c.controller.start(port=c.controller.port)
        c.controller.new_target(1, c.iqn)
        c.controller.new_lun(1, 1, str(state), bstype="tptraid")
        log = c.controller.log()
        assert f"creating array {array_id} again, with its key: a crash stopped its " \
               f"creation" in log, log[-3000:]
        text = state.read_text()
        assert "creating" not in text and f"array {array_id}\n" in text and \
            f"key {key}\n" in text, text
        out = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
        assert re.search(rf"array_id {array_id} state (optimal|resyncing)", out), out
        assert len(re.findall(r"TPT-RAID member \d: \S+ up position", out)) == 3, out
        client.login("a", c.url)
        client.clear_unit_attentions("a")
        data = os.urandom(128 << 10)
        assert client.command("a", proto.write16_cdb(0, len(data) // BS), dir="out",
                              data=data)["status"] == GOOD
        r = client.command("a", proto.read16_cdb(0, len(data) // BS), dir="in",
                           inlen=len(data))
        assert r["status"] == GOOD and r["data"] == data
        client.logout("a")
        report(f"{mode}: controller killed while creating an array, 2 of 3 members "
               f"claimed: created again from its state file, array {array_id} and its key")
    finally:
        link.slow(0)
        if c is not None:
            c.controller.stop()
        link.close()


def test_a_definition_over_several_lines_is_recorded_as_one(tgtd_factory):
    """--bsopts written over several lines: the state file records it as
    one line, the array assembles from the file alone and from the same
    text given again. Before, the state file was never written (its
    format has no room for a line break) and nothing said so: the array
    could not be assembled again, and its key was lost."""
    c = cluster.start(tgtd_factory, n=3, spec_sep=";\n    ")
    state = c.controller.dir / "array.state"
    spec = re.search(r"^spec (.*)$", state.read_text(), re.M).group(1)
    assert spec.startswith("raid=5;unit=64k;mode=tpt;") and "member=" in spec, spec
    for bsopts in (None, spec.replace(";", ";\n    ")):
        c.controller.stop()
        c.controller.start(port=c.controller.port)
        c.controller.new_target(1, c.iqn)
        c.controller.new_lun(1, 1, str(state), bstype="tptraid", bsopts=bsopts)
        show = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
        assert re.search(r"TPT-RAID: .* state optimal", show), show



def test_an_arrays_lu_takes_only_the_arrays_keys(tgtd_factory):
    """--params on an array's LU: a target's key (tpt=on, tpt_pool_mb) is
    an unknown parameter there, not one that puts the array's LU in TPT
    mode (before, it fell through to the target's keys and was taken)."""
    c = cluster.start(tgtd_factory, n=3)
    for p in ("tpt=on", "tpt_pool_mb=64", "rebuild_rate=10,tpt=on"):
        r = c.controller.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update",
                                "--tid", 1, "--lun", 1, "--params", p, check=False)
        assert r.returncode != 0 and "unknown parameter" in r.stderr, (p, r.stderr)
    show = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert "TPT mode: on" not in show and "rebuild_rate 10 MB/s (set)" in show, show


@pytest.mark.parametrize("mode", ["tpt", "baseline"])
def test_operator_fails_a_box_and_adds_it_back(tgtd_factory, client, mode):
    """fail=URL (md's --fail) takes a box out: it is failed and its position
    runs degraded, and it stays out - its tgtd answering all along, the
    controller restarted - until readd=URL (md's --re-add), when it catches
    up on what was written meanwhile. Refused: a box the array cannot lose,
    a URL not in the array, readd= of a box not held out. Before, a box
    the operator wanted out came back as soon as its tgtd answered."""
    c = cluster.start(tgtd_factory, n=3, mode=mode, unit=64 << 10, member_bytes=16 << 20)
    ctl = c.controller
    state = ctl.dir / "array.state"

    def state_file_says(line, present=True):
        state_file_has(state, line, present)

    stripe = 2 * (64 << 10)
    data = log_in_and_write(client, c, 8 * stripe)

    box1 = c.target_urls[1]
    assert lu_param(ctl, "fail=iscsi://127.0.0.1:9/iqn.2026-11.org.example:none/1",
                 check=False).returncode != 0
    assert "not a box of this array" in ctl.log()
    assert lu_param(ctl, f"readd={box1}", check=False).returncode != 0
    assert "not held out" in ctl.log()
    lu_param(ctl, f"fail={box1}")
    wait_show(ctl, r"TPT-RAID member 1: \S+ held position 1")
    assert re.search(r"TPT-RAID: .* state degraded", ctl_show(ctl))
    assert "member 1 (" in ctl.log() and "failed by the operator" in ctl.log()
    state_file_says("held 1")
    # With box 1 out, no other box can go.
    assert lu_param(ctl, f"fail={c.target_urls[2]}", check=False).returncode != 0
    assert "cannot lose this box" in ctl.log()

    new = os.urandom(3 * stripe)
    data[stripe:4 * stripe] = new
    assert client.command("a", proto.write16_cdb(stripe // BS, len(new) // BS),
                          data=new)["status"] == GOOD
    # Its tgtd answers, the reconnect interval passes: it stays out.
    time.sleep(6)
    assert re.search(r"TPT-RAID member 1: \S+ held position 1", ctl_show(ctl))

    # So does a restart of the controller.
    client.logout("a")
    ctl.stop()
    ctl.start(port=ctl.port)
    ctl.new_target(1, c.iqn)
    ctl.new_lun(1, 1, str(state), bstype="tptraid")
    out = ctl_show(ctl)
    assert re.search(r"TPT-RAID member 1: \S+ held position 1", out), out
    assert re.search(r"TPT-RAID: .* state degraded", out), out
    assert "is held out by the operator (fail=): not connected until readd=URL" in ctl.log()

    lu_param(ctl, f"readd={box1}")
    state_file_says("held 1", present=False)
    wait_show(ctl, r"TPT-RAID: .* state optimal")
    assert "added back by the operator" in ctl.log()
    client.login("a", c.url)
    client.clear_unit_attentions("a")
    r = client.command("a", proto.read16_cdb(0, len(data) // BS), inlen=len(data))
    assert r["status"] == GOOD and r["data"] == bytes(data)
    client.logout("a")
    checked, mismatches, r = scrub(c)
    assert mismatches == 0, r.stdout
