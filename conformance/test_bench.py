"""make bench's array, recovery and host-direct benchmarks, run small and short so they
cannot rot between bench runs: each must start its clusters, measure every
workload, print its summary lines and stop everything, exit status 0.  The
numbers themselves are not looked at (make bench is where they mean
something)."""
import re
import subprocess

from tptlib import paths

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
