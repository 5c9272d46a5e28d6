"""Random faults, one box at a time, under one load (make soak).

Every box on a modelled switch; a seeded random sequence of faults, each
healed and waited out before the next: a target killed and restarted, a
target hung (SIGSTOP) for less or more than fail_timeout, a target's
cable pulled for less or more than fail_timeout, two targets cut from
each other, the controller's own cable pulled, the controller killed
and restarted (the host's session lost with it: its load starts again
on the same model), a member replaced by the spare (replace=URL; the
faults after it may land while it runs, and the box it held out is
added back as the next spare).  One box at a time is
what RAID-5 promises to survive: the host must see no error and no wrong
byte, and at the end the array is optimal, every acknowledged write
reads back, and every stripe's parity is right.
"""
import os
import random
import signal
import subprocess
import time

import pytest

from tptlib import net, paths
from tptlib.tgtd import TgtadmError
from test_failures import (FAIL_TIMEOUT, array_state, assemble, close_switch, counters,
                           members, restart_target, scrub, set_param, show, start, verify_all,
                           wait_state)

CHAOS_FAULTS = int(os.environ.get("TPT_CHAOS_FAULTS", "12"))
CHAOS_SEED = int(os.environ.get("TPT_CHAOS_SEED") or time.time())
N = 5


@pytest.mark.skipif(not net.netns_usable(), reason="needs network namespaces (root, iproute2)")
@pytest.mark.skipif("TPT_SOAK_CYCLES" not in os.environ, reason="minutes per mode: make soak")
@pytest.mark.parametrize("mode", ["tpt", "baseline"])
def test_random_faults_one_box_at_a_time(tgtd_factory, mode, tmp_path, report):
    rng = random.Random(CHAOS_SEED)
    sw, c = net.Switch(), None
    done = []
    try:
        boxes = [sw.add_box(f"t{i}") for i in range(N + 1)]
        ctl, hbox = sw.add_box("ctl"), sw.add_box("h0")
        c = start(tgtd_factory, mode, n=N, spares=1, boxes=dict(enumerate(boxes)),
                  controller_box=ctl)
        host = sw.exec_prefix(hbox)

        def new_load():
            """Open-ended, on the model kept in tmp_path across loads."""
            return subprocess.Popen(
                [*host, str(paths.tool("tpt-iscsi-verify")), "--model", str(tmp_path),
                 "--zero", "--seconds", "100000", "--qd", "8", "--max-bs", "512k", c.url],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        load, totals = new_load(), []
        time.sleep(3)
        i, again = 0, False
        for k in range(CHAOS_FAULTS):
            # Now and then the same box again before it has caught up: it
            # is still the one box out.
            if not again:
                i = rng.randrange(N + 1)
            t = c.targets[i]
            kinds = ["kill", "hang", "cable", "ctl_cable"]
            if not again:
                kinds += ["pair", "ctl_crash", "replace"]
            fault = rng.choice(kinds)
            if fault == "kill":
                t.killed_on_purpose = True
                t.kill()
                time.sleep(rng.uniform(0, 8))
                restart_target(c, i)
                what = f"target {i} killed and restarted"
            elif fault == "hang":
                s = rng.uniform(0.5, 2 * FAIL_TIMEOUT + 4)
                os.killpg(t.proc.pid, signal.SIGSTOP)
                time.sleep(s)
                os.killpg(t.proc.pid, signal.SIGCONT)
                what = f"target {i} hung {s:.1f} s"
            elif fault == "cable":
                s = rng.uniform(0.5, 2 * FAIL_TIMEOUT + 8)
                sw.port(boxes[i], "down")
                time.sleep(s)
                sw.port(boxes[i], "up")
                what = f"target {i}'s cable out {s:.1f} s"
            elif fault == "replace":
                # Box i's position, or a random one if box i has none.
                boxes_now = members(c)
                for b, (url, st, _) in boxes_now.items():
                    if st == "held":
                        set_param(c, f"readd={url}")
                serving = sorted(b for b, (_, _, pos) in boxes_now.items() if pos >= 0)
                b = i if i in serving else rng.choice(serving)
                try:
                    # Slow enough for the next faults to land while it
                    # runs (every recovery after it too: 4 s a box).
                    set_param(c, "rebuild_rate=4")
                    set_param(c, f"replace={c.target_urls[b]}")
                    what = f"replace of box {b} asked"
                except TgtadmError:
                    what = f"replace of box {b} refused (no spare ready)"
            elif fault == "pair":
                j = (i + 1 + rng.randrange(N)) % (N + 1)
                s = rng.uniform(1, 2 * FAIL_TIMEOUT + 6)
                sw.cut_pair(boxes[i], boxes[j], True)
                time.sleep(s)
                sw.cut_pair(boxes[i], boxes[j], False)
                what = f"targets {i} and {j} cut from each other {s:.1f} s"
            elif fault == "ctl_crash":
                # The host's session goes with it: what it had in flight
                # may fail, and is unknown to the model; no byte it was
                # told is written may read back otherwise.
                c.controller.killed_on_purpose = True
                c.controller.kill()
                out, err = load.communicate(timeout=120)
                assert "mismatches=0" in out, out + err[-3000:]
                totals.append(out.strip())
                assemble(c)
                wait_state(c, {"optimal"}, timeout=180)
                load = new_load()
                what = "the controller killed and restarted"
            else:
                s = rng.uniform(1, 25)
                sw.port(ctl, "down")
                time.sleep(s)
                sw.port(ctl, "up")
                # Its connections can take as long again to come out of
                # TCP's backoff: a host command caught in that and a second
                # outage at once would outlast the load's 60 s timeout, as
                # a host's own would time out and abort.
                time.sleep(s)
                what = f"the controller's cable out {s:.1f} s"
            done.append(what)
            report(f"{mode} seed {CHAOS_SEED} fault {k}: {what}")
            assert load.poll() is None, load.communicate()
            again = rng.random() < 0.3
            if again:
                time.sleep(rng.uniform(0, 3))
                continue
            # A box out about fail_timeout may be failed only now: its
            # catch-up is part of this fault, not the next one's.
            time.sleep(FAIL_TIMEOUT + 2)
            wait_state(c, {"optimal"}, timeout=180)
            time.sleep(rng.uniform(1, 4))
        wait_state(c, {"optimal"}, timeout=180)
        deadline = time.monotonic() + 120
        while "TPT-RAID recovery: replace" in show(c):
            assert time.monotonic() < deadline, show(c)
            time.sleep(0.5)
        load.send_signal(signal.SIGINT)
        out, err = load.communicate(timeout=120)
        report(f"{mode}: {len(done)} faults: {out.strip()} (before controller restarts: "
               f"{totals}); counters {counters(c)}")
        assert "errors=0 mismatches=0" in out, out + err[-3000:]
        assert array_state(c) == "optimal", show(c)
        verify_all(c, tmp_path, prefix=host)
        scrub(c, prefix=host)
    finally:
        close_switch(c, sw)
