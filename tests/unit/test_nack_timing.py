"""A receiver's NACK waits learn from the arrival order of what its NACKs asked for
(host_agents/transport/nack_timing.py)."""

from __future__ import annotations

import pytest

from controller import wire
from host_agents.transport.config import EngineConfig, EngineStats
from host_agents.transport.keys import McastKey
from host_agents.transport.nack_timing import GAP_WAIT_LIMIT, NackTiming

pytestmark = pytest.mark.unit

CFG = EngineConfig(tail_delay=0.01, nack_delay=0.005)
KEY = McastKey(comm=1, root=2, epoch=3, tree=wire.Tree.INNET)


def test_a_repair_that_beat_the_queued_original_makes_the_tail_wait_longer() -> None:
    """The repair of a NACKed tail arrives first, then the original, queued all along, as a
    duplicate: the NACK was premature. Before, the repair's arrival shortened the wait and the
    duplicate taught nothing: a host whose ACK target answered at once kept asking early."""
    timing = NackTiming(CFG, stats := EngineStats())
    for _ in range(3):
        timing.asked(KEY, [(8, 4)], highest=7)
        for seg in range(8, 12):
            timing.arrived(KEY, seg, wire.Flag.REPAIR, new=True)
        for seg in range(8, 12):
            timing.arrived(KEY, seg, wire.Flag.NONE, new=False)
    assert timing.tail_quiet > 4 * CFG.tail_delay
    assert stats.premature_nacks == 12
    assert timing.gap_wait == CFG.nack_delay  # the gap's wait is another


def test_real_losses_keep_the_waits_short_and_reordering_lengthens_the_gap_wait() -> None:
    timing = NackTiming(CFG, EngineStats())
    timing.asked(KEY, [(3, 1)], highest=9)  # a gap: 3 missing, 9 seen
    timing.arrived(KEY, 3, wire.Flag.NONE, new=True)  # held back, not lost
    assert timing.gap_wait == 2 * CFG.nack_delay
    for _ in range(20):
        timing.asked(KEY, [(3, 1)], highest=9)
        timing.arrived(KEY, 3, wire.Flag.NONE, new=True)
    assert timing.gap_wait == GAP_WAIT_LIMIT * CFG.nack_delay
    for _ in range(20):  # repairs with no original after them: real losses
        timing.asked(KEY, [(4, 1)], highest=9)
        timing.arrived(KEY, 4, wire.Flag.REPAIR, new=True)
    assert timing.gap_wait == CFG.nack_delay
    assert timing.tail_quiet == CFG.tail_delay
    # a segment nobody asked for teaches nothing
    timing.arrived(KEY, 5, wire.Flag.NONE, new=True)
    assert timing.gap_wait == CFG.nack_delay


def test_a_nack_is_asked_again_after_twice_the_answers_it_learnt_timed_from_the_first_ask() -> None:
    """The repair of a segment its ACK target lacked too comes from the root, further away:
    the retry waits for twice the mean answer, timed from the first ask (an answer to the
    second ask, timed from it, would look shorter than the path is)."""
    now = [0.0]
    timing = NackTiming(CFG, EngineStats(), clock=lambda: now[0])
    assert timing.retry_after() == 4 * CFG.nack_delay  # nothing learnt: the floor
    for start in range(10):
        now[0] = float(start)
        timing.asked(KEY, [(3, 1)], highest=9)
        now[0] += 0.03
        timing.asked(KEY, [(3, 1)], highest=9)  # asked again before the answer came
        now[0] += 0.02
        timing.arrived(KEY, 3, wire.Flag.REPAIR, new=True)
        timing.arrived(KEY, 3, wire.Flag.NONE, new=False)  # the original, later
    assert timing.answer_time == pytest.approx(0.05)
    assert timing.retry_after() == pytest.approx(0.1)
    # a repair nobody asked for, or a duplicate, teaches nothing
    timing.arrived(KEY, 7, wire.Flag.REPAIR, new=True)
    timing.arrived(KEY, 3, wire.Flag.REPAIR, new=False)
    assert timing.answer_time == pytest.approx(0.05)
