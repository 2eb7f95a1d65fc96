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
from host_agents.transport.queue_delay import QueueDelay
from host_agents.transport.queue_wait import link_busy, silence_is_loss
from host_agents.transport.stamps import send_stamp
from tests.fabric import Cluster, Faults
from tests.unit.test_transport import COMM, ME, ROOTS, recording_engine

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
        self.queue_delay = QueueDelay(self.cfg.stamp_unit, 1.0)  # and no queue seen
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


def test_a_root_resends_once_data_paused_for_one_rto_however_long_it_backed_off() -> None:
    """Data arrives for a while (the root backs off, looking again later), then only now and
    then, every 3 RTOs: no queue draining, and the root resends well before its cap (100
    RTOs here). Counting any arrival within the backed-off RTO kept a root silent until its
    cap: on the dilated links, 356 s."""

    async def body() -> None:
        host = RootHost(asyncio.get_running_loop())
        merged_multicast(host)
        for _ in range(16):  # steady arrivals: backed off several times
            host.last_heard = host.loop.time()
            await asyncio.sleep(RTO / 2)
        assert host.resent() == []
        for _ in range(12):  # then a stray frame every 3 RTOs, for 36 RTOs
            await asyncio.sleep(3 * RTO)
            host.last_heard = host.loop.time()
        assert host.resent(), "the root stayed silent amid stray arrivals"

    asyncio.run(asyncio.wait_for(body(), 10))


def test_only_frames_that_cross_the_networks_queues_show_a_link_delivering() -> None:
    """A rank's own switch echoes its periodic ARRIVE resends: that is no queue draining
    elsewhere, and it must not hold a root's timeout back (engine.last_heard)."""

    async def body() -> None:
        engine, _port = recording_engine(EngineConfig())
        engine.register_comm(COMM, (ME, *ROOTS))
        before = engine.last_heard
        await asyncio.sleep(0.01)
        switch = wire.switch_node_id(0)
        echo = wire.Header(op=wire.Op.ARRIVE, comm_id=COMM, epoch=1, src_node=switch, dst_node=ME)
        engine._on_frame(wire.build_frame(echo, b"", dst_mac=bytes(6)))
        assert engine.last_heard == before
        ack = wire.Header(op=wire.Op.ACK, comm_id=COMM, epoch=1, src_node=ROOTS[0], dst_node=ME)
        engine._on_frame(wire.build_frame(ack, b"", dst_mac=bytes(6)))
        assert engine.last_heard > before

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


def stamped(root: int, sent: float, unit: float, *, src: int | None = None) -> wire.Header:
    return wire.Header(
        op=wire.Op.MCAST,
        comm_id=1,
        root_node=root,
        src_node=root if src is None else src,
        stamp=send_stamp(sent, unit),
    )


@pytest.mark.parametrize("clock_offset", [0.0, 3.2767, 6.5535], ids=["same", "half", "wrap"])
def test_queue_delay_is_the_one_way_delay_above_the_least_seen(clock_offset: float) -> None:
    """Clocks need not agree (the root's may be ahead by anything, the 16-bit stamps may wrap
    between send and arrival): only the delay above the least seen counts; it decays, and
    copies from anyone but the root (no root clock) and unstamped frames count for nothing."""
    unit = 1e-4
    delay = QueueDelay(unit, half_life=1.0)
    root, other = HOSTS[0], HOSTS[1]

    def arrive(sent: float, transit: float, **kw: int) -> None:
        delay.observe(stamped(root, sent + clock_offset, unit, **kw), sent + transit)

    arrive(100.0, 0.010)  # the least: 10 ms of propagation, no queue
    assert delay.current(100.01) == 0.0
    arrive(100.1, 0.310)  # 300 ms in queues
    assert delay.current(100.41) == pytest.approx(0.3, abs=2 * unit)
    assert delay.current(101.41) == pytest.approx(0.15, abs=2 * unit)  # one half-life later
    arrive(101.5, 0.910, src=other)  # a co-root's copy: not the root's clock
    assert delay.current(102.41) == pytest.approx(0.075, abs=2 * unit)
    unstamped = wire.Header(op=wire.Op.MCAST, comm_id=1, root_node=root, src_node=root)
    delay.observe(unstamped, 200.0)
    assert delay.current(102.41) == pytest.approx(0.075, abs=2 * unit)


def test_a_root_that_saw_queues_waits_them_out_before_resending() -> None:
    """The same quiet link, but the other roots' frames came 0.1 s late: the root's timeout
    grows by twice that, so it does not resend within its plain RTO."""

    async def body() -> None:
        host = RootHost(asyncio.get_running_loop())
        now = host.loop.time()
        unit = host.cfg.stamp_unit
        host.queue_delay = QueueDelay(unit, half_life=100.0)
        host.queue_delay.observe(stamped(HOSTS[5], now - 1.0, unit), now - 0.99)  # the least
        host.queue_delay.observe(stamped(HOSTS[5], now - 0.2, unit), now - 0.09)  # 0.1 s queued
        merged_multicast(host)
        await asyncio.sleep(8 * RTO)
        assert host.resent() == [], "the root resent within the queueing it had seen"
        await asyncio.sleep(0.3)
        assert host.resent(), "the root never resent"

    asyncio.run(asyncio.wait_for(body(), 10))
