"""Our tgtd as a TPT target, driven by hand through tpt-client with bytes
built from docs/protocol.md: the paper's request flows leave exactly the
expected bytes on every backing file, and bad input gets the documented
sense without harming the target."""
import os

import pytest

from tptlib import proto
from tptlib.targets import TptTargets

BS = 512


@pytest.fixture
def tpt(tgtd_factory):
    h = TptTargets(tgtd_factory)
    yield h
    h.close()


def test_prep_read_multi_block_reads_disk_and_puts_to_host(tpt):
    tpt.start(3)
    unit = 64 << 10
    blocks = unit // BS
    # Stripe row 5 of each target holds known data.
    data = [os.urandom(unit) for _ in tpt.targets]
    for t, d in zip(tpt.targets, data):
        t.write_backing(5 * unit, d)
    host = tpt.host_buffer("h", size=3 * unit)
    tags = []
    for t in tpt.targets:
        xl = proto.xfer_list([host.desc(t.index * unit, unit)])
        tags.append(tpt.send(t, proto.vendor_cdb(proto.PREP_READ, 5 * blocks, blocks, 7, proto.FINAL), out=xl))
    for r in tpt.wait(tags):
        assert r.good, r
    assert host.read() == b"".join(data)


def xor(*blocks):
    out = bytearray(blocks[0])
    for b in blocks[1:]:
        for i, v in enumerate(b):
            out[i] ^= v
    return bytes(out)


def xor_fast(*blocks):
    n = int.from_bytes(blocks[0], "little")
    for b in blocks[1:]:
        n ^= int.from_bytes(b, "little")
    return n.to_bytes(len(blocks[0]), "little")


UNIT = 64 << 10
UBLK = UNIT // BS


def seed_stripe(tpt, row, data_targets, parity_target):
    """Random old data on the data targets' row, its parity on the parity target."""
    old = {t.index: os.urandom(UNIT) for t in data_targets}
    for t in data_targets:
        t.write_backing(row * UNIT, old[t.index])
    parity = xor_fast(*old.values())
    parity_target.write_backing(row * UNIT, parity)
    return old, parity


def snapshot(tpt):
    return [t.read_backing(0, 1 << 20) for t in tpt.targets]


def test_fig4_single_block_write(tpt):
    """Paper Fig. 4: XDWRITE (DISABLE WRITE) on the data target, PRE-FETCH and
    READ PARITY PART BLOCK on the parity target, WRITE NEW DATA on both."""
    tpt.start(5)
    t0, t4 = tpt.targets[0], tpt.targets[4]
    row, group = 3, 0x1001
    old, parity = seed_stripe(tpt, row, tpt.targets[:4], t4)
    new = os.urandom(UNIT)
    host = tpt.host_buffer("h", new)
    before = [t.read_backing(0, 1 << 20) for t in tpt.targets]

    lba = row * UBLK
    xd = tpt.send(t0, proto.vendor_cdb(proto.XDWRITE_16, lba, UBLK, group, proto.DISABLE_WRITE),
                  out=proto.xfer_list([host.desc(0, UNIT)], result_slot=0))
    pf = tpt.send(t4, bytes([proto.PRE_FETCH_16, 0]) + lba.to_bytes(8, "big") + UBLK.to_bytes(4, "big") + bytes(2))
    for r in tpt.wait([xd, pf]):
        assert r.good, r
    rp = tpt.cmd(t4, proto.vendor_cdb(proto.READ_PARITY_PART_BLOCK, lba, UBLK, group,
                                      proto.PARITY_XOR_MEDIUM << proto.PARITY_SHIFT),
                 out=proto.xfer_list([tpt.slot_desc(t0, 0, UNIT)]))
    assert rp.good, rp
    # Write atomicity: nothing reached any disk before WRITE NEW DATA.
    assert [t.read_backing(0, 1 << 20) for t in tpt.targets] == before

    tags = [tpt.send(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, lba, UBLK, group)) for t in (t0, t4)]
    for r in tpt.wait(tags):
        assert r.good, r
    assert t0.read_backing(row * UNIT, UNIT) == new
    assert t4.read_backing(row * UNIT, UNIT) == xor_fast(parity, old[0], new)
    for t in tpt.targets[1:4]:
        assert t.read_backing(row * UNIT, UNIT) == old[t.index]
    # The parity still protects the stripe.
    assert xor_fast(*(t.read_backing(row * UNIT, UNIT) for t in tpt.targets)) == bytes(UNIT)


