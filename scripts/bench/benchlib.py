"""What the array benchmarks share: sizes on the command line, tgtd
instances in one work directory, CPU time of a process, the controller's
TPT-RAID counters, one tpt-iscsi-load run, number formatting, and the
results each benchmark leaves for scripts/bench/report (a Markdown
section, its data as JSON, PNG plots)."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "conformance"))

from tptlib.tgtd import Tgtd  # noqa: E402

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
CLK_TCK = os.sysconf("SC_CLK_TCK")


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def positive_float(text):
    v = float(text)
    if not v > 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return v


def cpu_seconds(proc):
    """utime + stime of a running process, 0 once it is gone."""
    try:
        with open(f"/proc/{proc.pid}/stat") as f:
            stat = f.read()
    except OSError:
        return 0.0
    # Fields after the parenthesised command name; utime, stime are 14, 15.
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def show(server):
    return server.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout


def controller_counters(server):
    """The TPT-RAID counters line of a controller tgtd as a dict."""
    m = re.search(r"TPT-RAID counters: (.*)", show(server))
    if not m:
        return {}
    words = m.group(1).split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2])}


def array_state(server):
    m = re.search(r"TPT-RAID: .* state (\w+) ", show(server))
    return m.group(1) if m else None


def run_load(args, url, pattern, bs, span, seconds=None, nbytes=None, direct=False,
             qd=None, netns=None, extra_args=(), at_start=None, at_end=None):
    """One tpt-iscsi-load run (args: bindir, qd, timeout) for `seconds` or
    `nbytes`: its ops, bytes, seconds, mbps, iops and direct (bool).
    direct: as the extended host (--direct), which fails the run unless
    every byte moved host-direct; checked here again, so a fallback to
    plain iSCSI can never be reported as a direct figure.  netns: run it
    in that network namespace (a host box); extra_args: more options of
    tpt-iscsi-load (--offset, --initiator).  at_start, at_end: called
    logged in, just before the first command and just after the last
    completes (tpt-iscsi-load --gate), so what they sample leaves out
    login and logout - a host logs in once and then runs for hours."""
    limit = ["--bytes", str(nbytes)] if nbytes else ["--seconds", f"{seconds:g}"]
    gated = at_start is not None or at_end is not None
    cmd = [str(args.bindir / "tpt-iscsi-load"), *(["--gate"] if gated else []),
           "--pattern", pattern, "--bs", str(bs),
           "--qd", str(qd or args.qd), *limit, "--span", str(span),
           "--timeout", f"{args.timeout:g}", *(["--direct"] if direct else []),
           *extra_args, url]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    limit_s = (seconds or 600) + args.timeout + 30
    if gated:
        returncode, stdout, stderr = gated_run(cmd, limit_s, at_start, at_end)
    else:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s)
        returncode, stdout, stderr = r.returncode, r.stdout, r.stderr
    if returncode != 0:
        raise RuntimeError((stderr.strip() or stdout.strip()
                            or f"exit status {returncode}"))
    vals = dict(kv.split("=", 1) for kv in stdout.split() if "=" in kv)
    if direct and vals.get("direct") != "yes":
        raise RuntimeError(f"asked for a direct run, got direct={vals.get('direct')}")
    return {"ops": int(vals["ops"]), "bytes": int(vals["bytes"]),
            "seconds": float(vals["seconds"]), "mbps": float(vals["mbps"]),
            "iops": float(vals["iops"]), "direct": vals.get("direct") == "yes",
            "commands": int(vals.get("commands", vals["ops"]))}


def gated_run(cmd, limit_s, at_start, at_end):
    """cmd (a tpt-iscsi-load --gate) with at_start/at_end called at its
    gates; killed past limit_s.  Its exit status, stdout and stderr."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(limit_s, p.kill)
    watchdog.start()
    result = ""
    try:
        if p.stdout.readline().strip() == "ready":
            if at_start:
                at_start()
            p.stdin.write("go\n")
            p.stdin.flush()
            result = p.stdout.readline()
            if result and at_end:
                at_end()
            p.stdin.write("\n")
            p.stdin.flush()
    except BrokenPipeError:
        pass                    # it ended early: its status says why
    finally:
        rest, err = p.communicate()
        watchdog.cancel()
    return p.returncode, result + rest, err


def measure_load(args, url, server, targets, pattern, bs, span, seconds=None,
                 nbytes=None, counters=True, direct=False, qd=None, extra_args=()):
    """run_load() (direct, qd, extra_args: as there) with the CPU seconds of
    the tgtd `server` (ctl_cpu) and of `targets` (tgt_cpu) it cost, and the
    change of server's TPT-RAID counters while it ran (stats; empty without
    `counters`), all from the first command to the last completion: login
    and logout left out (run_load's gates), the counters read outside the
    CPU samples (tgtadm costs the server CPU).  A request the controller
    counted failed fails the measurement."""
    seen = {}

    def cpu_now():
        return cpu_seconds(server.proc), sum(cpu_seconds(t.proc) for t in targets)

    def start():
        seen["st0"] = controller_counters(server) if counters else {}
        seen["cpu0"] = cpu_now()

    def end():
        seen["cpu1"] = cpu_now()
        seen["st1"] = controller_counters(server) if counters else {}

    r = run_load(args, url, pattern, bs, span, seconds, nbytes, direct, qd,
                 extra_args=extra_args, at_start=start, at_end=end)
    if len(seen) != 4:
        raise RuntimeError("tpt-iscsi-load passed no gate")
    r["ctl_cpu"] = seen["cpu1"][0] - seen["cpu0"][0]
    r["tgt_cpu"] = seen["cpu1"][1] - seen["cpu0"][1]
    st0, st1 = seen["st0"], seen["st1"]
    r["stats"] = {k: st1[k] - st0.get(k, 0) for k in st1}
    if r["stats"].get("failed"):
        raise RuntimeError(f"the controller counted {r['stats']['failed']} failed requests")
    return r


