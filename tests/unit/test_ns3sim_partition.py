"""The node-to-rank assignment a distributed (MPI) ns-3 run of a dragonfly needs; pure Python."""

from __future__ import annotations

import pytest

from controller.topology_build import dragonfly, line
from mininet_topos.ns3sim.distributed import mpi_unavailable_reason, partition

pytestmark = pytest.mark.unit


def test_groups_stay_whole_and_only_global_links_cross_ranks() -> None:
    topo = dragonfly(6, 12, 6)
    parts = partition(topo, 8)
    for group in topo.groups:
        assert len({parts.switch_rank[s] for s in group}) == 1
    for host in topo.hosts:
        assert parts.host_rank[host.node_id] == parts.switch_rank[host.switch]
    cut = parts.cut_links(topo)
    assert cut and {kind for _, _, kind in cut} == {"global"}
    # 73 groups over 8 ranks: 9 or 10 groups (648 or 720 hosts) each
    assert sorted(set(parts.load())) == [9 * 72, 10 * 72]


def test_one_rank_cuts_nothing_and_too_many_ranks_are_refused() -> None:
    topo = dragonfly(2, 4, 2)
    assert partition(topo, 1).cut_links(topo) == []
    with pytest.raises(ValueError, match="9 groups to share out, fewer than 10 ranks"):
        partition(topo, 10)
    chain = line(4, 2)
    assert [partition(chain, 2).switch_rank[s] for s in range(4)] == [0, 0, 1, 1]


def test_the_wheel_without_mpi_says_how_to_get_it() -> None:
    reason = mpi_unavailable_reason()
    if not reason:
        pytest.skip("this ns-3 has MPI: the distributed run is possible here")
    assert "MPI" in reason or "not installed" in reason
