"""Our tgtd as a TPT target, driven by hand through tpt-client with bytes
built from docs/protocol.md: the paper's request flows leave exactly the
expected bytes on every backing file, and bad input gets the documented
sense without harming the target."""
import os
import time

from tptlib import proto
from tptlib.targets import ARRAY_ID, assert_sense
from tptlib.tgtd import inline_reads, read_stats

BS = 512



def test_prep_read_multi_block_reads_disk_and_puts_to_host(tpt):
    """... and, where the backing file cannot make a read wait (cached, or
    in memory: usr/tpt_inline_read.h), reads up to 32 KiB of it on the
    event loop."""
    tpt.start(3)
    unit = 64 << 10
    blocks = unit // BS
    # Stripe row 5 of each target holds known data.
    data = [os.urandom(unit) for _ in tpt.targets]
    for t, d in zip(tpt.targets, data):
        t.write_backing(5 * unit, d)
    before = [read_stats(t.tgtd)["inline Copied"] for t in tpt.targets]
    host = tpt.host_buffer("h", size=3 * unit)
    tags = []
    for t in tpt.targets:
        xl = proto.xfer_list([host.desc(t.index * unit, unit)])
        tags.append(tpt.send(t, proto.vendor_cdb(proto.PREP_READ, 5 * blocks, blocks, 7, proto.FINAL), out=xl))
    for r in tpt.wait(tags):
        assert r.good, r
    assert host.read() == b"".join(data)
    # 64 KiB: a worker's read.  4 KiB: the event loop's, where it can.
    t = tpt.targets[0]
    assert read_stats(t.tgtd)["inline Copied"] == before[0]
    xl = proto.xfer_list([host.desc(0, 4096)])
    r = tpt.wait([tpt.send(t, proto.vendor_cdb(proto.PREP_READ, 5 * blocks + 8, 8, 8, proto.FINAL),
                           out=xl)])[0]
    assert r.good, r
    assert host.read()[:4096] == data[0][4096:8192]
    if inline_reads(t.backing):
        assert read_stats(t.tgtd)["inline Copied"] == before[0] + 1



