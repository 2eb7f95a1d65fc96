"""An in-process network: the topology's switches as reference models, hosts as ports.

Unit tests run every algorithm here without BMv2 or root: each switch is a
:class:`controller.switch_model.SwitchModel` executing the same desired state the controller
pushes to BMv2, and every link can lose, duplicate, delay and reorder frames from a seeded
random generator. All of it runs on one asyncio loop, so a seed reproduces a run exactly.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from controller.switch_model import SwitchModel
from controller.switch_state import Sizes, SwitchState
from controller.topology import Topology
from host_agents.comm import Comm, CommOptions
from host_agents.directory import Directory
from host_agents.engine import Engine, EngineConfig
from host_agents.plans import PlanBook
from host_agents.port import FrameHandler, Port

LinkKey = tuple[int, int]  # (switch, port): the link leaving that switch port


@dataclass(frozen=True, slots=True)
class Faults:
    """Per-transmission fault probabilities, applied on every link (or only ``only_link``)."""

    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0  # probability that a frame is held back behind later ones
    delay: float = 0.0  # seconds per link traversal
    reorder_delay: float = 0.002
    only_link: LinkKey | None = None
    # a chosen loss: frames this returns True for are dropped (tests of one exact failure)
    drop_if: Callable[[LinkKey, bytes], bool] | None = None

    def applies_to(self, link: LinkKey) -> bool:
        return self.only_link is None or self.only_link == link


class FabricPort(Port):
    def __init__(self, fabric: Fabric, node: int) -> None:
        self.fabric = fabric
        self.node = node
        self.on_frame: FrameHandler | None = None

    def start(self, loop: asyncio.AbstractEventLoop, on_frame: FrameHandler) -> None:
        self.on_frame = on_frame

    def send(self, frame: bytes) -> None:
        self.fabric.host_transmit(self.node, frame)

    def close(self) -> None:
        self.on_frame = None


class MgmtPort:
    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric

    def start(self, loop: asyncio.AbstractEventLoop, on_frame: FrameHandler) -> None:
        self.fabric.mgmt_handler = on_frame

    def send(self, frame: bytes) -> None:
        mgmt = self.fabric.topo.management
        self.fabric.inject(mgmt.switch, mgmt.port, frame)


class Fabric:
    def __init__(
        self,
        topo: Topology,
        states: dict[int, SwitchState],
        *,
        loop: asyncio.AbstractEventLoop,
        sizes: Sizes | None = None,
        faults: Faults | None = None,
        seed: int = 0,
    ) -> None:
        self.topo = topo
        self.loop = loop
        self.faults = faults or Faults()
        self.rng = random.Random(seed)
        self.models = {s: SwitchModel(state, sizes) for s, state in states.items()}
        for s, state in states.items():
            self._write_registers(s, state)
        self.ports: dict[int, FabricPort] = {}
        self.link_frames: Counter[LinkKey] = Counter()
        self.link_bytes: Counter[LinkKey] = Counter()
        self.lost = 0
        self.duplicated = 0
        self.mgmt_handler: Callable[[bytes], None] | None = None

    def _write_registers(self, switch: int, state: SwitchState, generation: int = 1) -> None:
        model = self.models[switch]
        for slot, tree in state.tree_slots.items():
            model.write_tree_slot(slot, tree, generation)
        for comm, barrier in state.barrier_slots.items():
            model.write_barrier_slot(comm, barrier, generation)

    def update(self, states: dict[int, SwitchState], generation: int) -> None:
        """Install new desired state (tables at once, registers as a newer generation)."""
        for s, state in states.items():
            self.models[s].state = state
            self._write_registers(s, state, generation)

    def mgmt_port(self) -> MgmtPort:
        """The management node's port, for the mini-packet driver."""
        return MgmtPort(self)

    def port(self, node: int) -> FabricPort:
        if node not in self.ports:
            self.ports[node] = FabricPort(self, node)
        return self.ports[node]

    # -- transmission ---------------------------------------------------------------------

    def host_transmit(self, node: int, frame: bytes) -> None:
        host = self.topo.host_by_node(node)
        self._traverse((-1, node), frame, lambda f: self._at_switch(host.switch, host.port, f))

    def inject(self, switch: int, port: int, frame: bytes) -> None:
        """A frame arriving at a switch port from outside (management node, fuzzers)."""
        self.loop.call_soon(self._at_switch, switch, port, frame)

    def _traverse(self, link: LinkKey, frame: bytes, deliver: Callable[[bytes], None]) -> None:
        self.link_frames[link] += 1
        self.link_bytes[link] += len(frame)
        faults = self.faults
        if faults.drop_if is not None and faults.drop_if(link, frame):
            self.lost += 1
            return
        if faults.applies_to(link) and (faults.loss or faults.duplicate or faults.reorder):
            if self.rng.random() < faults.loss:
                self.lost += 1
                return
            copies = 2 if self.rng.random() < faults.duplicate else 1
            self.duplicated += copies - 1
            for _ in range(copies):
                delay = faults.delay
                if self.rng.random() < faults.reorder:
                    delay += self.rng.uniform(0, faults.reorder_delay)
                self._schedule(delay, deliver, frame)
            return
        self._schedule(faults.delay, deliver, frame)

    def _schedule(self, delay: float, deliver: Callable[[bytes], None], frame: bytes) -> None:
        if delay > 0:
            self.loop.call_later(delay, deliver, frame)
        else:
            self.loop.call_soon(deliver, frame)

    def _at_switch(self, switch: int, in_port: int, frame: bytes) -> None:
        outcome = self.models[switch].process(frame, in_port)
        ports = self.topo.ports(switch)
        for out_port, out in outcome.outputs:
            info = ports.get(out_port)
            if info is None:
                continue  # BMv2 drops frames to ports without an interface, so do we
            link = (switch, out_port)
            if info.kind == "host":
                node = self.topo.host_by_name(info.peer).node_id
                self._traverse(link, out, functools.partial(self._at_host, node))
            elif info.kind == "mgmt":
                self._traverse(link, out, self._at_mgmt)
            else:
                peer = self.topo.peer_switch(switch, out_port)
                assert peer is not None and info.peer_port is not None
                self._traverse(link, out, functools.partial(self._at_switch, peer, info.peer_port))

    def _at_host(self, node: int, frame: bytes) -> None:
        port = self.ports.get(node)
        if port is not None and port.on_frame is not None:
            port.on_frame(frame)

    def _at_mgmt(self, frame: bytes) -> None:
        if self.mgmt_handler is not None:
            self.mgmt_handler(frame)

    # -- accounting -----------------------------------------------------------------------

    def switch_link_frames(self) -> int:
        """Frames that crossed switch-to-switch links."""
        total = 0
        for (switch, port), count in self.link_frames.items():
            if switch >= 0 and self.topo.ports(switch)[port].kind not in ("host", "mgmt"):
                total += count
        return total


