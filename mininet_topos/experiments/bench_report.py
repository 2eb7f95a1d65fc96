"""What ``make bench`` writes besides the OSU-style tables: the side-by-side summary of each cell
under every loss setting, the speedup plots, and the link emulator's load line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from host_agents.report import Row
from mininet_topos.links.fidelity import NETWORK_BOUND

BASELINES = {
    "bcast": "binomial",
    "barrier": "dissemination",
    "scatter": "tree",
    "allgather": "ring",
    "allreduce": "recursive_doubling",
    "reduce": "binomial",
}


def emulator_load(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What the link emulator carried between two of its stats: is it setting the pace?"""
    wall = after["uptime_seconds"] - before["uptime_seconds"]
    frames = after["totals"]["forwarded"] - before["totals"]["forwarded"]
    cpu = after["cpu_seconds"] - before["cpu_seconds"]
    drops = after["totals"]["queue_drops"] - before["totals"]["queue_drops"]
    return (
        f"link emulator: {frames / wall:.0f} frames/s, {cpu / wall:.0%} of a core, "
        f"{cpu / frames * 1e6 if frames else 0:.1f} us CPU per frame, {drops} queue drops"
    )


def side_by_side(rows: dict[str, list[Row]]) -> str:
    """A markdown table: each cell's time under every setting, its slowdown against the
    first (no loss), and, per setting, the in-network algorithm's speedup over the baseline."""
    labels = list(rows)
    by_cell: dict[tuple[str, str, int], dict[str, Row]] = {}
    for label, chosen in rows.items():
        for row in chosen:
            by_cell.setdefault((row.collective, row.algorithm, row.size), {})[label] = row
    head = " | ".join(f"{label}" for label in labels)
    lines = [
        f"| collective | algorithm | bytes | {head} |",
        "|---|---|---:|" + "---:|" * len(labels),
    ]
    reference = labels[0]
    for (collective, algorithm, size), cells in by_cell.items():
        times = []
        for label in labels:
            measured = cells.get(label)
            if measured is None:
                times.append("failed")
                continue
            text = _time(measured.avg_us)
            if label != reference and reference in cells and cells[reference].avg_us:
                text += f" ({measured.avg_us / cells[reference].avg_us:.1f}x)"
            times.append(text)
        lines.append(f"| {collective} | {algorithm} | {size} | {' | '.join(times)} |")
    speedups = []
    for (collective, algorithm, size), cells in by_cell.items():
        base = by_cell.get((collective, BASELINES[collective], size), {})
        if not algorithm.startswith("innet") or not base:
            continue
        ratios = [
            f"{base[label].avg_us / cells[label].avg_us:.1f}x"
            if label in cells and label in base and cells[label].avg_us
            else "-"
            for label in labels
        ]
        speedups.append(
            f"| {collective} | {algorithm} over {BASELINES[collective]} | {size} | "
            + " | ".join(ratios)
            + " |"
        )
    if speedups:
        lines += ["", f"| collective | speedup | bytes | {head} |", lines[1], *speedups]
    return "\n".join(lines)


def _time(us: float) -> str:
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1e3:.1f} ms"


def plot(rows: list[Row], out: Path, suffix: str = "") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for collective in ("bcast", "scatter", "allgather", "allreduce"):
        chosen = [r for r in rows if r.collective == collective]
        if not chosen:
            continue
        fig, (ax_time, ax_speed) = plt.subplots(1, 2, figsize=(11, 4))
        by_algorithm: dict[str, list[Row]] = {}
        for r in chosen:
            by_algorithm.setdefault(r.algorithm, []).append(r)
        base = {r.size: r.avg_us for r in by_algorithm.get(BASELINES[collective], [])}
        for name, series in sorted(by_algorithm.items()):
            series.sort(key=lambda r: r.size)
            sizes = [max(r.size, 1) for r in series]
            ax_time.plot(sizes, [r.avg_us for r in series], marker="o", label=name)
            speedup = [base[r.size] / r.avg_us for r in series if r.size in base and r.avg_us]
            ax_speed.plot(sizes[: len(speedup)], speedup, marker="o", label=name)
        ax_time.set(
            xscale="log",
            yscale="log",
            xlabel="bytes",
            ylabel="time (us)",
            title=f"{collective}: time",
        )
        ax_speed.set(
            xscale="log",
            xlabel="bytes",
            ylabel=f"speedup over {BASELINES[collective]}",
            title=f"{collective}: speedup",
        )
        ax_time.legend(fontsize=8)
        ax_speed.axhline(1.0, color="grey", linewidth=0.5)
        fig.tight_layout()
        path = out / f"bench-{collective}{suffix}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def slug(label: str) -> str:
    """A file-name part for a setting: 'loss 1%, duplicate 1%' -> 'loss1-duplicate1'."""
    return "-".join(part.replace(" ", "").replace("%", "") for part in label.split(", "))


def speedup_table(rows: list[Row]) -> str:
    """Each algorithm over its collective's baseline at each size, from one run: the ratio of
    mean times (the fastest and slowest ranks' ratios beside it), stated only where both
    cells were network-bound (links/fidelity.py)."""
    cells = {(r.collective, r.algorithm, r.size): r for r in rows}
    lines = [
        "| collective | bytes | speedup | ratio (fastest-slowest rank) | fidelity |",
        "|---|---:|---|---:|---|",
    ]
    for (collective, algorithm, size), row in cells.items():
        base = cells.get((collective, BASELINES.get(collective, ""), size))
        if base is None or base is row or not row.avg_us:
            continue
        what = f"{algorithm} over {base.algorithm}"
        bound = [r.fidelity for r in (row, base)]
        if all(b == NETWORK_BOUND for b in bound):
            ends = sorted((base.min_us / row.min_us, base.max_us / row.max_us))
            ratio = f"{base.avg_us / row.avg_us:.2f}x ({ends[0]:.2f}-{ends[1]:.2f})"
            verdict = NETWORK_BOUND
        else:
            ratio = "not stated"
            verdict = next(b or "not judged" for b in bound if b != NETWORK_BOUND)
        lines.append(f"| {collective} | {size} | {what} | {ratio} | {verdict} |")
    return "\n".join(lines) if len(lines) > 2 else ""
