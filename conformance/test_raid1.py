"""RAID-1 (paper V-A; controller/raid1.c): every member a copy of the whole
array, in both modes.

As test_failures.py does for RAID-5: real tgtd processes, tpt-iscsi-verify's
load checked against a byte model, and boxes killed under it.  A mirror
of N members survives the loss of N-1: the host sees no error while one
copy is left.  Afterwards every acknowledged write reads back and
`tpt-scrub --raid 1` finds every copy equal (test_failures.scrub).  In
TPT mode an extended host's data moves between its memory and the members
without crossing the controller.
"""
import os
import re
import signal
import time

import pytest

from tptlib import cluster, net
from tptlib.tgtd import TgtadmError
# The mode fixture (tpt and baseline) and the RAID-5 tests' helpers.
from test_failures import (FAIL_TIMEOUT, MEMBER_BYTES, Load, array_state,  # noqa: F401
                           check_all, clean_load, close_link, counters, kill,
                           members, mode, resync_all, restart_target, scrub, set_param, show,
                           spoil_units, start, units_of, verify_all, wait_check,
                           wait_state)
from test_host_direct import array_stats, direct_verify


def test_three_way_mirror_serves_with_one_member_left(tgtd_factory, mode, tmp_path, report):
    """Two of three boxes killed, one after the other, under the load: the
    host sees nothing; the one left holds every acknowledged write; both
    come back and catch up."""
    c = start(tgtd_factory, mode, n=3, raid=1)

    def lose_two():
        kill(c.targets[0])
        time.sleep(FAIL_TIMEOUT + 2)
        kill(c.targets[2])

    clean_load(c, tmp_path, 16, lose_two, report,
               "3-way mirror, 2 members killed mid-load")
    assert array_state(c) == "degraded", show(c)
    assert counters(c)["member_failures"] == 2
    verify_all(c, tmp_path)
    restart_target(c, 0)
    restart_target(c, 2)
    wait_state(c, {"optimal"}, timeout=90)
    verify_all(c, tmp_path)
    scrub(c)


def test_mirror_member_rebuilt_onto_a_spare(tgtd_factory, mode, tmp_path, report):
    c = start(tgtd_factory, mode, n=2, spares=1, raid=1)
    clean_load(c, tmp_path, 12, lambda: kill(c.targets[1]), report,
               "2-way mirror, member 1 killed mid-load, spare rebuilt in")
    wait_state(c, {"optimal"})
    boxes = members(c)
    assert boxes[2][1:] == ("up", 1), show(c)
    assert boxes[1][1:] == ("failed", -1), show(c)
    assert re.search(r"position 1 rebuilt: \d+ stripes", c.controller.log())
    verify_all(c, tmp_path)
    scrub(c)


def test_hung_mirror_member_is_failed_and_catches_up(tgtd_factory, mode, tmp_path, report):
    """SIGSTOP: the box says nothing, TCP stays up; it is failed after
    fail_timeout while the host goes on with the other copy, and when it
    wakes it copies what it missed."""
    c = start(tgtd_factory, mode, n=2, raid=1)
    t1 = c.targets[1]

    def hang():
        os.killpg(t1.proc.pid, signal.SIGSTOP)
        time.sleep(FAIL_TIMEOUT + 4)
        assert array_state(c) == "degraded", show(c)
        os.killpg(t1.proc.pid, signal.SIGCONT)

    clean_load(c, tmp_path, 16, hang, report, "2-way mirror, member 1 hung (SIGSTOP) mid-load")
    wait_state(c, {"optimal"})
    assert members(c)[1][1:] == ("up", 1)
    verify_all(c, tmp_path)
    scrub(c)


