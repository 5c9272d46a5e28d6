"""Weighted passes (docs/protocol.md 3.1, 5.1): a READ PARITY command may
multiply each pass, and its local operand, by a power of 2 in GF(2^8)
before XORing them, which is all a RAID-6 needs from the targets: its Q
parity, Q's read-modify-write, and any two lost blocks back, computed by
our tgtd as targets, driven by hand, checked against this file's own
GF(2^8) arithmetic on the backing files."""
import dataclasses
import os

from tptlib import proto
from tptlib.targets import assert_sense

BS = 512
UNIT = 64 << 10
UBLK = UNIT // BS


def gf_mul(a, b):
    """Multiply in GF(2^8) modulo x^8 + x^4 + x^3 + x^2 + 1 (11Dh)."""
    p = 0
    while b:
        if b & 1:
            p ^= a
        a = (a << 1) ^ 0x11D if a & 0x80 else a << 1
        b >>= 1
    return p


EXP = [1]
while len(EXP) < 255:
    EXP.append(gf_mul(EXP[-1], 2))
LOG = {v: e for e, v in enumerate(EXP)}


def gf_inv(a):
    return EXP[(255 - LOG[a]) % 255]


def gf_div(a, b):
    return gf_mul(a, gf_inv(b))


def scale(block, c):
    return block.translate(bytes(gf_mul(c, x) for x in range(256)))


def xor(*blocks):
    n = 0
    for b in blocks:
        n ^= int.from_bytes(b, "little")
    return n.to_bytes(len(blocks[0]), "little")


def q_parity(data):
    """RAID-6's Q: data block i weighted 2^i (Linux md's, ISA-L's)."""
    return xor(*(scale(b, EXP[i]) for i, b in enumerate(data)))


def two_lost_weights(x, y, survivors):
    """The weights that give data block x back when x and y are lost:
    from P ^ (XOR of surviving data) = Dx ^ Dy and the same for Q,
    Dx = c 2^y P ^ c Q ^ sum of c (2^y ^ 2^i) Di, c = 1 / (2^x ^ 2^y).
    Returns {survivor index: weight, "P": weight, "Q": weight}."""
    c = gf_inv(EXP[x] ^ EXP[y])
    w = {i: gf_mul(c, EXP[y] ^ EXP[i]) for i in survivors}
    w["P"], w["Q"] = gf_mul(c, EXP[y]), c
    return w


def weighted(desc, weight):
    return dataclasses.replace(desc, gf_exp=LOG[weight])


def all_good(results):
    for r in results:
        assert r.good, r


def read_medium(tpt, t, row, group, slot):
    cdb, out = proto.read_medium(row * UBLK, UBLK, group, BS, slot)
    return tpt.send(t, cdb, out=out)


def parity_cdb(opcode, row, group, mode=0):
    return proto.vendor_cdb(opcode, row * UBLK, UBLK, group, mode << proto.PARITY_SHIFT)


def wnd(tpt, t, row, group):
    return tpt.send(t, proto.vendor_cdb(proto.WRITE_NEW_DATA, row * UBLK, UBLK, group))


def seed_raid6_stripe(tpt, row, data_t, pt):
    data = [os.urandom(UNIT) for _ in data_t]
    for t, b in zip(data_t, data):
        t.write_backing(row * UNIT, b)
    pt.write_backing(row * UNIT, xor(*data))
    return data


