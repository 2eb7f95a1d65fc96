"""The control plane of a running network: communicators in, switch state out.

:class:`ControlPlane` keeps the set of communicators, computes the desired state of every
switch from it (:mod:`controller.desired_state`), and keeps every switch programmed: tables and
multicast groups over P4Runtime, one connection per switch, concurrently; register slots by
mini packets from the management node. When a switch restarts, its P4Runtime session comes
back, it is programmed again from scratch, and its barrier slots restart from the epochs the
other switches of each barrier tree have released.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller import p4info, trees, wire
from controller.desired_state import Allocators, Communicator, Membership, desired_state
from controller.drivers.minipackets import FramePort, MiniPacketDriver
from controller.drivers.p4runtime import P4RuntimeSwitch, SwitchEndpoint
from controller.switch_state import BarrierSlot, SwitchState
from controller.topology import Topology, TopologyError

LOG = logging.getLogger(__name__)


@dataclass(slots=True)
class InstallReport:
    comm_id: int
    seconds: float
    switches: int
    p4runtime_changes: int
    mini_packets: int


@dataclass(slots=True)
class _Split:
    """One MPI_Comm_split in progress: every member of the parent reports (color, key)."""

    expected: frozenset[int]
    answers: dict[int, tuple[int, int]] = field(default_factory=dict)
    error: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    result: dict[int, tuple[int, tuple[int, ...]]] = field(default_factory=dict)


class ControlPlane:
    def __init__(
        self,
        topo: Topology,
        build_dir: Path,
        endpoints: dict[int, SwitchEndpoint],
        mp_port: FramePort,
        *,
        program: str = "netcoll",
        log_dir: Path | None = None,
        replication: str = "auto",
        membership: Membership = Membership.P4RUNTIME,
    ) -> None:
        self.topo = topo
        self.p4info_path = build_dir / f"{program}.p4info.txtpb"
        self.json_path = build_dir / f"{program}.json"
        self.sizes = p4info.sizes_from_p4info(p4info.load_schema(self.p4info_path, self.json_path))
        self.endpoints = endpoints
        self.mp_port = mp_port
        self.log_dir = log_dir
        self.replication = replication
        self.membership = membership
        self.comms: dict[int, Communicator] = {}
        self.allocators = Allocators()
        self.states: dict[int, SwitchState] = {}
        self.switches: dict[int, P4RuntimeSwitch] = {}
        self.mp: MiniPacketDriver | None = None
        self.restarts = 0
        self._lock = asyncio.Lock()
        self._splits: dict[tuple[int, int], _Split] = {}
        self._split_rounds: dict[tuple[int, int], int] = {}
        self._frees: dict[int, set[int]] = {}
        self._recompute()

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, timeout: float = 60.0) -> float:
        """Connect to every switch, program it, write its register slots; returns seconds."""
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        self.mp = MiniPacketDriver(self.mp_port, loop=loop)
        for index, endpoint in self.endpoints.items():
            switch = P4RuntimeSwitch(
                endpoint,
                self.p4info_path,
                self.json_path,
                desired=lambda i=index: self.states[i],  # type: ignore[misc]
                log_dir=self.log_dir,
                on_ready=self._on_ready,
            )
            self.switches[index] = switch
            switch.start()
        await asyncio.gather(*(s.wait_ready(timeout) for s in self.switches.values()))
        return time.perf_counter() - started

    async def wait_reprogrammed(self, index: int, connections: int, timeout: float) -> None:
        """Wait until switch ``index`` reconnected (more than ``connections`` sessions) and
        its tables, groups and register slots are written again."""
        switch = self.switches[index]
        programmed = switch.next_programmed()  # before the check: no update can slip by
        if switch.connections <= connections:
            try:
                await asyncio.wait_for(programmed, timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"switch {switch.endpoint.name} was not reprogrammed within {timeout:.0f} s"
                ) from None
        if switch.error is not None:
            raise RuntimeError(
                f"switch {switch.endpoint.name}: reprogramming failed: {switch.error}"
            )

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.switches.values()))

    async def _on_ready(self, switch: P4RuntimeSwitch) -> None:
        """A switch (re)connected and holds its tables again: now its register slots."""
        assert self.mp is not None
        index = next(i for i, s in self.switches.items() if s is switch)
        state = self.states[index]
        if switch.connections > 1:
            self.restarts += 1
            LOG.warning(
                "switch %s came back (connection %d): reprogramming it",
                switch.endpoint.name,
                switch.connections,
            )
            self.mp.forget(state.node_id)
            state = await self._resume_barriers(index, state)
        await self.mp.push(state)

    async def _resume_barriers(self, index: int, state: SwitchState) -> SwitchState:
        """A restarted switch lost its released epochs: start each barrier slot from the newest
        epoch any other switch of that barrier tree has released (a switch only releases what
        the root released)."""
        assert self.mp is not None
        resumed: dict[int, BarrierSlot] = {}
        for comm_id, slot in state.barrier_slots.items():
            comm = self.comms.get(comm_id)
            newest = slot.base_epoch
            if comm is not None:
                peers = [s for s in trees.barrier_tree(self.topo, comm.members).nodes if s != index]
                for peer in peers:
                    try:
                        reply = await self.mp.read_barrier(
                            self.topo.switch(peer).node_id, comm_id, retries=3
                        )
                    except Exception as exc:  # a peer down too: use what the others say
                        LOG.warning("reading barrier %d at switch %d: %s", comm_id, peer, exc)
                        continue
                    if wire.serial_lt(newest, reply.epoch):
                        newest = reply.epoch
            resumed[comm_id] = replace(slot, base_epoch=newest)
        state.barrier_slots = resumed
        return state

    # -- desired state -------------------------------------------------------------------

    def _recompute(self) -> None:
        self.states = desired_state(
            self.topo,
            self.comms.values(),
            sizes=self.sizes,
            replication=self.replication,
            allocators=self.allocators,
        )

    async def _apply(self, timeout: float = 30.0) -> tuple[int, int]:
        """Push the current desired state to every switch that is up: (P4Runtime changes,
        mini packets). A switch that is down gets the whole state when it comes back."""
        up = [i for i, s in self.switches.items() if s.connected]
        for switch in self.switches.values():
            if not switch.connected:
                LOG.warning("%s is down: it gets the change on reconnection", switch.endpoint.name)
        results = await asyncio.gather(*(self._apply_one(i, timeout) for i in up))
        return sum(r[0] for r in results), sum(r[1] for r in results)

    async def _apply_one(self, index: int, timeout: float) -> tuple[int, int]:
        assert self.mp is not None
        switch = self.switches[index]
        try:
            report = await asyncio.wait_for(switch.sync(), timeout)
            pushed = await asyncio.wait_for(self.mp.push(self.states[index]), timeout)
        except Exception as exc:  # the switch went down meanwhile: its reconnection repairs it
            LOG.warning(
                "%s: could not apply the change (%s); it will be redone on reconnection",
                switch.endpoint.name,
                exc,
            )
            return 0, 0
        return report.changes, pushed

    def _next_comm_id(self) -> int:
        for comm_id in range(1, self.sizes.comm_slots):
            if comm_id not in self.comms:
                return comm_id
        raise TopologyError(f"all {self.sizes.comm_slots - 1} communicator ids are in use")

    # -- the communicator service's operations ----------------------------------------------

    async def create(
        self,
        members: Iterable[int],
        *,
        comm_id: int | None = None,
        roots: tuple[int, ...] | None = None,
        membership: Membership | None = None,
    ) -> InstallReport:
        """Install a communicator's trees and barrier slots; answer once they are in place."""
        (report,) = await self.create_many(
            [tuple(members)], comm_id=comm_id, roots=roots, membership=membership
        )
        return report

    async def create_many(
        self,
        groups: list[tuple[int, ...]],
        *,
        comm_id: int | None = None,
        roots: tuple[int, ...] | None = None,
        membership: Membership | None = None,
    ) -> list[InstallReport]:
        """Several communicators in one change: one recomputation, one push to each switch
        (a split creates one per color)."""
        async with self._lock:
            started = time.perf_counter()
            added: list[Communicator] = []
            try:
                for members in groups:
                    comm = Communicator(
                        comm_id if comm_id is not None and not added else self._next_comm_id(),
                        members,
                        roots=roots,
                        membership=membership or self.membership,
                    )
                    if comm.comm_id in self.comms:
                        raise TopologyError(f"communicator {comm.comm_id} already exists")
                    self.comms[comm.comm_id] = comm
                    added.append(comm)
                self._recompute()
            except Exception:
                for comm in added:
                    self.comms.pop(comm.comm_id, None)
                self._recompute()
                raise
            changes, mps = await self._apply()
            seconds = time.perf_counter() - started
            LOG.info(
                "communicators %s installed in %.3f s: %d P4Runtime changes, %d mini packets",
                [c.comm_id for c in added],
                seconds,
                changes,
                mps,
            )
            return [
                InstallReport(c.comm_id, seconds, len(self.switches), changes, mps) for c in added
            ]

    async def ensure_trees(self, comm_id: int, root: int) -> InstallReport:
        """Make sure the trees of ``root`` are installed (persistent collectives' init)."""
        async with self._lock:
            started = time.perf_counter()
            comm = self._comm(comm_id)
            if comm.roots is None or root in comm.roots:
                return InstallReport(comm_id, time.perf_counter() - started, 0, 0, 0)
            self.comms[comm_id] = replace(comm, roots=(*comm.roots, root))
            self._recompute()
            changes, mps = await self._apply()
            return InstallReport(
                comm_id, time.perf_counter() - started, len(self.switches), changes, mps
            )

    async def released_barrier_epoch(self, comm_id: int) -> int:
        """The newest barrier epoch the root switch of ``comm_id``'s barrier tree released.

        The switches keep counting a communicator's epochs across jobs, while a new job's
        agents start from nothing: they resume from this (else an ARRIVE for an epoch the
        switch already released is answered at once, as a late arrival, and the barrier
        does not wait)."""
        assert self.mp is not None
        comm = self._comm(comm_id)
        tree = trees.barrier_tree(self.topo, comm.members)
        reply = await self.mp.read_barrier(self.topo.switch(tree.root_switch).node_id, comm_id)
        return int(reply.epoch)

    async def free(self, comm_id: int, node: int | None = None) -> bool:
        """Remove a communicator once every member freed it (node=None: at once)."""
        async with self._lock:
            comm = self._comm(comm_id)
            if node is not None:
                freed = self._frees.setdefault(comm_id, set())
                freed.add(node)
                if freed < set(comm.members):
                    return False
            self._frees.pop(comm_id, None)
            del self.comms[comm_id]
            self._recompute()
            await self._apply()
            return True

    async def split(
        self, parent: int, node: int, color: int, key: int, timeout: float = 60.0
    ) -> tuple[int, tuple[int, ...]] | None:
        """MPI_Comm_split: every member of ``parent`` calls it; members with the same color
        get one new communicator, ranked by (key, parent rank). Negative color: none."""
        comm = self._comm(parent)
        if node not in comm.members:
            raise TopologyError(f"node {node} is not a member of communicator {parent}")
        round_key = (parent, self._split_rounds.get((parent, node), 0))
        self._split_rounds[(parent, node)] = round_key[1] + 1
        split = self._splits.setdefault(round_key, _Split(frozenset(comm.members)))
        split.answers[node] = (color, key)
        if set(split.answers) == split.expected:
            groups: dict[int, list[tuple[int, int, int]]] = {}
            for member, (c, k) in split.answers.items():
                if c >= 0:
                    groups.setdefault(c, []).append((k, comm.members.index(member), member))
            parts = [
                tuple(m for _, _, m in sorted(entries)) for _, entries in sorted(groups.items())
            ]
            try:
                reports = await self.create_many(parts)
                for part, report in zip(parts, reports, strict=True):
                    for m in part:
                        split.result[m] = (report.comm_id, part)
            except Exception as exc:
                split.error = str(exc)
                raise
            finally:
                split.done.set()  # every waiter learns the outcome
            self._splits.pop(round_key, None)
        else:
            try:
                await asyncio.wait_for(split.done.wait(), timeout)
            except TimeoutError:
                missing = sorted(split.expected - set(split.answers))
                raise TimeoutError(
                    f"split of communicator {parent}: nodes {missing} never called it"
                ) from None
            if split.error is not None:
                raise TopologyError(f"split of communicator {parent} failed: {split.error}")
        return split.result.get(node)

    def _comm(self, comm_id: int) -> Communicator:
        comm = self.comms.get(comm_id)
        if comm is None:
            raise TopologyError(f"unknown communicator {comm_id}")
        return comm

    # -- reading state back --------------------------------------------------------------

    async def drop_counters(self, index: int) -> dict[str, int]:
        switch = self.switches[index]
        total: dict[str, int] = {}
        for name in (p4info.DROP_COUNTER, p4info.EGRESS_DROP_COUNTER):
            for reason, (packets, _) in (await switch.read_counter(name)).items():
                if packets:
                    label = (
                        wire.DropReason(reason).name
                        if reason in wire.DropReason._value2member_map_
                        else str(reason)
                    )
                    total[label] = total.get(label, 0) + packets
        return total

    async def barrier_state(self, index: int, comm_id: int) -> wire.MiniPacket:
        assert self.mp is not None
        return await self.mp.read_barrier(self.topo.switch(index).node_id, comm_id)
