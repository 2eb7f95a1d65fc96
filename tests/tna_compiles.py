"""What the last ``make build-tna`` left in build/tna: its record (check.json) and whether it
compiled the current P4 sources, for the tests that read the Tofino compiler's output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
