"""The controller's own link out, and back (every box on a switch port;
the controller's port goes down): no member is failed for the silence,
the host's I/O waits and goes on without an error, and every byte and
every stripe's parity is right afterwards.  docs/controller.md has the
rules (member.c: member_silence_excused(), member_all_silent())."""
import subprocess
import time

import pytest

from tptlib import net, paths
from test_failures import (array_state, close_switch, counters, mode, scrub, show,  # noqa: F401
                           start, verify_all)


def controller_outage_under_load(tgtd_factory, mode, tmp_path, report, outage, seconds, what):
    """4 targets, the controller and the host each on a switch port, and
    a load of `seconds` from the host while outage(sw, ctl, boxes, c)
    pulls cables.  Then: the load error-free, no member failed, the
    array optimal, every byte and every stripe's parity right."""
    sw, c = net.Switch(), None
    try:
        boxes = [sw.add_box(f"t{i}") for i in range(4)]
        ctl, hbox = sw.add_box("ctl"), sw.add_box("h0")
        c = start(tgtd_factory, mode, n=4, boxes=dict(enumerate(boxes)), controller_box=ctl)
        host = sw.exec_prefix(hbox)
        load = subprocess.Popen(
            [*host, str(paths.tool("tpt-iscsi-verify")), "--model", str(tmp_path), "--zero",
             "--seconds", str(seconds), "--qd", "8", "--max-bs", "192k", c.url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        outage(sw, ctl, boxes, c)
        out, err = load.communicate(timeout=seconds + 240)
        report(f"{mode}: {what} mid-load: {out.strip()}")
        assert load.returncode == 0 and "errors=0 mismatches=0" in out, out + err[-3000:]
        assert counters(c)["member_failures"] == 0, show(c)
        assert array_state(c) == "optimal", show(c)
        verify_all(c, tmp_path, prefix=host)
        scrub(c, prefix=host)
    finally:
        close_switch(c, sw)


CONTROLLER_CUT = 40    # seconds: past every limit below


@pytest.mark.skipif(not net.netns_usable(), reason="needs network namespaces (root, iproute2)")
def test_controller_link_cut_then_restored_fails_none(tgtd_factory, mode, tmp_path, report):
    """The controller's own cable pulled for 40 s under load and plugged
    back (every box on a switch port; the controller's port goes down):
    longer than fail_timeout (3 s), the command backstop (19 s), a span's
    retries (16 s) and the targets' hold time for a request (30 s).
    Every member connection then sits in TCP's retransmission backoff,
    and comes back up to another 40 s after the link, each at its own
    moment.  No member is failed, the host's I/O waits and goes on
    without an error, and every byte reads back.  Before, a 15 s cut
    failed the two members that came back last - the first ones back
    answered NOP-Outs sent after the cut - and the array with them; and
    a cut past the targets' hold time had them drop the requests in
    flight, whose WRITE NEW DATA then failed the members."""
    def outage(sw, ctl, boxes, c):
        sw.port(ctl, "down")
        time.sleep(CONTROLLER_CUT)
        assert counters(c)["member_failures"] == 0, show(c)
        sw.port(ctl, "up")

    controller_outage_under_load(tgtd_factory, mode, tmp_path, report, outage,
                                 CONTROLLER_CUT + 12,
                                 f"the controller's link cut for {CONTROLLER_CUT} s")


@pytest.mark.skipif(not net.netns_usable(), reason="needs network namespaces (root, iproute2)")
def test_controller_link_cut_twice_fails_none(tgtd_factory, mode, tmp_path, report):
    """The controller's cable out 10 s, back 4 s, out 20 s under load.
    In the 4 s between, target 1 says nothing, as a connection still in
    retransmission backoff from the first cut does (its own port is down
    meanwhile), while the others answer: its silence spans both cuts,
    34 s, and the second silence began within the first one's backoff,
    so the controller takes both as one outage (member_heard()).  No
    member is failed, and the host sees no error.  Before, target 1 was
    failed during the second cut, once the first cut and its backoff
    were over (the others had answered later NOP-Outs in the gap), and
    after it, only the second cut was excused (20 s, back 4 s and 12 s
    failed it too, with the host's commands in flight on it; found by
    the random faults of make soak)."""
    first, back, second = 10, 4, 20

    def outage(sw, ctl, boxes, c):
        sw.port(ctl, "down")
        time.sleep(first)
        sw.port(boxes[1], "down")
        sw.port(ctl, "up")
        time.sleep(back)
        sw.port(ctl, "down")
        sw.port(boxes[1], "up")
        time.sleep(second)
        sw.port(ctl, "up")

    controller_outage_under_load(tgtd_factory, mode, tmp_path, report, outage,
                                 first + back + second + 12,
                                 f"the controller's link out {first} s, back {back} s, "
                                 f"out {second} s")
