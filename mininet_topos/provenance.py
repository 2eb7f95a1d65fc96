"""Where a result came from: when, and which commit (with uncommitted changes flagged)."""

from __future__ import annotations

import hashlib
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


# What decides how a fault-matrix operation behaves: the P4 program, the control plane, the
# host agents and the link emulator. Parts measured under different contents of these are
# different experiments, however little else the commit changed.
PROTOCOL_PATHS = (
    "p4src",
    "controller",
    "host_agents",
    "mininet_topos/linkemu.py",
    "mininet_topos/linkfaults.py",
)


def protocol(rev: str = "HEAD") -> str:
    """A short digest of :data:`PROTOCOL_PATHS` at ``rev`` (from git's object ids, so any
    commit git knows can be named), ``+changes`` when the working tree differs there from
    HEAD; ``unknown`` without git or that commit."""
    try:
        ids = subprocess.run(
            ["git", "rev-parse", *(f"{rev}:{path}" for path in PROTOCOL_PATHS)],
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *PROTOCOL_PATHS],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if ids.returncode != 0:
        return "unknown"
    digest = hashlib.sha1(ids.stdout.encode()).hexdigest()[:10]
    return digest + ("+changes" if dirty and rev == "HEAD" else "")
