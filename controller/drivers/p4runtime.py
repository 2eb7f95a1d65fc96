"""Pushes tables and multicast groups to BMv2 over P4Runtime (finsy), one connection per switch.

Every time a switch (re)connects, the pipeline is checked (and installed when the switch has
none, as after a restart), what the switch holds is read back, and only the difference with
the desired state is written: pushing the same state twice writes nothing, and a restarted
switch gets everything again. Every write request is logged per switch in
``logs/<switch>-p4runtime-requests.txt`` (p4lang/tutorials' convention).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import finsy
from finsy import (
    P4CounterEntry,
    P4MulticastGroupEntry,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)
from finsy import p4entity as fy_entity
from finsy.p4entity import P4Replica

from controller import p4info as names
from controller.switch_state import ReplicationMode, SlotTree, StaticTree, SwitchState

LOG = logging.getLogger(__name__)
BATCH = 500  # updates per WriteRequest


class _ExpectedOnBmv2(logging.Filter):
    """BMv2 serves P4Runtime but not gNMI: finsy's warning about it is expected noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "gNMI is not implemented" not in record.getMessage()


logging.getLogger("finsy").addFilter(_ExpectedOnBmv2())


def table_entries(state: SwitchState) -> list[P4TableEntry]:
    """The non-default entries the switch should hold."""
    entries: list[P4TableEntry] = []
    for port, (role, node) in sorted(state.ports.items()):
        entries.append(
            P4TableEntry(
                names.PORT_INFO,
                match=P4TableMatch(port=port),
                action=P4TableAction("set_port", role=int(role), node=node),
            )
        )
    for node, port in sorted(state.routes.items()):
        entries.append(
            P4TableEntry(
                names.NODE_ROUTE,
                match=P4TableMatch(node=node),
                action=P4TableAction("forward", port=port),
            )
        )
    for key, binding in sorted(state.trees.items()):
        if isinstance(binding, StaticTree):
            action = P4TableAction(
                "replicate_static", parent_port=binding.parent_port, group=binding.group
            )
        else:
            assert isinstance(binding, SlotTree)
            action = P4TableAction("replicate_from_slot", slot=binding.slot)
        entries.append(
            P4TableEntry(
                names.BCAST_TREE,
                match=P4TableMatch(comm_id=key.comm_id, root_node=key.root_node, tree=key.tree),
                action=action,
            )
        )
    for key, merge in sorted(state.ack_merges.items()):
        entries.append(
            P4TableEntry(
                names.ACK_MERGE,
                match=P4TableMatch(comm_id=key.comm_id, root_node=key.root_node, tree=key.tree),
                action=P4TableAction(
                    "merge_acks",
                    slot=merge.slot,
                    parent_port=merge.parent_port,
                    child_mask=merge.child_mask,
                    generation=merge.generation,
                ),
            )
        )
    return entries


def default_entries(state: SwitchState) -> list[P4TableEntry]:
    entries = [
        P4TableEntry(
            names.SWITCH_IDENTITY,
            is_default_action=True,
            action=P4TableAction("set_identity", node=state.node_id),
        )
    ]
    if state.replication is not None:
        if state.replication.mode == ReplicationMode.SUBSET_GROUPS:
            action = P4TableAction("subset_groups", base=state.replication.group)
        else:
            action = P4TableAction("all_ports_group", group=state.replication.group)
        entries.append(P4TableEntry(names.MP_REPLICATION, is_default_action=True, action=action))
    return entries


def group_entries(state: SwitchState) -> list[P4MulticastGroupEntry]:
    return [
        P4MulticastGroupEntry(gid, replicas=tuple(P4Replica(port) for port in ports))
        for gid, ports in sorted(state.groups.items())
        if ports
    ]


@dataclass(slots=True)
class SyncReport:
    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    seconds: float = 0.0

    @property
    def changes(self) -> int:
        return self.inserted + self.modified + self.deleted