def test_three_way_mirror_loses_a_survivor_during_a_rebuild(tgtd_factory, mode, tmp_path,
                                                            report):
    """Where RAID-5 fails (test_failures.py), a 3-way mirror rebuilding a
    lost box onto a spare loses a second box and goes on: the host sees no
    error, the rebuild finishes from the one copy left."""
    c = start(tgtd_factory, mode, n=3, spares=1, raid=1, extra_opts=("rebuild_rate=4",))
    res, err = Load(c, tmp_path, 3).result()
    assert res["errors"] == 0 and res["mismatches"] == 0, err
    kill(c.targets[0])
    wait_state(c, {"rebuilding"}, timeout=FAIL_TIMEOUT + 10)
    clean_load(c, tmp_path, 8, lambda: kill(c.targets[2]), report,
               "3-way mirror rebuilding onto a spare, a second member killed")
    assert array_state(c) in ("rebuilding", "degraded"), show(c)
    set_param(c, "rebuild_rate=0")
    restart_target(c, 2)
    wait_state(c, {"optimal"}, timeout=90)
    boxes = members(c)
    assert boxes[3][1:] == ("up", 0), show(c)
    verify_all(c, tmp_path)
    scrub(c)


def test_returning_mirror_member_copies_only_what_it_missed(tgtd_factory, mode, tmp_path,
                                                            report):
    c = start(tgtd_factory, mode, n=2, raid=1)
    kill(c.targets[0])
    wait_state(c, {"degraded"}, timeout=FAIL_TIMEOUT + 10)
    res, err = Load(c, tmp_path, 3, extra=("--span", "1m")).result()
    assert res["errors"] == 0 and res["mismatches"] == 0, err
    restart_target(c, 0)
    wait_state(c, {"optimal"}, timeout=60)
    log = c.controller.log()
    m = re.search(r"position 0 caught up: (\d+) stripes", log)
    assert m, log[-3000:]
    stripes = scrub(c)
    report(f"{mode}: mirror member back, copied {m.group(1)} of {stripes} units")
    assert int(m.group(1)) < stripes // 2, m.group(0)
    verify_all(c, tmp_path)


def crash_controller_under_writes(c, model_dir):
    """kill -9 of the controller 3 s into a client's writes to the first
    2 MiB, then tgtd started again with the array's state file alone."""
    load = Load(c, model_dir, 12, extra=("--span", "2m"))
    time.sleep(3)
    kill(c.controller)
    res, _ = load.result()
    assert res["mismatches"] == 0
    c.controller.start(port=c.controller.port)
    c.controller.new_target(1, c.iqn)
    c.controller.new_lun(1, 1, str(c.controller.dir / "array.state"), bstype="tptraid")


def test_controller_crash_mid_write_makes_the_copies_equal(tgtd_factory, mode, tmp_path,
                                                           report):
    """kill -9 of the controller under writes leaves copies that may
    differ where writes were in flight; started again, it levels them in
    the write-intent regions (three copies: by vote, the odd copy out
    rewritten from the others)."""
    c = start(tgtd_factory, mode, n=3, raid=1)
    crash_controller_under_writes(c, tmp_path)
    wait_state(c, {"optimal"}, timeout=60)
    m = re.search(r"writes in flight or a parity resync unfinished in (\d+) regions: resyncing",
                  c.controller.log())
    assert m, c.controller.log()[-3000:]
    report(f"{mode}: mirror controller killed mid-write: resynced {m.group(1)} regions")
    verify_all(c, tmp_path)
    scrub(c)


def test_controller_crash_while_degraded_starts_a_mirror(tgtd_factory, mode, tmp_path,
                                                        report):
    """kill -9 of the controller mid-write while a box is gone: unlike
    RAID-5 (test_failures.py), whose lost blocks there cannot be rebuilt
    for sure, a mirror starts again at once: copies that differ are each a
    version of the data.  The box's return brings every copy level."""
    c = start(tgtd_factory, mode, n=3, raid=1)
    kill(c.targets[2])
    wait_state(c, {"degraded"}, timeout=FAIL_TIMEOUT + 10)
    crash_controller_under_writes(c, tmp_path)
    wait_state(c, {"degraded"}, timeout=60)
    assert "Not starting" not in c.controller.log()
    verify_all(c, tmp_path)
    restart_target(c, 2)
    wait_state(c, {"optimal"}, timeout=90)
    report(f"{mode}: mirror controller killed while degraded: started, box back, level")
    verify_all(c, tmp_path)
    scrub(c)


