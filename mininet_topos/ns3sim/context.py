"""The collective context (:class:`host_agents.context.CollectiveContext`) on simulated
transport and time: what the host agents' algorithms run against in a simulation.

It mirrors :class:`host_agents.engine_context.EngineContext`, over a
:class:`~mininet_topos.ns3sim.transport.HostEndpoint` instead of the engine. Two things differ
because the simulated network does not lose packets: waits are not watched by a timer each
(in a simulation such a timer costs more than the message it waits for: 27 million waits in
one Df(6,12,6) ring allgather; the loop raises SimStall instead when nothing can happen any
more), and published multicasts never need repairs, so the repair pacer never asks anyone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from controller import wire
from controller.wire import AggOp
from host_agents.context import CollectiveContext, Data, RepairPacing
from host_agents.directory import Directory
from host_agents.engine import EngineError, Incoming, Source
from host_agents.plans import ragasa_relays
from host_agents.reduction import LANE_BYTES
from host_agents.transport.config import RESEND_ASK_DELAY
from mininet_topos.ns3sim.transport import HostEndpoint, SimIncoming, barrier_key, reduce_key

if TYPE_CHECKING:
    from controller.topology import Topology

T = TypeVar("T")
PROGRESS_TIMEOUT = 15.0  # simulated seconds without an arrival (CommOptions.progress_timeout)
REPAIR_QUIET = 0.2  # simulated seconds the allgather waits between looks at its arrivals
# the P4 program's reduction packets: lanes per chunk, and chunks a host has in flight
CHUNK_BYTES = wire.AGG_LANES * LANE_BYTES
CHUNKS_IN_FLIGHT = max(1, wire.AGG_WINDOW // 2)


class SimCollectiveError(Exception):
    """A collective failed in simulation; the message names rank, collective and step."""


@dataclass(slots=True)
class SimRank:
    """One member of the simulated communicator: its epochs, like Comm's."""

    comm_id: int
    members: tuple[int, ...]
    rank: int
    endpoint: HostEndpoint
    directory: Directory
    epoch: int = 0
    barrier_epoch: int = 0
    relays_cache: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # barriers a collective left running after it returned, like Comm's background work
    background: list[Coroutine[Any, Any, None]] = field(default_factory=list)

    async def settle(self) -> None:
        while self.background:
            await self.background.pop()

    def next_epoch(self) -> int:
        self.epoch = (self.epoch + 1) & 0xFFFF
        return self.epoch

    def next_barrier_epoch(self) -> int:
        self.barrier_epoch = (self.barrier_epoch + 1) & 0xFFFF
        return self.barrier_epoch

    def barrier_key(self, epoch: int) -> int:
        return barrier_key(self.comm_id, epoch)


class _NoRepairs:
    """Published multicasts arrive whole or the run stops: nobody is ever asked."""

    def __init__(self, now: float) -> None:
        self._since = now

    @property
    def silent_since(self) -> float:
        return self._since

    def timeout(self, now: float) -> float:
        return REPAIR_QUIET

    def arrived(self, now: float) -> None:
        self._since = now

    def tick(self, pending: Mapping[int, Incoming], now: float) -> None:
        pass


