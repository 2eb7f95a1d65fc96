"""Collective algorithms, selectable by name, and ``auto``'s choice among them.

Every algorithm is a coroutine over a :class:`host_agents.comm.CollCtx`:

* bcast:     ``f(ctx, buf, root)``; ``buf`` holds the root's data at the root and is filled
             in place elsewhere;
* barrier:   ``f(ctx)``;
* scatter:   ``f(ctx, sendbuf_or_None, recvbuf, root, block)``;
* allgather: ``f(ctx, recvbuf, block)``, the rank's own block already in place.
"""

from __future__ import annotations

from typing import Any

from host_agents.algorithms import allgather, barrier, bcast, scatter

BCAST = {
    "innet": bcast.innet,
    "ragasa": bcast.ragasa,
    "binomial": bcast.binomial,
    "scatter_allgather": bcast.scatter_allgather,
    "chain": bcast.chain,
    "trinary3": bcast.trinary3,
}
BARRIER = {
    "innet": barrier.innet,
    "dissemination": barrier.dissemination,
    "pairwise": barrier.pairwise,
    "gather_bcast": barrier.gather_bcast,
}
SCATTER = {
    "tree": scatter.tree,
    "lin": scatter.lin,
    "glf": scatter.glf,
    "llf": scatter.llf,
}
ALLGATHER = {
    "ring": allgather.ring,
    "bruck": allgather.bruck,
    "recursive_doubling": allgather.recursive_doubling,
    "tar": allgather.tar,
    "innet": allgather.innet,
}
REGISTRY: dict[str, dict[str, Any]] = {
    "bcast": BCAST,
    "barrier": BARRIER,
    "scatter": SCATTER,
    "allgather": ALLGATHER,
}

# Algorithms that need the communicator's trees or barrier slots in the switches.
NEEDS_SWITCH_STATE = frozenset({"innet", "ragasa"})

# MPICH's default cut-overs (bytes), which auto follows for host-based algorithms.
BCAST_SHORT = 12 * 1024
BCAST_MIN_PROCS = 8
ALLGATHER_LONG = 80 * 1024  # total bytes gathered


class UnknownAlgorithm(ValueError):
    pass


def choose(kind: str, algorithm: str, nbytes: int, size: int, innet: bool) -> tuple[str, str]:
    """Resolve ``algorithm`` for a ``kind`` collective: (name, why)."""
    table = REGISTRY.get(kind)
    if table is None:
        raise UnknownAlgorithm(f"unknown collective {kind!r}; known: {', '.join(REGISTRY)}")
    if algorithm != "auto":
        if algorithm not in table:
            raise UnknownAlgorithm(
                f"unknown {kind} algorithm {algorithm!r}; known: auto, {', '.join(table)}"
            )
        return algorithm, "requested"
    if kind == "bcast":
        if innet:
            return "innet", "switches replicate: each link carries each segment once"
        if nbytes < BCAST_SHORT or size < BCAST_MIN_PROCS:
            return (
                "binomial",
                f"short message (< {BCAST_SHORT} B) or fewer than {BCAST_MIN_PROCS} ranks",
            )
        return "scatter_allgather", "long message on 8 or more ranks (MPICH's van de Geijn)"
    if kind == "barrier":
        if innet:
            return "innet", "switches count arrivals"
        return "dissemination", "ceil(log2 N) rounds, no power-of-two restriction"
    if kind == "scatter":
        return "tree", "binomial scatter (MPICH's only scatter)"
    total = nbytes * size
    if innet and total < ALLGATHER_LONG:
        return "innet", "short blocks: every block replicated by the switches"
    if total < ALLGATHER_LONG:
        if size & (size - 1) == 0:
            return "recursive_doubling", f"short (< {ALLGATHER_LONG} B total), power-of-two ranks"
        return "bruck", f"short (< {ALLGATHER_LONG} B total), non-power-of-two ranks"
    return "tar", "long: topology-aware ring keeps global-link traffic to one crossing per group"