def test_prep_read_steps_over_skipped_bytes(tpt):
    """5.1, 7.1: a PREP READ of three units whose middle one is a skip
    (PEER ID FFFDh) puts the first and third where the host wants them and
    nothing of the second anywhere; a skip first, last, with memory named,
    in a command other than PREP READ and PREP WRITE, or in PREP WRITE not
    of whole blocks is refused with its field pointer."""
    tpt.start(1)
    t0 = tpt.targets[0]
    unit = 64 << 10
    blocks = unit // BS
    rows = [os.urandom(unit) for _ in range(3)]
    for i, d in enumerate(rows):
        t0.write_backing((4 + i) * unit, d)
    marker = b"\x5a" * unit
    host = tpt.host_buffer("h", marker * 3)
    skip = proto.Desc(proto.PEER_NONE, unit)
    xl = proto.xfer_list([host.desc(0, unit), skip, host.desc(2 * unit, unit)])
    read = proto.vendor_cdb(proto.PREP_READ, 4 * blocks, 3 * blocks, 9, proto.FINAL)
    assert tpt.cmd(t0, read, out=xl).good
    assert host.read() == rows[0] + marker + rows[2]

    bad = [
        ([skip, host.desc(0, unit), host.desc(unit, unit)], 16),
        ([host.desc(0, unit), host.desc(unit, unit), skip], 16 + 2 * 24),
    ]
    for descs, byte in bad:
        assert_field(tpt.cmd(t0, read, out=proto.xfer_list(descs)), "INVALID_PARAM_FIELD", byte)
    with_stag = proto.Desc(proto.PEER_NONE, unit, stag=1)
    assert_field(tpt.cmd(t0, read, out=proto.xfer_list([host.desc(0, unit), with_stag,
                                                        host.desc(unit, unit)])),
                 "INVALID_PARAM_FIELD", 16 + 24 + 8)
    write = proto.vendor_cdb(proto.PREP_WRITE, 4 * blocks, 3 * blocks, 10, proto.FINAL)
    assert_field(tpt.cmd(t0, write, out=proto.xfer_list([host.desc(0, unit), proto.Desc(
        proto.PEER_NONE, unit - BS // 2), host.desc(unit, unit + BS // 2)])),
                 "INVALID_PARAM_FIELD", 16 + 24 + 4)
    send = proto.vendor_cdb(proto.SEND_RESULT, 4 * blocks, 3 * blocks, 10)
    assert_field(tpt.cmd(t0, send, out=proto.xfer_list([host.desc(0, unit), skip,
                                                        host.desc(unit, unit)])),
                 "INVALID_PARAM_FIELD", 16 + 24)
    # Still serving, and nothing written.
    assert tpt.cmd(t0, read, out=xl).good
    assert [t0.read_backing((4 + i) * unit, unit) for i in range(3)] == rows

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


def prep_write_stripe(tpt, row, group, data_t, pt):
    """Old data and parity on the stripe at @row, then a FINAL PREP WRITE
    of new random data on every data target, exported into its slot 0
    (7.4 step 1): the new blocks, and the backing files as they were."""
    seed_stripe(tpt, row, data_t, pt)
    new = [os.urandom(UNIT) for _ in data_t]
    host = tpt.host_buffer(f"h{row}", b"".join(new))
    before = snapshot(tpt)
    lba = row * UBLK
    tags = [tpt.send(t, proto.vendor_cdb(proto.PREP_WRITE, lba, UBLK, group, proto.FINAL),
                     out=proto.xfer_list([host.desc(i * UNIT, UNIT)], result_slot=0))
            for i, t in enumerate(data_t)]
    for r in tpt.wait(tags):
        assert r.good, r
    return new, before


def commit_stripe(tpt, row, group, data_t, pt, new):
    """WRITE NEW DATA of the stripe at @row on every target (7.4's last
    step): the new blocks and their parity are on the backing files."""
    tags = [tpt.send(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, row * UBLK, UBLK, group))
            for t in tpt.targets]
    for r in tpt.wait(tags):
        assert r.good, r
    for t, d in zip(data_t, new):
        assert t.read_backing(row * UNIT, UNIT) == d
    assert pt.read_backing(row * UNIT, UNIT) == xor_fast(*new)


def test_full_stripe_write_star_parity(tpt):
    """Full stripe: PREP WRITE on every data target, the calculator (a data
    target) folds the others' blocks in with READ PARITY COMP TMP, the parity
    target copies the result with READ PARITY COMP BLOCK."""
    tpt.start(5)
    data_t, pt = tpt.targets[:4], tpt.targets[4]
    calc = data_t[1]
    row, group = 9, 0x2002
    lba = row * UBLK
    new, before = prep_write_stripe(tpt, row, group, data_t, pt)
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

    commit_stripe(tpt, row, group, data_t, pt, new)


def test_flat_parity_and_xor_passes(tpt):
    """5.1, 7.4 flat: a READ PARITY command's list may cover its range
    several times over, and the target XORs the passes.  The parity
    target's one COMP BLOCK takes the parity of a full stripe from all four
    data targets' exported PREP WRITEs; a PART BLOCK with XOR MEDIUM folds
    two blocks' deltas into the old parity at once; a COMP TMP accumulates
    two more passes into its result in place.  A list that is not whole
    passes, a descriptor across a pass boundary, passes on a command that
    moves data, and more than 31 passes are refused where they are wrong."""
    tpt.start(5)
    data_t, pt = tpt.targets[:4], tpt.targets[4]
    row, group = 11, 0x2102
    lba = row * UBLK
    new, before = prep_write_stripe(tpt, row, group, data_t, pt)
    comp_block = proto.vendor_cdb(proto.READ_PARITY_COMP_BLOCK, lba, UBLK, group)
    r = tpt.cmd(pt, comp_block, out=proto.xfer_list([tpt.slot_desc(t, 0, UNIT) for t in data_t]))
    assert r.good, r
    assert snapshot(tpt) == before
    commit_stripe(tpt, row, group, data_t, pt, new)

    # Read-modify-write of two data blocks, both deltas in one PART BLOCK
    # over the old parity (XOR MEDIUM), and a COMP TMP of two passes
    # accumulating in place on a third target.
    row, group = 12, 0x2103
    lba = row * UBLK
    old, parity = seed_stripe(tpt, row, data_t, pt)
    new2 = [os.urandom(UNIT) for _ in range(2)]
    host2 = tpt.host_buffer("h2", b"".join(new2))
    tags = [tpt.send(t, proto.vendor_cdb(proto.XDWRITE_16, lba, UBLK, group, proto.DISABLE_WRITE),
                     out=proto.xfer_list([host2.desc(i * UNIT, UNIT)], result_slot=0))
            for i, t in enumerate(data_t[:2])]
    for r in tpt.wait(tags):
        assert r.good, r
    r = tpt.cmd(pt, proto.vendor_cdb(proto.READ_PARITY_PART_BLOCK, lba, UBLK, group,
                                     proto.PARITY_XOR_MEDIUM << proto.PARITY_SHIFT),
                out=proto.xfer_list([tpt.slot_desc(t, 0, UNIT) for t in data_t[:2]]))
    assert r.good, r
    tags = [tpt.send(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, lba, UBLK, group)) for t in (*data_t[:2], pt)]
    for r in tpt.wait(tags):
        assert r.good, r
    want = xor_fast(parity, old[0], new2[0], old[1], new2[1])
    assert pt.read_backing(row * UNIT, UNIT) == want
    assert xor_fast(*(t.read_backing(row * UNIT, UNIT) for t in tpt.targets)) == bytes(UNIT)

    acc_group = 0x2104
    for t in data_t[:3]:
        assert tpt.wait([read_medium(tpt, t, row, acc_group, slot=1)])[0].good
    r = tpt.cmd(data_t[2], proto.vendor_cdb(proto.READ_PARITY_COMP_TMP, lba, UBLK, acc_group),
                out=proto.xfer_list([tpt.slot_desc(t, 1, UNIT) for t in data_t[:2]], result_slot=1))
    assert r.good, r
    got = tpt.host_buffer("got", bytes(UNIT))
    r = tpt.cmd(data_t[2], proto.vendor_cdb(proto.SEND_RESULT, lba, UBLK, acc_group),
                out=proto.xfer_list([got.desc(0, UNIT)]))
    assert r.good, r
    assert got.read() == xor_fast(*(t.read_backing(row * UNIT, UNIT) for t in data_t[:3]))
    for t in data_t[:3]:
        assert tpt.cmd(t, proto.release_cdb(acc_group)).good

    # Refusals (5.1): TOTAL LENGTH not whole passes, at byte 8.
    bad_group = 0x2105
    comp_block = proto.vendor_cdb(proto.READ_PARITY_COMP_BLOCK, lba, UBLK, bad_group)
    half = [tpt.slot_desc(data_t[0], 0, UNIT), tpt.slot_desc(data_t[1], 0, UNIT // 2)]
    assert_field(tpt.cmd(pt, comp_block, out=proto.xfer_list(half)), "INVALID_PARAM_FIELD", 8)
    # A descriptor across passes, at its LENGTH.
    across = [tpt.slot_desc(data_t[0], 0, UNIT // 2), proto.Desc(data_t[1].index, UNIT, 1, 0),
              proto.Desc(data_t[2].index, UNIT // 2, 1, 0)]
    assert_field(tpt.cmd(pt, comp_block, out=proto.xfer_list(across)),
                 "INVALID_PARAM_FIELD", 16 + 24 + 4)
    # A command that moves data covers its range once.
    twice = proto.xfer_list([host2.desc(0, UNIT), host2.desc(UNIT, UNIT)], result_slot=0)
    r = tpt.cmd(data_t[0], proto.vendor_cdb(proto.PREP_WRITE, lba, UBLK, bad_group, proto.FINAL),
                out=twice)
    assert_field(r, "INVALID_PARAM_FIELD", 8)
    # At most 31 passes.
    many = [proto.Desc(data_t[0].index, BS, 1, 0)] * 32
    r = tpt.cmd(pt, proto.vendor_cdb(proto.READ_PARITY_COMP_BLOCK, lba, 1, bad_group),
                out=proto.xfer_list(many))
    assert_field(r, "INVALID_PARAM_FIELD", 8)
    assert pt.tgtd.alive()


def test_prep_write_steps_over_the_parity_it_holds(tpt):
    """4.5, 7.4 flat over three stripes of three targets: each target's
    one PREP WRITE covers its rows, a skip over the row it holds the
    parity of, and exports its data units into slots 0 and 1, one per run
    piece; each parity target's COMP BLOCK reads its stripe's blocks from
    those slots and stages the parity in the skipped row, and one WRITE
    NEW DATA per target writes all three rows.  A run may come inline.
    Another PREP WRITE of the group over a run is refused; over the
    skipped row alone it is not."""
    tpt.start(3)
    rows, group = (20, 21, 22), 0x2201
    parity_of = {20: 2, 21: 0, 22: 1}
    new = {(r, t): os.urandom(UNIT) for r in rows for t in range(3) if parity_of[r] != t}
    before = snapshot(tpt)
    host = tpt.host_buffer("hs", b"".join(new[k] for k in sorted(new)))
    where = {k: i * UNIT for i, k in enumerate(sorted(new))}
    lba = rows[0] * UBLK
    tags = []
    for t in tpt.targets:
        descs, inline = [], b""
        for r in rows:
            if parity_of[r] == t.index:
                descs.append(proto.Desc(proto.PEER_NONE, UNIT))
            elif t.index == 0 and r == 22:
                # Target 0's second run travels inline.
                descs.append(proto.Desc(proto.PEER_CONTROLLER, UNIT))
                inline += new[(r, 0)]
            else:
                descs.append(host.desc(where[(r, t.index)], UNIT))
        if descs[0].peer == proto.PEER_NONE:
            descs, first = descs[1:], lba + UBLK
        else:
            first = lba
        if descs[-1].peer == proto.PEER_NONE:
            descs = descs[:-1]
        tags.append(tpt.send(t, proto.vendor_cdb(proto.PREP_WRITE, first, len(descs) * UBLK,
                                                  group, proto.FINAL),
                             out=proto.xfer_list(descs, result_slot=0, inline=inline)))
    for r in tpt.wait(tags):
        assert r.good, r
    # The runs are the group's records, the skipped row is not: in a
    # second group, a PREP WRITE over the skip alone is taken, one over a
    # run is refused.
    t0, other = tpt.targets[0], group + 1
    three = proto.xfer_list([host.desc(0, UNIT), proto.Desc(proto.PEER_NONE, UNIT),
                             host.desc(UNIT, UNIT)])
    assert tpt.cmd(t0, proto.vendor_cdb(proto.PREP_WRITE, lba, 3 * UBLK, other), out=three).good
    one = proto.xfer_list([host.desc(0, UNIT)])
    assert tpt.cmd(t0, proto.vendor_cdb(proto.PREP_WRITE, lba + UBLK, UBLK, other), out=one).good
    assert_sense(tpt.cmd(t0, proto.vendor_cdb(proto.PREP_WRITE, lba + 2 * UBLK, UBLK, other),
                         out=one), "GROUP_IN_USE")
    assert tpt.cmd(t0, proto.release_cdb(other)).good
    # Skips side by side (a RAID-6 member's P and Q units) leave no run
    # between them: rows 24 and 27 by PREP WRITE, 25 and 26 by READ NEW
    # BLOCK, one WRITE NEW DATA over the four.
    rows4 = [os.urandom(UNIT) for _ in range(4)]
    h4 = tpt.host_buffer("h4", b"".join(rows4))
    gap = proto.Desc(proto.PEER_NONE, UNIT)
    assert tpt.cmd(t0, proto.vendor_cdb(proto.PREP_WRITE, 24 * UBLK, 4 * UBLK, other, proto.FINAL),
                   out=proto.xfer_list([h4.desc(0, UNIT), gap, gap, h4.desc(3 * UNIT, UNIT)],
                                       result_slot=4)).good
    assert tpt.cmd(t0, proto.vendor_cdb(proto.READ_NEW_BLOCK, 25 * UBLK, 2 * UBLK, other),
                   out=proto.xfer_list([h4.desc(UNIT, 2 * UNIT)])).good
    assert tpt.cmd(t0, proto.vendor_cdb(proto.WRITE_NEW_DATA, 24 * UBLK, 4 * UBLK, other)).good
    assert t0.read_backing(24 * UNIT, 4 * UNIT) == b"".join(rows4)
    # Target 0's slot 1 holds its row 22 unit, the piece after the skip.
    hdr = tpt.slot_header(t0, 1)
    assert (hdr["lba"], hdr["length"], hdr["group"]) == (22 * UBLK, UNIT, group), hdr
    slot_of = {(r, t): (0 if r == min(x for x in rows if parity_of[x] != t) else 1)
               for (r, t) in new}
    tags = []
    for r in rows:
        pt = tpt.targets[parity_of[r]]
        descs = [tpt.slot_desc(tpt.targets[t], slot_of[(r, t)], UNIT)
                 for t in range(3) if t != parity_of[r]]
        tags.append(tpt.send(pt, proto.vendor_cdb(proto.READ_PARITY_COMP_BLOCK, r * UBLK, UBLK,
                                                   group), out=proto.xfer_list(descs)))
    for r in tpt.wait(tags):
        assert r.good, r
    assert snapshot(tpt) == before
    tags = [tpt.send(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, lba, 3 * UBLK, group))
            for t in tpt.targets]
    for r in tpt.wait(tags):
        assert r.good, r
    for r in rows:
        got = [t.read_backing(r * UNIT, UNIT) for t in tpt.targets]
        for t in range(3):
            if t != parity_of[r]:
                assert got[t] == new[(r, t)]
        assert got[parity_of[r]] == xor_fast(*(new[(r, t)] for t in range(3)
                                               if t != parity_of[r]))
    assert all(t.tgtd.alive() for t in tpt.targets)


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


SLOW_PEER = 200


def start_with_slow_peer(tpt):
    """One target whose peer list also names a host peer (SLOW_PEER) the
    test can stop with SIGSTOP, already connected to the target.  Returns
    the target, the peer's client, and a descriptor of a unit-sized
    buffer of it."""
    from tptlib.client import TptClient

    tpt.start(1, deliver=False)
    t0 = tpt.targets[0]
    slow = TptClient(timeout=60)
    slow.start()
    try:
        token = os.urandom(16)
        port = slow.dm_open("host", peer_id=SLOW_PEER, array_id=0x7470740000000001)["port"]
        slow.dm_allow(0, token, array_id=0x7470740000000001, role="target")
        tpt.deliver_peer_lists(tpt.peers() + [proto.Peer(SLOW_PEER, proto.ROLE_HOST, port, token)])
        t0.slots = tpt.report_slots(t0, UNIT, 4)
        b = slow.buf("data", UNIT)
        slow.buf_write("data", 0, os.urandom(UNIT))
        src = proto.Desc(SLOW_PEER, UNIT, b["stag"], b["rma_base"],
                         proto.XFER_VIRT_ADDR if b["rma_base"] else 0)
        # A first request connects the target to the slow peer.
        assert tpt.cmd(t0, proto.vendor_cdb(proto.XDWRITE_16, 4 * UBLK, UBLK, 0x40, proto.DISABLE_WRITE),
                       out=proto.xfer_list([src], result_slot=0)).good
        assert tpt.cmd(t0, proto.release_cdb(0x40)).good
    except BaseException:
        slow.close()
        raise
    return t0, slow, src


def test_abort_task_mid_transfer_releases_the_request(tpt, tgtd_factory):
    """ABORT TASK of an XDWRITE whose Get_Data is stuck on a stopped passive
    peer: once the peer moves again the command ends, the TMF completes, and
    the request's buffers are gone with nothing written."""
    import signal
    import threading

    t0, slow, src = start_with_slow_peer(tpt)
    try:
        cdb = lambda g: proto.vendor_cdb(proto.XDWRITE_16, 4 * UBLK, UBLK, g, proto.DISABLE_WRITE)
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


def test_a_buffer_released_under_a_command_outlives_it(tpt):
    """protocol.md 8.3, "A buffer in use": a controller in error sends
    WRITE NEW DATA for a range while another command of the same group
    still works with it - a READ PARITY COMP TMP whose operand is the
    range's result, its fetch stuck on a stopped peer, and a SEND RESULT
    of it to that peer.  WRITE NEW DATA writes and ends the range; once
    the peer moves again the COMP TMP finds its operand gone (LBA RANGE
    NOT BUFFERED) and the SEND RESULT delivers what it had.  No freed
    memory is touched (make check SAN=1), every buffer comes back, and
    the group ends as WRITE NEW DATA ended it."""
    import signal
    from test_tpt_bounds import assert_nothing_in_use

    t0, slow, on_slow = start_with_slow_peer(tpt)
    try:
        row, group = 6, 0x42
        new = os.urandom(UNIT)
        host = tpt.host_buffer("h", new)
        assert tpt.cmd(t0, proto.vendor_cdb(proto.READ_NEW_BLOCK, row * UBLK, UBLK, group),
                       out=proto.xfer_list([host.desc(0, UNIT)])).good
        os.kill(slow.proc.pid, signal.SIGSTOP)
        try:
            comp = tpt.send(t0, proto.vendor_cdb(proto.READ_PARITY_COMP_TMP, row * UBLK, UBLK, group),
                            out=proto.xfer_list([on_slow], result_slot=2))
            cdb, out = proto.send_result(row * UBLK, UBLK, group, [on_slow])
            sent = tpt.send(t0, cdb, out=out)
            assert tpt.wait([wnd(tpt, t0, row, group)])[0].good
        finally:
            os.kill(slow.proc.pid, signal.SIGCONT)
        comp, sent = tpt.wait([comp, sent], timeout_ms=20000)
        assert_sense(comp, "GROUP_RANGE_MISSING")
        assert sent.good, sent
        assert slow.buf_read("data", 0, UNIT) == new
        assert t0.read_backing(row * UNIT, UNIT) == new
        assert tpt.slot_header(t0, 2)["state"] == 0
        assert_sense(tpt.wait([wnd(tpt, t0, row, group)])[0], "RELEASED_BY_COMMAND")
        assert_nothing_in_use(t0)
    finally:
        slow.close()


def test_idle_request_released_after_timeout(tpt):
    """A request the controller leaves idle for tpt_group_timeout while it
    goes on sending other commands is released.  While the nexus sends
    nothing at all (its controller cut off, or hung) its requests wait:
    WRITE NEW DATA still finds them when it comes back.  (A nexus is
    active for 3 s after a command: the timeout must be longer here.)"""
    tpt.start(1)
    t0 = tpt.targets[0]
    t0.tgtd.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 1,
                   "--lun", 1, "--params", "tpt_group_timeout=4")
    host = tpt.host_buffer("h", os.urandom(UNIT))
    assert tpt.wait([xdwrite(tpt, t0, 1, 0x4f, host)])[0].good
    time.sleep(6)
    assert tpt.slot_header(t0, 0)["state"] == 1
    assert tpt.wait([wnd(tpt, t0, 1, 0x4f)])[0].good
    assert t0.read_backing(UNIT, UNIT) == host.read(0, UNIT)

    assert tpt.wait([xdwrite(tpt, t0, 2, 0x50, host)])[0].good
    deadline = time.monotonic() + 15
    while tpt.slot_header(t0, 0)["state"] != 0:
        assert time.monotonic() < deadline, "group never timed out"
        # Other commands of the nexus: it is active.
        assert tpt.cmd(t0, proto.setup_cdb(proto.REPORT_ENDPOINT, 32), inlen=32).good
        time.sleep(0.2)
    assert_sense(tpt.wait([wnd(tpt, t0, 2, 0x50)])[0], "RELEASED_BY_TIMEOUT")
    assert t0.read_backing(2 * UNIT, UNIT) == bytes(UNIT)


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


def test_a_newer_nexus_of_the_array_supersedes_the_old_one(tpt):
    """The controller gave up on a nexus (it failed this box, or it
    restarted) and delivers its list through a new one: what the old nexus
    sent and had not yet run - still in the socket of a box that was
    stopped, or retransmitted once a cut link heals - must not touch the
    disk the new nexus is about to repair."""
    tpt.start(1)
    t0 = tpt.targets[0]
    host = tpt.host_buffer("h", os.urandom(UNIT))
    assert tpt.wait([xdwrite(tpt, t0, 1, 0x70, host)])[0].good   # staged, not written
    tpt.client.login("t0-new", t0.tgtd.url(t0.iqn, 1))
    tpt.client.clear_unit_attentions("t0-new")

    def on_new(cdb, out=None, inlen=None):
        return tpt.cmd(t0, cdb, out, inlen, session="t0-new")

    pl = proto.peer_list(ARRAY_ID, 1, 0, tpt.peers())
    assert on_new(proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl).good
    # The old nexus's staged write is gone, and it is refused from now on,
    # a newer list of its own included.
    assert_sense(tpt.wait([wnd(tpt, t0, 1, 0x70)])[0], "PEER_LIST_CONFLICT")
    assert t0.read_backing(UNIT, UNIT) == bytes(UNIT)
    pl = proto.peer_list(ARRAY_ID, 9, 0, tpt.peers())
    assert_sense(tpt.cmd(t0, proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl),
                 "PEER_LIST_CONFLICT")
    # The new nexus does the work.
    alloc = 16 + 16 * 4
    r = on_new(proto.report_slots_cdb(UNIT, 4, alloc), inlen=alloc)
    assert r.good, r
    xl = proto.xfer_list([host.desc(0, UNIT)], result_slot=0)
    assert on_new(proto.vendor_cdb(proto.XDWRITE_16, UBLK, UBLK, 0x71, proto.DISABLE_WRITE),
                  out=xl).good
    assert on_new(proto.vendor_cdb(proto.WRITE_NEW_DATA, UBLK, UBLK, 0x71)).good
    assert t0.read_backing(UNIT, UNIT) == host.read()
    assert "superseded by nexus" in t0.tgtd.log()


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
    assert_sense(tpt.cmd(t0, bytes([0xD0]) + bytes(15)), "INVALID_OPCODE")
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
    ops = list(range(0xC0, 0xD1)) + [proto.XDWRITE_10]
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
            if rnd.random() < 0.2:
                # READ MEDIUM's header-only list, for any opcode.
                blocks = int.from_bytes(cdb[8:11], "big")
                data = proto.header_only_list(blocks * BS, rnd.choice([0, 3, 0xFFFF]))
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


# ---- Degraded mode and rebuild (protocol.md 4.17, 4.18, 7.5) ----

def assert_field(r, name, byte, bit=None, in_cdb=False):
    """The sense named, with a field pointer (SKSV) to @byte (and @bit) of
    the CDB or the parameter list."""
    s = assert_sense(r, name)
    assert s.sksv and (s.field_ptr, s.bit, s.in_cdb) == (byte, bit, in_cdb), s
    return s


def read_medium(tpt, t, row, group, slot=proto.SLOT_NONE, units=1):
    cdb, out = proto.read_medium(row * UBLK, units * UBLK, group, BS, slot)
    return tpt.send(t, cdb, out=out)


def part(tpt, t, opcode, row, group, mode, src):
    return tpt.send(t, proto.vendor_cdb(opcode, row * UBLK, UBLK, group, mode << proto.PARITY_SHIFT),
                    out=proto.xfer_list([src]))


def test_degraded_read_of_a_lost_block(tpt):
    """7.5, degraded READ: T1 of a 5-target stripe is gone.  Every survivor
    but the calculator C (T3) exports its block with READ MEDIUM, C folds
    them into its own block with READ PARITY PART TMP (XOR MEDIUM, then XOR
    GROUP, one per step), and SEND RESULT writes the rebuilt block into the
    host buffer.  Afterwards no group is left."""
    tpt.start(5)
    lost, calc = tpt.targets[1], tpt.targets[3]
    sources = [tpt.targets[0], tpt.targets[2], tpt.targets[4]]
    survivors = [t for t in tpt.targets if t is not lost]
    row, group, slot = 7, 0x7001, 2
    lba = row * UBLK
    old, _ = seed_stripe(tpt, row, tpt.targets[:4], tpt.targets[4])
    lost.tgtd.killed_on_purpose = True
    lost.tgtd.kill()
    # What the host must get, from the survivors' backing files alone.
    want = xor_fast(*(t.read_backing(row * UNIT, UNIT) for t in survivors))
    assert want == old[lost.index]
    before = [t.read_backing(0, 1 << 20) for t in survivors]
    host = tpt.host_buffer("h", bytes(2 * UNIT))

    # Step 1: READ MEDIUM g at every survivor but C, each into a slot,
    # published with the header of 8.2 (C's reads below check them all).
    for r in tpt.wait([read_medium(tpt, t, row, group, slot) for t in sources]):
        assert r.good, r
    h = tpt.slot_header(sources[0], slot)
    assert (h["state"], h["group"], h["lba"], h["length"]) == (1, group, lba, UNIT), h
    # Steps 2-4: at C, XOR MEDIUM on the first slot, XOR GROUP on each next.
    for i, t in enumerate(sources):
        mode = proto.PARITY_XOR_GROUP if i else proto.PARITY_XOR_MEDIUM
        r = tpt.wait([part(tpt, calc, proto.READ_PARITY_PART_TMP, row, group, mode,
                           tpt.slot_desc(t, slot, UNIT))])[0]
        assert r.good, r
    # Step 5: SEND RESULT at C to host(UNIT); TPT RELEASE at the sources.
    cdb, out = proto.send_result(lba, UBLK, group, [host.desc(UNIT, UNIT)])
    tags = [tpt.send(calc, cdb, out=out)] + [tpt.send(t, proto.release_cdb(group)) for t in sources]
    for r in tpt.wait(tags):
        assert r.good, r
    assert host.read(UNIT, UNIT) == want
    assert host.read(0, UNIT) == bytes(UNIT)
    assert [t.read_backing(0, 1 << 20) for t in survivors] == before

    # SEND RESULT released C's group, TPT RELEASE the sources': a later
    # command on it gets the released sense, and the slots are free...
    for t in survivors:
        assert_sense(tpt.cmd(t, cdb, out=out), "RELEASED_BY_COMMAND")
    assert tpt.slot_header(sources[0], slot)["state"] == 0
    # ...for the next request to use (a live one would be TPT SLOT IN USE).
    for r in tpt.wait([read_medium(tpt, t, row, group + 1, slot) for t in sources]):
        assert r.good, r
    r = tpt.wait([part(tpt, calc, proto.READ_PARITY_PART_TMP, row, group + 1, proto.PARITY_COPY,
                       tpt.slot_desc(sources[0], slot, UNIT))])[0]
    assert r.good, r
    for t in survivors:
        assert tpt.cmd(t, proto.release_cdb(group + 1)).good


def test_rebuild_of_a_unit_onto_an_empty_target(tpt):
    """7.5, rebuild: T2's backing block is lost (zeroed).  Every survivor
    exports its block with READ MEDIUM; T2 copies the first (PART TMP COPY),
    folds in the next (PART TMP XOR GROUP) and the last (PART BLOCK XOR
    GROUP), and WRITE NEW DATA puts the rebuilt block on its medium while
    the sources get TPT RELEASE."""
    tpt.start(5)
    rebuilt = tpt.targets[2]
    sources = [t for t in tpt.targets if t is not rebuilt]
    row, group, slot = 11, 0x7101, 5
    old, _ = seed_stripe(tpt, row, tpt.targets[:4], tpt.targets[4])
    rebuilt.write_backing(row * UNIT, bytes(UNIT))
    before = [t.read_backing(0, 1 << 20) for t in sources]

    for r in tpt.wait([read_medium(tpt, t, row, group, slot) for t in sources]):
        assert r.good, r
    for i, t in enumerate(sources):
        last = i == len(sources) - 1
        opcode = proto.READ_PARITY_PART_BLOCK if last else proto.READ_PARITY_PART_TMP
        mode = proto.PARITY_XOR_GROUP if i else proto.PARITY_COPY
        r = tpt.wait([part(tpt, rebuilt, opcode, row, group, mode, tpt.slot_desc(t, slot, UNIT))])[0]
        assert r.good, r
    # Nothing is on the medium before WRITE NEW DATA.
    assert rebuilt.read_backing(row * UNIT, UNIT) == bytes(UNIT)

    tags = [wnd(tpt, rebuilt, row, group)] + [tpt.send(t, proto.release_cdb(group)) for t in sources]
    for r in tpt.wait(tags):
        assert r.good, r
    assert rebuilt.read_backing(row * UNIT, UNIT) == old[rebuilt.index]
    assert [t.read_backing(0, 1 << 20) for t in sources] == before
    assert xor_fast(*(t.read_backing(row * UNIT, UNIT) for t in tpt.targets)) == bytes(UNIT)
    assert_sense(tpt.wait([wnd(tpt, rebuilt, row, group)])[0], "RELEASED_BY_COMMAND")
    assert tpt.slot_header(sources[0], slot)["state"] == 0
    # A reader of a released source slot finds it stale.
    r = tpt.wait([part(tpt, rebuilt, proto.READ_PARITY_PART_TMP, row, group, proto.PARITY_COPY,
                       tpt.slot_desc(sources[1], slot, UNIT))])[0]
    s = assert_sense(r, "SLOT_STALE")
    assert s.information == sources[1].index
    assert tpt.cmd(rebuilt, proto.release_cdb(group)).good


def test_degraded_commands_are_refused_as_documented(tpt):
    """4.17, 4.18, 5.1, 8.2: the list rules of READ MEDIUM and SEND RESULT,
    each refusal with its field pointer; READ MEDIUM never accumulates into
    a live slot but replaces the range's result; SEND RESULT needs one
    result covering exactly its range."""
    tpt.start(2)
    t0, t1 = tpt.targets
    row, group = 3, 0x7201
    lba = row * UBLK
    host = tpt.host_buffer("h", bytes(2 * UNIT))
    medium = proto.vendor_cdb(proto.READ_MEDIUM, lba, UBLK, group)

    # READ MEDIUM: no flags, and its list is the header alone.
    r = tpt.cmd(t0, proto.vendor_cdb(proto.READ_MEDIUM, lba, UBLK, group, proto.FINAL),
                out=proto.header_only_list(UNIT))
    assert_field(r, "INVALID_CDB_FIELD", 1, bit=0, in_cdb=True)
    assert_field(tpt.cmd(t0, medium, out=proto.xfer_list([host.desc(0, UNIT)])),
                 "INVALID_PARAM_FIELD", 0)
    assert_field(tpt.cmd(t0, medium, out=proto.header_only_list(UNIT - BS)),
                 "INVALID_PARAM_FIELD", 8)
    # A RESULT SLOT past the 16 slots reported (8.2); this one gets as far
    # as opening its group, and leaves none behind (8.1).
    r = tpt.cmd(t0, medium, out=proto.header_only_list(UNIT, result_slot=16))
    assert_field(r, "INVALID_PARAM_FIELD", 2)
    # It has no operand to accumulate into: its own live slot is in use.
    assert tpt.wait([read_medium(tpt, t0, row, group + 4, slot=0)])[0].good
    assert_sense(tpt.wait([read_medium(tpt, t0, row, group + 4, slot=0)])[0], "SLOT_IN_USE")
    # A new result for the range replaces it, and its slot is let go (8.2).
    assert tpt.wait([read_medium(tpt, t0, row, group + 4, slot=1)])[0].good
    assert tpt.slot_header(t0, 0)["state"] == 0
    assert tpt.slot_header(t0, 1)["state"] == 1
    assert tpt.cmd(t0, proto.release_cdb(group + 4)).good
    # Every other transfer-list command keeps needing a descriptor.
    r = tpt.cmd(t0, proto.vendor_cdb(proto.READ_PARITY_COMP_BLOCK, lba, UBLK, group),
                out=proto.header_only_list(UNIT))
    assert_field(r, "INVALID_PARAM_FIELD", 0)

    # SEND RESULT: a list like PREP READ's.
    send = proto.vendor_cdb(proto.SEND_RESULT, lba, UBLK, group)
    to_host = proto.xfer_list([host.desc(0, UNIT)])
    assert_field(tpt.cmd(t0, send, out=proto.xfer_list([tpt.slot_desc(t1, 0, UNIT)])),
                 "INVALID_PARAM_FIELD", 16 + 2, bit=1)
    inline = proto.xfer_list([proto.Desc(proto.PEER_CONTROLLER, UNIT)], inline=bytes(UNIT))
    assert_field(tpt.cmd(t0, send, out=inline), "INVALID_PARAM_FIELD", 16)
    assert_field(tpt.cmd(t0, send, out=proto.xfer_list([host.desc(0, UNIT)], result_slot=0)),
                 "INVALID_PARAM_FIELD", 2)
    assert_field(tpt.cmd(t0, send, out=proto.header_only_list(UNIT)), "INVALID_PARAM_FIELD", 0)
    s = assert_sense(tpt.cmd(t0, send, out=proto.xfer_list([proto.Desc(55, UNIT, 1, 0)])),
                     "UNKNOWN_PEER")
    assert (s.info_valid, s.information, s.cmd_specific) == (True, 55, 0)

    # It needs a group, with one result for exactly its range.
    assert_sense(tpt.cmd(t0, send, out=to_host), "UNKNOWN_GROUP")
    assert tpt.wait([read_medium(tpt, t0, row, group, units=2)])[0].good
    assert_sense(tpt.cmd(t0, send, out=to_host), "GROUP_RANGE_MISSING")
    r = tpt.cmd(t0, proto.vendor_cdb(proto.SEND_RESULT, lba + UBLK, UBLK, group), out=to_host)
    assert_sense(r, "GROUP_RANGE_MISSING")
    cdb, out = proto.send_result(lba, 2 * UBLK, group, [host.desc(0, 2 * UNIT)])
    assert tpt.cmd(t0, cdb, out=out).good
    assert host.read() == t0.read_backing(row * UNIT, 2 * UNIT)
    # A read group has no results to send.
    r = tpt.cmd(t0, proto.vendor_cdb(proto.PREP_READ, lba, UBLK, group + 1),
                out=proto.xfer_list([host.desc(0, UNIT)]))
    assert r.good, r
    r = tpt.cmd(t0, proto.vendor_cdb(proto.SEND_RESULT, lba, UBLK, group + 1), out=to_host)
    assert_sense(r, "GROUP_IN_USE")
    assert tpt.cmd(t0, proto.release_cdb(group + 1)).good
    # Two SEND RESULTs of one result at once: one sends it, the other
    # finds none (or, once the first is done, no group).
    assert tpt.wait([read_medium(tpt, t0, row, group + 3)])[0].good
    cdb, out = proto.send_result(lba, UBLK, group + 3, [host.desc(0, UNIT)])
    first, second = tpt.wait([tpt.send(t0, cdb, out=out), tpt.send(t0, cdb, out=out)])
    assert first.good, first
    assert second.status == 2 and second.parsed_sense().code in (
        proto.SENSE["GROUP_RANGE_MISSING"], proto.SENSE["RELEASED_BY_COMMAND"]), second
    assert host.read(0, UNIT) == t0.read_backing(row * UNIT, UNIT)
    assert t0.tgtd.alive()


def test_only_commands_needing_no_state_open_a_group(tpt):
    """8.1: READ PARITY with the group's result as operand (PART with XOR
    GROUP, COMP TMP) does not open a group; a group-opening command that
    fails leaves none behind, so what follows it gets TPT UNKNOWN GROUP
    NUMBER rather than finding an empty group."""
    tpt.start(2)
    t0, t1 = tpt.targets
    row, group = 5, 0x7301
    src = tpt.slot_desc(t1, 0, UNIT)
    for opcode, mode in ((proto.READ_PARITY_PART_TMP, proto.PARITY_XOR_GROUP),
                         (proto.READ_PARITY_PART_BLOCK, proto.PARITY_XOR_GROUP),
                         (proto.READ_PARITY_COMP_TMP, 0)):
        assert_sense(tpt.wait([part(tpt, t0, opcode, row, group, mode, src)])[0], "UNKNOWN_GROUP")
    # Still unknown: none of them opened it.
    assert_sense(tpt.wait([part(tpt, t0, proto.READ_PARITY_COMP_TMP, row, group, 0, src)])[0],
                 "UNKNOWN_GROUP")
    # A READ MEDIUM refused after opening its group (RESULT SLOT past the
    # table) leaves no group.
    cdb, out = proto.read_medium(row * UBLK, UBLK, group + 1, BS, 16)
    assert_field(tpt.cmd(t0, cdb, out=out), "INVALID_PARAM_FIELD", 2)
    assert_sense(tpt.wait([part(tpt, t0, proto.READ_PARITY_COMP_TMP, row, group + 1, 0, src)])[0],
                 "UNKNOWN_GROUP")
    # A group that got something stays after a later command of it fails.
    assert tpt.wait([read_medium(tpt, t0, row, group + 2)])[0].good
    cdb, out = proto.read_medium(row * UBLK, UBLK, group + 2, BS, 16)
    assert_field(tpt.cmd(t0, cdb, out=out), "INVALID_PARAM_FIELD", 2)
    host = tpt.host_buffer("h", bytes(UNIT))
    cdb, out = proto.send_result(row * UBLK, UBLK, group + 2, [host.desc(0, UNIT)])
    assert tpt.cmd(t0, cdb, out=out).good
    assert host.read() == t0.read_backing(row * UNIT, UNIT)
    assert t0.tgtd.alive()


def test_send_result_leaves_staged_data_for_write_new_data(tpt):
    """READ NEW BLOCK's data is both staged and the result (8.2): SEND
    RESULT sends and releases the result, and WRITE NEW DATA still writes
    the staged data and ends the group."""
    tpt.start(1)
    t0 = tpt.targets[0]
    row, group = 5, 0x7401
    new = os.urandom(UNIT)
    src = tpt.host_buffer("src", new)
    dst = tpt.host_buffer("dst", bytes(UNIT))
    r = tpt.cmd(t0, proto.vendor_cdb(proto.READ_NEW_BLOCK, row * UBLK, UBLK, group),
                out=proto.xfer_list([src.desc(0, UNIT)]))
    assert r.good, r
    cdb, out = proto.send_result(row * UBLK, UBLK, group, [dst.desc(0, UNIT)])
    assert tpt.cmd(t0, cdb, out=out).good
    assert dst.read() == new
    # The result is gone, the staged data is not.
    assert_sense(tpt.cmd(t0, cdb, out=out), "GROUP_RANGE_MISSING")
    assert tpt.wait([wnd(tpt, t0, row, group)])[0].good
    assert t0.read_backing(row * UNIT, UNIT) == new
    assert_sense(tpt.cmd(t0, cdb, out=out), "RELEASED_BY_COMMAND")


def test_a_peer_dropped_from_the_list_fails_what_waits_on_it(tpt):
    """6.3 step 6: a peer that takes the TCP connection and then says
    nothing (a hung box; a cut cable looks the same once the connection
    is up) keeps a transfer to it waiting for as long as TCP would.  The
    next generation of the list without that peer drops the link, even
    one still being set up, and the command ends at once in PASSIVE PEER
    UNREACHABLE naming the peer; the result stays for a retry.  The
    other way too: a target dropped from t0's list loses the connection
    it had opened to t0, and cannot open another."""
    import socket
    from tptlib.targets import ARRAY_ID

    tpt.start(2, deliver=False)
    t0, t1 = tpt.targets
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent_sock:
        # Listening and never accepting: the kernel completes the
        # handshake, nobody answers the datamover's hello.
        silent_sock.bind(("127.0.0.1", 0))
        silent_sock.listen(8)
        silent = proto.Peer(201, proto.ROLE_HOST, silent_sock.getsockname()[1], os.urandom(16))
        tpt.deliver_peer_lists(tpt.peers() + [silent])
        t0.slots = tpt.report_slots(t0, UNIT, 4)
        row, group = 3, 0x7401
        assert tpt.wait([read_medium(tpt, t0, row, group)])[0].good

        cdb, out = proto.send_result(row * UBLK, UBLK, group, [proto.Desc(silent.id, UNIT, 1, 0)])
        waiting = tpt.send(t0, cdb, out=out)
        time.sleep(2)
        tpt.deliver_peer_lists(tpt.peers())
        s = assert_sense(tpt.wait([waiting], timeout_ms=5000)[0], "PEER_UNREACHABLE")
        assert (s.info_valid, s.information) == (True, silent.id)
    assert "peer 201 of array" in t0.tgtd.log() and "no longer listed" in t0.tgtd.log()
    host = tpt.host_buffer("h", bytes(UNIT))
    cdb, out = proto.send_result(row * UBLK, UBLK, group, [host.desc(0, UNIT)])
    assert tpt.cmd(t0, cdb, out=out).good

    # t1 reads t0's slot over a connection it opens to t0...
    t1.slots = tpt.report_slots(t1, UNIT, 4)
    slot = 1
    assert tpt.wait([read_medium(tpt, t0, row, group + 1, slot)])[0].good
    pull = tpt.slot_desc(t0, slot, UNIT)
    # (a slot is read under the group number it was published with)
    assert tpt.wait([part(tpt, t1, proto.READ_PARITY_PART_TMP, row, group + 1,
                          proto.PARITY_COPY, pull)])[0].good
    # ...until t0's list no longer names t1.
    tpt.generation += 1
    pl = proto.peer_list(ARRAY_ID, tpt.generation, t0.index, [p for p in tpt.peers()
                                                              if p.id != t1.index])
    assert tpt.cmd(t0, proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl).good
    assert "peer id 1 (role 1" in t0.tgtd.log() and "no longer admitted" in t0.tgtd.log()
    r = tpt.wait([part(tpt, t1, proto.READ_PARITY_PART_TMP, row, group + 1,
                       proto.PARITY_COPY, pull)])[0]
    assert r.status == 2 and r.parsed_sense().code in (proto.SENSE["PEER_UNREACHABLE"],
                                                        proto.SENSE["PEER_REFUSED"]), r


def test_send_result_to_a_lost_passive_side(tpt):
    """A SEND RESULT whose passive side is gone fails with the passive-peer
    sense of 9.1 naming the peer and the descriptor (INFORMATION, CSI): a
    peer whose datamover does not listen, a host buffer released since.
    The result stays: a third SEND RESULT delivers it, piece by piece in
    descriptor order, and ends the group."""
    from tptlib import net
    from tptlib.targets import CONTROLLER_ID

    tpt.start(1, deliver=False)
    t0 = tpt.targets[0]
    gone = proto.Peer(200, proto.ROLE_HOST, net.free_port(), os.urandom(16))
    tpt.deliver_peer_lists(tpt.peers() + [gone])
    t0.slots = tpt.report_slots(t0, UNIT, 4)
    row, group, half = 2, 0x7301, UNIT // 2
    lba = row * UBLK
    t0.write_backing(row * UNIT, os.urandom(UNIT))
    block = t0.read_backing(row * UNIT, UNIT)
    host = tpt.host_buffer("h", bytes(UNIT))
    closed = tpt.host_buffer("closed", bytes(UNIT))
    assert tpt.wait([read_medium(tpt, t0, row, group)])[0].good

    cdb, out = proto.send_result(lba, UBLK, group, [host.desc(0, half), proto.Desc(gone.id, half, 1, 0)])
    s = assert_sense(tpt.cmd(t0, cdb, out=out, timeout_ms=20000), "PEER_UNREACHABLE")
    assert (s.info_valid, s.information, s.cmd_specific) == (True, gone.id, 1)

    cdb, out = proto.send_result(lba, UBLK, group, [closed.desc(0, UNIT)])
    tpt.client.buf_release("closed")
    r = tpt.cmd(t0, cdb, out=out, timeout_ms=20000)
    # A key the passive side no longer knows: STAG REJECTED where the
    # provider says so, TRANSFER FAILED where it only reports an error.
    assert r.status == 2 and r.parsed_sense().code in (proto.SENSE["STAG_REJECTED"],
                                                        proto.SENSE["PEER_XFER_FAILED"]), r
    s = r.parsed_sense()
    assert (s.info_valid, s.information, s.cmd_specific) == (True, CONTROLLER_ID, 0)

    cdb, out = proto.send_result(lba, UBLK, group, [host.desc(half, half), host.desc(0, half)])
    assert tpt.cmd(t0, cdb, out=out).good
    assert host.read() == block[half:] + block[:half]
    assert_sense(tpt.cmd(t0, cdb, out=out), "RELEASED_BY_COMMAND")
