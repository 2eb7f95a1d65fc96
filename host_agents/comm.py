"""The MPI-like API of one host: communicators and their collectives.

Blocking collectives are coroutines (``await comm.bcast(...)``); nonblocking ones
(``comm.ibcast(...)``) return a :class:`Request` at once and progress in the background on
the same event loop; persistent ones (``await comm.bcast_init(...)``) have their switch state
installed once, after which every ``start()`` only sends (seed 002). As in MPI, every rank of
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

from controller import wire
from host_agents import algorithms
from host_agents.engine import Engine, EngineError, Incoming, Source

LOG = logging.getLogger(__name__)
T = TypeVar("T")


class CollectiveError(Exception):
    """A collective failed; the message names the rank, the collective and the step."""


class CommService(Protocol):
    """The controller's communicator service, as a host agent sees it."""

    async def create(self, members: tuple[int, ...]) -> tuple[int, bool]: ...
    async def split(
        self, comm_id: int, node: int, color: int, key: int
    ) -> tuple[int, tuple[int, ...], bool] | None: ...
    async def free(self, comm_id: int, node: int) -> None: ...
    async def ensure_trees(self, comm_id: int, root: int) -> float: ...


@dataclass(slots=True)
class CommOptions:
    progress_timeout: float = 15.0  # a message that stops arriving for this long is an error
    # before its first byte a message may legitimately wait for a whole store-and-forward
    # chain of ancestors (a binomial leaf), so that wait is bounded separately; so is a
    # barrier's wait for the slowest rank
    first_data_timeout: float = 120.0
    op_timeout: float = 600.0  # no collective runs longer than this
    check_interval: float = 0.5


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
        self._epoch = 0
        self._barrier_epoch = 0
        self._freed = False
        self.last_choice: str = ""
        engine.register_comm(comm_id, members)

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

    def _next_barrier_epoch(self) -> int:
        self._barrier_epoch = (self._barrier_epoch + 1) & 0xFFFF
        return self._barrier_epoch

    def _check_live(self) -> None:
        if self._freed:
            raise CollectiveError(f"rank {self.rank}: communicator {self.comm_id} was freed")

    def _check_root(self, root: int) -> None:
        if not 0 <= root < self.size:
            raise CollectiveError(
                f"rank {self.rank}: root {root} is not a rank of communicator {self.comm_id} "
                f"(size {self.size})"
            )

    def _choose(self, kind: str, algorithm: str, nbytes: int) -> str:
        name, reason = algorithms.choose(kind, algorithm, nbytes, self.size, self.innet)
        if algorithm == "auto" and self.rank == 0:
            LOG.info(
                "%s of %d bytes on %d ranks: auto picked %s (%s)",
                kind,
                nbytes,
                self.size,
                name,
                reason,
            )
        if name in algorithms.NEEDS_SWITCH_STATE and not self.innet:
            raise CollectiveError(
                f"rank {self.rank}: {kind} algorithm {name!r} needs in-network state, which "
                f"communicator {self.comm_id} does not have"
            )
        self.last_choice = name
        return name

    # -- blocking collectives ---------------------------------------------------------------

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

    # -- nonblocking collectives --------------------------------------------------------------

    def ibcast(
        self,
        buf: bytes | bytearray | None,
        root: int,
        *,
        size: int | None = None,
        algorithm: str = "auto",
    ) -> Request[bytearray]:
        self._check_root(root)
        if self.rank == root:
            if buf is None:
                raise CollectiveError(f"rank {self.rank}: the root of a bcast must pass the data")
            size = len(buf) if size is None else size
            if len(buf) != size:
                raise CollectiveError(
                    f"rank {self.rank}: bcast buffer of {len(buf)} bytes, size says {size}"
                )
        elif size is None:
            raise CollectiveError(f"rank {self.rank}: non-root ranks must give the bcast size")
        name = self._choose("bcast", algorithm, size)
        epoch = self._next_epoch()
        data = bytearray(buf) if self.rank == root and buf is not None else bytearray(size)
        ctx = CollCtx(self, epoch, f"bcast({name})")
        return self._launch(ctx, algorithms.BCAST[name](ctx, data, root), lambda: data)

    def ibarrier(self, *, algorithm: str = "auto") -> Request[None]:
        name = self._choose("barrier", algorithm, 0)
        if name == "innet":
            self._check_live()
            epoch = self._next_barrier_epoch()
            ctx = CollCtx(self, epoch, f"barrier({name})")
        else:
            ctx = CollCtx(self, self._next_epoch(), f"barrier({name})")
        return self._launch(ctx, algorithms.BARRIER[name](ctx), lambda: None)

    def iscatter(
        self, sendbuf: bytes | bytearray | None, root: int, *, block: int, algorithm: str = "auto"
    ) -> Request[bytearray]:
        self._check_root(root)
        if self.rank == root and (sendbuf is None or len(sendbuf) != block * self.size):
            got = None if sendbuf is None else len(sendbuf)
            raise CollectiveError(
                f"rank {self.rank}: scatter root needs {block * self.size} bytes "
                f"({self.size} blocks of {block}), got {got}"
            )
        name = self._choose("scatter", algorithm, block)
        ctx = CollCtx(self, self._next_epoch(), f"scatter({name})")
        out = bytearray(block)
        source = memoryview(bytes(sendbuf)) if self.rank == root and sendbuf is not None else None
        return self._launch(
            ctx, algorithms.SCATTER[name](ctx, source, out, root, block), lambda: out
        )

    def iallgather(
        self, block_data: bytes | bytearray, *, algorithm: str = "auto"
    ) -> Request[bytearray]:
        block = len(block_data)
        name = self._choose("allgather", algorithm, block)
        ctx = CollCtx(self, self._next_epoch(), f"allgather({name})")
        out = bytearray(block * self.size)
        out[self.rank * block : (self.rank + 1) * block] = block_data
        return self._launch(ctx, algorithms.ALLGATHER[name](ctx, out, block), lambda: out)

    def _launch(
        self, ctx: CollCtx, work: Coroutine[Any, Any, None], result: Callable[[], T]
    ) -> Request[T]:
        async def run() -> T:
            try:
                await work
            except CollectiveError:
                raise
            except EngineError as exc:
                raise ctx.error(str(exc)) from exc
            return result()

        return Request(self.engine.loop.create_task(run()), ctx)

    # -- persistent collectives ----------------------------------------------------------------

    async def bcast_init(
        self, root: int, *, size: int, algorithm: str = "auto"
    ) -> Persistent[bytearray]:
        """Prepare a bcast once (switch state included); each start() then only sends."""
        self._check_root(root)
        name = self._choose("bcast", algorithm, size)
        started = time.perf_counter()
        if name in algorithms.NEEDS_SWITCH_STATE and self.service is not None:
            await self.service.ensure_trees(self.comm_id, self.node(root))
        init_s = time.perf_counter() - started

        def start(buf: bytes | bytearray | None) -> Request[bytearray]:
            return self.ibcast(buf, root, size=size, algorithm=name)

        return Persistent(start, init_s, name)

    async def barrier_init(self, *, algorithm: str = "auto") -> Persistent[None]:
        name = self._choose("barrier", algorithm, 0)
        return Persistent(lambda _buf: self.ibarrier(algorithm=name), 0.0, name)

    async def scatter_init(
        self, root: int, *, block: int, algorithm: str = "auto"
    ) -> Persistent[bytearray]:
        name = self._choose("scatter", algorithm, block)
        return Persistent(
            lambda buf: self.iscatter(buf, root, block=block, algorithm=name), 0.0, name
        )

    async def allgather_init(self, *, block: int, algorithm: str = "auto") -> Persistent[bytearray]:
        name = self._choose("allgather", algorithm, block)

        def start(buf: bytes | bytearray | None) -> Request[bytearray]:
            if buf is None or len(buf) != block:
                raise CollectiveError(
                    f"rank {self.rank}: allgather start needs a {block}-byte block"
                )
            return self.iallgather(buf, algorithm=name)

        return Persistent(start, 0.0, name)

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
        if self.service is not None:
            await self.service.free(self.comm_id, self.engine.node)
        self.engine.forget_comm(self.comm_id)
        self._freed = True


