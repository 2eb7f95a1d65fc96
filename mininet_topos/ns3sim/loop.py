"""An asyncio event loop whose clock is ns-3's simulated time.

asyncio asks its selector to wait for I/O until the next timer is due; here that wait is ns-3
running, until the next timer or until a message completes, whichever is first. So the
algorithms' ``asyncio.wait(..., timeout=...)``, ``loop.time()`` and futures all work unchanged,
and one second of timer is one simulated second. When every coroutine waits, no timer is
pending and ns-3 has no event left, nothing can ever happen again: :class:`SimStall`; so is an
idle network with messages still owed to a receiver (a switch queue dropped a packet).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class SimStall(RuntimeError):
    """Every coroutine waits for a message the network will never deliver."""


class _SimSelector:
    """The part of a selector BaseEventLoop uses: select(timeout)."""

    def __init__(self, loop: SimLoop) -> None:
        self.loop = loop

    def select(self, timeout: float | None) -> list[Any]:
        loop = self.loop
        if timeout == 0:
            return []
        until = -1.0 if timeout is None else loop.now + timeout
        loop.advance(until)
        return []

    def close(self) -> None:
        pass


class SimLoop(asyncio.BaseEventLoop):
    """Drive ``advance(until)`` (run ns-3, then hand completed messages to ``deliver``)."""

    def __init__(
        self,
        run_until: Callable[[float], int],
        now: Callable[[], float],
        idle: Callable[[], bool],
        deliver: Callable[[], None],
        lost: Callable[[], str],
    ) -> None:
        super().__init__()
        self._selector = _SimSelector(self)
        self._run_until = run_until
        self._sim_now = now
        self._idle = idle
        self._deliver = deliver
        self._lost = lost
        self.now = 0.0
        self.describe_waiters: Callable[[], str] = lambda: ""

    def time(self) -> float:
        return self.now

    def advance(self, until: float) -> None:
        completed = self._run_until(until)
        self.now = self._sim_now()
        if completed:
            self._deliver()
            return
        if not self._idle():
            return
        # the network is idle: a message still on its way will never arrive
        lost = self._lost()
        if lost:
            raise SimStall(lost)
        if until < 0:
            raise SimStall(
                "the network is idle and no timer is pending, but collectives still wait: "
                + self.describe_waiters()
            )

    # what BaseEventLoop leaves to subclasses
    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        pass

    def close(self) -> None:
        self._selector = None  # type: ignore[assignment]
        super().close()
