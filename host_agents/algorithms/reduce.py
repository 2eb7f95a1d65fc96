"""Reduce and allreduce of int32 vectors.

Host-based, for comparison with the switches' aggregation: ``recursive_doubling`` (log2 P
exchanges of the whole vector), ``ring`` (reduce-scatter then allgather around a ring: each
rank sends 2 (P-1)/P of the vector, bandwidth-optimal), ``rabenseifner`` (recursive-halving
reduce-scatter then recursive-doubling allgather) and ``binomial`` (a binomial reduce to one
rank, then a binomial broadcast). Ranks beyond the largest power of two first fold their
vector into a partner and get the result from it last. In-network: ``innet`` (every rank hands
its lanes to its switch; the switches add them up the communicator's barrier tree and
multicast the result down it: each link carries the vector once each way).

Every operation is commutative and associative and exact on int32 (sum wraps), so the order
in which partial results meet does not change the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from host_agents.algorithms.binomial import children, parent
from host_agents.reduction import LANE_BYTES, ReduceOp, combine_bytes

if TYPE_CHECKING:
    from host_agents.context import CollectiveContext as Ctx


def _core(size: int) -> int:
    core = 1
    while core * 2 <= size:
        core *= 2
    return core


async def _fold_in(ctx: Ctx, vec: bytearray, op: ReduceOp, core: int, tag: int) -> bool:
    """Ranks >= core hand their vector to rank - core; whether this rank takes part."""
    rank, size = ctx.rank, ctx.size
    if rank >= core:
        ctx.step = "fold into partner"
        await ctx.send(rank - core, tag, vec)
        return False
    if rank + core < size:
        ctx.step = "fold a partner in"
        vec[:] = combine_bytes(vec, await ctx.recv(rank + core, tag, len(vec)), op)
    return True


async def _fold_out(ctx: Ctx, vec: bytearray, core: int, tag: int) -> None:
    rank, size = ctx.rank, ctx.size
    if rank >= core:
        ctx.step = "result from partner"
        vec[:] = await ctx.recv(rank - core, tag, len(vec))
    elif rank + core < size:
        ctx.step = "result to partner"
        await ctx.send(rank + core, tag, vec)


async def recursive_doubling(ctx: Ctx, vec: bytearray, op: ReduceOp) -> None:
    core = _core(ctx.size)
    if await _fold_in(ctx, vec, op, core, 1000):
        mask, step = 1, 0
        while mask < core:
            partner = ctx.rank ^ mask
            ctx.step = f"exchange {step} with rank {partner}"
            sent = ctx.isend(partner, step, bytes(vec))
            got = await ctx.recv(partner, step, len(vec))
            vec[:] = combine_bytes(vec, got, op)
            await ctx.wait(sent, f"exchange {step}")
            mask <<= 1
            step += 1
    await _fold_out(ctx, vec, core, 1001)


def _bounds(nbytes: int, parts: int) -> list[int]:
    """Lane-aligned boundaries of ``parts`` chunks of an ``nbytes`` vector."""
    lanes = nbytes // LANE_BYTES
    return [(lanes * i // parts) * LANE_BYTES for i in range(parts + 1)]


async def ring(ctx: Ctx, vec: bytearray, op: ReduceOp) -> None:
    size, rank = ctx.size, ctx.rank
    if size == 1:
        return
    bounds = _bounds(len(vec), size)
    right, left = (rank + 1) % size, (rank - 1) % size
    view = memoryview(vec)
    for step in range(size - 1):  # reduce-scatter: chunk (rank + 1) ends complete here
        ctx.step = f"reduce-scatter step {step}"
        send_chunk, recv_chunk = (rank - step) % size, (rank - step - 1) % size
        sent = ctx.isend(right, step, bytes(view[bounds[send_chunk] : bounds[send_chunk + 1]]))
        lo, hi = bounds[recv_chunk], bounds[recv_chunk + 1]
        got = await ctx.recv(left, step, hi - lo)
        view[lo:hi] = combine_bytes(view[lo:hi], got, op)
        await ctx.wait(sent, f"reduce-scatter step {step}")
    for step in range(size - 1):  # allgather of the complete chunks
        ctx.step = f"allgather step {step}"
        send_chunk, recv_chunk = (rank + 1 - step) % size, (rank - step) % size
        tag = size + step
        sent = ctx.isend(right, tag, bytes(view[bounds[send_chunk] : bounds[send_chunk + 1]]))
        lo, hi = bounds[recv_chunk], bounds[recv_chunk + 1]
        view[lo:hi] = await ctx.recv(left, tag, hi - lo)
        await ctx.wait(sent, f"allgather step {step}")


async def rabenseifner(ctx: Ctx, vec: bytearray, op: ReduceOp) -> None:
    core = _core(ctx.size)
    if await _fold_in(ctx, vec, op, core, 1000):
        rank, view = ctx.rank, memoryview(vec)
        bounds = _bounds(len(vec), core)
        lo_part, hi_part = 0, core  # the chunk range this rank is responsible for
        mask, step = core // 2, 0
        halves: list[tuple[int, tuple[int, int], tuple[int, int]]] = []
        while mask:  # recursive halving: keep half the range, send the other half
            partner = rank ^ mask
            mid = (lo_part + hi_part) // 2
            keep, give = ((lo_part, mid), (mid, hi_part)) if rank < partner else (
                (mid, hi_part), (lo_part, mid))  # fmt: skip
            ctx.step = f"reduce-scatter step {step} with rank {partner}"
            g_lo, g_hi = bounds[give[0]], bounds[give[1]]
            k_lo, k_hi = bounds[keep[0]], bounds[keep[1]]
            sent = ctx.isend(partner, step, bytes(view[g_lo:g_hi]))
            got = await ctx.recv(partner, step, k_hi - k_lo)
            view[k_lo:k_hi] = combine_bytes(view[k_lo:k_hi], got, op)
            await ctx.wait(sent, f"reduce-scatter step {step}")
            halves.append((partner, keep, give))
            lo_part, hi_part = keep
            mask //= 2
            step += 1
        for partner, keep, give in reversed(halves):  # recursive doubling: undo each half
            ctx.step = f"allgather step {step} with rank {partner}"
            k_lo, k_hi = bounds[keep[0]], bounds[keep[1]]
            g_lo, g_hi = bounds[give[0]], bounds[give[1]]
            sent = ctx.isend(partner, step, bytes(view[k_lo:k_hi]))
            view[g_lo:g_hi] = await ctx.recv(partner, step, g_hi - g_lo)
            await ctx.wait(sent, f"allgather step {step}")
            step += 1
    await _fold_out(ctx, vec, core, 1001)


async def binomial_reduce(ctx: Ctx, vec: bytearray, root: int, op: ReduceOp) -> None:
    """Reduce to ``root`` along a binomial tree (MPICH's default for commutative ops)."""
    size = ctx.size
    v = (ctx.rank - root) % size
    for child in reversed(children(v, size)):
        ctx.step = f"combine from child {child}"
        got = await ctx.recv((child + root) % size, 0, len(vec))
        vec[:] = combine_bytes(vec, got, op)
    up = parent(v)
    if up is not None:
        ctx.step = "send to parent"
        await ctx.send((up + root) % size, 0, vec)


async def binomial(ctx: Ctx, vec: bytearray, op: ReduceOp) -> None:
    """Allreduce as a binomial reduce to rank 0 and a binomial broadcast back."""
    await binomial_reduce(ctx, vec, 0, op)
    v = ctx.rank
    up = parent(v)
    if up is not None:
        ctx.step = "receive the result"
        vec[:] = await ctx.recv(up, 1, len(vec))
    ctx.step = "send the result down"
    await ctx.wait_all([ctx.isend(c, 1, vec) for c in children(v, ctx.size)], "broadcasting")


async def innet(ctx: Ctx, vec: bytearray, op: ReduceOp) -> None:
    ctx.step = "aggregate in the switches"
    vec[:] = await ctx.aggregate(vec, op)


async def innet_reduce(ctx: Ctx, vec: bytearray, root: int, op: ReduceOp) -> None:
    """The switches' aggregation; every rank gets the result, the root keeps it."""
    await innet(ctx, vec, op)
