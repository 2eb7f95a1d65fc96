"""Loss recovery of the in-network allgather, one forced loss at a time.

Every rank publishes its block; a receiver missing one asks its root after a silence, asks
again once the answer is overdue (the measured repair round trip, not another silence), and
returns as soon as it holds every block, while its own block stays published for the others
until a switch barrier in the background confirms that everyone has everything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from controller import wire
from controller.topology import Topology
from controller.topology_build import dragonfly
from host_agents.algorithms.allgather import IN_FLIGHT_BYTES
from host_agents.comm import Comm, CommOptions
from host_agents.engine import EngineConfig
from tests import allgather_timing
from tests.fabric import Cluster, Faults

pytestmark = pytest.mark.unit

TOPO: Topology = dragonfly(2, 2, 2)  # 5 groups, 10 routers, 20 hosts
MEMBERS = tuple(h.node_id for h in TOPO.hosts)
QUIET = 0.5  # the silence before a receiver first asks: long, so a second silence shows
CONFIG = EngineConfig(segment_size=wire.MAX_PAYLOAD, repair_quiet_min=QUIET, rto_min=0.05)
OPTIONS = CommOptions(progress_timeout=20.0, first_data_timeout=20.0, op_timeout=30.0)
BLOCK = 1000
LATE, OWNER = 7, 3  # ranks: LATE loses OWNER's block


def host_link(node: int) -> tuple[int, int]:
    host = TOPO.host_by_node(node)
    return (host.switch, host.port)


class Losses:
    """Drops chosen frames on the fabric: OWNER's block on its way to LATE (for the
    instances listed), and LATE's first NACKs (as many as asked)."""

    def __init__(self) -> None:
        self.block_of_instance: set[int] = set()
        self.nacks_to_lose = 0
        self.instance = 0

    def __call__(self, link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        late, owner = MEMBERS[LATE], MEMBERS[OWNER]
        if (
            self.instance in self.block_of_instance
            and link == host_link(late)
            and hdr.op == wire.Op.MCAST
            and hdr.root_node == owner
            and not hdr.flags & wire.Flag.REPAIR
        ):
            return True
        if hdr.op == wire.Op.NACK and hdr.src_node == late and self.nacks_to_lose:
            self.nacks_to_lose -= 1
            return True
        return False


async def timed_allgather(
    comms: list[Comm], instance: int, started: float, size: int = BLOCK
) -> tuple[list[float], list[bytes]]:
    """Every rank's ``innet`` allgather: (seconds from ``started`` to each rank's return,
    results)."""
    return await allgather_timing.timed_allgather(comms, instance, started, size, "innet")


def run(body: Callable[[Cluster, Losses], object]) -> None:
    async def main() -> None:
        losses = Losses()
        cluster = Cluster(
            TOPO,
            MEMBERS,
            loop=asyncio.get_running_loop(),
            config=CONFIG,
            options=OPTIONS,
            faults=Faults(drop_if=losses),
        )
        await body(cluster, losses)  # type: ignore[misc]

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_rank_returns_once_it_holds_every_block_and_the_late_one_is_still_repaired() -> None:
    async def body(cluster: Cluster, losses: Losses) -> None:
        losses.block_of_instance = {0}
        loop = asyncio.get_running_loop()
        done, _ = await timed_allgather(cluster.comms, 0, loop.time())
        others = [t for rank, t in enumerate(done) if rank != LATE]
        # the late rank waited for a silence and a repair; nobody waited for it
        assert done[LATE] >= QUIET
        assert max(others) < QUIET / 2, f"ranks waited for the late one: {others}"
        # the owner's block was still published when the late rank asked, after its owner
        # had returned; once the confirming barrier is through, nothing stays published
        assert cluster.comms[OWNER].engine.stats.mcast_retransmissions >= 1
        await asyncio.gather(*(c.settle() for c in cluster.comms))
        assert all(not c.engine._publisher._published for c in cluster.comms)

    run(body)


def test_a_lost_nack_costs_a_repair_round_trip_not_another_silence() -> None:
    async def body(cluster: Cluster, losses: Losses) -> None:
        loop = asyncio.get_running_loop()
        # instance 0: a loss answered at the first ask teaches the late rank the round trip
        losses.block_of_instance = {0, 1}
        await timed_allgather(cluster.comms, 0, loop.time())
        await asyncio.gather(*(c.barrier(algorithm="innet") for c in cluster.comms))
        # instance 1: the block and the first NACK for it are lost
        losses.instance, losses.nacks_to_lose = 1, 1
        done, _ = await timed_allgather(cluster.comms, 1, loop.time())
        assert losses.nacks_to_lose == 0, "the late rank never asked"
        stats = cluster.comms[LATE].engine.stats
        assert stats.nacks_sent >= 3
        # one silence, then a round trip: before, the second ask waited two more pauses
        assert QUIET <= done[LATE] < 1.6 * QUIET, f"the late rank took {done[LATE]:.2f} s"

    run(body)


def test_a_rank_whose_gate_block_was_lost_publishes_once_a_later_block_arrives() -> None:
    """With large blocks a rank publishes once the block of the rank W below it is here (W:
    about IN_FLIGHT_BYTES in flight). When that block is lost, and the NACKs for it too, the
    rank publishes once a block published after it arrived (or arrivals fell silent), not
    after its repair: everyone else was waiting for its block."""
    size = 24_000  # W = 4: the late rank (7) publishes after the owner's block (rank 3)
    assert IN_FLIGHT_BYTES // size == LATE - OWNER

    async def body(cluster: Cluster, losses: Losses) -> None:
        losses.block_of_instance, losses.nacks_to_lose = {0}, 3
        loop = asyncio.get_running_loop()
        done, _ = await timed_allgather(cluster.comms, 0, loop.time(), size)
        others = [t for rank, t in enumerate(done) if rank != LATE]
        assert losses.nacks_to_lose == 0
        # the late rank's own repair took a silence and three unanswered asks; before, the
        # others got its block only after that repair
        assert max(others) < done[LATE] - QUIET, f"others {others}, the late rank {done[LATE]}"

    run(body)
