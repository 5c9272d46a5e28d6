"""make bench's benchmarks, run small and short so they cannot rot between
bench runs (make bench-smoke): each must start its clusters, measure every
workload, print its summary lines, leave its results section and stop
everything, exit status 0; then the report collects the sections.  The
numbers themselves are not looked at (make bench is where they mean
something), except Tables I and II, which are counts.  Every section goes
to pytest's tmp_path, never build/bench."""
import json
import os
import re
import subprocess

import pytest

from tptlib import net, paths

BENCH = paths.TOP / "scripts" / "bench"


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """One results directory for the module: the report test collects
    what the others left."""
    return tmp_path_factory.mktemp("bench")


def run(out, script, *args, timeout=300):
    r = subprocess.run([str(BENCH / script), *args], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "TPT_BENCH_OUT": str(out)})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert (out / f"{script}.md").exists() or script == "report", r.stderr
    return r.stdout


def test_datamover_bench_runs(out):
    text = run(out, "datamover", "--seconds", "0.3", "--repeat", "1")
    assert "lowest ratio" in text, text
    data = json.loads((out / "datamover.json").read_text())
    assert {r["op"] for r in data["rows"]} == {"put", "get"}, data


def test_array_bench_runs(out):
    text = run(out, "array", "--targets", "3", "--member-size", "16m", "--seconds", "0.5",
               "--passes", "1", "--no-stock")
    assert text.count("summary ") == 6, text
    assert "FAIL" not in text, text


def test_recovery_bench_runs(out):
    text = run(out, "recovery", "--targets", "3", "--member-size", "16m", "--seconds", "0.5",
               "--passes", "2")
    for mode in ("tpt", "baseline"):
        assert f"summary {mode}: degraded seq-read 1m" in text, text
        assert f"{mode} controller: position 2 rebuilt" in text, text


def test_direct_bench_runs(out):
    text = run(out, "direct", "--quick")
    # Both tables, every workload's four clients, the goal lines, the
    # one-host read; the PASS/MISS verdicts themselves are not looked at.
    rows = re.findall(r"^ *32k \S+ \S+ +(direct|unmerged|proxied|baseline) ", text, re.M)
    assert len(rows) == 4 * 7, text
    assert text.count("PASS (") + text.count("MISS (") == 7, text
    assert "goal: " in text and "one direct host, seq-read 4m" in text, text
    assert "FAIL" not in text, text
    for png in ("direct-read.png", "direct-write.png"):
        assert (out / png).stat().st_size > 0


def test_direct_bench_runs_on_a_mirror(out):
    text = run(out, "direct", "--raid", "1", "--quick")
    rows = re.findall(r"^ *32k \S+ \S+ +(direct|unmerged|proxied|baseline) ", text, re.M)
    assert len(rows) == 4 * 7, text
    assert "RAID-1 over 2 targets" in text, text
    # Issue 13's goal is RAID-5's.
    assert "PASS (" not in text and "MISS (" not in text and "goal: " not in text, text
    assert "FAIL" not in text, text
    assert (out / "direct-raid1.md").stat().st_size > 0
    for png in ("direct-raid1-read.png", "direct-raid1-write.png"):
        assert (out / png).stat().st_size > 0


def test_direct_bench_runs_on_raid6(out):
    text = run(out, "direct", "--raid", "6", "--quick")
    rows = re.findall(r"^ *32k \S+ \S+ +(direct|unmerged|proxied|baseline) ", text, re.M)
    assert len(rows) == 4 * 7, text
    assert "RAID-6 over 4 targets" in text, text
    assert "PASS (" not in text and "MISS (" not in text and "goal: " not in text, text
    assert "FAIL" not in text, text
    assert (out / "direct-raid6.md").stat().st_size > 0


def test_tables_bench_matches_the_paper(out):
    text = run(out, "tables", "--quick")
    assert "mismatches: 0" in text, text
    data = json.loads((out / "tables.json").read_text())
    assert len(data["rows"]) == 3 * 4 and not data["mismatches"], data


NETNS = net.netns_usable()


@pytest.mark.skipif(not NETNS, reason="needs network namespaces (root, iproute2)")
def test_scale_bench_runs(out):
    text = run(out, "scale", "--quick")
    # Every client and op, normal at H = 1 and 2 and degraded at H = 2.
    rows = re.findall(r"^\| (normal|degraded) \| 3 \| [12] \| (direct|proxied|baseline) \| "
                      r"(write|read) \| [0-9.]+ \|", text, re.M)
    assert len(rows) == 3 * 2 * 3, text
    assert "Rate: tc " in text and text.count("goal WRITE") == 2, text
    assert (out / "scale.json").exists()
    assert len(list(out.glob("scale-*.png"))) == 4
    # Its namespaces (named with its pid) are gone.
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert net.Switch.PREFIX not in left, left


@pytest.mark.skipif(not NETNS, reason="needs network namespaces (root, iproute2)")
def test_gather_bench_runs(out):
    text = run(out, "gather", "--quick")
    # Both link settings at N = 3 and 5, each with star, tree and flat.
    assert len(re.findall(r"^summary (loopback|shaped) N=[35]: tree/star latency [0-9.]+, "
                          r"throughput at qd 8 [0-9.]+; flat/tree latency [0-9.]+, "
                          r"throughput [0-9.]+$", text, re.M)) == 4, text
    # A rebuild onto a spare at N = 3 and 5: Baseline, flat and tree.
    assert len(re.findall(r"^summary rebuild N=[35]: tree/flat [0-9.]+, "
                          r"tree/baseline [0-9.]+$", text, re.M)) == 2, text
    assert len(list(out.glob("gather-*.png"))) == 3
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert net.Switch.PREFIX not in left, left


def test_report_collects_every_section(out):
    text = run(out, "report")
    for name in ("scale", "gather"):
        assert (f"{name}: no section, skipped" in text) != NETNS, text
    assert "STALE" not in text, text
    md = (out / "results.md").read_text()
    data = json.loads((out / "results.json").read_text())
    for name in ("datamover", "array", "recovery", "direct", "direct-raid1", "direct-raid6",
                 "tables"):
        assert name in data["sections"], data.keys()
    assert data["missing"] == ([] if NETNS else ["scale", "gather"])
    assert data["header"]["cores"] == os.cpu_count()
    # In the fixed order, each under its own heading.
    titles = ["Datamover", "Array", "Host-direct I/O:", "Host-direct I/O on RAID-1",
              "Host-direct I/O on RAID-6", "Tables", "Recovery"]
    heads = [md.index(f"## {t}")
             for t in titles + (["Scalability", "Star, binary-tree and flat"] if NETNS else [])]
    assert heads == sorted(heads), md[:2000]
