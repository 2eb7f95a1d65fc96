"""Communicators a host asks for with other hosts in them: installed only with their consent.

MPI_Comm_create is collective: every member calls it. The service keeps it so for hosts: a
host may create a communicator of itself alone at once, but one with other members is
installed only when every member asked for the same one (same members in the same order, same
roots and membership), so no host can spend switch slots, or communicator ids, on communicators
of hosts that did not ask (``docs/protocol.md``, threat model). A proposal that not every
member joins within ``timeout`` fails for those who asked; each node has at most ``per_node``
proposals open.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from controller.refusals import Refused

TIMEOUT = 60.0
PER_NODE = 4


@dataclass
class _Proposal:
    members: frozenset[int]
    asked: set[int] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    result: Any = None
    error: BaseException | None = None


class Consents:
    def __init__(self, *, timeout: float = TIMEOUT, per_node: int = PER_NODE) -> None:
        self.timeout = timeout
        self.per_node = per_node
        self._open: dict[Hashable, _Proposal] = {}

    def held_by(self, node: int) -> int:
        return sum(1 for p in self._open.values() if node in p.asked)

    async def agree(
        self,
        key: Hashable,
        node: int,
        members: frozenset[int],
        install: Callable[[], Awaitable[Any]],
    ) -> Any:
        """``node`` asks for the communicator ``key`` of ``members``; ``install`` runs once,
        when the last member asked, and every asker gets its result (or its error)."""
        proposal = self._open.get(key)
        if (proposal is None or node not in proposal.asked) and self.held_by(node) >= self.per_node:
            raise Refused(f"node {node} already has {self.per_node} creates waiting for consent")
        if proposal is None:
            proposal = self._open[key] = _Proposal(members)
        proposal.asked.add(node)
        if proposal.asked == proposal.members:
            del self._open[key]
            try:
                proposal.result = await install()
            except Exception as exc:
                proposal.error = exc
                raise
            finally:
                proposal.done.set()
            return proposal.result
        try:
            await asyncio.wait_for(proposal.done.wait(), self.timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if not proposal.done.is_set():
                proposal.asked.discard(node)
                if not proposal.asked and self._open.get(key) is proposal:
                    del self._open[key]
            if isinstance(exc, TimeoutError):
                missing = sorted(proposal.members - proposal.asked)
                raise Refused(
                    f"create of {sorted(proposal.members)}: nodes {missing} did not consent "
                    f"within {self.timeout:g} s"
                ) from None
            raise
        if proposal.error is not None:
            raise Refused(f"create failed: {proposal.error}")
        return proposal.result
