"""The collective context over the host agent's engine: what :class:`host_agents.comm.Comm`
hands each algorithm (on Mininet and on the in-process fabric alike).

It implements :class:`host_agents.context.CollectiveContext`: ranks become node ids here,
waits are bounded by the communicator's options, and engine errors become errors that name
the rank, the collective, the instance and the step.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from controller.wire import AggOp
from host_agents.context import CollectiveContext, Data, RepairPacing
from host_agents.engine import Engine, EngineError, Incoming, Source
from host_agents.plans import ragasa_relays
from host_agents.transport.publish import RepairPacer

if TYPE_CHECKING:
    from controller.topology import Topology

T = TypeVar("T")
LOG = logging.getLogger(__name__)


class CollectiveError(Exception):
    """A collective failed; the message names the rank, the collective and the step."""


class _RankPacer:
    """The engine's repair pacer, keyed by ranks instead of node ids."""

    def __init__(self, pacer: RepairPacer, node_of: Callable[[int], int]) -> None:
        self._pacer = pacer
        self._node_of = node_of

    @property
    def silent_since(self) -> float:
        return self._pacer.silent_since

    def timeout(self, now: float) -> float:
        return self._pacer.timeout(now)

    def arrived(self, now: float) -> None:
        self._pacer.arrived(now)

    def tick(self, pending: Mapping[int, Incoming], now: float) -> None:
        self._pacer.tick(pending, self._node_of, now)


class Timeouts(Protocol):
    """The communicator's options a context reads (``host_agents.comm.CommOptions``)."""

    @property
    def progress_timeout(self) -> float: ...
    @property
    def first_data_timeout(self) -> float: ...
    @property
    def op_timeout(self) -> float: ...
    @property
    def check_interval(self) -> float: ...


class Communicator(Protocol):
    """What a context uses of the communicator it runs on (``host_agents.comm.Comm``): named
    here, so the context needs nothing from comm.py and comm.py alone imports the other."""

    @property
    def engine(self) -> Engine: ...
    @property
    def comm_id(self) -> int: ...
    @property
    def members(self) -> tuple[int, ...]: ...
    @property
    def options(self) -> Timeouts: ...
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def settling(self) -> bool: ...

    def next_barrier_epoch(self) -> int: ...
    def in_background(self, work: Coroutine[Any, Any, None]) -> None: ...
    async def settle(self) -> None: ...


