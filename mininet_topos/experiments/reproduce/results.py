"""``make reproduce``'s results file: every cell measured so far, and the runs that measured it.

Saved after every cell, so ``--resume`` continues an interrupted or budget-limited run cell by
cell (a cell is redone only when it failed). Each cell keeps a summary of what its agents
reported per test and size, not their raw files: per-iteration completion times, per-rank
means, start CPU, init, overlap sweeps, CPU per process type, link bytes. No network here.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mininet_topos.experiments.records import known_fields, save_atomically

FORMAT = 1


class IncompatibleResults(ValueError):
    """The results file was made on another topology or profile: resuming would mix them."""


@dataclass
class Measurement:
    """One test at one size, over every rank of the cell."""

    collective: str
    algorithm: str
    chosen: str
    size: int
    persistent: bool
    mode: str
    ranks: int
    # per timed iteration: the first rank's start to the last rank's end (barriers: the mean
    # rank's own time; see completion())
    completion_s: list[float]
    rank_means_s: list[float]  # each rank's mean over the timed iterations (OSU's view)
    wrong: int
    init_s: list[float] = field(default_factory=list)  # per rank (persistent)
    root_start_cpu_s: list[float] = field(default_factory=list)  # the root's start() calls
    start_cpu_s: list[float] = field(default_factory=list)  # every rank's, every call
    agent_cpu_s: list[float] = field(default_factory=list)  # per rank, over this size
    # overlap mode: per computation fraction, its median length and per-iteration completion
    overlap: list[dict[str, Any]] = field(default_factory=list)
    # where a first-start-to-last-end time goes, per timed iteration from the first start:
    # the last rank's start, the last non-root rank's end and the root's end (rooted tests)
    last_start_s: list[float] = field(default_factory=list)
    last_receiver_end_s: list[float] = field(default_factory=list)
    root_end_s: list[float] = field(default_factory=list)
    # aligned starts: every rank's delay after the agreed start time, every timed iteration
    start_delay_s: list[float] = field(default_factory=list)


@dataclass
class CellResult:
    key: str
    experiment: str
    run: int
    started: str
    seconds: float
    members: int
    errors: list[str] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    operations: int = 0  # per size, warm-up included: link bytes are divided by it
    link_bytes: int | None = None  # per operation
    global_link_bytes: int | None = None
    minimum_bytes: int | None = None
    minimum_global_bytes: int | None = None
    cpu: dict[str, Any] = field(default_factory=dict)  # measure.CpuUse as a dict
    # links/fidelity.py's Verdict as a dict, over the agents' timed windows; empty: not judged
    fidelity: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors and all(m.wrong == 0 for m in self.measurements)

    @property
    def network_bound(self) -> bool:
        return self.fidelity.get("verdict") == "network-bound"


@dataclass
class Run:
    started: str
    command: str
    commit: str
    environment: dict[str, Any]
    finished: str = ""


@dataclass
class Results:
    topo: str
    profile: str
    seed: int
    runs: list[Run] = field(default_factory=list)
    cells: dict[str, CellResult] = field(default_factory=dict)
    format: int = FORMAT
    # halving the rate doubles a bandwidth-bound time (experiments/reproduce/rate_check.py)
    rate_check: dict[str, Any] = field(default_factory=dict)
    # the comparisons on ns-3 with the same links (experiments/reproduce/ns3_side.py)
    ns3: dict[str, Any] = field(default_factory=dict)

    def check_compatible(self, topo: str, profile: str) -> None:
        if (self.topo, self.profile) != (topo, profile):
            raise IncompatibleResults(
                f"the results file holds the {self.profile} profile on {self.topo}; this run is "
                f"the {profile} profile on {topo}: use another --results file or drop --resume"
            )

    def pending(self, keys: list[str]) -> list[str]:
        """The cells still to measure, in plan order: never measured, or failed."""
        return [k for k in keys if k not in self.cells or not self.cells[k].ok]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Results:
        if data.get("format") != FORMAT:
            raise IncompatibleResults(f"results file format {data.get('format')}, not {FORMAT}")
        cells = {}
        for key, c in data["cells"].items():
            cell = CellResult(**known_fields(CellResult, c))
            cell.measurements = [
                Measurement(**known_fields(Measurement, m)) for m in c["measurements"]
            ]
            cells[key] = cell
        return cls(
            topo=data["topo"],
            profile=data["profile"],
            seed=int(data["seed"]),
            runs=[Run(**known_fields(Run, r)) for r in data["runs"]],
            cells=cells,
            rate_check=data.get("rate_check", {}),
            ns3=data.get("ns3", {}),
        )

    def save(self, path: Path) -> None:
        save_atomically(path, self.to_json())

    @classmethod
    def load(cls, path: Path) -> Results:
        return cls.from_json(json.loads(path.read_text()))


def summarise(reports: dict[int, dict[str, Any]], members: tuple[int, ...]) -> list[Measurement]:
    """The agents' per-rank reports of one launch as one measurement per test and size."""
    grouped: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}
    for node, report in reports.items():
        rank = report.get("rank", members.index(node) if node in members else -1)
        for entry in report.get("tests", []):
            key = (
                entry["collective"],
                entry["algorithm"],
                entry["size"],
                entry["persistent"],
                entry.get("mode", "single"),
                entry["root"],
            )
            grouped.setdefault(key, []).append((rank, entry))
    out = []
    for (collective, algorithm, size, persistent, mode, root), ranked in grouped.items():
        entries = [e for _, e in ranked]
        root_entries = [e for r, e in ranked if r == root]
        out.append(
            Measurement(
                collective=collective,
                algorithm=algorithm,
                chosen=entries[0].get("chosen", algorithm),
                size=size,
                persistent=persistent,
                mode=mode,
                ranks=len(entries),
                completion_s=completion(entries),
                rank_means_s=[statistics.fmean(e["times"]) for e in entries if e["times"]],
                wrong=sum(int(e["wrong"]) for e in entries),
                init_s=[float(e.get("init_seconds", 0.0)) for e in entries] if persistent else [],
                root_start_cpu_s=list(root_entries[0].get("start_cpu", [])) if root_entries else [],
                start_cpu_s=[c for e in entries for c in e.get("start_cpu", [])],
                agent_cpu_s=[float(e.get("cpu_seconds", 0.0)) for e in entries],
                overlap=_overlap(entries),
                start_delay_s=[d for e in entries for d in e.get("start_delays", [])],
                **_timeline(ranked, root),
            )
        )
    return out


