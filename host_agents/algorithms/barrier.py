"""Barrier algorithms ([NIC-barrier]).

``innet``: the switches count arrivals and release the tree. Host-based: ``dissemination``
(ceil(log2 N) rounds, rank r signals r + 2^k), ``pairwise`` (recursive doubling; the ranks
beyond the largest power of two fold into a partner first and are released by it last: two
extra one-way messages) and ``gather_bcast`` (a binomial gather to rank 0, then a binomial
broadcast). Every message is empty and reliable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from host_agents.algorithms.binomial import children, parent

if TYPE_CHECKING:
    from host_agents.context import CollectiveContext as Ctx

EMPTY = b""


async def innet(ctx: Ctx) -> None:
    ctx.step = f"ARRIVE epoch {ctx.epoch}"
    await ctx.arrive()


async def dissemination(ctx: Ctx) -> None:
    size, rank = ctx.size, ctx.rank
    distance, round_ = 1, 0
    while distance < size:
        ctx.step = f"round {round_}"
        sent = ctx.isend((rank + distance) % size, round_, EMPTY)
        await ctx.recv((rank - distance) % size, round_, 0)
        await ctx.wait(sent, f"round {round_}: signalling rank {(rank + distance) % size}")
        distance <<= 1
        round_ += 1


async def pairwise(ctx: Ctx) -> None:
    size, rank = ctx.size, ctx.rank
    core = 1
    while core * 2 <= size:
        core *= 2
    extra = size - core
    # ranks 0..2*extra-1 pair up: odd ranks fold into the even rank below them
    if rank < 2 * extra:
        if rank % 2:
            ctx.step = "fold into partner"
            await ctx.send(rank - 1, 0, EMPTY)
            ctx.step = "wait for partner's release"
            await ctx.recv(rank - 1, 99, 0)
            return
        await ctx.recv(rank + 1, 0, 0)
        virtual = rank // 2
    else:
        virtual = rank - extra

    def real_rank(v: int) -> int:
        return v * 2 if v < extra else v + extra

    mask, step = 1, 1
    while mask < core:
        partner = real_rank(virtual ^ mask)
        ctx.step = f"exchange with rank {partner}"
        sent = ctx.isend(partner, step, EMPTY)
        await ctx.recv(partner, step, 0)
        await ctx.wait(sent, f"exchange with rank {partner}")
        mask <<= 1
        step += 1
    if rank < 2 * extra:
        ctx.step = "release partner"
        await ctx.send(rank + 1, 99, EMPTY)


async def gather_bcast(ctx: Ctx) -> None:
    """Arrivals gathered up a binomial tree to rank 0, the release sent back down it."""
    size, rank = ctx.size, ctx.rank
    below = children(rank, size)
    up = parent(rank)
    ctx.step = "gather"
    for child in reversed(below):  # the smallest subtrees finish first
        await ctx.recv(child, 0, 0)
    if up is not None:
        await ctx.send(up, 0, EMPTY)
        ctx.step = "wait for the release"
        await ctx.recv(up, 1, 0)
    ctx.step = "release"
    await ctx.wait_all([ctx.isend(child, 1, EMPTY) for child in below], "releasing children")
