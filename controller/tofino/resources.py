"""Stages and per-stage resource use of a Tofino compile, read from the compiler's own reports.

p4c's Tofino backend (``p4c-barefoot``, and Intel's ``bf-p4c``) writes, when run with ``-g``:

* ``<out>/<pipe>/logs/resources.json``: for each MAU stage the physical units in use and by
  which table (schema ``compiler_interfaces/schemas/resources_schema.py`` of p4c's
  ``backends/tofino``, written by ``bf-p4c/logging/resources.cpp``);
* ``<out>/<pipe>/logs/mau.resources.log``: the same as text tables (``p4c-build-logs``, from
  ``compiler_interfaces/tools/create_mau_resources.py``);
* ``<out>/<pipe>/logs/metrics.json``: totals, including PHV containers occupied
  (``compiler_interfaces/schemas/metrics_schema.py``).

This module counts per stage what ``create_mau_resources.py`` counts (one SRAM, map RAM, TCAM,
gateway or ALU per array element; stateful ALUs are the meter ALUs with a ``stateful_ram``
use) and reads PHV occupancy from metrics.json. It relies only on the fields those schemas mark
required, and says which one is missing rather than guessing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

# Per-stage counters, in the order they are printed, with their column headings.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("logical_tables", "tables"),
    ("srams", "SRAM"),
    ("map_rams", "mapRAM"),
    ("tcams", "TCAM"),
    ("stateful_alus", "sALU"),
    ("meter_alus", "mALU"),
    ("stats_alus", "statALU"),
    ("gateways", "gw"),
    ("exact_xbar_bytes", "exm-xbar"),
    ("ternary_xbar_bytes", "tern-xbar"),
    ("hash_bits", "hash"),
    ("vliw", "VLIW"),
)


class ResourceReportError(ValueError):
    """A report is not in the shape the compiler's schema gives it."""


