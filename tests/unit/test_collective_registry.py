"""The registry is the only place a collective is declared: a toy collective added through
its descriptors alone runs blocking, nonblocking and persistent on the fabric, and is checked
by the same byte checks the agents use."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest

from controller.topology_build import dragonfly
from host_agents.collectives import (
    COLLECTIVES,
    Algorithm,
    Call,
    Case,
    Collective,
    UnknownAlgorithm,
    algorithms_of,
    register,
)
from host_agents.context import CollectiveContext
from host_agents.workload import CollectiveTest, Instance
from tests.fabric import Cluster

pytestmark = pytest.mark.unit

TOPO = dragonfly(2, 2, 1)
MEMBERS = tuple(h.node_id for h in TOPO.hosts[:7])
ShiftFn = Callable[[CollectiveContext, bytes, bytearray], Awaitable[None]]


async def shift_ring(ctx: CollectiveContext, mine: bytes, out: bytearray) -> None:
    """Every rank sends its block to the next rank and receives the previous rank's."""
    ctx.step = "shift"
    sent = ctx.isend((ctx.rank + 1) % ctx.size, 0, mine)
    out[:] = await ctx.recv((ctx.rank - 1) % ctx.size, 0, len(mine))
    await ctx.wait(sent, "sending to the next rank")


async def _shift(fn: ShiftFn, ctx: CollectiveContext, call: Call) -> bytearray:
    out = bytearray(call.size)
    await fn(ctx, bytes(call.data or b""), out)
    return out


SHIFT: Collective[ShiftFn] = Collective(
    name="shift",
    doc="rank i ends with the block of rank i - 1",
    has_root=False,
    algorithms=algorithms_of(Algorithm("ring", shift_ring)),
    execute=_shift,
    check=lambda rank, ranks, call: (
        None if call.data is not None and len(call.data) == call.size else "needs a block"
    ),
    auto=lambda nbytes, ranks, innet: ("ring", "the only one"),
    contribution=lambda c: c.owned(c.rank, c.size),
    expected=lambda c: c.owned((c.rank - 1) % c.ranks, c.size),
)


@pytest.fixture
def shift_registered() -> Iterator[None]:
    register(SHIFT)
    try:
        yield
    finally:
        del COLLECTIVES["shift"]


def test_a_toy_collective_runs_through_the_descriptors_alone(shift_registered: None) -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(TOPO, MEMBERS, loop=loop)
        n = len(MEMBERS)
        for iteration in range(3):
            instances = [Instance("shift", 7, 0, 100, iteration, 0, n, rank) for rank in range(n)]
            calls = [Call(inst.contribution(), 0, 100) for inst in instances]
            results = await asyncio.gather(
                *(c.run("shift", call) for c, call in zip(cluster.comms, calls, strict=True))
            )
            for inst, got in zip(instances, results, strict=True):
                assert got == inst.expected()
        persistent = await asyncio.gather(*(c.init("shift", size=4) for c in cluster.comms))
        for p, comm in zip(persistent, cluster.comms, strict=True):
            p.start(bytes([comm.rank] * 4))
        results = await asyncio.gather(*(p.wait() for p in persistent))
        assert [r[0] for r in results] == [(rank - 1) % n for rank in range(n)]
        assert CollectiveTest("shift", "ring").collective == "shift"  # the workload knows it
        with pytest.raises(UnknownAlgorithm, match="unknown shift algorithm 'nope'"):
            cluster.comms[0].start("shift", Call(b"x", 0, 1), algorithm="nope")

    async def main() -> None:
        await asyncio.wait_for(body(asyncio.get_running_loop()), 60)

    asyncio.run(main())


def test_unknown_collectives_name_the_known_ones() -> None:
    with pytest.raises(
        UnknownAlgorithm, match="known: bcast, barrier, scatter, allgather, allreduce, reduce"
    ):
        CollectiveTest("gather")


def test_a_reductions_expectation_is_combined_once_for_all_ranks() -> None:
    """Checking a 5,256-rank allreduce asks every rank's expectation; combining all vectors
    for each rank made the check O(ranks^2) (8 minutes of numpy at Df(6,12,6), 1 KiB)."""
    calls: list[tuple[int, int]] = []

    def owned(rank: int, n: int) -> bytes:
        calls.append((rank, n))
        return bytes([rank % 251]) * n

    allreduce = COLLECTIVES["allreduce"]
    wants = [allreduce.expected(Case(owned, 0, 50, rank, 8)) for rank in range(50)]
    assert len(set(wants)) == 1
    assert len(calls) == 50  # each rank's vector read once, not once per checked rank


def test_auto_packs_short_allgather_blocks_where_the_switches_serve_the_communicator() -> None:
    # measured on Df(2,4,2) at 1 KiB: packed 372 ms, every block its own multicast 842 ms,
    # recursive doubling 542 ms (make bench, README section Measured)
    allgather = COLLECTIVES["allgather"]
    assert allgather.choose("auto", 1024, 72, True)[0] == "innet_packed"
    assert allgather.choose("auto", 1024, 64, False)[0] == "recursive_doubling"
    assert allgather.choose("auto", 64 * 1024, 72, True)[0] == "tar"
