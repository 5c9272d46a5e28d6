"""Extended hosts at the wire level (docs/protocol.md 4.14, 4.19, 7.6):
tpt-client plays the host, with a listening datamover and a registered
buffer, against a real controller and five real targets.  The host sends
TPT HOST KEY, then TPT HOST READ/WRITE naming its buffer; the targets
move the data straight to and from it, and the controller counts none of
it as host data it carried.  libtptinitiator's own tests
(test_host_direct.py) run the same path through the library."""
import os
import random

from tptlib import cluster, paper_tables, proto
from tptlib.client import CHECK_CONDITION, GOOD, TptClient
from tptlib.host import Host

from test_controller import array_stats, scrub

BS = 512
MEMBERS = 5
UNIT = 64 << 10
MEMBER_BYTES = 16 << 20


def sense_of(r):
    assert r["ok"] and r["status"] == CHECK_CONDITION, r
    return proto.parse_sense(r["sense"])


def assert_sense(r, name, byte=None, bit=None, in_cdb=None):
    s = sense_of(r)
    assert s.code == proto.SENSE[name], (s, name)
    if byte is not None:
        assert s.sksv and s.field_ptr == byte, s
        assert s.bit == bit, s
    if in_cdb is not None:
        assert s.in_cdb == in_cdb, s


def new_host(client, c, name="h"):
    """An extended host on array c with this suite's geometry."""
    return Host(client, c, name=name, members=MEMBERS, block_size=BS)


def start(tgtd_factory, mode="tpt", extra_opts=()):
    return cluster.start(tgtd_factory, n=MEMBERS, mode=mode, unit=UNIT,
                         member_bytes=MEMBER_BYTES, extra_opts=extra_opts)


