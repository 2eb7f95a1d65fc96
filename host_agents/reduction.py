"""Reduction operations on int32 vectors, as the switches compute them.

Vectors travel as big-endian 32-bit lanes (the switches' register width and byte order). Sum
wraps modulo 2^32 like a switch's 32-bit adder, min and max compare signed, and/or/xor are
bitwise. Floats go through a declared fixed-point scale (:func:`to_fixed`): each value is
rounded to a multiple of 1/scale, so a sum over N ranks is off by at most N / (2 * scale) from
the exact one, as long as the scaled sum stays within int32.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from controller import wire

WIRE = np.dtype(">i4")  # big-endian int32 lanes
LANE_BYTES = 4
Vector = npt.NDArray[np.int32]


# Operation codes, as the switches read them from a REDUCE's ``tree`` field.
ReduceOp = wire.AggOp
IDENTITY = {op: wire.agg_identity(op) for op in ReduceOp}


def op_named(name: str | int) -> ReduceOp:
    """``sum``, ``min``, ``max``, ``and``, ``or``, ``xor`` (or an operation code)."""
    try:
        return wire.AggOp(name) if isinstance(name, int) else wire.AggOp[name.upper()]
    except (KeyError, ValueError):
        known = ", ".join(op.name.lower() for op in ReduceOp)
        raise ValueError(f"unknown reduction {name!r}; known: {known}") from None


def vector(data: bytes | bytearray | memoryview) -> Vector:
    """The int32 lanes of wire bytes (a copy, in native order)."""
    if len(data) % LANE_BYTES:
        raise ValueError(f"{len(data)} bytes are not a whole number of 32-bit lanes")
    return np.frombuffer(bytes(data), dtype=WIRE).astype(np.int32)


def wire_bytes(values: Vector) -> bytes:
    return values.astype(WIRE).tobytes()


def combine(a: Vector, b: Vector, op: ReduceOp) -> Vector:
    """``a`` op ``b`` lane by lane, exactly as a switch computes it."""
    if op is ReduceOp.SUM:
        return (a.astype(np.int64) + b.astype(np.int64)).astype(np.uint32).view(np.int32)
    if op is ReduceOp.MIN:
        return np.minimum(a, b)
    if op is ReduceOp.MAX:
        return np.maximum(a, b)
    if op is ReduceOp.AND:
        return np.bitwise_and(a, b)
    if op is ReduceOp.OR:
        return np.bitwise_or(a, b)
    return np.bitwise_xor(a, b)


def combine_bytes(a: bytes | bytearray | memoryview, b: bytes | bytearray | memoryview,
                  op: ReduceOp) -> bytes:  # fmt: skip
    return wire_bytes(combine(vector(a), vector(b), op))


def reduce_all(parts: list[bytes], op: ReduceOp) -> bytes:
    """The reference: every rank's contribution combined in rank order."""
    acc = vector(parts[0])
    for part in parts[1:]:
        acc = combine(acc, vector(part), op)
    return wire_bytes(acc)


def to_fixed(values: npt.NDArray[np.floating], scale: float) -> Vector:
    """Floats as int32 multiples of 1/scale (rounded); raises when one does not fit."""
    scaled = np.rint(np.asarray(values, dtype=np.float64) * scale)
    info = np.iinfo(np.int32)
    if scaled.size and (scaled.max() > info.max or scaled.min() < info.min):
        raise ValueError(f"values beyond +-{info.max / scale:g} do not fit int32 at scale {scale}")
    return scaled.astype(np.int32)


def from_fixed(values: Vector, scale: float) -> npt.NDArray[np.float64]:
    return values.astype(np.float64) / scale


def fixed_point_error_bound(ranks: int, scale: float) -> float:
    """Largest difference between a fixed-point sum over ``ranks`` and the exact one."""
    return ranks / (2 * scale)
