"""Topology model: dragonfly sizes and numbering, global-link arrangements, the simple shapes,
spec parsing, JSON round trip and the netcoll-topo CLI."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from controller import wire
from controller.topology import ARRANGEMENTS, FORMAT, Topology, TopologyError, members_by_group
from controller.topology_build import dragonfly, global_link_peer, line, parse_spec, single_switch
from controller.topology_cli import main as topo_main
from tests.graph_reference import shortest_hops

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def df242() -> Topology:
    return dragonfly(2, 4, 2)


@pytest.fixture(scope="module", params=ARRANGEMENTS)
def df242_any(request: pytest.FixtureRequest) -> Topology:
    return dragonfly(2, 4, 2, request.param)


@pytest.fixture(scope="module", params=("absolute", "relative"))
def df6126(request: pytest.FixtureRequest) -> Topology:
    return dragonfly(6, 12, 6, request.param)


def bfs_diameter(topo: Topology) -> int:
    """Reference diameter: one BFS per switch (only for small topologies)."""
    worst = 0
    for source in range(topo.num_switches):
        dist = shortest_hops(topo, source)
        assert len(dist) == topo.num_switches
        worst = max(worst, *dist.values())
    return worst


# ------------------------------------------------------------------------------- sizes


def test_df242_sizes(df242_any: Topology) -> None:
    topo = df242_any
    assert topo.num_groups == 9
    assert topo.routers_per_group == 4
    assert topo.num_switches == 36
    assert topo.num_hosts == 72
    assert topo.num_local_links == 54
    assert topo.num_global_links == 36
    assert topo.radix == 7
    assert topo.router_diameter() == 3
    assert bfs_diameter(topo) == 3


def test_df6126_sizes(df6126: Topology) -> None:
    topo = df6126
    assert topo.num_groups == 73
    assert topo.num_switches == 876
    assert topo.num_hosts == 5256
    assert topo.radix == 23
    assert topo.num_local_links == 73 * 66
    assert topo.num_global_links == 73 * 72 // 2
    assert topo.router_diameter() == 3


@pytest.mark.parametrize(
    ("p", "a", "h"), [(1, 1, 1), (1, 2, 1), (3, 1, 2), (2, 3, 1), (1, 2, 3), (2, 4, 2)]
)
def test_small_dragonflies_agree_with_the_formulas(p: int, a: int, h: int) -> None:
    for arrangement in ARRANGEMENTS:
        topo = dragonfly(p, a, h, arrangement)
        g = a * h + 1
        assert (topo.num_groups, topo.num_switches, topo.num_hosts) == (g, a * g, p * a * g)
        assert topo.num_local_links == g * a * (a - 1) // 2
        assert topo.num_global_links == g * (g - 1) // 2
        assert topo.radix == p + (a - 1) + h
        assert topo.router_diameter() == bfs_diameter(topo)
        assert topo.router_diameter() <= 3


def test_router_diameter_of_simple_shapes() -> None:
    assert single_switch(3).router_diameter() == 0
    assert line(5, 1).router_diameter() == 4
    assert dragonfly(1, 1, 1).router_diameter() == 1  # two groups, one router each


# ------------------------------------------------------------------ numbering and ports


def test_dragonfly_switch_and_host_numbering(df242: Topology) -> None:
    p, a = 2, 4
    for switch in df242.switches:
        assert switch.index == switch.group * a + switch.router
        assert switch.name == f"ncs{switch.index}"
        assert switch.node_id == wire.switch_node_id(switch.index)
    assert [h.node_id for h in df242.hosts] == list(range(1, 73))
    for host in df242.hosts:
        assert host.node_id == (host.group * a + host.router) * p + host.local_index + 1
        assert host.switch == host.group * a + host.router
        assert host.port == host.local_index + 1
        assert (host.name, host.mac, host.ip) == (
            f"nch{host.node_id}",
            wire.host_mac(host.node_id),
            wire.host_ip(host.node_id),
        )
        assert df242.host_by_node(host.node_id) is host
        assert df242.host_by_name(host.name) is host
    assert [h.node_id for h in df242.hosts_of_switch(5)] == [11, 12]


def test_names_fit_linux_interface_names(df6126: Topology) -> None:
    longest_port = max(max(ports) for ports in df6126.port_map.values())
    for switch in df6126.switches:
        assert len(f"{switch.name}-eth{longest_port}") <= 15
    assert all(len(f"{h.name}-eth0") <= 15 for h in df6126.hosts)


def test_dragonfly_port_layout(df242_any: Topology) -> None:
    p, a, h = 2, 4, 2
    topo = df242_any
    for switch in topo.switches:
        ports = topo.ports(switch.index)
        expected = set(range(1, p + a + h)) | ({p + a + h} if switch.index == 0 else set())
        assert set(ports) == expected
        for k in range(p):
            assert ports[k + 1].kind == "host"
            assert ports[k + 1].peer == f"nch{switch.index * p + k + 1}"
        others = [r for r in range(a) if r != switch.router]
        for offset, other in enumerate(others):
            info = ports[p + 1 + offset]
            assert info.kind == "local"
            assert info.peer == f"ncs{switch.group * a + other}"
        for k in range(h):
            assert ports[p + a + k].kind == "global"
    mgmt = topo.ports(0)[p + a + h]
    assert (mgmt.kind, mgmt.peer, mgmt.peer_port) == ("mgmt", "ncm0", None)
    assert topo.management.port == p + a + h
    assert topo.management.node_id == wire.MGMT_NODE_ID


def test_every_link_matches_both_port_maps(df242_any: Topology) -> None:
    topo = df242_any
    for link in topo.links:
        at_a, at_b = topo.ports(link.a)[link.a_port], topo.ports(link.b)[link.b_port]
        assert (at_a.kind, at_a.peer, at_a.peer_port) == (link.kind, f"ncs{link.b}", link.b_port)
        assert (at_b.kind, at_b.peer, at_b.peer_port) == (link.kind, f"ncs{link.a}", link.a_port)
        assert topo.port_to(link.a, link.b) == link.a_port
        assert topo.port_to(link.b, link.a) == link.b_port
        assert topo.peer_switch(link.a, link.a_port) == link.b
        same_group = topo.group_of(link.a) == topo.group_of(link.b)
        assert link.kind == ("local" if same_group else "global")


@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
@pytest.mark.parametrize("num_groups", [2, 3, 4, 9, 10, 73])
def test_arrangement_is_an_involution(arrangement: str, num_groups: int) -> None:
    """Following a global link and then the same link back from the far end returns home, and
    each group reaches every other group by exactly one link number."""
    for group in range(num_groups):
        targets = []
        for link in range(num_groups - 1):
            far_group, far_link = global_link_peer(arrangement, group, link, num_groups)
            assert far_group != group
            assert 0 <= far_link < num_groups - 1
            assert global_link_peer(arrangement, far_group, far_link, num_groups) == (group, link)
            targets.append(far_group)
        assert sorted(targets) == [g for g in range(num_groups) if g != group]


def test_documented_arrangement_formulas() -> None:
    g = 9
    for i, link in itertools.product(range(g), range(g - 1)):
        t = link if link < i else link + 1
        assert global_link_peer("absolute", i, link, g) == (t, i if i < t else i - 1)
        assert global_link_peer("relative", i, link, g) == ((i + link + 1) % g, g - link - 2)
    assert global_link_peer("circulant", 0, 0, g) == (1, 1)
    assert global_link_peer("circulant", 0, 1, g) == (8, 0)
    assert global_link_peer("circulant", 1, 2, 4) == (3, 2)  # a*h odd: offset g/2 self-inverse


def test_global_link_ports_follow_link_numbers(df242_any: Topology) -> None:
    """Global port k of router j carries link j*h+k, and both ends agree on where it goes."""
    p, a, h, g = 2, 4, 2, 9
    topo = df242_any
    arrangement = topo.shape.arrangement
    assert arrangement is not None
    pairs: Counter[frozenset[int]] = Counter()
    for link in topo.links:
        if link.kind != "global":
            continue
        ends = ((link.a, link.a_port, link.b), (link.b, link.b_port, link.a))
        for here, port, there in ends:
            number = topo.switch(here).router * h + (port - (p + a))
            far_group, far_number = global_link_peer(arrangement, topo.group_of(here), number, g)
            assert far_group == topo.group_of(there)
            assert topo.switch(there).router == far_number // h
            assert topo.port_to(there, here) == p + a + far_number % h
        pairs[frozenset((topo.group_of(link.a), topo.group_of(link.b)))] += 1
    assert len(pairs) == g * (g - 1) // 2
    assert set(pairs.values()) == {1}


def test_absolute_arrangement_example(df242: Topology) -> None:
    # Group 3's link 3 (router 1, global port k=1 -> port 8) goes to group 4; group 4 numbers it 3.
    router = df242.peer_switch(3 * 4 + 1, 2 + 4 + 1)
    assert router is not None
    assert df242.group_of(router) == 4
    assert df242.switch(router).router == 3 // 2


def test_gateway_lookup(df242: Topology) -> None:
    for src, dst in itertools.permutations(range(9), 2):
        gateway, entry = df242.gateway(src, dst), df242.gateway(dst, src)
        assert (df242.group_of(gateway), df242.group_of(entry)) == (src, dst)
        assert df242.ports(gateway)[df242.port_to(gateway, entry)].kind == "global"
    with pytest.raises(TopologyError, match="no link from group 0 to group 0"):
        df242.gateway(0, 0)


# ------------------------------------------------------------------------ other shapes


def test_single_switch() -> None:
    topo = single_switch(4)
    assert (topo.num_switches, topo.num_hosts, len(topo.links)) == (1, 4, 0)
    assert topo.ports(0)[5].kind == "mgmt"
    assert [topo.ports(0)[k].peer for k in range(1, 5)] == ["nch1", "nch2", "nch3", "nch4"]
    assert topo.groups == ((0,),)
    assert topo.radix == 4


def test_line_ports_and_groups() -> None:
    topo = line(3, 2)
    m = 2
    assert [h.node_id for h in topo.hosts_of_switch(1)] == [3, 4]
    assert set(topo.ports(0)) == {1, 2, m + 2, m + 3}  # no left neighbour, management on m+3
    assert set(topo.ports(1)) == {1, 2, m + 1, m + 2}
    assert set(topo.ports(2)) == {1, 2, m + 1}
    assert topo.port_to(1, 0) == m + 1 and topo.port_to(1, 2) == m + 2
    assert topo.ports(0)[m + 3].kind == "mgmt"
    assert all(link.kind == "line" for link in topo.links)
    assert [(s.group, s.router) for s in topo.switches] == [(0, 0), (1, 0), (2, 0)]
    assert topo.gateway(1, 2) == 1 and topo.gateway(2, 1) == 2
    assert topo.radix == m + 2
    assert topo.router_edges() == [(0, 1, "global"), (1, 2, "global")]


def test_line_of_one_switch_has_no_links() -> None:
    topo = line(1, 3)
    assert topo.links == () and set(topo.ports(0)) == {1, 2, 3, 6}


# -------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: dragonfly(0, 4, 2), "p must be an integer >= 1, got 0"),
        (lambda: dragonfly(2, 0, 2), "a must be an integer >= 1"),
        (lambda: dragonfly(2, 4, 0), "h must be an integer >= 1"),
        (lambda: dragonfly(2, 4, -1), "a valid shape looks like df:2,4,2"),
        (lambda: dragonfly(2, 4, 2, "diagonal"), "choose one of absolute, relative, circulant"),
        (lambda: dragonfly(64, 64, 64), "more than the 16383 host node ids"),
        (lambda: dragonfly(1, 3, 1820), "16383 switches, more than the 16382 switch node ids"),
        (lambda: line(16383, 1), "16383 switches, more than the 16382 switch node ids"),
        (lambda: single_switch(0), "n must be an integer >= 1"),
        (lambda: line(0, 2), "k must be an integer >= 1"),
        (lambda: line(2, 0), "hosts_per_switch must be an integer >= 1"),
    ],
)
def test_invalid_shapes_are_rejected(build: Callable[[], Topology], fragment: str) -> None:
    with pytest.raises(TopologyError) as info:
        build()
    assert fragment in str(info.value)


def test_unknown_nodes_are_named(df242: Topology) -> None:
    with pytest.raises(
        TopologyError, match=r"node 73 is not a host of df:2,4,2:absolute \(hosts are 1..72\)"
    ):
        df242.host_by_node(73)
    with pytest.raises(TopologyError, match="no host named 'h1'"):
        df242.host_by_name("h1")
    with pytest.raises(TopologyError, match="switch 36 is not in"):
        df242.switch(36)
    with pytest.raises(TopologyError, match="has no link to switch 5"):
        df242.port_to(0, 5)


# ------------------------------------------------------------------------- spec parsing


@pytest.mark.parametrize(
    ("spec", "canonical", "hosts"),
    [
        ("df:2,4,2", "df:2,4,2:absolute", 72),
        ("df:2,4,2:relative", "df:2,4,2:relative", 72),
        (" DF:1,2,1:circulant ", "df:1,2,1:circulant", 6),
        ("single:4", "single:4", 4),
        ("line:3,2", "line:3,2", 6),
    ],
)
def test_parse_spec(spec: str, canonical: str, hosts: int) -> None:
    topo = parse_spec(spec)
    assert topo.shape.spec == canonical
    assert topo.num_hosts == hosts
    assert parse_spec(canonical) == topo


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("torus:4,4", "accepted forms: df:P,A,H"),
        ("df:2,4", "needs 3 comma-separated integers"),
        ("df:2,x,2", "non-integer parameter"),
        ("df:2,4,2:relative:extra", "accepted forms"),
        ("df:2,4,2:wrong", "unknown global-link arrangement 'wrong'"),
        ("single:", "non-integer parameter"),
        ("line:3", "needs 2 comma-separated integers"),
        ("", "accepted forms"),
    ],
)
def test_parse_spec_errors(spec: str, fragment: str) -> None:
    with pytest.raises(TopologyError) as info:
        parse_spec(spec)
    assert fragment in str(info.value)


# ------------------------------------------------------------------------ serialization


@pytest.mark.parametrize(
    "spec", ["df:2,4,2", "df:2,4,2:relative", "df:1,2,3:circulant", "single:4", "line:3,2"]
)
def test_json_round_trip_is_exact(spec: str, tmp_path: Path) -> None:
    topo = parse_spec(spec)
    data = topo.to_dict()
    assert data["format"] == FORMAT
    assert Topology.from_dict(data) == topo
    assert Topology.from_dict(data).to_dict() == data
    path = tmp_path / "topo.json"
    topo.save(path)
    loaded = Topology.load(path)
    assert loaded == topo
    assert loaded.to_dict() == data
    assert json.loads(path.read_text()) == data


def test_json_document_contents(df242: Topology) -> None:
    data = df242.to_dict()
    assert data["shape"] == {
        "kind": "dragonfly",
        "params": {"p": 2, "a": 4, "h": 2},
        "arrangement": "absolute",
        "spec": "df:2,4,2:absolute",
    }
    assert data["management"] == {
        "node_id": wire.MGMT_NODE_ID,
        "name": "ncm0",
        "switch": 0,
        "port": 8,
        "mac": wire.host_mac(wire.MGMT_NODE_ID),
        "ip": wire.host_ip(wire.MGMT_NODE_ID),
    }
    assert "runtime" not in data  # the realised network goes to network.json, not here
    assert len(data["switches"]) == 36 and len(data["hosts"]) == 72
    assert data["switches"][0]["ports"][-1] == {
        "port": 8,
        "kind": "mgmt",
        "peer": "ncm0",
        "peer_port": None,
    }
    edges = Counter(kind for _, _, kind in data["router_edges"])
    assert edges == {"local": 54, "global": 36}
    for r1, r2, kind in data["router_edges"]:
        assert r1 < r2
        assert (kind == "local") == (r1 // 4 == r2 // 4)


def test_write_router_edges(df242: Topology, tmp_path: Path) -> None:
    path = tmp_path / "routers.edges"
    df242.write_router_edges(path)
    lines = path.read_text().splitlines()
    assert len(lines) == 90
    assert lines[0] == "0 1 local"
    parsed = {tuple(line.split()) for line in lines}
    assert ("0", "4", "global") in parsed  # group 0's link 0 (router 0) reaches group 1's router 0


def test_from_dict_rejects_foreign_or_tampered_documents(df242: Topology) -> None:
    with pytest.raises(TopologyError, match="not a netcoll-topology/1 document"):
        Topology.from_dict({"format": "other/1"})
    tampered = df242.to_dict()
    tampered["switches"][3]["ports"][0]["peer"] = "nch99"
    with pytest.raises(TopologyError, match="stored 'switches' differ"):
        Topology.from_dict(tampered)
    clash = df242.to_dict()
    clash["hosts"][1]["port"] = 1
    with pytest.raises(TopologyError, match="port 1 of ncs0 is used by both nch1 and nch2"):
        Topology.from_dict(clash)
    missing = df242.to_dict()
    del missing["links"]
    with pytest.raises(TopologyError, match="malformed topology document"):
        Topology.from_dict(missing)


def test_load_rejects_non_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(TopologyError, match="is not JSON"):
        Topology.load(path)


# --------------------------------------------------------------------------------- CLI


def test_cli_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert topo_main(["df:2,4,2", "--summary"]) == 0
    out = capsys.readouterr().out
    for line_text in (
        "groups               9",
        "routers              36",
        "hosts                72",
        "local links          54",
        "global links         36",
        "radix                7",
        "router-hop diameter  3",
    ):
        assert line_text in out


def test_cli_writes_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    json_path, edges_path = tmp_path / "t.json", tmp_path / "r.edges"
    argv = ["df:2,4,2", "--arrangement", "relative", "--write", str(json_path)]
    assert topo_main([*argv, "--edges", str(edges_path)]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "groups" not in out  # no summary unless asked when writing
    topo = Topology.load(json_path)
    assert topo == dragonfly(2, 4, 2, "relative")
    assert len(edges_path.read_text().splitlines()) == 90


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["df:0,4,2"], "p must be an integer >= 1"),
        (["mesh:3"], "accepted forms"),
        (["single:4", "--arrangement", "relative"], "dragonflies only"),
        (["df:2,4,2:absolute", "--arrangement", "relative"], "already names arrangement"),
    ],
)
def test_cli_errors_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert topo_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("netcoll-topo: error:") and fragment in err


def test_members_by_group_orders_groups_and_keeps_member_order(df242: Topology) -> None:
    def group_of(node: int) -> int:
        return df242.host_by_node(node).group

    nodes = [h.node_id for h in df242.hosts]
    shuffled = nodes[::-1]
    by_group = members_by_group(shuffled, group_of)
    assert list(by_group) == list(range(df242.num_groups))
    assert all(len(members) == 2 * 4 for members in by_group.values())
    # members keep the order given (here decreasing), so callers choose it, e.g. sorted()
    assert by_group[0] == [h.node_id for h in df242.hosts if h.group == 0][::-1]
    assert sorted(m for members in by_group.values() for m in members) == nodes
    subset = [70, 3, 17, 4]
    assert members_by_group(subset, group_of) == {0: [3, 4], 2: [17], 8: [70]}
    assert members_by_group([], group_of) == {}