def _timeline(ranked: list[tuple[int, dict[str, Any]]], root: int) -> dict[str, list[float]]:
    """Per timed iteration, from the first rank's start (one monotonic clock): when the last
    rank started, the last non-root rank ended and the root ended."""
    stamps = {rank: e.get("stamps", []) for rank, e in ranked}
    counts = {len(s) for s in stamps.values()}
    if len(counts) != 1 or root not in stamps or len(stamps) < 2:
        return {}
    (count,) = counts
    out: dict[str, list[float]] = {"last_start_s": [], "last_receiver_end_s": [], "root_end_s": []}
    for i in range(count):
        first = min(s[i][0] for s in stamps.values())
        out["last_start_s"].append(max(s[i][0] for s in stamps.values()) - first)
        out["last_receiver_end_s"].append(
            max(s[i][1] for rank, s in stamps.items() if rank != root) - first
        )
        out["root_end_s"].append(stamps[root][i][1] - first)
    return out


def completion(entries: list[dict[str, Any]]) -> list[float]:
    """Per timed iteration: first start to last end across ranks where every rank stamped it
    (one monotonic clock on the machine), else the slowest rank's own time. Barriers run back
    to back, so a rank's start depends on when it left the previous one: for them the mean
    over ranks of each rank's own time, the latency OSU and [NIC-barrier] report."""
    counts = {len(e["times"]) for e in entries}
    if len(counts) != 1:
        return []
    (count,) = counts
    if entries[0]["collective"] == "barrier":
        return [statistics.fmean(e["times"][i] for e in entries) for i in range(count)]
    stamped = all(len(e.get("stamps", [])) == count for e in entries)
    spans = []
    for i in range(count):
        if stamped:
            spans.append(
                max(e["stamps"][i][1] for e in entries) - min(e["stamps"][i][0] for e in entries)
            )
        else:
            spans.append(max(e["times"][i] for e in entries))
    return spans


def _overlap(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per computation fraction (0 first): the computation's median length over ranks and,
    per iteration, the slowest rank's start-to-wait-return time."""
    sweeps = [e.get("overlap", []) for e in entries]
    if not sweeps or not sweeps[0]:
        return []
    iterations = min(len(e["times"]) for e in entries)
    # fraction 0 measured the same way as the others, for the comparison
    out = [
        {
            "fraction": 0.0,
            "compute_s": 0.0,
            "completion_s": [max(e["times"][i] for e in entries) for i in range(iterations)],
        }
    ]
    for index, first in enumerate(sweeps[0]):
        points = [s[index] for s in sweeps if len(s) > index]
        iterations = min(len(p["times"]) for p in points)
        out.append(
            {
                "fraction": first["fraction"],
                "compute_s": statistics.median(p["compute_s"] for p in points),
                "completion_s": [max(p["times"][i] for p in points) for i in range(iterations)],
            }
        )
    return out


def spread(values: list[float]) -> dict[str, float] | None:
    """min, median, max and mean, or None without values."""
    if not values:
        return None
    return {
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "mean": statistics.fmean(values),
    }
