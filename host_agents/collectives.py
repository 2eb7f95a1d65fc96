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

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from host_agents.algorithms import allgather, barrier, bcast, reduce, scatter
from host_agents.context import CollectiveContext
from host_agents.reduction import LANE_BYTES, ReduceOp, op_named, reduce_all

F = TypeVar("F")
Ctx = CollectiveContext
BcastFn = Callable[[Ctx, bytearray, int], Awaitable[None]]  # (ctx, buf, root)
BarrierFn = Callable[[Ctx], Awaitable[None]]
ScatterFn = Callable[[Ctx, memoryview | None, bytearray, int, int], Awaitable[None]]
AllgatherFn = Callable[[Ctx, bytearray, int], Awaitable[None]]  # (ctx, recvbuf, block)
ReduceFn = Callable[[Ctx, bytearray, ReduceOp], Awaitable[None]]  # (ctx, vector, op)
RootedReduceFn = Callable[[Ctx, bytearray, int, ReduceOp], Awaitable[None]]  # + root
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
    op: str = "sum"  # reductions: sum, min, max, and, or, xor (host_agents.reduction)


@dataclass(frozen=True, slots=True)
class Case:
    """One rank's part of one checked instance: ``owned(rank, n)`` is the data rank ``rank``
    brings; the descriptor says what each rank passes in and must get back."""

    owned: OwnedBytes
    root: int
    ranks: int
    rank: int
    size: int
    op: str = "sum"


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
    # what the rank passes in / must get back (None: nothing, or nothing to check)
    contribution: Callable[[Case], bytes | None]
    expected: Callable[[Case], bytes | None]
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


def _nothing(case: Case) -> None:
    return None


# -- bcast ------------------------------------------------------------------------------------

# MPICH's default cut-overs (bytes), which auto follows for host-based algorithms.
BCAST_SHORT = 12 * 1024
BCAST_MIN_PROCS = 8


async def _bcast(fn: BcastFn, ctx: Ctx, call: Call) -> bytearray:
    given = call.data if ctx.rank == call.root else None
    buf = bytearray(given) if given is not None else bytearray(call.size)
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
    contribution=lambda c: c.owned(c.root, c.size) if c.rank == c.root else None,
    expected=lambda c: c.owned(c.root, c.size),
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
    source = (
        memoryview(bytes(call.data)) if ctx.rank == call.root and call.data is not None else None
    )
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
    contribution=lambda c: c.owned(c.root, c.size * c.ranks) if c.rank == c.root else None,
    expected=lambda c: c.owned(c.root, c.size * c.ranks)[c.rank * c.size : (c.rank + 1) * c.size],
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
        return "innet_packed", "short blocks: each group's blocks in one switch multicast"
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
        Algorithm(
            "innet_packed",
            allgather.innet_packed,
            needs_switch_state=True,
            tuning="short blocks: one multicast per group",
        ),
    ),
    execute=_allgather,
    check=_allgather_check,
    auto=_allgather_auto,
    contribution=lambda c: c.owned(c.rank, c.size),
    expected=lambda c: b"".join(c.owned(r, c.size) for r in range(c.ranks)),
)


# -- allreduce and reduce (int32 vectors; host_agents.reduction) ------------------------------


def _reduce_check(rank: int, ranks: int, call: Call) -> str | None:
    if call.size % LANE_BYTES:
        return f"a reduction's size is whole 32-bit lanes: {call.size} bytes is not"
    if call.data is None or len(call.data) != call.size:
        got = None if call.data is None else len(call.data)
        return f"a reduction needs this rank's {call.size}-byte vector, got {got}"
    try:
        op_named(call.op)
    except ValueError as exc:
        return str(exc)
    return None


async def _allreduce(fn: ReduceFn, ctx: Ctx, call: Call) -> bytearray:
    vec = bytearray(call.data or b"")
    await fn(ctx, vec, op_named(call.op))
    return vec


async def _reduce(fn: RootedReduceFn, ctx: Ctx, call: Call) -> bytearray | None:
    vec = bytearray(call.data or b"")
    await fn(ctx, vec, call.root, op_named(call.op))
    return vec if ctx.rank == call.root else None


def _reduced(c: Case) -> bytes:
    # the same vector for every rank: combined once per instance, not once per rank (a
    # 5,256-rank check otherwise combines 5,256 vectors 5,256 times)
    return _reduction(c.owned, c.ranks, c.size, c.op)


@functools.lru_cache(maxsize=4)
def _reduction(owned: OwnedBytes, ranks: int, size: int, op: str) -> bytes:
    return reduce_all([owned(r, size) for r in range(ranks)], op_named(op))


# MPICH's cut-over (bytes) between latency- and bandwidth-bound allreduce algorithms
ALLREDUCE_SHORT = 2048

ALLREDUCE: Collective[ReduceFn] = Collective(
    name="allreduce",
    doc="every rank ends with every rank's vector combined lane by lane",
    has_root=False,
    algorithms=algorithms_of(
        Algorithm("recursive_doubling", reduce.recursive_doubling, tuning="short vectors"),
        Algorithm("ring", reduce.ring, tuning="long vectors: 2(P-1)/P of the vector per rank"),
        Algorithm("rabenseifner", reduce.rabenseifner, tuning="long vectors, log2 P steps"),
        Algorithm("binomial", reduce.binomial, tuning="reduce then broadcast"),
        Algorithm(
            "innet",
            reduce.innet,
            needs_switch_state=True,
            barrier_epochs=True,  # numbered like barriers: the switches keep the count
            tuning="any size: each link carries the vector once each way",
        ),
    ),
    execute=_allreduce,
    check=_reduce_check,
    auto=lambda nbytes, ranks, innet: (
        ("innet", "the switches add the lanes up the barrier tree")
        if innet
        else ("recursive_doubling", f"short (< {ALLREDUCE_SHORT} B)")
        if nbytes < ALLREDUCE_SHORT
        else ("rabenseifner", f"long (>= {ALLREDUCE_SHORT} B): reduce-scatter + allgather")
    ),
    contribution=lambda c: c.owned(c.rank, c.size),
    expected=_reduced,
)

REDUCE: Collective[RootedReduceFn] = Collective(
    name="reduce",
    doc="the root ends with every rank's vector combined lane by lane",
    has_root=True,
    algorithms=algorithms_of(
        Algorithm("binomial", reduce.binomial_reduce, tuning="MPICH's default, commutative ops"),
        Algorithm(
            "innet",
            reduce.innet_reduce,
            needs_switch_state=True,
            barrier_epochs=True,
            tuning="any size (every rank gets the result too)",
        ),
    ),
    execute=_reduce,
    check=_reduce_check,
    auto=lambda nbytes, ranks, innet: (
        ("innet", "the switches add the lanes up the barrier tree")
        if innet
        else ("binomial", "binomial tree to the root")
    ),
    contribution=lambda c: c.owned(c.rank, c.size),
    expected=lambda c: _reduced(c) if c.rank == c.root else None,
)


COLLECTIVES: dict[str, Collective[Any]] = {
    c.name: c for c in (BCAST, BARRIER, SCATTER, ALLGATHER, ALLREDUCE, REDUCE)
}


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
