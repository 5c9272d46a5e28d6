"""Attacks from the storage network on TPT targets (docs/protocol.md,
"Threat model"): a rogue initiator that logs in to a member, a rogue
datamover peer with a forged or replayed hello, a list with a copied array
id.  Each is refused with the documented sense and a log line, the array's
data stays as it was, and the real controller keeps its service."""
import os
import re
import time

import pytest

from tptlib import cluster, proto
from tptlib.targets import ARRAY_ID, CONTROLLER_ID, assert_sense

UNIT = 64 << 10
BS = 512
UBLK = UNIT // BS




def staged_write(tpt, t, row, group, host, session=None):
    xl = proto.xfer_list([host.desc(0, UNIT)], result_slot=proto.SLOT_NONE)
    return tpt.cmd(t, proto.vendor_cdb(proto.XDWRITE_16, row * UBLK, UBLK, group,
                                       proto.DISABLE_WRITE), out=xl, session=session)


def write_new_data(tpt, t, row, group, session=None):
    return tpt.cmd(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, row * UBLK, UBLK, group),
                   session=session)


def start_with_rogue(tpt):
    """One bound target, and a stranger's nexus to it: (target, rogue(cdb,
    out=, inlen=)) sends a command on the stranger's nexus."""
    tpt.start(1)
    t0 = tpt.targets[0]
    tpt.client.login("rogue", t0.tgtd.url(t0.iqn, 1), initiator="iqn.2026-11.org.example:rogue")
    tpt.client.clear_unit_attentions("rogue")

    def rogue(cdb, out=None, inlen=None):
        return tpt.cmd(t0, cdb, out, inlen, session="rogue")
    return t0, rogue


def test_a_member_serves_tpt_commands_only_to_nexuses_with_the_array_key(tpt):
    t0, rogue = start_with_rogue(tpt)
    host = tpt.host_buffer("h", os.urandom(UNIT))
    before = t0.read_backing(0, 4 * UNIT)

    # Nothing of the array's without its key: data-moving commands,
    # slots, releases.
    rogue_host = tpt.host_buffer("evil", b"\xee" * UNIT)
    assert_sense(staged_write(tpt, t0, 0, 7, rogue_host, session="rogue"), "PEER_LIST_CONFLICT")
    assert_sense(write_new_data(tpt, t0, 0, 7, session="rogue"), "PEER_LIST_CONFLICT")
    assert_sense(rogue(proto.report_slots_cdb(UNIT, 4, 16 + 64), inlen=16 + 64),
                 "PEER_LIST_CONFLICT")
    assert_sense(rogue(proto.release_cdb(all_groups=True)), "PEER_LIST_CONFLICT")
    # A list with the copied array id but another key, or another array,
    # is refused and supersedes nobody.
    for array_id, key in ((ARRAY_ID, os.urandom(16)), (ARRAY_ID + 1, proto.ARRAY_KEY)):
        pl = proto.peer_list(array_id, 1000, 0, tpt.peers(), array_key=key)
        assert_sense(rogue(proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl),
                     "PEER_LIST_CONFLICT")
    # Where the datamover listens is no secret.
    assert rogue(proto.setup_cdb(proto.REPORT_ENDPOINT, 32), inlen=32).good

    assert t0.read_backing(0, 4 * UNIT) == before
    log = t0.tgtd.log()
    assert "has not delivered the key of array" in log
    assert "(wrong key): refused" in log
    assert "superseded" not in log

    # The controller's nexus still works.
    assert staged_write(tpt, t0, 1, 0x21, host).good
    assert write_new_data(tpt, t0, 1, 0x21).good
    assert t0.read_backing(UNIT, UNIT) == host.read()

    # Once the controller gives the LU up, another array may take it.
    assert tpt.cmd(t0, proto.release_cdb(all_groups=True, unbind=True)).good
    assert "unbound from array" in t0.tgtd.log()
    pl = proto.peer_list(ARRAY_ID + 1, 1, 0, tpt.peers(), array_key=os.urandom(16))
    assert rogue(proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl).good
    assert_sense(staged_write(tpt, t0, 1, 0x22, host), "PEER_LIST_CONFLICT")


