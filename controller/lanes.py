"""Aggregation lanes: the reduction operations of REDUCE/RESULT frames and their 32-bit lane
arithmetic, as the switch computes it. Re-exported by :mod:`controller.wire`, where the rest of
the wire format is."""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence


class AggOp(enum.IntEnum):
    """Reduction operation of a REDUCE/RESULT, carried in the ``tree`` field. Lanes are 32-bit
    two's complement: SUM wraps, MIN and MAX compare signed."""

    SUM = 1
    MIN = 2
    MAX = 3
    AND = 4
    OR = 5
    XOR = 6


AGG_OP_MAX = 6  # other values of ``tree`` are dropped as AGG_BAD_OP
# The program's default lanes per packet and slots per communicator (NETCOLL_AGG_LANES,
# NETCOLL_AGG_WINDOW); a running switch's sizes come from P4Info (controller/p4info.py).
AGG_LANES = 32
AGG_WINDOW = 16
AGG_CHUNK_LIMIT = 1 << 16  # seg_idx of a REDUCE/RESULT must be below this
_INT32 = 1 << 32
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


def agg_identity(op: AggOp) -> int:
    """The lane value that leaves every other unchanged: the padding of a short last chunk."""
    return {
        AggOp.SUM: 0,
        AggOp.MIN: _INT32_MAX,
        AggOp.MAX: _INT32_MIN,
        AggOp.AND: -1,
        AggOp.OR: 0,
        AggOp.XOR: 0,
    }[op]


def to_int32(value: int) -> int:
    """Any integer, wrapped to signed 32 bits."""
    value %= _INT32
    return value - _INT32 if value > _INT32_MAX else value


def agg_combine(op: AggOp, a: int, b: int) -> int:
    """One lane of ``op`` on signed 32-bit values, as the switch computes it."""
    a, b = to_int32(a), to_int32(b)
    if op == AggOp.SUM:
        return to_int32(a + b)
    if op == AggOp.MIN:
        return min(a, b)
    if op == AggOp.MAX:
        return max(a, b)
    if op == AggOp.AND:
        return a & b
    if op == AggOp.OR:
        return a | b
    if op == AggOp.XOR:
        return a ^ b
    raise ValueError(f"not a reduction operation: {op}")


def pack_lanes(values: Sequence[int], lanes: int = AGG_LANES, pad: int = 0) -> bytes:
    """A REDUCE/RESULT payload: ``lanes`` big-endian 32-bit lanes, ``values`` (wrapped to 32
    bits) followed by ``pad`` (use :func:`agg_identity` of the operation)."""
    if len(values) > lanes:
        raise ValueError(f"{len(values)} values do not fit {lanes} lanes")
    padded = [v % _INT32 for v in values] + [pad % _INT32] * (lanes - len(values))
    return struct.pack(f"!{lanes}I", *padded)
