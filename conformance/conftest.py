"""Fixtures shared by the conformance suites.

tgtd_factory starts any number of our tgtd instances on free loopback ports,
each in its own directory with its own control port; every instance is torn
down when the test ends, pass or fail, and a test fails if its daemon died
on its own or a sanitizer reported anything."""
import itertools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tptlib import paths
from tptlib.client import TptClient
from tptlib.targets import TptTargets
from tptlib.tgtd import Tgtd

# tgtd's control port numbers its management socket: two test runs at once
# need apart ranges (TPT_CONTROL_PORT_BASE).
_control_ports = itertools.count(int(os.environ.get("TPT_CONTROL_PORT_BASE", "101")))
_notes = []


def pytest_configure(config):
    missing = [p for p in (paths.TGTD, paths.TGTADM) if not p.exists()]
    if missing:
        raise pytest.UsageError(f"not built: {', '.join(map(str, missing))}; run 'make' first")


def pytest_terminal_summary(terminalreporter):
    """Figures the suites want a reader to see even when everything passed."""
    if _notes:
        terminalreporter.section("TPT-RAID figures")
        for line in _notes:
            terminalreporter.write_line(line)


@pytest.fixture
def report():
    """report(line): print line in the run's closing figures section."""
    return _notes.append


@pytest.fixture
def workdir():
    """A short scratch directory: unix socket paths must stay under 108 bytes."""
    d = Path(tempfile.mkdtemp(prefix="tpt-", dir="/tmp"))
    yield d
    # TPT_KEEP_WORKDIR=1 keeps the daemons' logs and files for a post-mortem.
    if os.environ.get("TPT_KEEP_WORKDIR") != "1":
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def client():
    """A tpt-client co-process with a generous timeout, for suites that
    drive a controller's LUN (test_client.py has its own)."""
    c = TptClient(timeout=120)
    c.start()
    yield c
    c.close()


@pytest.fixture
def tgtd_factory(workdir, request):
    started = []

    def start(name=None, host="127.0.0.1", netns=None, env=None, **kw):
        name = name or f"tgtd{len(started)}"
        inst = Tgtd(workdir / name, name, next(_control_ports), host=host, netns=netns,
                    env=env)
        started.append(inst)
        return inst.start(**kw)

    yield start

    problems = []
    for inst in started:
        if inst.proc is not None and not inst.alive() and inst.proc.returncode not in (0, None):
            if not getattr(inst, "killed_on_purpose", False):
                problems.append(f"{inst.name} exited with {inst.proc.returncode}")
        inst.stop()
        san = inst.sanitizer_reports()
        if san:
            problems.append(f"{inst.name} sanitizer report:\n{san[-6000:]}")
    failed = getattr(request.node, "rep_call", None)
    if problems or (failed is not None and failed.failed):
        for inst in started:
            print(f"----- {inst.name} log ({inst.log_path}) -----\n{inst.log()[-8000:]}")
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


IQN_PREFIX = "iqn.2026-11.org.tptraid"


@pytest.fixture
def file_lun(tgtd_factory):
    """One tgtd with target 1 and a 256 MiB file-backed LUN 1: (tgtd, url, backing file)."""
    t = tgtd_factory()
    iqn = t.new_target(1, f"{IQN_PREFIX}:file")
    backing = t.new_file_lun(1, 1, 256 << 20)
    return t, t.url(iqn, 1), backing


@pytest.fixture
def tpt(tgtd_factory):
    """TPT targets driven by hand (tptlib.targets): call .start(n)."""
    h = TptTargets(tgtd_factory)
    yield h
    h.close()
