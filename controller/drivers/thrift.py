"""BMv2's Thrift runtime: what P4Runtime on BMv2 does not offer.

BMv2's P4Runtime server implements tables, counters and multicast groups but neither register
reads nor the egress queue depth. This driver uses BMv2's own Python bindings (``bm_runtime``,
``sswitch_runtime``, installed with BMv2) to read registers back and to deepen the egress
queues, whose default of 64 packets drops 72-way bursts.
"""

from __future__ import annotations

import glob
import importlib
import os
import shutil
import sys
from typing import Any


class ThriftUnavailable(RuntimeError):
    pass


def _bindings() -> tuple[Any, Any, Any, Any, Any, Any]:
    """Import BMv2's generated Thrift modules, looking beside simple_switch_CLI if needed
    (BMv2 installs them for the Python it was built with, e.g. /usr/local/lib/python3.X)."""
    try:
        return _import()
    except ImportError:
        pass
    cli = shutil.which("simple_switch_CLI")
    prefixes = {os.path.dirname(os.path.dirname(cli))} if cli else set()
    prefixes |= {"/usr/local", "/usr"}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for prefix in sorted(prefixes):
        for pattern in (
            f"lib/{version}/site-packages",
            f"lib/{version}/dist-packages",
            "lib/python3*/site-packages",
            "lib/python3/dist-packages",
        ):
            for path in glob.glob(os.path.join(prefix, pattern)):
                if os.path.isdir(os.path.join(path, "bm_runtime")) and path not in sys.path:
                    sys.path.append(path)
    try:
        return _import()
    except ImportError as exc:
        raise ThriftUnavailable(
            f"BMv2's Thrift bindings are not importable ({exc}); they come with BMv2 "
            "(bm_runtime, sswitch_runtime) and need the 'thrift' Python package"
        ) from exc


def _import() -> tuple[Any, Any, Any, Any, Any, Any]:
    standard = importlib.import_module("bm_runtime.standard.Standard")
    simple_switch = importlib.import_module("sswitch_runtime.SimpleSwitch")
    tsocket = importlib.import_module("thrift.transport.TSocket")
    ttransport = importlib.import_module("thrift.transport.TTransport")
    tbinary = importlib.import_module("thrift.protocol.TBinaryProtocol")
    tmulti = importlib.import_module("thrift.protocol.TMultiplexedProtocol")
    return standard, simple_switch, tsocket, ttransport, tbinary, tmulti


class ThriftClient:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        standard, simple_switch, tsocket, ttransport, tbinary, tmulti = _bindings()
        sock = tsocket.TSocket(host, port)
        sock.setTimeout(int(timeout * 1000))
        self.transport = ttransport.TBufferedTransport(sock)
        protocol = tbinary.TBinaryProtocol(self.transport)
        self.standard = standard.Client(tmulti.TMultiplexedProtocol(protocol, "standard"))
        self.switch = simple_switch.Client(tmulti.TMultiplexedProtocol(protocol, "simple_switch"))
        try:
            self.transport.open()
        except Exception as exc:
            raise ThriftUnavailable(f"no Thrift runtime on {host}:{port}: {exc}") from exc

    def set_queue_depth(self, packets: int) -> None:
        self.switch.set_all_egress_queue_depths(packets)

    def register_read(self, name: str, index: int) -> int:
        return int(self.standard.bm_register_read(0, name, index))

    def register_read_all(self, name: str) -> list[int]:
        return [int(v) for v in self.standard.bm_register_read_all(0, name)]

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> ThriftClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
