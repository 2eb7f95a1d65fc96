"""Rendezvous of a job's agents at the communicator service, safe against other hosts.

A meeting is named by the job (``name``), and is also *defined* by who meets: the member set
(a communicator's, when the request names one, else the list the request gives) and the
communicator. Meetings with the same name but other members are other meetings, so a host can
neither complete a job's meeting (it is not one of its members), nor pin its name with a
meeting of its own (that one has other members), nor answer a waiting member early (a meeting
completes when *every* member joined, not when a count the joiner chose is reached). The
answer, including the barrier epoch of the meeting's communicator, is the meeting's, whoever
completed it. Each node holds at most ``per_node`` open meetings (so no host fills the table
for others), and a meeting expires ``ttl`` seconds after it opened: its waiters get an error
naming who never came, and a waiter that leaves (its connection closed) leaves the meeting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from controller.refusals import Refused

PER_NODE = 4  # open meetings a node may be waiting in at once
TTL = 900.0  # seconds a meeting may stay open


@dataclass
class _Meeting:
    members: frozenset[int]
    comm_id: int | None
    opened: float
    joined: set[int] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    answer: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


MeetingKey = tuple[str, frozenset[int], int | None]


class Meetings:
    """Open rendezvous; ``released_epoch`` reads a communicator's released barrier epoch."""

    def __init__(
        self,
        released_epoch: Callable[[int], Awaitable[int]],
        *,
        per_node: int = PER_NODE,
        ttl: float = TTL,
    ) -> None:
        self.released_epoch = released_epoch
        self.per_node = per_node
        self.ttl = ttl
        self._open: dict[MeetingKey, _Meeting] = {}

    def __len__(self) -> int:
        return len(self._open)

    def held_by(self, node: int) -> int:
        return sum(1 for m in self._open.values() if node in m.joined)

    async def join(
        self, name: str, node: int, members: frozenset[int], comm_id: int | None
    ) -> dict[str, Any]:
        if node not in members:
            raise Refused(f"node {node} is not one of the meeting's members")
        loop = asyncio.get_running_loop()
        key: MeetingKey = (name, members, comm_id)
        meeting = self._open.get(key)
        if (meeting is None or node not in meeting.joined) and self.held_by(node) >= self.per_node:
            raise Refused(f"node {node} already waits in {self.per_node} rendezvous")
        if meeting is None:
            meeting = self._open[key] = _Meeting(members, comm_id, loop.time())
        meeting.joined.add(node)
        if meeting.joined == meeting.members and not meeting.done.is_set():
            del self._open[key]  # complete: its waiters hold it, nobody else may join it
            answer: dict[str, Any] = {"joined": len(meeting.joined)}
            try:
                if meeting.comm_id is not None:
                    answer["barrier_epoch"] = await self.released_epoch(meeting.comm_id)
                meeting.answer = answer
            except Exception as exc:
                meeting.error = f"rendezvous {name!r}: {exc}"
            meeting.done.set()
        left = meeting.opened + self.ttl - loop.time()
        try:
            await asyncio.wait_for(meeting.done.wait(), max(0.0, left))
        except (TimeoutError, asyncio.CancelledError) as exc:
            if not meeting.done.is_set():
                meeting.joined.discard(node)
                if not meeting.joined and self._open.get(key) is meeting:
                    del self._open[key]
            if isinstance(exc, TimeoutError):
                missing = sorted(meeting.members - meeting.joined)
                raise TimeoutError(
                    f"rendezvous {name!r}: nodes {missing} did not join within {self.ttl:g} s"
                ) from None
            raise
        if meeting.error is not None:
            raise RuntimeError(meeting.error)
        return dict(meeting.answer)