class EngineContext:
    """One collective instance as its algorithm sees it: ranks, tags and bounded waits."""

    def __init__(self, comm: Communicator, epoch: int, name: str) -> None:
        self.comm = comm
        self.engine: Engine = comm.engine
        self.comm_id = comm.comm_id
        self.members = comm.members
        self.options = comm.options
        self._epoch = epoch
        self.name = name
        self._rank = comm.rank
        self._size = comm.size
        self.step = "start"
        self.started = comm.engine.loop.time()

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._size

    @property
    def epoch(self) -> int:
        return self._epoch

    def node(self, rank: int) -> int:
        return self.members[rank]

    def error(self, detail: str) -> CollectiveError:
        return CollectiveError(
            f"rank {self.rank} (node {self.engine.node}): {self.name} on communicator "
            f"{self.comm_id}, instance {self.epoch}, step {self.step}: {detail}"
        )

    # -- point to point -------------------------------------------------------------------------

    def isend(self, dst: int, tag: int, data: Data | Source) -> asyncio.Future[None]:
        return self.engine.send_message(self.node(dst), self.comm_id, self.epoch, tag, data)

    async def send(self, dst: int, tag: int, data: Data | Source) -> None:
        await self.wait(self.isend(dst, tag, data), f"sending to rank {dst}")

    def irecv(self, src: int, tag: int, size: int) -> Incoming:
        try:
            return self.engine.incoming(self.node(src), self.comm_id, self.epoch, tag, size)
        except EngineError as exc:
            raise self.error(f"from rank {src}: {exc}") from exc

    async def recv(self, src: int, tag: int, size: int) -> bytearray:
        return await self.wait_incoming(self.irecv(src, tag, size), f"waiting for rank {src}")

    async def wait_incoming(self, msg: Incoming, what: str) -> bytearray:
        data = await self.wait(msg.done, what, progress=lambda: msg.n_received)
        self.engine.consume(msg)
        return data

    def consume(self, msg: Incoming) -> None:
        self.engine.consume(msg)

    def ask_resend(self, msg: Incoming) -> None:
        self.engine.ask_resend(msg)

    async def wait(
        self, fut: Awaitable[T], what: str, *, progress: Callable[[], int] | None = None
    ) -> T:
        """Await ``fut``, bounded. A receive (``progress`` counts what arrived) fails when its
        first segment has not come within first_data_timeout or it stops arriving for
        progress_timeout; sends and multicasts are failed by the engine when their peers stop
        acknowledging (peer_timeout); anything fails past op_timeout.

        The bounds are a timer beside ``fut``, not ``wait_for(shield(fut))`` in a loop: that
        took three event-loop passes and a handful of futures per wait, on every rank of
        every collective (docs/performance.md). Cancelling the caller leaves ``fut`` running,
        as a shield would."""
        task = asyncio.ensure_future(fut)
        if not task.done():
            await self._bounded(task, what, progress)
        try:
            return task.result()
        except EngineError as exc:
            raise self.error(f"{what}: {exc}") from exc

    async def _bounded(
        self, task: asyncio.Future[T], what: str, progress: Callable[[], int] | None
    ) -> None:
        """Until ``task`` is done, or raise the collective's error once a bound is passed."""
        opts = self.options
        loop = self.engine.loop
        woken: asyncio.Future[None] = loop.create_future()
        give_up = self.started + opts.op_timeout
        last = progress() if progress else 0
        last_change = loop.time()
        timer: asyncio.TimerHandle | None = None

        def wake(_done: asyncio.Future[T]) -> None:
            if not woken.done():
                woken.set_result(None)

        def check() -> None:
            nonlocal timer, last, last_change
            now = loop.time()
            if now >= give_up:
                woken.set_exception(self.error(f"{what}: gave up after {opts.op_timeout:.0f} s"))
                return
            current = progress() if progress else last
            if current != last:
                last, last_change = current, now
            elif progress is not None and now - last_change > (
                opts.progress_timeout if current else opts.first_data_timeout
            ):
                task.cancel()
                if current:
                    woken.set_exception(
                        self.error(
                            f"{what}: stalled, no new segment for {now - last_change:.1f} s "
                            f"after {current} arrived"
                        )
                    )
                else:
                    woken.set_exception(
                        self.error(f"{what}: nothing arrived for {now - last_change:.1f} s")
                    )
                return
            timer = loop.call_at(min(now + opts.check_interval, give_up), check)

        timer = loop.call_at(min(last_change + opts.check_interval, give_up), check)
        task.add_done_callback(wake)
        try:
            await woken
        finally:
            if timer is not None:
                timer.cancel()
            task.remove_done_callback(wake)

    async def wait_all(self, futures: list[asyncio.Future[Any]], what: str) -> None:
        for fut in futures:
            await self.wait(fut, what)

    # -- multicast ------------------------------------------------------------------------------

    @property
    def segment_size(self) -> int:
        return self.engine.cfg.segment_size

    def multicast(self, tree: int, data: Data | Source) -> asyncio.Future[None]:
        root = self.engine.mcast_send(self.comm_id, self.epoch, tree, data)
        if root.returns_early:  # else ``sent`` is ``done``'s outcome, and the caller sees it
            what = f"{self.name} instance {self.epoch}: acknowledgements of this rank's multicast"
            self.comm.in_background(self._acknowledged(root.done, what))
        return root.sent

    async def _acknowledged(self, acknowledged: asyncio.Future[None], what: str) -> None:
        """The engine fails ``acknowledged`` when receivers stop answering (peer_timeout); by
        then each of them has failed its own receive, so this rank only reports it."""
        try:
            await acknowledged
        except EngineError as exc:
            self.engine.stats.unacknowledged_multicasts += 1
            LOG.warning("%s", self.error(f"{what}: {exc}"))

    def multicast_incoming(self, root: int, tree: int, size: int) -> Incoming:
        try:
            return self.engine.mcast_incoming(self.node(root), self.comm_id, self.epoch, tree, size)
        except EngineError as exc:
            raise self.error(f"multicast of rank {root}: {exc}") from exc

    def publish(self, tree: int, data: Data) -> object:
        return self.engine.mcast_publish(self.comm_id, self.epoch, tree, data)

    def withdraw(self, published: object, *, confirmed: bool = False) -> None:
        self.engine.mcast_withdraw(published, confirmed=confirmed)  # type: ignore[arg-type]

    def withdraw_after_barrier(self, published: object) -> None:
        epoch = self.comm.next_barrier_epoch()  # taken now: every rank takes it in this order

        async def confirm() -> None:
            confirmed = False
            try:
                await self.engine.barriers.arrive(
                    self.comm_id,
                    epoch,
                    self.options.first_data_timeout,
                    patient=not self.comm.settling,  # nobody waits on it yet
                )
                confirmed = True
            except (EngineError, TimeoutError) as exc:
                LOG.warning("%s", self.error(f"confirming switch barrier epoch {epoch}: {exc}"))
            finally:
                self.withdraw(published, confirmed=confirmed)

        self.comm.in_background(confirm())

    def repair_pacer(self, window: int) -> RepairPacing:
        return _RankPacer(self.engine.repair_pacer(window, self.members), self.node)

    @property
    def progress_timeout(self) -> float:
        return self.options.progress_timeout

    @property
    def resend_ask_delay(self) -> float:
        return self.engine.cfg.resend_ask_delay

    def now(self) -> float:
        return self.engine.loop.time()

    # -- the switch barrier ---------------------------------------------------------------------

    async def arrive(self) -> None:
        # waiting for the others to arrive is bounded like waiting for a first byte
        await self.wait(
            self.engine.barrier_arrive(self.comm_id, self.epoch, self.options.first_data_timeout),
            "waiting for the switches' RELEASE",
        )

    async def aggregate(self, data: bytes | bytearray, op: int) -> bytes:
        # a reduction's RESULT releases its barrier epoch and every earlier one: those still
        # being confirmed in the background must be complete first (docs/protocol.md)
        await self.comm.settle()
        return await self.wait(
            self.engine.reduce_in_switches(
                self.comm_id, self.epoch, data, AggOp(op), self.options.first_data_timeout
            ),
            "waiting for the switches' RESULT",
        )

    # -- placement ------------------------------------------------------------------------------

    def group_of(self, rank: int) -> int:
        return self.engine.directory.group_of(self.node(rank))

    def switch_of(self, rank: int) -> int:
        return self.engine.directory.switch_of(self.node(rank))

    @property
    def topology(self) -> Topology | None:
        return self.engine.directory.topology

    def relays(self, root: int) -> tuple[int, ...]:
        try:
            nodes = ragasa_relays(self.engine.directory, self.members, self.node(root))
        except ValueError as exc:
            raise self.error(str(exc)) from exc
        return tuple(self.members.index(n) for n in nodes)


if TYPE_CHECKING:

    def _implements(ctx: EngineContext) -> CollectiveContext:
        return ctx  # mypy checks here that the engine's context is a CollectiveContext