class Cluster:
    """One communicator's ranks on a fabric, each with its own engine: what unit tests and
    quick experiments drive."""

    def __init__(
        self,
        topo: Topology,
        members: tuple[int, ...],
        *,
        loop: asyncio.AbstractEventLoop,
        comm_id: int = 1,
        faults: Faults | None = None,
        seed: int = 0,
        config: EngineConfig | None = None,
        membership: str = "p4runtime",
        options: CommOptions | None = None,
    ) -> None:
        from controller.desired_state import Communicator, Membership, desired_state

        self.topo = topo
        self.members = members
        comm = Communicator(comm_id, members, membership=Membership(membership))
        self.states = desired_state(topo, [comm])
        self.fabric = Fabric(topo, self.states, loop=loop, faults=faults, seed=seed)
        self.comms: list[Comm] = []
        for node in members:
            directory = Directory.from_topology(topo)
            engine = Engine(
                node,
                self.fabric.port(node),
                directory,
                config,
                loop=loop,
                plan=PlanBook(directory),
                seed=seed * 7919 + node,
            )
            self.comms.append(Comm(engine, comm_id, members, innet=True, options=options))

    def stats(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for comm in self.comms:
            for key, value in comm.engine.stats.as_dict().items():
                if isinstance(value, int):
                    total[key] += value
        return dict(total)
