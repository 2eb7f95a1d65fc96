"""The control plane of a running network: communicators in, switch state out.

:class:`ControlPlane` keeps the set of communicators, computes the desired state of every
switch from it (:mod:`controller.desired_state`), and keeps every switch programmed: tables and
multicast groups over P4Runtime, one connection per switch, concurrently; register slots by
mini packets from the management node. When a switch restarts, its P4Runtime session comes
back, it is programmed again from scratch, and its barrier slots restart from the epochs the
other switches of each barrier tree have released; those epochs stay part of the desired state.

Every change is validated before anything changes (the whole desired state is computed first)
and is all-or-nothing across the switches that are up: a switch that refuses a write is retried
a bounded number of times, then the previous communicators are put back everywhere and the
caller gets a :class:`CommunicatorError` naming the switch. A switch that is down gets the
whole state when it comes back. The desired state is computed on a worker thread, never on the
event loop, and changes asked for meanwhile are committed together (:mod:`controller.changes`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from controller import p4info, trees, wire
from controller.changes import ChangeQueue, Comms, CommunicatorError, StateWorker
from controller.desired_state import Allocators, Communicator, Membership, desired_state
from controller.drivers.minipackets import FramePort, MiniPacketDriver
from controller.drivers.p4runtime import P4RuntimeSwitch, SwitchEndpoint, SyncReport
from controller.switch_state import CapacityError, Sizes, SwitchState
from controller.topology import Topology, TopologyError

LOG = logging.getLogger(__name__)


class SwitchSession(Protocol):
    """One switch's control session, as the control plane uses it (P4Runtime on BMv2; the
    tests' in-process fabric implements it too)."""

    endpoint: SwitchEndpoint
    connected: bool
    connections: int
    error: BaseException | None

    def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def wait_ready(self, timeout: float) -> None: ...
    def next_programmed(self) -> asyncio.Future[None]: ...
    async def sync(self) -> SyncReport: ...
    async def read_counter(self, counter: str) -> dict[int, tuple[int, int]]: ...
    async def read_tables(self) -> dict[str, int]: ...


OnReady = Callable[[SwitchSession], Awaitable[None]]
# told once a create's outcome is known: the new communicators' ids, or None (not installed)
Installed = Callable[[list[int] | None], None]
SessionFactory = Callable[[SwitchEndpoint, Callable[[], SwitchState], OnReady], SwitchSession]


