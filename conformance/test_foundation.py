"""The fork itself: it builds from the pinned upstream, says who it is,
keeps upstream out of git, and our patch series applies cleanly."""
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tptlib import paths

TOP = paths.TOP
UPSTREAM = TOP / "build" / "upstream" / "tgt-1.0.85"


def test_tgtd_and_tgtadm_identify_the_fork():
    v = subprocess.run([str(paths.TGTD), "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.strip().startswith("1.0.85+tpt"), v.stdout
    h = subprocess.run([str(paths.TGTADM), "--help"], capture_output=True, text=True)
    assert "TPT-RAID fork" in h.stdout


def _tracked_files():
    r = subprocess.run(["git", "ls-files"], cwd=TOP, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("not a git checkout")
    return r.stdout.split()


def test_no_upstream_source_is_committed():
    """No committed file carries an upstream file's content, and none is
    named like one of tgt's C sources (a copied-in file to patch later)."""
    def digest(p):
        return hashlib.sha256(p.read_bytes()).hexdigest()

    upstream = [p for p in UPSTREAM.rglob("*")
                if p.is_file() and ".pc" not in p.parts and p.stat().st_size > 64]
    upstream_digests = {digest(p): str(p.relative_to(UPSTREAM)) for p in upstream}
    upstream_sources = {p.name for p in upstream
                        if p.relative_to(UPSTREAM).parts[0] == "usr" and p.suffix in (".c", ".h")}
    copied, clashes = [], []
    for t in _tracked_files():
        path = TOP / t
        if path.is_file() and digest(path) in upstream_digests:
            copied.append(f"{t} = upstream {upstream_digests[digest(path)]}")
        if Path(t).name in upstream_sources:
            clashes.append(t)
    assert not copied, f"upstream files committed: {copied}"
    assert not clashes, f"files named like upstream tgt sources: {clashes}"


def test_patch_series_applies_cleanly_to_pristine_upstream(tmp_path):
    tree = tmp_path / "tgt"
    shutil.copytree(UPSTREAM, tree, symlinks=True)
    r = subprocess.run([str(TOP / "scripts" / "tgt-quilt"), "push", "-a", "--fuzz=0"],
                       env={**os.environ, "TGT_TREE": str(tree)},
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fuzz" not in r.stdout.lower() and "offset" not in r.stdout.lower(), r.stdout