def test_full_stripe_write_star_parity(tpt):
    """Full stripe: PREP WRITE on every data target, the calculator (a data
    target) folds the others' blocks in with READ PARITY COMP TMP, the parity
    target copies the result with READ PARITY COMP BLOCK."""
    tpt.start(5)
    data_t, pt = tpt.targets[:4], tpt.targets[4]
    calc = data_t[1]
    row, group = 9, 0x2002
    seed_stripe(tpt, row, data_t, pt)
    new = [os.urandom(UNIT) for _ in data_t]
    host = tpt.host_buffer("h", b"".join(new))
    lba = row * UBLK
    before = snapshot(tpt)

    tags = [tpt.send(t, proto.vendor_cdb(proto.PREP_WRITE, lba, UBLK, group, proto.FINAL),
                     out=proto.xfer_list([host.desc(i * UNIT, UNIT)], result_slot=0))
            for i, t in enumerate(data_t)]
    for r in tpt.wait(tags):
        assert r.good, r
    for t in data_t:
        if t is calc:
            continue
        r = tpt.cmd(calc, proto.vendor_cdb(proto.READ_PARITY_COMP_TMP, lba, UBLK, group),
                    out=proto.xfer_list([tpt.slot_desc(t, 0, UNIT)], result_slot=1))
        assert r.good, r
    r = tpt.cmd(pt, proto.vendor_cdb(proto.READ_PARITY_COMP_BLOCK, lba, UBLK, group),
                out=proto.xfer_list([tpt.slot_desc(calc, 1, UNIT)]))
    assert r.good, r
    assert snapshot(tpt) == before

    tags = [tpt.send(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, lba, UBLK, group)) for t in tpt.targets]
    for r in tpt.wait(tags):
        assert r.good, r
    for t, d in zip(data_t, new):
        assert t.read_backing(row * UNIT, UNIT) == d
    assert pt.read_backing(row * UNIT, UNIT) == xor_fast(*new)