def merge_runs(a, b):
    """Two measure_load() passes of one workload as one result (a may be
    None: the first pass)."""
    if a is None:
        return b
    out = {k: a[k] + b[k] for k in ("ops", "bytes", "seconds", "ctl_cpu", "tgt_cpu")}
    out["commands"] = a.get("commands", a["ops"]) + b.get("commands", b["ops"])
    out["mbps"] = out["bytes"] / out["seconds"] / 1e6
    out["iops"] = out["ops"] / out["seconds"]
    out["stats"] = {k: a["stats"].get(k, 0) + b["stats"].get(k, 0)
                    for k in set(a["stats"]) | set(b["stats"])}
    return out


def per_gib(r, value):
    """value per GiB the host moved in result r."""
    return value / (r["bytes"] / GiB) if r and r["bytes"] else None


def pick_workdir(args, need, prefix):
    """A fresh directory in args.workdir, else /dev/shm if it has room for
    `need` bytes, else build/."""
    for base in ([Path(args.workdir)] if args.workdir else [Path("/dev/shm"), TOP / "build"]):
        try:
            base.mkdir(parents=True, exist_ok=True)
            st = os.statvfs(base)
        except OSError:
            continue
        if st.f_bavail * st.f_frsize >= need * 1.2 or args.workdir:
            return Path(tempfile.mkdtemp(prefix=f"tpt-bench-{prefix}.", dir=base))
    raise SystemExit(f"{prefix}: no room for {need >> 20} MiB of backing files in "
                     f"/dev/shm or {TOP / 'build'}")


class Factory:
    """A cluster.start() tgtd factory: every instance in its own directory
    under one work directory, each with its own control port."""

    def __init__(self, workdir, prefix):
        self.workdir = workdir
        self.prefix = prefix
        self.started = []

    _next_port = 7101

    def __call__(self, name=None, cls=Tgtd, **kw):
        name = f"{self.prefix}-{name}"
        port = Factory._next_port
        Factory._next_port += 1
        inst = cls(self.workdir / name, name, port, **kw)
        self.started.append(inst)     # before start(): stop it even if half up
        return inst.start()

    def stop_all(self, who):
        """Stop every instance, the controllers first (they hold sessions
        to the targets); kill what does not stop."""
        for inst in sorted(self.started, key=lambda i: "target" in i.name):
            try:
                inst.stop()
            except Exception as e:  # noqa: BLE001
                print(f"{who}: stopping {inst.name}: {e}; killing it", file=sys.stderr)
                try:
                    inst.kill()
                except Exception:  # noqa: BLE001 -- nothing more to do
                    pass


def allocate(path):
    """Give a sparse backing file all its blocks now, so that no
    configuration pays for first-touch allocation inside a measurement."""
    with open(path, "r+b") as f:
        os.posix_fallocate(f.fileno(), 0, os.fstat(f.fileno()).st_size)


def fmt(v, digits=1):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}"


def results_dir():
    """Where a benchmark leaves its results: $TPT_BENCH_OUT, else
    build/bench (what scripts/bench/report collects)."""
    out = Path(os.environ.get("TPT_BENCH_OUT") or TOP / "build" / "bench")
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_results(name, title, markdown, data, plots=()):
    """Leave benchmark `name`'s section in results_dir(): NAME.md (a level-2
    heading `title`, then `markdown`, then each plot, a PNG file name in the
    same directory, as an image) and NAME.json (`data`, which must be
    plain JSON: dicts, lists, numbers, strings)."""
    out = results_dir()
    text = f"## {title}\n\n{markdown.strip()}\n"
    for png in plots:
        text += f"\n![{png}]({png})\n"
    (out / f"{name}.md").write_text(text)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"{name}: results in {out / (name + '.md')}", file=sys.stderr)


def plot_lines(png, title, xlabel, ylabel, series, logx=False, logy=False, marks=None):
    """Draw `series` ({label: [(x, y), ...]}, y None for a missing point)
    as lines into results_dir()/png; `marks` ({label: y}) as dashed
    horizontal reference lines (a link limit, a goal).  Returns the file
    name, for write_results(plots=...)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for label, points in series.items():
        pts = [(x, y) for x, y in points if y is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    for label, y in (marks or {}).items():
        ax.axhline(y, linestyle="--", linewidth=1, color="grey")
        ax.annotate(label, (0, y), xycoords=("axes fraction", "data"), fontsize=8,
                    color="grey", va="bottom")
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(results_dir() / png)
    plt.close(fig)
    return png


class Printed:
    """`with Printed() as p:` prints as usual; p.text is what was printed
    inside, for a section that carries a benchmark's terminal report."""

    def __enter__(self):
        self._stdout, self._parts = sys.stdout, []
        sys.stdout = self
        return self

    def write(self, text):
        self._parts.append(text)
        return self._stdout.write(text)

    def flush(self):
        self._stdout.flush()

    def __exit__(self, *exc):
        sys.stdout = self._stdout

    @property
    def text(self):
        return "".join(self._parts)


def fenced(text):
    """text as a Markdown code block (a terminal report, columns kept)."""
    return "```\n" + text.strip("\n") + "\n```"


def run_args(args, *names):
    """The named options of an argparse namespace as plain JSON values."""
    return {n: (str(v) if isinstance(v, Path) else v)
            for n in names for v in [getattr(args, n, None)]}


def markdown_table(head, rows):
    """A Markdown table: head a list of column titles, rows lists of cells
    (already formatted text)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
