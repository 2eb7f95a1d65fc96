"""Import ns-3 (the ``ns3`` wheel from PyPI) and compile netcoll's C++ part through cppyy.

Importing ns-3 takes about 10 s (cppyy loads every module's headers), so it happens once, on
first use, never at import time of this package.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("netcoll_sim.cc")
_loaded: tuple[Any, Any] | None = None


class Ns3Unavailable(RuntimeError):
    """ns-3's Python bindings cannot be imported here; the message says why."""


def unavailable_reason() -> str:
    """Why ns-3 cannot be used here, or '' when it can (cheap: imports nothing)."""
    if importlib.util.find_spec("ns3") is None:
        return "ns-3 is not installed (pip install ns3; make deps installs it into the venv)"
    return ""


def load() -> tuple[Any, Any]:
    """(cppyy.gbl.ns3, cppyy.gbl.netcoll_sim), compiling the C++ part on first call."""
    global _loaded
    if _loaded is not None:
        return _loaded
    reason = unavailable_reason()
    if reason:
        raise Ns3Unavailable(reason)
    # the wheel's stub `ns` module calls exit() when the real bindings fail to import, so go
    # through ns3.ns directly and turn failures into an exception
    os.environ.setdefault("NS_LOG", "")
    try:
        import cppyy
        import ns3.ns  # noqa: F401  (loads the ns-3 libraries and headers into cppyy)
    except Exception as exc:  # the wheel raises anything from ImportError to cppyy errors
        raise Ns3Unavailable(f"ns-3 is installed but does not import: {exc}") from exc
    if not hasattr(cppyy.gbl, "netcoll_sim"):
        cppyy.cppdef(SOURCE.read_text(encoding="utf-8"))
    _loaded = (cppyy.gbl.ns3, cppyy.gbl.netcoll_sim)
    return _loaded
