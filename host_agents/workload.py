"""What a run asks the agents to do, the data they use, and how results are checked.

A workload is plain JSON the launcher writes and every agent reads: the communicator, and a
list of tests (collective, algorithm, sizes, iterations, root, persistent or not). Data is a
pseudo-random pattern derived from (seed, test, size, iteration, rank), so every iteration
moves different bytes and every rank can check what it received without being told.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from host_agents.collectives import Case, collective

MODES = ("single", "all_roots", "overlap")
ALIGN_LEAD_S = 0.25  # an aligned start's lead on unshaped links (CollectiveTest.align_lead_s)
ALIGN_LEAD_MAX_S = 60.0


@dataclass(frozen=True, slots=True)
class CollectiveTest:
    collective: str
    algorithm: str = "auto"
    sizes: tuple[int, ...] = (0,)
    iterations: int = 10
    warmup: int = 1
    root: int = 0
    persistent: bool = False
    sync: bool = True  # a barrier before each iteration (OSU style); False: back to back
    # after the barrier, every rank waits for one start time on the machine's clock (the
    # Mininet hosts share the kernel's CLOCK_MONOTONIC): the barrier's release reaches 72
    # agents on 2 cores over 50-80 ms, which a first-start-to-last-end time would otherwise
    # measure instead of the collective (host_agents.workload_modes.start_together)
    aligned: bool = False
    # how far ahead rank 0 sets that start: more than its binomial broadcast of the time takes
    # to reach every rank (72 agents on 2 cores, unshaped: about 70 ms, barrier release skew
    # included); on slow or long links the harness gives more (experiments/align.py)
    align_lead_s: float = ALIGN_LEAD_S
    op: str = "sum"  # reductions only (host_agents.reduction)
    # how an iteration runs (host_agents.workload_modes): "single" (one operation), "all_roots"
    # (every rank roots one operation, all started at once, then all waited for: [Ragasa]'s
    # experiment) or "overlap" (blocking "computation" between start and wait, [Tofu2])
    mode: str = "single"
    # overlap only: the computation as fractions of the rank's own start+wait without any
    compute: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        coll = collective(self.collective)  # raises, naming the known ones
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.mode == "all_roots" and not coll.has_root:
            raise ValueError(f"mode all_roots needs a rooted collective, not {self.collective}")
        if any(f < 0 for f in self.compute):
            raise ValueError("compute fractions must be non-negative")
        if self.iterations < 1 or self.warmup < 0:
            raise ValueError("iterations must be at least 1 and warmup at least 0")
        if any(s < 0 for s in self.sizes):
            raise ValueError("sizes must be non-negative")
        if self.aligned and not self.sync:
            raise ValueError("an aligned start needs the barrier before it (sync)")
        if not 0 < self.align_lead_s <= ALIGN_LEAD_MAX_S:
            raise ValueError(f"align_lead_s must be in (0, {ALIGN_LEAD_MAX_S:g}] seconds")


@dataclass(slots=True)
class Workload:
    comm_id: int
    members: tuple[int, ...]
    tests: list[CollectiveTest]
    seed: int = 1
    innet: bool = True
    rendezvous: str = "start"
    split: str | None = None  # "group" or "switch": run the tests on MPI_Comm_split parts
    engine: dict[str, Any] = field(default_factory=dict)  # EngineConfig overrides
    options: dict[str, Any] = field(default_factory=dict)  # CommOptions overrides

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> Workload:
        data = json.loads(path.read_text())
        data["members"] = tuple(data["members"])
        data["tests"] = [
            CollectiveTest(
                **{**t, "sizes": tuple(t["sizes"]), "compute": tuple(t.get("compute", ()))}
            )
            for t in data["tests"]
        ]
        return cls(**data)


def pattern(seed: int, test: int, size: int, iteration: int, rank: int, nbytes: int) -> bytes:
    """The bytes rank ``rank`` contributes in one iteration of one test."""
    return random.Random(f"{seed}:{test}:{size}:{iteration}:{rank}").randbytes(nbytes)


@dataclass(frozen=True, slots=True)
class Instance:
    """One iteration of one test as one rank sees it: what it passes in, what it must get."""

    collective: str
    seed: int
    test: int
    size: int
    iteration: int
    root: int
    nranks: int
    rank: int
    op: str = "sum"

    def _bytes(self, owner: int, nbytes: int) -> bytes:
        return pattern(self.seed, self.test, self.size, self.iteration, owner, nbytes)

    def contribution(self) -> bytes | None:
        """What the rank passes in (None where it passes nothing)."""
        return collective(self.collective).contribution(self._case())

    def expected(self) -> bytes | None:
        """What the rank must end with (None where nothing is checked, e.g. a barrier)."""
        return collective(self.collective).expected(self._case())

    def _case(self) -> Case:
        return Case(self._bytes, self.root, self.nranks, self.rank, self.size, self.op)
