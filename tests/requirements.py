"""What each test tier needs from the machine, as one-line skip reasons."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = ROOT / "build"


def switch_unavailable() -> str | None:
    """Why a BMv2 switch in a namespace cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root for network namespaces and veth pairs"
    if shutil.which("simple_switch_grpc") is None:
        return "BMv2 simple_switch_grpc is not installed (make doctor)"
    if not (BUILD_DIR / "netcoll.json").exists():
        return "build/netcoll.json is missing: p4c-bm2-ss is not installed (make build)"
    return None


def network_unavailable() -> str | None:
    """Why a Mininet network of BMv2 switches cannot run here, or None."""
    reason = switch_unavailable()
    if reason is not None:
        return reason
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not importable (make deps)"
    return None
