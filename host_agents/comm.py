"""The MPI-like API of one host: communicators and their collectives.

Blocking collectives are coroutines (``await comm.bcast(...)``); nonblocking ones
(``comm.ibcast(...)``) return a :class:`Request` at once and progress in the background on
the same event loop; persistent ones (``await comm.bcast_init(...)``) have their switch state
installed once, after which every ``start()`` only sends ([Tofu2]). As in MPI, every rank of
a communicator calls its collectives in the same order: the order numbers the instances
(epochs), which is how the frames of overlapping collectives are told apart.

Sizes follow the OSU convention: for bcast the bytes every rank ends with, for scatter and
allgather the block per rank.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from host_agents.collectives import Call, Collective, collective
from host_agents.engine import Engine, EngineError
from host_agents.engine_context import CollectiveError, EngineContext

__all__ = ["Call", "CollectiveError", "Comm", "CommOptions", "Persistent", "Request"]

LOG = logging.getLogger(__name__)
T = TypeVar("T")


class CommService(Protocol):
    """The controller's communicator service, as a host agent sees it."""

    async def create(self, members: tuple[int, ...]) -> tuple[int, bool]: ...
    async def split(
        self, comm_id: int, node: int, color: int, key: int
    ) -> tuple[int, tuple[int, ...], bool] | None: ...
    async def free(self, comm_id: int, node: int) -> None: ...
    async def ensure_trees(self, comm_id: int, root: int) -> float: ...


ACK_MERGE_MODES = ("coroots", "switch")


@dataclass(slots=True)
class CommOptions:
    progress_timeout: float = 15.0  # a message that stops arriving for this long is an error
    # before its first byte a message may legitimately wait for a whole store-and-forward
    # chain of ancestors (a binomial leaf), so that wait is bounded separately; so is a
    # barrier's wait for the slowest rank
    first_data_timeout: float = 120.0
    op_timeout: float = 600.0  # no collective runs longer than this
    check_interval: float = 0.5
    # who merges the receivers' ACKs of an in-network broadcast: "coroots" (one host per
    # dragonfly group) or "switch" (the switches along the tree: the root gets one stream;
    # faster by the ranks' average at 16 KiB on Df(2,4,2), but the root's own completion
    # sometimes waits out several retransmission timeouts: docs/protocol.md)
    ack_merge: str = "coroots"


