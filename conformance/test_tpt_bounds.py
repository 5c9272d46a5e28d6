"""Bounds on what one I_T nexus, one group and the whole tgtd may make a TPT
target keep (docs/target.md "Bounds", protocol.md 8.4).  Each test has a
second nexus play an attacker that exhausts one bound: it gets INSUFFICIENT
RESOURCES, the refusal is logged once, the real controller's nexus is still
served, and once the attacker lets go nothing is left in use."""
import os
import re
import struct
import time

from tptlib import cluster, proto
from tptlib.client import GOOD, TptClient
from tptlib.targets import ARRAY_ID, LUN, assert_sense

BS = 512
MIB = 1 << 20
MBLK = MIB // BS
UNIT = 64 << 10
UBLK = UNIT // BS
EVIL = "evil"




def set_param(tgtd, **params):
    ps = ",".join(f"{k}={v}" for k, v in params.items())
    tgtd.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 1,
                  "--lun", LUN, "--params", ps)


def show(tgtd):
    """The bounds lines of tgtadm show as {line: {key: int}}."""
    out = tgtd.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    lines = {}
    for m in re.finditer(r"TPT (bounds|in use|peak per nexus|refused): (.*)", out):
        words = m.group(2).split()
        lines[m.group(1)] = {k: int(v) for k, v in zip(words[::2], words[1::2])}
    return lines


def attacker(tpt, t):
    """A second nexus in t's tgtd, under its own initiator name: a LU of
    another array in the same process (a LU of t's array serves only its
    controller, protocol.md 5.5), sharing the process's pool and groups."""
    iqn = "iqn.2026-11.org.tptraid:other-array"
    t.tgtd.new_target(2, iqn)
    t.tgtd.new_file_lun(2, LUN, tpt.lun_bytes)
    t.tgtd.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 2,
                  "--lun", LUN, "--params", "tpt=on")
    tpt.client.login(EVIL, t.tgtd.url(iqn, LUN), initiator="iqn.2026-11.org.example:evil")
    tpt.client.clear_unit_attentions(EVIL)
    pl = proto.peer_list(ARRAY_ID + 1, 1, t.index, tpt.peers(), array_key=os.urandom(16))
    assert evil(tpt, t, proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl).good


def evil(tpt, t, cdb, out=None, inlen=None):
    return tpt.cmd(t, cdb, out, inlen, session=EVIL)


def prep_read(tpt, t, host, lba, blocks, group, session=None):
    """A non-FINAL PREP READ: a record the target keeps until the FINAL."""
    xl = proto.xfer_list([host.desc(0, blocks * BS)])
    cdb = proto.vendor_cdb(proto.PREP_READ, lba, blocks, group)
    return tpt.cmd(t, cdb, out=xl, session=session)


def controller_writes(tpt, t, row=3, group=0x500):
    """What the real controller does: XDWRITE into a slot, WRITE NEW DATA."""
    data = os.urandom(UNIT)
    host = tpt.host_buffer(f"ctl{group}", data)
    xl = proto.xfer_list([host.desc(0, UNIT)], result_slot=0)
    r = tpt.cmd(t, proto.vendor_cdb(proto.XDWRITE_16, row * UBLK, UBLK, group,
                                     proto.DISABLE_WRITE), out=xl)
    assert r.good, r
    r = tpt.cmd(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, row * UBLK, UBLK, group))
    assert r.good, r
    assert t.read_backing(row * UNIT, UNIT) == data


def assert_refused_once(t, key, words):
    assert show(t.tgtd)["refused"][key] >= 1
    assert t.tgtd.log().count(words) == 1


def controller_goes_on_and_evil_leaves_nothing(tpt, t, key, words):
    """After a refusal of bound @key: the controller's writes still work,
    the refusal was logged once, and once the attacker logs out nothing
    it held is in use."""
    controller_writes(tpt, t)
    assert_refused_once(t, key, words)
    tpt.client.logout(EVIL)
    assert_nothing_in_use(t)


def assert_nothing_in_use(t):
    use = show(t.tgtd)["in use"]
    assert (use["groups"], use["pool_buffers"], use["buffered_mb"]) == (0, 0, 0), use


