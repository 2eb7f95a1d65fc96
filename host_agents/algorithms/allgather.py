"""Allgather algorithms ([DF-scatter] and MPICH).

``ring`` (P-1 steps to the right neighbour), ``bruck`` (ceil(log2 P) steps, any P),
``recursive_doubling`` (log2 steps; ranks beyond the largest power of two fold their block
into a partner first and get the result from it last), ``tar`` (topology-aware ring: ranks
ordered by group and router so each step crosses every global link at most once) and
``innet`` (every rank multicasts its block; the switches replicate it) and ``innet_packed``
(each group's ranks hand their blocks to one leader, whose pack the switches replicate).
"""

from __future__ import annotations

import asyncio
import contextlib
from asyncio import FIRST_COMPLETED
from collections.abc import Mapping
from typing import TYPE_CHECKING

from host_agents.context import Tree

if TYPE_CHECKING:
    from host_agents.context import CollectiveContext as Ctx
    from host_agents.context import Incoming


async def _ring(ctx: Ctx, recvbuf: bytearray, block: int, order: list[int]) -> None:
    size = ctx.size
    view = memoryview(recvbuf)
    position = order.index(ctx.rank)
    right, left = order[(position + 1) % size], order[(position - 1) % size]
    for step in range(size - 1):
        ctx.step = f"ring step {step}"
        send_rank = order[(position - step) % size]
        recv_rank = order[(position - step - 1) % size]
        sent = ctx.isend(right, step, view[send_rank * block : (send_rank + 1) * block])
        view[recv_rank * block : (recv_rank + 1) * block] = await ctx.recv(left, step, block)
        await ctx.wait(sent, f"ring step {step}: sending to rank {right}")


async def ring(ctx: Ctx, recvbuf: bytearray, block: int) -> None:
    await _ring(ctx, recvbuf, block, list(range(ctx.size)))


def tar_order(ctx: Ctx) -> list[int]:
    """Ranks sorted by (group, router, rank): neighbours in the ring share a router or a
    group wherever possible, so a step crosses one global link per group."""
    return sorted(range(ctx.size), key=lambda r: (ctx.group_of(r), ctx.switch_of(r), r))


async def tar(ctx: Ctx, recvbuf: bytearray, block: int) -> None:
    await _ring(ctx, recvbuf, block, tar_order(ctx))


async def bruck(ctx: Ctx, recvbuf: bytearray, block: int) -> None:
    size, rank = ctx.size, ctx.rank
    # work in rotated order: position i holds the block of rank (rank + i) % size
    work = bytearray(size * block)
    work[:block] = recvbuf[rank * block : (rank + 1) * block]
    distance, step = 1, 0
    while distance < size:
        count = min(distance, size - distance)
        ctx.step = f"step {step}"
        sent = ctx.isend((rank - distance) % size, step, bytes(work[: count * block]))
        work[distance * block : (distance + count) * block] = await ctx.recv(
            (rank + distance) % size, step, count * block
        )
        await ctx.wait(sent, f"step {step}")
        distance <<= 1
        step += 1
    for i in range(size):
        owner = (rank + i) % size
        recvbuf[owner * block : (owner + 1) * block] = work[i * block : (i + 1) * block]


async def recursive_doubling(ctx: Ctx, recvbuf: bytearray, block: int) -> None:
    size, rank = ctx.size, ctx.rank
    core = 1
    while core * 2 <= size:
        core *= 2
    view = memoryview(recvbuf)

    def blocks_of(ranks: list[int]) -> bytes:
        return b"".join(view[r * block : (r + 1) * block] for r in ranks)

    def place(ranks: list[int], data: bytes | bytearray) -> None:
        for i, r in enumerate(ranks):
            view[r * block : (r + 1) * block] = data[i * block : (i + 1) * block]

    if rank >= core:  # fold into rank - core, get everything back at the end
        ctx.step = "fold into partner"
        await ctx.send(rank - core, 0, blocks_of([rank]))
        ctx.step = "receive the result"
        view[:] = await ctx.recv(rank - core, 99, size * block)
        return
    partner_extra = rank + core if rank + core < size else None
    if partner_extra is not None:
        ctx.step = "collect the folded block"
        place([partner_extra], await ctx.recv(partner_extra, 0, block))

    def owned(core_rank: int, width: int) -> list[int]:
        base = core_rank & ~(width - 1)
        members = list(range(base, base + width))
        return sorted(members + [m + core for m in members if m + core < size])

    mask, step = 1, 1
    while mask < core:
        partner = rank ^ mask
        mine, theirs = owned(rank, mask), owned(partner, mask)
        ctx.step = f"exchange with rank {partner}"
        sent = ctx.isend(partner, step, blocks_of(mine))
        place(theirs, await ctx.recv(partner, step, len(theirs) * block))
        await ctx.wait(sent, f"exchange with rank {partner}")
        mask <<= 1
        step += 1
    if partner_extra is not None:
        ctx.step = "return the result"
        await ctx.send(partner_extra, 99, bytes(recvbuf))


