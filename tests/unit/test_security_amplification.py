"""NACK amplification by members (issue 32, Medium 5), on the in-process fabric.

A member asks its root for more than it lacks, or a co-root names its group's members to pass
for several askers. What the asker gets must stay within 2x the bytes it lacks by its own
ACKs (host_agents/transport/nack_bounds.py), and no single host may cause a repair down the
whole tree.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from controller import wire
from controller.topology import Topology
from controller.topology_build import dragonfly
from controller.wire import Flag, Op
from host_agents.comm import CommOptions
from host_agents.directory import Directory
from host_agents.engine import EngineConfig
from host_agents.plans import PlanBook
from host_agents.transport.feedback import NO_SACK, pack_ranges
from host_agents.transport.keys import McastKey
from tests.fabric import Cluster, Faults

pytestmark = [pytest.mark.unit, pytest.mark.security]

TOPO: Topology = dragonfly(2, 2, 1)  # 3 groups of 4 hosts
HOSTS = tuple(h.node_id for h in TOPO.hosts)
ROOT = 0
SEGMENTS = 20  # within the root's window: the blocked receiver holds it back
# no timer fires within the test: every repair counted answers the attacker's NACKs
CONFIG = EngineConfig(
    rto_initial=5.0, rto_min=5.0, tail_delay=0.02, coroot_probe_delay=5.0, peer_timeout=30.0
)
OPTIONS = CommOptions(progress_timeout=30.0, first_data_timeout=30.0, op_timeout=60.0)


def run(body: Callable[[asyncio.AbstractEventLoop], Awaitable[None]], timeout: float = 60) -> None:
    async def main() -> None:
        await asyncio.wait_for(body(asyncio.get_running_loop()), timeout)

    asyncio.run(main())


def plan_of_root() -> tuple[dict[int, tuple[int, ...]], int]:
    directory = Directory.from_topology(TOPO)
    directory.comms[1] = HOSTS
    plan = PlanBook(directory)(1, HOSTS[ROOT], wire.Tree.INNET)
    return plan.aggregates, HOSTS[ROOT]


class Watch:
    """Counts, per link into a host, the data frames sent after ``armed``."""

    def __init__(self) -> None:
        self.armed = False
        self.repairs_to: dict[int, int] = {}
        self.tree_resends = 0

    def __call__(self, link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame, check_crc=False).hdr
        if not self.armed or hdr.op not in (Op.MCAST, Op.UNICAST):
            return False
        if hdr.flags & Flag.REPAIR:
            self.repairs_to[hdr.dst_node] = self.repairs_to.get(hdr.dst_node, 0) + 1
        elif hdr.flags & Flag.RETRANSMIT and link[0] < 0:  # the root's copy, once per resend
            self.tree_resends += 1
        return False


async def attack(
    loop: asyncio.AbstractEventLoop,
    attacker: int,
    blocked: int,
    send: Callable[[Cluster, McastKey, int], None],
) -> Watch:
    """Root 0 broadcasts to every host; ``blocked`` gets no data (the root keeps rooting);
    ``attacker``'s port is the test's, and ``send`` speaks for it once it has every segment."""
    watch = Watch()
    blocked_link = (TOPO.host_by_node(blocked).switch, TOPO.host_by_node(blocked).port)

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        watch(link, frame)
        return link == blocked_link and wire.parse_frame(frame, check_crc=False).hdr.op in (
            Op.MCAST,
            Op.UNICAST,
        )

    cluster = Cluster(
        TOPO, HOSTS, loop=loop, config=CONFIG, options=OPTIONS, faults=Faults(drop_if=drop_if)
    )
    engine = cluster.comms[HOSTS.index(attacker)].engine
    got: set[int] = set()
    done = asyncio.Event()
    heard: list[wire.Header] = []

    def on_frame(frame: bytes) -> None:
        hdr = wire.parse_frame(frame, check_crc=False).hdr
        if hdr.op == Op.MCAST and hdr.root_node == HOSTS[ROOT]:
            got.add(hdr.seg_idx)
            heard.append(hdr)
            if len(got) == hdr.seg_count:
                done.set()

    engine.port.on_frame = on_frame  # type: ignore[attr-defined]
    data = random.Random(5).randbytes(SEGMENTS * CONFIG.segment_size)
    tasks = [
        asyncio.ensure_future(
            c.bcast(data if c.rank == ROOT else None, ROOT, size=len(data), algorithm="innet")
        )
        for c in cluster.comms
        if c.engine.node not in (attacker, blocked)
    ]
    try:
        await asyncio.wait_for(done.wait(), 20)
        await asyncio.sleep(0.1)  # past the moment a segment counts as in flight
        key, seg_count = McastKey.of(heard[-1]), heard[-1].seg_count
        watch.armed = True
        for _ in range(4):  # and repeated, as a root must tolerate every half RTO
            send(cluster, key, seg_count)
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return watch


def frame_from(cluster: Cluster, node: int, hdr: wire.Header, payload: bytes) -> None:
    cluster.fabric.host_transmit(node, wire.build_frame(hdr, payload, dst_mac=b"\xff" * 6))


def test_a_member_that_acknowledged_everything_gets_nothing_for_a_nack_of_everything() -> None:
    """Before: the root resent every segment from the first named to the newest sent."""
    aggregates, root = plan_of_root()
    attacker = next(m for m in aggregates[root] if m != root)  # reports to the root itself
    blocked = HOSTS[-1]

    def send(cluster: Cluster, key: McastKey, seg_count: int) -> None:
        ack = key.feedback(Op.ACK, attacker, root, seq=seg_count)
        frame_from(cluster, attacker, ack, NO_SACK)
        ranges = pack_ranges([(0, 1 << 20)])
        nack = key.feedback(Op.NACK, attacker, root, payload_len=len(ranges))
        frame_from(cluster, attacker, nack, ranges)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        watch = await attack(loop, attacker, blocked, send)
        repaired = watch.repairs_to.get(attacker, 0)
        assert repaired <= 2 * 0, f"{repaired} segments repaired to an asker that lacks none"
        assert watch.tree_resends == 0

    run(body)


def test_a_coroot_naming_its_members_is_one_asker_and_gets_no_whole_tree_repair() -> None:
    """Before: three NACKs of one co-root, naming three of its members, made the root resend
    the named segments down the whole tree."""
    aggregates, root = plan_of_root()
    coroot, members = next((c, ms) for c, ms in aggregates.items() if c != root and len(ms) >= 4)
    named = [m for m in members if m != coroot][:3]
    blocked = next(h for h in HOSTS if h not in members and h != root)

    def send(cluster: Cluster, key: McastKey, seg_count: int) -> None:
        ranges = pack_ranges([(0, seg_count)])
        for member in named:
            nack = key.feedback(Op.NACK, coroot, root, tag=member, payload_len=len(ranges))
            frame_from(cluster, coroot, nack, ranges)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        watch = await attack(loop, coroot, blocked, send)
        assert watch.tree_resends == 0, (
            f"one co-root made the root resend {watch.tree_resends} segments down the tree"
        )

    run(body)


def test_a_member_gets_nothing_from_its_coroot_for_a_nack_of_what_it_acknowledged() -> None:
    """Before: a co-root resent every segment it held that a member's NACK named, whatever the
    member had acknowledged (the same shape as the root's)."""
    aggregates, root = plan_of_root()
    coroot, members = next((c, ms) for c, ms in aggregates.items() if c != root and len(ms) >= 3)
    attacker = next(m for m in members if m != coroot)
    blocked = next(m for m in members if m not in (coroot, attacker))

    def send(cluster: Cluster, key: McastKey, seg_count: int) -> None:
        ack = key.feedback(Op.ACK, attacker, coroot, seq=seg_count)
        frame_from(cluster, attacker, ack, NO_SACK)
        ranges = pack_ranges([(0, 1 << 20)])
        nack = key.feedback(Op.NACK, attacker, coroot, payload_len=len(ranges))
        frame_from(cluster, attacker, nack, ranges)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        watch = await attack(loop, attacker, blocked, send)
        repaired = watch.repairs_to.get(attacker, 0)
        assert repaired == 0, f"{repaired} repairs to a member that lacks nothing"
        assert watch.tree_resends == 0

    run(body)
