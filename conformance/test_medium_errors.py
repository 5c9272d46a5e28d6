"""A member that cannot read a block (a disk's latent sector error).

A real disk loses a sector now and then: a READ of it fails with MEDIUM
ERROR, UNRECOVERED READ ERROR, and the sector's data is gone until it is
written again (the disk then remaps it).  The array must serve such a
block from the other members, and write it back to the member from them,
as Linux md does: left unreadable, one later box loss makes it data loss.

The targets here run with tptlib.faults.BadSectors (test/fault/
bad_sectors.c): reads of the ranges a test adds fail with EIO, and what
they held is overwritten with random bytes, until something writes them.
"""
import os
import re
import subprocess
import time

import pytest

from tptlib import paths, proto
from tptlib.client import GOOD
from tptlib.faults import BadSectors
from test_failures import (CHECK_CONDITION, MEDIUM_ERROR, MEMBER_BYTES, UNIT,  # noqa: F401
                           array_state, assemble, check_all, check_figures, counters, kill,
                           members, mode, restart_target, scrub, set_param, show, start, wait_log,
                           wait_state)

N = 5
BLOCKS = UNIT // 512


def wait_counter(c, name, at_least, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        k = counters(c)
        if k[name] >= at_least:
            return k
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} {k[name]}, not {at_least}, after {timeout} s:\n"
                                 + show(c))
        time.sleep(0.1)


def locate(stripe, data_index, n=N):
    """(member position, byte offset in its backing file) of a RAID-5
    data unit: left-symmetric, parity of stripe s on member n - 1 - s % n."""
    parity = n - 1 - stripe % n
    return (parity + 1 + data_index) % n, stripe * UNIT


def lba(stripe, data_index=0, n=N):
    return (stripe * (n - 1) + data_index) * BLOCKS


def retried_quietly(c):
    """Until a recovery stopped by a unit it cannot get has tried again
    (every 5 s), meeting the member's lost sector once more: that retry
    logs no line of its own - the stop said what it could not read."""
    mark = len(c.controller.log())
    wait_counter(c, "medium_errors", counters(c)["medium_errors"] + 1)
    again = c.controller.log()[mark:]
    assert not re.search(r"member \d+: .*failed|cannot read its units", again), again