# bytes published at once across the communicator: 64 standard frames, what BMv2's port
# buffers absorb. Counted in bytes, not segments: on jumbo links a 1 KiB block is one small
# frame, and gating 72 such blocks made 8 ranks wait for a repair before they could publish
IN_FLIGHT_BYTES = 64 * 1500


def _passed(gate: int, rank: int, pending: Mapping[int, object]) -> bool:
    """Whether the data of rank ``gate``, or of a rank published after it, is here: a later
    one here while the gate's is not says the gate's was lost, and a lost block must not hold
    back everyone gated behind it until its repair."""
    return any(r not in pending for r in range(gate, rank))


async def innet(ctx: Ctx, recvbuf: bytearray, block: int) -> None:
    """Every rank publishes its block on its own switch tree, a sliding window of ranks at a
    time: rank r publishes once it holds the block of rank r - W or of a later rank (or
    arrivals fall silent: that block was lost), W chosen so about
    IN_FLIGHT_BYTES are multicast at once (72 ranks publishing 16 KiB together
    overflow BMv2's port buffers and the repairs that follow). Receivers ask the roots for
    what is missing when arrivals fall silent or an asked root's answer is overdue (the
    repair pacer of host_agents/transport/publish.py decides whom to ask, and when). A rank
    returns once it holds every block; its own stays published for repairs until a switch
    barrier, run in the background, says every rank has every block. No per-multicast ACKs:
    P^2 of them would dwarf the data."""
    view = memoryview(recvbuf)
    window = max(1, IN_FLIGHT_BYTES // max(block, 1))
    gate = ctx.rank - window  # publish once this rank's block is here
    mine = bytes(view[ctx.rank * block : (ctx.rank + 1) * block])
    published: object | None = None
    quiet = False  # the last wait ended without an arrival: nothing is in flight here
    pending = {
        rank: ctx.multicast_incoming(rank, Tree.INNET, block)
        for rank in range(ctx.size)
        if rank != ctx.rank
    }
    try:
        ctx.step = "receive every block"
        pacer = ctx.repair_pacer(window)  # when to ask which ranks for repairs
        while True:
            if published is None and (gate < 0 or _passed(gate, ctx.rank, pending) or quiet):
                published = ctx.publish(Tree.INNET, mine)
            if not pending:
                break
            done, _ = await asyncio.wait(
                [m.done for m in pending.values()],
                timeout=pacer.timeout(ctx.now()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            for rank, msg in list(pending.items()):
                if msg.done.done():
                    view[rank * block : (rank + 1) * block] = msg.done.result()
                    ctx.consume(msg)
                    del pending[rank]
            now = ctx.now()
            quiet = not done
            if done:
                pacer.arrived(now)
            elif now - pacer.silent_since > ctx.progress_timeout:
                missing = sorted(pending)[:8]
                asks = [pending[r].repair_asks for r in missing]  # NACKs sent to each
                raise ctx.error(
                    f"blocks of ranks {missing} never arrived ({len(pending)} missing; "
                    f"asked {asks} times)"
                )
            if pending:
                pacer.tick(pending, now)
    except BaseException:
        if published is not None:
            ctx.withdraw(published)
        raise
    ctx.step = "confirm with a switch barrier"
    assert published is not None  # the loop publishes before it can end
    ctx.withdraw_after_barrier(published)


# most bytes one leader packs: a jumbo segment holds eight 1 KiB blocks, so a receiver wakes
# once per pack, not once per rank; larger blocks make smaller packs, down to one rank each
PACK_BYTES = 16384
# a receiver holding some packs asks for the others once arrivals pause this long (seconds),
# then backs off doubling to PACK_ASK_MAX (the engine sends a co-root's asks only: members
# are repaired by theirs unasked). A leader may still be gathering: on BMv2 with no loss,
# pausing 0.1 s sent 24 asks per operation and brought whole-tree repairs, 0.3 s 2.4
PACK_ASK_PAUSE = 0.3
PACK_ASK_MAX = 1.0


def packs(ctx: Ctx, block: int) -> list[list[int]]:
    """Ranks in topology order cut into packs: runs within one dragonfly group of at most
    PACK_BYTES of blocks each; a pack's first rank is its leader."""
    per_pack = max(1, PACK_BYTES // max(block, 1))
    layout: list[list[int]] = []
    for rank in tar_order(ctx):
        last = layout[-1] if layout else None
        if last and len(last) < per_pack and ctx.group_of(last[0]) == ctx.group_of(rank):
            last.append(rank)
        else:
            layout.append([rank])
    return layout


async def _gather(ctx: Ctx, own: list[int], block: int) -> list[tuple[int, bytearray]]:
    """The leader's side of a pack: each member's block, by its position in ``own``. Once it
    holds some, it asks for the others whenever arrivals pause (ctx.resend_ask_delay): their
    senders resend at once instead of after their retransmission timeouts, which every
    receiver of the pack would otherwise wait out too."""
    pending = {i: ctx.irecv(member, 0, block) for i, member in enumerate(own) if i}
    got: list[tuple[int, bytearray]] = []
    last = ctx.now()
    while pending:
        waiting = [m.done for m in pending.values()]
        if not got:  # members may enter late: bounded like any receive's first segment
            what = f"the blocks of ranks {[own[i] for i in pending]}"
            await ctx.wait(asyncio.wait(waiting, return_when=FIRST_COMPLETED), what)
            done = True
        else:
            arrived, _ = await asyncio.wait(
                waiting, timeout=ctx.resend_ask_delay, return_when=FIRST_COMPLETED
            )
            done = bool(arrived)
        for i, msg in list(pending.items()):
            if msg.done.done():
                got.append((i, await ctx.wait_incoming(msg, f"the block of rank {own[i]}")))
                del pending[i]
                last = ctx.now()
        if done or not pending:
            continue
        if ctx.now() - last > ctx.progress_timeout:
            missing = [own[i] for i in pending]
            raise ctx.error(f"the blocks of ranks {missing} never arrived")
        for msg in pending.values():  # the others have started: these are overdue, not late
            ctx.ask_resend(msg)
    return got


async def _ask_for_late_packs(ctx: Ctx, packs: list[Incoming]) -> None:
    """Once some of ``packs`` came and arrivals pause for PACK_ASK_PAUSE, ask for the others
    (each again after twice its last wait, up to PACK_ASK_MAX), until cancelled: a pack is
    one segment, and a co-root that lost it, with its group behind it, was repaired only on
    the root's timeout, a second or more on a loaded emulator (at 1% loss on BMv2 a group's
    last pack came 1.4-4 s after its leader sent it). The receives bound the wait."""
    asked: dict[int, tuple[float, float]] = {}  # pack -> (when asked, the wait after it)
    last: float | None = None  # the latest arrival
    while pending := [i for i, msg in enumerate(packs) if not msg.done.done()]:
        waiting = [packs[i].done for i in pending]
        came, _ = await asyncio.wait(
            waiting, timeout=None if last is None else PACK_ASK_PAUSE, return_when=FIRST_COMPLETED
        )
        now = ctx.now()
        if came:
            last = now
            continue
        for i in pending:
            at, wait = asked.get(i, (-1e9, 0.0))
            if now - at >= wait:
                ctx.ask_resend(packs[i])
                asked[i] = (now, min(2 * max(wait, PACK_ASK_PAUSE / 2), PACK_ASK_MAX))


async def innet_packed(ctx: Ctx, recvbuf: bytearray, block: int) -> None:
    """Each pack's members send their blocks to its leader over the group's local links; the
    leader multicasts the pack along its switch tree, acknowledged and repaired like an
    in-network broadcast. A receiver takes one frame per pack instead of one per rank, the
    agents' cost that holds ``innet`` back on small blocks (docs/performance.md).

    Blocks too long to share a pack are published as ``innet`` does: every rank rooting an
    acknowledged broadcast in the same instance stalled a 16 KiB allgather on Df(2,4,2) (e2e),
    and on the in-process fabric at 5% loss brought 8,800 NACKs per operation."""
    if 2 * block > PACK_BYTES:
        await innet(ctx, recvbuf, block)
        return
    view = memoryview(recvbuf)

    def unpack(members: list[int], data: bytes | bytearray) -> None:
        for i, member in enumerate(members):
            view[member * block : (member + 1) * block] = data[i * block : (i + 1) * block]

    layout = packs(ctx, block)
    own = next(p for p in layout if ctx.rank in p)
    incoming = {
        p[0]: (p, ctx.multicast_incoming(p[0], Tree.INNET, len(p) * block))
        for p in layout
        if p[0] != ctx.rank
    }
    if ctx.rank == own[0]:
        ctx.step = "gather the pack"
        pack = bytearray(len(own) * block)
        pack[:block] = view[ctx.rank * block : (ctx.rank + 1) * block]
        for i, data in await _gather(ctx, own, block):
            pack[i * block : (i + 1) * block] = data
        unpack(own, pack)
        sent = ctx.multicast(Tree.INNET, pack)
    else:
        ctx.step = f"send the block to the pack's leader (rank {own[0]})"
        sent = ctx.isend(own[0], 0, view[ctx.rank * block : (ctx.rank + 1) * block])
    ctx.step = "receive every pack"
    late = [m for _, m in incoming.values()]
    asks = asyncio.get_running_loop().create_task(_ask_for_late_packs(ctx, late))
    try:
        for leader, (members, msg) in incoming.items():
            unpack(members, await ctx.wait_incoming(msg, f"the pack of rank {leader}"))
    finally:
        asks.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asks
    await ctx.wait(sent, "multicasting the pack" if ctx.rank == own[0] else "sending the block")