def test_operator_resync_makes_spoiled_copies_equal(tgtd_factory, mode, tmp_path, report):
    """Units of members 1 and 2 spoiled behind the array's back: tpt-scrub
    --raid 1 counts them; resync=yes levels them online (the odd copy out
    rewritten from the others; member 0 over the others in the stripe
    where two differ), and every write reads back."""
    c = start(tgtd_factory, mode, n=3, raid=1)
    res, err = Load(c, tmp_path, 3, extra=("--span", "4m")).result()
    assert res["errors"] == 0 and res["mismatches"] == 0, err
    spoil_units(c, 1, (2, 30))
    spoil_units(c, 2, (30, 31))
    scrub(c, mismatches=3)
    resync_all(c)
    wait_state(c, {"optimal"}, timeout=60)
    report(f"{mode}: mirror copies spoiled in 3 stripes: scrub found 3, resync=yes fixed them")
    scrub(c)
    verify_all(c, tmp_path)


def test_operator_check_counts_copies_that_differ(tgtd_factory, mode, tmp_path, report):
    """Copies spoiled behind the array's back in 4 stripes, one of them on
    two members: check=yes under a host's load counts those 4 stripes,
    names the one copy wrong where the other two agree, and changes no
    copy; resync=yes has the copies vote: the odd copy out is rewritten
    from the other two (the first copy too, which a resync of two copies
    would copy over the others), the stripe with no majority gets the
    first copy, and a second check finds none.  Refused while a box is
    gone."""
    c = start(tgtd_factory, mode, n=3, raid=1)
    span = ("--span", "4m")
    res, err = Load(c, tmp_path, 3, extra=span).result()
    assert res["errors"] == 0 and res["mismatches"] == 0, err
    # Past the load's 4 MiB (64 units): a write there would level them.
    spoiled = {1: (100, 130), 2: (130, 131), 0: (140,)}
    stripes_spoiled = (100, 130, 131, 140)
    original = units_of(c, 0, stripes_spoiled)
    assert all(units_of(c, m, stripes_spoiled) == original for m in (1, 2))
    for m, stripes in spoiled.items():
        spoil_units(c, m, stripes)
    before = {m: units_of(c, m, st) for m, st in spoiled.items()}
    # The scrub names the odd copy out as the check does.
    scrub(c, mismatches=4, wrong_units={100: 1, 131: 2, 140: 0})
    set_param(c, "rebuild_rate=4")
    fig = []

    def check_under_load():
        set_param(c, "check=yes")
        fig.append(wait_check(c))

    clean_load(c, tmp_path, 6, check_under_load, report, "mirror check=yes under load",
               extra=span)
    _, checked, total, mismatched, how = fig[0]
    assert (checked, mismatched, how) == (total, 4, "completed"), fig
    said = dict(re.findall(r"check: stripe (\d+) \(array blocks \d+-\d+\): its copies "
                           r"differ(?:: position (\d+)'s unit)?", c.controller.log()))
    # Three copies: the odd one out is named, not where two differ.
    assert said == {"100": "1", "130": "", "131": "2", "140": "0"}, said
    assert "resync=yes repairs them" in c.controller.log()
    assert {m: units_of(c, m, st) for m, st in spoiled.items()} == before
    scrub(c, mismatches=4)

    def resync_under_load():
        # Slow enough that the load's writes meet its checks and repairs.
        set_param(c, "rebuild_rate=8")
        resync_all(c)
        wait_state(c, {"optimal"}, timeout=60)

    clean_load(c, tmp_path, 4, resync_under_load, report, "mirror resync=yes votes under load",
               extra=span)
    log = c.controller.log()
    voted = re.search(r"copies of (\d+) stripes compared in [\d.]+ s: (\d+) had an odd copy out, "
                      r"rewritten from the others, (\d+) differed with no majority", log)
    assert voted and voted.groups() == (str(total), "3", "1"), log[-3000:]
    repaired = dict(re.findall(r"resync: stripe (\d+) \(array blocks \d+-\d+\): (one copy|its "
                               r"copies differ)", log))
    assert repaired == {"100": "one copy", "131": "one copy", "140": "one copy",
                        "130": "its copies differ"}, repaired
    # Every copy holds what the majority held; where there was none,
    # the first copy's (here the original too).
    for m in (0, 1, 2):
        assert units_of(c, m, stripes_spoiled) == original, m
    assert check_all(c)[1:] == (total, total, 0, "completed"), show(c)
    report(f"{mode}: mirror copies spoiled in 4 stripes: check=yes counted 4 of {total}, "
           f"repaired none; resync=yes rewrote the 3 odd copies out (the first copy's "
           f"among them) from the others, the first over the others where there was no "
           f"majority; a check then finds 0")
    scrub(c)
    verify_all(c, tmp_path)
    kill(c.targets[2])
    wait_state(c, {"degraded"}, timeout=FAIL_TIMEOUT + 10)
    with pytest.raises(TgtadmError):
        set_param(c, "check=yes")


