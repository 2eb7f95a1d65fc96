"""What tells a reducing host that a RESULT was lost, before its timer would.

A host sends its chunks in bursts: the first window at once, then each chunk a result lets
go. The switches complete a burst's chunks in the order they were sent, so a missing result
whose later chunks' results came back was lost (as TCP's duplicate ACKs say: two are proof
against a reordering, one is not). The last chunk of a burst has no later one: it counts as
lost once its burst's other results came back and it trails them by clearly more than a
burst's results usually trail one another (learnt: on the CPU-bound emulator a burst of 8
comes back over a quarter of a second, on the in-process fabric over a millisecond). With
all of a 1 KiB reduction's 8 chunks in one burst, most losses are seen this way, and none
waits for the reduction's timer, whose base also covers the wait for the last rank.
"""

from __future__ import annotations

import collections
import enum
import statistics
from dataclasses import dataclass, field

from host_agents.transport.config import EngineConfig

# results of later chunks that make a missing one count as lost (as TCP's duplicate ACKs)
LATER_RESULTS_FOR_LOSS = 2
# send bursts whose trails (first result to last) a host remembers, per communicator
RECENT_TRAILS = 32
# a result missing at the tail of its burst counts as lost this many times the recent trails'
# median after the burst's latest result (their longest grow with every loss nearby)
TRAIL_MARGIN = 1.5

Trails = collections.deque[float]


def new_trails() -> Trails:
    return collections.deque(maxlen=RECENT_TRAILS)


class Evidence(enum.Enum):
    """What says a missing result was lost."""

    LATER_RESULTS = enum.auto()  # LATER_RESULTS_FOR_LOSS results of later chunks
    LATER_RESULT = enum.auto()  # one: a reordering by a few milliseconds looks the same
    BURST_TAIL = enum.auto()  # none later, but chunks sent with it came back


@dataclass(slots=True)
class Bursts:
    """One reduction's sends and results, by burst."""

    burst: dict[int, int] = field(default_factory=dict)  # chunk -> its burst
    open: dict[int, list[int]] = field(default_factory=dict)  # bursts not all back yet
    heard: set[int] = field(default_factory=set)  # bursts with a result back
    arrived_at: dict[int, float] = field(default_factory=dict)  # chunk -> its result's arrival

    def sent(self, chunk: int, burst: int) -> None:
        self.burst[chunk] = burst
        self.open.setdefault(burst, []).append(chunk)

    def arrived(self, chunk: int, now: float) -> None:
        self.arrived_at[chunk] = now
        self.heard.add(self.burst.get(chunk, -1))

    def learn_trails(self, results: list[bytes | None], resent: set[int], trails: Trails) -> None:
        """Each newly complete burst's trail: its last result after its first (a burst with
        a resent chunk says nothing about it)."""
        for burst, chunks in list(self.open.items()):
            if any(results[c] is None for c in chunks):
                continue
            del self.open[burst]
            if len(chunks) > 1 and not resent.intersection(chunks):
                times = [self.arrived_at[c] for c in chunks]
                trails.append(max(times) - min(times))

    def overtaken(
        self, results: list[bytes | None], lowest: int, sent: int, resent: set[int]
    ) -> list[tuple[int, Evidence]]:
        """The missing chunks, never resent, whose loss other results show."""
        later = 0
        lost: list[tuple[int, Evidence]] = []
        for chunk in range(sent - 1, lowest - 1, -1):
            if results[chunk] is not None:
                later += 1
            elif chunk in resent:
                continue
            elif later >= LATER_RESULTS_FOR_LOSS:
                lost.append((chunk, Evidence.LATER_RESULTS))
            elif later:
                lost.append((chunk, Evidence.LATER_RESULT))
            elif self.burst.get(chunk, -1) in self.heard:  # only earlier ones are back
                lost.append((chunk, Evidence.BURST_TAIL))
        return lost


def tail_wait(cfg: EngineConfig, trails: Trails) -> float:
    """How long after its burst's latest result a result at the burst's tail counts as lost:
    longer than a burst's results usually trail, at least ``reduce_stagger``, at most
    ``reduce_rto_max`` (also before anything was learnt)."""
    typical = statistics.median(trails) if trails else cfg.reduce_rto_max
    return min(max(cfg.reduce_stagger, TRAIL_MARGIN * typical), cfg.reduce_rto_max)
