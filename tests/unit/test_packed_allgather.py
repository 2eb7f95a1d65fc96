"""The packed in-network allgather (``innet_packed``): its layout, and its recovery from one
forced loss at a time on the in-process fabric.

Each dragonfly group's ranks hand their blocks to a leader by unicast; the leader's pack is an
acknowledged in-network broadcast. A lost block or pack is repaired by the unicast and
broadcast machinery in round trips, not after the silence a published multicast waits for
(``repair_quiet_min``, set far beyond the bound asserted here).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller import wire
from controller.topology import Topology
from controller.topology_build import dragonfly
from host_agents.algorithms.allgather import PACK_BYTES
from host_agents.comm import Comm, CommOptions
from host_agents.engine import EngineConfig
from tests import allgather_timing
from tests.fabric import Cluster, Faults

pytestmark = pytest.mark.unit

TOPO: Topology = dragonfly(2, 2, 2)  # 5 groups of 4 hosts
MEMBERS = tuple(h.node_id for h in TOPO.hosts)
SILENCE = 5.0  # a published multicast's first ask would wait this long
CONFIG = EngineConfig(segment_size=wire.MAX_PAYLOAD, repair_quiet_min=SILENCE, rto_min=0.05)
OPTIONS = CommOptions(progress_timeout=20.0, first_data_timeout=20.0, op_timeout=30.0)
BLOCK = 1000
BOUND = 1.0  # seconds: a few round trips and timeouts of the unicast and broadcast repairs
RTO_FLOOR = 3.0  # a unicast sender's least retransmission timeout, where a test sets it


def rank_of(node: int) -> int:
    return MEMBERS.index(node)


def group_ranks(group: int) -> list[int]:
    return [rank_of(h.node_id) for h in TOPO.hosts if TOPO.group_of(h.switch) == group]


LEADER = min(group_ranks(1))  # a pack's leader is its group's first rank in topology order
MEMBER = max(group_ranks(1))  # hands its block to LEADER
RECEIVER = max(group_ranks(3))  # a rank outside LEADER's group


@dataclass
class Losses:
    """Frames to drop once each: ``(op, from node, to node)``; MCAST means the first copy of
    a multicast (not a repair) arriving at the receiver's host link."""

    pending: set[tuple[int, int, int]] = field(default_factory=set)

    def __call__(self, link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        if hdr.flags & wire.Flag.REPAIR:
            return False
        if hdr.op == wire.Op.MCAST:
            for node in MEMBERS:
                host = TOPO.host_by_node(node)
                want = (wire.Op.MCAST, hdr.root_node, node)
                if want in self.pending and link == (host.switch, host.port):
                    self.pending.discard(want)
                    return True
            return False
        want = (hdr.op, hdr.src_node, hdr.dst_node)
        if want in self.pending:
            self.pending.discard(want)
            return True
        return False


async def timed_allgather(comms: list[Comm], instance: int) -> list[float]:
    """Every rank's packed allgather: seconds to each rank's return; the bytes are checked."""
    started = asyncio.get_running_loop().time()
    done, _ = await allgather_timing.timed_allgather(
        comms, instance, started, BLOCK, "innet_packed"
    )
    return done


def run(
    losses: Losses,
    ack_merge: str = "coroots",
    config: EngineConfig = CONFIG,
    drop_if: Callable[[tuple[int, int], bytes], bool] | None = None,
) -> tuple[list[float], dict[str, Any]]:
    """One lossless warm-up allgather, then one with ``losses``: the second one's times, and
    the engines' stats summed. ``drop_if`` (default: ``losses``) decides each frame's fate
    and may watch frames too; it consults ``losses`` itself."""

    async def main() -> tuple[list[float], dict[str, Any]]:
        cluster = Cluster(
            TOPO,
            MEMBERS,
            loop=asyncio.get_running_loop(),
            config=config,
            options=CommOptions(
                progress_timeout=OPTIONS.progress_timeout,
                first_data_timeout=OPTIONS.first_data_timeout,
                op_timeout=OPTIONS.op_timeout,
                ack_merge=ack_merge,
            ),
            faults=Faults(drop_if=drop_if or losses),
        )
        chosen = set(losses.pending)
        losses.pending.clear()
        await timed_allgather(cluster.comms, 0)
        losses.pending |= chosen
        done = await timed_allgather(cluster.comms, 1)
        assert not losses.pending, f"frames never sent, so never lost: {losses.pending}"
        return done, cluster.stats()

    return asyncio.run(asyncio.wait_for(main(), 60))


def test_each_group_is_one_pack_led_by_its_first_rank() -> None:
    assert BLOCK * 4 <= PACK_BYTES  # a group's four blocks fit one pack
    assert LEADER != MEMBER and LEADER not in group_ranks(3)


def test_a_block_lost_on_its_way_to_the_leader_is_asked_for_before_its_timeout() -> None:
    """The leader holds the other blocks of its pack, so the missing one is overdue: it asks
    the member to resend at once (an ACK with Flag.RESEND) instead of leaving it to the
    member's retransmission timeout, held here at RTO_FLOOR."""
    losses = Losses({(wire.Op.UNICAST, MEMBERS[MEMBER], MEMBERS[LEADER])})
    done, stats = run(losses, config=dataclasses.replace(CONFIG, rto_min=RTO_FLOOR))
    assert max(done) < BOUND < RTO_FLOOR, f"slowest rank {max(done):.2f} s"
    assert stats["resend_requests"] >= 1


@pytest.mark.parametrize("ack_merge", ["coroots", "switch"])
def test_a_pack_lost_on_its_way_to_one_rank_is_repaired_in_round_trips(ack_merge: str) -> None:
    done, _ = run(Losses({(wire.Op.MCAST, MEMBERS[LEADER], MEMBERS[RECEIVER])}), ack_merge)
    assert max(done) < BOUND, f"slowest rank {max(done):.2f} s"


def test_a_pack_lost_inside_its_own_group_and_outside_it_costs_round_trips_too() -> None:
    losses = Losses(
        {
            (wire.Op.MCAST, MEMBERS[LEADER], MEMBERS[RECEIVER]),
            (wire.Op.MCAST, MEMBERS[LEADER], MEMBERS[MEMBER]),
        }
    )
    done, _ = run(losses)
    assert max(done) < BOUND, f"slowest rank {max(done):.2f} s"


def test_blocks_too_long_to_share_a_pack_are_published_without_acks() -> None:
    """Every rank rooting an acknowledged broadcast at once is a NACK storm (docs/protocol.md,
    Packed allgather): such blocks go out as ``innet`` publishes them."""
    block = PACK_BYTES // 2 + 1
    flags: list[int] = []

    def observe(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        if hdr.op == wire.Op.MCAST:
            flags.append(hdr.flags)
        return False

    async def main() -> None:
        loop = asyncio.get_running_loop()
        cluster = Cluster(
            TOPO, MEMBERS, loop=loop, config=CONFIG, options=OPTIONS, faults=Faults(drop_if=observe)
        )
        data = [bytes([r]) * block for r in range(len(MEMBERS))]
        results = await asyncio.gather(
            *(c.allgather(data[c.rank], algorithm="innet_packed") for c in cluster.comms)
        )
        assert all(bytes(r) == b"".join(data) for r in results)

    asyncio.run(asyncio.wait_for(main(), 60))
    assert flags and all(f & wire.Flag.NO_ACK for f in flags)


def test_a_member_that_enters_late_is_waited_for_like_any_first_receive() -> None:
    """A leader holding none of its members' blocks waits as long as a receive may wait for
    its first segment, not just progress_timeout: a member entering late is no error."""
    options = CommOptions(progress_timeout=0.2, first_data_timeout=20.0, op_timeout=30.0)
    late_by = 0.5
    others = [r for r in group_ranks(1) if r != LEADER]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        cluster = Cluster(TOPO, MEMBERS, loop=loop, config=CONFIG, options=options)
        data = allgather_timing.blocks(0, BLOCK, len(MEMBERS))

        async def one(comm: Comm) -> bytes:
            if comm.rank in others:
                await asyncio.sleep(late_by)
            return bytes(await comm.allgather(data[comm.rank], algorithm="innet_packed"))

        results = await asyncio.gather(*(one(c) for c in cluster.comms))
        assert all(r == b"".join(data) for r in results)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_pack_lost_above_a_coroot_is_asked_for_by_the_coroot_and_relayed_at_once() -> None:
    """Every rank of a group loses every segment of one pack's first transmission (a loss
    above its co-root, the group's lowest node): nobody there can NACK a message it never
    saw. The co-root, holding the other packs, asks the root once arrivals pause
    (allgather.PACK_ASK_PAUSE), and relays the root's repair to its members as it comes.
    Without either, the group waited for the root's timeout and then the co-root's probe,
    both held at RTO_FLOOR here; its members ask nothing (their co-root repairs them)."""
    group = {MEMBERS[r] for r in group_ranks(3)}
    coroot = min(group)
    links = {(TOPO.host_by_node(n).switch, TOPO.host_by_node(n).port) for n in group}
    epochs: list[int] = []  # of the leader's multicasts: the warm-up's, then the measured one's
    nacks_from: set[int] = set()

    def lose_above_the_coroot(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        if hdr.root_node != MEMBERS[LEADER]:
            return False
        if hdr.op == wire.Op.NACK and hdr.src_node in group:
            nacks_from.add(hdr.src_node)
        if hdr.op != wire.Op.MCAST or hdr.flags & (wire.Flag.REPAIR | wire.Flag.RETRANSMIT):
            return False
        if hdr.epoch not in epochs:
            epochs.append(hdr.epoch)
        return epochs.index(hdr.epoch) == 1 and link in links

    # one segment per pack, as on jumbo links (BMv2's)
    slow = dataclasses.replace(
        CONFIG,
        segment_size=wire.JUMBO_MTU - wire.HEADER_LEN,
        rto_min=RTO_FLOOR,
        rto_max=3 * RTO_FLOOR,
        coroot_probe_delay=RTO_FLOOR,
    )
    done, stats = run(Losses(), config=slow, drop_if=lose_above_the_coroot)
    assert len(epochs) == 2
    assert max(done) < BOUND < RTO_FLOOR, f"slowest rank {max(done):.2f} s"
    assert stats["due_asks"] >= 1
    assert nacks_from == {coroot}, f"NACKs for the lost pack from {nacks_from}"