class CollCtx:
    """One collective instance as its algorithm sees it: ranks, tags and bounded waits."""

    def __init__(self, comm: Comm, epoch: int, name: str) -> None:
        self.comm = comm
        self.engine = comm.engine
        self.epoch = epoch
        self.name = name
        self.rank = comm.rank
        self.size = comm.size
        self.step = "start"
        self.started = comm.engine.loop.time()

    def node(self, rank: int) -> int:
        return self.comm.members[rank]

    def error(self, detail: str) -> CollectiveError:
        return CollectiveError(
            f"rank {self.rank} (node {self.engine.node}): {self.name} on communicator "
            f"{self.comm.comm_id}, instance {self.epoch}, step {self.step}: {detail}"
        )

    # point to point -------------------------------------------------------------------------

    def isend(
        self, dst: int, tag: int, data: Source | bytes | bytearray | memoryview
    ) -> asyncio.Future[None]:
        return self.engine.send_message(self.node(dst), self.comm.comm_id, self.epoch, tag, data)

    async def send(self, dst: int, tag: int, data: Source | bytes | bytearray | memoryview) -> None:
        await self.wait(self.isend(dst, tag, data), f"sending to rank {dst}")

    def irecv(self, src: int, tag: int, size: int) -> Incoming:
        try:
            return self.engine.incoming(self.node(src), self.comm.comm_id, self.epoch, tag, size)
        except EngineError as exc:
            raise self.error(f"from rank {src}: {exc}") from exc

    async def recv(self, src: int, tag: int, size: int) -> bytearray:
        msg = self.irecv(src, tag, size)
        data = await self.wait_incoming(msg, f"waiting for rank {src}")
        return data

    async def wait_incoming(self, msg: Incoming, what: str) -> bytearray:
        data = await self.wait(msg.done, what, progress=lambda: msg.n_received)
        self.engine.consume(msg)
        return data

    async def wait(
        self, fut: Awaitable[T], what: str, *, progress: Callable[[], int] | None = None
    ) -> T:
        """Await ``fut``, bounded. A receive (``progress`` counts what arrived) fails when its
        first segment has not come within first_data_timeout or it stops arriving for
        progress_timeout; sends and multicasts are failed by the engine when their peers stop
        acknowledging (peer_timeout); anything fails past op_timeout."""
        opts = self.comm.options
        loop = self.engine.loop
        task = asyncio.ensure_future(fut)
        last = progress() if progress else 0
        last_change = loop.time()
        while True:
            now = loop.time()
            remaining = self.started + opts.op_timeout - now
            if remaining <= 0:
                raise self.error(f"{what}: gave up after {opts.op_timeout:.0f} s")
            try:
                return await asyncio.wait_for(
                    asyncio.shield(task), min(opts.check_interval, remaining)
                )
            except TimeoutError:
                pass
            except EngineError as exc:
                raise self.error(f"{what}: {exc}") from exc
            now = loop.time()
            current = progress() if progress else last
            if current != last:
                last, last_change = current, now
            elif progress is not None and now - last_change > (
                opts.progress_timeout if current else opts.first_data_timeout
            ):
                task.cancel()
                if current:
                    raise self.error(
                        f"{what}: stalled, no new segment for {now - last_change:.1f} s "
                        f"after {current} arrived"
                    )
                raise self.error(f"{what}: nothing arrived for {now - last_change:.1f} s")

    async def switch_barrier(self) -> None:
        """An in-network barrier inside this collective (every rank calls it at the same
        point, so it takes the communicator's next barrier epoch everywhere)."""
        epoch = self.comm._next_barrier_epoch()
        opts = self.comm.options
        await self.wait(
            self.engine.barrier_arrive(self.comm.comm_id, epoch, opts.first_data_timeout),
            f"switch barrier epoch {epoch}",
        )

    async def wait_all(self, futures: list[asyncio.Future[Any]], what: str) -> None:
        for fut in futures:
            await self.wait(fut, what)

    # topology --------------------------------------------------------------------------------

    def group_of(self, rank: int) -> int:
        return self.engine.directory.group_of(self.node(rank))

    def switch_of(self, rank: int) -> int:
        return self.engine.directory.switch_of(self.node(rank))

    def released(self) -> int:
        return self.engine.released_epoch(self.comm.comm_id)

    @property
    def tree_innet(self) -> int:
        return wire.Tree.INNET


class Request(Awaitable[T]):
    """A nonblocking collective in progress."""

    def __init__(self, task: asyncio.Task[T], ctx: CollCtx) -> None:
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
