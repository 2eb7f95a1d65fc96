"""What each simulated rank runs in one measured collective, and which ranks ended wrong.

``single``: one operation from one root (:class:`OneRoot`). ``all_roots``: one operation
rooted at every rank, all started at once and all awaited (:class:`EveryRoot`: [Ragasa]'s
experiment, as :func:`host_agents.workload_modes.all_roots` runs it on the agents: each rank
starts them in root order, each taking the communicator's next epoch as ``Comm.start`` does,
then waits for them all). The modes are :data:`host_agents.workload.MODES`' names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from host_agents.collectives import Algorithm, Call, Case, Collective, OwnedBytes
from mininet_topos.ns3sim.context import SimContext, SimRank

MODES = ("single", "all_roots")


class RankWork(Protocol):
    """One rank's part of one measured collective."""

    async def run(
        self,
        member: SimRank,
        coll: Collective[Any],
        chosen: Algorithm[Any],
        label: str,
        owned: OwnedBytes,
        size: int,
        hollow: bool,
    ) -> Any: ...

    def wrong(
        self,
        coll: Collective[Any],
        owned: OwnedBytes,
        size: int,
        outputs: Sequence[Any],
        hollow: bool,
    ) -> int: ...


def _epoch(member: SimRank, chosen: Algorithm[Any]) -> int:
    return member.next_barrier_epoch() if chosen.barrier_epochs else member.next_epoch()


def _start(
    member: SimRank,
    coll: Collective[Any],
    chosen: Algorithm[Any],
    label: str,
    case: Case,
    hollow: bool,
) -> Awaitable[Any]:
    """One operation on one rank, as ``Comm.start`` starts it: its epoch taken now."""
    data: bytes | bytearray | None = coll.contribution(case)
    if hollow and data is not None:
        data = bytearray(len(data))
    ctx = SimContext(member, _epoch(member, chosen), label)
    return coll.execute(chosen.run, ctx, Call(data, case.root, case.size))


def _differs(coll: Collective[Any], case: Case, out: Any, hollow: bool) -> bool:
    """Whether ``out`` is not what the descriptor expects (by length only when hollow)."""
    want = coll.expected(case)
    if want is None:
        return False
    if out is None:
        return True
    return len(out) != len(want) if hollow else bytes(out) != want


@dataclass(frozen=True, slots=True)
class OneRoot:
    root: int = 0

    async def run(
        self,
        member: SimRank,
        coll: Collective[Any],
        chosen: Algorithm[Any],
        label: str,
        owned: OwnedBytes,
        size: int,
        hollow: bool,
    ) -> Any:
        case = Case(owned, self.root, len(member.members), member.rank, size)
        return await _start(member, coll, chosen, label, case, hollow)

    def wrong(
        self,
        coll: Collective[Any],
        owned: OwnedBytes,
        size: int,
        outputs: Sequence[Any],
        hollow: bool,
    ) -> int:
        ranks = len(outputs)
        if hollow:  # every rank of an allgather ends with the same length: one expectation
            want = coll.expected(Case(owned, self.root, ranks, 0, size)) or b""
            return sum(out is None or len(out) != len(want) for out in outputs)
        return sum(
            _differs(coll, Case(owned, self.root, ranks, rank, size), out, hollow)
            for rank, out in enumerate(outputs)
        )


@dataclass(frozen=True, slots=True)
class EveryRoot:
    """Every rank roots one operation; a rank's output is the list of its results by root."""

    async def run(
        self,
        member: SimRank,
        coll: Collective[Any],
        chosen: Algorithm[Any],
        label: str,
        owned: OwnedBytes,
        size: int,
        hollow: bool,
    ) -> Any:
        ranks = len(member.members)
        # started in root order, so every rank gives root r's operation the same epoch
        operations = [
            _start(
                member,
                coll,
                chosen,
                f"{label} rooted at rank {root}",
                Case(owned, root, ranks, member.rank, size),
                hollow,
            )
            for root in range(ranks)
        ]
        return await asyncio.gather(*operations)

    def wrong(
        self,
        coll: Collective[Any],
        owned: OwnedBytes,
        size: int,
        outputs: Sequence[Any],
        hollow: bool,
    ) -> int:
        ranks = len(outputs)
        return sum(
            out is None
            or any(
                _differs(coll, Case(owned, root, ranks, rank, size), got, hollow)
                for root, got in enumerate(out)
            )
            for rank, out in enumerate(outputs)
        )


def rank_work(mode: str, root: int, coll: Collective[Any]) -> RankWork:
    """What each rank runs in ``mode`` (``root`` for ``single``)."""
    if mode == "single":
        return OneRoot(root)
    if mode != "all_roots":
        raise ValueError(f"mode {mode!r}: the simulation runs {', '.join(MODES)}")
    if not coll.has_root:
        raise ValueError(f"mode all_roots needs a rooted collective, not {coll.name}")
    return EveryRoot()
