"""Faults injected into real processes: a disk's unreadable sectors.

BadSectors gives a tgtd (its env) test/fault/bad_sectors.c's library,
which fails every read of the byte ranges added here with EIO, as a disk
fails a READ of a sector it cannot read, until they are written.
"""
import os
from pathlib import Path

from . import paths

LIBRARY = paths.BUILD / "test" / "fault" / "libtpt-bad-sectors.so"


class BadSectors:
    def __init__(self, workdir):
        self.list = Path(workdir) / "bad-sectors"
        self.list.touch()

    def env(self) -> dict:
        env = {"LD_PRELOAD": str(LIBRARY), "TPT_BAD_SECTORS": str(self.list)}
        if os.environ.get("TPT_SAN") == "1":
            # ASan wants its runtime first among the libraries; this one
            # only wraps a few calls, which ASan's own wrappers then see.
            env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1:verify_asan_link_order=0"
        return env

    def add(self, path, offset: int, length: int, lose=True):
        """Bytes [offset, offset + length) of the file at path become
        unreadable; lose: what they held is gone too (overwritten with
        random bytes), as a bad sector's data is."""
        if lose:
            with open(path, "r+b") as f:
                f.seek(offset)
                f.write(os.urandom(length))
        with open(self.list, "a") as f:
            f.write(f"{path} {offset} {length}\n")
