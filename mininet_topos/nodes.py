"""Mininet nodes and links that record themselves, and the BMv2 switch node.

Everything a run creates is written to the run registry before (interfaces) or right after
(processes) it exists, so ``make stop`` removes exactly that, even after a SIGKILL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from mininet.link import Link
from mininet.node import Host, Switch

from mininet_topos.bmv2 import Bmv2Config, Bmv2Process
from mininet_topos.runstate import RunRegistry


class Recorded:
    """Mixin: record a node's shell process in the run registry."""

    registry: ClassVar[RunRegistry | None] = None

    def startShell(self, *args: Any, **kwargs: Any) -> None:
        super().startShell(*args, **kwargs)  # type: ignore[misc]
        if self.registry is not None:
            self.registry.record_process(self.pid, f"mininet {self.name}")  # type: ignore[attr-defined]


class RecordedHost(Recorded, Host):
    pass


class RecordedLink(Link):
    registry: ClassVar[RunRegistry | None] = None

    @classmethod
    def makeIntfPair(cls, intfname1: str, intfname2: str, *args: Any, **kwargs: Any) -> Any:
        if cls.registry is not None:
            for name in (intfname1, intfname2):
                cls.registry.record_link(name)
        return super().makeIntfPair(intfname1, intfname2, *args, **kwargs)


class Bmv2Switch(Recorded, Switch):
    """A BMv2 ``simple_switch_grpc`` as a Mininet switch.

    The port numbers are the topology's (``ncs3-eth4`` is port 4); the pipeline and every
    entry come later over P4Runtime. ``index`` gives the device id and the distinct gRPC and
    Thrift ports (``grpc_base + index``, ``thrift_base + index``).
    """

    run_dir: ClassVar[Path] = Path("/tmp/netcoll-run")
    grpc_base: ClassVar[int] = 29100
    thrift_base: ClassVar[int] = 19100
    log_level: ClassVar[str | None] = None
    pcap_dir: ClassVar[Path | None] = None

    def __init__(self, name: str, index: int = 0, **params: Any) -> None:
        super().__init__(name, dpid=f"{index + 1:x}", **params)
        self.index = index
        self.process: Bmv2Process | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_base + self.index}"

    @property
    def thrift_port(self) -> int:
        return self.thrift_base + self.index

    def start(self, controllers: list[Any]) -> None:
        ports = {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}
        config = Bmv2Config(
            name=self.name,
            device_id=self.index + 1,
            ports=ports,
            grpc_address=self.grpc_address,
            run_dir=self.run_dir,
            thrift_port=self.thrift_port,
            log_level=self.log_level,
            pcap_dir=self.pcap_dir,
        )
        self.process = Bmv2Process(config, self.registry)
        self.process.start()

    def restart(self, timeout: float) -> float:
        """A fresh BMv2 process on the same interfaces: every table, group, register and
        counter lost, as after a crash or a reboot."""
        assert self.process is not None, "start() first"
        self.process.stop()
        self.process.start()
        return self.process.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> float:
        assert self.process is not None, "start() first"
        return self.process.wait_ready(timeout)

    def stop(self, deleteIntfs: bool = True) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None
        super().stop(deleteIntfs)
