"""Words, numbers and shared pieces of the ``make reproduce`` report (reproduce_report.py):
times with their spread, ratios, which process type set the pace, and one plot figure's
setup. No network."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet_topos.experiments.reproduce.results import CellResult, Measurement, Results, spread


@dataclass
class Section:
    """One paper's part of the report: its text, plots and its line of the summary."""

    experiment: str
    body: list[str] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    summary: tuple[str, str, str, str] = ("", "-", "-", "-")  # what, paper's, ours, ratio


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def spread_text(values: list[float]) -> str:
    """``median (min-max, mean m)``"""
    s = spread(values)
    if s is None:
        return "-"
    return f"{ms(s['median'])} ({ms(s['min'])}-{ms(s['max'])}, mean {ms(s['mean'])})"


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def size_text(nbytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def times_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fraction_text(value: float | None) -> str:
    """A small ratio as 1/N (start against init), a larger one as a factor."""
    if value is None or value <= 0:
        return "-"
    return f"1/{1 / value:.0f}" if value < 0.5 else times_text(value)


def global_text(cell: CellResult) -> str:
    """Global-link bytes per operation and their ratio to the least possible."""
    if cell.global_link_bytes is None:
        return "-"
    against = ratio(cell.global_link_bytes, cell.minimum_global_bytes)
    return f"{cell.global_link_bytes:,}" + (f" ({times_text(against)})" if against else "")


def measurements(results: Results, experiment: str) -> list[tuple[CellResult, Measurement]]:
    return [
        (cell, m)
        for cell in results.cells.values()
        if cell.experiment == experiment
        for m in cell.measurements
    ]


def pace(cells: list[CellResult], cores: int) -> str:
    """Which process type set the pace over these cells, from their CPU seconds."""
    wall = sum(c.cpu.get("wall_s", 0.0) for c in cells)
    if not cells or wall <= 0:
        return "No CPU figures were recorded."
    totals: dict[str, float] = {}
    busiest: dict[str, float] = {}
    for cell in cells:
        for kind, value in cell.cpu.get("total_s", {}).items():
            totals[kind] = totals.get(kind, 0.0) + value
        for kind, value in cell.cpu.get("busiest_s", {}).items():
            busiest[kind] = busiest.get(kind, 0.0) + value
    used = sum(totals.values())
    shares = ", ".join(
        f"{kind} {value:.1f} s ({value / wall:.2f} of a core)"
        for kind, value in sorted(totals.items(), key=lambda kv: -kv[1])
    )
    top = max(totals, key=lambda k: totals[k])
    text = f"CPU while the agents ran their tests ({wall:.0f} s): {shares}. "
    if used >= 0.85 * cores * wall:
        return text + (
            f"The {cores} cores were saturated, {top} using the most: the CPU, chiefly {top}, "
            "set the pace."
        )
    hot = max(busiest, key=lambda k: busiest[k])
    if busiest[hot] >= 0.85 * wall:
        return text + f"One {hot} process was busy nearly all the time: it set the pace."
    share = f"Together they used {used / (cores * wall):.0%} of the {cores} cores"
    load = max((c.cpu.get("load_average", 0.0) for c in cells), default=0.0)
    if load > cores:
        return text + (
            f"{share}, but runnable threads outnumbered the cores (load average up to "
            f"{load:.0f} on {cores}, ours and any other jobs'): waiting for a core set the "
            f"pace as much as the protocol's round trips did; of ours, {top} was the busiest."
        )
    return text + (
        f"{share} and no single process was saturated: waiting (round trips, "
        f"acknowledgements, timers) set the pace, not CPU; the busiest type was {top}."
    )


def figure_path(img_dir: Path, experiment: str) -> Path:
    return img_dir / f"results-{experiment}.png"


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def by_algorithm(
    pairs: list[tuple[CellResult, Measurement]], keep: Callable[[Measurement], bool]
) -> dict[str, list[tuple[CellResult, Measurement]]]:
    out: dict[str, list[tuple[CellResult, Measurement]]] = {}
    for cell, m in pairs:
        if keep(m):
            out.setdefault(m.algorithm, []).append((cell, m))
    for series in out.values():
        series.sort(key=lambda cm: (cm[1].size, cm[0].members))
    return out


def unique(cells: list[CellResult]) -> list[CellResult]:
    """Each cell once (a cell holds several measurements)."""
    seen: dict[str, CellResult] = {}
    for cell in cells:
        seen.setdefault(cell.key, cell)
    return list(seen.values())


ALIGNED_START = (
    "Each iteration begins with a barrier, then every rank waits for a start time that rank 0 "
    "set ahead on the clock all Mininet hosts share (by more than its broadcast of that time "
    "takes on the links: a quarter of a second unshaped, mininet_topos/experiments/align.py), "
    "so the barrier's "
    "uneven release (50-80 ms across 72 agents on 2 cores) is not counted as the collective's "
    "time. The ranks still wake at that time one after another: the CPU they queue for is in "
    "the table of where the time goes."
)


def timeline_rows(named: list[tuple[str, Measurement]]) -> list[str]:
    """Where a first-start-to-last-end time goes, medians over the timed iterations: how far
    apart the ranks started, how late after the agreed start time (aligned tests), and when
    the last non-root rank and the root were done."""
    rows = [
        "| size | algorithm | last rank started | start after the agreed time: median (max) | "
        "last non-root rank done | root done | time |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for label, m in named:
        if not m.root_end_s:
            continue
        delays = m.start_delay_s
        late = f"{ms(median(delays))} ({ms(max(delays))})" if delays else "-"
        rows.append(
            f"| {size_text(m.size)} | {label} | {ms(median(m.last_start_s))} | {late} | "
            f"{ms(median(m.last_receiver_end_s))} | {ms(median(m.root_end_s))} | "
            f"{ms(median(m.completion_s))} |"
        )
    return rows if len(rows) > 2 else []
