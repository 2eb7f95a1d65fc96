"""Bodies of ACK and NACK frames: the selective-ACK bitmap and lists of missing ranges."""

from __future__ import annotations

import struct

from controller import wire

SACK_BITS = 64  # segments after the cumulative ACK an ACK reports individually
_SACK = struct.Struct("!Q")
_NACK_RANGE = struct.Struct("!II")  # first segment, count
MAX_NACK_RANGES = (wire.MAX_PAYLOAD // _NACK_RANGE.size) - 1

NO_SACK = _SACK.pack(0)  # the body of a multicast ACK: cumulative only


def pack_sack(bitmap: int) -> bytes:
    return _SACK.pack(bitmap)


def unpack_sack(payload: memoryview) -> int:
    return _SACK.unpack_from(payload)[0] if len(payload) >= _SACK.size else 0


def pack_ranges(ranges: list[tuple[int, int]]) -> bytes:
    return b"".join(_NACK_RANGE.pack(first, count) for first, count in ranges)


def unpack_ranges(payload: memoryview) -> list[tuple[int, int]]:
    """The (first, count) ranges of a NACK body, at most :data:`MAX_NACK_RANGES`."""
    return [
        _NACK_RANGE.unpack_from(payload, i * _NACK_RANGE.size)
        for i in range(min(len(payload) // _NACK_RANGE.size, MAX_NACK_RANGES))
    ]