def test_host_data_moves_past_the_controller(tgtd_factory, client, report):
    c = start(tgtd_factory)
    h = new_host(client, c)
    r = h.register()
    assert r["ok"] and r["status"] == GOOD, r
    before = array_stats(c)
    rnd = random.Random(13)
    written = {}
    # Partial-stripe, full-stripe and unaligned requests, both ways.
    for lba, blocks in [(0, 1), (5, 300), (1024, 512), (4096 + 7, 2048 - 7)]:
        data = rnd.randbytes(blocks * BS)
        client.buf_write("hbuf", 0, data)
        r = h.io(True, lba, blocks, fua=lba == 0)
        assert r["ok"] and r["status"] == GOOD, r
        written[lba] = data
    moved = sum(len(d) for d in written.values())
    for lba, data in written.items():
        client.buf_write("hbuf", 0, bytes(len(data)))
        r = h.io(False, lba, len(data) // BS)
        assert r["ok"] and r["status"] == GOOD, r
        assert client.buf_read("hbuf", 0, len(data)) == data, lba
        # An unmodified host on the same LUN sees the same blocks.
        r = client.command(h.name, proto.read16_cdb(lba, len(data) // BS), inlen=len(data))
        assert r["status"] == GOOD and r["data"] == data
    after = array_stats(c)
    assert after["direct_in"] - before["direct_in"] == moved
    assert after["direct_out"] - before["direct_out"] == moved
    # Only the proxied READs crossed the controller.
    assert after["host_in"] == before["host_in"]
    assert after["host_out"] - before["host_out"] == moved
    assert after["target_in"] - before["target_in"] == moved
    assert after["target_out"] == before["target_out"]
    assert after["xored"] == 0 and after["failed"] == 0
    # A proxied WRITE, then a direct READ of it.
    data = rnd.randbytes(64 * BS)
    r = client.command(h.name, proto.write16_cdb(2000, 64), data=data)
    assert r["status"] == GOOD
    r = h.io(False, 2000, 64)
    assert r["status"] == GOOD and client.buf_read("hbuf", 0, len(data)) == data
    st = client.stats()
    assert st["accepted_peers"] >= 1 and st["refused_peers"] == 0, st
    out = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert "TPT-RAID extended hosts: 1" in out
    client.logout(h.name)
    stripes, bad, _ = scrub(c)
    assert bad == 0 and stripes > 0
    report(f"host-direct: {moved} bytes each way past the controller; "
           f"{after['pdus'] - before['pdus']} PDUs to targets for them and the proxied reads")


def test_host_commands_are_refused_as_documented(tgtd_factory, client):
    c = start(tgtd_factory)
    h = new_host(client, c)
    stag, base = h.buf["stag"], h.buf["rma_base"]
    # No key yet.
    assert_sense(h.io(False, 0, 8), "HOST_KEY_MISSING")
    r = h.register()
    assert r["status"] == GOOD, r

    def io(cdb, dout):
        return client.command(h.name, cdb, data=dout)

    good_cdb, good_list = proto.host_io(False, 0, 8, BS, stag, base)
    assert io(good_cdb, good_list)["status"] == GOOD
    # CDB: a flag READ does not have, a group number, no blocks, past the end.
    assert_sense(io(proto.vendor_cdb(proto.HOST_READ, 0, 8, flags=proto.FUA), good_list),
                 "INVALID_CDB_FIELD", 1, 3, in_cdb=True)
    assert_sense(io(proto.vendor_cdb(proto.HOST_READ, 0, 8, group=1), good_list),
                 "INVALID_CDB_FIELD", 14, 0, in_cdb=True)
    assert_sense(io(proto.vendor_cdb(proto.HOST_READ, 0, 0), good_list),
                 "INVALID_CDB_FIELD", 8, None, in_cdb=True)
    assert_sense(io(proto.vendor_cdb(proto.HOST_READ, (1 << 40), 8), good_list),
                 "LBA_OUT_OF_RANGE")
    # The list, in 4.19's order.
    d = proto.Desc(proto.PEER_INITIATOR, 8 * BS, stag, base)
    piece = proto.Desc(proto.PEER_INITIATOR, BS, stag, base)
    too_many = proto.xfer_list([piece] * 65)
    assert_sense(io(proto.vendor_cdb(proto.HOST_READ, 0, 65), too_many),
                 "INVALID_PARAM_FIELD", 0, None, in_cdb=False)
    assert_sense(io(good_cdb, proto.xfer_list([])), "INVALID_PARAM_FIELD", 0)
    # A piece of a block and a half: a boundary inside the second block.
    halves = proto.xfer_list([proto.Desc(proto.PEER_INITIATOR, BS, stag, base),
                              proto.Desc(proto.PEER_INITIATOR, BS + BS // 2, stag, base + BS),
                              proto.Desc(proto.PEER_INITIATOR, 5 * BS + BS // 2, stag,
                                         base + 4 * BS)])
    assert_sense(io(good_cdb, halves), "INVALID_PARAM_FIELD", 16 + 24 + 4)
    mixed = proto.xfer_list([proto.Desc(proto.PEER_INITIATOR, 4 * BS, stag, base),
                             proto.Desc(proto.PEER_INITIATOR, 4 * BS, stag, base + 4 * BS,
                                        flags=proto.XFER_VIRT_ADDR)])
    assert_sense(io(good_cdb, mixed), "INVALID_PARAM_FIELD", 16 + 24 + 2, 0)
    other = proto.xfer_list([proto.Desc(proto.PEER_INITIATOR, 4 * BS, stag, base),
                             proto.Desc(3, 4 * BS, stag, base + 4 * BS)])
    assert_sense(io(good_cdb, other), "INVALID_PARAM_FIELD", 16 + 24)
    assert_sense(io(good_cdb, proto.xfer_list([d], result_slot=0)), "INVALID_PARAM_FIELD", 2)
    for peer in (0, 0x1000):
        assert_sense(io(good_cdb, proto.xfer_list([proto.Desc(peer, 8 * BS, stag, base)])),
                     "INVALID_PARAM_FIELD", 16)
    slot = proto.Desc(proto.PEER_INITIATOR, 8 * BS, stag, base, flags=proto.XFER_SLOT)
    assert_sense(io(good_cdb, proto.xfer_list([slot])), "INVALID_PARAM_FIELD", 18, 1)
    assert_sense(io(proto.vendor_cdb(proto.HOST_READ, 0, 16), good_list),
                 "INVALID_PARAM_FIELD", 8)
    # tcp addresses registrations by offset: VIRT ADDR is the wrong kind.
    virt = proto.Desc(proto.PEER_INITIATOR, 8 * BS, stag, base, flags=proto.XFER_VIRT_ADDR)
    assert_sense(io(good_cdb, proto.xfer_list([virt])), "INVALID_PARAM_FIELD", 18, 0)
    # TPT HOST KEY: an all-zero key, a short list.
    bad_key = proto.host_key(h.port, bytes(16))
    assert_sense(client.command(h.name, proto.setup_cdb(proto.HOST_KEY, 40), data=bad_key),
                 "INVALID_PARAM_FIELD", 24)
    assert_sense(client.command(h.name, proto.setup_cdb(proto.HOST_KEY, 40),
                                data=bad_key[:39]), "PARAM_LIST_LENGTH")
    # None of it harmed the array.
    st = array_stats(c)
    assert st["member_failures"] == 0 and st["replans"] == 0


def test_host_buffer_in_pieces(tgtd_factory, client, report):
    """A TPT HOST READ/WRITE may name its blocks in up to 64 pieces of the
    host's memory (4.19), as a host that sends adjacent requests as one
    command does: each piece lands where it says, across units, stripes
    and spans, whichever command of the plan carries it."""
    c = start(tgtd_factory)
    h = new_host(client, c)
    assert h.register()["status"] == GOOD
    rnd = random.Random(29)
    buf_blocks = (1 << 20) // BS
    model = {}

    def cut(blocks, n):
        """@blocks cut into n pieces at random places, laid out in the
        buffer in another order with gaps between them."""
        edges = [0] + sorted(rnd.sample(range(1, blocks), n - 1)) + [blocks]
        sizes = [b - a for a, b in zip(edges, edges[1:])]
        order = list(range(n))
        rnd.shuffle(order)
        gap = (buf_blocks - blocks) // n
        at, place = 0, {}
        for i in order:
            at += rnd.randrange(gap + 1)
            place[i] = at
            at += sizes[i]
        return [(place[i] * BS, sizes[i]) for i in range(n)]

    # A unit is 128 blocks, a stripe's data 512: pieces split refs of
    # XDWRITEs, full-stripe WRITEs and multi-unit PREP READs.
    cases = [(0, 1, 1), (3, 200, 7), (500, 1100, 64), (2048, 1024, 2), (9000, 640, 33)]
    for lba, blocks, n in cases:
        pieces = cut(blocks, n)
        data = rnd.randbytes(blocks * BS)
        at = 0
        for off, size in pieces:
            client.buf_write("hbuf", off, data[at:at + size * BS])
            at += size * BS
        r = h.io_pieces(True, lba, pieces, fua=n == 7)
        assert r["ok"] and r["status"] == GOOD, (lba, r)
        for i in range(blocks):
            model[lba + i] = data[i * BS:(i + 1) * BS]
    for lba, blocks, n in cases:
        want = b"".join(model[lba + i] for i in range(blocks))
        # Read back in other pieces, and in one.
        pieces = cut(blocks, max(1, min(blocks, 64 - n)))
        r = h.io_pieces(False, lba, pieces)
        assert r["ok"] and r["status"] == GOOD, (lba, r)
        at = 0
        for off, size in pieces:
            assert client.buf_read("hbuf", off, size * BS) == want[at:at + size * BS], lba
            at += size * BS
        r = client.command(h.name, proto.read16_cdb(lba, blocks), inlen=blocks * BS)
        assert r["status"] == GOOD and r["data"] == want, lba
    stripes, bad, _ = scrub(c)
    assert bad == 0 and stripes > 0
    st = array_stats(c)
    assert st["failed"] == 0 and st["member_failures"] == 0
    report(f"host buffer in pieces: {len(cases)} writes and reads of 1-64 pieces, "
           f"{sum(b for _, b, _ in cases)} blocks, scrub clean")


def test_baseline_array_has_no_host_commands(tgtd_factory, client):
    """A Baseline controller is in the data path by definition: an
    extended host learns from INVALID COMMAND OPERATION CODE to use
    READ and WRITE."""
    c = start(tgtd_factory, mode="baseline")
    h = new_host(client, c)
    assert_sense(h.register(), "INVALID_OPCODE")
    assert_sense(h.io(False, 0, 8), "INVALID_OPCODE")
    assert_sense(h.io(True, 0, 8), "INVALID_OPCODE")


def test_host_datamover_failure_is_the_hosts_alone(tgtd_factory, client):
    """A revoked STag, or a host that refuses the targets: the host gets
    the passive-peer sense naming itself (INFORMATION FFFEh), no box is
    failed and the request is not retried."""
    c = start(tgtd_factory)
    h = new_host(client, c)
    assert h.register()["status"] == GOOD
    data = os.urandom(128 * BS)
    client.buf_write("hbuf", 0, data)
    assert h.io(True, 256, 128)["status"] == GOOD
    old_stag = h.buf["stag"]
    client.buf_release("hbuf")
    h.buf = client.buf("hbuf", 1 << 20, access="rw")
    assert h.buf["stag"] != old_stag
    for write in (False, True):
        s = sense_of(h.io(write, 256, 128, stag=old_stag))
        assert s.key == 0xB and s.asc in (0x83, 0x84), s
        assert s.info_valid and s.information == proto.PEER_INITIATOR, s
    st = array_stats(c)
    assert st["member_failures"] == 0 and st["replans"] == 0, st
    # The failed WRITE left the blocks as they were; the host goes on.
    r = h.io(False, 256, 128)
    assert r["status"] == GOOD and client.buf_read("hbuf", 0, len(data)) == data
    # A host with a key the targets cannot prove: refused at connect.
    other = TptClient(timeout=60)
    other.start()
    try:
        h2 = new_host(other, c, name="h2")
        h2.key = os.urandom(16)      # registers a key its datamover does not admit
        assert h2.register()["status"] == GOOD
        s = sense_of(h2.io(False, 0, 8))
        assert s.key == 0xB and s.asc in (0x83, 0x84), s
        assert s.info_valid and s.information == proto.PEER_INITIATOR, s
        assert other.stats()["refused_by_allow_list"] >= 1
    finally:
        other.close()
    st = array_stats(c)
    assert st["member_failures"] == 0, st


def test_logout_revokes_the_host(tgtd_factory, client):
    """III-B step 3: the key lives as long as the session.  After logout the
    targets no longer list the host; a new session must register anew."""
    c = start(tgtd_factory)
    h = new_host(client, c)
    assert h.register()["status"] == GOOD
    assert h.io(False, 0, 8)["status"] == GOOD
    assert client.stats()["accepted_peers"] >= 1
    client.logout(h.name)
    show = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert "TPT-RAID extended hosts: 0" in show
    client.login(h.name, c.url)
    client.clear_unit_attentions(h.name)
    assert_sense(h.io(False, 0, 8), "HOST_KEY_MISSING")
    # The target that served the read dropped its link to the host.
    logs = "".join(t.log() for t in c.targets)
    assert "no longer listed: link dropped" in logs


def test_degraded_blocks_are_pushed_to_the_host(tgtd_factory, client):
    """III-D 5: with a box dead, the block it held is rebuilt by a
    surviving target and RMA-written straight into the host's buffer;
    the controller still moves no data and XORs nothing."""
    c = cluster.start(tgtd_factory, n=MEMBERS, mode="tpt", unit=UNIT,
                      member_bytes=MEMBER_BYTES, extra_opts=("fail_timeout=3",))
    h = new_host(client, c)
    assert h.register()["status"] == GOOD
    # Two whole stripes: every member holds a unit of them.
    blocks = 2 * (MEMBERS - 1) * UNIT // BS
    data = os.urandom(blocks * BS)
    client.buf_write("hbuf", 0, data)
    assert h.io(True, 0, blocks)["status"] == GOOD
    c.targets[1].killed_on_purpose = True
    c.targets[1].kill()
    before = array_stats(c)
    client.buf_write("hbuf", 0, bytes(len(data)))
    r = h.io(False, 0, blocks)
    assert r["status"] == GOOD, r
    assert client.buf_read("hbuf", 0, len(data)) == data
    after = array_stats(c)
    assert after["member_failures"] == 1 and after["degraded_spans"] > before["degraded_spans"]
    assert after["direct_out"] - before["direct_out"] == len(data)
    assert after["host_out"] == before["host_out"] and after["target_in"] == before["target_in"]
    assert after["xored"] == 0 and after["failed"] == 0
    # Writes go on degraded too, and read back.
    new = os.urandom(UNIT)
    client.buf_write("hbuf", 0, new)
    assert h.io(True, 3 * UNIT // BS, UNIT // BS)["status"] == GOOD
    client.buf_write("hbuf", 0, bytes(UNIT))
    assert h.io(False, 3 * UNIT // BS, UNIT // BS)["status"] == GOOD
    assert client.buf_read("hbuf", 0, UNIT) == new


def test_table_i_for_a_direct_host(tgtd_factory, client, report):
    """The paper's Tables I and II for an extended host, N = 5, from the
    controller's counters (tptlib.paper_tables): a single-block READ is one
    PREP READ and one Put_Data by a target, the controller moving no block;
    a single-block WRITE is the read-modify-write of 7.2 (XDWRITE,
    PRE-FETCH, READ PARITY PART BLOCK, two WRITE NEW DATA) with two
    one-sided transfers; a full-stripe WRITE moves each data block once,
    from the host, and N-1 between targets.  A block is a striping unit.
    The array sends PRE-FETCH as the paper does (prefetch=yes; without it
    the write is one command less, test_controller checks that) and
    gathers a full stripe's parity in the paper's star (parity_gather=star;
    flat, which auto takes at this unit, is N-2 commands less, 2N+1, which
    test_tpt_plan checks)."""
    c = start(tgtd_factory, extra_opts=("prefetch=yes", "parity_gather=star"))
    h = new_host(client, c)
    assert h.register()["status"] == GOOD
    client.buf_write("hbuf", 0, os.urandom(1 << 20))

    def run(write, lba, blocks):
        before = array_stats(c)
        r = h.io(write, lba, blocks)
        assert r["status"] == GOOD, r
        after = array_stats(c)
        return {k: after[k] - before[k] for k in after}

    unit_blocks = UNIT // BS
    stripe_blocks = (MEMBERS - 1) * unit_blocks
    # Warm the targets' links to the host: a first transfer connects.
    assert h.io(False, 0, stripe_blocks)["status"] == GOOD
    want = paper_tables.expected("direct", MEMBERS)
    rows = []
    for name, lba, blocks in [("single-block READ", 3 * unit_blocks, unit_blocks),
                              ("single-block WRITE", 3 * unit_blocks, unit_blocks),
                              ("full-stripe READ", 0, stripe_blocks),
                              ("full-stripe WRITE", 0, stripe_blocks)]:
        write = name.endswith("WRITE")
        d = run(write, lba, blocks)
        assert d["direct_in" if write else "direct_out"] == blocks * BS, (name, d)
        assert d["xored"] == 0, (name, d)
        got = paper_tables.measured(d, 1, UNIT)
        for table in ("blocks", "ops"):
            for entity, value in got[table].items():
                assert value == want[table][entity][name], (name, table, entity, got, d)
        rows.append(f"{name}: controller moved 0 blocks, sent {d['pdus']} commands, "
                    f"targets started {d['rma_ops']} transfers")
    report("Table I/II, direct host, N=5: " + "; ".join(rows))