def pr_out_cdb(action, plen=24):
    """PERSISTENT RESERVE OUT, LU scope, type WRITE EXCLUSIVE."""
    return bytes([0x5F, action, 0x01, 0, 0]) + plen.to_bytes(4, "big") + bytes(1)


def test_a_member_refuses_plain_sbc_to_nexuses_without_the_array_key(tpt):
    """Plain reads, writes and reservations of a bound LU are the array's:
    a stranger gets ACCESS DENIED for each (a reservation would not do,
    its key is public), while what an initiator needs to see the LU stays
    open; the operator may open reads (tpt-scrub) or everything."""
    t0, rogue = start_with_rogue(tpt)
    before = t0.read_backing(0, 4 * UNIT)

    evil = b"\xee" * BS
    read16 = proto.sbc16_cdb(0x88, 0, 1)
    write16 = proto.sbc16_cdb(0x8A, 0, 1)
    register_and_ignore = bytes(8) + (0xBAD).to_bytes(8, "big") + bytes(8)
    preempt = (0xBAD).to_bytes(8, "big") + ARRAY_ID.to_bytes(8, "big") + bytes(8)
    refused = [
        (read16, None, BS),
        (write16, evil, None),
        (proto.sbc16_cdb(0x8F, 0, 1), None, None),            # VERIFY(16)
        (proto.sbc16_cdb(0x93, 0, 1), evil, None),            # WRITE SAME(16)
        (proto.sbc16_cdb(0x89, 0, 1), evil * 2, None),        # COMPARE AND WRITE
        (pr_out_cdb(0x06), register_and_ignore, None),  # PR OUT REGISTER AND IGNORE
        (pr_out_cdb(0x04), preempt, None),              # PR OUT PREEMPT
        (bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0]), None, BS),  # READ(10)
    ]
    for cdb, out, inlen in refused:
        assert_sense(rogue(cdb, out=out, inlen=inlen), "ACCESS_DENIED")
    # Seeing the LU reveals nothing of the array's data.
    assert rogue(bytes([0x12, 0, 0, 0, 96, 0]), inlen=96).good          # INQUIRY
    assert rogue(bytes([0x9E, 0x10]) + bytes(8) + (32).to_bytes(4, "big") + bytes(2),
                 inlen=32).good                                          # READ CAPACITY(16)
    assert rogue(bytes(6)).good                                          # TEST UNIT READY
    assert t0.read_backing(0, 4 * UNIT) == before
    assert "without the array's key: refused (tpt_plain_io=refuse)" in t0.tgtd.log()
    show = t0.tgtd.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert f"TPT array: {ARRAY_ID:016x}" in show
    assert f"TPT plain I/O: refuse, refused {len(refused)}" in show

    # The controller's own nexus reads and writes plainly.
    assert tpt.cmd(t0, read16, inlen=BS).good

    def plain_io(value):
        t0.tgtd.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update",
                       "--tid", 1, "--lun", 1, "--params", f"tpt_plain_io={value}")

    plain_io("read")
    r = rogue(read16, inlen=BS)
    assert r.good and r.data == before[:BS]
    assert_sense(rogue(write16, out=evil), "ACCESS_DENIED")
    plain_io("allow")
    assert rogue(write16, out=evil).good
    assert t0.read_backing(0, BS) == evil
    r = t0.tgtd.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update",
                       "--tid", 1, "--lun", 1, "--params", "tpt_plain_io=some", check=False)
    assert r.returncode != 0
    assert "tpt_plain_io=some: expected refuse, read or allow" in t0.tgtd.log()

    # Unbound, the LU is plain tgt whatever the setting.
    plain_io("refuse")
    assert tpt.cmd(t0, proto.release_cdb(all_groups=True, unbind=True)).good
    assert rogue(read16, inlen=BS).good


def test_unbind_needs_release_all(tpt):
    tpt.start(1)
    t0 = tpt.targets[0]
    cdb = bytearray(proto.release_cdb(group=5))
    cdb[1] = proto.RELEASE_UNBIND
    s = assert_sense(tpt.cmd(t0, bytes(cdb)), "INVALID_CDB_FIELD")
    assert s.sksv and (s.field_ptr, s.bit, s.in_cdb) == (1, 1, True), s