class Comm:
    def __init__(
        self,
        engine: Engine,
        comm_id: int,
        members: tuple[int, ...],
        *,
        innet: bool = False,
        service: CommService | None = None,
        options: CommOptions | None = None,
    ) -> None:
        if engine.node not in members:
            raise ValueError(f"node {engine.node} is not a member of communicator {comm_id}")
        self.engine = engine
        self.comm_id = comm_id
        self.members = members
        self.rank = members.index(engine.node)
        self.size = len(members)
        self.innet = innet  # switch state for in-network collectives is installed
        self.service = service
        self.options = options or CommOptions()
        if self.options.ack_merge not in ACK_MERGE_MODES:
            raise ValueError(
                f"ack_merge {self.options.ack_merge!r}: expected one of {ACK_MERGE_MODES}"
            )
        self._epoch = 0
        self._barrier_epoch = 0
        self._freed = False
        self.last_choice: str = ""
        # work a collective left running after it returned (a published allgather block kept
        # for repairs until a switch barrier confirms that every rank has it)
        self._background: set[asyncio.Task[None]] = set()
        self._settling = 0
        engine.register_comm(comm_id, members, switch_acks=self.options.ack_merge == "switch")

    # -- ranks and nodes ----------------------------------------------------------------

    def node(self, rank: int) -> int:
        return self.members[rank]

    def rank_of(self, node: int) -> int:
        return self.members.index(node)

    def _next_epoch(self) -> int:
        self._check_live()
        self._epoch = (self._epoch + 1) & 0xFFFF
        self.engine.note_epoch(self.comm_id, self._epoch)
        return self._epoch

    def resume_barrier_epochs(self, released: int) -> None:
        """Continue the switches' barrier epochs (an earlier job on this communicator left
        them at ``released``); call before the first barrier."""
        self._barrier_epoch = released & 0xFFFF
        self.engine.resume_barrier(self.comm_id, self._barrier_epoch)

    def next_barrier_epoch(self) -> int:
        """The communicator's next switch-barrier epoch (the switches count them)."""
        self._barrier_epoch = (self._barrier_epoch + 1) & 0xFFFF
        return self._barrier_epoch

    def in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after the collective that started it returned; :meth:`settle` and
        :meth:`free` wait for it."""
        task = self.engine.loop.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def settle(self) -> None:
        """Wait for the work collectives left running (each bounds its own waits)."""
        self._settling += 1
        try:
            while self._background:
                # a published block's confirmation is patient until somebody waits on it
                self.engine.barriers.hurry(self.comm_id)
                await asyncio.gather(*self._background, return_exceptions=True)
        finally:
            self._settling -= 1

    @property
    def settling(self) -> bool:
        """Somebody waits for this communicator's background work (:meth:`settle`)."""
        return self._settling > 0

    def _check_live(self) -> None:
        if self._freed:
            raise CollectiveError(f"rank {self.rank}: communicator {self.comm_id} was freed")

    def _check_root(self, root: int) -> None:
        if not 0 <= root < self.size:
            raise CollectiveError(
                f"rank {self.rank}: root {root} is not a rank of communicator {self.comm_id} "
                f"(size {self.size})"
            )

    def _choose(self, coll: Collective[Any], algorithm: str, nbytes: int) -> str:
        name, reason = coll.choose(algorithm, nbytes, self.size, self.innet)
        if algorithm == "auto" and self.rank == 0:
            LOG.info(
                "%s of %d bytes on %d ranks: auto picked %s (%s)",
                coll.name,
                nbytes,
                self.size,
                name,
                reason,
            )
        if coll.algorithms[name].needs_switch_state and not self.innet:
            raise CollectiveError(
                f"rank {self.rank}: {coll.name} algorithm {name!r} needs in-network state, "
                f"which communicator {self.comm_id} does not have"
            )
        self.last_choice = name
        return name

    # -- any collective of the registry (host_agents.collectives) ---------------------------

    def start(
        self, which: str | Collective[Any], call: Call, *, algorithm: str = "auto"
    ) -> Request[Any]:
        """Start a collective of the registry, nonblocking; ``call`` is this rank's part."""
        coll = collective(which) if isinstance(which, str) else which
        if coll.has_root:
            self._check_root(call.root)
        problem = coll.check(self.rank, self.size, call)
        if problem is not None:
            raise CollectiveError(f"rank {self.rank}: {problem}")
        name = self._choose(coll, algorithm, call.size)
        chosen = coll.algorithms[name]
        if chosen.barrier_epochs:
            self._check_live()
            epoch = self.next_barrier_epoch()
        else:
            epoch = self._next_epoch()
        ctx = EngineContext(self, epoch, f"{coll.name}({name})")
        request = self._launch(ctx, coll.execute(chosen.run, ctx, call))
        if not chosen.barrier_epochs:
            request.task.add_done_callback(
                lambda _task: self.engine.epoch_finished(self.comm_id, epoch)
            )
        return request

    async def run(
        self, which: str | Collective[Any], call: Call, *, algorithm: str = "auto"
    ) -> Any:
        """A collective of the registry, blocking."""
        return await self.start(which, call, algorithm=algorithm).wait()

    async def init(
        self,
        which: str | Collective[Any],
        *,
        root: int = 0,
        size: int,
        algorithm: str = "auto",
        op: str = "sum",
    ) -> Persistent[Any]:
        """Prepare a collective once (switch state included); each start(data) only sends."""
        coll = collective(which) if isinstance(which, str) else which
        if coll.has_root:
            self._check_root(root)
        name = self._choose(coll, algorithm, size)
        started = time.perf_counter()
        if coll.algorithms[name].needs_switch_state and coll.has_root and self.service:
            await self.service.ensure_trees(self.comm_id, self.node(root))
        init_s = time.perf_counter() - started

        def start(data: bytes | bytearray | None) -> Request[Any]:
            return self.start(coll, Call(data, root, size, op), algorithm=name)

        return Persistent(start, init_s, name)

    def _launch(self, ctx: EngineContext, work: Awaitable[T]) -> Request[T]:
        async def run() -> T:
            try:
                return await work
            except CollectiveError:
                raise
            except EngineError as exc:
                raise ctx.error(str(exc)) from exc

        return Request(self.engine.loop.create_task(run()), ctx)

    # -- the four collectives by name (MPI's signatures) ----------------------------------------

    async def bcast(
        self,
        buf: bytes | bytearray | None,
        root: int,
        *,
        size: int | None = None,
        algorithm: str = "auto",
    ) -> bytearray:
        """Every rank returns the root's ``size`` bytes."""
        return await self.ibcast(buf, root, size=size, algorithm=algorithm).wait()

    async def barrier(self, *, algorithm: str = "auto") -> None:
        await self.ibarrier(algorithm=algorithm).wait()

    async def scatter(
        self, sendbuf: bytes | bytearray | None, root: int, *, block: int, algorithm: str = "auto"
    ) -> bytearray:
        """Rank i returns block i of the root's ``size * block`` bytes."""
        return await self.iscatter(sendbuf, root, block=block, algorithm=algorithm).wait()

    async def allgather(
        self, block_data: bytes | bytearray, *, algorithm: str = "auto"
    ) -> bytearray:
        """Every rank returns the concatenation of every rank's block, in rank order."""
        return await self.iallgather(block_data, algorithm=algorithm).wait()

    def ibcast(
        self,
        buf: bytes | bytearray | None,
        root: int,
        *,
        size: int | None = None,
        algorithm: str = "auto",
    ) -> Request[bytearray]:
        if size is None:
            if self.rank != root or buf is None:
                raise CollectiveError(f"rank {self.rank}: non-root ranks must give the bcast size")
            size = len(buf)
        return self.start("bcast", Call(buf, root, size), algorithm=algorithm)

    def ibarrier(self, *, algorithm: str = "auto") -> Request[None]:
        return self.start("barrier", Call(), algorithm=algorithm)

    def iscatter(
        self, sendbuf: bytes | bytearray | None, root: int, *, block: int, algorithm: str = "auto"
    ) -> Request[bytearray]:
        return self.start("scatter", Call(sendbuf, root, block), algorithm=algorithm)

    def iallgather(
        self, block_data: bytes | bytearray, *, algorithm: str = "auto"
    ) -> Request[bytearray]:
        return self.start("allgather", Call(block_data, 0, len(block_data)), algorithm=algorithm)

    async def bcast_init(
        self, root: int, *, size: int, algorithm: str = "auto"
    ) -> Persistent[bytearray]:
        """Prepare a bcast once (switch state included); each start() then only sends."""
        return await self.init("bcast", root=root, size=size, algorithm=algorithm)

    async def barrier_init(self, *, algorithm: str = "auto") -> Persistent[None]:
        return await self.init("barrier", size=0, algorithm=algorithm)

    async def scatter_init(
        self, root: int, *, block: int, algorithm: str = "auto"
    ) -> Persistent[bytearray]:
        return await self.init("scatter", root=root, size=block, algorithm=algorithm)

    async def allgather_init(self, *, block: int, algorithm: str = "auto") -> Persistent[bytearray]:
        return await self.init("allgather", size=block, algorithm=algorithm)

    # -- communicator management -----------------------------------------------------------------

    async def split(self, color: int, key: int = 0) -> Comm | None:
        """MPI_Comm_split through the controller: ranks with the same color form a new
        communicator ordered by (key, rank); color < 0 means "not in any"."""
        if self.service is None:
            raise CollectiveError(f"rank {self.rank}: split needs the communicator service")
        answer = await self.service.split(self.comm_id, self.engine.node, color, key)
        if answer is None:
            return None
        comm_id, members, innet = answer
        return Comm(
            self.engine, comm_id, members, innet=innet, service=self.service, options=self.options
        )

    async def free(self) -> None:
        if self._freed:
            return
        await self.settle()
        if self.service is not None:
            await self.service.free(self.comm_id, self.engine.node)
        self.engine.forget_comm(self.comm_id)
        self._freed = True


