"""Broadcast (in-network, Ragasa) and barrier trees: shape, coverage, ordering, validation.

Random communicators use a fresh seed per run, printed as ``seed=...`` (shown with the failure
report); set NETCOLL_TEST_SEED to replay one.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import replace

import pytest

from controller import wire
from controller.routing import hop_count, minimal_path
from controller.topology import ARRANGEMENTS, Topology, TopologyError
from controller.topology_build import dragonfly, line, single_switch
from controller.trees import (
    TREE_BARRIER,
    Tree,
    TreeError,
    TreeNode,
    barrier_root_switch,
    barrier_tree,
    child_bitmap,
    innet_tree,
    ragasa_group_tree,
    ragasa_relay,
    ragasa_trees,
)

pytestmark = pytest.mark.unit

KIND_ORDER = {"global": 0, "line": 0, "local": 1, "host": 2}


@pytest.fixture
def rng(test_rng: random.Random) -> random.Random:
    return test_rng


@pytest.fixture(scope="module", params=ARRANGEMENTS)
def df242(request: pytest.FixtureRequest) -> Topology:
    return dragonfly(2, 4, 2, request.param)


@pytest.fixture(scope="module")
def df6126() -> Topology:
    return dragonfly(6, 12, 6, "relative")


def all_hosts(topo: Topology) -> frozenset[int]:
    return frozenset(h.node_id for h in topo.hosts)


def random_communicator(topo: Topology, rng: random.Random) -> tuple[frozenset[int], int]:
    size = rng.choice([1, 2, 3, rng.randint(1, topo.num_hosts)])
    members = rng.sample([h.node_id for h in topo.hosts], size)
    return frozenset(members), rng.choice(members)


def member_groups(topo: Topology, members: frozenset[int]) -> set[int]:
    return {topo.host_by_node(m).group for m in members}


def check_child_order(tree: Tree) -> None:
    """Child switch ports first, global before local, then host ports; each kind ascending."""
    for switch, node in tree.nodes.items():
        kinds = [tree.topology.ports(switch)[port].kind for port in node.child_ports]
        keys = [
            (KIND_ORDER[kind], port) for kind, port in zip(kinds, node.child_ports, strict=True)
        ]
        assert keys == sorted(keys), f"switch {switch} child ports {node.child_ports} {kinds}"


def check_innet(topo: Topology, members: frozenset[int], root: int) -> Tree:
    tree = innet_tree(topo, members, root)
    tree.validate()
    root_host = topo.host_by_node(root)
    assert tree.root_switch == root_host.switch
    assert tree.nodes[tree.root_switch].parent_port == root_host.port
    assert tree.switch_links() == len(tree.nodes) - 1
    assert tree.hosts_reached() == members - {root}
    check_child_order(tree)
    # Independently: the switches are exactly those on the minimal routes to member switches.
    on_routes = {
        s
        for m in members
        for s in minimal_path(topo, root_host.switch, topo.host_by_node(m).switch)
    }
    assert set(tree.nodes) == on_routes
    if topo.shape.kind == "dragonfly":
        assert tree.depth() <= 3
        # Each remote group with members is entered by exactly one global link.
        global_children = sum(
            topo.ports(s)[p].kind == "global" for s, n in tree.nodes.items() for p in n.child_ports
        )
        assert global_children == len(member_groups(topo, members) - {root_host.group})
    return tree


# ------------------------------------------------------------------------------- innet


def test_innet_full_df242_every_root(df242: Topology) -> None:
    members = all_hosts(df242)
    for root in sorted(members):
        tree = check_innet(df242, members, root)
        assert len(tree.nodes) == 36 and tree.switch_links() == 35
        # The physical limit of a broadcast: R - 1 router links and one link per receiving host.
        assert tree.switch_links() + len(tree.hosts_reached()) == (36 - 1) + (72 - 1)
        assert tree.depth() == 3


def test_innet_random_communicators_df242(df242: Topology, rng: random.Random) -> None:
    for _ in range(150):
        members, root = random_communicator(df242, rng)
        check_innet(df242, members, root)


def test_innet_df6126(df6126: Topology, rng: random.Random) -> None:
    tree = check_innet(df6126, all_hosts(df6126), rng.choice(df6126.hosts).node_id)
    assert len(tree.nodes) == 876 and tree.depth() == 3
    for _ in range(5):
        members, root = random_communicator(df6126, rng)
        check_innet(df6126, members, root)


def test_innet_root_only_communicator(df242: Topology) -> None:
    tree = innet_tree(df242, {17}, 17)
    tree.validate()
    assert tree.nodes == {8: TreeNode(8, 1, ())}
    assert (tree.depth(), tree.switch_links(), tree.hosts_reached()) == (0, 0, frozenset())


def test_innet_child_port_example() -> None:
    """Df(2,4,2) absolute, root host 1 at switch 0: switch 0 holds group 0's links 0 and 1 to
    groups 1 and 2 (ports 6, 7), local ports 3..5 to routers 1..3, host port 2 for host 2."""
    topo = dragonfly(2, 4, 2, "absolute")
    tree = innet_tree(topo, all_hosts(topo), 1)
    assert tree.nodes[0] == TreeNode(0, 1, (6, 7, 3, 4, 5, 2))
    # Switch 4 is group 1's router 0, entered over its global port 6 from switch 0.
    assert tree.nodes[4].parent_port == 6
    assert tree.children_switches(0) == (4, 8, 1, 2, 3)
    assert tree.parent_switch(4) == 0 and tree.parent_switch(0) is None


def test_innet_on_line_and_single() -> None:
    chain = line(5, 2)
    tree = check_innet(chain, frozenset({1, 10}), 1)
    assert sorted(tree.nodes) == [0, 1, 2, 3, 4] and tree.depth() == 4
    assert tree.nodes[2] == TreeNode(2, 3, (4,))  # transit: in from the left, out to the right
    one = single_switch(4)
    tree = check_innet(one, all_hosts(one), 3)
    assert tree.nodes == {0: TreeNode(0, 3, (1, 2, 4))}


# ------------------------------------------------------------------------------ Ragasa


def check_ragasa(topo: Topology, members: frozenset[int], root: int) -> None:
    plan = ragasa_trees(topo, members, root)
    root_group = topo.host_by_node(root).group
    remote_groups = member_groups(topo, members) - {root_group}
    relay_groups = [topo.host_by_node(r).group for r in plan.relays]
    assert sorted(relay_groups) == sorted(remote_groups)  # exactly one relay per remote group
    for relay in plan.relays:
        assert relay in members
        group = topo.host_by_node(relay).group
        in_group = sorted(m for m in members if topo.host_by_node(m).group == group)
        if topo.shape.kind == "dragonfly":
            entry = topo.gateway(group, root_group)
        else:
            (entry,) = topo.groups[group]  # a line's group is one switch
        at_entry = [m for m in in_group if topo.host_by_node(m).switch == entry]
        assert relay == (at_entry or in_group)[0]
        assert ragasa_relay(topo, members, root, group) == relay
    plan.spread.validate()
    assert plan.spread.hosts_reached() == frozenset(plan.relays)
    assert plan.spread.switch_links() == len(plan.spread.nodes) - 1
    check_child_order(plan.spread)
    assert set(plan.group_trees) == {root, *plan.relays}
    deliveries: Counter[int] = Counter(plan.spread.hosts_reached())
    for host, tree in plan.group_trees.items():
        tree.validate()
        check_child_order(tree)
        assert tree.root_node == host
        group = topo.host_by_node(host).group
        assert {topo.switch(s).group for s in tree.nodes} == {group}
        if topo.shape.kind == "dragonfly":
            assert tree.depth() <= 1 and plan.spread.depth() <= 3
        assert tree == ragasa_group_tree(topo, members, host)
        deliveries.update(tree.hosts_reached())
    # Spread and group trees together deliver every member but the root exactly once.
    assert deliveries == Counter(members - {root})


def test_ragasa_full_df242_every_root(df242: Topology) -> None:
    members = all_hosts(df242)
    for root in sorted(members):
        check_ragasa(df242, members, root)
        plan = ragasa_trees(df242, members, root)
        assert len(plan.relays) == 8


def test_ragasa_random_communicators(df242: Topology, rng: random.Random) -> None:
    for _ in range(100):
        members, root = random_communicator(df242, rng)
        check_ragasa(df242, members, root)


def test_ragasa_df6126_and_line(df6126: Topology, rng: random.Random) -> None:
    members, root = random_communicator(df6126, rng)
    check_ragasa(df6126, members, root)
    check_ragasa(df6126, all_hosts(df6126), 1)
    check_ragasa(line(4, 2), frozenset({1, 2, 5, 7, 8}), 2)


def test_ragasa_relay_rule_example() -> None:
    """Df(2,4,2) absolute, root 72 (group 8). Group 1 holds its link to group 8 on router 3
    (switch 7, hosts 15 and 16): that is where the spread tree enters group 1."""
    topo = dragonfly(2, 4, 2, "absolute")
    assert topo.gateway(1, 8) == 7
    plan = ragasa_trees(topo, {72, 10, 16}, 72)
    assert plan.relays == (16,)  # attached to the entry router, although 10 is lower
    assert plan.spread.nodes[7].child_ports == (2,)
    plan = ragasa_trees(topo, {72, 10, 12}, 72)
    assert plan.relays == (10,)  # nobody at the entry router: the lowest member of the group
    assert plan.spread.nodes[7].child_ports == (topo.port_to(7, 4),)
    assert plan.group_trees[10].hosts_reached() == {12}
    with pytest.raises(TopologyError, match="not a remote group with members"):
        ragasa_relay(topo, {72, 12}, 72, 2)


def test_ragasa_group_trees_are_shared_between_roots(df242: Topology, rng: random.Random) -> None:
    members = frozenset(rng.sample(range(1, 73), 30))
    roots = sorted(members)
    trees_by_relay: dict[int, list[Tree]] = {}
    for root in roots:
        for host, tree in ragasa_trees(df242, members, root).group_trees.items():
            trees_by_relay.setdefault(host, []).append(tree)
    for host, trees in trees_by_relay.items():
        assert all(tree == trees[0] for tree in trees), f"group tree of {host} depends on the root"


# ----------------------------------------------------------------------------- barrier


def brute_force_barrier_root(topo: Topology, members: frozenset[int]) -> int:
    hosts = [topo.host_by_node(m) for m in members]
    attached = Counter(h.switch for h in hosts)
    return min(
        range(topo.num_switches),
        key=lambda c: (max(hop_count(topo, c, s) for s in attached), -attached[c], c),
    )


def check_barrier(topo: Topology, members: frozenset[int]) -> Tree:
    tree = barrier_tree(topo, members)
    tree.validate()
    assert tree.kind == TREE_BARRIER
    assert tree.root_node == wire.switch_node_id(tree.root_switch)
    assert tree.nodes[tree.root_switch].parent_port == 0
    assert tree.hosts_reached() == members
    assert tree.switch_links() == len(tree.nodes) - 1
    check_child_order(tree)
    if topo.shape.kind == "dragonfly":
        assert tree.depth() <= 3
    return tree


def test_barrier_random_communicators(df242: Topology, rng: random.Random) -> None:
    for _ in range(100):
        members, _root = random_communicator(df242, rng)
        tree = check_barrier(df242, members)
        assert tree.root_switch == brute_force_barrier_root(df242, members)


def test_barrier_full_communicators(df242: Topology, df6126: Topology) -> None:
    tree = check_barrier(df242, all_hosts(df242))
    assert len(tree.nodes) == 36 and tree.depth() == 3
    assert tree.root_switch == 0  # every switch is 3 hops from some switch; lowest index wins
    big = check_barrier(df6126, all_hosts(df6126))
    assert len(big.nodes) == 876


def test_barrier_root_rule_examples() -> None:
    chain = line(5, 2)
    assert barrier_root_switch(chain, all_hosts(chain)) == 2  # the middle of the chain
    assert barrier_root_switch(chain, {1, 3}) == 0  # tie on distance and count: lowest index
    assert barrier_root_switch(chain, {1, 3, 4}) == 1  # tie on distance: more members attached
    df = dragonfly(2, 4, 2, "absolute")
    # Hosts 3 and 11 sit on switches 1 (group 0) and 5 (group 1). Switches 12 and 16 (router 0
    # of groups 3 and 4) hold global links landing exactly on switches 1 and 5: 1 hop to both.
    assert barrier_root_switch(df, {3, 11}) == 12  # tie, no members attached: lowest index
    assert check_barrier(df, frozenset({3, 11})).depth() == 1
    # Adding host 9 (switch 4) leaves no 1-hop switch; nine switches reach all in 2 hops and
    # switch 4 is the only one of them with a member attached.
    assert barrier_root_switch(df, {3, 9, 11}) == 4


def test_barrier_on_single_switch() -> None:
    one = single_switch(3)
    tree = check_barrier(one, frozenset({1, 3}))
    assert tree.nodes == {0: TreeNode(0, 0, (1, 3))}


# ---------------------------------------------------------------------- child bitmap


def test_child_bitmap() -> None:
    assert child_bitmap([]) == 0
    assert child_bitmap([1]) == 1
    assert child_bitmap([3, 1]) == 0b101
    assert child_bitmap([32]) == 1 << 31
    with pytest.raises(TopologyError, match="port 33 does not fit"):
        child_bitmap([1, 33])
    with pytest.raises(TopologyError, match="port 0 does not fit"):
        child_bitmap([0])


# ------------------------------------------------------------------------ bad requests


@pytest.mark.parametrize(
    ("members", "root", "fragment"),
    [
        (set(), 1, "no members"),
        ({1, 2}, 3, "root 3 is not a member"),
        ({1, 73}, 1, "node 73 is not a host of df:2,4,2"),
        ({1, wire.switch_node_id(0)}, 1, f"node {wire.switch_node_id(0)} is not a host"),
    ],
)
def test_bad_communicators_are_named(members: set[int], root: int, fragment: str) -> None:
    topo = dragonfly(2, 4, 2)
    for build in (innet_tree, ragasa_trees):
        with pytest.raises(TopologyError) as info:
            build(topo, members, root)
        assert fragment in str(info.value)
    if fragment != f"root {root} is not a member":
        with pytest.raises(TopologyError) as info:
            barrier_tree(topo, members)
        assert fragment in str(info.value)
    with pytest.raises(TopologyError, match="relay 5 is not a member"):
        ragasa_group_tree(topo, {1, 2}, 5)


# ---------------------------------------------------------------------- validate() bites


@pytest.fixture(scope="module")
def df_abs() -> Topology:
    return dragonfly(2, 4, 2, "absolute")


def corrupt(tree: Tree, switch: int, **changes: object) -> Tree:
    nodes = dict(tree.nodes)
    nodes[switch] = replace(nodes[switch], **changes)  # type: ignore[arg-type]
    return replace(tree, nodes=nodes)


def test_validate_rejects_inconsistent_trees(df_abs: Topology) -> None:
    tree = innet_tree(df_abs, all_hosts(df_abs), 1)
    tree.validate()
    leaf = 5  # group 1's router 1, child of switch 4, delivering hosts 11 and 12
    assert tree.parent_switch(leaf) == 4
    to_parent, to_sibling = df_abs.port_to(leaf, 4), df_abs.port_to(leaf, 6)
    assert tree.nodes[leaf] == TreeNode(leaf, to_parent, (1, 2))
    parent_children = tuple(p for p in tree.nodes[4].child_ports if p != df_abs.port_to(4, leaf))
    sibling_children = (df_abs.port_to(6, leaf), *tree.nodes[6].child_ports)
    cases = [
        (corrupt(tree, leaf, child_ports=(1,)), "never reached [12]"),
        (corrupt(tree, leaf, child_ports=(1, 1, 2)), "repeats a child port"),
        (corrupt(tree, leaf, child_ports=()), "leaf with no child"),
        (corrupt(tree, leaf, parent_port=99), "does not lead to a switch of the tree"),
        (corrupt(tree, leaf, parent_port=to_sibling), "is not a child port"),
        (corrupt(tree, 4, child_ports=parent_children), "is not a child port"),
        (corrupt(tree, 6, child_ports=sibling_children), "points elsewhere"),  # two parents
        (corrupt(tree, 0, parent_port=2), "must take the root host 1"),
        (corrupt(tree, 0, child_ports=(6, 7, 3, 4, 5, 2, 8)), "not a host or switch-link port"),
        (replace(tree, members=tree.members - {12}), "reached but not expected [12]"),
        (replace(tree, root_switch=99), "root switch 99 has no node"),
    ]
    for broken, fragment in cases:
        with pytest.raises(TreeError) as info:
            broken.validate()
        assert fragment in str(info.value), (fragment, str(info.value))


def test_validate_rejects_a_detached_cycle(df_abs: Topology) -> None:
    """Switches 1 -> 2 -> 3 -> 1 each name the previous one as parent: every parent/child pair
    is locally consistent, but the cycle hangs off nothing."""
    cycle = [1, 2, 3]
    nodes = {0: TreeNode(0, 1, (2,))}
    for here, parent, child in zip(
        cycle, cycle[-1:] + cycle[:-1], cycle[1:] + cycle[:1], strict=True
    ):
        nodes[here] = TreeNode(here, df_abs.port_to(here, parent), (df_abs.port_to(here, child), 1))
    members = frozenset({1, 2, 3, 5, 7})
    with pytest.raises(TreeError, match=r"switches \[1, 2, 3\] are not reachable from the root"):
        Tree("innet", 1, members, 0, nodes, df_abs).validate()


def test_every_root_and_member_pair_is_delivered_once_df242(df_abs: Topology) -> None:
    """Across all 72 roots of the full communicator, each (root, receiver) pair is delivered
    exactly once by the innet tree and exactly once by Ragasa's trees."""
    members = all_hosts(df_abs)
    for root in sorted(members):
        innet = innet_tree(df_abs, members, root).hosts_reached()
        plan = ragasa_trees(df_abs, members, root)
        ragasa = Counter(itertools.chain.from_iterable(t.hosts_reached() for t in plan.trees()))
        assert innet == members - {root}
        assert ragasa == Counter(members - {root})
