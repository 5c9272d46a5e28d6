"""The TPT wire format, encoded in Python straight from docs/protocol.md.

Deliberately independent of the C codec in scsi/: the suites drive our
targets with bytes built from the documented tables, so a disagreement
between the document and the code shows up as a failing test."""
import struct
from dataclasses import dataclass

# Opcodes (protocol.md section 2.1).
XDWRITE_10 = 0x50
PRE_FETCH_16 = 0x90
SET_PEER_LIST = 0xC0
HOST_KEY = 0xC1
RELEASE = 0xC2
REPORT_SLOTS = 0xC3
PREP_READ = 0xC4
PREP_WRITE = 0xC5
READ_NEW_BLOCK = 0xC6
XDWRITE_16 = 0xC7
READ_PARITY_PART_TMP = 0xC8
READ_PARITY_PART_BLOCK = 0xC9
READ_PARITY_COMP_TMP = 0xCA
READ_PARITY_COMP_BLOCK = 0xCB
WRITE_NEW_DATA = 0xCC
REPORT_ENDPOINT = 0xCD
READ_MEDIUM = 0xCE
SEND_RESULT = 0xCF
HOST_READ = 0xD0               # from an extended host to the controller (4.19)
HOST_WRITE = 0xD1

# Byte-1 flags of the vendor data CDB (section 3).
FINAL = 0x01
RELEASE_ALL = 0x01
RELEASE_UNBIND = 0x02
DISABLE_WRITE = 0x04
FUA = 0x08
PARITY_SHIFT = 4
PARITY_XOR_MEDIUM, PARITY_XOR_GROUP, PARITY_COPY = 0, 1, 2

PEER_CONTROLLER = 0xFFFF      # inline data in the data-out
PEER_INITIATOR = 0xFFFE       # the host's own buffer, in TPT HOST READ/WRITE
PEER_NONE = 0xFFFD            # bytes a PREP READ does not move (a skip)
SLOT_NONE = 0xFFFF
XFER_VIRT_ADDR = 0x01
XFER_SLOT = 0x02
SLOT_HDR_LEN = 64
SLOT_MAGIC = 0x54505453

ROLE_TARGET, ROLE_CONTROLLER, ROLE_HOST = 1, 2, 3
AF_IPV4, AF_IPV6 = 1, 2


def vendor_cdb(opcode, lba=0, blocks=0, group=0, flags=0, control=0):
    """The 16-byte vendor data CDB: opcode, flags, 48-bit LBA, 24-bit
    transfer length, 32-bit group number, CONTROL."""
    return (bytes([opcode, flags]) + lba.to_bytes(6, "big") + blocks.to_bytes(3, "big")
            + group.to_bytes(4, "big") + bytes([control]))


def sbc16_cdb(opcode, lba=0, blocks=1):
    """A 16-byte SBC CDB with a 64-bit LBA and a 32-bit transfer length:
    READ(16), WRITE(16), VERIFY(16), WRITE SAME(16) and the like."""
    return struct.pack(">BBQIBB", opcode, 0, lba, blocks, 0, 0)


def read16_cdb(lba, blocks):
    return sbc16_cdb(0x88, lba, blocks)


def write16_cdb(lba, blocks):
    return sbc16_cdb(0x8A, lba, blocks)


def setup_cdb(opcode, param_len):
    """TPT SET PEER LIST / TPT HOST KEY: PARAMETER LIST LENGTH in 10-13."""
    return bytes([opcode]) + bytes(9) + param_len.to_bytes(4, "big") + bytes(2)


def report_slots_cdb(payload_size, count, alloc_len):
    return (bytes([REPORT_SLOTS, 0]) + payload_size.to_bytes(4, "big") + count.to_bytes(2, "big")
            + bytes(2) + alloc_len.to_bytes(4, "big") + bytes(2))


def release_cdb(group=0, all_groups=False, unbind=False):
    flags = (RELEASE_ALL if all_groups else 0) | (RELEASE_UNBIND if unbind else 0)
    return bytes([RELEASE, flags]) + bytes(9) + group.to_bytes(4, "big") + bytes(1)


