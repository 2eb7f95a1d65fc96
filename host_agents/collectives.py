"""Every collective and every algorithm, as data: the one table the rest reads.

A :class:`Collective` says how a call is checked, how its buffers are laid out for an
algorithm, which algorithm ``auto`` picks (in the style of MPICH's tuning), and what each rank
passes in and must get back (for the byte checks of tests, the launcher, bench and the fault
matrix). An :class:`Algorithm` names a coroutine over a
:class:`host_agents.context.CollectiveContext` and says whether it needs switch state.
:class:`host_agents.comm.Comm`, ``auto``, the agent, the CLIs, bench, reliability and the tests
all read :data:`COLLECTIVES`; adding a collective is one descriptor here, one algorithm module
and its tests (see ``tests/unit/test_collective_registry.py``, which adds a toy one).

Sizes follow the OSU convention: for bcast the bytes every rank ends with, for scatter and
allgather the block per rank.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from host_agents.algorithms import allgather, barrier, bcast, scatter
from host_agents.context import CollectiveContext

F = TypeVar("F")
Ctx = CollectiveContext
BcastFn = Callable[[Ctx, bytearray, int], Awaitable[None]]  # (ctx, buf, root)
BarrierFn = Callable[[Ctx], Awaitable[None]]
ScatterFn = Callable[[Ctx, memoryview | None, bytearray, int, int], Awaitable[None]]
AllgatherFn = Callable[[Ctx, bytearray, int], Awaitable[None]]  # (ctx, recvbuf, block)
OwnedBytes = Callable[[int, int], bytes]  # (owner rank, length) -> that rank's data


class UnknownAlgorithm(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Call:
    """One call as a rank makes it: its data (None where it passes nothing), the root rank
    (0 where there is none) and the size."""

    data: bytes | bytearray | None = None
    root: int = 0
    size: int = 0


@dataclass(frozen=True, slots=True)
class Algorithm(Generic[F]):
    name: str
    run: F
    needs_switch_state: bool = False  # the communicator's trees or barrier slots
    # instances numbered by the switch barrier's epochs (the switches count them), not by
    # the communicator's collective epochs
    barrier_epochs: bool = False
    tuning: str = ""  # where it is the right choice


@dataclass(frozen=True)
class Collective(Generic[F]):
    name: str
    algorithms: Mapping[str, Algorithm[F]]
    has_root: bool
    # (algorithm function, ctx, call) -> the rank's result: lays the buffers out, runs it
    execute: Callable[[F, Ctx, Call], Awaitable[Any]]
    # (rank, ranks, call) -> what is wrong with the call, or None
    check: Callable[[int, int, Call], str | None]
    # (nbytes, ranks, innet) -> (algorithm, why)
    auto: Callable[[int, int, bool], tuple[str, str]]
    # (bytes of a rank, root, ranks, rank, size) -> what the rank passes in / must get back
    contribution: Callable[[OwnedBytes, int, int, int, int], bytes | None]
    expected: Callable[[OwnedBytes, int, int, int, int], bytes | None]
    doc: str = ""

    def choose(self, algorithm: str, nbytes: int, ranks: int, innet: bool) -> tuple[str, str]:
        """Resolve ``algorithm`` (a name or ``auto``): (name, why)."""
        if algorithm != "auto":
            if algorithm not in self.algorithms:
                raise UnknownAlgorithm(
                    f"unknown {self.name} algorithm {algorithm!r}; known: auto, "
                    f"{', '.join(self.algorithms)}"
                )
            return algorithm, "requested"
        return self.auto(nbytes, ranks, innet)


def algorithms_of(*entries: Algorithm[F]) -> dict[str, Algorithm[F]]:
    return {a.name: a for a in entries}


def _nothing(owned: OwnedBytes, root: int, ranks: int, rank: int, size: int) -> None:
    return None


# -- bcast ------------------------------------------------------------------------------------

# MPICH's default cut-overs (bytes), which auto follows for host-based algorithms.
BCAST_SHORT = 12 * 1024
BCAST_MIN_PROCS = 8


async def _bcast(fn: BcastFn, ctx: Ctx, call: Call) -> bytearray:
    buf = bytearray(call.data) if ctx.rank == call.root and call.data else bytearray(call.size)
    await fn(ctx, buf, call.root)
    return buf


def _bcast_check(rank: int, ranks: int, call: Call) -> str | None:
    if rank != call.root:
        return None
    if call.data is None:
        return "the root of a bcast must pass the data"
    if len(call.data) != call.size:
        return f"bcast buffer of {len(call.data)} bytes, size says {call.size}"
    return None


def _bcast_auto(nbytes: int, ranks: int, innet: bool) -> tuple[str, str]:
    if innet:
        return "innet", "switches replicate: each link carries each segment once"
    if nbytes < BCAST_SHORT or ranks < BCAST_MIN_PROCS:
        why = f"short message (< {BCAST_SHORT} B) or fewer than {BCAST_MIN_PROCS} ranks"
        return "binomial", why
    return "scatter_allgather", "long message on 8 or more ranks (MPICH's van de Geijn)"


BCAST: Collective[BcastFn] = Collective(
    name="bcast",
    doc="every rank ends with the root's `size` bytes",
    has_root=True,
    algorithms=algorithms_of(
        Algorithm("innet", bcast.innet, needs_switch_state=True, tuning="any size"),
        Algorithm("ragasa", bcast.ragasa, needs_switch_state=True, tuning="any size"),
        Algorithm("binomial", bcast.binomial, tuning=f"< {BCAST_SHORT} B or < 8 ranks"),
        Algorithm("scatter_allgather", bcast.scatter_allgather, tuning="long messages"),
        Algorithm("chain", bcast.chain, tuning="long messages, pipelined"),
        Algorithm("trinary3", bcast.trinary3, tuning="long messages, three trees"),
    ),
    execute=_bcast,
    check=_bcast_check,
    auto=_bcast_auto,
    contribution=lambda owned, root, ranks, rank, size: owned(root, size) if rank == root else None,
    expected=lambda owned, root, ranks, rank, size: owned(root, size),
)


# -- barrier ----------------------------------------------------------------------------------


async def _barrier(fn: BarrierFn, ctx: Ctx, call: Call) -> None:
    await fn(ctx)


BARRIER: Collective[BarrierFn] = Collective(
    name="barrier",
    doc="no rank leaves before every rank arrived",
    has_root=False,
    algorithms=algorithms_of(
        Algorithm("innet", barrier.innet, needs_switch_state=True, barrier_epochs=True),
        Algorithm("dissemination", barrier.dissemination, tuning="ceil(log2 N) rounds"),
        Algorithm("pairwise", barrier.pairwise, tuning="power-of-two ranks"),
        Algorithm("gather_bcast", barrier.gather_bcast, tuning="2 log2 N one-way steps"),
    ),
    execute=_barrier,
    check=lambda rank, ranks, call: None,
    auto=lambda nbytes, ranks, innet: (
        ("innet", "switches count arrivals")
        if innet
        else ("dissemination", "ceil(log2 N) rounds, no power-of-two restriction")
    ),
    contribution=_nothing,
    expected=_nothing,
)


# -- scatter ----------------------------------------------------------------------------------


async def _scatter(fn: ScatterFn, ctx: Ctx, call: Call) -> bytearray:
    out = bytearray(call.size)
    source = memoryview(bytes(call.data)) if ctx.rank == call.root and call.data else None
    await fn(ctx, source, out, call.root, call.size)
    return out


def _scatter_check(rank: int, ranks: int, call: Call) -> str | None:
    if rank == call.root and (call.data is None or len(call.data) != call.size * ranks):
        got = None if call.data is None else len(call.data)
        return (
            f"scatter root needs {call.size * ranks} bytes ({ranks} blocks of {call.size}), "
            f"got {got}"
        )
    return None


SCATTER: Collective[ScatterFn] = Collective(
    name="scatter",
    doc="rank i ends with block i of the root's `ranks * size` bytes",
    has_root=True,
    algorithms=algorithms_of(
        Algorithm("tree", scatter.tree, tuning="MPICH's only scatter"),
        Algorithm("lin", scatter.lin, tuning="large blocks, small switch buffers"),
        Algorithm("glf", scatter.glf, tuning="dragonfly: global links first"),
        Algorithm("llf", scatter.llf, tuning="dragonfly: local links first"),
    ),
    execute=_scatter,
    check=_scatter_check,
    auto=lambda nbytes, ranks, innet: ("tree", "binomial scatter (MPICH's only scatter)"),
    contribution=lambda owned, root, ranks, rank, size: (
        owned(root, size * ranks) if rank == root else None
    ),
    expected=lambda owned, root, ranks, rank, size: owned(root, size * ranks)[
        rank * size : (rank + 1) * size
    ],
)


# -- allgather --------------------------------------------------------------------------------

ALLGATHER_LONG = 80 * 1024  # total bytes gathered


async def _allgather(fn: AllgatherFn, ctx: Ctx, call: Call) -> bytearray:
    block = call.size
    out = bytearray(block * ctx.size)
    out[ctx.rank * block : (ctx.rank + 1) * block] = call.data or b""
    await fn(ctx, out, block)
    return out


def _allgather_check(rank: int, ranks: int, call: Call) -> str | None:
    if call.data is None or len(call.data) != call.size:
        got = None if call.data is None else len(call.data)
        return f"allgather needs this rank's {call.size}-byte block, got {got}"
    return None


def _allgather_auto(nbytes: int, ranks: int, innet: bool) -> tuple[str, str]:
    total = nbytes * ranks
    if innet and total < ALLGATHER_LONG:
        return "innet", "short blocks: every block replicated by the switches"
    if total < ALLGATHER_LONG:
        if ranks & (ranks - 1) == 0:
            return "recursive_doubling", f"short (< {ALLGATHER_LONG} B total), power-of-two ranks"
        return "bruck", f"short (< {ALLGATHER_LONG} B total), non-power-of-two ranks"
    return "tar", "long: topology-aware ring keeps global-link traffic to one crossing per group"


ALLGATHER: Collective[AllgatherFn] = Collective(
    name="allgather",
    doc="every rank ends with every rank's block, in rank order",
    has_root=False,
    algorithms=algorithms_of(
        Algorithm("ring", allgather.ring, tuning="long blocks"),
        Algorithm("bruck", allgather.bruck, tuning="short, any number of ranks"),
        Algorithm("recursive_doubling", allgather.recursive_doubling, tuning="short, 2^k ranks"),
        Algorithm("tar", allgather.tar, tuning="long: one global-link crossing per group"),
        Algorithm("innet", allgather.innet, needs_switch_state=True, tuning="short blocks"),
    ),
    execute=_allgather,
    check=_allgather_check,
    auto=_allgather_auto,
    contribution=lambda owned, root, ranks, rank, size: owned(rank, size),
    expected=lambda owned, root, ranks, rank, size: b"".join(owned(r, size) for r in range(ranks)),
)


COLLECTIVES: dict[str, Collective[Any]] = {c.name: c for c in (BCAST, BARRIER, SCATTER, ALLGATHER)}


def register(collective: Collective[Any]) -> None:
    """Add a collective (an extension, or a test's toy one) to the table everything reads."""
    if collective.name in COLLECTIVES:
        raise ValueError(f"collective {collective.name!r} is registered already")
    COLLECTIVES[collective.name] = collective


def collective(name: str) -> Collective[Any]:
    found = COLLECTIVES.get(name)
    if found is None:
        raise UnknownAlgorithm(f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}")
    return found


def algorithm_names() -> dict[str, list[str]]:
    """Collective -> its algorithm names, for CLIs, bench and test parametrisation."""
    return {name: list(c.algorithms) for name, c in COLLECTIVES.items()}