class SimContext:
    """One collective instance on one simulated rank."""

    def __init__(self, member: SimRank, epoch: int, name: str) -> None:
        self.member = member
        self.endpoint = member.endpoint
        self.members = member.members
        self.comm_id = member.comm_id
        self._epoch = epoch
        self.name = name
        self.step = "start"

    @property
    def rank(self) -> int:
        return self.member.rank

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def epoch(self) -> int:
        return self._epoch

    def node(self, rank: int) -> int:
        return self.members[rank]

    def error(self, detail: str) -> SimCollectiveError:
        return SimCollectiveError(
            f"rank {self.rank} (node {self.endpoint.node}): {self.name} on communicator "
            f"{self.comm_id}, instance {self.epoch}, step {self.step}: {detail}"
        )

    # -- point to point -------------------------------------------------------------------

    def _key(self, src: int, tag: int) -> tuple[Any, ...]:
        return ("u", self.node(src), self.comm_id, self._epoch, tag)

    def isend(self, dst: int, tag: int, data: Data | Source) -> asyncio.Future[None]:
        return self.endpoint.send(self.node(dst), self._key(self.rank, tag), data)

    async def send(self, dst: int, tag: int, data: Data | Source) -> None:
        await self.wait(self.isend(dst, tag, data), f"sending to rank {dst}")

    def irecv(self, src: int, tag: int, size: int) -> Incoming:
        try:
            msg = self.endpoint.expect(self._key(src, tag), size, self.node(src))
        except EngineError as exc:
            raise self.error(f"from rank {src}: {exc}") from exc
        return msg  # type: ignore[return-value]  # SimIncoming is what Incoming offers

    async def recv(self, src: int, tag: int, size: int) -> bytearray:
        # wait_incoming inlined: one coroutine per receive, not three (27 million receives in
        # one Df(6,12,6) ring allgather)
        msg = self.irecv(src, tag, size)
        try:
            data = await msg.done
        except EngineError as exc:
            raise self.error(f"waiting for rank {src}: {exc}") from exc
        self.endpoint.consume(msg)  # type: ignore[arg-type]
        return data

    async def wait_incoming(self, msg: Incoming, what: str) -> bytearray:
        data = await self.wait(msg.done, what)
        self.consume(msg)
        return data

    def consume(self, msg: Incoming) -> None:
        self.endpoint.consume(msg)  # type: ignore[arg-type]

    def ask_resend(self, msg: Incoming) -> None:
        """Nothing to ask: the simulated transport loses no message it does not report as a
        stall (mininet_topos/ns3sim/transport.py)."""

    async def wait(
        self, fut: Awaitable[T], what: str, *, progress: Callable[[], int] | None = None
    ) -> T:
        try:
            return await fut
        except EngineError as exc:
            raise self.error(f"{what}: {exc}") from exc

    async def wait_all(self, futures: list[asyncio.Future[Any]], what: str) -> None:
        for fut in futures:
            await self.wait(fut, what)

    # -- multicast ------------------------------------------------------------------------

    @property
    def segment_size(self) -> int:
        return self.endpoint.transport.net.params.segment

    def _mkey(self, root: int, tree: int) -> tuple[Any, ...]:
        return ("m", self.node(root), self.comm_id, self._epoch, int(tree))

    def multicast(self, tree: int, data: Data | Source) -> asyncio.Future[None]:
        return self.endpoint.multicast(tree, self._mkey(self.rank, tree), data)

    def multicast_incoming(self, root: int, tree: int, size: int) -> Incoming:
        try:
            msg = self.endpoint.expect(self._mkey(root, tree), size, self.node(root))
        except EngineError as exc:
            raise self.error(f"multicast of rank {root}: {exc}") from exc
        return msg  # type: ignore[return-value]

    def publish(self, tree: int, data: Data) -> object:
        return self.endpoint.multicast(tree, self._mkey(self.rank, tree), data, acked=False)

    def withdraw(self, published: object) -> None:
        pass

    def repair_pacer(self, window: int) -> RepairPacing:
        return _NoRepairs(self.now())

    @property
    def progress_timeout(self) -> float:
        return PROGRESS_TIMEOUT

    @property
    def resend_ask_delay(self) -> float:
        return RESEND_ASK_DELAY

    def now(self) -> float:
        return self.endpoint.loop.time()

    # -- the switch barrier ---------------------------------------------------------------

    async def arrive(self) -> None:
        key = self.member.barrier_key(self._epoch)
        await self.wait(self.endpoint.arrive(key), "waiting for the switches' RELEASE")

    def withdraw_after_barrier(self, published: object) -> None:
        epoch = self.member.next_barrier_epoch()
        key = self.member.barrier_key(epoch)
        # the rank's time ends without it, its frames still cross the links (simulation.py)
        self.member.background.append(
            self.wait(self.endpoint.arrive(key), f"switch barrier epoch {epoch}")
        )

    async def aggregate(self, data: bytes | bytearray, op: int) -> bytes:
        """The switches' reduction, chunk by chunk with the host's window of the real engine
        (host_agents/transport/switch_reduce.py), each chunk merged up the barrier tree by
        the simulated routers and its result sent down it."""
        count = max(1, -(-len(data) // CHUNK_BYTES))
        if count > wire.AGG_CHUNK_LIMIT:
            limit = wire.AGG_CHUNK_LIMIT * CHUNK_BYTES
            raise self.error(f"an in-network reduction takes at most {limit} bytes")
        transport = self.endpoint.transport
        transport.contribute(self.comm_id, self._epoch, self.rank, bytes(data))
        what = "waiting for the switches' RESULT"
        results: list[asyncio.Future[None]] = []
        for chunk in range(count):
            if chunk >= CHUNKS_IN_FLIGHT:  # the slot's previous chunk is done everywhere
                await self.wait(results[chunk - CHUNKS_IN_FLIGHT], what)
            key = reduce_key(self.comm_id, self._epoch, chunk)
            results.append(self.endpoint.contribute(key, CHUNK_BYTES))
        await self.wait_all(results, what)
        try:
            result = transport.reduction_result(self.comm_id, self._epoch, AggOp(op), self.size)
        except EngineError as exc:
            raise self.error(str(exc)) from exc
        return result[: len(data)]

    # -- placement ------------------------------------------------------------------------

    def group_of(self, rank: int) -> int:
        return self.member.directory.group_of(self.node(rank))

    def switch_of(self, rank: int) -> int:
        return self.member.directory.switch_of(self.node(rank))

    @property
    def topology(self) -> Topology | None:
        return self.member.directory.topology

    def relays(self, root: int) -> tuple[int, ...]:
        cached = self.member.relays_cache.get(root)
        if cached is None:
            nodes = ragasa_relays(self.member.directory, self.members, self.node(root))
            cached = tuple(self.members.index(n) for n in nodes)
            self.member.relays_cache[root] = cached
        return cached


if TYPE_CHECKING:

    def _implements(ctx: SimContext) -> CollectiveContext:
        return ctx  # mypy checks here that the simulated context is a CollectiveContext


__all__ = ["SimCollectiveError", "SimContext", "SimIncoming", "SimRank"]
