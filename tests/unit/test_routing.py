"""Routing: minimal paths, next hops and forwarding tables agree, Valiant paths, helpers."""

from __future__ import annotations

import itertools
import random

import pytest

from controller import wire
from controller.routing import (
    forwarding_table,
    hop_count,
    host_path,
    host_path_hops,
    minimal_path,
    next_hop_port,
    next_switch,
    path_links,
    valiant_path,
)
from controller.topology import ARRANGEMENTS, Topology, TopologyError
from controller.topology_build import dragonfly, line, single_switch
from tests.graph_reference import shortest_hops

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module", params=ARRANGEMENTS)
def df242(request: pytest.FixtureRequest) -> Topology:
    return dragonfly(2, 4, 2, request.param)


@pytest.fixture(scope="module")
def df6126() -> Topology:
    return dragonfly(6, 12, 6, "absolute")


def check_minimal_route(topo: Topology, src: int, dst: int) -> list[int]:
    """The dragonfly minimal-route contract for one switch pair; returns the path."""
    path = minimal_path(topo, src, dst)
    assert path[0] == src and path[-1] == dst
    assert len(set(path)) == len(path), f"loop in {path}"
    links = path_links(topo, path)  # raises if two consecutive switches are not neighbours
    kinds = [link.kind for link in links]
    assert kinds.count("global") <= 1
    assert len(links) <= 3
    assert hop_count(topo, src, dst) == len(links)
    if topo.group_of(src) == topo.group_of(dst):
        assert kinds in ([], ["local"])
    else:
        # local hops only around the single global hop, never two local hops in a row
        assert "global" in kinds
        assert kinds in (
            ["global"],
            ["local", "global"],
            ["global", "local"],
            ["local", "global", "local"],
        )
    return path


def test_every_host_pair_of_df242_has_a_minimal_route(df242: Topology) -> None:
    checked: dict[tuple[int, int], list[int]] = {}
    for src, dst in itertools.product(df242.hosts, repeat=2):
        key = (src.switch, dst.switch)
        if key not in checked:
            checked[key] = check_minimal_route(df242, *key)
        assert host_path(df242, src.node_id, dst.node_id) == checked[key]
    assert len(checked) == 36 * 36
    assert max(len(path) - 1 for path in checked.values()) == 3


def test_minimal_paths_are_prefix_and_suffix_closed(df242: Topology) -> None:
    """Suffixes: destination-based forwarding follows the path. Prefixes: the union of routes
    from one switch is a tree."""
    for src, dst in itertools.product(range(df242.num_switches), repeat=2):
        path = minimal_path(df242, src, dst)
        for i in range(len(path)):
            assert minimal_path(df242, path[i], dst) == path[i:]
            assert minimal_path(df242, src, path[i]) == path[: i + 1]


def test_minimal_paths_are_never_shorter_than_shortest_paths(df242: Topology) -> None:
    longer = 0
    for src in range(df242.num_switches):
        dist = shortest_hops(df242, src)
        for dst in range(df242.num_switches):
            hops = hop_count(df242, src, dst)
            assert dist[dst] <= hops <= 3
            longer += hops > dist[dst]
    # Minimal routing uses the direct global link, while a 2-global-link detour can be shorter:
    # the two notions differ on a dragonfly, and the test would not notice if they coincided.
    assert longer > 0


def test_sampled_host_pairs_of_df6126(df6126: Topology) -> None:
    rng = random.Random(6126)
    for _ in range(3000):
        src, dst = rng.choice(df6126.hosts), rng.choice(df6126.hosts)
        check_minimal_route(df6126, src.switch, dst.switch)
        assert host_path_hops(df6126, src.node_id, dst.node_id) <= 5


def test_df6126_group_pairs_have_three_hop_routes(df6126: Topology) -> None:
    """Every group pair (not just a sample) is joined by one global link, so the worst router
    pair of two groups is local + global + local = 3 hops."""
    a = df6126.routers_per_group
    for g1, g2 in itertools.permutations(range(df6126.num_groups), 2):
        src = g1 * a + (df6126.switch(df6126.gateway(g1, g2)).router + 1) % a
        dst = g2 * a + (df6126.switch(df6126.gateway(g2, g1)).router + 1) % a
        assert hop_count(df6126, src, dst) == 3


def walk(topo: Topology, tables: dict[int, dict[int, int]], start: int, dst_node: int) -> list[int]:
    """Follow forwarding tables from ``start`` until the packet leaves on a non-switch port."""
    visited = [start]
    here = start
    while True:
        port = tables[here][dst_node]
        there = topo.peer_switch(here, port)
        if there is None:
            info = topo.ports(here)[port]
            return visited if info.kind in ("host", "mgmt") else []
        assert there not in visited, f"forwarding loop toward {dst_node}: {[*visited, there]}"
        visited.append(there)
        here = there


