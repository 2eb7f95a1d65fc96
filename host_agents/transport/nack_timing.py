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
"""

from __future__ import annotations

import collections

from controller.wire import Flag
from host_agents.transport.config import EngineConfig, EngineStats
from host_agents.transport.keys import McastKey

# segments asked for and not yet settled (their original has not arrived) that are remembered
ASKED_MEMORY = 4096
# a gap's wait grows to at most this many times nack_delay (a reordered segment is held back
# for milliseconds; a real gap must not wait much longer than a round trip)
GAP_WAIT_LIMIT = 8
TAIL, GAP = "tail", "gap"


class NackTiming:
    def __init__(self, cfg: EngineConfig, stats: EngineStats) -> None:
        self.cfg = cfg
        self.stats = stats
        self.tail_quiet = cfg.tail_delay  # the silence after which a stalled tail is asked for
        self.gap_wait = cfg.nack_delay  # the longest random wait before a gap is asked for
        # (message, segment) -> (kind of NACK that asked for it, whether a repair came first)
        self._asked: collections.OrderedDict[tuple[McastKey, int], tuple[str, bool]] = (
            collections.OrderedDict()
        )

    def asked(self, key: McastKey, ranges: list[tuple[int, int]], highest: int) -> None:
        """A NACK for ``ranges`` went out; segments past ``highest`` were a tail's."""
        for first, count in ranges:
            for seg in range(first, first + count):
                self._asked[(key, seg)] = (TAIL if seg > highest else GAP, False)
                self._asked.move_to_end((key, seg))
        while len(self._asked) > ASKED_MEMORY:
            self._asked.popitem(last=False)

    def arrived(self, key: McastKey, seg: int, flags: int, *, new: bool) -> None:
        """Segment ``seg`` of ``key`` arrived (``new``: this receiver lacked it)."""
        entry = self._asked.get((key, seg))
        if entry is None:
            return
        kind, repaired = entry
        if flags & (Flag.REPAIR | Flag.RETRANSMIT):
            if new:
                self._asked[(key, seg)] = (kind, True)
                self._learn(kind, premature=False)
            return
        del self._asked[(key, seg)]  # the original: it settles what the NACK was
        if new or repaired:
            self._learn(kind, premature=True)
            self.stats.premature_nacks += 1

    def _learn(self, kind: str, *, premature: bool) -> None:
        cfg = self.cfg
        if kind == TAIL:
            grown = self.tail_quiet * 2 if premature else self.tail_quiet * 0.75
            self.tail_quiet = min(cfg.rto_max / 2, max(cfg.tail_delay, grown))
        else:
            grown = self.gap_wait * 2 if premature else self.gap_wait * 0.75
            self.gap_wait = min(GAP_WAIT_LIMIT * cfg.nack_delay, max(cfg.nack_delay, grown))
