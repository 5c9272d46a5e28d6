"""replace=URL (md's --replace; usr/tpt_controller/replace.c): a member that
still serves is copied to a spare without the array running degraded.

fail=URL and a spare's rebuild leave every stripe without redundancy for as
long as the rebuild takes: a second box lost then loses data.  A replace
copies the old box's units to a spare while the old box goes on
serving its position, host writes going on (the stripes they write are
done again), and only then does the spare take over.  The spare's units
are copied from the old box, as md reads the old disk: rebuilt from the
others only where the old box cannot read them.  As in
test_failures.py: real tgtd processes, tpt-iscsi-verify's load checked
against a byte model, tpt-scrub over the members afterwards.
"""
import os
import re
import time

import pytest

from tptlib.client import GOOD
from tptlib.tgtd import TgtadmError
# The mode fixture (tpt and baseline) and the RAID-5 tests' helpers.
from test_failures import (Load, array_state, assemble, counters, kill,  # noqa: F401
                           members, mode, scrub, set_param, show, start, verify_all,
                           wait_log, wait_state)
# A RAID-5 of N targets whose disks can lose sectors.
from test_medium_errors import BLOCKS, N, UNIT, Array, lba, locate


def replaced_line(c, timeout=90):
    """What the controller's "position P replaced" line says, once it is
    there: (position, spare, stripes done, passes, seconds new writes
    were held back, stripes copied, stripes rebuilt)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"tptraid: position (\d+) replaced: spare (\d+) \(\S+\) serves it, "
                      r"(\d+) stripes done in (\d+) pass(?:es)? in [\d.]+ s \((\d+) copied from "
                      r"member \d+, (\d+) rebuilt from the other positions; new host writes "
                      r"held back ([\d.]+) s\)", c.controller.log())
        if m:
            g = [int(x) for x in m.groups()[:6]]
            return tuple(g[:4]) + (float(m.group(7)), g[4], g[5])
        time.sleep(0.2)
    raise AssertionError("no replace ended:\n" + show(c) + c.controller.log()[-3000:])


def refused(c, param, says):
    try:
        set_param(c, param)
    except TgtadmError:
        pass
    else:
        raise AssertionError(f"{param} was taken")
    assert says in c.controller.log(), c.controller.log()[-2000:]


def test_replace_under_load_never_runs_degraded(tgtd_factory, mode, tmp_path, report):
    """Position 1's box replaced by the spare under a write load: the array
    is optimal at every look and plans no span degraded; the host sees no
    error and no wrong byte; then the spare serves position 1, the old box
    is held out, the state file and a controller restart say the same,
    and every stripe's parity is right."""
    c = start(tgtd_factory, mode, n=4, spares=1, extra_opts=("rebuild_rate=6",))
    old, spare = c.target_urls[1], c.target_urls[4]
    refused(c, f"replace={spare}", "member 4 serves no position")
    before = counters(c)
    load = Load(c, tmp_path, 14)
    time.sleep(2)
    set_param(c, f"replace={old}")
    states = set()
    while "replaced: spare" not in c.controller.log():
        states.add(array_state(c))
        out = show(c)
        if "TPT-RAID recovery: replace" in out:
            assert re.search(r"TPT-RAID member 4: \S+ replacing position -1", out), out
            assert re.search(r"TPT-RAID member 1: \S+ up position 1", out), out
        time.sleep(0.3)
    res = load.clean_within(150, c, "the load stalled during the replace")
    position, by, stripes, passes, held, copied, rebuilt = replaced_line(c)
    report(f"{mode}: replace of position 1 under load: {res['writes']} writes "
           f"{res['reads']} reads, 0 errors; {stripes} stripes copied in {passes} passes, "
           f"new writes held back {held:.2f} s; array states seen {sorted(states)}")
    assert (position, by) == (1, 4)
    assert (copied, rebuilt) == (stripes, 0)
    assert states == {"optimal"}, states
    after = counters(c)
    assert after["degraded_spans"] == before["degraded_spans"], (before, after)
    assert after["member_failures"] == before["member_failures"] + 1   # the old box, at the end
    assert res["writes"] > 50, res
    m = members(c)
    assert m[4][1:] == ("up", 1) and m[1][2] == -1, m
    assert "member 1 (" in c.controller.log() and "is failed and held out" in c.controller.log()
    state = (c.controller.dir / "array.state").read_text()
    assert "\nposition 1 4\n" in state and "\nheld 1\n" in state, state
    verify_all(c, tmp_path)
    assert scrub(c) > 0

    # A restart assembles the array as the replace left it.
    ctl = c.controller
    ctl.stop()
    ctl.start(port=ctl.port)
    ctl.new_target(1, c.iqn)
    ctl.new_lun(1, 1, str(ctl.dir / "array.state"), bstype="tptraid")
    wait_state(c, {"optimal"})
    m = members(c)
    assert m[4][1:] == ("up", 1) and m[1][1:] == ("held", -1), m
    verify_all(c, tmp_path)