def xdwrite10_cdb(lba, blocks, group):
    # SBC-2 XDWRITE(10): byte 1 DISABLE WRITE (bit 2), 2-5 LBA, 6 group, 7-8 length.
    return (bytes([XDWRITE_10, DISABLE_WRITE]) + lba.to_bytes(4, "big") + bytes([group & 0x1F])
            + blocks.to_bytes(2, "big") + bytes(1))


@dataclass
class Desc:
    """A transfer descriptor (section 5.1)."""
    peer: int
    length: int
    stag: int = 0
    offset: int = 0
    flags: int = 0
    gf_exp: int = 0

    def encode(self):
        return struct.pack(">HBBIQQ", self.peer, self.flags, self.gf_exp, self.length, self.stag,
                           self.offset)


def xfer_list(descs, result_slot=SLOT_NONE, inline=b"", operand_gf_exp=0):
    """Header (count, RESULT SLOT, OPERAND GF EXPONENT, total length),
    descriptors, inline data."""
    total = sum(d.length for d in descs)
    head = struct.pack(">HHB3sQ", len(descs), result_slot, operand_gf_exp, bytes(3), total)
    return head + b"".join(d.encode() for d in descs) + inline


def header_only_list(total_length, result_slot=SLOT_NONE):
    """READ MEDIUM's transfer list (sections 4.17, 5.1): the header alone,
    DESCRIPTOR COUNT 0 and TOTAL LENGTH the bytes of the LBA range."""
    return struct.pack(">HH4sQ", 0, result_slot, bytes(4), total_length)


def read_medium(lba, blocks, group, block_size, result_slot=SLOT_NONE):
    """READ MEDIUM (4.17): CDB and data-out."""
    return (vendor_cdb(READ_MEDIUM, lba, blocks, group),
            header_only_list(blocks * block_size, result_slot))


def send_result(lba, blocks, group, descs):
    """SEND RESULT (4.18): CDB and data-out, descriptors to RMA-write to."""
    return vendor_cdb(SEND_RESULT, lba, blocks, group), xfer_list(descs)


def host_key(port, key, addr="127.0.0.1"):
    """TPT HOST KEY's data-out (5.6): where the host's datamover listens
    and its key."""
    a = bytes(int(x) for x in addr.split("."))
    return struct.pack(">3sBH2s16s16s", bytes(3), AF_IPV4, port, bytes(2), a + bytes(12), key)


def host_io(write, lba, blocks, block_size, stag, offset, fua=False, flags=0):
    """TPT HOST READ/WRITE (4.19): CDB and data-out naming the host's
    buffer."""
    cdb = vendor_cdb(HOST_WRITE if write else HOST_READ, lba, blocks,
                     flags=FUA if fua else 0)
    return cdb, xfer_list([Desc(PEER_INITIATOR, blocks * block_size, stag, offset, flags)])


@dataclass
class Peer:
    id: int
    role: int
    port: int
    token: bytes
    addr: str = "127.0.0.1"

    def encode(self):
        a = bytes(int(x) for x in self.addr.split("."))
        return struct.pack(">HBBH2s16s16s", self.id, self.role, AF_IPV4, self.port, bytes(2),
                           a + bytes(12), self.token)


# The harness's array key (docs/protocol.md 5.5): what binds a member LU.
ARRAY_KEY = bytes.fromhex("6b65792d6f662d7468652d6172726179")


def peer_list(array_id, generation, self_id, peers, array_key=ARRAY_KEY):
    head = struct.pack(">QIHH", array_id, generation, self_id, len(peers)) + bytes(array_key)
    return head + b"".join(p.encode() for p in sorted(peers, key=lambda p: p.id))


@dataclass
class SlotTable:
    count: int
    header_len: int
    payload_size: int
    flags: int
    slots: list          # [(stag, offset)]


def parse_slot_table(data):
    count, hlen, payload, flags = struct.unpack_from(">HHIB", data, 0)
    slots = [struct.unpack_from(">QQ", data, 16 + 16 * i) for i in range(count)
             if 16 + 16 * (i + 1) <= len(data)]
    return SlotTable(count, hlen, payload, flags, slots)


