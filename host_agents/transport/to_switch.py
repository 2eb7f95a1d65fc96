"""What a host asks its own switch, resent until the switch answers: REDUCE until RESULT (the
barrier's ARRIVE has timers of its own: transport/arrive_resends.py). Switches keep no timers,
so the host's retransmissions drive recovery, and a switch answers a duplicate without
counting it twice, so resending is always safe.

The resends are timer callbacks on the answer's future, not a coroutine: the answer wakes its
waiter directly. A coroutine looping over ``wait_for(shield(...))`` cost a barrier several
event-loop passes and a task of its own on every rank (docs/performance.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from host_agents.transport.config import PeerTimeout
from host_agents.transport.endpoint import Endpoint

T = TypeVar("T")


def own_switch(endpoint: Endpoint) -> int:
    """The switch this host hangs off (0 when the directory does not place it)."""
    directory = endpoint.directory
    return directory.switch_of(endpoint.node) if endpoint.node in directory.places else 0


def resend_until_answered(
    endpoint: Endpoint,
    waiter: asyncio.Future[T],
    send: Callable[[bool], None],
    timeout: float,
    what: str,
    backoff_max: float,
) -> None:
    """``send(False)`` now, then ``send(True)`` (a retransmission) with exponential backoff
    from ``barrier_rto`` to ``backoff_max`` until ``waiter`` completes; after ``timeout``
    seconds ``waiter`` fails with a PeerTimeout naming the host's switch and ``what`` it was
    waiting for. Returns at once; the timers stop when ``waiter`` is done (or cancelled)."""
    loop = endpoint.loop
    deadline = loop.time() + timeout
    delay = endpoint.cfg.barrier_rto
    timer: asyncio.TimerHandle | None = None

    def arm() -> None:
        nonlocal timer
        timer = loop.call_at(min(loop.time() + delay, deadline), expire)

    def expire() -> None:
        nonlocal delay
        if waiter.done():
            return
        if loop.time() >= deadline:
            waiter.set_exception(PeerTimeout(own_switch(endpoint), what, timeout))
            return
        send(True)
        delay = min(delay * 2, backoff_max)
        arm()

    def stop(_done: asyncio.Future[T]) -> None:
        if timer is not None:
            timer.cancel()

    send(False)
    if waiter.done():  # answered synchronously (an in-process fabric delivers at once)
        return
    arm()
    waiter.add_done_callback(stop)