def test_replace_ends_cleanly_when_a_box_fails_under_it(tgtd_factory, mode, tmp_path, report):
    """Refused where it cannot run (no such box, one at a time, the array
    degraded, no spare ready).  A replace whose spare dies stops and the
    old box serves on; a second one, to the other spare, whose old box dies
    midway, leaves that spare the position, rebuilt in what it still lacks
    only.  The host sees no error throughout, and every byte reads back."""
    c = start(tgtd_factory, mode, n=4, spares=2, extra_opts=("rebuild_rate=2",))
    old = c.target_urls[1]
    refused(c, "replace=iscsi://127.0.0.1:9/iqn.2026-11.org.example:none/1",
            "not a box of this array")
    # Writes to the first 8 MiB only: the stripes after them stay done.
    load = Load(c, tmp_path, 30, extra=("--span", str(8 << 20)))
    time.sleep(2)
    set_param(c, f"replace={old}")
    assert re.search(r"member 1 \(\S+\) at position 1 is to be replaced by spare 4",
                     c.controller.log())
    refused(c, f"replace={c.target_urls[2]}", "position 1 is being replaced already")
    time.sleep(1)
    kill(c.targets[4])
    wait_log(c, "replace of position 1 stopped: the spare failed", timeout=20)
    assert array_state(c) == "optimal"
    assert members(c)[1][1:] == ("up", 1)

    set_param(c, f"replace={old}")
    assert re.search(r"member 1 \(\S+\) at position 1 is to be replaced by spare 5",
                     c.controller.log())
    time.sleep(3)
    kill(c.targets[1])
    wait_log(c, "member 1, being replaced at position 1, failed: spare 5", timeout=20)
    # A degraded array copies nothing.
    refused(c, f"replace={c.target_urls[2]}", "a replace copies a position while every")
    set_param(c, "rebuild_rate=0")
    res = load.clean_within(150, c, "the load stalled")
    wait_state(c, {"optimal"}, timeout=90)
    assert members(c)[5][1:] == ("up", 1), show(c)
    # The spare goes on from where the replace was, not from the start.
    rest = re.search(r"rebuilding position 1 onto member 5 \(\S+\): (\d+) stripes \(the rest "
                     r"is done already\)", c.controller.log())
    assert rest and int(rest.group(1)) < 240, c.controller.log()[-3000:]
    refused(c, f"replace={c.target_urls[2]}", "no spare is ready")
    report(f"{mode}: replaces stopped by the spare's loss, then the old box's: "
           f"{res['writes']} writes {res['reads']} reads, 0 errors; spare 5 took position 1 "
           f"over with {rest.group(1)} stripes of 240 left to rebuild")
    verify_all(c, tmp_path)
    scrub(c)