def test_raid6_q_computed_updated_and_two_units_rebuilt(tpt):
    """Six targets, D0-D3, P, Q.  Q's target computes Q with one COMP BLOCK
    of four passes weighted 2^0..2^3 over the data targets' READ MEDIUM
    exports; a read-modify-write of D2 updates P with the XDWRITE delta as
    it is and Q with the delta weighted 2^2 (PART BLOCK, XOR MEDIUM); two
    lost units (D1 and D3, zeroed) are rebuilt at once, each by one COMP
    BLOCK over D0, D2, P and Q with the weights that solve two erasures."""
    tpt.start(6)
    data_t, pt, qt = tpt.targets[:4], tpt.targets[4], tpt.targets[5]
    row = 3
    data = seed_raid6_stripe(tpt, row, data_t, pt)

    group = 0x6001
    all_good(tpt.wait([read_medium(tpt, t, row, group, 0) for t in data_t]))
    passes = [weighted(tpt.slot_desc(t, 0, UNIT), EXP[i]) for i, t in enumerate(data_t)]
    r = tpt.cmd(qt, parity_cdb(proto.READ_PARITY_COMP_BLOCK, row, group),
                out=proto.xfer_list(passes))
    assert r.good, r
    all_good(tpt.wait([wnd(tpt, qt, row, group)] +
                      [tpt.send(t, proto.release_cdb(group)) for t in data_t]))
    assert qt.read_backing(row * UNIT, UNIT) == q_parity(data)

    # Read-modify-write of D2: XDWRITE leaves old ^ new in slot 0.
    group = 0x6002
    new2 = os.urandom(UNIT)
    host = tpt.host_buffer("new2", new2)
    r = tpt.cmd(data_t[2], proto.vendor_cdb(proto.XDWRITE_16, row * UBLK, UBLK, group,
                                            proto.DISABLE_WRITE),
                out=proto.xfer_list([host.desc(0, UNIT)], result_slot=0))
    assert r.good, r
    delta = tpt.slot_desc(data_t[2], 0, UNIT)
    mode = proto.PARITY_XOR_MEDIUM
    tags = [tpt.send(pt, parity_cdb(proto.READ_PARITY_PART_BLOCK, row, group, mode),
                     out=proto.xfer_list([delta])),
            tpt.send(qt, parity_cdb(proto.READ_PARITY_PART_BLOCK, row, group, mode),
                     out=proto.xfer_list([weighted(delta, EXP[2])]))]
    all_good(tpt.wait(tags))
    all_good(tpt.wait([wnd(tpt, t, row, group) for t in (data_t[2], pt, qt)]))
    data[2] = new2
    assert pt.read_backing(row * UNIT, UNIT) == xor(*data)
    assert qt.read_backing(row * UNIT, UNIT) == q_parity(data)

    # D1 and D3 lost together.
    for t in (data_t[1], data_t[3]):
        t.write_backing(row * UNIT, bytes(UNIT))
    group = 0x6003
    sources = {0: data_t[0], 2: data_t[2], "P": pt, "Q": qt}
    all_good(tpt.wait([read_medium(tpt, t, row, group, 1) for t in sources.values()]))
    tags = []
    for x, y in ((1, 3), (3, 1)):
        w = two_lost_weights(x, y, (0, 2))
        passes = [weighted(tpt.slot_desc(t, 1, UNIT), w[k]) for k, t in sources.items()]
        tags.append(tpt.send(data_t[x], parity_cdb(proto.READ_PARITY_COMP_BLOCK, row, group),
                             out=proto.xfer_list(passes)))
    all_good(tpt.wait(tags))
    all_good(tpt.wait([wnd(tpt, data_t[x], row, group) for x in (1, 3)] +
                      [tpt.send(t, proto.release_cdb(group)) for t in sources.values()]))
    for x in (1, 3):
        assert data_t[x].read_backing(row * UNIT, UNIT) == data[x]


