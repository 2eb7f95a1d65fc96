"""What one operation costs the emulator, in frames: the protocols' budget.

On the 2-core emulator every frame costs CPU (an agent wake-up, a BMv2 pipeline pass), and the
time of a collective follows its frame count (docs/performance.md). These tests count, on the
in-process fabric with Mininet's 9000-byte frames and windows, the frames the agents send and
receive and the switch passes of one lossless operation on Df(2,4,2), so a change that adds
frames to an in-network collective, or takes away its lead over the host algorithms, fails
here rather than showing up as a slower benchmark weeks later.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from controller import wire
from controller.topology_build import dragonfly
from host_agents.collectives import Call
from host_agents.comm import CommOptions
from host_agents.engine import EngineConfig
from tests.fabric import Cluster, Fabric

pytestmark = pytest.mark.unit

TOPO = dragonfly(2, 4, 2)  # 9 groups, 36 switches, 72 hosts: the benchmarks' network
HOSTS = tuple(h.node_id for h in TOPO.hosts)
SEGMENT = wire.max_payload(9000)  # Mininet's links carry 9000-byte frames
OPERATIONS = 3  # counted after one warm-up operation
# one message in from every rank, merged up the switches' tree and sent back down it: the
# passes of an in-network barrier, or of one chunk of an in-network allreduce
TREE_PASSES = len(HOSTS) + 2 * (TOPO.num_switches - 1)
# Loss-recovery timers far beyond a lossless operation's time: 72 ranks in one process can be
# slow enough on a busy machine for a 50 ms RTO or a 10 ms tail probe to fire spuriously, and
# what is counted here is the protocol's lossless budget, not the host's load
QUIET_TIMERS = {
    "rto_initial": 5.0,
    "rto_min": 5.0,
    "rto_max": 10.0,
    "tail_delay": 2.0,
    "nack_delay": 1.0,
    "coroot_probe_delay": 2.0,
    "repair_quiet_min": 2.0,
    # a barrier's ARRIVE is resent after barrier_rto (0.1 s): on a loaded CI machine a
    # 72-rank barrier in one process took longer, and 10 resent ARRIVEs per operation failed
    # the in-network barrier's exact count
    "barrier_rto": 5.0,
    "barrier_rto_max": 10.0,
    # a leader of the packed allgather asks for its members' blocks after a 20 ms pause
    "resend_ask_delay": 2.0,
}


@dataclass(frozen=True)
class Budget:
    agents_sent: float
    agents_received: float
    switch_passes: float  # ingress passes; a frame crossing three switches counts three

    @property
    def agent_frames(self) -> float:
        return self.agents_sent + self.agents_received


def _windows_for(segment: int) -> dict[str, int]:
    """The launcher's windows (mininet_topos.network, which imports Mininet: skip without)."""
    network = pytest.importorskip("mininet_topos.network", reason="Mininet is not installed")
    return dict(network.windows_for(segment))


def count(collective: str, algorithm: str, size: int, ack_merge: str = "coroots") -> Budget:
    """Frames per operation, averaged over OPERATIONS lossless ones on every rank."""
    counts: Counter[str] = Counter()

    class CountingFabric(Fabric):
        def host_transmit(self, node: int, frame: bytes) -> None:
            counts["sent"] += 1
            super().host_transmit(node, frame)

        def _at_switch(self, switch: int, in_port: int, frame: bytes) -> None:
            counts["passes"] += 1
            super()._at_switch(switch, in_port, frame)

        def _at_host(self, node: int, frame: bytes) -> None:
            counts["received"] += 1
            super()._at_host(node, frame)

    settings: dict[str, Any] = {"segment_size": SEGMENT, **_windows_for(SEGMENT), **QUIET_TIMERS}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        cluster = Cluster(
            TOPO,
            HOSTS,
            loop=loop,
            config=EngineConfig(**settings),
            options=CommOptions(ack_merge=ack_merge),
        )
        cluster.fabric.__class__ = CountingFabric
        data = bytes(range(256)) * (size // 256) + bytes(size % 256)

        async def operate(n: int) -> None:
            async def one(comm_index: int) -> None:
                comm = cluster.comms[comm_index]
                for _ in range(n):
                    if collective == "barrier":
                        await comm.barrier(algorithm=algorithm)
                    elif collective == "allreduce":
                        call = Call(data, 0, size, "sum")
                        await comm.run("allreduce", call, algorithm=algorithm)
                    elif collective == "allgather":
                        got = await comm.allgather(data, algorithm=algorithm)
                        assert bytes(got) == data * len(HOSTS)
                    else:
                        mine = data if comm.rank == 0 else None
                        got = await comm.bcast(mine, 0, size=size, algorithm=algorithm)
                        assert bytes(got) == data

            await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(len(HOSTS)))), 120)

        await operate(1)
        counts.clear()
        await operate(OPERATIONS)
        for comm in cluster.comms:
            await comm.settle()

    asyncio.run(main())
    return Budget(
        counts["sent"] / OPERATIONS,
        counts["received"] / OPERATIONS,
        counts["passes"] / OPERATIONS,
    )


