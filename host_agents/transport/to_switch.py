"""What a host asks its own switch, resent until the switch answers: ARRIVE until RELEASE,
REDUCE until RESULT. Switches keep no timers, so the host's retransmissions drive recovery, and
a switch answers a duplicate without counting it twice, so resending is always safe.
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


async def until_answered(
    endpoint: Endpoint,
    waiter: asyncio.Future[T],
    send: Callable[[bool], None],
    timeout: float,
    what: str,
    backoff_max: float,
) -> T:
    """``send(False)`` once, then ``send(True)`` (a retransmission) with exponential backoff
    from ``barrier_rto`` to ``backoff_max`` until ``waiter`` completes; after ``timeout``
    seconds a PeerTimeout naming the host's switch and ``what`` it was waiting for."""
    cfg, loop = endpoint.cfg, endpoint.loop
    delay = cfg.barrier_rto
    deadline = loop.time() + timeout
    send(False)
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise PeerTimeout(own_switch(endpoint), what, timeout)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), min(delay, remaining))
        except TimeoutError:
            send(True)
            delay = min(delay * 2, backoff_max)