def test_prep_after_final_is_refused(tpt):
    """A PREP WRITE or PREP READ naming a group whose FINAL this target has
    seen is TPT GROUP NUMBER IN USE (protocol.md 8.1): the FINAL's transfer
    covers the records it found, so a later one would be written with a
    buffer that was never filled."""
    tpt.start(3)
    t = tpt.targets[0]
    row, group = 4, 0x3003
    lba = row * UBLK
    old = t.read_backing(row * UNIT, UNIT)
    host = tpt.host_buffer("h", os.urandom(2 * UNIT))
    r = tpt.cmd(t, proto.vendor_cdb(proto.PREP_WRITE, lba, UBLK // 2, group, proto.FINAL),
                out=proto.xfer_list([host.desc(0, UNIT // 2)]))
    assert r.good, r
    r = tpt.cmd(t, proto.vendor_cdb(proto.PREP_WRITE, lba + UBLK // 2, UBLK // 2, group),
                out=proto.xfer_list([host.desc(UNIT // 2, UNIT // 2)]))
    assert_sense(r, "GROUP_IN_USE")
    r = tpt.cmd(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, lba, UBLK // 2, group))
    assert r.good, r
    assert t.read_backing(row * UNIT, UNIT) == host.read(0, UNIT // 2) + old[UNIT // 2:]


def xdwrite(tpt, t, row, group, host, slot=0, host_off=0):
    return tpt.send(t, proto.vendor_cdb(proto.XDWRITE_16, row * UBLK, UBLK, group, proto.DISABLE_WRITE),
                    out=proto.xfer_list([host.desc(host_off, UNIT)], result_slot=slot))


def wnd(tpt, t, row, group):
    return tpt.send(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, row * UBLK, UBLK, group))


def assert_sense(r, name):
    assert r.status == 2, f"expected CHECK CONDITION {name}, got {r}"
    s = r.parsed_sense()
    assert s.code == proto.SENSE[name], f"expected {name}, got {s}"
    return s


def test_released_request_leaves_disks_unchanged_and_frees_buffers(tpt):
    tpt.start(2)
    t0, t1 = tpt.targets
    host = tpt.host_buffer("h", os.urandom(UNIT))
    before = snapshot(tpt)
    assert tpt.wait([xdwrite(tpt, t0, 2, 0x31, host)])[0].good
    assert tpt.slot_header(t0, 0)["state"] == 1
    r = tpt.cmd(t1, proto.vendor_cdb(proto.READ_PARITY_PART_BLOCK, 2 * UBLK, UBLK, 0x31),
                out=proto.xfer_list([tpt.slot_desc(t0, 0, UNIT)]))
    assert r.good, r
    # The controller gives up on the request.
    for t in (t0, t1):
        assert tpt.cmd(t, proto.release_cdb(0x31)).good
    assert tpt.slot_header(t0, 0)["state"] == 0
    for t in (t0, t1):
        assert_sense(tpt.wait([wnd(tpt, t, 2, 0x31)])[0], "RELEASED_BY_COMMAND")
    assert snapshot(tpt) == before
    # A reader still holding the released slot's descriptor is refused.
    r = tpt.cmd(t1, proto.vendor_cdb(proto.READ_PARITY_PART_TMP, 2 * UBLK, UBLK, 0x32),
                out=proto.xfer_list([tpt.slot_desc(t0, 0, UNIT)], result_slot=3))
    s = assert_sense(r, "SLOT_STALE")
    assert s.info_valid and s.information == t0.index


def test_abort_task_mid_transfer_releases_the_request(tpt, tgtd_factory):
    """ABORT TASK of an XDWRITE whose Get_Data is stuck on a stopped passive
    peer: once the peer moves again the command ends, the TMF completes, and
    the request's buffers are gone with nothing written."""
    import signal
    import threading
    from tptlib.client import TptClient

    tpt.start(1, deliver=False)
    t0 = tpt.targets[0]
    slow = TptClient(timeout=60)
    slow.start()
    try:
        slow_token = os.urandom(16)
        port = slow.dm_open("host", peer_id=200, array_id=0x7470740000000001)["port"]
        slow.dm_allow(0, slow_token, array_id=0x7470740000000001, role="target")
        peers = tpt.peers() + [proto.Peer(200, proto.ROLE_HOST, port, slow_token)]
        tpt.deliver_peer_lists(peers)
        t0.slots = tpt.report_slots(t0, UNIT, 4)
        b = slow.buf("data", UNIT)
        slow.buf_write("data", 0, os.urandom(UNIT))
        src = proto.Desc(200, UNIT, b["stag"], b["rma_base"], proto.XFER_VIRT_ADDR if b["rma_base"] else 0)
        cdb = lambda g: proto.vendor_cdb(proto.XDWRITE_16, 4 * UBLK, UBLK, g, proto.DISABLE_WRITE)
        # A first request connects the target to the slow peer.
        assert tpt.cmd(t0, cdb(0x40), out=proto.xfer_list([src], result_slot=0)).good
        assert tpt.cmd(t0, proto.release_cdb(0x40)).good
        before = snapshot(tpt)

        os.kill(slow.proc.pid, signal.SIGSTOP)
        resume = threading.Timer(1.0, os.kill, (slow.proc.pid, signal.SIGCONT))
        try:
            tag = tpt.send(t0, cdb(0x41), out=proto.xfer_list([src], result_slot=1))
            resume.start()
            tmf = tpt.client.abort(t0.name, tag, timeout_ms=20000)
        finally:
            resume.join()
            os.kill(slow.proc.pid, signal.SIGCONT)
        # tgt finishes an ABORT TASK of a command already executing when
        # the command ends, and then answers TASK DOES NOT EXIST (stock tgt
        # behaviour); what matters here is what became of the request.
        assert tmf["response"] in (0, 1), tmf
        assert_sense(tpt.wait([wnd(tpt, t0, 4, 0x41)])[0], "RELEASED_BY_TASK_MGMT")
        assert tpt.slot_header(t0, 1)["state"] == 0
        assert snapshot(tpt) == before
    finally:
        slow.close()


def test_idle_request_released_after_timeout(tpt):
    tpt.start(1)
    t0 = tpt.targets[0]
    t0.tgtd.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 1,
                   "--lun", 1, "--params", "tpt_group_timeout=1")
    host = tpt.host_buffer("h", os.urandom(UNIT))
    assert tpt.wait([xdwrite(tpt, t0, 1, 0x50, host)])[0].good
    import time
    deadline = time.monotonic() + 10
    while tpt.slot_header(t0, 0)["state"] != 0:
        assert time.monotonic() < deadline, "group never timed out"
        time.sleep(0.2)
    assert_sense(tpt.wait([wnd(tpt, t0, 1, 0x50)])[0], "RELEASED_BY_TIMEOUT")
    assert t0.read_backing(UNIT, UNIT) == bytes(UNIT)


def test_session_loss_releases_buffers(tpt):
    tpt.start(1)
    t0 = tpt.targets[0]
    host = tpt.host_buffer("h", os.urandom(UNIT))
    assert tpt.wait([xdwrite(tpt, t0, 1, 0x60, host)])[0].good
    old_slot = t0.slots.slots[0]
    tpt.client.drop(t0.name)
    tpt.client.login(t0.name, t0.tgtd.url(t0.iqn, 1))
    tpt.client.clear_unit_attentions(t0.name)
    tpt.deliver_peer_lists()
    # The new session knows nothing of the old one's request...
    assert_sense(tpt.wait([wnd(tpt, t0, 1, 0x60)])[0], "UNKNOWN_GROUP")
    assert t0.read_backing(UNIT, UNIT) == bytes(UNIT)
    # ...and its slots are gone: their STag no longer reaches memory.
    tpt.client.dm_connect("probe", "127.0.0.1", t0.dm_port, t0.token, role="controller",
                          peer_id=100, array_id=0x7470740000000001)
    tpt.client.buf("probe", 64)
    r = tpt.client.dm_get("probe", "probe", 0, old_slot[0], old_slot[1], 64, check=False)
    assert not r["ok"]
    assert t0.tgtd.alive()


def test_malformed_commands_get_documented_sense(tpt):
    tpt.start(2)
    t0 = tpt.targets[0]
    host = tpt.host_buffer("h", os.urandom(UNIT))
    good_xl = proto.xfer_list([host.desc(0, UNIT)], result_slot=0)
    nblocks = tpt.lun_bytes // BS

    # Transfer list shorter than the CDB's transfer length.
    r = tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, 0, 2 * UBLK, 1, proto.DISABLE_WRITE), out=good_xl)
    assert_sense(r, "INVALID_PARAM_FIELD")
    # Truncated transfer list.
    r = tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, 0, UBLK, 1, proto.DISABLE_WRITE), out=good_xl[:30])
    assert_sense(r, "PARAM_LIST_LENGTH")
    # Beyond the LU.
    r = tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, nblocks - 1, UBLK, 1, proto.DISABLE_WRITE), out=good_xl)
    assert_sense(r, "LBA_OUT_OF_RANGE")
    # Unknown passive peer.
    bad = proto.xfer_list([proto.Desc(55, UNIT, 1, 0)], result_slot=0)
    r = tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, 0, UBLK, 1, proto.DISABLE_WRITE), out=bad)
    s = assert_sense(r, "UNKNOWN_PEER")
    assert s.information == 55
    # Unknown group.
    assert_sense(tpt.wait([wnd(tpt, t0, 0, 0xDEAD)])[0], "UNKNOWN_GROUP")
    # DISABLE WRITE clear: the target never writes on XDWRITE.
    r = tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, 0, UBLK, 1), out=good_xl)
    assert_sense(r, "INVALID_CDB_FIELD")
    # A result slot past the reported table.
    r = tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, 0, UBLK, 2, proto.DISABLE_WRITE),
                out=proto.xfer_list([host.desc(0, UNIT)], result_slot=999))
    assert_sense(r, "INVALID_PARAM_FIELD")
    # Unassigned vendor opcode.
    assert_sense(tpt.cmd(t0, bytes([0xCF]) + bytes(15)), "INVALID_OPCODE")
    # Peer list that does not name the receiving target.
    pl = proto.peer_list(1, 99, 7, tpt.peers())
    assert_sense(tpt.cmd(t0, proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl), "INVALID_PARAM_FIELD")
    assert t0.tgtd.alive()
    # And the target still does real work afterwards.
    assert tpt.wait([xdwrite(tpt, t0, 0, 3, host)])[0].good
    assert tpt.wait([wnd(tpt, t0, 0, 3)])[0].good
    assert t0.read_backing(0, UNIT) == host.read()