@dataclass(slots=True)
class StageUse:
    """Units of one MAU stage: in use (``StageReport.used``) or available (``.available``)."""

    logical_tables: int = 0
    srams: int = 0
    map_rams: int = 0
    tcams: int = 0
    stateful_alus: int = 0  # meter ALUs running a RegisterAction (used_for "stateful_ram")
    meter_alus: int = 0  # every meter ALU in use (stateful, meter, selector)
    stats_alus: int = 0
    gateways: int = 0
    exact_xbar_bytes: int = 0
    ternary_xbar_bytes: int = 0
    hash_bits: int = 0
    vliw: int = 0

    def any(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def add(self, other: StageUse) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(slots=True)
class StageReport:
    stage: int
    used: StageUse
    available: StageUse
    tables: tuple[str, ...] = ()  # names of the logical tables placed in this stage


@dataclass(frozen=True, slots=True)
class PhvUse:
    """PHV containers of one width (metrics.json), with how many exist (resources.json)."""

    width: int
    occupied: int
    available: int | None
    bits_occupied: int


@dataclass(slots=True)
class ResourceReport:
    program: str
    compiler_version: str
    schema_version: str
    n_stages: int  # stages the target has
    stages: list[StageReport] = field(default_factory=list)  # the stages the report lists
    phv: list[PhvUse] = field(default_factory=list)
    source: str = ""

    @property
    def stages_used(self) -> int:
        """Stages holding anything: the pipeline length the program needs."""
        used = [s.stage for s in self.stages if s.used.any()]
        return max(used) + 1 if used else 0

    def totals(self) -> StageUse:
        total = StageUse()
        for stage in self.stages:
            total.add(stage.used)
        return total

    def summary(self) -> dict[str, Any]:
        """Plain data for check.json."""
        return {
            "source": self.source,
            "program": self.program,
            "compiler_version": self.compiler_version,
            "stages_available": self.n_stages,
            "stages_used": self.stages_used,
            "totals": asdict(self.totals()),
            "per_stage": [
                {"stage": s.stage, "tables": list(s.tables), **asdict(s.used)}
                for s in self.stages
                if s.used.any()
            ],
            "capacity_per_stage": asdict(self.stages[0].available) if self.stages else {},
            "phv": [asdict(p) for p in self.phv],
        }


def _get(node: Any, key: str, where: str) -> Any:
    if not isinstance(node, Mapping) or key not in node:
        raise ResourceReportError(f"{where}: no '{key}'")
    return node[key]


def _list(node: Any, key: str, where: str) -> list[Any]:
    value = _get(node, key, where)
    if not isinstance(value, list):
        raise ResourceReportError(f"{where}.{key}: not a list")
    return value


def _int(node: Any, key: str, where: str) -> int:
    value = _get(node, key, where)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ResourceReportError(f"{where}.{key}: not an integer")
    return value


def _units(
    stage: Mapping[str, Any], resource: str, array: str, dims: Sequence[str], where: str
) -> tuple[list[Any], int]:
    """(units in use, units available) of a {<dims>..., <array>: [...]} resource."""
    node = _get(stage, resource, where)
    available = 1
    for dim in dims:
        available *= _int(node, dim, f"{where}.{resource}")
    return _list(node, array, f"{where}.{resource}"), available


def _stage(stage: Mapping[str, Any], where: str) -> StageReport:
    used, available = StageUse(), StageUse()

    srams, available.srams = _units(stage, "rams", "srams", ("nRows", "nColumns"), where)
    used.srams = len(srams)
    maprams, available.map_rams = _units(stage, "map_rams", "maprams", ("nRows", "nUnits"), where)
    used.map_rams = len(maprams)
    tcams, available.tcams = _units(stage, "tcams", "tcams", ("nRows", "nColumns"), where)
    used.tcams = len(tcams)
    gateways, available.gateways = _units(stage, "gateways", "gateways", ("nRows", "nUnits"), where)
    used.gateways = len(gateways)

    meters, available.meter_alus = _units(stage, "meter_alus", "meters", ("nAlus",), where)
    used.meter_alus = len(meters)
    used.stateful_alus = sum(
        1
        for alu in meters
        if any(u.get("used_for") == "stateful_ram" for u in alu.get("usages", []))
    )
    available.stateful_alus = available.meter_alus
    stats, available.stats_alus = _units(stage, "statistic_alus", "stats", ("nAlus",), where)
    used.stats_alus = len(stats)

    xbar = _get(stage, "xbar_bytes", where)
    available.exact_xbar_bytes = _int(xbar, "exact_size", f"{where}.xbar_bytes")
    available.ternary_xbar_bytes = _int(xbar, "ternary_size", f"{where}.xbar_bytes")
    for byte in _list(xbar, "bytes", f"{where}.xbar_bytes"):
        kind = _get(byte, "byte_type", f"{where}.xbar_bytes.bytes")
        if kind == "exact":
            used.exact_xbar_bytes += 1
        elif kind == "ternary":
            used.ternary_xbar_bytes += 1
        else:
            raise ResourceReportError(f"{where}.xbar_bytes: unknown byte_type {kind!r}")

    bits, available.hash_bits = _units(stage, "hash_bits", "bits", ("nBits", "nFunctions"), where)
    used.hash_bits = len(bits)
    instructions, available.vliw = _units(stage, "vliw", "instructions", ("size",), where)
    used.vliw = len(instructions)

    ids, available.logical_tables = _units(stage, "logical_tables", "ids", ("size",), where)
    used.logical_tables = len(ids)
    tables = tuple(str(_get(i, "table_name", f"{where}.logical_tables.ids")) for i in ids)

    return StageReport(_int(stage, "stage_number", where), used, available, tables)


def parse_resources(doc: Mapping[str, Any], source: str = "") -> ResourceReport:
    """A resources.json document (schema 1.1.0 or later, as create_mau_resources.py needs)."""
    where = source or "resources.json"
    resources = _get(doc, "resources", where)
    mau = _get(resources, "mau", f"{where}.resources")
    report = ResourceReport(
        program=str(doc.get("program_name", "")),
        compiler_version=str(doc.get("compiler_version", "")),
        schema_version=str(doc.get("schema_version", "")),
        n_stages=_int(mau, "nStages", f"{where}.resources.mau"),
        source=source,
    )
    stages = _list(mau, "mau_stages", f"{where}.resources.mau")
    report.stages = sorted(
        (_stage(s, f"{where}.mau_stages[{n}]") for n, s in enumerate(stages)),
        key=lambda s: s.stage,
    )
    # stages past the device's last are a placement the assembler refuses ("tofino supports
    # up to 12 stages, using 16"): reported as they are, stages_used then says it
    for s in report.stages:
        if s.stage < 0:
            raise ResourceReportError(f"{where}: stage {s.stage} is negative")
    return report


def phv_available(doc: Mapping[str, Any]) -> dict[int, int]:
    """Normal PHV containers per width, from resources.json's phv_containers."""
    containers = doc.get("resources", {}).get("phv_containers", {})
    out: dict[int, int] = {}
    for kind in containers.get("normal", []):
        width, units = kind.get("width"), kind.get("units")
        if isinstance(width, int) and isinstance(units, int):
            out[width] = out.get(width, 0) + units
    return out


def parse_phv(metrics: Mapping[str, Any], available: Mapping[int, int]) -> list[PhvUse]:
    """Normal PHV containers occupied per width, from metrics.json."""
    phv = _get(metrics, "phv", "metrics.json")
    out = []
    for kind in _list(phv, "normal", "metrics.json.phv"):
        width = _int(kind, "bit_width", "metrics.json.phv.normal")
        out.append(
            PhvUse(
                width=width,
                occupied=_int(kind, "containers_occupied", "metrics.json.phv.normal"),
                available=available.get(width),
                bits_occupied=_int(kind, "bits_occupied", "metrics.json.phv.normal"),
            )
        )
    return sorted(out, key=lambda p: p.width)


def find_report(target_dir: Path, name: str) -> Path | None:
    """The compiler's <name> under target_dir (``<pipe>/logs/<name>``, else anywhere)."""
    candidates = sorted(target_dir.rglob(name))
    in_logs = [p for p in candidates if p.parent.name == "logs"]
    found = in_logs or candidates
    return found[0] if found else None


def read_report(target_dir: Path) -> ResourceReport | None:
    """The report of a compile into target_dir, or None when it wrote no resources.json."""
    path = find_report(target_dir, "resources.json")
    if path is None:
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ResourceReportError(f"{path}: {exc}") from exc
    report = parse_resources(doc, source=str(path))
    metrics_path = find_report(target_dir, "metrics.json")
    if metrics_path is not None:
        try:
            metrics = json.loads(metrics_path.read_text())
        except (OSError, ValueError) as exc:
            raise ResourceReportError(f"{metrics_path}: {exc}") from exc
        report.phv = parse_phv(metrics, phv_available(doc))
    return report


def format_report(report: ResourceReport) -> list[str]:
    """Lines: the stage count, one row per stage in use, the totals, and PHV."""
    total = report.totals()
    lines = [
        f"stages: {report.stages_used} of {report.n_stages}",
    ]
    headings = ["stage"] + [heading for _, heading in COLUMNS]
    rows: list[list[str]] = []
    for s in report.stages:
        if s.used.any():
            rows.append([str(s.stage)] + [str(getattr(s.used, key)) for key, _ in COLUMNS])
    rows.append(["total"] + [str(getattr(total, key)) for key, _ in COLUMNS])
    if report.stages:
        cap = report.stages[0].available
        rows.append(["per stage"] + [str(getattr(cap, key)) for key, _ in COLUMNS])
    widths = [max(len(r[i]) for r in [headings, *rows]) for i in range(len(headings))]
    for row in [headings, *rows]:
        lines.append("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    for p in report.phv:
        of = f" of {p.available}" if p.available is not None else ""
        lines.append(
            f"PHV {p.width}-bit containers: {p.occupied}{of} occupied ({p.bits_occupied} bits)"
        )
    return lines
