"""Where a result came from: when, and which commit (with uncommitted changes flagged)."""

from __future__ import annotations

import subprocess
import time


def now() -> str:
    """UTC, ISO 8601."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def commit() -> str:
    """The short commit of the working tree, ``+changes`` when tracked files differ."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (head or "unknown") + ("+changes" if dirty else "")