class Request(Awaitable[T]):
    """A nonblocking collective in progress."""

    def __init__(self, task: asyncio.Task[T], ctx: EngineContext) -> None:
        self.task = task
        self.ctx = ctx

    def test(self) -> bool:
        """True once the collective completed (successfully or not); never blocks."""
        return self.task.done()

    async def wait(self) -> T:
        return await self.task

    def __await__(self):  # type: ignore[no-untyped-def]
        return self.task.__await__()


class Persistent(Awaitable[T]):
    """A persistent collective: prepared once, started many times (start, wait, ... free)."""

    def __init__(
        self,
        start: Callable[[bytes | bytearray | None], Request[T]],
        init_seconds: float,
        algorithm: str,
    ) -> None:
        self._start = start
        self.init_seconds = init_seconds
        self.algorithm = algorithm
        self.current: Request[T] | None = None
        self.starts = 0
        self.freed = False

    def start(self, buf: bytes | bytearray | None = None) -> Request[T]:
        if self.freed:
            raise CollectiveError("start() on a freed persistent request")
        if self.current is not None and not self.current.test():
            raise CollectiveError("start() while the previous start has not completed (call wait)")
        self.current = self._start(buf)
        self.starts += 1
        return self.current

    async def wait(self) -> T:
        if self.current is None:
            raise CollectiveError("wait() before start()")
        return await self.current.wait()

    def test(self) -> bool:
        return self.current is not None and self.current.test()

    def free(self) -> None:
        self.freed = True

    def __await__(self):  # type: ignore[no-untyped-def]
        return self.wait().__await__()
