"""The back half of a Tofino compile: the assembler run by hand where p4c's driver stops
before it, and the compiler's resource report read back (``controller.tofino.build`` drives
both)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from controller.tofino import resources

# p4c 1.2.5.16's driver (barefoot.py, runAssembler) stops with this before the assembler;
# the assembler is then run by hand on the compiler's .bfa, as the driver would
DRIVER_ASSEMBLER_BUG = "'PosixPath' object has no attribute 'find'"
ASSEMBLER = "bfas"

Which = Callable[[str], str | None]


def find_assembler(compiler: Sequence[str], which: Which = shutil.which) -> str | None:
    """bfas beside the compiler's driver, else on PATH."""
    beside = Path(compiler[0]).resolve().parent / ASSEMBLER
    if beside.is_file():
        return str(beside)
    return which(ASSEMBLER)


def run_assembler(
    compiler: Sequence[str], target_dir: Path, timeout_s: float
) -> tuple[bool | None, list[str]]:
    """bfas on each pipe's .bfa, into the pipe's directory: whether every pipe assembled
    (None: no assembler or nothing to assemble), and the lines that say so."""
    assembler = find_assembler(compiler)
    sources = sorted(target_dir.glob("*/*.bfa"))
    note = "the driver stopped before the assembler (p4c 1.2.5.16 barefoot.py runAssembler)"
    if assembler is None or not sources:
        return None, [f"{note}; no {ASSEMBLER} or no .bfa to run it on"]
    ok = True
    lines: list[str] = []
    for source in sources:
        command = [assembler, "-o", str(source.parent), "-g", str(source)]
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, check=False, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            lines.append(f"{' '.join(command)}: ran past {timeout_s:.0f} s")
            ok = False
            continue
        errors = [line for line in (result.stdout + result.stderr).splitlines() if "error" in line]
        verdict = "passed" if result.returncode == 0 else "failed"
        lines += [f"{note}; ran {' '.join(command)}: {verdict}", *errors]
        ok = ok and result.returncode == 0
    return ok, lines


def resource_summary(target_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The compile's resource report as plain data and as printable lines.

    A compile that succeeded without a readable report is not failed for it: the lines say
    what is missing, the data records it."""
    try:
        report = resources.read_report(target_dir)
    except resources.ResourceReportError as exc:
        return {"report_error": str(exc)}, [f"resource report unreadable: {exc}"]
    if report is None:
        return (
            {"report_error": "no resources.json"},
            [f"no resources.json under {target_dir} (the compiler writes it with -g)"],
        )
    summary = report.summary()
    log = resources.find_report(target_dir, "mau.resources.log")
    if log is not None:
        summary["mau_resources_log"] = str(log)
    lines = resources.format_report(report)
    lines.append(f"report: {report.source}" + (f", {log}" if log is not None else ""))
    return summary, lines
