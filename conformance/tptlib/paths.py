"""Where the build put things (TPT_BUILD, set by the Makefile)."""
import os
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TPT_BUILD", TOP / "build"))
STAGE = BUILD / "stage"
TGTD = STAGE / "sbin" / "tgtd"
TGTADM = STAGE / "sbin" / "tgtadm"
BIN = STAGE / "bin"


def tool(name: str) -> Path:
    """One of our own tools from tools/, as staged by the build."""
    return BIN / name
