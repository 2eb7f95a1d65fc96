"""The binomial tree over virtual ranks 0..size-1 (0 is the root), shared by the algorithms
that walk it: rank v's parent is v minus its lowest set bit, and its children are v + m for
every power of two m below that bit (below ``size`` for the root), the subtree of v + m
holding ranks v + m .. v + 2m - 1."""

from __future__ import annotations


def parent(v: int) -> int | None:
    return v - (v & -v) if v else None


def children(v: int, size: int) -> list[int]:
    """Children of ``v``, largest subtree first (the order in which they are served)."""
    limit = v & -v if v else 1 << max(0, (size - 1).bit_length())
    out = []
    mask = limit >> 1
    while mask > 0:
        if v + mask < size:
            out.append(v + mask)
        mask >>= 1
    return out


def subtree_end(child: int, size: int) -> int:
    """One past the last rank in the subtree of ``child`` (a child of its parent)."""
    return min(size, child + (child & -child))
