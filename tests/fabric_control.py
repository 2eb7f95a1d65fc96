"""The real control plane driving the in-process fabric: tests of it without BMv2.

:class:`FabricSession` stands where a P4Runtime session stands on BMv2: ``sync`` installs the
desired tables and groups into a reference-model switch, mini packets reach its registers
through the fabric's management port exactly as on Mininet. A session can be told to refuse
writes, and a switch can be restarted (registers lost, the session comes back).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller.desired_state import desired_state
from controller.drivers.p4runtime import SwitchEndpoint, SyncReport
from controller.runtime import ControlPlane, OnReady
from controller.switch_model import SwitchModel
from controller.switch_state import Sizes, SwitchState
from controller.topology import Topology
from host_agents.comm import Comm, CommOptions
from host_agents.directory import Directory
from host_agents.engine import Engine, EngineConfig
from host_agents.plans import PlanBook
from tests.fabric import Fabric


def _tables(state: SwitchState) -> tuple[object, ...]:
    return (state.ports, state.routes, state.trees, state.groups, state.replication)


class FabricSession:
    def __init__(
        self,
        fabric: Fabric,
        index: int,
        endpoint: SwitchEndpoint,
        desired: Callable[[], SwitchState],
        on_ready: OnReady,
    ) -> None:
        self.fabric = fabric
        self.index = index
        self.endpoint = endpoint
        self.desired = desired
        self.on_ready = on_ready
        self.connected = False
        self.connections = 0
        self.error: BaseException | None = None
        self.refuse: str | None = None  # every write fails with this while set
        self.writes = 0  # sync calls, refused ones included
        self._ready = asyncio.Event()
        self._programmed: list[asyncio.Future[None]] = []

    def start(self) -> None:
        asyncio.get_running_loop().create_task(self._come_up())

    async def _come_up(self) -> None:
        self._ready.clear()
        try:
            await self.sync()
            self.connections += 1
            self.connected = True
            await self.on_ready(self)  # type: ignore[arg-type]
            self.error = None
        except Exception as exc:
            self.error = exc
        self._ready.set()
        waiters, self._programmed = self._programmed, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def stop(self) -> None:
        self.connected = False

    async def wait_ready(self, timeout: float) -> None:
        await asyncio.wait_for(self._ready.wait(), timeout)
        if self.error is not None:
            raise RuntimeError(f"{self.endpoint.name}: {self.error}") from self.error

    def next_programmed(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._programmed.append(fut)
        return fut

    async def sync(self) -> SyncReport:
        await asyncio.sleep(0)
        self.writes += 1
        if self.refuse is not None:
            raise RuntimeError(self.refuse)
        model = self.fabric.models[self.index]
        wanted = self.desired()
        changed = _tables(model.state) != _tables(wanted)
        # tables only: the registers are the mini packets' business
        model.state = replace(wanted, tree_slots={}, barrier_slots={})
        return SyncReport(modified=int(changed))

    async def read_counter(self, counter: str) -> dict[int, tuple[int, int]]:
        return {}

    async def read_tables(self) -> dict[str, int]:
        state = self.fabric.models[self.index].state
        return {"node_route": len(state.routes), "bcast_tree": len(state.trees)}

    def restart(self) -> None:
        """The switch process dies and comes back empty: registers lost, tables reinstalled."""
        self.connected = False
        old = self.fabric.models[self.index]
        self.fabric.models[self.index] = SwitchModel(replace(old.state), old.sizes)
        self.start()


class ControlledFabric:
    """A fabric whose switches start empty and are programmed by a real ControlPlane."""

    def __init__(
        self,
        topo: Topology,
        loop: asyncio.AbstractEventLoop,
        *,
        config: EngineConfig | None = None,
        options: CommOptions | None = None,
    ) -> None:
        self.topo = topo
        self.loop = loop
        self.config = config
        self.options = options
        self.fabric = Fabric(topo, desired_state(topo, []), loop=loop)
        self.sessions: dict[int, FabricSession] = {}
        endpoints = {
            s.index: SwitchEndpoint(f"s{s.index}", "fabric", s.index) for s in topo.switches
        }
        self.control = ControlPlane(
            topo,
            Path("/nonexistent"),
            endpoints,
            self.fabric.mgmt_port(),
            sizes=Sizes(),
            sessions=self._session,
        )
        self.engines: dict[int, Engine] = {}

    def _session(
        self, endpoint: SwitchEndpoint, desired: Callable[[], SwitchState], on_ready: OnReady
    ) -> FabricSession:
        session = FabricSession(self.fabric, endpoint.device_id, endpoint, desired, on_ready)
        self.sessions[endpoint.device_id] = session
        return session

    def engine(self, node: int) -> Engine:
        if node not in self.engines:
            directory = Directory.from_topology(self.topo)
            self.engines[node] = Engine(
                node,
                self.fabric.port(node),
                directory,
                self.config,
                loop=self.loop,
                plan=PlanBook(directory),
                seed=node,
            )
        return self.engines[node]

    def comms(self, comm_id: int, members: tuple[int, ...]) -> list[Comm]:
        """One Comm per member (agents joining a communicator the control plane created)."""
        return [
            Comm(self.engine(n), comm_id, members, innet=True, options=self.options)
            for n in members
        ]


class HeldRecompute:
    """``desired_state``, held the first time it computes a communicator of ``members``: it
    sets ``entered``, then waits for ``release`` (at most ``hold`` seconds, so a test of code
    that blocks on it still ends) and raises ``fail`` if given. Patched over
    ``controller.runtime.desired_state``, it makes one change's computation as slow as a test
    needs, deterministically."""

    def __init__(
        self, members: tuple[int, ...] | list[int], fail: Exception | None = None, hold: float = 5
    ) -> None:
        self.members = tuple(members)
        self.fail = fail
        self.hold = hold
        self.entered = threading.Event()
        self.release = threading.Event()
        self.released_at = 0.0
        self.calls = 0

    def __call__(self, topo: Topology, comms: Any = (), **kwargs: Any) -> dict[int, SwitchState]:
        comms = list(comms)
        self.calls += 1
        if not self.entered.is_set() and any(c.members == self.members for c in comms):
            self.entered.set()
            self.release.wait(self.hold)
            if self.fail is not None:
                raise self.fail
        return desired_state(topo, comms, **kwargs)

    def let_go(self) -> None:
        self.released_at = time.monotonic()
        self.release.set()