def test_raid6_degraded_reads_with_two_members_gone(tpt):
    """D1's and D3's boxes are killed.  D1 reaches the host in one step:
    D0's target folds its own block, weighted (OPERAND GF EXPONENT, XOR
    MEDIUM), with D2, P and Q passes and SEND RESULT puts it in the host
    buffer.  D3 comes back as a chain at D2's target whose result is
    scaled in place on each XOR GROUP step: (w0 D0 + w2 D2 + wP P) / wQ
    first, then times wQ with Q folded in."""
    tpt.start(6)
    data_t, pt, qt = tpt.targets[:4], tpt.targets[4], tpt.targets[5]
    row = 9
    data = seed_raid6_stripe(tpt, row, data_t, pt)
    qt.write_backing(row * UNIT, q_parity(data))
    for t in (data_t[1], data_t[3]):
        t.tgtd.killed_on_purpose = True
        t.tgtd.kill()
    host = tpt.host_buffer("h", bytes(2 * UNIT))
    mode_medium, mode_group = proto.PARITY_XOR_MEDIUM, proto.PARITY_XOR_GROUP

    group, slot = 0x6101, 2
    w = two_lost_weights(1, 3, (0, 2))
    sources = {2: data_t[2], "P": pt, "Q": qt}
    all_good(tpt.wait([read_medium(tpt, t, row, group, slot) for t in sources.values()]))
    passes = [weighted(tpt.slot_desc(t, slot, UNIT), w[k]) for k, t in sources.items()]
    r = tpt.cmd(data_t[0], parity_cdb(proto.READ_PARITY_PART_TMP, row, group, mode_medium),
                out=proto.xfer_list(passes, operand_gf_exp=LOG[w[0]]))
    assert r.good, r
    cdb, out = proto.send_result(row * UBLK, UBLK, group, [host.desc(0, UNIT)])
    all_good(tpt.wait([tpt.send(data_t[0], cdb, out=out)] +
                      [tpt.send(t, proto.release_cdb(group)) for t in sources.values()]))
    assert host.read(0, UNIT) == data[1]

    group, slot = 0x6102, 3
    w = two_lost_weights(3, 1, (0, 2))
    calc, sources = data_t[2], {0: data_t[0], "P": pt, "Q": qt}
    all_good(tpt.wait([read_medium(tpt, t, row, group, slot) for t in sources.values()]))
    wq = w["Q"]
    steps = [(mode_medium, gf_div(w[2], wq), 0, gf_div(w[0], wq)),
             (mode_group, 1, "P", gf_div(w["P"], wq)),
             (mode_group, wq, "Q", wq)]
    for mode, operand, k, weight in steps:
        src = weighted(tpt.slot_desc(sources[k], slot, UNIT), weight)
        r = tpt.cmd(calc, parity_cdb(proto.READ_PARITY_PART_TMP, row, group, mode),
                    out=proto.xfer_list([src], operand_gf_exp=LOG[operand]))
        assert r.good, (k, r)
    cdb, out = proto.send_result(row * UBLK, UBLK, group, [host.desc(UNIT, UNIT)])
    all_good(tpt.wait([tpt.send(calc, cdb, out=out)] +
                      [tpt.send(t, proto.release_cdb(group)) for t in sources.values()]))
    assert host.read(UNIT, UNIT) == data[3]


def test_weights_are_refused_where_the_protocol_has_none(tpt):
    """5.1: GF EXPONENT FFh, a pass whose pieces are weighted differently,
    a weight in a command that XORs no passes, and an OPERAND GF EXPONENT
    where there is no operand or FFh, each INVALID FIELD IN PARAMETER LIST
    at the byte; the target serves on."""
    tpt.start(2)
    t, src = tpt.targets
    group = 0x6201
    half = [proto.Desc(src.index, UNIT // 2, 1, 0, gf_exp=5),
            proto.Desc(src.index, UNIT // 2, 1, UNIT // 2, gf_exp=5)]
    comp_block = parity_cdb(proto.READ_PARITY_COMP_BLOCK, 1, group)
    part_medium = parity_cdb(proto.READ_PARITY_PART_TMP, 1, group, proto.PARITY_XOR_MEDIUM)
    part_copy = parity_cdb(proto.READ_PARITY_PART_TMP, 1, group, proto.PARITY_COPY)
    prep_write = proto.vendor_cdb(proto.PREP_WRITE, UBLK, UBLK, group, proto.FINAL)
    cases = [
        (comp_block, proto.xfer_list([dataclasses.replace(half[0], gf_exp=255), half[1]]), 16 + 3),
        (comp_block, proto.xfer_list([half[0], dataclasses.replace(half[1], gf_exp=6)]), 16 + 24 + 3),
        (comp_block, proto.xfer_list([half[0], dataclasses.replace(half[1], gf_exp=0)]), 16 + 24 + 3),
        (prep_write, proto.xfer_list(half), 16 + 3),
        (comp_block, proto.xfer_list(half, operand_gf_exp=1), 4),
        (part_copy, proto.xfer_list(half, operand_gf_exp=1), 4),
        (part_medium, proto.xfer_list(half, operand_gf_exp=255), 4),
    ]
    for cdb, out, byte in cases:
        r = tpt.cmd(t, cdb, out=out)
        s = assert_sense(r, "INVALID_PARAM_FIELD")
        assert s.sksv and (s.field_ptr, s.bit, s.in_cdb) == (byte, None, False), (byte, s)
    # The same lists, weighted alike, are taken.
    all_good(tpt.wait([read_medium(tpt, src, 1, group, 0)]))
    r = tpt.cmd(t, part_medium,
                out=proto.xfer_list([weighted(tpt.slot_desc(src, 0, UNIT), 7)], operand_gf_exp=9))
    assert r.good, r
    assert t.tgtd.alive()
    all_good(tpt.wait([tpt.send(x, proto.release_cdb(group)) for x in (t, src)]))
