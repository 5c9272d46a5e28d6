"""RAID-6 (controller/raid6.c): P and Q, any two boxes may be lost, in both
modes.

As test_failures.py does for RAID-5: real tgtd processes, tpt-iscsi-verify's
load checked against a byte model, and boxes killed under it.  In TPT mode
the targets compute Q and any two lost units themselves with weighted
passes (docs/protocol.md 3.1, 7.8); the Baseline controller computes them.
Afterwards every acknowledged write reads back and `tpt-scrub --raid 6`
finds every stripe's P and Q right (test_failures.scrub).
"""
import os
import re
import subprocess
import time

import pytest

from tptlib import paths, proto
from tptlib.client import GOOD
from tptlib.tgtd import TgtadmError
# The mode fixture (tpt and baseline) and the RAID-5 tests' helpers.
from test_failures import (CHECK_CONDITION, FAIL_TIMEOUT, MEDIUM_ERROR,  # noqa: F401
                           UNIT, Load, array_state, clean_load, counters, kill, members,
                           mode, resync_all, restart_target, scrub, set_param, show,
                           spoil_units, start, units_of, verify_all, wait_check, wait_log,
                           wait_state)


def test_raid6_serves_with_two_boxes_killed_under_load(tgtd_factory, mode, tmp_path, report):
    """Two of five boxes killed, one after the other, under the load: the
    host sees nothing, every write reads back with both gone, and both
    come back and catch up."""
    c = start(tgtd_factory, mode, n=5, raid=6)

    def lose_two():
        kill(c.targets[0])
        time.sleep(FAIL_TIMEOUT + 2)
        kill(c.targets[3])

    # Writes up to 1 MiB: runs of whole stripes, each member's PREP WRITE
    # stepping over its P and Q units (protocol.md 4.5, 7.8).
    clean_load(c, tmp_path, 16, lose_two, report, "RAID-6 of 5, 2 members killed mid-load",
               extra=("--max-bs", "1m"))
    assert array_state(c) == "degraded", show(c)
    assert counters(c)["member_failures"] == 2
    verify_all(c, tmp_path)
    restart_target(c, 0)
    restart_target(c, 3)
    wait_state(c, {"optimal"}, timeout=90)
    verify_all(c, tmp_path)
    scrub(c)


def test_raid6_two_lost_boxes_rebuilt_onto_spares(tgtd_factory, mode, tmp_path, report):
    """Both data-and-parity units of two lost boxes rebuilt onto two
    spares under load, from one read of the survivors for both: both
    spares are taken at once, and the first position's rebuild writes the
    second's units too wherever that lacks them (before: the second was
    rebuilt only after the first, reading every survivor again)."""
    # About 4 s per position's 240 stripes: the second loss is seen
    # long before the first rebuild could end.
    c = start(tgtd_factory, mode, n=4, spares=2, raid=6, extra_opts=("rebuild_rate=4",))

    def lose_two():
        kill(c.targets[1])
        kill(c.targets[2])

    clean_load(c, tmp_path, 12, lose_two, report,
               "RAID-6 of 4, 2 members killed mid-load, 2 spares rebuilt in")
    wait_state(c, {"optimal"}, timeout=120)
    boxes = members(c)
    assert sorted(boxes[i][2] for i in (4, 5)) == [1, 2], show(c)
    log = c.controller.log()
    assert re.search(r"rebuilding position \d onto member \d \(.*\): \d+ stripes.*; with "
                     r"position \d where it lacks them too, from the same reads", log), \
        log[-3000:]
    done = {int(p): int(n) for p, n in re.findall(r"position (\d) rebuilt: (\d+) stripes",
                                                  log)}
    assert set(done) == {1, 2}, log[-3000:]
    # One position's job did (nearly) all; the other's what the first had
    # done before the second box was lost.
    total = int(re.search(r"rebuilding position \d onto member \d \(.*\): (\d+) stripes",
                          log).group(1))
    assert min(done.values()) < total // 2, done
    report(f"{mode}: two boxes lost: one rebuild pass wrote both spares; the second "
           f"position's own job then rebuilt {min(done.values())} of {total} stripes")
    verify_all(c, tmp_path)
    scrub(c)


def test_raid6_third_box_lost_fails_clearly(tgtd_factory, mode, tmp_path, report):
    """Three boxes gone: the host gets CHECK CONDITION for what cannot be
    rebuilt, never wrong data, and the array says failed."""
    c = start(tgtd_factory, mode, n=5, raid=6)
    res, _ = Load(c, tmp_path, 2).result()
    assert res["errors"] == 0
    for i in (0, 2, 4):
        kill(c.targets[i])
    wait_state(c, {"failed"}, timeout=FAIL_TIMEOUT + 10)
    r = subprocess.run([str(paths.tool("tpt-iscsi-verify")), "--model", str(tmp_path),
                        "--verify", c.url], capture_output=True, text=True, timeout=180)
    report(f"{mode}: RAID-6, three members lost: {r.stdout.strip()}")
    m = re.search(r"errors=(\d+) mismatches=(\d+)", r.stdout)
    assert m and int(m.group(1)) > 0 and m.group(2) == "0", r.stdout + r.stderr