def test_datamover_refuses_forged_and_replayed_hellos(tpt):
    tpt.start(2)
    t0, t1 = tpt.targets
    c = tpt.client

    def knock(name, token, counter=None, peer_id=CONTROLLER_ID):
        return c.dm_connect(name, "127.0.0.1", t0.dm_port, token, role="controller",
                            peer_id=peer_id, array_id=ARRAY_ID, counter=counter,
                            check=False, timeout_ms=5000)

    # A legitimate hello, then the same bytes again (what a recording of
    # the wire would give an attacker), then an older one.
    assert knock("first", t0.token, counter=10**18)["ok"]
    c.dm_disconnect("first")
    assert knock("again", t0.token, counter=10**18)["errno_name"] == "ECONNREFUSED"
    assert knock("older", t0.token, counter=10**18 - 1)["errno_name"] == "ECONNREFUSED"
    # Another member's token proves nothing to this one.
    assert knock("wrong", t1.token)["errno_name"] == "ECONNREFUSED"
    # A fresh hello with the token is fine.
    assert knock("fresh", t0.token, counter=10**18 + 1)["ok"]
    log = t0.tgtd.log()
    assert log.count("replayed hello") == 2, log[-3000:]
    assert "refused" in log and t0.tgtd.alive()


def test_a_planted_list_with_a_copied_array_id_gets_no_link_to_the_array(tpt, tgtd_factory):
    """A stranger binds a free LU of the same tgtd with the array's id (not
    its key) and a list naming its own box as peer 1.  The array's nexus on
    the member never uses that box: its links are keyed by token and
    address, and its commands still move data to the real peers."""
    tpt.start(2)
    t0, t1 = tpt.targets
    host = tpt.host_buffer("h", os.urandom(UNIT))
    # A second, free target in t0's tgtd.
    t0.tgtd.new_target(2, "iqn.2026-11.org.tptraid:free")
    t0.tgtd.new_file_lun(2, 1, 8 << 20)
    t0.tgtd.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 2,
                   "--lun", 1, "--params", "tpt=on")
    c = tpt.client
    c.login("stranger", t0.tgtd.url("iqn.2026-11.org.tptraid:free", 1))
    c.clear_unit_attentions("stranger")
    evil_peers = [proto.Peer(0, proto.ROLE_TARGET, t0.dm_port, os.urandom(16)),
                  proto.Peer(1, proto.ROLE_TARGET, tpt.ctrl_port, os.urandom(16))]
    pl = proto.peer_list(ARRAY_ID, 50, 0, evil_peers, array_key=os.urandom(16))
    r = tpt.cmd(t0, proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl, session="stranger")
    assert r.good, r
    assert "superseded" not in t0.tgtd.log()

    # The array's own work between t0 and t1 still goes to the real t1.
    row = 2
    assert tpt.cmd(t1, proto.vendor_cdb(proto.XDWRITE_16, row * UBLK, UBLK, 0x40,
                                        proto.DISABLE_WRITE),
                   out=proto.xfer_list([host.desc(0, UNIT)], result_slot=0)).good
    old = bytes(a ^ b for a, b in zip(t0.read_backing(row * UNIT, UNIT),
                                      t1.read_backing(row * UNIT, UNIT)))
    r = tpt.cmd(t0, proto.vendor_cdb(proto.READ_PARITY_PART_BLOCK, row * UBLK, UBLK, 0x40),
                out=proto.xfer_list([tpt.slot_desc(t1, 0, UNIT)]))
    assert r.good, r
    assert tpt.cmd(t0, proto.vendor_cdb(proto.WRITE_NEW_DATA, row * UBLK, UBLK, 0x40)).good
    want = bytes(a ^ b for a, b in zip(old, host.read()))
    assert t0.read_backing(row * UNIT, UNIT) == want
    assert tpt.cmd(t1, proto.release_cdb(group=0x40)).good


