"""An extended host played by tpt-client (docs/protocol.md 4.14, 4.19): a
datamover that listens and admits the array's targets by its key, a
session with the controller, one registered buffer; TPT HOST KEY, then
TPT HOST READ/WRITE naming that buffer, in one piece or several."""
import os

from . import proto


class Host:
    def __init__(self, client, c, name="h", buf_bytes=1 << 20, members=5, block_size=512):
        self.client, self.c, self.name = client, c, name
        self.block_size = block_size
        self.key = os.urandom(16)
        opened = client.dm_open("host", listen="127.0.0.1")
        self.port = opened["port"]
        # Targets are boxes 0..N-1 of the array's peer list; they prove
        # this host's key (6.5).
        for i in range(members):
            client.dm_allow(i, self.key, role="target")
        client.login(name, c.url)
        client.clear_unit_attentions(name)
        self.buf = client.buf("hbuf", buf_bytes, access="rw")

    def register(self):
        data = proto.host_key(self.port, self.key)
        return self.client.command(self.name, proto.setup_cdb(proto.HOST_KEY, len(data)),
                                   data=data)

    def io(self, write, lba, blocks, fua=False, stag=None):
        cdb, dout = proto.host_io(write, lba, blocks, self.block_size,
                                  self.buf["stag"] if stag is None else stag,
                                  self.buf["rma_base"], fua=fua)
        return self.client.command(self.name, cdb, data=dout, timeout_ms=60000)

    def io_pieces(self, write, lba, pieces, fua=False):
        """One TPT HOST READ/WRITE whose blocks are, in order, the
        (buffer offset, blocks) pieces of the registered buffer."""
        bs, stag, base = self.block_size, self.buf["stag"], self.buf["rma_base"]
        blocks = sum(n for _, n in pieces)
        cdb = proto.vendor_cdb(proto.HOST_WRITE if write else proto.HOST_READ, lba, blocks,
                               flags=proto.FUA if fua else 0)
        dout = proto.xfer_list([proto.Desc(proto.PEER_INITIATOR, n * bs, stag, base + off)
                                for off, n in pieces])
        return self.client.command(self.name, cdb, data=dout, timeout_ms=60000)