def test_slot_memory_per_nexus(tpt):
    """TPT REPORT SLOTS for 1024 x 1 MiB would take the whole process's
    slot memory: refused, and the controller's own table still fits."""
    tpt.start(1)
    t = tpt.targets[0]
    attacker(tpt, t)
    before = show(t.tgtd)["in use"]["slot_bytes"]
    for _ in range(2):
        alloc = 16 + 16 * 1024
        r = evil(tpt, t, proto.report_slots_cdb(MIB, 1024, alloc), inlen=alloc)
        assert_sense(r, "POOL_EXHAUSTED")
    assert show(t.tgtd)["in use"]["slot_bytes"] == before
    # Within its share it is served.
    alloc = 16 + 16 * 8
    assert evil(tpt, t, proto.report_slots_cdb(MIB, 8, alloc), inlen=alloc).good
    # The controller's table at the largest stripe unit (mode_tpt.c).
    table = tpt.report_slots(t, MIB, 128)
    assert table.count == 128
    assert_refused_once(t, "session_slots", "slot memory per nexus")
    tpt.client.logout(EVIL)
    assert show(t.tgtd)["in use"]["slot_bytes"] == 128 * (MIB + 4096)


def test_pool_share_per_nexus(tpt):
    """Non-FINAL PREP WRITEs hold pool buffers for as long as their group
    lives: one nexus gets at most its share of the pool."""
    tpt.start(1)
    t = tpt.targets[0]
    set_param(t.tgtd, tpt_session_pool_mb=8)
    assert show(t.tgtd)["bounds"]["session_pool_mb"] == 8
    attacker(tpt, t)
    host = tpt.host_buffer("evil", size=MIB)
    for i in range(9):
        xl = proto.xfer_list([host.desc(0, MIB)])
        r = evil(tpt, t, proto.vendor_cdb(proto.PREP_WRITE, i * MBLK, MBLK, 0x100 + i), out=xl)
        if i < 8:
            assert r.good, r
        else:
            assert_sense(r, "POOL_EXHAUSTED")
    # The refused PREP WRITE opened no group.
    assert show(t.tgtd)["in use"]["groups"] == 8
    assert show(t.tgtd)["in use"]["pool_buffers"] == 8
    controller_goes_on_and_evil_leaves_nothing(tpt, t, "session_pool", "pool share per nexus")


def test_pool_exhaustion_is_logged_once_per_nexus(tpt):
    """With its share opened to the whole pool, one nexus can take every
    pool buffer: the next command is told to retry (POOL EXHAUSTED), the
    target says why in one line, and the controller's own commands work
    again once the buffers are back."""
    tpt.start(1)
    t = tpt.targets[0]
    set_param(t.tgtd, tpt_session_pool_mb=65536)
    attacker(tpt, t)
    host = tpt.host_buffer("evil", size=MIB)
    held = 0
    for i in range(200):
        xl = proto.xfer_list([host.desc(0, MIB)])
        r = evil(tpt, t, proto.vendor_cdb(proto.PREP_WRITE, (i % 32) * MBLK, MBLK, 0x100 + i),
                 out=xl)
        if not r.good:
            assert_sense(r, "POOL_EXHAUSTED")
            break
        held += 1
    assert 0 < held < 200
    r = evil(tpt, t, proto.vendor_cdb(proto.PREP_WRITE, 0, MBLK, 0x100 + held + 1),
             out=proto.xfer_list([host.desc(0, MIB)]))
    assert_sense(r, "POOL_EXHAUSTED")
    assert t.tgtd.log().count("datamover pool (tpt_pool_mb=") == 1, t.tgtd.log()[-2000:]
    tpt.client.logout(EVIL)
    assert_nothing_in_use(t)
    controller_writes(tpt, t)


def test_buffered_bytes_per_group(tpt):
    """Non-FINAL PREP READs of one group are records the target keeps:
    at most tpt_group_mb of them per group."""
    tpt.start(1)
    t = tpt.targets[0]
    set_param(t.tgtd, tpt_group_mb=4)
    attacker(tpt, t)
    host = tpt.host_buffer("evil", size=MIB)
    for i in range(4):
        assert prep_read(tpt, t, host, i * MBLK, MBLK, 0x200, session=EVIL).good
    assert_sense(prep_read(tpt, t, host, 4 * MBLK, MBLK, 0x200, session=EVIL), "POOL_EXHAUSTED")
    assert show(t.tgtd)["in use"]["buffered_mb"] == 4
    # The bound is per group: another group, and the controller, go on.
    assert prep_read(tpt, t, host, 8 * MBLK, MBLK, 0x201, session=EVIL).good
    controller_writes(tpt, t)
    assert_refused_once(t, "group_buffered", "buffered bytes per group")
    assert evil(tpt, t, proto.release_cdb(all_groups=True)).good
    assert_nothing_in_use(t)


