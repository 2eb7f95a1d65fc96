"""The fault matrix's results file: every cell's parts, accumulated over runs.

A cell is one (fault setting, collective, algorithm, size); a part is one batch of consecutive
operations of a cell in one run. ``make reliability --resume`` loads the file, runs only what
each cell still lacks of the target (``plan``), and saves after every part, so the full matrix
(1000 operations per cell) can be built up over several runs of whatever length, and an
interrupted run loses at most the part it was in. No network here: the runner
(reliability.py) and the report (reliability_report.py) build on it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mininet_topos.experiments.records import known_fields, save_atomically
from mininet_topos.links.linkfaults import Impairment

FORMAT = 1

CellKey = tuple[str, str, str, int]  # (setting label, collective, algorithm, bytes)


class IncompatibleResults(ValueError):
    """The results file was made by a different matrix: resuming would mix two experiments."""


@dataclass
class Part:
    run: int  # index into Results.runs
    started: str  # UTC, ISO 8601
    seed: int  # the workload's seed (data, roots)
    operations: int
    retransmissions: int
    nacks: int
    wrong: int
    failures: int
    seconds: float
    lost_frames: int
    emulator_frames: int = 0  # frames the link emulator forwarded during the part
    emulator_cpu_s: float = 0.0  # its CPU time during the part
    queue_drops: int | None = None  # frames dropped at its full receive queues (not seeded);
    # None where the emulator did not count them (before 2026-11-23)
    note: str = ""


@dataclass
class Cell:
    setting: str
    collective: str
    algorithm: str
    size: int
    parts: list[Part] = field(default_factory=list)

    @property
    def key(self) -> CellKey:
        return (self.setting, self.collective, self.algorithm, self.size)

    def total(self, name: str) -> Any:
        return sum(getattr(p, name) for p in self.parts)

    @property
    def operations(self) -> int:
        return int(self.total("operations"))

    def frames_lost(self) -> int:
        """Every frame the protocol had to repair: the links' seeded losses and the frames
        the emulator dropped at its full receive queues."""
        return int(self.total("lost_frames")) + sum(p.queue_drops or 0 for p in self.parts)

    def per_loss(self, name: str) -> float | None:
        """``name`` (retransmissions or nacks) per frame lost; None where nothing was lost."""
        lost = self.frames_lost()
        return self.total(name) / lost if lost else None

    def seconds_per_operation(self) -> float | None:
        done = [p for p in self.parts if p.operations]
        if not done:
            return None
        return sum(p.seconds for p in done) / sum(p.operations for p in done)


@dataclass
class Run:
    started: str  # UTC, ISO 8601
    command: str
    commit: str
    fault_seed: int
    machine: str  # architecture and cores
    budget_s: float
    finished: str = ""  # empty while running, or when the run was killed
    # digest of the code that decides the protocol's behaviour (provenance.protocol): runs
    # of one digest measured the same protocol whatever else their commits changed
    protocol: str = ""
    # the links the run's faults were applied on (links/shaping.py's describe())
    links: str = "links unshaped"


@dataclass
class Results:
    topo: str
    members: str
    settings: dict[str, dict[str, Any]]  # label -> {"scope": ..., "impairment": {...}}
    runs: list[Run] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)
    format: int = FORMAT

    # -- the matrix ------------------------------------------------------------------------

    def check_compatible(
        self, topo: str, members: str, settings: dict[str, dict[str, Any]]
    ) -> None:
        """Refuse to add parts measured under different conditions to the same cells."""
        if (self.topo, self.members) != (topo, members):
            raise IncompatibleResults(
                f"the results file holds {self.topo} with members {self.members!r}, this run "
                f"is {topo} with members {members!r}: use another --results file"
            )
        for label, setting in settings.items():
            if label in self.settings and _filled(self.settings[label]) != _filled(setting):
                raise IncompatibleResults(
                    f"fault setting {label!r} changed since the results file was started "
                    f"({self.settings[label]} then, {setting} now): use another --results file"
                )
        for label, setting in settings.items():
            self.settings.setdefault(label, setting)

    def cell(self, key: CellKey) -> Cell:
        for cell in self.cells:
            if cell.key == key:
                return cell
        cell = Cell(*key)
        self.cells.append(cell)
        return cell

    def plan(self, keys: list[CellKey], target: int, chunk: int = 0) -> list[tuple[CellKey, int]]:
        """In matrix order, every cell short of ``target`` operations and how many to run
        next: what it lacks, or at most ``chunk`` when that is set."""
        out = []
        for key in keys:
            missing = target - self.cell(key).operations
            if missing > 0:
                out.append((key, min(missing, chunk) if chunk > 0 else missing))
        return out

    def estimate_seconds(self, key: CellKey, operations: int) -> float | None:
        """What ``operations`` more of a cell should take, from its earlier parts."""
        rate = self.cell(key).seconds_per_operation()
        return None if rate is None else rate * operations

    def ordered_cells(self, keys: list[CellKey]) -> list[Cell]:
        """The matrix's cells in its order, then any the file holds beyond it."""
        known = [self.cell(k) for k in keys]
        return known + [c for c in self.cells if c.key not in set(keys)]

    def protocols(self) -> list[str]:
        """The protocol digests of the runs that added parts, in run order, each once."""
        used = {p.run for c in self.cells for p in c.parts}
        return list(dict.fromkeys(r.protocol for i, r in enumerate(self.runs) if i in used))

    def run_operations(self, run: int) -> int:
        return sum(p.operations for c in self.cells for p in c.parts if p.run == run)

    # -- the file --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Results:
        if data.get("format") != FORMAT:
            raise IncompatibleResults(f"results file format {data.get('format')}, not {FORMAT}")
        cells = [
            Cell(
                c["setting"],
                c["collective"],
                c["algorithm"],
                int(c["size"]),
                [Part(**known_fields(Part, p)) for p in c["parts"]],
            )
            for c in data["cells"]
        ]
        return cls(
            topo=data["topo"],
            members=data["members"],
            settings=data["settings"],
            runs=[Run(**known_fields(Run, r)) for r in data["runs"]],
            cells=cells,
        )

    def save(self, path: Path) -> None:
        save_atomically(path, self.to_json())

    @classmethod
    def load(cls, path: Path) -> Results:
        return cls.from_json(json.loads(path.read_text()))


def _filled(setting: dict[str, Any]) -> dict[str, Any]:
    """A recorded setting with every impairment field at its default where the record has none
    (a field added later, such as a link's rate, changes no setting recorded before it)."""
    impairment = asdict(Impairment(**setting.get("impairment", {})))
    return {**setting, "impairment": impairment}
