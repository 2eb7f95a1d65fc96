"""MPI's collective communicator operations, on top of the control plane.

``MPI_Comm_split`` and ``MPI_Comm_free`` are collective: every member calls them. This module
keeps that bookkeeping (who has called, which round of splits) apart from pushing switch state
(:mod:`controller.runtime`): a split waits for every member's (color, key) and then creates all
its parts in one change; a free removes the switch state once every member freed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.runtime import CommunicatorError, ControlPlane, Installed


@dataclass(slots=True)
class _Split:
    """One MPI_Comm_split in progress: every member of the parent reports (color, key)."""

    expected: frozenset[int]
    answers: dict[int, tuple[int, int]] = field(default_factory=dict)
    error: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    result: dict[int, tuple[int, tuple[int, ...]]] = field(default_factory=dict)


class Communicators:
    """The members' side of communicator management; ``control`` does the switch state."""

    def __init__(self, control: ControlPlane) -> None:
        self.control = control
        self._splits: dict[tuple[int, int], _Split] = {}
        self._split_rounds: dict[tuple[int, int], int] = {}
        self._frees: dict[int, set[int]] = {}

    def _members(self, comm_id: int, node: int) -> tuple[int, ...]:
        comm = self.control.comms.get(comm_id)
        if comm is None:
            raise CommunicatorError(f"unknown communicator {comm_id}")
        if node not in comm.members:
            raise CommunicatorError(f"node {node} is not a member of communicator {comm_id}")
        return comm.members

    async def free(self, comm_id: int, node: int) -> bool:
        """``node`` frees ``comm_id``; the switch state goes once every member did. Whether
        it is gone."""
        members = self._members(comm_id, node)
        freed = self._frees.get(comm_id, set()) | {node}
        if freed < set(members):
            self._frees[comm_id] = freed
            return False
        await self.control.free(comm_id)
        self._frees.pop(comm_id, None)
        return True

    def forget(self, comm_id: int) -> None:
        """The operator removed ``comm_id`` at once: its pending votes go too."""
        self._frees.pop(comm_id, None)

    async def split(
        self,
        parent: int,
        node: int,
        color: int,
        key: int,
        timeout: float = 60.0,
        admit: Callable[[list[tuple[int, ...]]], Installed | None] | None = None,
    ) -> tuple[int, tuple[int, ...]] | None:
        """MPI_Comm_split: every member of ``parent`` calls it; members with the same color
        get one new communicator, ranked by (key, parent rank). Negative color: none.
        ``admit`` may refuse the parts before they are created (it raises); what it returns
        is told whether they were installed (:meth:`ControlPlane.create_many`). A call that
        times out or is abandoned withdraws its answer and does not use up a round: the
        node's next split joins the same round as everybody else's."""
        members = self._members(parent, node)
        round_key = (parent, self._split_rounds.get((parent, node), 0))
        self._split_rounds[(parent, node)] = round_key[1] + 1
        split = self._splits.setdefault(round_key, _Split(frozenset(members)))
        split.answers[node] = (color, key)
        if set(split.answers) == split.expected:
            groups: dict[int, list[tuple[int, int, int]]] = {}
            for member, (c, k) in split.answers.items():
                if c >= 0:
                    groups.setdefault(c, []).append((k, members.index(member), member))
            parts = [
                tuple(m for _, _, m in sorted(entries)) for _, entries in sorted(groups.items())
            ]
            try:
                settled = admit(parts) if admit is not None else None
                reports = await self.control.create_many(parts, settled=settled)
                for part, report in zip(parts, reports, strict=True):
                    for m in part:
                        split.result[m] = (report.comm_id, part)
            except Exception as exc:
                split.error = str(exc)
                raise
            finally:
                split.done.set()  # every waiter learns the outcome
                self._splits.pop(round_key, None)
        else:
            try:
                await asyncio.wait_for(split.done.wait(), timeout)
            except (TimeoutError, asyncio.CancelledError) as exc:
                if not split.done.is_set():
                    # withdrawn: this round waits for this node again, and its next call
                    # joins it (not a round nobody else is in)
                    split.answers.pop(node, None)
                    self._split_rounds[(parent, node)] = round_key[1]
                    if not split.answers and self._splits.get(round_key) is split:
                        del self._splits[round_key]
                if not isinstance(exc, TimeoutError):
                    raise
                missing = sorted(split.expected - set(split.answers) - {node})
                raise CommunicatorError(
                    f"split of communicator {parent}: nodes {missing} never called it"
                ) from None
            if split.error is not None:
                raise CommunicatorError(f"split of communicator {parent} failed: {split.error}")
        return split.result.get(node)
