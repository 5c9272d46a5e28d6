"""TPT targets driven by hand: N of our tgtd with a LUN in TPT mode, and a
tpt-client playing the controller (and, through its registered buffers,
the host whose data the controller proxies).

The harness speaks only documented bytes (tptlib.proto) to the targets, so
what it exercises is docs/protocol.md as much as the code."""
import os
from dataclasses import dataclass, field

from . import net, proto
from .client import GOOD, TptClient

ARRAY_ID = 0x7470740000000001
CONTROLLER_ID = 100
LUN = 1


@dataclass
class Target:
    index: int
    tgtd: object
    iqn: str
    backing: object
    dm_port: int
    token: bytes
    slots: proto.SlotTable = None

    @property
    def name(self):
        return f"t{self.index}"

    def read_backing(self, offset, length):
        with open(self.backing, "rb") as f:
            f.seek(offset)
            return f.read(length)

    def write_backing(self, offset, data):
        with open(self.backing, "r+b") as f:
            f.seek(offset)
            f.write(data)


@dataclass
class Result:
    status: int
    sense: bytes
    data: bytes
    raw: dict = field(repr=False, default=None)

    @property
    def good(self):
        return self.status == GOOD

    def parsed_sense(self):
        return proto.parse_sense(self.sense)


def assert_sense(r, name):
    """r is CHECK CONDITION with the protocol.md 9.1 sense @name; returns
    the parsed sense for further checks."""
    assert r.status == 2, f"expected CHECK CONDITION {name}, got {r}"
    s = r.parsed_sense()
    assert s.code == proto.SENSE[name], f"expected {name}, got {s}"
    return s


class TptTargets:
    """Start with start(n); the client is .client, targets .targets[i]."""

    def __init__(self, tgtd_factory, lun_bytes=64 << 20, block_size=512):
        self.factory = tgtd_factory
        self.lun_bytes = lun_bytes
        self.block_size = block_size
        self.targets = []
        self.client = None
        self.ctrl_token = os.urandom(16)
        self.ctrl_port = None
        self.generation = 0
        self._tag = 0
        self._dm_links = set()

    # -- set-up ---------------------------------------------------------------
    def start(self, n, slots=16, slot_payload=64 << 10, deliver=True):
        for i in range(n):
            t = self.factory(name=f"target{i}")
            iqn = f"iqn.2026-11.org.tptraid:target{i}"
            t.new_target(1, iqn)
            backing = t.new_file_lun(1, LUN, self.lun_bytes,
                                     blocksize=None if self.block_size == 512 else self.block_size)
            dm_port = net.free_port()
            t.tgtadm("--lld", "iscsi", "--mode", "logicalunit", "--op", "update", "--tid", 1,
                     "--lun", LUN, "--params", f"tpt_dm=127.0.0.1:{dm_port},tpt=on")
            self.targets.append(Target(i, t, iqn, backing, dm_port, os.urandom(16)))
        self.client = TptClient(timeout=60)
        self.client.start()
        dm = self.client.dm_open("controller", port=0, peer_id=CONTROLLER_ID, array_id=ARRAY_ID)
        self.ctrl_port = dm["port"]
        for t in self.targets:
            self.client.login(t.name, t.tgtd.url(t.iqn, LUN))
            self.client.clear_unit_attentions(t.name)
            # Targets connecting to us present our token.
            self.client.dm_allow(t.index, self.ctrl_token, array_id=ARRAY_ID, role="target")
        if deliver:
            self.deliver_peer_lists()
            for t in self.targets:
                t.slots = self.report_slots(t, slot_payload, slots)
        return self

    def close(self):
        if self.client:
            self.client.close()

    def peers(self):
        ps = [proto.Peer(t.index, proto.ROLE_TARGET, t.dm_port, t.token) for t in self.targets]
        ps.append(proto.Peer(CONTROLLER_ID, proto.ROLE_CONTROLLER, self.ctrl_port, self.ctrl_token))
        return ps

    def deliver_peer_lists(self, peers=None):
        self.generation += 1
        for t in self.targets:
            pl = proto.peer_list(ARRAY_ID, self.generation, t.index, peers or self.peers())
            r = self.cmd(t, proto.setup_cdb(proto.SET_PEER_LIST, len(pl)), out=pl)
            assert r.good, f"SET PEER LIST on {t.name}: {r}"

    def report_slots(self, t, payload, count):
        alloc = 16 + 16 * count
        r = self.cmd(t, proto.report_slots_cdb(payload, count, alloc), inlen=alloc)
        assert r.good, f"REPORT SLOTS on {t.name}: {r}"
        return proto.parse_slot_table(r.data)

    # -- commands -------------------------------------------------------------
    def next_tag(self):
        self._tag += 1
        return f"c{self._tag}"

    def send(self, t, cdb, out=None, inlen=None, session=None):
        """Queue cdb to target t, on the client's session to it or on
        another one logged in under the name `session`."""
        name = session or t.name
        tag = self.next_tag()
        if out is not None:
            self.client.send(name, tag, cdb, dir="out", data=out)
        elif inlen is not None:
            self.client.send(name, tag, cdb, dir="in", inlen=inlen)
        else:
            self.client.send(name, tag, cdb, dir="none")
        return tag

    def wait(self, tags, timeout_ms=30000):
        out = []
        for r in self.client.wait(tags, timeout_ms=timeout_ms):
            assert r.get("ok"), f"command {r.get('tag')} did not complete: {r}"
            out.append(Result(r["status"], r.get("sense", b""), r.get("data", b""), r))
        return out

    def cmd(self, t, cdb, out=None, inlen=None, timeout_ms=30000, session=None):
        return self.wait([self.send(t, cdb, out, inlen, session)], timeout_ms)[0]

    # -- host buffers (the controller's copy of host data) --------------------
    def host_buffer(self, name, data=None, size=None):
        size = size if size is not None else len(data)
        b = self.client.buf(name, size, access="rw")
        if data:
            self.client.buf_write(name, 0, data)
        return HostBuf(self.client, name, int(b["stag"]), int(b["rma_base"]), size)

    def slot_header(self, t, slot):
        """Read target t's slot header over the datamover, as another
        member would (the controller is on every peer list)."""
        name = f"dm-{t.name}"
        if name not in self._dm_links:
            self.client.dm_connect(name, "127.0.0.1", t.dm_port, t.token, role="controller",
                                   peer_id=CONTROLLER_ID, array_id=ARRAY_ID)
            if not self._dm_links:
                self.client.buf("slothdr", proto.SLOT_HDR_LEN)
            self._dm_links.add(name)
        stag, offset = t.slots.slots[slot]
        self.client.dm_get(name, "slothdr", 0, stag, offset, proto.SLOT_HDR_LEN)
        return proto.parse_slot_header(self.client.buf_read("slothdr", 0, proto.SLOT_HDR_LEN))

    @staticmethod
    def slot_desc(t, slot, length):
        """A descriptor naming target t's slot (header first, protocol.md 5.1)."""
        stag, offset = t.slots.slots[slot]
        return proto.Desc(t.index, length, stag, offset, proto.XFER_SLOT | (t.slots.flags & 1))


@dataclass
class HostBuf:
    client: object
    name: str
    stag: int
    base: int
    size: int

    def desc(self, offset, length):
        flags = proto.XFER_VIRT_ADDR if self.base else 0
        return proto.Desc(CONTROLLER_ID, length, self.stag, self.base + offset, flags)

    def read(self, offset=0, length=None):
        return self.client.buf_read(self.name, offset, self.size - offset if length is None else length)
