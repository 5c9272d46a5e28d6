"""A local TPT-RAID cluster for tests: N targets (our tgtd with file LUNs in
TPT mode) and a controller (our tgtd with a tptraid LUN over them), all
real processes on loopback."""
import os
from dataclasses import dataclass, field

from . import net
from .tgtd import Chap, TgtadmError

IQN = "iqn.2026-11.org.tptraid"
# The last MiB of each member holds the array's superblock (controller.md).
METADATA_BYTES = 1 << 20


def data_bytes(member_bytes, unit):
    """What of a member of member_bytes the array stores data in."""
    usable = member_bytes - METADATA_BYTES
    return usable - usable % unit


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
    # With chap: what a host logs in to the array with (mutual), and the
    # target URLs carry the controller's credentials.
    chap: Chap = None
    raid: int = 5
    # The array's definition (--bsopts), as start() gave it.
    spec: str = ""


def start(tgtd_factory, n=5, mode="tpt", unit=64 << 10, member_bytes=64 << 20,
          block_size=512, spares=0, host="127.0.0.1", boxes=None, extra_opts=(), name="",
          chap=False, controller_box=None, assume_clean=True, spec_sep=";", raid=5,
          create=True, target_env=None):
    """n members and `spares` spares; boxes maps a target index to a
    tptlib.net.Link (or a net.Switch port) that target runs behind (its
    own namespace and address); controller_box is such a box for the
    controller, which then listens on its address instead of host;
    targets without a box listen on host.  chap: mutual CHAP on
    every hop with new random secrets, as scripts/tpt-cluster start --chap
    sets it up (each target accepts "controller" and answers as tK; the
    array accepts "host" and answers as "array").  assume_clean=False:
    members filled with random bytes (all but the last MiB, where the
    superblock goes), whose parity the new array computes (its first
    resync).  spec_sep joins the array definition's items (";\n  ": one
    written over several lines).  raid: the array's level, 5 or 1 (every
    member a copy of the whole array).  create=False: everything but the
    array's LU, whose definition is the cluster's spec.  target_env:
    what every target's environment adds (tptlib.faults.BadSectors.env)."""
    targets, backings, urls = [], [], []
    boxes = boxes or {}
    for i in range(n + spares):
        link = boxes.get(i)
        addr = link.box_addr if link else host
        t = tgtd_factory(name=f"{name}target{i}", host=addr, netns=link.name if link else None,
                         env=target_env)
        member_chap = Chap.new("controller", f"t{i}") if chap else None
        iqn = t.new_target(1, f"{IQN}:{name}target{i}", chap=member_chap)
        backings.append(t.new_file_lun(1, 1, member_bytes,
                                       blocksize=None if block_size == 512 else block_size))
        if not assume_clean:
            with open(backings[-1], "r+b") as f:
                f.write(os.urandom(member_bytes - METADATA_BYTES))
        tpt_on(t)
        targets.append(t)
        urls.append(member_chap.url(t.url(iqn, 1)) if chap else t.url(iqn, 1))
    if controller_box:
        host = controller_box.box_addr
        c = tgtd_factory(name=f"{name}controller", host=host, netns=controller_box.name)
    else:
        c = tgtd_factory(name=f"{name}controller", host=host)
    host_chap = Chap.new("host", "array") if chap else None
    ciqn = c.new_target(1, f"{IQN}:{name}array", chap=host_chap)
    # Fresh sparse member files hold zeroes: their parity agrees.
    opts = [f"raid={raid}", f"unit={unit // 1024}k", f"mode={mode}",
            f"assume_clean={'yes' if assume_clean else 'no'}"]
    if mode == "tpt":
        opts.append(f"dm={host}:{_listen_port(c)}")
    opts += [f"member={u}" for u in urls[:n]]
    opts += [f"spare={u}" for u in urls[n:]]
    opts += list(extra_opts)
    if create:
        c.new_lun(1, 1, str(c.dir / "array.state"), bstype="tptraid",
                  bsopts=spec_sep.join(opts), blocksize=None if block_size == 512 else block_size)
    return Cluster(targets, c, backings, c.url(ciqn, 1), mode, unit, ciqn, urls, host_chap,
                   raid, spec_sep.join(opts))


def tpt_on(t):
    """TPT mode on target t, its datamover on a port of its address.  A port free
    here a moment ago may be taken in a box's namespace, where earlier
    daemons of a benchmark used ports (one in TIME_WAIT still holds its
    number): the datamover cannot listen, says so, and another port is
    tried (the first tpt_dm of a tgtd that opened nothing can be given
    again)."""
    for attempt in range(3):
        mark = len(t.log())
        try:
            t.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 1,
                     "--lun", 1, "--params", f"tpt_dm={t.host}:{_listen_port(t)},tpt=on")
            return
        except TgtadmError:
            if attempt == 2 or "tpt datamover: cannot open on" not in t.log()[mark:]:
                raise


def _listen_port(t):
    """A port for t's datamover to listen on, in t's namespace if it has
    one: a fresh namespace has every port free, so any number this one
    hands out will do there (t's address may not even exist here)."""
    return net.free_port("127.0.0.1" if t.netns else t.host)


def allow_plain_reads(targets):
    """The operator opens plain reads of live members (tpt-scrub): a LU
    bound to an array refuses them to anyone but its controller
    (usr/tpt_target/plain_io.c).  Targets that are down are skipped."""
    for t in targets:
        if t.alive():
            t.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 1,
                     "--lun", 1, "--params", "tpt_plain_io=read")

