"""What a compiler's output says: its version line, and the warnings about the program (not
about the architecture files a newer p4c may warn about)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path


def tool_version(command: Sequence[str]) -> str:
    try:
        result = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        return f"unknown ({exc})"
    lines = (result.stdout + result.stderr).strip().splitlines()
    # p4c tools print their path first, then "Version 1.2.4.8 (SHA: ...)"
    versions = [line.strip() for line in lines if "version" in line.lower()]
    return versions[0] if versions else (lines[0].strip() if lines else "unknown")


def own_warnings(diagnostics: str, include_dir: Path) -> int:
    """Warnings that are not about the architecture files (a newer p4c may warn about those)."""
    arch_root = include_dir.resolve()
    count = 0
    for line in diagnostics.splitlines():
        if "warning" not in line:
            continue
        location = line.split("(", 1)[0].strip()
        if location and not location.startswith("["):
            path = Path(location).resolve()
            if path == arch_root or arch_root in path.parents:
                continue
        count += 1
    return count