def test_buffered_bytes_per_nexus(tpt):
    """Spread over many groups, one nexus still keeps at most
    tpt_session_mb; a refused command leaves no group behind."""
    tpt.start(1)
    t = tpt.targets[0]
    set_param(t.tgtd, tpt_session_mb=4)
    attacker(tpt, t)
    host = tpt.host_buffer("evil", size=MIB)
    for i in range(4):
        assert prep_read(tpt, t, host, i * MBLK, MBLK, 0x300 + i, session=EVIL).good
    assert_sense(prep_read(tpt, t, host, 4 * MBLK, MBLK, 0x304, session=EVIL), "POOL_EXHAUSTED")
    use = show(t.tgtd)["in use"]
    assert (use["groups"], use["buffered_mb"]) == (4, 4), use
    controller_goes_on_and_evil_leaves_nothing(tpt, t, "session_buffered", "buffered bytes per nexus")


def test_groups_per_nexus(tpt):
    tpt.start(1)
    t = tpt.targets[0]
    set_param(t.tgtd, tpt_session_groups=8)
    attacker(tpt, t)
    host = tpt.host_buffer("evil", size=BS)
    for g in range(8):
        assert prep_read(tpt, t, host, g, 1, 0x400 + g, session=EVIL).good
    for g in range(8, 10):
        assert_sense(prep_read(tpt, t, host, g, 1, 0x400 + g, session=EVIL), "POOL_EXHAUSTED")
    # A group let go of makes room for another.
    assert evil(tpt, t, proto.release_cdb(0x400)).good
    assert prep_read(tpt, t, host, 9, 1, 0x409, session=EVIL).good
    assert show(t.tgtd)["in use"]["groups"] == 8
    controller_goes_on_and_evil_leaves_nothing(tpt, t, "session_groups", "groups per nexus")


def test_groups_per_process(tpt):
    """The process-wide bound refuses every nexus alike (it bounds tgtd's
    memory, not one nexus's share); the controller's command succeeds once
    the groups are gone, as its retry would."""
    tpt.start(1)
    t = tpt.targets[0]
    set_param(t.tgtd, tpt_groups_max=8)
    attacker(tpt, t)
    host = tpt.host_buffer("evil", size=BS)
    for g in range(8):
        assert prep_read(tpt, t, host, g, 1, 0x600 + g, session=EVIL).good
    data = tpt.host_buffer("ctl", os.urandom(UNIT))
    xl = proto.xfer_list([data.desc(0, UNIT)], result_slot=0)
    cdb = proto.vendor_cdb(proto.XDWRITE_16, 3 * UBLK, UBLK, 0x500, proto.DISABLE_WRITE)
    assert_sense(tpt.cmd(t, cdb, out=xl), "POOL_EXHAUSTED")
    assert show(t.tgtd)["in use"]["groups"] == 8
    assert_refused_once(t, "groups", "groups per process")
    tpt.client.logout(EVIL)
    assert_nothing_in_use(t)
    controller_writes(tpt, t)


def test_controller_retries_a_refused_slot_table(tgtd_factory):
    """A member that refuses the controller's TPT REPORT SLOTS with
    INSUFFICIENT RESOURCES when it comes back is asked again once a second,
    not failed: once it has room it is online again and the array serves
    I/O with it."""
    unit = 64 << 10
    c = cluster.start(tgtd_factory, n=3, unit=unit, member_bytes=16 << 20)
    t = c.targets[1]
    set_param(t, tpt_session_slot_mb=1)
    # Cut the controller's nexus to the member: it reconnects and sets the
    # member up again, slot table included.
    out = t.tgtadm("--lld", "iscsi", "--mode", "conn", "--op", "show", "--tid", 1).stdout
    sid = re.search(r"Session: (\d+)", out).group(1)
    t.tgtadm("--lld", "iscsi", "--mode", "conn", "--op", "delete", "--tid", 1, "--sid", sid,
             "--cid", 0)
    deadline = time.time() + 30
    while "has no room for our slot table yet" not in c.controller.log():
        assert time.time() < deadline, "the controller never asked again"
        time.sleep(0.2)
    time.sleep(2.5)
    assert show(t)["refused"]["session_slots"] >= 2
    assert t.log().count("slot memory per nexus") == 1
    set_param(t, tpt_session_slot_mb=256)
    online = c.controller.log().count("is online as") + 1
    while c.controller.log().count("is online as") < online:
        assert time.time() < deadline, "the member did not come back"
        time.sleep(0.2)
    assert c.controller.log().count("has no room for our slot table yet") == 1
    cl = TptClient(timeout=60)
    cl.start()
    try:
        cl.login("a", c.url)
        cl.clear_unit_attentions("a")
        data = os.urandom(256 << 10)
        cdb = struct.pack(">BBQIBB", 0x8A, 0, 0, len(data) // BS, 0, 0)
        assert cl.command("a", cdb, data=data)["status"] == GOOD
        cdb = struct.pack(">BBQIBB", 0x88, 0, 0, len(data) // BS, 0, 0)
        assert cl.command("a", cdb, inlen=len(data))["data"] == data
    finally:
        cl.close()