@dataclass(slots=True)
class InstallReport:
    comm_id: int
    seconds: float
    switches: int
    p4runtime_changes: int
    mini_packets: int


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
        sizes: Sizes | None = None,
        sessions: SessionFactory | None = None,
        write_attempts: int = 3,
        compute_timeout: float = 300.0,
        change_timeout: float = 600.0,
    ) -> None:
        self.topo = topo
        self.p4info_path = build_dir / f"{program}.p4info.txtpb"
        self.json_path = build_dir / f"{program}.json"
        self.sizes = sizes or p4info.sizes_from_p4info(
            p4info.load_schema(self.p4info_path, self.json_path)
        )
        self._sessions = sessions or self._p4runtime_session
        self.write_attempts = write_attempts
        self.endpoints = endpoints
        self.mp_port = mp_port
        self.log_dir = log_dir
        self.replication = replication
        self.membership = membership
        self.comms: dict[int, Communicator] = {}
        self.allocators = Allocators()
        self.states: dict[int, SwitchState] = {}
        self.switches: dict[int, SwitchSession] = {}
        # barrier epochs a restarted switch resumed from, per (switch, communicator): part of
        # the desired state from then on, so no later push moves them back to the start
        self._resumed: dict[tuple[int, int], int] = {}
        self._last_comm_id = 0
        self.mp: MiniPacketDriver | None = None
        self.restarts = 0
        self._lock = asyncio.Lock()
        # per switch: times its registers were written after a (re)connection, the end of
        # _on_ready (wait_reprogrammed waits for this, not for the session's count)
        self._reprogrammed: dict[int, int] = {}
        self.states = self._compute((), {})
        # desired states are computed on one worker thread; changes commit under _lock
        self.worker = StateWorker(compute_timeout)
        self.changes = ChangeQueue(self, self._lock, timeout=change_timeout)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, timeout: float = 60.0) -> float:
        """Connect to every switch, program it, write its register slots; returns seconds."""
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        self.mp = MiniPacketDriver(self.mp_port, loop=loop)
        for index, endpoint in self.endpoints.items():
            switch = self._sessions(
                endpoint,
                lambda i=index: self.states[i],  # type: ignore[misc]
                self._on_ready,
            )
            self.switches[index] = switch
            switch.start()
        await asyncio.gather(*(s.wait_ready(timeout) for s in self.switches.values()))
        return time.perf_counter() - started

    async def wait_reprogrammed(self, index: int, connections: int, timeout: float) -> None:
        """Wait until switch ``index`` reconnected (more than ``connections`` sessions) and
        its tables, groups and register slots are written again."""
        switch = self.switches[index]
        deadline = asyncio.get_running_loop().time() + timeout
        # the registers too: a session counts its connection before they are written
        while self._reprogrammed.get(index, 0) <= connections:
            programmed = switch.next_programmed()  # before the check: no update can slip by
            if self._reprogrammed.get(index, 0) > connections:
                break
            try:
                await asyncio.wait_for(
                    programmed, max(0.0, deadline - asyncio.get_running_loop().time())
                )
            except TimeoutError:
                raise TimeoutError(
                    f"switch {switch.endpoint.name} was not reprogrammed within {timeout:.0f} s"
                ) from None
        if switch.error is not None:
            raise RuntimeError(
                f"switch {switch.endpoint.name}: reprogramming failed: {switch.error}"
            )

    def _p4runtime_session(
        self, endpoint: SwitchEndpoint, desired: Callable[[], SwitchState], on_ready: OnReady
    ) -> SwitchSession:
        return P4RuntimeSwitch(
            endpoint,
            self.p4info_path,
            self.json_path,
            desired=desired,
            log_dir=self.log_dir,
            on_ready=on_ready,
        )

    async def stop(self) -> None:
        await self.changes.close()
        await asyncio.gather(*(s.stop() for s in self.switches.values()))
        self.worker.close()

    async def _on_ready(self, switch: SwitchSession) -> None:
        """A switch (re)connected and holds its tables again: now its register slots."""
        assert self.mp is not None
        index = next(i for i, s in self.switches.items() if s is switch)
        # under the lock: a create or free meanwhile would recompute the desired state
        # without the resumed epochs and push the switch back to released epoch 0
        async with self._lock:
            state = self.states[index]
            if switch.connections > 1:
                self.restarts += 1
                LOG.warning(
                    "switch %s came back (connection %d): reprogramming it",
                    switch.endpoint.name,
                    switch.connections,
                )
                self.mp.forget(state.node_id)
                await self._resume_barriers(index, state)
                state = self.states[index]
            await self.mp.push(state)
            self._reprogrammed[index] = switch.connections

    async def _resume_barriers(self, index: int, state: SwitchState) -> None:
        """A restarted switch lost its released epochs: start each barrier slot from the newest
        epoch any other switch of that barrier tree has released (a switch only releases what
        the root released). The epochs become part of the desired state."""
        assert self.mp is not None
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
            self._resumed[(index, comm_id)] = newest
        self.states = await self.recompute(self.comms, f"the resumed barriers of switch {index}")

    # -- desired state -------------------------------------------------------------------

    async def recompute(self, comms: Comms, what: str) -> dict[int, SwitchState]:
        """The desired state of every switch for ``comms``, computed on the worker thread (the
        event loop answers other requests meanwhile); raises CommunicatorError when the
        communicators are invalid, do not fit or take longer than ``compute_timeout``."""
        communicators, resumed = list(comms.values()), dict(self._resumed)
        return await self.worker.run(lambda: self._compute(communicators, resumed), what)

    def _compute(
        self, comms: Iterable[Communicator], resumed: Mapping[tuple[int, int], int]
    ) -> dict[int, SwitchState]:
        """The desired state of every switch for ``comms`` with the barrier epochs restarted
        switches resumed from. Only the worker thread runs it (after __init__): it alone
        touches the allocators."""
        try:
            states = desired_state(
                self.topo,
                comms,
                sizes=self.sizes,
                replication=self.replication,
                allocators=self.allocators,
            )
        except (TopologyError, CapacityError) as exc:
            raise CommunicatorError(str(exc)) from exc
        for (switch, comm_id), epoch in resumed.items():
            slot = states[switch].barrier_slots.get(comm_id)
            if slot is not None:
                states[switch].barrier_slots[comm_id] = replace(slot, base_epoch=epoch)
        return states

    async def push(self) -> tuple[int, int]:
        """Push the desired state (the change queue's last step); once it is on the switches,
        the resumed epochs of communicators that are gone go too (a reused id starts afresh)."""
        pushed = await self._apply()
        self._resumed = {k: v for k, v in self._resumed.items() if k[1] in self.comms}
        return pushed

    async def _apply(self, timeout: float = 30.0) -> tuple[int, int]:
        """Push the current desired state to every switch that is up: (P4Runtime changes,
        mini packets). A switch that is down gets the whole state when it comes back; one that
        is up but refuses raises CommunicatorError after ``write_attempts`` tries."""
        up = [i for i, s in self.switches.items() if s.connected]
        for switch in self.switches.values():
            if not switch.connected:
                LOG.warning("%s is down: it gets the change on reconnection", switch.endpoint.name)
        results = await asyncio.gather(*(self._apply_one(i, timeout) for i in up))
        refused = [r for r in results if isinstance(r, str)]
        if refused:
            raise CommunicatorError("; ".join(refused))
        done = [r for r in results if not isinstance(r, str)]
        return sum(r[0] for r in done), sum(r[1] for r in done)

    async def _apply_one(self, index: int, timeout: float) -> tuple[int, int] | str:
        """One switch; a refusal is returned as its description."""
        assert self.mp is not None
        switch = self.switches[index]
        error: BaseException | None = None
        for attempt in range(1, self.write_attempts + 1):
            try:
                report = await asyncio.wait_for(switch.sync(), timeout)
                pushed = await asyncio.wait_for(self.mp.push(self.states[index]), timeout)
                return report.changes, pushed
            except Exception as exc:
                error = exc
                if not switch.connected:  # it went down: its reconnection reprograms it
                    LOG.warning(
                        "%s went down during a change: redone on reconnection", switch.endpoint.name
                    )
                    return 0, 0
                LOG.warning(
                    "%s refused a change (attempt %d of %d): %s",
                    switch.endpoint.name,
                    attempt,
                    self.write_attempts,
                    exc,
                )
        return f"switch {switch.endpoint.name} refused the change: {error}"

    def _next_comm_id(self, taken: Iterable[int]) -> int:
        """Ids go round-robin, so a freed id is handed out again as late as possible: agents
        that still linger on the old communicator have long let it go by then."""
        used = set(taken)
        slots = self.sizes.comm_slots - 1
        for step in range(1, slots + 1):
            comm_id = (self._last_comm_id + step - 1) % slots + 1
            if comm_id not in used:
                self._last_comm_id = comm_id
                return comm_id
        raise CommunicatorError(f"all {slots} communicator ids are in use")

    # -- the communicator service's operations ----------------------------------------------

    async def create(
        self,
        members: Iterable[int],
        *,
        comm_id: int | None = None,
        roots: tuple[int, ...] | None = None,
        membership: Membership | None = None,
        settled: Installed | None = None,
    ) -> InstallReport:
        """Install a communicator's trees and barrier slots; answer once they are in place."""
        (report,) = await self.create_many(
            [tuple(members)], comm_id=comm_id, roots=roots, membership=membership, settled=settled
        )
        return report

    async def create_many(
        self,
        groups: list[tuple[int, ...]],
        *,
        comm_id: int | None = None,
        roots: tuple[int, ...] | None = None,
        membership: Membership | None = None,
        settled: Installed | None = None,
    ) -> list[InstallReport]:
        """Several communicators in one change: one recomputation, one push to each switch
        (a split creates one per color). ``settled`` hears the outcome even if this caller
        leaves meanwhile: the new ids (in the order of ``groups``), or None if not installed."""
        started = time.perf_counter()
        added: list[Communicator] = []

        def edit(current: Comms) -> tuple[Comms, str]:
            comms = dict(current)
            added.clear()
            for members in groups:
                if comm_id is not None and not added:
                    if comm_id in comms:
                        raise CommunicatorError(f"communicator {comm_id} already exists")
                    new_id = comm_id
                else:
                    new_id = self._next_comm_id(comms)
                comm = Communicator(
                    new_id, members, roots=roots, membership=membership or self.membership
                )
                comms[new_id] = comm
                added.append(comm)
            return comms, f"communicators {[c.comm_id for c in added]}"

        def told(carried_out: bool) -> None:
            if settled is not None:
                settled([c.comm_id for c in added] if carried_out else None)

        changes, mps = await self.changes.submit(edit, told)
        seconds = time.perf_counter() - started
        LOG.info(
            "communicators %s installed in %.3f s: %d P4Runtime changes, %d mini packets",
            [c.comm_id for c in added],
            seconds,
            changes,
            mps,
        )
        return [InstallReport(c.comm_id, seconds, len(self.switches), changes, mps) for c in added]

    async def ensure_trees(self, comm_id: int, root: int) -> InstallReport:
        """Make sure the trees of ``root`` are installed (persistent collectives' init)."""
        started = time.perf_counter()
        there = False

        def edit(current: Comms) -> tuple[Comms, str]:
            nonlocal there
            comm = _known(current, comm_id)
            if root not in comm.members:
                raise CommunicatorError(
                    f"communicator {comm_id}: root {root} is not a member, so it has no trees"
                )
            there = comm.roots is None or root in comm.roots
            if comm.roots is None or there:
                return current, f"trees of root {root} on {comm_id} (there already)"
            changed = replace(comm, roots=(*comm.roots, root))
            return {**current, comm_id: changed}, f"trees of root {root} on {comm_id}"

        changes, mps = await self.changes.submit(edit)
        if there:
            return InstallReport(comm_id, time.perf_counter() - started, 0, 0, 0)
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

    async def free(self, comm_id: int) -> None:
        """Remove a communicator and its switch state (MPI's per-member votes are
        :mod:`controller.communicators`' business)."""

        def edit(current: Comms) -> tuple[Comms, str]:
            _known(current, comm_id)
            return {k: v for k, v in current.items() if k != comm_id}, (
                f"freeing communicator {comm_id}"
            )

        await self.changes.submit(edit)

    def _comm(self, comm_id: int) -> Communicator:
        return _known(self.comms, comm_id)

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


def _known(comms: Comms, comm_id: int) -> Communicator:
    comm = comms.get(comm_id)
    if comm is None:
        raise CommunicatorError(f"unknown communicator {comm_id}")
    return comm