def test_commands_before_peer_list_are_refused(tpt):
    tpt.start(1, deliver=False)
    t0 = tpt.targets[0]
    host = tpt.host_buffer("h", os.urandom(UNIT))
    r = tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, 0, UBLK, 1, proto.DISABLE_WRITE),
                out=proto.xfer_list([host.desc(0, UNIT)]))
    assert_sense(r, "PEER_LIST_MISSING")
    assert_sense(tpt.cmd(t0, proto.report_slots_cdb(UNIT, 4, 80), inlen=80), "PEER_LIST_MISSING")


def test_random_commands_never_hurt_the_target(tpt):
    """Fuzz the target through iSCSI: random TPT CDBs and data-outs get
    GOOD or CHECK CONDITION, and the target keeps serving."""
    import random
    tpt.start(1)
    t0 = tpt.targets[0]
    host = tpt.host_buffer("h", os.urandom(UNIT))
    rnd = random.Random(1234)
    ops = list(range(0xC0, 0xD0)) + [proto.XDWRITE_10]
    for i in range(300):
        cdb = bytearray(rnd.randbytes(16))
        cdb[0] = rnd.choice(ops)
        if rnd.random() < 0.5:
            cdb[2:8] = bytes(6)              # small LBAs reach deeper code
            cdb[8:11] = rnd.randrange(1, 3 * UBLK).to_bytes(3, "big")
        kind = rnd.random()
        if kind < 0.4:
            descs = [proto.Desc(rnd.choice([0, 1, 100, 0xFFFF, 7]), rnd.choice([512, UNIT, 3]),
                                rnd.getrandbits(64), rnd.getrandbits(16), rnd.getrandbits(2))
                     for _ in range(rnd.randrange(1, 4))]
            data = proto.xfer_list(descs, rnd.choice([0, 1, 0xFFFF, 500]))
            if rnd.random() < 0.3:
                data = data[:rnd.randrange(len(data))] or b"\0"
            r = tpt.cmd(t0, bytes(cdb), out=data)
        elif kind < 0.6:
            r = tpt.cmd(t0, bytes(cdb), inlen=rnd.randrange(1, 4096))
        else:
            r = tpt.cmd(t0, bytes(cdb))
        assert r.status in (0, 2), (i, cdb.hex(), r)
        assert t0.tgtd.alive(), (i, cdb.hex())
    tpt.cmd(t0, proto.release_cdb(all_groups=True))
    assert tpt.wait([xdwrite(tpt, t0, 0, 0x99, host)])[0].good