def test_the_in_network_barrier_costs_one_frame_out_and_one_in_per_rank() -> None:
    budget = count("barrier", "innet", 0)
    # 72 ARRIVEs in, 72 RELEASEs out; the switches pass the 72 ARRIVEs, 35 merged ARRIVEs up
    # the tree and 35 RELEASEs down it (36 switches): no retransmission, no extra frame
    assert budget == Budget(len(HOSTS), len(HOSTS), TREE_PASSES)
    host = count("barrier", "gather_bcast", 0)
    assert host.agent_frames >= 3.5 * budget.agent_frames
    assert host.switch_passes >= 3 * budget.switch_passes


def test_a_switch_merged_broadcast_costs_its_segments_and_one_ack_per_receiver() -> None:
    budget = count("bcast", "innet", 16384, ack_merge="switch")
    segments = -(-16384 // SEGMENT)
    receivers = len(HOSTS) - 1
    # the root's segments and one checkpoint ACK per receiver; every receiver gets each
    # segment once and the root gets the one merged ACK
    assert budget.agents_sent <= segments + receivers + 1
    assert budget.agents_received <= segments * receivers + 2
    binomial = count("bcast", "binomial", 16384)
    # binomial moves every segment through a rank that must receive and resend it, and
    # acknowledges each message: about twice the frames at both agents and switches
    assert binomial.agent_frames >= 1.9 * budget.agent_frames
    assert binomial.switch_passes >= 1.9 * budget.switch_passes


def test_an_in_network_allreduce_costs_one_frame_each_way_per_chunk_and_rank() -> None:
    """A REDUCE carries wire.AGG_LANES 32-bit lanes: 4 bytes take one chunk, like a barrier;
    1 KiB takes 1024 / (4 * AGG_LANES) chunks, each costing what the 4-byte case costs. That is
    why it moves more frames than binomial's one 1 KiB message per rank (docs/performance.md)."""
    one_chunk = count("allreduce", "innet", 4)
    assert one_chunk == Budget(len(HOSTS), len(HOSTS), TREE_PASSES)
    chunks = 1024 // (4 * wire.AGG_LANES)
    assert count("allreduce", "innet", 1024) == Budget(
        len(HOSTS) * chunks, len(HOSTS) * chunks, TREE_PASSES * chunks
    )
    assert count("allreduce", "binomial", 4).agent_frames >= 3.5 * one_chunk.agent_frames


def test_a_packed_allgather_hands_every_rank_one_frame_per_group() -> None:
    """Each group's 8 ranks hand their 1 KiB blocks to a leader, whose 8 KiB pack is one
    segment: a rank receives 9 packs, not 71 blocks (docs/performance.md, section 3)."""
    budget = count("allgather", "innet_packed", 1024, ack_merge="switch")
    groups = TOPO.num_groups
    members = len(HOSTS) - groups  # ranks that hand their block to a leader
    packs_received = groups * (len(HOSTS) - 1)
    # each member's block and its ACK; each pack and one checkpoint ACK per receiver
    assert budget.agents_sent <= 2 * members + groups + packs_received
    assert budget.agents_received <= 2 * members + packs_received + groups
    doubling = count("allgather", "recursive_doubling", 1024)
    assert doubling.agent_frames >= 1.6 * budget.agent_frames
    assert doubling.switch_passes >= 2.5 * budget.switch_passes
    coroots = count("allgather", "innet_packed", 1024)
    assert doubling.agent_frames >= 1.15 * coroots.agent_frames


ROWS = (
    ("barrier", "innet", 0, "coroots"),
    ("barrier", "gather_bcast", 0, "coroots"),
    ("barrier", "dissemination", 0, "coroots"),
    ("bcast", "innet", 16384, "switch"),
    ("bcast", "innet", 16384, "coroots"),
    ("bcast", "binomial", 16384, "coroots"),
    ("bcast", "innet", 1, "switch"),
    ("bcast", "binomial", 1, "coroots"),
    ("allreduce", "innet", 4, "coroots"),
    ("allreduce", "binomial", 4, "coroots"),
    ("allreduce", "recursive_doubling", 4, "coroots"),
    ("allreduce", "innet", 1024, "coroots"),
    ("allreduce", "binomial", 1024, "coroots"),
    ("allreduce", "recursive_doubling", 1024, "coroots"),
    ("allgather", "innet", 1024, "coroots"),
    ("allgather", "innet_packed", 1024, "switch"),
    ("allgather", "innet_packed", 1024, "coroots"),
    ("allgather", "recursive_doubling", 1024, "coroots"),
)

# the table in docs/performance.md: python -m tests.unit.test_frame_budget
if __name__ == "__main__":
    print("| operation | agents send | agents receive | switch ingress passes |")
    print("|---|---:|---:|---:|")
    for collective, algorithm, size, merge in ROWS:
        b = count(collective, algorithm, size, merge)
        merged = (collective, algorithm) in (("bcast", "innet"), ("allgather", "innet_packed"))
        acks = f", {merge} ACKs" if merged else ""
        what = f"{collective} {size} B, {algorithm}{acks}"
        print(
            f"| {what} | {b.agents_sent:,.1f} | {b.agents_received:,.1f} | {b.switch_passes:,.1f} |"
        )
