"""What the last ``make build-tna`` left in build/tna: its record (check.json) and whether it
compiled the current P4 sources, for the tests that read the Tofino compiler's output."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from controller.tofino import build

REPO = Path(__file__).resolve().parents[1]
COMPILED_TNA = REPO / "build" / "tna"  # make build-tna's output
RECORD = COMPILED_TNA / "check.json"


def newest_p4_source() -> float:
    """When the newest P4 source changed: output older than this was compiled from others."""
    return max(p.stat().st_mtime for p in (REPO / "p4src").rglob("*.p4"))


def build_record() -> dict[str, Any] | None:
    """make build-tna's record, or None where there is none (or it is unreadable)."""
    try:
        record = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def compiled_target(record: dict[str, Any], target: str) -> dict[str, Any] | None:
    """The record's entry for ``target`` if that run was a Tofino compiler's, else None."""
    if record.get("check") != "tofino-compiler":
        return None
    for entry in record.get("targets", []):
        if isinstance(entry, dict) and entry.get("target") == target:
            return entry
    return None


def compiled_bfrt(target: build.Target, scratch: Path) -> Path:
    """bfrt.json of the TNA program compiled for target: make build-tna's if it is newer than
    every P4 source and that run compiled the target, else the compiler's schema alone, written
    into scratch once the midend is through (the back end takes minutes, most of an hour for
    Tofino 2: docs/porting-to-tofino.md). Skips, with its reason, where no Tofino compiler is
    installed."""
    try:
        compiler = build.find_tofino_compiler(os.environ.get(build.COMPILER_VARIABLE) or None)
    except build.ConfigError as exc:
        pytest.skip(str(exc))
    if compiler is None:
        pytest.skip(
            f"no Tofino compiler ({' / '.join(build.TOFINO_COMPILERS)} / p4c with "
            f"{build.OPEN_SOURCE_BACKEND}; set {build.COMPILER_VARIABLE})"
        )
    made = COMPILED_TNA / target.name / "bfrt.json"
    record = build_record() or {}
    entry = compiled_target(record, target.name)
    fresh = made.exists() and made.stat().st_mtime >= newest_p4_source()
    if entry is not None and entry.get("ok") and fresh and is_default_profile(record):
        return made
    outcome = build.compile_for(
        compiler, build.DEFAULT_PROGRAM, scratch, target, schema_only=True, timeout_s=300
    )
    if not outcome.ok:
        pytest.fail(f"{' '.join(outcome.command)} failed:\n{outcome.diagnostics}")
    return scratch / target.name / "bfrt.json"


def is_default_profile(record: dict[str, Any]) -> bool:
    """Whether make build-tna compiled each target with its own profile: no --profile full,
    no -D of its own."""
    return record.get("profile", "default") == "default" and not record.get("defines")
