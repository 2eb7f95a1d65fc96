"""A rank holds back an ARRIVE the switches would drop, more than their barrier window ahead of
the last release it heard, and hurries the release it waits on instead.

The allgather confirms in the background (two barrier epochs per operation), so under loss
fast ranks ran more than the window (4 epochs) ahead of the slowest: at 1% loss on 10 Mb/s
links (Df(2,4,2), BMv2) the switches dropped 2,720 ARRIVEs in 40 operations as OUT_OF_WINDOW,
which their ranks resent only when asked or on the 29 s patient timer, and every rank resent
about one ARRIVE per operation, more than the data's repairs.
"""

from __future__ import annotations

import asyncio

import pytest

from controller import wire
from host_agents.engine import Engine, EngineConfig
from host_agents.transport.config import PeerTimeout
from tests.unit.test_transport import COMM, ME, ROOTS, RecordingPort, recording_engine

pytestmark = pytest.mark.unit

WINDOW = 4


def release(epoch: int) -> bytes:
    hdr = wire.Header(
        op=wire.Op.RELEASE, comm_id=COMM, epoch=epoch, src_node=wire.switch_node_id(0)
    )
    return wire.build_frame(hdr, b"", dst_mac=bytes([2, 0, 0, 0, 0, ME]))


def arrived(port: RecordingPort) -> list[int]:
    """The epochs of the ARRIVEs sent, first sends and resends alike, in order."""
    return [h.epoch for h in port.sent if h.op == wire.Op.ARRIVE]


def patient_engine(**timers: float) -> tuple[Engine, RecordingPort]:
    config = EngineConfig(barrier_window=WINDOW, barrier_patient_rto=30.0, **timers)
    engine, port = recording_engine(config)
    engine.register_comm(COMM, (ME, *ROOTS))  # the first member: its turn is barrier_rto
    return engine, port


def test_an_arrive_past_the_window_goes_out_once_a_release_brings_it_in() -> None:
    async def main() -> None:
        engine, port = patient_engine()
        waiting = [engine.barriers.arrive(COMM, e, 10, patient=True) for e in range(1, 7)]
        assert arrived(port) == [1, 2, 3, 4]
        engine._on_frame(release(1))
        assert waiting[0].done() and arrived(port) == [1, 2, 3, 4, 5]
        engine._on_frame(release(3))  # releases 2 and 3: 6 is in the window too
        assert arrived(port) == [1, 2, 3, 4, 5, 6]
        engine._on_frame(release(6))
        await asyncio.gather(*waiting)
        assert engine.stats.arrive_retransmissions == 0

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_held_arrive_hurries_the_release_it_waits_on() -> None:
    """Epoch 1's RELEASE was lost on its way here: patient, its rank would resend after 30 s;
    with an ARRIVE held behind it, the rank resends epoch 1 on its turn (barrier_rto), and the
    switch answers with the RELEASE."""

    async def main() -> None:
        engine, port = patient_engine(barrier_rto=0.05)
        waiting = [engine.barriers.arrive(COMM, e, 10, patient=True) for e in range(1, 6)]
        await asyncio.sleep(0.1)
        assert arrived(port) == [1, 2, 3, 4, 1]  # epoch 1 resent on its turn, 5 still held
        engine._on_frame(release(1))  # the switch's answer
        assert arrived(port)[-1] == 5
        for w in waiting:
            w.cancel()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_held_arrive_still_fails_at_its_deadline() -> None:
    async def main() -> None:
        engine, port = patient_engine()
        for e in range(1, 5):
            engine.barriers.arrive(COMM, e, 10, patient=True)
        held = engine.barriers.arrive(COMM, 5, 0.2, patient=True)
        with pytest.raises(PeerTimeout):
            await held
        assert 5 not in arrived(port)

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_settling_communicator_does_not_send_held_arrives_early() -> None:
    """Comm.settle hurries every patient barrier: a held one still waits for the window."""

    async def main() -> None:
        engine, port = patient_engine(barrier_rto=0.02)
        waiting = [engine.barriers.arrive(COMM, e, 10, patient=True) for e in range(1, 7)]
        engine.barriers.hurry(COMM)
        await asyncio.sleep(0.1)
        assert set(arrived(port)) == {1, 2, 3, 4}
        for w in waiting:
            w.cancel()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_an_in_network_reduction_releases_its_epoch_for_the_window_too() -> None:
    """Reductions are numbered by barrier epochs and their last RESULT releases the epoch at
    the switches: ten of them in a row must not leave the next barrier held back."""

    async def main() -> None:
        engine, port = patient_engine()
        for epoch in range(1, 11):
            engine.barriers.released_by_reduction(COMM, epoch)
        waiting = engine.barriers.arrive(COMM, 11, 10)
        assert arrived(port) == [11]
        engine._on_frame(release(11))
        await waiting

    asyncio.run(asyncio.wait_for(main(), 10))
