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
