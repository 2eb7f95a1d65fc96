"""Where a result came from: when, which commit (with uncommitted changes flagged), and which
version of the protocol code."""

from __future__ import annotations

import hashlib
import subprocess
import time

# What decides how a fault-matrix operation behaves: the P4 program BMv2 runs (the shared
# blocks and the v1model shell, not the Tofino shim), the control plane, the host agents and
# the link models (emulator, faults). Parts measured under different contents of these are
# different experiments, however little else the commit changed.
PROTOCOL_PATHS = (
    "p4src/common",
    "p4src/v1model",
    "controller",
    "host_agents",
    "mininet_topos/links",
)
# Inside those, what no BMv2 run executes: the Tofino build and BfRt driver.
NOT_PROTOCOL = ("controller/tofino",)
# The two above in words, for reports that name what a protocol digest covers.
PROTOCOL_COVERS = (
    "the P4 program BMv2 runs, the control plane (not its Tofino driver), the host agents "
    "and the link emulator"
)


def now() -> str:
    """UTC, ISO 8601."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _git(*args: str) -> str | None:
    """git's output, or None when git is missing, fails or hangs."""
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _changed(*paths: str) -> bool:
    """Whether tracked files (under ``paths``, or anywhere) differ from HEAD."""
    return bool(_git("status", "--porcelain", "--untracked-files=no", "--", *paths))


def commit() -> str:
    """The short commit of the working tree, ``+changes`` when tracked files differ."""
    head = _git("rev-parse", "--short", "HEAD")
    if head is None:
        return "unknown"
    return (head or "unknown") + ("+changes" if _changed() else "")


def protocol(rev: str = "HEAD") -> str:
    """A short digest of :data:`PROTOCOL_PATHS` at ``rev`` (from git's object ids, so any
    commit git knows can be named), ``+changes`` when the working tree differs there from
    HEAD; ``unknown`` without git or that commit."""
    # every blob's id and path under the protocol's paths, the excluded subtrees left out
    listing = _git("ls-tree", "-r", "--full-tree", rev, "--", *PROTOCOL_PATHS)
    if not listing:
        return "unknown"
    kept = [line for line in listing.splitlines() if not _excluded(line.split("\t", 1)[-1])]
    digest = hashlib.sha1("\n".join(kept).encode()).hexdigest()[:10]
    excludes = [f":(exclude){path}" for path in NOT_PROTOCOL]
    changed = rev == "HEAD" and _changed(*PROTOCOL_PATHS, *excludes)
    return digest + ("+changes" if changed else "")


def _excluded(path: str) -> bool:
    return any(path == top or path.startswith(top + "/") for top in NOT_PROTOCOL)
