"""Frames as the switch's parser sees them: :func:`parse` into :class:`Parsed` and
:func:`deparse` back, mirroring ``p4src/common/parser.p4`` and ``deparser.p4``. Re-exported by
:mod:`controller.switch_model`."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from controller import wire
from controller.wire import Op

_ETH = struct.Struct("!6s6sH")
_IPV4_LEN = 20


@dataclass(slots=True)
class Parsed:
    """What CollParser extracted, and what it left as payload."""

    eth: tuple[bytes, bytes, int] | None = None
    ipv4_src: int | None = None
    ipv4_dst: int | None = None
    coll: wire.Header | None = None
    mp: wire.MiniPacket | None = None
    agg: list[int] | None = None  # REDUCE/RESULT lanes, unsigned 32-bit
    rest: bytes = b""
    ipv4_bytes: bytes = b""
    parse_error: bool = False


def parse(frame: bytes, lanes: int = wire.AGG_LANES) -> Parsed:
    """common/parser.p4 CollParser; a header that does not fit is a parser error."""
    parsed = Parsed()
    if len(frame) < wire.ETH_HEADER_LEN:
        parsed.parse_error = True
        return parsed
    parsed.eth = _ETH.unpack_from(frame, 0)
    offset = wire.ETH_HEADER_LEN
    ethertype = parsed.eth[2]
    if ethertype == wire.ETHERTYPE_COLL:
        if len(frame) - offset < wire.HEADER_LEN:
            parsed.parse_error = True
            return parsed
        parsed.coll = wire.Header.unpack_from(frame, offset)
        offset += wire.HEADER_LEN
        if parsed.coll.op in (Op.MP, Op.MP_REPLY):
            if len(frame) - offset < wire.MP_LEN:
                parsed.parse_error = True
                parsed.rest = frame[offset:]
                return parsed
            parsed.mp = wire.MiniPacket.unpack_from(frame, offset)
            offset += wire.MP_LEN
        elif parsed.coll.op in wire.AGG_OPS:
            if len(frame) - offset < 4 * lanes:
                parsed.parse_error = True
                parsed.rest = frame[offset:]
                return parsed
            parsed.agg = list(struct.unpack_from(f"!{lanes}I", frame, offset))
            offset += 4 * lanes
    elif ethertype == wire.ETHERTYPE_IPV4:
        if len(frame) - offset < _IPV4_LEN:
            parsed.parse_error = True
            parsed.rest = frame[offset:]
            return parsed
        parsed.ipv4_bytes = frame[offset : offset + _IPV4_LEN]
        parsed.ipv4_src, parsed.ipv4_dst = struct.unpack_from("!II", frame, offset + 12)
        offset += _IPV4_LEN
    parsed.rest = frame[offset:]
    return parsed


def deparse(parsed: Parsed) -> bytes:
    """common/deparser.p4: valid headers in order, then the unparsed rest."""
    assert parsed.eth is not None
    parts = [_ETH.pack(*parsed.eth), parsed.ipv4_bytes]
    if parsed.coll is not None:
        parts.append(parsed.coll.pack())
    if parsed.mp is not None:
        parts.append(parsed.mp.pack())
    if parsed.agg is not None:
        parts.append(struct.pack(f"!{len(parsed.agg)}I", *parsed.agg))
    parts.append(parsed.rest)
    return b"".join(parts)