def test_a_binding_with_a_copied_array_id_reads_none_of_the_array_s_buffers(tpt):
    """Scopes (protocol.md 6.4): a stranger binds a free LU of t0's tgtd
    with the array's id, a key of its own and a list that names its own
    datamover peer.  That peer gets in, but into the stranger's scope: the
    array's slot, read with the exact STag the array's nexus got from TPT
    REPORT SLOTS, gives it nothing and costs it the connection, while the
    array's own peers and commands carry on.  A stale STag (a slot table
    replaced) and a guessed one read nothing either."""
    tpt.start(1)
    t0 = tpt.targets[0]
    c = tpt.client
    hdr, row, group = proto.SLOT_HDR_LEN, 3, 0x51
    host = tpt.host_buffer("h", os.urandom(UNIT))
    old = t0.read_backing(row * UNIT, UNIT)
    parity = bytes(a ^ b for a, b in zip(old, host.read()))
    r = tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, row * UBLK, UBLK, group,
                                     proto.DISABLE_WRITE),
                out=proto.xfer_list([host.desc(0, UNIT)], result_slot=0))
    assert r.good, r
    stag, offset = t0.slots.slots[0]
    c.buf("loot", hdr + UNIT)

    def connect(name, token):
        # As the controller: on every list, and allowed to read slots.
        return c.dm_connect(name, "127.0.0.1", t0.dm_port, token, role="controller",
                            peer_id=CONTROLLER_ID, array_id=ARRAY_ID)

    def read(name, stag, offset, length=hdr + UNIT):
        c.buf_write("loot", 0, bytes(hdr + UNIT))
        return c.dm_get(name, "loot", 0, stag, offset, length, check=False, timeout_ms=10000)

    def refused(r):
        # tcp drops the connection, verbs reports a remote access error.
        return not r["ok"] and r.get("errno_name") in ("ECONNRESET", "EACCES")

    # The array's own peer reads the result.
    connect("array", t0.token)
    assert read("array", stag, offset)["ok"]
    slot = proto.parse_slot_header(c.buf_read("loot", 0, hdr))
    assert (slot["magic"], slot["group"]) == (proto.SLOT_MAGIC, group), slot
    assert c.buf_read("loot", hdr, UNIT) == parity

    # The stranger's binding, and its peer, admitted by its list.
    free_iqn = "iqn.2026-11.org.tptraid:free"
    t0.tgtd.new_target(2, free_iqn)
    t0.tgtd.new_file_lun(2, 1, 8 << 20)
    t0.tgtd.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 2,
                   "--lun", 1, "--params", "tpt=on")
    c.login("stranger", t0.tgtd.url(free_iqn, 1))
    c.clear_unit_attentions("stranger")
    stranger_token = os.urandom(16)
    evil_peers = [proto.Peer(0, proto.ROLE_TARGET, t0.dm_port, stranger_token),
                  proto.Peer(CONTROLLER_ID, proto.ROLE_CONTROLLER, tpt.ctrl_port, os.urandom(16))]
    pl = proto.peer_list(ARRAY_ID, 50, 0, evil_peers, array_key=os.urandom(16))
    assert tpt.cmd(t0, proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl,
                   session="stranger").good
    connect("stranger", stranger_token)

    # The exact STag of the array's slot, and a guess, read nothing.
    down, lines = c.stats()["peers_down"], t0.tgtd.log().count("went away")
    for i, (s, o) in enumerate([(stag, offset), (int.from_bytes(os.urandom(8), "big"), offset)]):
        if i:
            connect("stranger", stranger_token)
        r = read("stranger", s, o)
        assert refused(r), r
        assert c.buf_read("loot", 0, hdr + UNIT) == bytes(hdr + UNIT)
    assert c.stats()["peers_down"] == down + 2
    # t0 drops each such connection, and says so.
    assert t0.tgtd.log().count("went away") >= lines + 2, t0.tgtd.log()[-3000:]

    # The array's peer and nexus are unaffected: the slot still reads,
    # and the write completes.
    assert read("array", stag, offset)["ok"]
    assert c.buf_read("loot", hdr, UNIT) == parity
    assert tpt.cmd(t0, proto.vendor_cdb(proto.WRITE_NEW_DATA, row * UBLK, UBLK, group)).good
    assert t0.read_backing(row * UNIT, UNIT) == host.read()
    assert tpt.cmd(t0, proto.release_cdb(group=group)).good

    # A slot table replaced: its STags are stale even to the array's peer,
    # and so is a guess; the new table serves.
    stale = t0.slots
    t0.slots = tpt.report_slots(t0, UNIT, 8)
    for i, (s, o) in enumerate([stale.slots[0], (int.from_bytes(os.urandom(8), "big"), 0)]):
        connect(f"array{i}", t0.token)
        assert refused(read(f"array{i}", s, o))
    assert read("array", *t0.slots.slots[0], length=hdr)["ok"]

    # The array keeps its service with the new table.
    row, group = 4, 0x52
    host2 = tpt.host_buffer("h2", os.urandom(UNIT))
    assert tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, row * UBLK, UBLK, group,
                                        proto.DISABLE_WRITE),
                   out=proto.xfer_list([host2.desc(0, UNIT)], result_slot=0)).good
    assert tpt.cmd(t0, proto.vendor_cdb(proto.WRITE_NEW_DATA, row * UBLK, UBLK, group)).good
    assert t0.read_backing(row * UNIT, UNIT) == host2.read()
    assert t0.read_backing(3 * UNIT, UNIT) == host.read()
    assert "superseded" not in t0.tgtd.log() and t0.tgtd.alive()


