"""Changes to the set of communicators: computed off the event loop, committed in batches.

A create, a free or a new root changes the set of communicators, and every switch's desired
state is computed again from the whole set (:func:`controller.desired_state.desired_state`):
pure Python, seconds with several world-sized communicators on Df(2,4,2) (3.6 s for seven, 86 s
on a loaded machine). The communicator service answers every host from one event loop, so that
computation runs on one worker thread (:class:`StateWorker`), and meanwhile the loop answers
rendezvous, status and every other request. The pushes to the switches stay on the loop: they
are asynchronous I/O.

:class:`ChangeQueue` serialises the changes. One committer at a time takes every change queued
so far (a batch), applies them in order to the current set, computes the desired state once
and pushes it once, all under the control plane's lock (so a restarting switch's resume never
interleaves with a change). Each caller is answered once its change is on the switches, or
with its own error:

* a change that is invalid on the set before it (an unknown communicator, a root that is not
  a member) fails alone, before anything is computed;
* a batch whose computation fails (it does not fit, a node is not a host) is redone one change
  at a time, so each gets the verdict it would have got alone;
* a push a switch refuses undoes the whole batch, and each of its callers gets that error.

Every wait is bounded: a computation by ``compute_timeout`` (past it the batch fails and nothing
changed; the thread finishes the abandoned computation before the next) and a caller's wait for
its change by ``timeout``. A caller that leaves before its change was taken withdraws it. A
change's ``settled`` hook is told once whether it was carried out, when that is known, whether
or not its caller still waits (the service charges hosts for communicators there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from controller.desired_state import Communicator
from controller.switch_state import SwitchState

LOG = logging.getLogger(__name__)

T = TypeVar("T")
Comms = dict[int, Communicator]
States = dict[int, SwitchState]
# the set after the change, and what the change is (for errors and logs); raises if invalid
Edit = Callable[[Comms], tuple[Comms, str]]
Pushed = tuple[int, int]  # P4Runtime changes, mini packets
# told once, on the event loop, whether the change was carried out (False: failed, withdrawn)
Settled = Callable[[bool], None]


class CommunicatorError(Exception):
    """A communicator request that was refused or could not be carried out; nothing changed."""


class ComputeTimeout(CommunicatorError):
    """The desired state was not computed in time (the whole batch fails: no redo)."""


class StateWorker:
    """One thread that computes desired states, one at a time, in the order asked."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._pool: ThreadPoolExecutor | None = None

    async def run(self, compute: Callable[[], T], what: str) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="netcoll-desired-state")
        running = asyncio.get_running_loop().run_in_executor(self._pool, compute)
        try:
            return await asyncio.wait_for(running, self.timeout)
        except TimeoutError:
            if not running.cancelled():  # the computation's own TimeoutError
                raise
            raise ComputeTimeout(
                f"computing the switch state for {what} took more than {self.timeout:g} s: "
                "nothing changed"
            ) from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class Target(Protocol):
    """What the queue changes: the control plane."""

    comms: Comms
    states: States

    async def recompute(self, comms: Comms, what: str) -> States: ...
    async def push(self) -> Pushed: ...


@dataclass(eq=False)
class _Change:
    edit: Edit
    done: asyncio.Future[Pushed]
    what: str = "a change"
    taken: bool = False  # in a batch: it is carried out whether its caller waits or not
    settled: Settled | None = None

    def settle(self, result: Pushed | None = None, error: BaseException | None = None) -> None:
        if self.done.done():
            return
        if error is not None:
            self.done.set_exception(error)
        else:
            self.done.set_result(result or (0, 0))
        self._tell(error is None)

    def withdraw(self) -> None:
        """Its caller left before it was taken: it is not carried out."""
        self.done.cancel()
        self._tell(False)

    def _tell(self, carried_out: bool) -> None:
        settled, self.settled = self.settled, None
        if settled is None:
            return
        try:
            settled(carried_out)
        except Exception:
            LOG.exception("the settled hook of %s failed", self.what)


