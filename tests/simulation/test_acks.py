"""Sends complete as the agents' engine completes them: a unicast when the receiver's ACK of
its last segment is back (ACK frames cross the simulated links), a multicast when its root's
last segment went out, the root running at most its window ahead of the slowest ACK. Its own
module: ns-3 has one simulator per process, so each test builds and closes its own network."""

from __future__ import annotations

import pytest

from controller.topology_build import parse_spec
from mininet_topos.ns3sim.network import LinkParams
from mininet_topos.ns3sim.simulation import Simulation

SLOW = {"rate": "1Gbps", "global_rate": "1Gbps", "delay": "10ms", "global_delay": "10ms"}


def unicast(sim: Simulation, size: int) -> tuple[float, float]:
    """Node 1 sends ``size`` bytes to node 2 (hosts of one router: two 10 ms links apart);
    when node 2 had them and when node 1's send completed, in seconds from the start."""
    sender, receiver = sim.transport.endpoint(1), sim.transport.endpoint(2)
    key = ("test", 1, 2)
    times: dict[str, float] = {}

    async def go() -> None:
        start = sim.loop.time()
        sent = sender.send(2, key, bytes(size))
        incoming = receiver.expect(key, size, 1)
        await incoming.done
        times["arrived"] = sim.loop.time() - start
        await sent
        times["sent"] = sim.loop.time() - start

    sim.loop.run_until_complete(go())
    return times["arrived"], times["sent"]


def test_a_unicast_send_completes_when_the_receivers_ack_is_back() -> None:
    """One frame two 10 ms links away arrives after about 20 ms; the send completes when its
    ACK has come back the same way, about 20 ms later (it completed on arrival before)."""
    sim = Simulation(parse_spec("df:2,2,1"), LinkParams(**SLOW), progress_every=0)
    try:
        arrived, sent = unicast(sim, 100)
        assert arrived == pytest.approx(0.020, abs=1e-4)
        assert sent - arrived == pytest.approx(0.020, abs=1e-4)
        # one ACK frame on each link back: the receiver's host link and its switch's port
        assert sim.net.ack_counters()[(-1, 2)] == 1
        assert sum(sim.net.ack_counters().values()) == 2
    finally:
        sim.close()


def test_receivers_ack_every_n_segments_and_the_last_at_once() -> None:
    """10 segments, ACK every 4: ACKs after the 4th, the 8th and the last, 3 frames on each of
    the two links back; the data's frames are counted apart from them."""
    params = LinkParams(**SLOW, ack_every=4, ack_delay=1.0)
    sim = Simulation(parse_spec("df:2,2,1"), params, progress_every=0)
    try:
        arrived, sent = unicast(sim, 10 * params.segment)
        assert sent - arrived == pytest.approx(0.020, abs=1e-4)  # not the 1 s timer
        assert sum(sim.net.ack_counters().values()) == 3 * 2
        data = sim.net.link_counters()
        assert data[(-1, 1)][0] == 10
        assert data[(-1, 2)][0] == 0
    finally:
        sim.close()


def test_the_delayed_ack_paces_a_window_below_ack_every() -> None:
    """A window of 2 segments and ACKs every 4: each pair of segments waits out the receiver's
    50 ms delayed ACK before the next pair may go (the engine's receiver does the same)."""
    params = LinkParams(**SLOW, window=2, ack_every=4, ack_delay=0.05)
    sim = Simulation(parse_spec("df:2,2,1"), params, progress_every=0)
    try:
        _, sent = unicast(sim, 6 * params.segment)
        # three rounds of: 20 ms out, 50 ms delay, 20 ms back (the last pair's ACK is at once)
        assert sent == pytest.approx(2 * 0.090 + 0.040, abs=1e-3)
    finally:
        sim.close()


def test_a_multicast_root_returns_when_its_last_segment_went_out() -> None:
    """The engine's root returns once every segment went out; its receivers, 20 ms and more
    away, finish later (the root finished with the slowest receiver before)."""
    sim = Simulation(parse_spec("df:2,2,1"), LinkParams(**SLOW), progress_every=0)
    try:
        outcome = sim.run("bcast", "innet", 3 * LinkParams().segment, root=0)
        assert outcome.wrong == 0
        assert outcome.times_us[0] < 1000  # three 1500-byte frames at 1 Gb/s
        assert min(outcome.times_us[1:]) > 20000
        assert outcome.ack_packets > 0
    finally:
        sim.close()


@pytest.mark.parametrize("window", [2, 32])
def test_a_multicast_root_runs_at_most_its_window_ahead(window: int) -> None:
    """20 segments with a window of 2: every other segment waits for the slowest co-root's
    ACK, a round trip of tens of ms; with 32 they all go at once."""
    params = LinkParams(**SLOW, mcast_window=window, ack_every=1)
    sim = Simulation(parse_spec("df:2,2,1"), params, progress_every=0)
    try:
        outcome = sim.run("bcast", "innet", 20 * params.segment, root=0)
        assert outcome.wrong == 0
        if window == 32:
            assert outcome.times_us[0] < 1000
            assert outcome.max_us < 60000  # about 5 hops of 10 ms
        else:
            # 9 window openings, each an ACK's way back from the farthest group's co-root
            assert outcome.times_us[0] > 9 * 40000
    finally:
        sim.close()
