"""Results in the shape researchers read them: an OSU-style table per collective and
algorithm, plus JSON and CSV for plots."""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class Row:
    collective: str
    algorithm: str
    chosen: str
    size: int
    persistent: bool
    avg_us: float  # mean over ranks of each rank's mean time (OSU's "Avg Latency")
    min_us: float  # fastest rank's mean
    max_us: float  # slowest rank's mean
    iterations: int
    ranks: int
    wrong: int
    init_us: float = 0.0
    link_bytes: int | None = None
    global_link_bytes: int | None = None
    minimum_bytes: int | None = None  # the physical minimum for this collective, when known
    acks_at_root: float | None = None  # multicast ACK frames reaching the root per operation
    # "network-bound" or "CPU-bound: ..." (mininet_topos/links/fidelity.py); None: not judged
    fidelity: str | None = None


def aggregate(reports: Iterable[dict[str, Any]]) -> list[Row]:
    grouped: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for report in reports:
        for entry in report.get("tests", []):
            key = (
                entry["collective"],
                entry["algorithm"],
                entry["size"],
                entry["persistent"],
                entry["root"],
            )
            grouped.setdefault(key, []).append(entry)
    rows = []
    for (collective, algorithm, size, persistent, _), entries in grouped.items():
        means = [statistics.fmean(e["times"]) * 1e6 for e in entries if e["times"]]
        if not means:
            continue
        rows.append(
            Row(
                collective=collective,
                algorithm=algorithm,
                chosen=entries[0].get("chosen", algorithm),
                size=size,
                persistent=persistent,
                avg_us=statistics.fmean(means),
                min_us=min(means),
                max_us=max(means),
                iterations=len(entries[0]["times"]),
                ranks=len(entries),
                wrong=sum(e["wrong"] for e in entries),
                init_us=statistics.fmean(e.get("init_seconds", 0.0) for e in entries) * 1e6,
            )
        )
    return rows


COLUMNS = ("Size", "Avg(us)", "Min(us)", "Max(us)", "Iterations", "Wrong")
WIDTHS = (10, 12, 12, 12, 10, 6)


def format_table(rows: list[Row]) -> str:
    """OSU micro-benchmark style, one block per (collective, algorithm)."""
    out: list[str] = []
    blocks: dict[tuple[str, str, bool], list[Row]] = {}
    for row in rows:
        blocks.setdefault((row.collective, row.chosen, row.persistent), []).append(row)
    for (collective, algorithm, persistent), block in blocks.items():
        kind = " persistent" if persistent else ""
        out.append(f"# netcoll {collective}{kind}, algorithm {algorithm}, {block[0].ranks} ranks")
        extra = any(r.link_bytes is not None for r in block)
        judged = any(r.fidelity is not None for r in block)
        header = "# " + " ".join(
            f"{title:>{width}}" for title, width in zip(COLUMNS, WIDTHS, strict=True)
        )
        if extra:
            header += f" {'LinkBytes':>12} {'GlobalBytes':>12} {'xMinimum':>9}"
        if judged:
            header += f" {'Bound':>8}"
        out.append(header)
        for row in sorted(block, key=lambda r: r.size):
            line = (
                f"{row.size:>12} {row.avg_us:>12.2f} {row.min_us:>12.2f} {row.max_us:>12.2f} "
                f"{row.iterations:>10} {row.wrong:>6}"
            )
            if extra:
                ratio = (
                    f"{row.link_bytes / row.minimum_bytes:>9.2f}"
                    if row.link_bytes is not None and row.minimum_bytes
                    else f"{'-':>9}"
                )
                line += f" {row.link_bytes or 0:>12} {row.global_link_bytes or 0:>12} {ratio}"
            if judged:
                bound = "-" if row.fidelity is None else row.fidelity.split("-")[0]
                line += f" {bound:>8}"
            out.append(line)
        out.append("")
    return "\n".join(out)


def save(
    rows: list[Row], directory: Path, name: str, meta: dict[str, Any] | None = None
) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / f"{name}.json"
    csv_path = directory / f"{name}.csv"
    json_path.write_text(
        json.dumps({"meta": meta or {}, "rows": [asdict(r) for r in rows]}, indent=1)
    )
    with csv_path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(Row.__dataclass_fields__))
        writer.writeheader()
        for row in rows:
            writer.writerow(asdict(row))
    return json_path, csv_path
