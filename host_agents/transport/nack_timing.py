"""How long a multicast receiver waits before it NACKs, learnt from how its NACKs turned out.

A receiver NACKs a gap after a random wait and a stalled tail after a silence. Either is
premature when the segment was only held back (reordered on a link, or queued behind a burst)
and arrives as first sent after the NACK: the NACK cost a repair and the repair a duplicate.
Which it was shows in the arrival order of the segments the NACK asked for: the original (no
REPAIR or RETRANSMIT flag) arriving first, or after the repair as a duplicate, says the wait
was too short, and that kind of wait doubles; the repair arriving first shortens it a little.
Before, a tail silence shortened whenever the repair won the race against a queued original,
so a host that asked early kept asking early: in the root's own group, where the root answers
at once, every member NACKed the tail of every other 16 KiB broadcast at 1% loss (2,759 of
5,236 NACKs, and 3,633 unicast repairs) though the originals were on their way.

How long the answer to a NACK takes is learnt too, timed from the first ask for a segment
(whichever ask the repair answered), and a NACK is asked again only after twice that: the
repair of a segment the co-root lacked as well comes from the root, two hops further.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from controller.wire import Flag
from host_agents.transport.config import EngineConfig, EngineStats
from host_agents.transport.keys import McastKey
from host_agents.transport.rtt import RttEstimate

# segments asked for and not yet settled (their original has not arrived) that are remembered
ASKED_MEMORY = 4096
# a gap's wait grows to at most this many times nack_delay (a reordered segment is held back
# for milliseconds; a real gap must not wait much longer than a round trip)
GAP_WAIT_LIMIT = 8
TAIL, GAP = "tail", "gap"


class NackTiming:
    def __init__(
        self, cfg: EngineConfig, stats: EngineStats, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cfg = cfg
        self.stats = stats
        self.clock = clock
        # the time from a first ask to its repair, smoothed as a round trip (its srtt)
        self._answers = RttEstimate(rto=cfg.rto_initial)
        self.tail_quiet = cfg.tail_delay  # the silence after which a stalled tail is asked for
        self.gap_wait = cfg.nack_delay  # the longest random wait before a gap is asked for
        # (message, segment) -> (kind of NACK that asked for it, whether a repair came first,
        # when it was first asked for)
        self._asked: collections.OrderedDict[tuple[McastKey, int], tuple[str, bool, float]] = (
            collections.OrderedDict()
        )

    def asked(self, key: McastKey, ranges: list[tuple[int, int]], highest: int) -> None:
        """A NACK for ``ranges`` went out; segments past ``highest`` were a tail's."""
        now = self.clock()
        for first, count in ranges:
            for seg in range(first, first + count):
                before = self._asked.get((key, seg))
                since = now if before is None else before[2]
                self._asked[(key, seg)] = (TAIL if seg > highest else GAP, False, since)
                self._asked.move_to_end((key, seg))
        while len(self._asked) > ASKED_MEMORY:
            self._asked.popitem(last=False)

    def arrived(self, key: McastKey, seg: int, flags: int, *, new: bool) -> None:
        """Segment ``seg`` of ``key`` arrived (``new``: this receiver lacked it)."""
        entry = self._asked.get((key, seg))
        if entry is None:
            return
        kind, repaired, since = entry
        if flags & (Flag.REPAIR | Flag.RETRANSMIT):
            if new:
                self._asked[(key, seg)] = (kind, True, since)
                self._learn(kind, premature=False)
                self._answered(self.clock() - since)
            return
        del self._asked[(key, seg)]  # the original: it settles what the NACK was
        if new or repaired:
            self._learn(kind, premature=True)
            self.stats.premature_nacks += 1

    @property
    def answer_time(self) -> float | None:
        """The mean time from a first ask to its repair; None before any was answered."""
        return self._answers.srtt or None

    def retry_after(self) -> float:
        """How long after a NACK it is asked again if nothing came: twice the mean answer,
        at least four NACK delays, at most the longest RTO."""
        answer = 2 * self._answers.srtt
        return min(self.cfg.rto_max, max(4 * self.cfg.nack_delay, answer))

    def _answered(self, took: float) -> None:
        self._answers.sample(min(max(took, 0.0), self.cfg.rto_max), self.cfg)

    def _learn(self, kind: str, *, premature: bool) -> None:
        cfg = self.cfg
        if kind == TAIL:
            grown = self.tail_quiet * 2 if premature else self.tail_quiet * 0.75
            self.tail_quiet = min(cfg.rto_max / 2, max(cfg.tail_delay, grown))
        else:
            grown = self.gap_wait * 2 if premature else self.gap_wait * 0.75
            self.gap_wait = min(GAP_WAIT_LIMIT * cfg.nack_delay, max(cfg.nack_delay, grown))