class ChangeQueue:
    def __init__(self, target: Target, lock: asyncio.Lock, *, timeout: float) -> None:
        self.target = target
        self.lock = lock
        self.timeout = timeout
        self.batches = 0  # committed or failed, for tests and logs
        self._queue: list[_Change] = []
        self._committer: asyncio.Task[None] | None = None

    async def submit(self, edit: Edit, settled: Settled | None = None) -> Pushed:
        """Carry out one change: returns once it is on every switch that is up (what the
        push wrote), or raises its error. ``settled`` is told the outcome even if the caller
        leaves meanwhile; the change is queued (so it will be told) before anything awaits."""
        loop = asyncio.get_running_loop()
        change = _Change(edit, loop.create_future(), settled=settled)
        self._queue.append(change)
        if self._committer is None or self._committer.done():
            self._committer = loop.create_task(self._drain(), name="netcoll-changes")
        try:
            return await asyncio.wait_for(asyncio.shield(change.done), self.timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if not change.taken and change in self._queue:
                self._queue.remove(change)  # withdrawn: nothing changed
                change.withdraw()
            if not isinstance(exc, TimeoutError):
                raise
            if not change.taken:
                raise CommunicatorError(
                    f"the change waited more than {self.timeout:g} s for the ones before it: "
                    "nothing changed"
                ) from None
            raise CommunicatorError(
                f"{change.what} was not installed within {self.timeout:g} s (it still may be)"
            ) from None

    async def close(self) -> None:
        """The control plane stops: whoever waits gets an error, nobody hangs."""
        if self._committer is not None and not self._committer.done():
            self._committer.cancel()
            await asyncio.gather(self._committer, return_exceptions=True)
        queued, self._queue = self._queue, []
        for change in queued:
            change.settle(error=CommunicatorError("the control plane stopped"))

    async def _drain(self) -> None:
        # nothing is awaited between the last look at the queue and this task's end, so a
        # change queued after that look finds the task done and starts another
        while self._queue:
            async with self.lock:
                batch, self._queue = self._queue, []
                for change in batch:
                    change.taken = True
                try:
                    await self._commit_settling(batch)
                except BaseException:
                    stopped = CommunicatorError("the control plane stopped during the change")
                    for change in batch:
                        change.settle(error=stopped)
                    raise

    async def _commit_settling(self, batch: list[_Change]) -> None:
        try:
            await self._commit(batch)
        except Exception as exc:
            for change in batch:
                change.settle(error=exc)

    async def _commit(self, batch: list[_Change]) -> None:
        target = self.target
        previous, previous_states = target.comms, target.states
        comms, applied = previous, []
        for change in batch:
            try:
                comms, change.what = change.edit(comms)
            except Exception as exc:
                change.settle(error=exc)
            else:
                if comms is previous:  # nothing to change: what it asks for is installed
                    change.settle((0, 0))
                else:
                    applied.append(change)
        if not applied:
            return
        self.batches += 1
        what = " and ".join(c.what for c in applied)
        try:
            states = await target.recompute(comms, what)
        except ComputeTimeout:
            raise
        except Exception:
            if len(applied) == 1:
                raise
            for change in applied:  # each alone, on the set the ones before it left
                await self._commit_settling([change])
            return
        target.comms, target.states = comms, states
        try:
            pushed = await target.push()
        except CommunicatorError as exc:
            target.comms = previous
            try:
                target.states = await target.recompute(previous, f"undoing {what}")
            except Exception as again:
                LOG.error("recomputing the state before %s failed (%s): kept it", what, again)
                target.states = previous_states
            try:
                await target.push()
            except CommunicatorError as again:
                LOG.error(
                    "undoing %s failed too (%s): such a switch is reprogrammed from the "
                    "desired state when its session comes back",
                    what,
                    again,
                )
            verb = "was" if len(applied) == 1 else "were"
            raise CommunicatorError(f"{what} {verb} not installed and undone: {exc}") from exc
        for change in applied:
            change.settle(pushed)