@pytest.mark.parametrize("raid, n", [(6, 5), (1, 3)], ids=["raid6", "raid1"])
def test_replace_in_raid6_and_a_mirror(tgtd_factory, mode, raid, n, tmp_path, report):
    """The same for RAID-6 (P and Q rebuilt from N-2 sources) and a
    three-way mirror (a copy from another member), under a load over the
    whole array: optimal throughout, no span degraded, every byte and
    every stripe's redundancy right afterwards."""
    c = start(tgtd_factory, mode, n=n, spares=1, raid=raid, extra_opts=("rebuild_rate=6",))
    before = counters(c)
    load = Load(c, tmp_path, 8)
    time.sleep(1)
    set_param(c, f"replace={c.target_urls[0]}")
    res = load.clean_within(150, c, "the load stalled during the replace")
    position, by, stripes, passes, _, copied, rebuilt = replaced_line(c)
    assert (position, by) == (0, n)
    assert (copied, rebuilt) == (stripes, 0)
    assert array_state(c) == "optimal"
    assert counters(c)["degraded_spans"] == before["degraded_spans"]
    assert members(c)[n][1:] == ("up", 0)
    report(f"{mode}: RAID-{raid} replace of position 0 under load: {res['writes']} writes, "
           f"0 errors; {stripes} stripes copied in {passes} passes")
    verify_all(c, tmp_path)
    scrub(c)


def test_a_replace_a_restart_interrupted_begins_again(tgtd_factory, tmp_path, report):
    """kill -9 of the controller during a replace: the state file keeps it
    ("replace P ID"), and the next start begins it again once the array
    and the spare are there, then it ends as one never interrupted (the
    line gone, the spare at the position, the old box held)."""
    c = start(tgtd_factory, "tpt", n=3, spares=1, extra_opts=("rebuild_rate=1",))
    load = Load(c, tmp_path, 2)
    load.clean_within(60, c, "the load stalled")
    state = c.controller.dir / "array.state"
    set_param(c, f"replace={c.target_urls[1]}")
    for _ in range(100):    # written by the state file's thread
        if "\nreplace 1 3\n" in state.read_text():
            break
        time.sleep(0.05)
    assert "\nreplace 1 3\n" in state.read_text(), state.read_text()
    c.controller.killed_on_purpose = True
    c.controller.kill()
    mark = len(c.controller.log())
    assemble(c)
    wait_log(c, "a restart interrupted it, it starts again", timeout=30, since=mark)
    set_param(c, "rebuild_rate=0")
    assert replaced_line(c)[:2] == (1, 3)
    # Regions the load wrote last, if the crash came before their marks
    # were cleared, had their parity resynced first: the replace
    # rebuilds from it.
    log = c.controller.log()[mark:]
    if "computing the parity of" in log:
        assert log.index("computing the parity of") < log.index("replacing position 1:"), log
    for _ in range(100):
        text = state.read_text()
        if "replace" not in text:
            break
        time.sleep(0.05)
    assert "replace" not in text and "\nposition 1 3\n" in text and "\nheld 1\n" in text, text
    verify_all(c, tmp_path)
    scrub(c)