def test_raid6_check_counts_and_resync_repairs_p_and_q(tgtd_factory, mode, tmp_path, report):
    """A P unit, a Q unit and a data unit spoiled behind the array's back,
    and both P and Q of a fourth stripe: tpt-scrub --raid 6 and check=yes
    (under a host's load) each count the four stripes and change nothing,
    the check naming the one wrong unit's position in each of the first
    three from the two syndromes (none in the fourth); resync=yes computes
    P and Q again (the spoiled data unit's stripe then agrees with what
    the unit now holds), after which the scrub and a second check find
    nothing."""
    c = start(tgtd_factory, mode, n=5, raid=6)
    # The load keeps to the first 24 MiB, stripes 0-127 of 240.
    span = ("--span", "24m")
    res, err = Load(c, tmp_path, 3, extra=span).result()
    assert res["errors"] == 0 and res["mismatches"] == 0, err
    # Stripe s: P on member 4 - s mod 5, Q on the member after it.
    # P, Q, a data unit; stripe 209's P (member 0) and Q (member 1).
    spoiled = {4: (200,), 2: (203,), 0: (206, 209), 1: (209,)}
    for m, stripes in spoiled.items():
        spoil_units(c, m, stripes)
    before = {m: units_of(c, m, st) for m, st in spoiled.items()}
    scrub(c, mismatches=4, wrong_units={200: 4, 203: 2, 206: 0})
    set_param(c, "rebuild_rate=4")
    fig = []

    def check_under_load():
        set_param(c, "check=yes")
        fig.append(wait_check(c, timeout=90))

    clean_load(c, tmp_path, 6, check_under_load, report, "RAID-6 check=yes under load",
               extra=span)
    _, checked, total, mismatched, how = fig[0]
    assert (checked, mismatched, how) == (total, 4, "completed"), fig
    log = c.controller.log()
    said = dict(re.findall(r"check: stripe (\d+) \(array blocks \d+-\d+\): its parity "
                           r"disagrees with its data(?:: position (\d+)'s unit)?", log))
    assert said == {"200": "4", "203": "2", "206": "0", "209": ""}, said
    assert "one wrong unit each in position 0: 1, position 2: 1, position 4: 1;" in log
    # Stripe 206's is a data unit: resync=yes would keep it, and says so.
    assert "nothing was repaired: resync=yes would keep the wrong units named that hold " \
        "data" in log, log[-3000:]
    for p in (0, 2, 4):
        assert f"TPT-RAID check: position {p} wrong_units 1" in show(c), show(c)
    report(f"{mode}: RAID-6 check located the one wrong unit of 3 stripes (P, Q, data) "
           f"from the syndromes, none in a stripe with two")
    assert {m: units_of(c, m, st) for m, st in spoiled.items()} == before
    set_param(c, "rebuild_rate=0")
    resync_all(c)
    wait_state(c, {"optimal"}, timeout=60)
    deadline = time.monotonic() + 60
    while "TPT-RAID recovery: resync" in show(c):
        assert time.monotonic() < deadline, show(c)
        time.sleep(0.2)
    scrub(c)
    set_param(c, "check=yes")
    f = wait_check(c)
    assert f[3] == 0, f
    verify_all(c, tmp_path)
    kill(c.targets[1])
    wait_state(c, {"degraded"}, timeout=FAIL_TIMEOUT + 10)
    with pytest.raises(TgtadmError):
        set_param(c, "check=yes")


def test_raid6_operator_forces_a_unit_written_ahead_of_the_first_resync(
        tgtd_factory, client, mode, report):
    """A data unit written ahead of a new RAID-6's first resync, its box
    lost: P and Q may both disagree with it, so a read of it gets MEDIUM
    ERROR; force_recovery=yes takes the stripe from P and Q as they are
    and names its blocks, after which it reads (whatever they give); the
    box back, it holds the unit and everything reads as written."""
    c = start(tgtd_factory, mode, n=5, raid=6, member_bytes=32 << 20, assume_clean=False,
              extra_opts=("rebuild_rate=1",))
    # Stripe 471 (region 7, far ahead of the resync at 1 MB/s): P on
    # member 4 - 471 mod 5 = 3, Q on 4, data unit 0 on member 0.
    stripe, blocks = 471, UNIT // 512
    lba = stripe * 3 * blocks
    data = os.urandom(UNIT)
    client.login("a", c.url)
    client.clear_unit_attentions("a")
    assert client.command("a", proto.write16_cdb(lba, blocks), data=data)["status"] == GOOD
    kill(c.targets[0])
    wait_state(c, {"degraded"}, timeout=FAIL_TIMEOUT + 10)
    r = client.command("a", proto.read16_cdb(lba, blocks), inlen=UNIT)
    assert r["status"] == CHECK_CONDITION, r["status"]
    assert proto.parse_sense(r["sense"]).key == MEDIUM_ERROR, r
    set_param(c, "force_recovery=yes")
    log = wait_log(c, r"force_recovery: \d+ stripes taken as they are")
    assert (f"stripe {stripe} taken from its parity as it is: blocks {lba}-"
            f"{lba + blocks - 1} may not be what was written") in log, log[-3000:]
    assert client.command("a", proto.read16_cdb(lba, blocks), inlen=UNIT)["status"] == GOOD
    report(f"{mode}: RAID-6 unit written ahead of the first resync, its box lost: MEDIUM "
           f"ERROR, then force_recovery=yes took the stripe and named its blocks")
    set_param(c, "rebuild_rate=0")
    restart_target(c, 0)
    wait_state(c, {"optimal"}, timeout=90)
    wait_log(c, r"parity of \d+ stripes computed", timeout=90)
    assert client.command("a", proto.read16_cdb(lba, blocks), inlen=UNIT)["data"] == data
    scrub(c)