class Array:
    """A RAID-5 of N targets whose disks can lose sectors, a host logged
    in, and stripes 0-7 written with random bytes."""
    STRIPES = 8

    def __init__(self, tgtd_factory, client, mode, workdir, spares=0, opts=(), **kw):
        self.bad = BadSectors(workdir)
        self.c = start(tgtd_factory, mode, n=N, spares=spares, target_env=self.bad.env(),
                       extra_opts=opts, **kw)
        self.client = client
        client.login("a", self.c.url)
        client.clear_unit_attentions("a")
        self.data = os.urandom(self.STRIPES * (N - 1) * UNIT)
        assert self.write(0, self.data)["status"] == GOOD

    def write(self, at, data):
        return self.client.command("a", proto.write16_cdb(at, len(data) // 512), data=data)

    def read(self, at, blocks):
        return host_read(self.client, at, blocks)

    def expect(self, at, blocks):
        return self.data[at * 512:(at + blocks) * 512]

    def lose_sectors(self, stripe, data_index, offset=0, length=4096):
        """Bytes [offset, offset + length) of a data unit unreadable on
        its member.  Returns that member's position."""
        pos, at = locate(stripe, data_index)
        self.bad.add(self.c.backings[pos], at + offset, length)
        return pos

    def member_bytes(self, stripe, data_index):
        pos, at = locate(stripe, data_index)
        with open(self.c.backings[pos], "rb") as f:
            f.seek(at)
            return f.read(UNIT)


def level_array(tgtd_factory, client, workdir, mode, n, raid, nbytes, spares=0):
    """A RAID-`raid` array of `n` targets whose disks can lose sectors, a
    host logged in, and its first `nbytes` written with random bytes:
    (the cluster, its BadSectors, those bytes)."""
    bad = BadSectors(workdir)
    c = start(tgtd_factory, mode, n=n, raid=raid, spares=spares, target_env=bad.env())
    client.login("a", c.url)
    client.clear_unit_attentions("a")
    data = os.urandom(nbytes)
    assert client.command("a", proto.write16_cdb(0, len(data) // 512),
                          data=data)["status"] == GOOD
    return c, bad, data


def host_read(client, at, blocks):
    return client.command("a", proto.read16_cdb(at, blocks), inlen=blocks * 512)


def test_unreadable_block_is_served_and_rewritten(tgtd_factory, client, mode, workdir, report):
    """A host READ over a block its member cannot read gets the right
    bytes (from the other members), and the block is written back to the
    member: its backing file holds the data again, a second read needs
    no reconstruction, and a box lost afterwards loses nothing."""
    a = Array(tgtd_factory, client, mode, workdir)
    before = counters(a.c)
    pos = a.lose_sectors(2, 1, offset=8192, length=4096)
    assert a.member_bytes(2, 1) != a.expect(lba(2, 1), BLOCKS)
    r = a.read(lba(2), (N - 1) * BLOCKS)
    assert r["status"] == GOOD, r
    assert r["data"] == a.expect(lba(2), (N - 1) * BLOCKS)
    repaired = wait_counter(a.c, "medium_repairs", before["medium_repairs"] + 1)
    assert repaired["medium_errors"] == before["medium_errors"] + 1, repaired
    assert a.member_bytes(2, 1) == a.expect(lba(2, 1), BLOCKS)
    assert re.search(r"position \d could not read for stripes 2-2: writing its units there "
                     r"back from the other members", a.c.controller.log())
    r = a.read(lba(2), (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.expect(lba(2), (N - 1) * BLOCKS)
    assert counters(a.c)["medium_errors"] == repaired["medium_errors"]
    assert members(a.c)[pos][1] == "up"
    scrub(a.c)
    # Left unreadable, this would lose the unit: two of stripe 2's five.
    other = locate(2, 0)[0]
    kill(a.c.targets[other])
    wait_state(a.c, {"degraded"}, timeout=30)
    r = a.read(lba(2), (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.expect(lba(2), (N - 1) * BLOCKS)
    report(f"{mode}: a 4 KiB read error on member {pos}: the host READ served, the unit "
           f"written back ({repaired['medium_repairs'] - before['medium_repairs']} stripe), "
           f"read again without an error, and read with member {other} lost too")


def test_direct_host_reads_an_unreadable_block(tgtd_factory, client, workdir, report):
    """The same for an extended host (libtptinitiator, tpt-dd --direct
    on): the targets rebuild the block straight into its memory, no host
    byte crosses the controller, and the unit is written back."""
    from test_host_direct import read_region
    a = Array(tgtd_factory, client, "tpt", workdir)
    pos = a.lose_sectors(2, 1, offset=8192, length=4096)
    before = counters(a.c)
    got = read_region(a.c, workdir / "direct", len(a.data))
    assert got == a.data
    k = wait_counter(a.c, "medium_repairs", before["medium_repairs"] + 1)
    assert k["medium_errors"] == before["medium_errors"] + 1, k
    assert k["host_out"] == before["host_out"] and k["direct_out"] > before["direct_out"], k
    assert a.member_bytes(2, 1) == a.expect(lba(2, 1), BLOCKS)
    report(f"direct host: a READ over member {pos}'s lost sector served into its memory, "
           f"the unit written back, host_out unchanged")


def test_write_over_an_unreadable_block(tgtd_factory, client, mode, workdir, report):
    """A small WRITE reads the old bytes it replaces (read-modify-write):
    where its member cannot read them, the stripe's units there are
    written back from the others first and the WRITE planned again, so
    the host gets GOOD, the member stays, and the stripe's parity is
    right.  Before, the member was failed for it and the array rebuilt a
    whole disk for a sector.  The parity's own member too."""
    a = Array(tgtd_factory, client, mode, workdir)
    before = counters(a.c)
    data_pos = a.lose_sectors(3, 2, offset=0, length=4096)
    parity_pos = 4 - 5 % N
    a.bad.add(a.c.backings[parity_pos], 5 * UNIT + 4096, 4096)
    new = [os.urandom(4096), os.urandom(4096)]
    assert a.write(lba(3, 2), new[0])["status"] == GOOD
    assert a.write(lba(5, 1) + 8, new[1])["status"] == GOOD
    k = wait_counter(a.c, "medium_repairs", before["medium_repairs"] + 2)
    assert k["medium_errors"] == before["medium_errors"] + 2, k
    assert k["member_failures"] == before["member_failures"], show(a.c)
    assert array_state(a.c) == "optimal"
    assert {m[1] for m in members(a.c).values()} == {"up"}
    r = a.read(lba(3, 2), 8)
    assert r["status"] == GOOD and r["data"] == new[0]
    r = a.read(lba(5, 1) + 8, 8)
    assert r["status"] == GOOD and r["data"] == new[1]
    scrub(a.c)
    report(f"{mode}: 4 KiB writes over an unreadable data sector (member {data_pos}) and "
           f"an unreadable parity sector (member {parity_pos}): GOOD, both written back, "
           f"no member failed, parity right")


def test_check_writes_back_what_it_cannot_read(tgtd_factory, client, mode, workdir, report):
    """check=yes (a scrub) over sectors no host has read since they were
    lost: each is written back from the others, and the check ends
    completed with no mismatch and no member failed.  Before, the first
    such read failed its member."""
    a = Array(tgtd_factory, client, mode, workdir)
    before = counters(a.c)
    lost = [a.lose_sectors(1, 0), a.lose_sectors(4, 3, offset=UNIT - 512, length=512),
            a.lose_sectors(6, 2, offset=20480)]
    fig = check_all(a.c)
    assert fig[0] == "last" and fig[1] == fig[2] and fig[3] == 0 and fig[4] == "completed", fig
    k = counters(a.c)
    assert k["medium_repairs"] - before["medium_repairs"] >= 3, k
    assert k["member_failures"] == before["member_failures"], show(a.c)
    assert {m[1] for m in members(a.c).values()} == {"up"}
    for s, i in ((1, 0), (4, 3), (6, 2)):
        assert a.member_bytes(s, i) == a.expect(lba(s, i), BLOCKS), (s, i)
    scrub(a.c)
    report(f"{mode}: check=yes over 3 lost sectors (members {sorted(set(lost))}): "
           f"{k['medium_errors'] - before['medium_errors']} read errors, each written back, "
           f"{fig[1]} stripes checked, 0 mismatches, no member failed")


def test_check_goes_on_over_a_stripe_it_cannot_read(tgtd_factory, client, mode, workdir,
                                                    report):
    """Two members' units of one RAID-5 stripe unreadable: the parity
    gives one back, not two, so that stripe's blocks are lost until a
    write covers them.  A check goes over its batch again a stripe at a
    time, counts that one stripe unread (unreadable_stripes, and the end
    line) and goes on to the last stripe: a lost sector further on is
    still written back, and no member is failed.  Before, the check stopped there ("Input/output
    error"), leaving every stripe after it unchecked."""
    a = Array(tgtd_factory, client, mode, workdir)
    before = counters(a.c)
    lost = sorted({a.lose_sectors(1, 0), a.lose_sectors(1, 2, offset=16384)})
    later = a.lose_sectors(40, 1, offset=4096)
    fig = check_all(a.c)
    assert fig[0] == "last" and fig[1] == fig[2] and fig[4] == "completed", \
        (fig, [ln for ln in a.c.controller.log().splitlines() if "check" in ln or "read" in ln])
    # Gone over again a stripe at a time: only stripe 1 is unread.
    assert "TPT-RAID check: unreadable_stripes 1\n" in show(a.c), show(a.c)
    log = a.c.controller.log()
    assert ("check: stripe 1 not checked: units unreadable on more positions than the "
            "parity gives back" in log), log[-3000:]
    assert "1 not read (units lost on more positions" in log, log[-3000:]
    k = counters(a.c)
    assert k["member_failures"] == before["member_failures"], show(a.c)
    assert array_state(a.c) == "optimal" and {v[1] for v in members(a.c).values()} == {"up"}
    assert a.member_bytes(40, 1) == bytes(UNIT)
    r = a.read(lba(1), BLOCKS)
    assert r["status"] == CHECK_CONDITION and proto.parse_sense(r["sense"]).key == MEDIUM_ERROR
    # A host write over the stripe gives its blocks back: the next check
    # reads everything.
    new = os.urandom((N - 1) * UNIT)
    assert a.write(lba(1), new)["status"] == GOOD
    fig = check_all(a.c)
    assert fig[1] == fig[2] and fig[3] == 0 and fig[4] == "completed", fig
    assert "unreadable_stripes" not in show(a.c)
    report(f"{mode}: check=yes over a RAID-5 stripe with lost sectors on members {lost}: "
           f"that stripe counted unread, the check completed ({fig[2]} stripes), "
           f"member {later}'s lost sector further on written back, no member failed")


def test_check_stopped_by_a_crash_keeps_what_it_could_not_read(tgtd_factory, client, mode,
                                                              workdir, report):
    """kill -9 of the controller during a slow check that has met a
    stripe it cannot read (two members' units lost) and one further on:
    the state file keeps the unread count with where the check got to
    (check FROM MISMATCHES UNREADABLE), and the check resumed by the next
    start counts both stripes, each once.  Before, the count was lost with
    the restart, and a batch gone over a stripe at a time held the kept
    point back while later batches ended ahead of it: the state file
    stopped following the check."""
    a = Array(tgtd_factory, client, mode, workdir, member_bytes=2 * MEMBER_BYTES)
    for stripe in (1, 460):
        a.lose_sectors(stripe, 0)
        a.lose_sectors(stripe, 2, offset=16384)
    state = a.c.controller.dir / "array.state"
    set_param(a.c, "rebuild_rate=1")
    set_param(a.c, "check=yes")
    deadline = time.monotonic() + 60
    while not (m := re.search(r"^check (\d+) (\d+) (\d+)$", state.read_text(), re.M)):
        assert time.monotonic() < deadline, (state.read_text(), show(a.c))
        time.sleep(0.2)
    kill(a.c.controller)
    kept, mismatched, unread = map(int, m.groups())
    assert 1 < kept < 460 and (mismatched, unread) == (0, 1), m.group(0)
    a.c.controller.start(port=a.c.controller.port)
    a.c.controller.new_target(1, a.c.iqn)
    a.c.controller.new_lun(1, 1, str(state), bstype="tptraid")
    wait_state(a.c, {"optimal"}, timeout=30)
    set_param(a.c, "rebuild_rate=0")
    deadline = time.monotonic() + 60
    while (fig := check_figures(a.c)) is None or fig[0] == "running":
        assert time.monotonic() < deadline, show(a.c)
        time.sleep(0.2)
    assert fig[1] == fig[2] and fig[3] == 0 and fig[4] == "completed", (fig, show(a.c))
    assert "TPT-RAID check: unreadable_stripes 2\n" in show(a.c), show(a.c)
    log = a.c.controller.log()
    assert re.search(rf"check completed: {fig[2]} of {fig[2]} stripes checked in [\d.]+ s "
                     rf"\(from stripe {kept} on, after a restart\), 2 not read", log), \
        log[-3000:]
    assert counters(a.c)["member_failures"] == 0, show(a.c)
    report(f"{mode}: controller killed {kept} of {fig[2]} stripes into a check that could not "
           f"read stripe 1; the state file kept the count, the resumed check counted stripes "
           f"1 and 460 unread, once each")


@pytest.mark.parametrize("raid,n", [(1, 3), (6, 6)])
def test_check_writes_back_on_other_levels(tgtd_factory, client, workdir, raid, n, report):
    """The same on a mirror of three and a RAID-6: sectors lost on two
    members, a check reads every copy or unit, and writes each back from
    the others: the members' bytes are as before, no member failed."""
    c, bad, data = level_array(tgtd_factory, client, workdir, "tpt", n, raid, 4 << 20)
    lost = {0: 3 * UNIT + 512, 1: 5 * UNIT + 8192}
    held = {}
    for m, at in lost.items():
        with open(c.backings[m], "rb") as f:
            f.seek(at)
            held[m] = f.read(4096)
        bad.add(c.backings[m], at, 4096)
    before = counters(c)
    fig = check_all(c)
    assert fig[3] == 0 and fig[4] == "completed", fig
    k = counters(c)
    assert k["medium_errors"] > before["medium_errors"], k
    assert k["member_failures"] == before["member_failures"], show(c)
    for m, at in lost.items():
        with open(c.backings[m], "rb") as f:
            f.seek(at)
            assert f.read(4096) == held[m], m
    r = host_read(client, 0, len(data) // 512)
    assert r["status"] == GOOD and r["data"] == data
    report(f"RAID-{raid} of {n}: check=yes over sectors lost on two members: "
           f"{k['medium_errors'] - before['medium_errors']} read errors, written back, "
           f"no member failed")


def test_unreadable_block_with_a_box_lost(tgtd_factory, client, mode, workdir, report):
    """A member lost, and a sector another member of the same stripe
    cannot read: that stripe has two units unknown, and what needs them
    gets MEDIUM ERROR at once (never wrong bytes, never a wait), the
    member with the lost sector stays, and the array stays degraded; the
    rest of the stripe and of the array reads right."""
    a = Array(tgtd_factory, client, mode, workdir)
    gone = locate(2, 0)[0]
    kill(a.c.targets[gone])
    wait_state(a.c, {"degraded"}, timeout=30)
    pos = a.lose_sectors(2, 1, offset=8192, length=4096)
    t0 = time.monotonic()
    for i in (0, 1):
        r = a.read(lba(2, i), BLOCKS)
        assert r["status"] == CHECK_CONDITION, (i, r["status"])
        assert proto.parse_sense(r["sense"]).key == MEDIUM_ERROR, r
    r = a.write(lba(2, 1) + 16, os.urandom(4096))
    assert r["status"] == CHECK_CONDITION and proto.parse_sense(r["sense"]).key == MEDIUM_ERROR
    took = time.monotonic() - t0
    for i in (2, 3):
        r = a.read(lba(2, i), BLOCKS)
        assert r["status"] == GOOD and r["data"] == a.expect(lba(2, i), BLOCKS), i
    r = a.read(lba(3), 5 * (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.expect(lba(3), 5 * (N - 1) * BLOCKS)
    assert array_state(a.c) == "degraded", show(a.c)
    assert members(a.c)[pos][1] == "up", show(a.c)
    assert took < 10, took
    report(f"{mode}: member {gone} lost and a sector of member {pos} in the same stripe: "
           f"its two units MEDIUM ERROR in {took:.1f} s (a WRITE too), member {pos} kept, "
           f"the rest right")


def test_read_error_says_which_block_it_could_not_read(tgtd_factory, client, mode, workdir,
                                                       report):
    """Two members' units of stripe 34 unreadable: a READ of stripes 0-39
    gets MEDIUM ERROR, UNRECOVERED READ ERROR with the first block it
    lost in the sense INFORMATION (VALID set), and every stripe before
    34: the residual counts only stripes 34-39.  So Linux's sd completes
    the blocks before the lost one and fails the rest, as it does for a
    disk that reports the sector it could not read.  Before, the host got
    no INFORMATION, and a residual of 0 with the whole buffer sent, what
    the array had not read there included: whatever that memory held
    before, another command's bytes.  A READ that starts in the stripe
    gets no data at all."""
    a = Array(tgtd_factory, client, mode, workdir)
    lost = sorted({a.lose_sectors(34, 0), a.lose_sectors(34, 2)})
    stripe_bytes = (N - 1) * UNIT
    for first, stripes in ((0, 40), (33, 2), (34, 1)):
        r = a.read(lba(first), stripes * (N - 1) * BLOCKS)
        assert r["status"] == CHECK_CONDITION, (first, r["status"])
        sense = proto.parse_sense(r["sense"])
        assert (sense.key, sense.asc, sense.ascq) == (MEDIUM_ERROR, 0x11, 0x00), sense
        assert sense.info_valid and sense.information == lba(34, 0), (first, sense)
        unread = (first + stripes - 34) * stripe_bytes
        assert (r["residual_kind"], r["residual"]) == ("underflow", unread), (first, r)
    r = a.read(lba(34, 1), BLOCKS)
    assert r["status"] == GOOD and r["data"] == bytes(UNIT), r["status"]
    r = a.read(lba(30), 4 * (N - 1) * BLOCKS)
    assert r["status"] == GOOD, r
    # The extended host: its TPT HOST READ (tpt mode; READ(16) on
    # Baseline, where it falls back) names the block too, and
    # libtptinitiator's error says it.
    dd = subprocess.run([str(paths.tool("tpt-dd")), a.c.url, "of=/dev/null",
                         f"bs={stripe_bytes}", "count=40", "--qd", "1"],
                        capture_output=True, text=True, timeout=120)
    assert dd.returncode == 1, dd.stderr
    assert f"first block not done: {lba(34, 0)}" in dd.stderr, dd.stderr
    assert ("mode=direct" if mode == "tpt" else "mode=plain") in dd.stderr, dd.stderr
    assert f"bytes={34 * stripe_bytes} " in dd.stderr, dd.stderr
    assert counters(a.c)["member_failures"] == 0, show(a.c)
    report(f"{mode}: units of stripe 34 lost on members {lost}: READs of stripes 0-39, 33-34 "
           f"and 34 got MEDIUM ERROR naming LBA {lba(34, 0)} and the stripes before it; "
           f"so did tpt-dd's ({'direct' if mode == 'tpt' else 'plain'})")


def test_rebuild_records_a_unit_it_cannot_rebuild_as_lost(tgtd_factory, client, mode, workdir,
                                                          report):
    """The classic RAID-5 double fault: a box lost, and while its units
    are rebuilt onto the spare a survivor cannot read a sector.  That
    stripe's lost unit cannot be rebuilt; the rest can.  The unit is
    recorded as lost (md's bad block log) and the rebuild finishes: the
    array is optimal but for that unit, which is never read from the
    spare (it holds nothing), also after a controller restart, and
    whose blocks read where the survivors give them and fail with MEDIUM
    ERROR where they do not.  A second box lost then leaves the array
    degraded, not failed: every other stripe reads, SYNCHRONIZE CACHE
    succeeds.  A host write of the whole stripe gives the unit back.
    Before, the rebuild stepped over the stripe and tried it again every
    5 s until a write: the array stayed `rebuilding`, and with a second
    box lost it was failed as a whole."""
    a = Array(tgtd_factory, client, mode, workdir, spares=1)
    pos = a.lose_sectors(2, 1, offset=8192, length=4096)
    gone = locate(2, 0)[0]
    mark = len(a.c.controller.log())
    kill(a.c.targets[gone])
    log = wait_log(a.c, rf"position {gone} rebuilt: \d+ stripes .*, but for its lost units; "
                   r"the array is optimal", since=mark)
    assert re.search(rf"position {gone}: the unit of stripe 2 cannot be rebuilt \(position mask "
                     rf"0x{1 << pos:x} cannot give theirs there\): recorded as lost", log), log
    assert "failed" not in re.findall(r"the array is (\w+)", log)
    assert "trying again every 5 s" not in log, log
    assert array_state(a.c) == "optimal" and members(a.c)[pos][1] == "up", show(a.c)
    assert re.search(rf"TPT-RAID lost units: 1 .*: {gone}:2\n", show(a.c)), show(a.c)
    assert f"lost {gone} 2\n" in (a.c.controller.dir / "array.state").read_text()

    def lost_unit_reads_as_it_can():
        # Its first 8 KiB: the survivor gives its own there.  The whole
        # unit needs the survivor's lost sector, and the spare is never
        # asked: MEDIUM ERROR, not whatever the spare holds.
        r = a.read(lba(2, 0), 16)
        assert r["status"] == GOOD and r["data"] == a.expect(lba(2, 0), 16)
        for i in (0, 1):
            r = a.read(lba(2, i), BLOCKS)
            assert r["status"] == CHECK_CONDITION, (i, r["status"])
            assert proto.parse_sense(r["sense"]).key == MEDIUM_ERROR, r
        r = a.read(lba(3), 5 * (N - 1) * BLOCKS)
        assert r["status"] == GOOD and r["data"] == a.expect(lba(3), 5 * (N - 1) * BLOCKS)

    lost_unit_reads_as_it_can()
    # The record is in the state file: a restarted controller never
    # takes the spare's unit there as the array's.  Killed once the
    # write-intent record is clear (2 s after the rebuild's last write):
    # else the stripe's parity may be stale, and the blocks beside the
    # lost sector are lost too.
    time.sleep(4)
    kill(a.c.controller)
    assemble(a.c)
    wait_state(a.c, {"optimal"})
    assert re.search(rf"TPT-RAID lost units: 1 .*: {gone}:2\n", show(a.c)), show(a.c)
    a.client.drop("a", check=False)
    a.client.login("a", a.c.url)
    a.client.clear_unit_attentions("a")
    lost_unit_reads_as_it_can()
    # A check counts the stripe as not read and ends; a resync leaves its
    # parity as it is and ends.
    fig = check_all(a.c)
    assert fig[:4] == ("last", 240, 240, 0) and "completed" in fig[4], show(a.c)
    assert "unreadable_stripes 1" in show(a.c), show(a.c)
    mark = len(a.c.controller.log())
    set_param(a.c, "resync=yes")
    wait_log(a.c, r"parity of \d+ stripes computed", since=mark)
    assert array_state(a.c) == "optimal", show(a.c)
    lost_unit_reads_as_it_can()
    # A second box lost: degraded, not failed.
    third = locate(2, 2)[0]
    kill(a.c.targets[third])
    wait_state(a.c, {"degraded"}, timeout=30)
    r = a.read(lba(3), 5 * (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.expect(lba(3), 5 * (N - 1) * BLOCKS)
    assert a.client.command("a", proto.sbc16_cdb(0x91, 0, 0))["status"] == GOOD
    restart_target(a.c, third)
    wait_state(a.c, {"optimal"}, timeout=60)
    # A write of the whole stripe gives the unit back.
    mark = len(a.c.controller.log())
    whole = os.urandom((N - 1) * UNIT)
    assert a.write(lba(2), whole)["status"] == GOOD
    wait_log(a.c, rf"position {gone}: 1 lost unit of stripes 2-2 written back from the others",
             since=mark)
    assert "lost units" not in show(a.c), show(a.c)
    r = a.read(lba(2), (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == whole
    r = a.read(lba(3), 5 * (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.expect(lba(3), 5 * (N - 1) * BLOCKS)
    assert "\nlost " not in (a.c.controller.dir / "array.state").read_text()
    scrub(a.c)
    report(f"{mode}: member {gone} lost, its rebuild meeting a lost sector of member {pos}: "
           f"that unit recorded lost, the rebuild done, optimal; kept across a controller "
           f"restart; a second box lost: degraded, not failed; a write of the stripe gives "
           f"it back")


def test_resync_writes_back_what_it_cannot_read(tgtd_factory, client, mode, workdir, report):
    """A parity resync (the operator's resync=yes here; a new array's
    first one, the regions a crash left) that cannot read a data unit
    writes it back from the others first, then computes the parity: the
    resync completes and no member is failed.  Before, the member was
    failed and the array degraded for one sector."""
    a = Array(tgtd_factory, client, mode, workdir)
    before = counters(a.c)
    pos = a.lose_sectors(2, 1, offset=8192)
    mark = len(a.c.controller.log())
    set_param(a.c, "resync=yes")
    wait_log(a.c, r"parity of \d+ stripes computed", since=mark)
    k = counters(a.c)
    assert k["member_failures"] == before["member_failures"], show(a.c)
    assert k["medium_repairs"] > before["medium_repairs"], k
    assert array_state(a.c) == "optimal" and {v[1] for v in members(a.c).values()} == {"up"}
    assert "TPT-RAID recovery: none" in show(a.c), show(a.c)
    assert a.member_bytes(2, 1) == a.expect(lba(2, 1), BLOCKS)
    r = a.read(0, a.STRIPES * (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.data
    scrub(a.c)
    report(f"{mode}: resync=yes over member {pos}'s lost sector: written back from the "
           f"others, the parity computed, no member failed")


def test_resync_after_a_crash_steps_over_a_block_it_cannot_read(tgtd_factory, client, mode,
                                                               workdir, report):
    """After a crash, a region's parity may not match its data (a write
    in flight there tore its stripe), so a unit a member cannot read
    there is not the parity's to give back: rebuilt from it, a torn
    stripe's unit would come back wrong, and be served and written back
    so.  The resync steps over that stripe alone (its batch gone over
    again a stripe at a time), computes the parity of the rest, fails no
    member, and tries it again every 5 s; a host READ of the unit gets
    MEDIUM ERROR, the units around it read right, and a write of the
    stripe gives it back.  Before, the resync failed the member, which
    left every unit of it in those regions unreadable."""
    a = Array(tgtd_factory, client, mode, workdir, opts=("write_intent=no",))
    pos = a.lose_sectors(2, 1, offset=8192)
    kill(a.c.controller)
    state = a.c.controller.dir / "array.state"
    a.c.controller.start(port=a.c.controller.port)
    a.c.controller.new_target(1, a.c.iqn)
    a.c.controller.new_lun(1, 1, str(state), bstype="tptraid")
    log = wait_log(a.c, r"the parity resync stopped at stripe 2: 1 stripe from there on that "
                   r"a member cannot read is left \(position mask 0x[0-9a-f]+ cannot read its "
                   r"units there, and their parity may not match their data")
    assert f"position mask 0x{1 << pos:x} cannot" in log, log[-3000:]
    assert "their parity may not match their data (a write was in flight" in log
    assert "medium error" not in log and "failing it" not in log, log[-3000:]
    assert array_state(a.c) == "optimal" and {v[1] for v in members(a.c).values()} == {"up"}
    assert "TPT-RAID recovery: stopped, parity resync at stripe 2: " in show(a.c), show(a.c)
    retried_quietly(a.c)
    a.client.drop("a", check=False)
    a.client.login("a", a.c.url)
    a.client.clear_unit_attentions("a")
    r = a.read(lba(2, 1), BLOCKS)
    assert r["status"] == CHECK_CONDITION and proto.parse_sense(r["sense"]).key == MEDIUM_ERROR
    r = a.read(lba(2, 0), BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.expect(lba(2, 0), BLOCKS)
    r = a.read(lba(3), 5 * (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.expect(lba(3), 5 * (N - 1) * BLOCKS)
    whole = os.urandom((N - 1) * UNIT)
    assert a.write(lba(2), whole)["status"] == GOOD
    deadline = time.monotonic() + 30
    while "TPT-RAID recovery: none" not in show(a.c):
        assert time.monotonic() < deadline, show(a.c)
        time.sleep(0.2)
    r = a.read(lba(2), (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == whole
    assert counters(a.c)["member_failures"] == 0, show(a.c)
    scrub(a.c)
    report(f"{mode}: a crash, then the resync met member {pos}'s lost sector where the parity "
           f"may be off: that stripe stepped over, its unit MEDIUM ERROR, no member failed; "
           f"a write of the stripe, then the resync done")


def test_raid6_rebuild_reads_around_an_unreadable_block(tgtd_factory, client, workdir, report):
    """RAID-6 has a unit to spare after one box is lost: a rebuild that
    meets a survivor's lost sector rebuilds those stripes without it too,
    writes the survivor's units back, and finishes; nothing stalls."""
    c, bad, data = level_array(tgtd_factory, client, workdir, "tpt", 6, 6, 4 << 20, spares=1)
    at = 2 * UNIT + 8192
    with open(c.backings[1], "rb") as f:
        f.seek(at)
        held = f.read(4096)
    bad.add(c.backings[1], at, 4096)
    before = counters(c)
    kill(c.targets[0])
    wait_log(c, r"position 0 rebuilt")
    wait_state(c, {"optimal"}, timeout=30)
    k = counters(c)
    assert k["medium_repairs"] > before["medium_repairs"], k
    assert members(c)[1][1] == "up", show(c)
    with open(c.backings[1], "rb") as f:
        f.seek(at)
        assert f.read(4096) == held
    r = host_read(client, 0, len(data) // 512)
    assert r["status"] == GOOD and r["data"] == data
    scrub(c)
    report("RAID-6: a rebuild meeting a survivor's lost sector rebuilt those stripes without "
           "it, wrote its units back and finished: optimal, no member failed")


def test_mirror_rebuild_records_a_unit_it_cannot_copy_as_lost(tgtd_factory, client, mode,
                                                              workdir, report):
    """A 2-way mirror has no copy to spare once one box is lost: a
    rebuild onto the spare that meets the other copy's lost sector
    records that unit as lost and finishes, as RAID-5's does.  Its blocks
    read where the copy gives them and fail with MEDIUM ERROR where it
    does not, never the spare's bytes; a host write of the unit gives it
    back, and both copies agree again."""
    c, bad, data = level_array(tgtd_factory, client, workdir, mode, 2, 1, 8 * UNIT, spares=1)
    rebuild_meets_lost_sectors(c, bad, 3, (1,))
    r = host_read(client, 3 * BLOCKS, 16)
    assert r["status"] == GOOD and r["data"] == data[3 * UNIT:3 * UNIT + 8192]
    r = host_read(client, 3 * BLOCKS, BLOCKS)
    assert r["status"] == CHECK_CONDITION and proto.parse_sense(r["sense"]).key == MEDIUM_ERROR
    r = host_read(client, 4 * BLOCKS, 4 * BLOCKS)
    assert r["status"] == GOOD and r["data"] == data[4 * UNIT:]
    unit = os.urandom(UNIT)
    write_gives_back(c, client, 3, 3 * BLOCKS, unit)
    r = host_read(client, 0, 8 * BLOCKS)
    assert r["status"] == GOOD and r["data"] == data[:3 * UNIT] + unit + data[4 * UNIT:]
    scrub(c)
    report(f"{mode}: a 2-way mirror's rebuild meeting the other copy's lost sector: that unit "
           f"recorded lost, the rebuild done, optimal; MEDIUM ERROR where the copy cannot give "
           f"it; a write of the unit gives it back, both copies equal")


def rebuild_meets_lost_sectors(c, bad, stripe, survivors):
    """Sectors of `survivors` in `stripe` lost (8 KiB into the unit), then
    box 0 killed: until its spare is rebuilt, that stripe's unit recorded
    lost (the others cannot give theirs there) and the survivors kept."""
    for m in survivors:
        bad.add(c.backings[m], stripe * UNIT + 8192, 4096)
    mark = len(c.controller.log())
    kill(c.targets[0])
    log = wait_log(c, r"position 0 rebuilt: \d+ stripes .*, but for its lost units; "
                   r"the array is optimal", since=mark)
    mask = sum(1 << m for m in survivors)
    assert re.search(rf"position 0: the unit of stripe {stripe} cannot be rebuilt \(position "
                     rf"mask 0x{mask:x} cannot give theirs there\): recorded as lost", log), log
    assert {members(c)[m][1] for m in survivors} == {"up"}, show(c)
    assert "TPT-RAID lost units: 1 " in show(c), show(c)


def write_gives_back(c, client, stripe, at, data):
    """A host write of `stripe` whole (`data` at block `at`): its lost
    unit is written back from the others and leaves the record."""
    mark = len(c.controller.log())
    assert client.command("a", proto.write16_cdb(at, len(data) // 512),
                          data=data)["status"] == GOOD
    wait_log(c, rf"position 0: 1 lost unit of stripes {stripe}-{stripe} written back from the "
             r"others", since=mark)
    assert "lost units" not in show(c), show(c)


def test_raid6_rebuild_records_a_unit_it_cannot_rebuild_as_lost(tgtd_factory, client, mode,
                                                                workdir, report):
    """RAID-6's double fault beyond its parity: one box lost, and two
    survivors that cannot read the same sector of one stripe.  That
    stripe's unit is recorded lost and the rebuild finishes; what the
    stripe cannot give fails with MEDIUM ERROR, the other stripes read;
    a host write of the whole stripe gives the unit back."""
    c, bad, data = level_array(tgtd_factory, client, workdir, mode, 6, 6, 8 * 4 * UNIT,
                               spares=1)
    rebuild_meets_lost_sectors(c, bad, 2, (1, 2))
    stripe = 4 * BLOCKS
    r = host_read(client, 2 * stripe, stripe)
    assert r["status"] == CHECK_CONDITION and proto.parse_sense(r["sense"]).key == MEDIUM_ERROR
    for s in (0, 1, 3, 4, 5, 6, 7):
        r = host_read(client, s * stripe, stripe)
        assert r["status"] == GOOD and r["data"] == data[s * 4 * UNIT:(s + 1) * 4 * UNIT], s
    whole = os.urandom(4 * UNIT)
    write_gives_back(c, client, 2, 2 * stripe, whole)
    r = host_read(client, 0, 8 * stripe)
    assert r["status"] == GOOD and r["data"] == data[:8 * UNIT] + whole + data[12 * UNIT:]
    scrub(c)
    report(f"{mode}: RAID-6 with a box lost and two survivors' lost sectors in one stripe: that "
           f"unit recorded lost, the rebuild done, optimal; the stripe MEDIUM ERROR, the rest "
           f"right; a write of the stripe gives it back")


def test_member_losing_sectors_is_failed(tgtd_factory, client, workdir, report):
    """A disk that keeps losing sectors is failing: past 20 read errors
    within the hour (md's max_read_errors) the member is failed and the
    array goes on degraded.  Every READ is served right throughout."""
    a = Array(tgtd_factory, client, "tpt", workdir)
    stripes = [s for s in range(Array.STRIPES) if locate(s, 0)[0] == 0]
    repairs = counters(a.c)["medium_repairs"]
    for i in range(21):
        s = stripes[i % len(stripes)]
        pos = a.lose_sectors(s, 0, offset=(i // len(stripes)) * 4096, length=512)
        r = a.read(lba(s), BLOCKS)
        assert r["status"] == GOOD and r["data"] == a.expect(lba(s), BLOCKS), i
        if i < 20:
            wait_counter(a.c, "medium_repairs", repairs + i + 1)
    wait_state(a.c, {"degraded"}, timeout=10)
    assert members(a.c)[pos][1] != "up"
    assert "21 read errors within the hour: failing it" in a.c.controller.log()
    r = a.read(0, Array.STRIPES * (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.data
    report(f"member {pos} after 21 read errors: failed, the array degraded, every READ right")