def test_replace_copies_a_unit_whose_stripe_has_wrong_parity(tgtd_factory, client, mode,
                                                             workdir, report):
    """The spare gets the old box's units as they are, where a rebuild
    from the others would get a unit computed with a wrong parity: a
    stripe whose parity went bad reads back right after the replace, and
    its parity is as wrong as before (a check's business, not the
    replace's)."""
    a = Array(tgtd_factory, client, mode, workdir, spares=1)
    c = a.c
    stripe = 2
    position, _ = locate(stripe, 0)
    parity = N - 1 - stripe % N
    with open(c.backings[parity], "r+b") as f:
        f.seek(stripe * UNIT)
        f.write(os.urandom(UNIT))
    set_param(c, f"replace={c.target_urls[position]}")
    _, by, stripes, _, _, copied, rebuilt = replaced_line(c)
    assert by == N and (copied, rebuilt) == (stripes, 0)
    assert members(c)[N][1:] == ("up", position)
    first = lba(stripe)
    r = a.read(first, (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.expect(first, (N - 1) * BLOCKS)
    assert scrub(c, mismatches=1) > 0
    report(f"{mode}: replace of position {position} with stripe {stripe}'s parity spoiled: "
           f"{copied} stripes copied, the stripe's data reads back right; its parity still "
           f"wrong (scrub: 1 mismatch)")


def test_replace_rebuilds_what_the_old_box_cannot_read(tgtd_factory, client, mode, workdir,
                                                       report):
    """A unit the old box cannot read (a lost sector met by the copy) is
    rebuilt from the other positions, its batch of stripes with it; the
    rest is copied, and every block reads back right from the spare."""
    a = Array(tgtd_factory, client, mode, workdir, spares=1)
    c = a.c
    position = a.lose_sectors(4, 0, offset=8192)
    errors = counters(c)["medium_errors"]
    set_param(c, f"replace={c.target_urls[position]}")
    _, by, stripes, _, _, copied, rebuilt = replaced_line(c)
    assert by == N and rebuilt > 0 and copied == stripes - rebuilt > 0, (copied, rebuilt)
    assert counters(c)["medium_errors"] > errors
    assert members(c)[N][1:] == ("up", position) and members(c)[position][1:] == ("held", -1)
    r = a.read(0, Array.STRIPES * (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.data
    scrub(c)
    report(f"{mode}: replace of position {position}, whose box cannot read stripe 4's unit: "
           f"{copied} stripes copied, {rebuilt} rebuilt from the others; every byte right")


def test_a_member_losing_sectors_is_replaced_by_a_ready_spare(tgtd_factory, client, mode,
                                                              workdir, report):
    """Past 20 read errors within the hour (md's max_read_errors) a member
    is failing; with a spare ready it is not failed but replaced, as md
    replaces a device that wants replacement: it serves on, its errors
    repaired, while the spare gets its units, and the array never runs
    degraded.  (Without a spare it is failed: test_medium_errors.py.)"""
    a = Array(tgtd_factory, client, mode, workdir, spares=1)
    c = a.c
    stripes = [s for s in range(Array.STRIPES) if locate(s, 0)[0] == 0]
    before = counters(c)
    for i in range(21):
        s = stripes[i % len(stripes)]
        a.lose_sectors(s, 0, offset=(i // len(stripes)) * 4096, length=512)
        r = a.read(lba(s), BLOCKS)
        assert r["status"] == GOOD and r["data"] == a.expect(lba(s), BLOCKS), i
    wait_log(c, "read errors within the hour", timeout=10)
    assert re.search(r"member 0 \(\S+\) at position 0 had 21 read errors within the hour: "
                     r"replacing it by spare 5", c.controller.log()), c.controller.log()[-3000:]
    _, by, stripes_done, _, _, copied, rebuilt = replaced_line(c)
    # The batch over the sector the 21st error found may meet it before
    # its repair has written it back: that batch is rebuilt instead.
    assert by == N and copied >= stripes_done - 16, (copied, rebuilt)
    assert "failing it" not in c.controller.log()
    after = counters(c)
    assert after["member_failures"] == before["member_failures"] + 1    # the old box, at the end
    assert array_state(c) == "optimal"
    assert members(c)[N][1:] == ("up", 0) and members(c)[0][1:] == ("held", -1)
    r = a.read(0, Array.STRIPES * (N - 1) * BLOCKS)
    assert r["status"] == GOOD and r["data"] == a.data
    scrub(c)
    report(f"{mode}: member 0 after 21 read errors, a spare ready: replaced, not failed; "
           f"{copied} stripes copied, {rebuilt} rebuilt, the array never degraded, every byte right")
