"""On shaped links a sender's retransmission timeout follows its own frames' size.

The data timers stretch by a jumbo frame's hop at the slowest link (9014 bytes at 10 Mb/s:
7.2 ms, so 7.2-fold), which is right for full frames. A 1 KiB message's frame crosses in
0.9 ms: its RTO floor and first guess shrink back to the unshaped ones, while what the round
trip samples say (queueing included) stands. Stretched, a 1 KiB scatter at 1% loss on
Df(2,4,2) took 458 s for 200 operations against 51 s without loss.
"""

from __future__ import annotations

import asyncio

import pytest

from controller import wire
from host_agents.engine import EngineConfig
from host_agents.plans import McastPlan
from host_agents.transport.keys import McastKey
from host_agents.transport.messages import Source
from host_agents.transport.multicast_root import MulticastRoots
from host_agents.transport.rtt import RttEstimate
from mininet_topos.links.shaping import LinkModel
from mininet_topos.links.timing import control_time_scale, frame_scaling, time_scale
from mininet_topos.network.interfaces import timers_for
from tests.unit.test_queue_wait import HOSTS, RootHost
from tests.unit.test_transport import COMM, EPOCH, ME, ROOTS, recording_engine

pytestmark = pytest.mark.unit

MTU = 9000
SMALL = 1024


def shaped_config(rate: float = 10) -> EngineConfig:
    """The engine's configuration on links of ``rate`` Mb/s, as the network gives it."""
    links = LinkModel(rate=rate)
    timers = timers_for(time_scale(links, MTU), control_time_scale(links))[0]
    return EngineConfig(segment_size=wire.max_payload(MTU), **timers, **frame_scaling(links, MTU))


def test_small_frames_get_the_unshaped_floor_and_first_guess_full_ones_the_stretched() -> None:
    cfg, unshaped = shaped_config(), EngineConfig()
    fresh = RttEstimate(cfg.rto_initial)
    assert fresh.timeout_for(cfg, cfg.segment_size) == pytest.approx(cfg.rto_initial)
    assert fresh.timeout_for(cfg, SMALL) == pytest.approx(unshaped.rto_initial)
    quick = RttEstimate(cfg.rto_initial)
    quick.sample(0.004, cfg)  # a 4 ms round trip: the floor decides
    assert quick.timeout_for(cfg, cfg.segment_size) == pytest.approx(cfg.rto_min)
    assert quick.timeout_for(cfg, SMALL) == pytest.approx(unshaped.rto_min)
    queued = RttEstimate(cfg.rto_initial)
    queued.sample(0.3, cfg)  # queues the samples saw stand, whatever the frames
    assert queued.timeout_for(cfg, SMALL) == queued.rto == pytest.approx(0.9)
    slow = RttEstimate(cfg.rto_initial)
    for _ in range(4):
        slow.sample(cfg.rto_max, cfg)
    assert slow.timeout_for(cfg, SMALL) == slow.rto == cfg.rto_max  # the cap stands too


def test_unshaped_links_time_every_size_alike() -> None:
    cfg = EngineConfig()
    estimate = RttEstimate(cfg.rto_initial)
    assert estimate.timeout_for(cfg, 1) == estimate.timeout_for(cfg, cfg.segment_size)
    estimate.sample(0.001, cfg)
    assert estimate.timeout_for(cfg, 1) == estimate.rto == cfg.rto_min


def test_a_small_unicast_message_is_resent_after_its_own_frames_timeout() -> None:
    """Nobody answers: the 1 KiB message is resent after the unshaped first guess (0.2 s),
    the full one not before the stretched guess (1.44 s)."""

    async def main() -> None:
        cfg = shaped_config()
        engine, port = recording_engine(cfg)
        engine.register_comm(COMM, (ME, *ROOTS))
        engine.send_message(ROOTS[0], COMM, EPOCH, 1, bytes(SMALL))
        engine.send_message(ROOTS[1], COMM, EPOCH, 2, bytes(cfg.segment_size))
        await asyncio.sleep(0.5)
        resent = {h.dst_node for h in port.sent if h.flags & wire.Flag.RETRANSMIT}
        assert resent == {ROOTS[0]}

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_small_multicast_is_resent_after_its_own_frames_timeout() -> None:
    async def main() -> None:
        host = RootHost(asyncio.get_running_loop())
        host.cfg = shaped_config()
        plan = McastPlan(HOSTS[1:], dict.fromkeys(HOSTS[1:], HOSTS[0]), {}, HOSTS[1:])
        roots = MulticastRoots(host)  # type: ignore[arg-type]
        small = roots.send(McastKey(HOSTS[0], 1, 3, wire.Tree.INNET), Source(bytes(SMALL)), plan)
        full = roots.send(
            McastKey(HOSTS[0], 1, 4, wire.Tree.INNET), Source(bytes(host.cfg.segment_size)), plan
        )
        assert small.base_rto == pytest.approx(EngineConfig().rto_initial)
        assert full.base_rto == pytest.approx(host.cfg.rto_initial)
        await asyncio.sleep(0.5)
        resent = {h.epoch for h in host.sent if h.flags & wire.Flag.RETRANSMIT}
        assert resent == {3}

    asyncio.run(asyncio.wait_for(main(), 10))
