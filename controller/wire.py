"""The collective protocol on the wire: one definition for agents, controller and tests.

The layout here mirrors ``p4src/common/headers.p4`` field for field; ``tests/unit/test_wire.py``
checks the two against each other. Hot paths use the ``struct`` codecs below; Scapy layers for
crafting and dissecting are in :mod:`tests.scapy_layers` and are built from ``HEADER_FIELDS``.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass, replace

from controller.lanes import AGG_CHUNK_LIMIT as AGG_CHUNK_LIMIT
from controller.lanes import AGG_LANES as AGG_LANES
from controller.lanes import AGG_OP_MAX as AGG_OP_MAX
from controller.lanes import AGG_WINDOW as AGG_WINDOW
from controller.lanes import AggOp as AggOp
from controller.lanes import agg_combine as agg_combine
from controller.lanes import agg_identity as agg_identity
from controller.lanes import pack_lanes as pack_lanes
from controller.lanes import to_int32 as to_int32

# IEEE 802 "Local Experimental EtherType 1": free for private protocols, never routed.
ETHERTYPE_COLL = 0x88B5
ETHERTYPE_IPV4 = 0x0800
PROTOCOL_VERSION = 1

ETH_HEADER_LEN = 14
MTU = 1500  # standard Ethernet: what a frame must fit unless the links say otherwise
# Jumbo frames, the Mininet networks' default (mininet_topos.network.NetworkOptions.mtu):
# HPC fabrics carry 4-9 KB per packet, and in the emulator every frame costs a Python
# wake-up and several BMv2 thread hand-offs, so fewer, larger frames keep it from being
# frame-bound (a 16 KiB broadcast is 2 segments instead of 12).
JUMBO_MTU = 9000

# Node id space (16 bits). Hosts are numbered 1..N, switches get an id of their own so mini
# packets and pings can be addressed to them, and the management node has a fixed id.
NODE_NONE = 0
HOST_ID_MIN = 1
HOST_ID_MAX = 0x3FFF
SWITCH_ID_BASE = 0x4000
SWITCH_ID_MAX = 0x7FFD
MGMT_NODE_ID = 0x7FFE
NODE_ID_LIMIT = 0x8000  # exclusive; ids at or above are malformed


def switch_node_id(switch_index: int) -> int:
    node = SWITCH_ID_BASE + switch_index
    if not SWITCH_ID_BASE <= node <= SWITCH_ID_MAX:
        raise ValueError(f"switch index {switch_index} does not fit the node id space")
    return node


def host_mac(node_id: int) -> str:
    """Locally administered unicast MAC carrying the node id in its last two bytes."""
    return f"02:00:00:00:{node_id >> 8:02x}:{node_id & 0xFF:02x}"


def host_ip(node_id: int) -> str:
    """Hosts live in 10.0.0.0/16 and the low 16 bits of the address are the node id."""
    return f"10.0.{node_id >> 8}.{node_id & 0xFF}"


IPV4_PREFIX = 0x0A000000  # 10.0.0.0/16
IPV4_PREFIX_LEN = 16


class Op(enum.IntEnum):
    """Operation codes. The switch treats MCAST, ARRIVE, RELEASE and MP specially; every other
    known op is forwarded as unicast by ``dst_node``."""

    MCAST = 1  # broadcast data replicated along the (comm, root, tree) tree
    UNICAST = 2  # point-to-point data
    ACK = 3  # cumulative acknowledgement (unicast)
    NACK = 4  # gap report (unicast)
    ARRIVE = 5  # barrier arrival, host -> switch -> parent switch
    RELEASE = 6  # barrier release, root switch -> tree
    MP = 7  # mini packet request, management node -> target switch
    MP_REPLY = 8  # mini packet acknowledgement or read reply, switch -> management node
    PING = 9  # reachability probe (unicast)
    PONG = 10  # probe answer (unicast)
    CTRL = 11  # host-to-host control message of the reliability layer (unicast)
    REDUCE = 12  # contribution or partial aggregate, child -> parent along the barrier tree
    RESULT = 13  # reduction result, parent -> children (or a switch answering a late REDUCE)


OP_MAX = 13  # ops above are dropped by the switch as BAD_OP
AGG_OPS = frozenset({Op.REDUCE, Op.RESULT})


class Tree(enum.IntEnum):
    """Which tree of a (communicator, root) a MCAST packet follows."""

    INNET = 0  # switch-only tree from the root to every member
    RAGASA_SPREAD = 1  # Ragasa phase 1: root's router to one relay per remote group
    RAGASA_GROUP = 2  # Ragasa phases 2-3: a relay to the members of its own group


TREE_MAX = 2


class Flag:
    """Header flag bits. Plain ints, not an IntFlag: agents test them on every frame, and
    ``int & IntFlag`` goes through the enum machinery (a third of a frame's parse time)."""

    NONE = 0
    RETRANSMIT = 0x01  # this data frame is a retransmission
    LAST = 0x02  # last segment of its message (redundant with seg_count, eases pcaps)
    REPLY_NOW = 0x04  # sender asks for an immediate (non-delayed) ACK
    NO_ACK = 0x08  # multicast confirmed by other means (a barrier): receivers only NACK
    REPAIR = 0x10  # a multicast segment resent by unicast to the receiver that missed it
    # an ACK the switches merge up the multicast's tree (p4src/common/ackmerge.p4): seq is a
    # checkpoint cum, seg_idx its ordinal ceil(cum / ack_every)
    MERGE = 0x20
    # an ACK sent because a data segment arrived that was already here (RFC 2883's D-SACK);
    # seg_idx names it, msg_len says how long (us) the receiver had held it (HELD_UNKNOWN:
    # it cannot tell). Whoever resent it learns how long the original's round trip really
    # was (host_agents.transport)
    DUPLICATE = 0x40
    # an ACK from a receiver that knows the message is due and has waited for it: resend the
    # unacknowledged segments now, each at most once per round trip (host_agents.transport)
    RESEND = 0x80


HELD_UNKNOWN = (1 << 32) - 1  # a D-SACK whose receiver no longer knows when it got the segment


def held_us(seconds: float | None) -> int:
    """A D-SACK's hold time for its msg_len field (microseconds, saturating below
    HELD_UNKNOWN, which None gives)."""
    return HELD_UNKNOWN if seconds is None else min(int(seconds * 1e6), HELD_UNKNOWN - 1)


def held_seconds(field: int) -> float | None:
    """A msg_len hold time back in seconds (None: HELD_UNKNOWN)."""
    return None if field == HELD_UNKNOWN else field / 1e6


def unpack_lanes(payload: bytes | memoryview) -> list[int]:
    """The signed 32-bit lanes of a REDUCE/RESULT payload."""
    if len(payload) % 4:
        raise WireError(f"a lane payload of {len(payload)} bytes is not whole 32-bit lanes")
    return list(struct.unpack(f"!{len(payload) // 4}i", payload))


class MpKind(enum.IntEnum):
    WRITE_TREE = 1  # write a broadcast membership slot: parent port, child-port bitmap
    WRITE_BARRIER = 2  # write a barrier slot: parent port, child mask, base epoch
    READ_TREE = 3
    READ_BARRIER = 4


class MpStatus(enum.IntEnum):
    REQUEST = 0
    OK = 1  # applied, or the read succeeded
    DUPLICATE = 2  # same generation as stored: nothing written (idempotent resend)
    STALE = 3  # older generation than stored: rejected
    BAD_SLOT = 4  # slot index out of range: rejected
    BAD_KIND = 5


class DropReason(enum.IntEnum):
    """Index of the switch's drop counter. Kept in step with ``p4src/common/constants.p4``."""

    NONE = 0
    MALFORMED = 1  # parser error, bad version, truncated payload
    BAD_OP = 2
    NO_ROUTE = 3  # unicast to an unknown node
    UNKNOWN_TREE = 4  # MCAST for a (comm, root, tree) with no entry
    RPF = 5  # MCAST from a port other than the tree's parent port
    COMM_RANGE = 6  # communicator id beyond the barrier slots
    BARRIER_UNCONFIGURED = 7
    NOT_CHILD = 8  # ARRIVE from a port outside the child mask
    NOT_PARENT = 9  # RELEASE from a port other than the parent
    OUT_OF_WINDOW = 10  # ARRIVE beyond the open-epoch window
    STALE_RELEASE = 11  # RELEASE for an epoch already released here
    MP_FROM_HOST = 12  # any mini packet entering on a host-facing port
    MP_STALE = 13  # mini packet generation not newer than stored
    MP_BAD_SLOT = 14
    MP_BAD_KIND = 15
    SRC_SPOOF = 16  # host port sending with another node's source id
    PORT_RANGE = 17
    NON_COLLECTIVE = 18  # neither the collective EtherType nor routable IPv4
    PRUNED = 19  # replica that would leave by its ingress port
    FILTERED = 20  # replica of the all-ports group outside the child bitmap
    EMPTY_TREE = 21  # replication with no child port at this switch
    ABSORBED = 22  # ARRIVE recorded, nothing to send yet (not an error)
    MP_DUPLICATE = 23  # mini packet already applied (answered with DUPLICATE)
    AGG_BAD_OP = 24  # REDUCE/RESULT whose tree field names no reduction operation
    AGG_CHUNK_RANGE = 25  # REDUCE/RESULT with seg_idx >= 2**16
    AGG_STALE = 26  # REDUCE/RESULT for a chunk older than its slot's (every host has its result)
    AGG_DUPLICATE = 27  # REDUCE from a child already counted, nothing to answer yet
    ACK_UNCONFIGURED = 28  # merged ACK for a (comm, root, tree) with no ACK-merge entry here
    ACK_NOT_CHILD = 29  # merged ACK from a port outside the entry's child mask
    ACK_RANGE = 30  # merged ACK whose checkpoint (seg_idx) or cum (seq) is out of range


DROP_REASON_COUNT = 32

# (name, width in bits) in wire order. The P4 header and the Scapy layer follow this list.
HEADER_FIELDS: tuple[tuple[str, int], ...] = (
    ("version", 8),
    ("op", 8),
    ("comm_id", 16),
    ("epoch", 16),
    ("tree", 8),
    ("flags", 8),
    ("seq", 32),
    ("src_node", 16),
    ("dst_node", 16),
    ("root_node", 16),
    ("tag", 16),
    ("seg_idx", 32),
    ("seg_count", 32),
    ("msg_len", 32),
    ("payload_len", 16),
    ("stamp", 16),
    ("payload_crc", 32),
)
MP_FIELDS: tuple[tuple[str, int], ...] = (
    ("kind", 8),
    ("status", 8),
    ("slot", 16),
    ("generation", 32),
    ("parent_port", 16),
    ("epoch", 16),
    ("children", 32),
    ("aux", 32),
)

_HDR = struct.Struct("!BBHHBBIHHHHIIIHHI")
_MP = struct.Struct("!BBHIHHII")
_ETH = struct.Struct("!6s6sH")
HEADER_LEN = _HDR.size
MP_LEN = _MP.size
MAX_PAYLOAD = MTU - HEADER_LEN


def max_payload(mtu: int) -> int:
    """Bytes of collective payload one frame carries on links of ``mtu``."""
    if not HEADER_LEN + 8 <= mtu <= 0xFFFF:
        raise ValueError(f"MTU {mtu} is outside {HEADER_LEN + 8}..65535")
    return mtu - HEADER_LEN


assert HEADER_LEN == sum(w for _, w in HEADER_FIELDS) // 8 == 40
assert MP_LEN == sum(w for _, w in MP_FIELDS) // 8 == 20


class WireError(ValueError):
    """A frame that is not a well-formed collective frame."""


@dataclass(frozen=True, slots=True)
class Header:
    op: int
    comm_id: int = 0
    epoch: int = 0
    tree: int = 0
    flags: int = 0
    seq: int = 0
    src_node: int = 0
    dst_node: int = 0
    root_node: int = 0
    tag: int = 0
    seg_idx: int = 0
    seg_count: int = 1
    msg_len: int = 0
    payload_len: int = 0
    stamp: int = 0
    payload_crc: int = 0
    version: int = PROTOCOL_VERSION

    def pack(self, payload_len: int | None = None, payload_crc: int | None = None) -> bytes:
        """The header's bytes; ``payload_len``/``payload_crc`` override the fields (what
        :func:`build_frame` sets, without copying the header first)."""
        return _HDR.pack(
            self.version,
            self.op,
            self.comm_id,
            self.epoch,
            self.tree,
            self.flags,
            self.seq,
            self.src_node,
            self.dst_node,
            self.root_node,
            self.tag,
            self.seg_idx,
            self.seg_count,
            self.msg_len,
            self.payload_len if payload_len is None else payload_len,
            self.stamp,
            self.payload_crc if payload_crc is None else payload_crc,
        )

    @classmethod
    def unpack_from(cls, buf: bytes | memoryview, offset: int = 0) -> Header:
        if len(buf) - offset < HEADER_LEN:
            raise WireError(
                f"truncated collective header: {len(buf) - offset} < {HEADER_LEN} bytes"
            )
        (
            version,
            op,
            comm_id,
            epoch,
            tree,
            flags,
            seq,
            src_node,
            dst_node,
            root_node,
            tag,
            seg_idx,
            seg_count,
            msg_len,
            payload_len,
            stamp,
            payload_crc,
        ) = _HDR.unpack_from(buf, offset)
        return cls(
            op=op,
            comm_id=comm_id,
            epoch=epoch,
            tree=tree,
            flags=flags,
            seq=seq,
            src_node=src_node,
            dst_node=dst_node,
            root_node=root_node,
            tag=tag,
            seg_idx=seg_idx,
            seg_count=seg_count,
            msg_len=msg_len,
            payload_len=payload_len,
            stamp=stamp,
            payload_crc=payload_crc,
            version=version,
        )

    def with_(self, **changes: int) -> Header:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class MiniPacket:
    kind: int
    status: int = MpStatus.REQUEST
    slot: int = 0
    generation: int = 0
    parent_port: int = 0
    epoch: int = 0
    children: int = 0
    aux: int = 0

    def pack(self) -> bytes:
        return _MP.pack(
            self.kind,
            self.status,
            self.slot,
            self.generation,
            self.parent_port,
            self.epoch,
            self.children,
            self.aux,
        )

    @classmethod
    def unpack_from(cls, buf: bytes | memoryview, offset: int = 0) -> MiniPacket:
        if len(buf) - offset < MP_LEN:
            raise WireError(f"truncated mini packet body: {len(buf) - offset} < {MP_LEN} bytes")
        return cls(*_MP.unpack_from(buf, offset))


def mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return bytes(int(p, 16) for p in parts)


def payload_crc(payload: bytes | memoryview) -> int:
    return zlib.crc32(payload) & 0xFFFFFFFF


def build_frame(
    hdr: Header,
    payload: bytes | memoryview = b"",
    *,
    dst_mac: bytes = b"\xff" * 6,
    src_mac: bytes = b"\x00" * 6,
    mp: MiniPacket | None = None,
) -> bytes:
    """Ethernet + collective header (+ mini packet body) + payload, with length and CRC set."""
    if len(payload) > 0xFFFF:  # the in-process fabric may use segments above the MTU
        raise WireError(f"payload of {len(payload)} bytes does not fit payload_len")
    crc = 0 if hdr.op in AGG_OPS else payload_crc(payload)  # switches rewrite the lanes
    parts: list[bytes | memoryview] = [
        _ETH.pack(dst_mac, src_mac, ETHERTYPE_COLL),
        hdr.pack(len(payload), crc),
    ]
    if mp is not None:
        parts.append(mp.pack())
    parts.append(payload)  # join copies it once
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class Frame:
    dst_mac: bytes
    src_mac: bytes
    hdr: Header
    mp: MiniPacket | None
    payload: memoryview


def parse_frame(frame: bytes | memoryview, *, check_crc: bool = True) -> Frame:
    """Parse and validate a collective frame; raises :class:`WireError` with the reason."""
    view = memoryview(frame)
    if len(view) < ETH_HEADER_LEN + HEADER_LEN:
        raise WireError(f"frame of {len(view)} bytes is shorter than the collective header")
    dst, src, ethertype = _ETH.unpack_from(view, 0)
    if ethertype != ETHERTYPE_COLL:
        raise WireError(f"EtherType 0x{ethertype:04x} is not the collective EtherType")
    hdr = Header.unpack_from(view, ETH_HEADER_LEN)
    if hdr.version != PROTOCOL_VERSION:
        raise WireError(f"protocol version {hdr.version} (expected {PROTOCOL_VERSION})")
    if not 1 <= hdr.op <= OP_MAX:
        raise WireError(f"unknown op {hdr.op}")
    offset = ETH_HEADER_LEN + HEADER_LEN
    mp = None
    if hdr.op in (Op.MP, Op.MP_REPLY):
        mp = MiniPacket.unpack_from(view, offset)
        offset += MP_LEN
    end = offset + hdr.payload_len
    if end > len(view):
        raise WireError(f"payload_len {hdr.payload_len} runs past the {len(view)}-byte frame")
    payload = view[offset:end]
    covered = hdr.op not in AGG_OPS  # REDUCE/RESULT carry payload_crc 0 (the FCS covers them)
    if check_crc and covered and hdr.payload_len and payload_crc(payload) != hdr.payload_crc:
        raise WireError("payload CRC mismatch")
    return Frame(dst, src, hdr, mp, payload)


def serial_lt(a: int, b: int, bits: int = 16) -> bool:
    """RFC 1982 serial-number comparison: is ``a`` before ``b`` modulo 2**bits?"""
    half = 1 << (bits - 1)
    diff = (b - a) & ((1 << bits) - 1)
    return 0 < diff < half


def serial_diff(a: int, b: int, bits: int = 16) -> int:
    """Signed ``a - b`` under wraparound, in (-2**(bits-1), 2**(bits-1)]."""
    mod = 1 << bits
    d = (a - b) % mod
    return d - mod if d > mod // 2 else d