def test_direct_host_on_a_mirror(tgtd_factory, report):
    """An extended host's READs and WRITEs on a 2-way mirror: every member
    takes the written data from the host's memory itself and reads go
    straight back into it; no host byte crosses the controller."""
    c = cluster.start(tgtd_factory, n=2, mode="tpt", member_bytes=MEMBER_BYTES, raid=1)
    before = array_stats(c)
    res = direct_verify(c.url, "--span", "12m", "--zero", "--qd", "8", "--ops", "150",
                        "--max-bs", "1m", "--final-check")
    after = array_stats(c)
    assert res["direct"] == "yes"
    assert after["host_in"] == before["host_in"]
    assert after["host_out"] == before["host_out"]
    assert after["direct_in"] - before["direct_in"] == res["direct_out"]
    assert after["direct_out"] - before["direct_out"] == res["direct_in"]
    report(f"direct host on a 2-way mirror: {res['ops']} requests, "
           f"{res['bytes'] >> 20} MiB verified, none of it through the controller")
    scrub(c)


def test_mirror_definitions_refused_clearly(tgtd_factory):
    """One member is no mirror; a level we do not have is named."""
    t = tgtd_factory(name="ctl")
    t.new_target(1, "iqn.2026-11.org.tptraid:bad")
    member = "member=iscsi://127.0.0.1:3260/iqn.2026-11.org.tptraid:x/1"
    for spec, says in ((f"raid=1;mode=baseline;{member}", "RAID-1 needs at least 2 members"),
                       (f"raid=7;mode=baseline;{member};{member}", "raid=7")):
        with pytest.raises(TgtadmError):
            t.new_lun(1, 1, str(t.dir / "array.state"), bstype="tptraid", bsopts=spec)
        assert says in t.log(), t.log()[-2000:]


@pytest.mark.skipif(not net.netns_usable(), reason="needs network namespaces (root, iproute2)")
def test_mirror_link_flaps_under_load(tgtd_factory, mode, tmp_path, report):
    """test_failures.py's flapping link on a 3-way mirror: member 2's link
    cut and restored three times under one load; each time it is failed,
    the other copies serve, and it catches up; nothing lost."""
    link, c = net.Link(0), None
    try:
        c = start(tgtd_factory, mode, n=3, raid=1, host=link.host_addr, boxes={2: link})

        def flap():
            for _ in range(3):
                link.cut()
                time.sleep(FAIL_TIMEOUT + 3)
                assert array_state(c) == "degraded", show(c)
                link.restore()
                wait_state(c, {"optimal"}, timeout=60)
                time.sleep(1)

        clean_load(c, tmp_path, 33, flap, report,
                   "3-way mirror, member 2's link cut and restored 3 times under load")
        verify_all(c, tmp_path)
        scrub(c)
    finally:
        close_link(c, link)