def test_a_host_reaches_no_slot_through_the_link_a_target_opened(tpt):
    """A host is the passive end of the link a target opens to move its
    data, but either end of a libfabric connection may start RMA.  The
    target keeps that link in a scope of the host's own (protocol.md 6.4),
    where only the pieces of the host's own transfers are registered, for
    the transfer's time: the exact STag of a slot, read over that link,
    gives the host nothing and costs it the link; the array carries on."""
    from tptlib.client import TptClient

    tpt.start(1)
    t0 = tpt.targets[0]
    hdr, row, group = proto.SLOT_HDR_LEN, 5, 0x61
    data = tpt.host_buffer("d", os.urandom(UNIT))
    r = tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, row * UBLK, UBLK, group,
                                     proto.DISABLE_WRITE),
                out=proto.xfer_list([data.desc(0, UNIT)], result_slot=0))
    assert r.good, r
    stag, offset = t0.slots.slots[0]
    assert tpt.slot_header(t0, 0)["state"] == 1

    host = TptClient(timeout=60)
    host.start()
    try:
        key = os.urandom(16)
        port = host.dm_open("host", listen="127.0.0.1")["port"]
        host.dm_allow(0, key, role="target")
        b = host.buf("hb", hdr + UNIT, access="rw")
        host_id = 0x1000
        tpt.deliver_peer_lists(tpt.peers() + [proto.Peer(host_id, proto.ROLE_HOST, port, key)])
        # t0 reads its blocks into the host's buffer: the link is made.
        r = tpt.cmd(t0, proto.vendor_cdb(proto.PREP_READ, 0, UBLK, 0x62, proto.FINAL),
                    out=proto.xfer_list([proto.Desc(host_id, UNIT, int(b["stag"]),
                                                    int(b["rma_base"]))]))
        assert r.good, r
        assert host.buf_read("hb", 0, UNIT) == t0.read_backing(0, UNIT)
        assert host.stats()["accepted_peers"] == 1
        # The host turns the link around, at the slot's exact STag.
        host.buf_write("hb", 0, bytes(hdr + UNIT))
        r = host.dm_get("accepted-0", "hb", 0, stag, offset, hdr + UNIT, check=False,
                        timeout_ms=10000)
        assert not r["ok"] and r.get("errno_name") in ("ECONNRESET", "EACCES"), r
        assert host.buf_read("hb", 0, hdr + UNIT) == bytes(hdr + UNIT)
        # The array's own peer still reads the slot; t0 serves on.
        assert tpt.slot_header(t0, 0)["state"] == 1
        r = tpt.cmd(t0, proto.vendor_cdb(proto.PREP_READ, UBLK, UBLK, 0x63, proto.FINAL),
                    out=proto.xfer_list([proto.Desc(host_id, UNIT, int(b["stag"]),
                                                    int(b["rma_base"]))]))
        assert r.good, r
        assert host.buf_read("hb", 0, UNIT) == t0.read_backing(UNIT, UNIT)
    finally:
        host.close()


