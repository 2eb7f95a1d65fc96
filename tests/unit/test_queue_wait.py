"""Silences that queues explain (host_agents.transport.queue_wait).

Every rank of Df(2,4,2) rooting a 16 KiB broadcast at once under switch-merged ACKs failed on
BMv2: the roots' timeouts and the receivers' stalled-tail NACKs fired while the frames they
were waiting for sat in the switches' queues, and their repairs joined the same queues until
no merged ACK got through. A switch-merged root now waits while its own host still hears
frames, then probes with its newest segment alone; its receivers NACK gaps, never a tail.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from controller import wire
from controller.topology import Topology
from controller.topology_build import dragonfly
from host_agents.comm import CommOptions
from host_agents.directory import Directory
from host_agents.engine import EngineConfig
from host_agents.plans import McastPlan
from host_agents.transport.config import EngineStats
from host_agents.transport.keys import McastKey
from host_agents.transport.messages import Source
from host_agents.transport.multicast_root import MulticastRoots
from host_agents.transport.queue_wait import link_busy, silence_is_loss
from tests.fabric import Cluster, Faults

pytestmark = pytest.mark.unit

TOPO: Topology = dragonfly(2, 2, 2)
HOSTS = tuple(h.node_id for h in TOPO.hosts)
SWITCH_NODE = 1 << 14  # the merging switch's node id: the root's only ACK source
RTO = 0.02
SEGMENTS = 6


class RootHost:
    """What a multicast root needs of its engine, with a link whose last arrival the test
    sets; it records the frames the root sends."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.node = HOSTS[0]
        self.cfg = EngineConfig(rto_initial=RTO, rto_min=RTO, peer_timeout=30.0)
        self.loop = loop
        self.stats = EngineStats()
        self.directory = Directory.from_topology(TOPO)
        self.plan = None
        self.rng = random.Random(1)
        self.last_heard = loop.time() - 1e3  # a quiet link
        self.sent: list[wire.Header] = []

    def send_frame(self, dst_mac: bytes, hdr: wire.Header, payload: bytes = b"") -> None:
        self.sent.append(hdr)

    def drop(self, reason: str, hdr: wire.Header | None) -> None:
        raise AssertionError(f"dropped: {reason}")

    def resent(self) -> list[int]:
        return [h.seg_idx for h in self.sent if h.flags & wire.Flag.RETRANSMIT]


def merged_multicast(host: RootHost) -> None:
    plan = McastPlan(HOSTS[1:], dict.fromkeys(HOSTS[1:], HOSTS[0]), {}, (), merged_by=SWITCH_NODE)
    key = McastKey(HOSTS[0], 1, 3, wire.Tree.INNET)
    data = bytes(SEGMENTS * host.cfg.segment_size)
    MulticastRoots(host).send(key, Source(data), plan)  # type: ignore[arg-type]


def test_a_merged_root_waits_while_its_link_delivers_then_probes_with_its_newest_segment() -> None:
    async def body() -> None:
        host = RootHost(asyncio.get_running_loop())
        merged_multicast(host)
        assert [h.seg_idx for h in host.sent] == list(range(SEGMENTS))
        # frames keep arriving (the others' broadcasts): several RTOs pass without a resend
        for _ in range(12):
            host.last_heard = host.loop.time()
            await asyncio.sleep(RTO / 2)
        assert host.resent() == [], "the root resent while its own link was still delivering"
        # the link goes quiet: one probe, the newest segment only, not the oldest four
        await asyncio.sleep(16 * RTO)
        assert host.resent()[:1] == [SEGMENTS - 1]
        assert set(host.resent()) == {SEGMENTS - 1}

    asyncio.run(asyncio.wait_for(body(), 10))


def test_silence_is_a_loss_only_once_the_link_is_quiet_or_the_limit_passed() -> None:
    class Heard:
        last_heard = 10.0

    heard = Heard()
    assert link_busy(heard, 10.5, 1.0) and not link_busy(heard, 11.5, 1.0)  # type: ignore[arg-type]
    # silent 0.3 s, the link heard 0.05 s ago: queued
    assert not silence_is_loss(heard, 10.05, 0.3, quiet=0.1, limit=2.0)  # type: ignore[arg-type]
    # the link quiet too: lost
    assert silence_is_loss(heard, 10.2, 0.3, quiet=0.1, limit=2.0)  # type: ignore[arg-type]
    # not silent long enough, whatever the link
    assert not silence_is_loss(heard, 12.0, 0.05, quiet=0.1, limit=2.0)  # type: ignore[arg-type]
    # past the limit: lost even amid traffic
    assert silence_is_loss(heard, 10.0, 2.5, quiet=0.1, limit=2.0)  # type: ignore[arg-type]


def lose_first_copy(seg: int, member: int, lost: list[int]) -> Faults:
    member_link = (TOPO.host_by_node(member).switch, TOPO.host_by_node(member).port)

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame, check_crc=False).hdr
        first = hdr.op == wire.Op.MCAST and not hdr.flags & wire.Flag.RETRANSMIT
        if link == member_link and first and hdr.seg_idx == seg and not lost:
            lost.append(seg)
            return True
        return False

    return Faults(drop_if=drop_if)


@pytest.mark.parametrize(("seg", "nacks"), [(SEGMENTS - 1, 0), (0, 1)], ids=["tail", "gap"])
def test_merged_receivers_leave_a_lost_tail_to_the_roots_probe_and_nack_a_gap(
    seg: int, nacks: int
) -> None:
    """The first copy of one segment is lost on the way to one member: the last one (a tail,
    which only the root's probe repairs) or the first (a gap, which the member NACKs)."""
    member = HOSTS[-1]
    lost: list[int] = []
    config = EngineConfig(rto_initial=0.05, rto_min=0.05, nack_delay=0.002, tail_delay=0.005)
    options = CommOptions(ack_merge="switch", progress_timeout=20.0, first_data_timeout=20.0)
    data = random.Random(seg).randbytes(SEGMENTS * wire.MAX_PAYLOAD - 3)

    async def body() -> None:
        loop = asyncio.get_running_loop()
        cluster = Cluster(
            TOPO,
            HOSTS,
            loop=loop,
            config=config,
            options=options,
            faults=lose_first_copy(seg, member, lost),
        )
        got = await asyncio.gather(
            *(
                c.bcast(data if c.rank == 0 else None, 0, size=len(data), algorithm="innet")
                for c in cluster.comms
            )
        )
        await asyncio.gather(*(c.settle() for c in cluster.comms))
        assert lost == [seg] and all(g == data for g in got)
        receiver = cluster.comms[HOSTS.index(member)].engine.stats
        assert receiver.nacks_sent == nacks, f"{receiver.nacks_sent} NACKs for a lost {seg}"

    asyncio.run(asyncio.wait_for(body(), 30))