class RequestLog:
    """Appends every P4Runtime write of one switch, as protobuf text, to its log file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, updates: Iterable[Any]) -> None:
        if self.path is None:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with self.path.open("a", encoding="utf-8") as out:
            out.write(f"\n[{stamp}] WriteRequest\n")
            for update in updates:
                out.write(f"{update}\n")


@dataclass
class SwitchEndpoint:
    name: str
    address: str  # host:port of its P4Runtime server
    device_id: int


@dataclass
class P4RuntimeSwitch:
    """One switch: keeps it programmed to ``desired()`` across reconnects and restarts."""

    endpoint: SwitchEndpoint
    p4info: Path
    p4blob: Path
    desired: Callable[[], SwitchState]
    log_dir: Path | None = None
    on_ready: Callable[[P4RuntimeSwitch], Awaitable[None]] | None = None
    force_pipeline: bool = False  # reinstall the pipeline on connect (clears all state)
    connections: int = 0  # times the switch became ready (1 + restarts or reconnects)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    last_sync: SyncReport = field(default_factory=SyncReport)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        options = finsy.SwitchOptions(
            p4info=self.p4info,
            p4blob=self.p4blob,
            device_id=self.endpoint.device_id,
            ready_handler=self._ready,
            p4force=self.force_pipeline,
        )
        self.switch = finsy.Switch(self.endpoint.name, self.endpoint.address, options)
        log_path = (
            self.log_dir / f"{self.endpoint.name}-p4runtime-requests.txt" if self.log_dir else None
        )
        self.log = RequestLog(log_path)
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._programmed: list[asyncio.Future[None]] = []
        self.connected = False  # a P4Runtime session is up and the switch was programmed
        self.switch.ee.on(finsy.SwitchEvent.CHANNEL_DOWN, self._on_down)

    def _on_down(self, _switch: finsy.Switch) -> None:
        if self.connected and self._task is not None:  # not when we are the ones stopping
            LOG.warning("%s: P4Runtime session lost", self.endpoint.name)
        self.connected = False
        self.ready.clear()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self.switch.run(), name=self.endpoint.name
        )

    async def stop(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _ready(self, sw: finsy.Switch) -> None:
        self.ready.clear()
        try:
            self.last_sync = await self.sync()
            self.connections += 1
            LOG.info(
                "%s ready (connection %d): %d inserted, %d modified, %d deleted in %.2f s",
                self.endpoint.name,
                self.connections,
                self.last_sync.inserted,
                self.last_sync.modified,
                self.last_sync.deleted,
                self.last_sync.seconds,
            )
            self.connected = True
            if self.on_ready is not None:
                await self.on_ready(self)
            self.error = None
        except Exception as exc:  # reported to whoever waits for readiness
            LOG.exception("%s: programming failed", self.endpoint.name)
            self.error = exc
        self.ready.set()
        waiters, self._programmed = self._programmed, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def next_programmed(self) -> asyncio.Future[None]:
        """Resolves when the switch has next been (re)programmed, after a (re)connection."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._programmed.append(fut)
        return fut

    async def wait_ready(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self.ready.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(
                f"switch {self.endpoint.name}: no P4Runtime session with {self.endpoint.address} "
                f"after {timeout:.0f} s (is simple_switch_grpc running? see its log)"
            ) from None
        if self.error is not None:
            raise RuntimeError(
                f"switch {self.endpoint.name}: programming failed: {self.error}"
            ) from self.error

    # -- synchronisation --------------------------------------------------------------------

    async def sync(self) -> SyncReport:
        """Make the switch hold exactly the desired tables and groups; write only differences."""
        async with self._lock:
            started = time.perf_counter()
            state = self.desired()
            report = SyncReport()
            schema = self.switch.p4info
            want_groups = {g.multicast_group_id: g for g in group_entries(state)}
            have_groups = {
                g.multicast_group_id: g async for g in self._read(P4MulticastGroupEntry())
            }
            want_entries = {_entry_key(e, schema): e for e in table_entries(state)}
            have_entries: dict[bytes, P4TableEntry] = {}
            for table in (names.PORT_INFO, names.NODE_ROUTE, names.BCAST_TREE, names.ACK_MERGE):
                async for entry in self._read(P4TableEntry(table)):
                    have_entries[_entry_key(entry, schema)] = entry

            group_inserts = [g for gid, g in want_groups.items() if gid not in have_groups]
            group_modifies = [
                g
                for gid, g in want_groups.items()
                if gid in have_groups and _replica_set(have_groups[gid]) != _replica_set(g)
            ]
            group_deletes = [
                P4MulticastGroupEntry(gid) for gid in have_groups if gid not in want_groups
            ]
            entry_inserts = [e for k, e in want_entries.items() if k not in have_entries]
            entry_modifies = [
                e
                for k, e in want_entries.items()
                if k in have_entries
                and _action_bytes(have_entries[k], schema) != _action_bytes(e, schema)
            ]
            entry_deletes = [e for k, e in have_entries.items() if k not in want_entries]
            defaults = [d for d in default_entries(state) if not await self._default_matches(d)]

            await self._write("insert", group_inserts)
            await self._write("modify", group_modifies)
            await self._write("delete", entry_deletes)
            await self._write("insert", entry_inserts)
            await self._write("modify", entry_modifies + defaults)
            await self._write("delete", group_deletes)
            report.inserted = len(group_inserts) + len(entry_inserts)
            report.modified = len(group_modifies) + len(entry_modifies) + len(defaults)
            report.deleted = len(group_deletes) + len(entry_deletes)
            report.seconds = time.perf_counter() - started
            return report

    async def _default_matches(self, wanted: P4TableEntry) -> bool:
        schema = self.switch.p4info
        try:
            async for have in self._read(P4TableEntry(wanted.table_id, is_default_action=True)):
                return _action_bytes(have, schema) == _action_bytes(wanted, schema)
        except finsy.P4ClientError:
            pass  # a server that cannot read default entries gets them rewritten
        return False

    async def _write(self, kind: str, entities: list[Any]) -> None:
        if not entities:
            return
        marked = [_mark(kind, e) for e in entities]
        for i in range(0, len(marked), BATCH):
            batch = marked[i : i + BATCH]
            self.log.write(fy_entity.encode_updates(batch, self.switch.p4info))
            await self.switch.write(batch)

    # -- reading state back ---------------------------------------------------------------

    def _read(self, entity: Any) -> AsyncIterator[Any]:
        # finsy declares read() with async overloads, which type checkers see as coroutines
        reader: AsyncIterator[Any] = self.switch.read(entity)  # type: ignore[assignment]
        return reader

    async def read_counter(self, counter: str) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes) for every cell of an indirect counter."""
        out: dict[int, tuple[int, int]] = {}
        async for cell in self._read(P4CounterEntry(counter)):
            if cell.index is not None:
                out[cell.index] = (cell.packet_count, cell.byte_count)
        return out

    async def read_all(self) -> dict[str, Any]:
        """Every table entry (as text) and multicast group, for before/after comparisons."""
        out: dict[str, Any] = {}
        schema = self.switch.p4info
        for table in (names.PORT_INFO, names.NODE_ROUTE, names.BCAST_TREE, names.ACK_MERGE):
            out[table] = sorted(
                [str(e.encode(schema)) async for e in self._read(P4TableEntry(table))]
            )
        out["groups"] = sorted(
            [
                (g.multicast_group_id, sorted(_replica_set(g)))
                async for g in self._read(P4MulticastGroupEntry())
            ]
        )
        return out

    async def read_tables(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for table in (names.PORT_INFO, names.NODE_ROUTE, names.BCAST_TREE, names.ACK_MERGE):
            counts[table] = len([e async for e in self._read(P4TableEntry(table))])
        counts["multicast_groups"] = len([g async for g in self._read(P4MulticastGroupEntry())])
        return counts


def _mark(kind: str, entity: Any) -> Any:
    if kind == "insert":
        return +entity
    if kind == "delete":
        return -entity
    return ~entity


def _entry_key(entry: P4TableEntry, schema: Any) -> bytes:
    encoded = entry.encode(schema).table_entry
    return (
        bytes(str(encoded.table_id), "ascii")
        + b"|"
        + b"|".join(
            m.SerializeToString(deterministic=True)
            for m in sorted(encoded.match, key=lambda m: m.field_id)
        )
    )


def _action_bytes(entry: P4TableEntry, schema: Any) -> bytes:
    return bytes(entry.encode(schema).table_entry.action.SerializeToString(deterministic=True))


def _replica_set(group: P4MulticastGroupEntry) -> frozenset[tuple[int, int]]:
    out = set()
    for replica in group.replicas:
        if isinstance(replica, P4Replica):
            out.add((int(replica.port), replica.instance))
        elif isinstance(replica, tuple):
            out.add((int(replica[0]), int(replica[1])))
        else:
            out.add((int(replica), 0))
    return frozenset(out)