def test_a_box_freed_from_a_lost_controller_serves_another_array(tgtd_factory):
    """The controller of an array is gone for good (kill -9, its state file
    lost): on each box the operator switches TPT mode off and on and clears
    the old superblock (docs/target.md, "Who may drive it"); a new array's
    controller then takes the boxes. Before, the lost controller's
    persistent reservation outlived tpt=off, and the new controller was
    refused every box until each tgtd restarted."""
    old = cluster.start(tgtd_factory, n=3)
    old.controller.killed_on_purpose = True
    old.controller.kill()
    for t, backing in zip(old.targets, old.backings):
        for p in ("tpt=off", "tpt=on"):
            t.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update",
                     "--tid", 1, "--lun", 1, "--params", p)
        assert "its reservation and registrations cleared" in t.log(), t.log()[-2000:]
        # Its superblock binds it only at tgtd's first tpt=on.
        show = t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
        assert "TPT array: none" in show, show
        with open(backing, "r+b") as f:
            f.seek(-(1 << 20), os.SEEK_END)
            f.write(bytes(1 << 20))
    c = tgtd_factory(name="newcontroller")
    c.new_target(1, f"{cluster.IQN}:new")
    c.new_lun(1, 1, str(c.dir / "array.state"), bstype="tptraid",
              bsopts=";".join(["raid=5", "unit=64k", "assume_clean=yes", f"dm={c.host}:0",
                               *(f"member={u}" for u in old.target_urls)]))
    show = c.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert re.search(r"TPT-RAID: .* state optimal", show), show



