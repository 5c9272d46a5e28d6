"""make bench's array, recovery, host-direct and scalability benchmarks, run small and short so they
cannot rot between bench runs: each must start its clusters, measure every
workload, print its summary lines and stop everything, exit status 0.  The
numbers themselves are not looked at (make bench is where they mean
something)."""
import os
import re
import subprocess

import pytest

from tptlib import net, paths

BENCH = paths.TOP / "scripts" / "bench"


def run(script, *args, timeout=300):
    r = subprocess.run([str(BENCH / script), *args], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return r.stdout


def test_array_bench_runs():
    out = run("array", "--targets", "3", "--member-size", "16m", "--seconds", "0.5",
              "--passes", "1", "--no-stock")
    assert out.count("summary ") == 6, out
    assert "FAIL" not in out, out


def test_recovery_bench_runs():
    out = run("recovery", "--targets", "3", "--member-size", "16m", "--seconds", "0.5",
              "--passes", "2")
    for mode in ("tpt", "baseline"):
        assert f"summary {mode}: degraded seq-read 1m" in out, out
        assert f"{mode} controller: position 2 rebuilt" in out, out


def test_direct_bench_runs():
    out = run("direct", "--quick")
    # Both tables, every workload's three clients, the goal lines, the
    # one-host read; the PASS/MISS verdicts themselves are not looked at.
    rows = re.findall(r"^ *32k \S+ \S+ +(direct|proxied|baseline) ", out, re.M)
    assert len(rows) == 3 * 7, out
    assert out.count("PASS (") + out.count("MISS (") == 7, out
    assert "goal: " in out and "one direct host, seq-read 4m" in out, out
    assert "FAIL" not in out, out



@pytest.mark.skipif(not net.netns_usable(), reason="needs network namespaces (root, iproute2)")
def test_scale_bench_runs(tmp_path):
    # Its results go to tmp_path, never over build/bench's.
    r = subprocess.run([str(BENCH / "scale"), "--quick"], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "TPT_BENCH_OUT": str(tmp_path)})
    out = r.stdout
    assert r.returncode == 0, out[-4000:] + r.stderr[-4000:]
    # Every client and op, normal at H = 1 and 2 and degraded at H = 2.
    rows = re.findall(r"^\| (normal|degraded) \| 3 \| [12] \| (direct|proxied|baseline) \| "
                      r"(write|read) \| [0-9.]+ \|", out, re.M)
    assert len(rows) == 3 * 2 * 3, out
    assert "Rate: tc " in out and out.count("goal WRITE") == 2, out
    assert (tmp_path / "scale.md").exists() and (tmp_path / "scale.json").exists()
    assert len(list(tmp_path.glob("scale-*.png"))) == 4
    # Its namespaces (named with its pid, as its work directory is) are gone.
    pid = re.search(r"tpt-bench-scale-(\d+)\.", r.stderr).group(1)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{net.Switch.PREFIX}{pid}-" not in left, left
