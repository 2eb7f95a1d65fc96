"""Mininet nodes and links that record themselves, and the BMv2 switch node.

Everything a run creates is written to the run registry before (interfaces) or right after
(processes) it exists, so ``make stop`` removes exactly that, even after a SIGKILL.
"""

from __future__ import annotations

from typing import Any

from mininet.link import Link
from mininet.node import Host, Switch

from mininet_topos.network.bmv2 import Bmv2Options, Bmv2Process
from mininet_topos.tooling.registry import RunRegistry


class Recorded:
    """Mixin: record a node's shell process in the run registry given to the node.

    Mininet builds nodes from a class or any callable, so a network hands its registry (and a
    switch its options) to every node it builds with ``functools.partial``.
    """

    registry: RunRegistry | None

    def startShell(self, *args: Any, **kwargs: Any) -> None:
        super().startShell(*args, **kwargs)  # type: ignore[misc]
        if self.registry is not None:
            self.registry.record_process(self.pid, f"mininet {self.name}")  # type: ignore[attr-defined]


class RecordedHost(Recorded, Host):
    def __init__(self, name: str, registry: RunRegistry | None = None, **params: Any) -> None:
        self.registry = registry  # before Host.__init__: it starts the shell
        super().__init__(name, **params)


class RecordedLink(Link):
    def __init__(
        self, node1: Any, node2: Any, registry: RunRegistry | None = None, **params: Any
    ) -> None:
        self.registry = registry  # before Link.__init__: it makes the interfaces
        super().__init__(node1, node2, **params)

    def makeIntfPair(self, intfname1: str, intfname2: str, *args: Any, **kwargs: Any) -> Any:
        if self.registry is not None:
            for name in (intfname1, intfname2):
                self.registry.record_link(name)
        return super().makeIntfPair(intfname1, intfname2, *args, **kwargs)


class Bmv2Switch(Recorded, Switch):
    """A BMv2 ``simple_switch_grpc`` as a Mininet switch.

    The port numbers are the topology's (``ncs3-eth4`` is port 4); the pipeline and every
    entry come later over P4Runtime. ``index`` gives the device id and, with ``options``, the
    distinct gRPC and Thrift ports (``grpc_base + index``, ``thrift_base + index``).
    """

    def __init__(
        self,
        name: str,
        index: int = 0,
        options: Bmv2Options | None = None,
        registry: RunRegistry | None = None,
        **params: Any,
    ) -> None:
        self.registry = registry  # before Switch.__init__: it starts the shell
        self.options = options or Bmv2Options()
        super().__init__(name, dpid=f"{index + 1:x}", **params)
        self.index = index
        self.process: Bmv2Process | None = None

    @property
    def grpc_address(self) -> str:
        return self.options.grpc_address(self.index)

    @property
    def thrift_port(self) -> int:
        return self.options.thrift_port(self.index)

    def start(self, controllers: list[Any]) -> None:
        ports = {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}
        config = self.options.config(self.name, self.index, ports)
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