@pytest.mark.parametrize("mode", ["tpt", "baseline"])
def test_a_restarted_member_stays_bound_to_its_array(tgtd_factory, client, mode):
    """A member's tgtd restarts while its controller is away (both killed):
    its superblock's key check binds the LU again before anyone logs in, so
    a stranger who is first gets ACCESS DENIED for plain reads and writes
    and PEER LIST CONFLICT for a list with the array's id and another key,
    and the box's blocks stay as they were. The controller, back, delivers
    the key and gets its member back. Before, the restarted LU was plain
    tgt until its controller returned (a Baseline array's, always): the
    stranger's write landed in a column of the array's stripes."""
    c = cluster.start(tgtd_factory, n=3, mode=mode)
    client.login("host", c.url)
    client.clear_unit_attentions("host")
    data = os.urandom(256 << 10)
    assert client.command("host", proto.sbc16_cdb(0x8A, 0, len(data) // BS), data=data)["status"] == 0
    array_id = int(re.search(r"array_id ([0-9a-f]+)", c.controller.tgtadm(
        "--lld", "iscsi", "--mode", "target", "--op", "show").stdout).group(1), 16)
    client.logout("host")
    c.controller.killed_on_purpose = True
    c.controller.kill()
    t = c.targets[1]
    t.killed_on_purpose = True
    t.kill()
    t.start(port=t.port)
    t.new_target(1, c.target_urls[1].split("/")[3])
    t.new_lun(1, 1, str(c.backings[1]))
    cluster.tpt_on(t)
    assert (f"LU 1 of target 1 bound to array {array_id:016x} by its superblock"
            in t.log()), t.log()[-2000:]
    show = t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert f"TPT array: {array_id:016x} (from its superblock, waiting for the key)" in show

    with open(c.backings[1], "rb") as f:
        before = f.read()
    client.login("rogue", c.target_urls[1], initiator="iqn.2026-11.org.example:rogue")
    client.clear_unit_attentions("rogue")

    def sense(r):
        return tuple([r["sense"][2] & 0xF, r["sense"][12], r["sense"][13]])

    evil = b"\xee" * BS
    for cdb, out, inlen in ((proto.sbc16_cdb(0x8A, 0, 1), evil, None),
                            (proto.sbc16_cdb(0x88, 0, 1), None, BS)):
        r = client.command("rogue", cdb, data=out, inlen=inlen)
        assert r["status"] == 2 and sense(r) == proto.SENSE["ACCESS_DENIED"], r
    me = proto.Peer(1, proto.ROLE_TARGET, 4420, os.urandom(16))
    for key in (os.urandom(16), bytes(15) + b"\x01"):
        pl = proto.peer_list(array_id, 1, 1, [me], array_key=key)
        r = client.command("rogue", proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), data=pl)
        assert r["status"] == 2 and sense(r) == proto.SENSE["PEER_LIST_CONFLICT"], r
    assert "(wrong key): refused" in t.log()
    client.logout("rogue")
    with open(c.backings[1], "rb") as f:
        assert f.read() == before

    # The array's controller is back: its key matches, the box is its.
    c.controller.start(port=c.controller.port)
    c.controller.new_target(1, c.iqn)
    c.controller.new_lun(1, 1, str(c.controller.dir / "array.state"), bstype="tptraid")
    for _ in range(100):    # the parity of the regions in flight at the kill
        show = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
        if re.search(r"TPT-RAID: .* state optimal", show):
            break
        time.sleep(0.1)
    assert re.search(r"TPT-RAID: .* state optimal", show), show
    assert "member_failures 0" in show, show
    assert "delivered the key its superblock checks" in t.log(), t.log()[-2000:]
    show = t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert f"TPT array: {array_id:016x}\n" in show, show
    client.login("host", c.url)
    client.clear_unit_attentions("host")
    r = client.command("host", proto.sbc16_cdb(0x88, 0, len(data) // BS), inlen=len(data))
    assert r["status"] == 0 and r["data"] == data


def test_a_baseline_array_binds_its_tpt_members_and_serves_a_plain_one(tgtd_factory, client):
    """A Baseline array needs no TPT command of its members, yet binds those
    that are TPT targets with a peer list naming the box alone (member_bind.c):
    a stranger gets ACCESS DENIED there, as on a tpt array's member. A member
    whose LU is not in TPT mode (a plain LU, as on stock tgt) cannot be
    bound: the controller says so and serves it as before, plain I/O open to
    whoever logs in. Stopping the array unbinds the bound ones."""
    c = cluster.start(tgtd_factory, n=3, mode="baseline", create=False)
    plain = c.targets[2]
    plain.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update",
                 "--tid", 1, "--lun", 1, "--params", "tpt=off")
    c.controller.new_lun(1, 1, str(c.controller.dir / "array.state"), bstype="tptraid",
                         bsopts=c.spec)
    show = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert re.search(r"TPT-RAID: .* state optimal", show), show
    assert f"member 2 ({c.target_urls[2]}) is not a TPT target: it is not bound" \
        in c.controller.log(), c.controller.log()[-2000:]
    array_id = int(re.search(r"array_id ([0-9a-f]+)", show).group(1), 16)
    client.login("host", c.url)
    client.clear_unit_attentions("host")
    data = os.urandom(256 << 10)
    assert client.command("host", proto.sbc16_cdb(0x8A, 0, len(data) // BS), data=data)["status"] == 0
    for i, t in enumerate(c.targets):
        client.login(f"rogue{i}", c.target_urls[i], initiator="iqn.2026-11.org.example:rogue")
        client.clear_unit_attentions(f"rogue{i}")
        r = client.command(f"rogue{i}", proto.sbc16_cdb(0x88, 0, 1), inlen=BS)
        show = t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
        if t is plain:
            assert r["status"] == 0, r
            assert "TPT array" not in show, show
        else:
            assert r["status"] == 2 and proto.SENSE["ACCESS_DENIED"] == tuple(
                [r["sense"][2] & 0xF, r["sense"][12], r["sense"][13]]), r
            assert f"TPT array: {array_id:016x}\n" in show, show
            assert "1 peers, this target is peer" in t.log(), t.log()[-2000:]
    r = client.command("host", proto.sbc16_cdb(0x88, 0, len(data) // BS), inlen=len(data))
    assert r["status"] == 0 and r["data"] == data
    client.logout("host")
    c.controller.stop()
    for i, t in enumerate(c.targets[:2]):
        assert f"unbound from array {array_id:016x}" in t.log(), t.log()[-2000:]
        r = client.command(f"rogue{i}", proto.sbc16_cdb(0x88, 0, 1), inlen=BS)
        if r["status"] == 2:        # the reservation's release: UNIT ATTENTION
            r = client.command(f"rogue{i}", proto.sbc16_cdb(0x88, 0, 1), inlen=BS)
        assert r["status"] == 0, r
