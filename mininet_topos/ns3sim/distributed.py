"""Past one machine: what running a scenario on ns-3's distributed simulator needs.

ns-3 built with MPI (``./ns3 configure --enable-mpi``) runs one process per MPI rank; every node
belongs to one rank (``CreateObject<Node>(systemId)``), links between ranks become
``PointToPointRemoteChannel``s, and the conservative synchronisation advances all ranks by
the lookahead, the smallest delay of a link between ranks. For a dragonfly the natural cut is by
group: a group's routers, their hosts and all local links stay on one rank and only global
links cross, so the lookahead is the global-link delay. :func:`partition` computes that
assignment; docs/scale.md says what else the back end needs and how a user runs it. The PyPI
wheel has no MPI module, which :func:`mpi_unavailable_reason` reports.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from controller.topology import KIND_DRAGONFLY, Topology


@dataclass(frozen=True, slots=True)
class Partition:
    """Which MPI rank simulates each switch and host."""

    ranks: int
    switch_rank: dict[int, int]  # switch index -> rank
    host_rank: dict[int, int]  # host node id -> rank

    def cut_links(self, topo: Topology) -> list[tuple[int, int, str]]:
        """Switch links whose ends are on different ranks (the remote channels)."""
        return [
            (link.a, link.b, link.kind)
            for link in topo.links
            if self.switch_rank[link.a] != self.switch_rank[link.b]
        ]

    def load(self) -> list[int]:
        """Hosts per rank."""
        counts = [0] * self.ranks
        for rank in self.host_rank.values():
            counts[rank] += 1
        return counts


def partition(topo: Topology, ranks: int) -> Partition:
    """Whole dragonfly groups per rank, groups dealt out in contiguous, balanced blocks (a
    rank's groups then share the most global links with each other); other shapes: switches
    in contiguous blocks. A host always goes with its switch."""
    if ranks < 1:
        raise ValueError(f"a partition needs at least one rank, not {ranks}")
    if topo.shape.kind == KIND_DRAGONFLY:
        units = [list(group) for group in topo.groups]
    else:
        units = [[s.index] for s in topo.switches]
    if ranks > len(units):
        raise ValueError(
            f"{topo.shape.spec} has {len(units)} groups to share out, fewer than {ranks} ranks"
        )
    switch_rank: dict[int, int] = {}
    for position, unit in enumerate(units):
        rank = position * ranks // len(units)
        for switch in unit:
            switch_rank[switch] = rank
    host_rank = {h.node_id: switch_rank[h.switch] for h in topo.hosts}
    return Partition(ranks, switch_rank, host_rank)


def mpi_unavailable_reason() -> str:
    """Why this ns-3 cannot simulate distributed, or '' when it can."""
    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        return "ns-3 is not installed"
    for location in spec.submodule_search_locations:
        if any(Path(location).glob("lib*/libns3*-mpi*.so")):
            return ""
    return (
        "this ns-3 has no MPI module (the PyPI wheel is built without it); build ns-3 with "
        "./ns3 configure --enable-mpi (docs/scale.md)"
    )
