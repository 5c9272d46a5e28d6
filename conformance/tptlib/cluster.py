"""A local TPT-RAID cluster for tests: N targets (our tgtd with file LUNs in
TPT mode) and a controller (our tgtd with a tptraid LUN over them), all
real processes on loopback."""
from dataclasses import dataclass, field

from . import net

IQN = "iqn.2026-11.org.tptraid"


@dataclass
class Cluster:
    targets: list
    controller: object
    backings: list
    url: str
    mode: str
    unit: int
    iqn: str
    target_urls: list = field(default_factory=list)


def start(tgtd_factory, n=5, mode="tpt", unit=64 << 10, member_bytes=64 << 20,
          block_size=512):
    targets, backings, urls = [], [], []
    for i in range(n):
        t = tgtd_factory(name=f"target{i}")
        iqn = t.new_target(1, f"{IQN}:target{i}")
        backings.append(t.new_file_lun(1, 1, member_bytes,
                                       blocksize=None if block_size == 512 else block_size))
        t.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 1,
                 "--lun", 1, "--params", f"tpt_dm=127.0.0.1:{net.free_port()},tpt=on")
        targets.append(t)
        urls.append(t.url(iqn, 1))
    c = tgtd_factory(name="controller")
    ciqn = c.new_target(1, f"{IQN}:array")
    # Fresh sparse member files hold zeroes: their parity agrees.
    opts = [f"raid=5", f"unit={unit // 1024}k", f"mode={mode}", "assume_clean=yes"]
    if mode == "tpt":
        opts.append(f"dm=127.0.0.1:{net.free_port()}")
    opts += [f"member={u}" for u in urls]
    c.new_lun(1, 1, str(c.dir / "array.state"), bstype="tptraid", bsopts=";".join(opts),
              blocksize=None if block_size == 512 else block_size)
    return Cluster(targets, c, backings, c.url(ciqn, 1), mode, unit, ciqn, urls)