def parse_endpoint(data):
    """TPT REPORT ENDPOINT data-in (section 5.7): version, family, port,
    address, provider."""
    version, family, port = struct.unpack_from(">B2xBH", data, 0)
    addr = data[8:12] if family == AF_IPV4 else data[8:24]
    text = ".".join(str(b) for b in addr) if family == AF_IPV4 else addr.hex()
    return dict(version=version, family=family, port=port, addr=text,
                provider=data[24:32].rstrip(b"\0").decode())


def parse_slot_header(data):
    magic, version, state, group, length, lba = struct.unpack_from(">IBB2xIIQ", data, 0)
    return dict(magic=magic, version=version, state=state, group=group, length=length, lba=lba)


@dataclass
class Sense:
    key: int
    asc: int
    ascq: int
    information: int
    info_valid: bool
    cmd_specific: int
    sksv: bool
    field_ptr: int
    in_cdb: bool = False        # C/D: the field is in the CDB, not the parameter list
    bit: int = None             # BIT POINTER when BPV is set

    @property
    def code(self):
        return (self.key, self.asc, self.ascq)


def parse_sense(data):
    """Fixed-format sense (70h), as libiscsi hands it over without its
    2-byte length prefix."""
    if len(data) < 14 or data[0] & 0x7F not in (0x70, 0x71):
        raise ValueError(f"not fixed-format sense: {data.hex()}")
    info = int.from_bytes(data[3:7], "big")
    cs = int.from_bytes(data[8:12], "big")
    sks = data[15:18] if len(data) >= 18 else bytes(3)
    return Sense(data[2] & 0x0F, data[12], data[13], info, bool(data[0] & 0x80), cs,
                 bool(sks[0] & 0x80), int.from_bytes(sks[1:3], "big"),
                 bool(sks[0] & 0x40), sks[0] & 0x07 if sks[0] & 0x08 else None)


# Sense codes of section 9.1: (sense key, ASC, ASCQ).
SENSE = {
    "INVALID_OPCODE": (0x5, 0x20, 0x00),
    # SPC's ACCESS DENIED - NO ACCESS RIGHTS: plain SBC on a bound LU (5.5)
    "ACCESS_DENIED": (0x5, 0x20, 0x02),
    "INVALID_CDB_FIELD": (0x5, 0x24, 0x00),
    "PARAM_LIST_LENGTH": (0x5, 0x1A, 0x00),
    "INVALID_PARAM_FIELD": (0x5, 0x26, 0x00),
    "LBA_OUT_OF_RANGE": (0x5, 0x21, 0x00),
    "PEER_LIST_MISSING": (0x2, 0x80, 0x00),
    "HOST_KEY_MISSING": (0x2, 0x80, 0x03),
    "PEER_LIST_CONFLICT": (0x5, 0x80, 0x01),
    "UNKNOWN_PEER": (0x5, 0x80, 0x02),
    "UNKNOWN_GROUP": (0x5, 0x81, 0x00),
    "GROUP_IN_USE": (0x5, 0x81, 0x01),
    "GROUP_RANGE_MISSING": (0x5, 0x81, 0x02),
    "SLOT_IN_USE": (0x5, 0x81, 0x03),
    "RELEASED_BY_COMMAND": (0xB, 0x82, 0x00),
    "RELEASED_BY_TASK_MGMT": (0xB, 0x82, 0x01),
    "RELEASED_BY_TIMEOUT": (0xB, 0x82, 0x02),
    "RELEASED_BY_NEXUS_LOSS": (0xB, 0x82, 0x03),
    "POOL_EXHAUSTED": (0xB, 0x55, 0x03),
    "PEER_XFER_FAILED": (0xB, 0x83, 0x00),
    "PEER_XFER_TIMEOUT": (0xB, 0x83, 0x01),
    "PEER_UNREACHABLE": (0xB, 0x83, 0x02),
    "STAG_REJECTED": (0xB, 0x84, 0x00),
    "PEER_REFUSED": (0xB, 0x84, 0x01),
    "SLOT_STALE": (0xB, 0x84, 0x02),
    "READ_ERROR": (0x3, 0x11, 0x00),
    "WRITE_ERROR": (0x3, 0x0C, 0x00),
}
