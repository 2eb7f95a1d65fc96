"""Broadcast algorithms.

In-network: ``innet`` (one multicast along the switch-only tree) and ``ragasa`` ([Ragasa]: the
root's router replicates to one relay per remote group, each relay re-broadcasts within its
group through its routers, routers deliver to their hosts). Host-based baselines:
``binomial`` (store and forward, MPICH's short-message algorithm), ``scatter_allgather``
(van de Geijn: binomial scatter then ring allgather), ``chain`` (pipelined, segmented) and
``trinary3`` ([Tofu2]'s Trinaryx3: three fragments over three pipelined ternary trees whose
inner ranks differ).

With co-root ACKs (the default) a multicasting rank returns once its segments went out, as MPI
lets a broadcast's root return once its buffer may be reused: the engine keeps a copy for
repairs and collects the receivers' ACKs in the background. Waiting for them here put a whole
ACK round trip through the tree (65 of 177 ms at 16 KiB, `make reproduce` before 7cb3f25)
behind every in-network broadcast's root. With switch-merged ACKs it still waits for them
(docs/protocol.md says why).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from host_agents.algorithms.binomial import children, parent, subtree_end
from host_agents.context import Tree

if TYPE_CHECKING:
    from host_agents.context import CollectiveContext as Ctx


def vrank(ctx: Ctx, root: int) -> int:
    return (ctx.rank - root) % ctx.size


def real(ctx: Ctx, v: int, root: int) -> int:
    return (v + root) % ctx.size


async def innet(ctx: Ctx, buf: bytearray, root: int) -> None:
    if ctx.rank == root:
        ctx.step = "multicast"
        await ctx.wait(ctx.multicast(Tree.INNET, buf), "multicasting")
        return
    ctx.step = "receive"
    msg = ctx.multicast_incoming(root, Tree.INNET, len(buf))
    buf[:] = await ctx.wait_incoming(msg, f"waiting for the multicast of rank {root}")


async def ragasa(ctx: Ctx, buf: bytearray, root: int) -> None:
    relays = ctx.relays(root)
    if ctx.rank == root:
        ctx.step = "phase 1 and own group"
        sends = []
        if relays:
            sends.append(ctx.multicast(Tree.RAGASA_SPREAD, buf))
        sends.append(ctx.multicast(Tree.RAGASA_GROUP, buf))
        await ctx.wait_all(sends, "multicasting to relays and own group")
        return
    if ctx.rank in relays:
        ctx.step = "phase 1 (relay)"
        msg = ctx.multicast_incoming(root, Tree.RAGASA_SPREAD, len(buf))
        # re-broadcast each segment as it arrives: the relay's group tree is fed by the stream
        ctx.step = "phase 2 (relay re-broadcast)"
        relay_send = ctx.multicast(Tree.RAGASA_GROUP, msg)
        buf[:] = await ctx.wait_incoming(msg, f"waiting for root rank {root}")
        await ctx.wait(relay_send, "re-broadcasting in the group")
        return
    my_group = ctx.group_of(ctx.rank)
    if my_group == ctx.group_of(root):
        source = root
    else:
        source = next(r for r in relays if ctx.group_of(r) == my_group)
    ctx.step = "phase 3 (receive from relay)"
    msg = ctx.multicast_incoming(source, Tree.RAGASA_GROUP, len(buf))
    buf[:] = await ctx.wait_incoming(msg, f"waiting for relay rank {source}")


async def binomial(ctx: Ctx, buf: bytearray, root: int) -> None:
    """Store and forward down a binomial tree rooted at ``root``."""
    v = vrank(ctx, root)
    up = parent(v)
    if up is not None:
        ctx.step = f"receive from parent (rank {real(ctx, up, root)})"
        buf[:] = await ctx.recv(real(ctx, up, root), 0, len(buf))
    ctx.step = "send to children"
    sends = [ctx.isend(real(ctx, c, root), 0, buf) for c in children(v, ctx.size)]
    await ctx.wait_all(sends, "sending to children")


def _chunk_bounds(nbytes: int, size: int) -> tuple[int, list[int]]:
    chunk = -(-nbytes // size) if nbytes else 0
    bounds = [min(nbytes, i * chunk) for i in range(size + 1)]
    return chunk, bounds


async def scatter_allgather(ctx: Ctx, buf: bytearray, root: int) -> None:
    """Van de Geijn: binomial scatter of P chunks (relative to the root), then a ring
    allgather of the chunks. Chunks that are empty for small messages are skipped on both
    sides, which compute the same sizes."""
    size, nbytes = ctx.size, len(buf)
    v = vrank(ctx, root)
    _, bounds = _chunk_bounds(nbytes, size)

    def span(first: int, last: int) -> tuple[int, int]:  # chunks [first, last)
        return bounds[first], bounds[min(last, size)]

    view = memoryview(buf)
    up = parent(v)
    if up is not None:
        start, end = span(v, subtree_end(v, size))
        if end > start:
            ctx.step = "scatter: receive"
            view[start:end] = await ctx.recv(real(ctx, up, root), 1, end - start)
    sends = []
    for child in children(v, size):
        start, end = span(child, subtree_end(child, size))
        if end > start:
            sends.append(ctx.isend(real(ctx, child, root), 1, view[start:end]))
    ctx.step = "scatter: send"
    await ctx.wait_all(sends, "scattering")

    right, left = real(ctx, (v + 1) % size, root), real(ctx, (v - 1) % size, root)
    for step in range(size - 1):
        ctx.step = f"ring step {step}"
        send_chunk = (v - step) % size
        recv_chunk = (v - step - 1) % size
        s_start, s_end = span(send_chunk, send_chunk + 1)
        r_start, r_end = span(recv_chunk, recv_chunk + 1)
        pending = []
        if s_end > s_start:
            pending.append(ctx.isend(right, 100 + step, view[s_start:s_end]))
        if r_end > r_start:
            view[r_start:r_end] = await ctx.recv(left, 100 + step, r_end - r_start)
        await ctx.wait_all(pending, f"ring step {step}")


async def chain(ctx: Ctx, buf: bytearray, root: int) -> None:
    """A pipeline through the ranks in order from the root: each segment is forwarded as
    soon as it arrives."""
    v, size = vrank(ctx, root), ctx.size
    successor = real(ctx, v + 1, root) if v + 1 < size else None
    if v == 0:
        if successor is not None:
            ctx.step = "send"
            await ctx.send(successor, 0, buf)
        return
    ctx.step = "receive and forward"
    msg = ctx.irecv(real(ctx, v - 1, root), 0, len(buf))
    forward = ctx.isend(successor, 0, msg) if successor is not None else None
    buf[:] = await ctx.wait_incoming(msg, "waiting for the predecessor")
    if forward is not None:
        await ctx.wait(forward, "forwarding to the successor")


def trinary_trees(size: int) -> list[list[int]]:
    """Three orders of the non-root virtual ranks 1..size-1 (three rotations), each read as a
    complete ternary tree: position i's children are positions 3i+1..3i+3, position 0 being
    the root. Rotating by a third moves different ranks into the inner positions, so the
    forwarding work of the three fragments falls on different ranks."""
    others = list(range(1, size))
    n = len(others)
    orders = []
    for f in range(3):
        shift = (f * n) // 3
        orders.append([0, *others[shift:], *others[:shift]])
    return orders


async def trinary3(ctx: Ctx, buf: bytearray, root: int) -> None:
    size, nbytes = ctx.size, len(buf)
    v = vrank(ctx, root)
    view = memoryview(buf)
    cuts = [nbytes * f // 3 for f in range(4)]
    jobs = []
    for fragment, order in enumerate(trinary_trees(size)):
        position = order.index(v)
        parent = order[(position - 1) // 3] if position else None
        children = [order[c] for c in range(3 * position + 1, 3 * position + 4) if c < size]
        jobs.append(
            _trinary_fragment(
                ctx, view[cuts[fragment] : cuts[fragment + 1]], root, fragment, parent, children
            )
        )
    await asyncio.gather(*jobs)


async def _trinary_fragment(
    ctx: Ctx,
    part: memoryview,
    root: int,
    fragment: int,
    parent: int | None,
    children: list[int],
) -> None:
    tag = 10 + fragment
    if parent is None:
        sends = [ctx.isend(real(ctx, c, root), tag, part) for c in children]
        await ctx.wait_all(sends, f"fragment {fragment}: sending")
        return
    msg = ctx.irecv(real(ctx, parent, root), tag, len(part))
    sends = [ctx.isend(real(ctx, c, root), tag, msg) for c in children]
    part[:] = await ctx.wait_incoming(msg, f"fragment {fragment}: waiting for the parent")
    await ctx.wait_all(sends, f"fragment {fragment}: forwarding")