def test_forwarding_tables_deliver_along_minimal_paths(df242: Topology) -> None:
    tables = {s.index: forwarding_table(df242, s.index) for s in df242.switches}
    for switch in df242.switches:
        table = tables[switch.index]
        assert switch.node_id not in table
        assert len(table) == 72 + 35 + 1
        for host in df242.hosts:
            visited = walk(df242, tables, switch.index, host.node_id)
            assert visited == minimal_path(df242, switch.index, host.switch)
            assert tables[host.switch][host.node_id] == host.port
            assert next_hop_port(df242, switch.index, host.node_id) == table[host.node_id]
        for other in df242.switches:
            if other.index != switch.index:
                port = table[other.node_id]
                assert df242.peer_switch(switch.index, port) == next_switch(
                    df242, switch.index, other.index
                )
        mgmt_path = walk(df242, tables, switch.index, wire.MGMT_NODE_ID)
        assert mgmt_path == minimal_path(df242, switch.index, 0)
    assert tables[0][wire.MGMT_NODE_ID] == df242.management.port


def test_forwarding_table_of_a_df6126_switch(df6126: Topology) -> None:
    switch = 437
    table = forwarding_table(df6126, switch)
    assert len(table) == 5256 + 875 + 1
    rng = random.Random(437)
    for host in rng.sample(df6126.hosts, 300):
        path = minimal_path(df6126, switch, host.switch)
        expected = host.port if len(path) == 1 else df6126.port_to(switch, path[1])
        assert table[host.node_id] == expected


def test_next_hop_port_errors(df242: Topology) -> None:
    with pytest.raises(TopologyError, match="is switch 3 itself"):
        next_hop_port(df242, 3, wire.switch_node_id(3))
    with pytest.raises(TopologyError, match="node 9999 is neither a host, a switch nor"):
        next_hop_port(df242, 3, 9999)
    with pytest.raises(TopologyError, match="is not a switch of"):
        next_hop_port(df242, 3, wire.switch_node_id(36))
    with pytest.raises(TopologyError, match="switch 40 is not in"):
        minimal_path(df242, 0, 40)


def test_valiant_paths(df242: Topology) -> None:
    rng = random.Random(17)
    middle_groups = set()
    for src, dst in itertools.product(range(df242.num_switches), repeat=2):
        path = valiant_path(df242, src, dst, rng)
        assert path[0] == src and path[-1] == dst
        assert len(set(path)) == len(path)
        kinds = [link.kind for link in path_links(df242, path)]
        groups = {df242.group_of(s) for s in path}
        if df242.group_of(src) == df242.group_of(dst):
            assert path == minimal_path(df242, src, dst)
            continue
        assert kinds.count("global") == 2 and len(kinds) <= 5
        (middle,) = groups - {df242.group_of(src), df242.group_of(dst)}
        middle_groups.add(middle)
    assert middle_groups == set(range(9))  # every group serves as an intermediate somewhere


def test_valiant_falls_back_to_minimal_without_a_third_group() -> None:
    three_groups = dragonfly(1, 2, 1)  # g = 3: group 2 is the only possible detour
    detour = valiant_path(three_groups, 0, 2, random.Random(1))
    assert [three_groups.group_of(s) for s in detour][1:-1].count(2) >= 1
    pair = dragonfly(1, 1, 1)  # g = 2
    assert valiant_path(pair, 0, 1, random.Random(1)) == [0, 1]


def test_line_and_single_routes() -> None:
    chain = line(4, 2)
    assert minimal_path(chain, 0, 3) == [0, 1, 2, 3]
    assert minimal_path(chain, 3, 1) == [3, 2, 1]
    assert next_hop_port(chain, 1, 8) == 2 + 2  # host 8 lives on switch 3: go right
    assert next_hop_port(chain, 1, wire.MGMT_NODE_ID) == 2 + 1  # management on switch 0: left
    assert valiant_path(chain, 0, 3, random.Random(0)) == [0, 1, 2, 3]
    assert host_path_hops(chain, 1, 8) == 5
    tables = {s: forwarding_table(chain, s) for s in range(4)}
    for host in chain.hosts:
        assert walk(chain, tables, 0, host.node_id)[-1] == host.switch
    one = single_switch(3)
    assert minimal_path(one, 0, 0) == [0]
    assert forwarding_table(one, 0) == {1: 1, 2: 2, 3: 3, wire.MGMT_NODE_ID: 4}


def test_host_path_hops(df242: Topology) -> None:
    assert host_path_hops(df242, 1, 1) == 0
    assert host_path_hops(df242, 1, 2) == 2  # same switch: up and down
    assert host_path_hops(df242, 1, 3) == 3  # same group, one local hop
    far = max(df242.hosts, key=lambda h: hop_count(df242, 0, h.switch))
    assert host_path_hops(df242, 1, far.node_id) == 5
    with pytest.raises(TopologyError, match="node 0 is not a host"):
        host_path_hops(df242, 0, 1)