def test_datamover_admits_only_listed_peers(tpt):
    tpt.start(2)
    t0, t1 = tpt.targets
    c = tpt.client
    array = 0x7470740000000001

    def attempt(name, peer_id, token, role="target", array_id=array):
        return c.dm_connect(name, "127.0.0.1", t0.dm_port, token, role=role, peer_id=peer_id,
                            array_id=array_id, check=False, timeout_ms=5000)

    assert attempt("r1", 7, t0.token)["errno_name"] == "ECONNREFUSED"            # not listed
    assert attempt("r2", 1, os.urandom(16))["errno_name"] == "ECONNREFUSED"       # wrong token
    assert attempt("r3", 1, t0.token, array_id=42)["errno_name"] == "ECONNREFUSED"  # other array
    assert attempt("r4", 1, t0.token, role="controller")["errno_name"] == "ECONNREFUSED"
    assert attempt("ok", 100, t0.token, role="controller")["ok"]
    log = t0.tgtd.log()
    assert log.count("refus") >= 4, log[-3000:]
    assert t0.tgtd.alive()


def test_report_endpoint_needs_no_peer_list(tpt):
    """A controller learns where each target's datamover listens before it
    can build the peer list."""
    tpt.start(2, deliver=False)
    for t in tpt.targets:
        r = tpt.cmd(t, proto.setup_cdb(proto.REPORT_ENDPOINT, 32), inlen=32)
        assert r.good, r
        ep = proto.parse_endpoint(r.data)
        assert ep == dict(version=1, family=proto.AF_IPV4, port=t.dm_port, addr="127.0.0.1",
                          provider="tcp")
    # Allocation length shorter than the report: what fits.
    r = tpt.cmd(tpt.targets[0], proto.setup_cdb(proto.REPORT_ENDPOINT, 4), inlen=4)
    assert r.good and r.data == bytes([1, 0, 0, proto.AF_IPV4])
