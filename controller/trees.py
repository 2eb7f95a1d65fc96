"""Broadcast and barrier trees of a communicator, as plain data.

A communicator is a set of member host node ids (and, for broadcasts, a root among them). Every
tree here is the union of :func:`~controller.routing.minimal_path` routes from one switch to the
switches that hold members. Minimal routing is prefix-consistent (the route to a switch on a
route is that route's prefix), so the union is a tree: each switch gets exactly one parent and
there are exactly ``switches - 1`` switch links. On a dragonfly a tree is therefore "other
groups first over global links, then routers of the group over local links, then hosts", with
depth at most 3 switch hops; transit switches (holding a needed global link but no member) are
included.

Per switch a :class:`TreeNode` holds the port toward the parent and the child ports. Child
ports are ordered: ports to child switches first, global (and line) ports before local ones so
remote groups are served first, each kind in increasing port order; then member host ports in
increasing port order.

Trees
-----
``innet_tree``        switch-only broadcast from the root host's switch to every member.
``ragasa_trees``      [Ragasa] (README, Papers): a *spread* tree from the root's switch to one relay
                      host per remote group holding members, then one *group* tree per relay
                      (and one for the root's own group) delivering to the rest of that group.
``barrier_tree``      switch-rooted tree over all members; hosts send ARRIVE up it and the
                      root switch sends RELEASE down it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable

from controller.routing import hop_count, minimal_path
from controller.topology import KIND_DRAGONFLY, Topology, TopologyError, members_by_group
from controller.tree_model import MAX_CHILD_PORT as MAX_CHILD_PORT
from controller.tree_model import TREE_BARRIER as TREE_BARRIER
from controller.tree_model import TREE_INNET as TREE_INNET
from controller.tree_model import TREE_RAGASA_GROUP as TREE_RAGASA_GROUP
from controller.tree_model import TREE_RAGASA_SPREAD as TREE_RAGASA_SPREAD
from controller.tree_model import WIRE_TREE as WIRE_TREE
from controller.tree_model import RagasaPlan as RagasaPlan
from controller.tree_model import Tree as Tree
from controller.tree_model import TreeError as TreeError
from controller.tree_model import TreeNode as TreeNode
from controller.tree_model import child_bitmap as child_bitmap

# Serve remote groups first: links leaving the group, then local links.
_CHILD_KIND_RANK = {"global": 0, "line": 0, "local": 1}


# ------------------------------------------------------------------------------ building


def _check_members(
    topo: Topology, members: Iterable[int], root: int | None, role: str = "root"
) -> frozenset[int]:
    member_set = frozenset(members)
    if not member_set:
        raise TopologyError("the communicator has no members")
    for node in sorted(member_set):
        if not topo.is_host(node):
            topo.host_by_node(node)  # raises, naming the node and the valid host range
    if root is not None and root not in member_set:
        raise TopologyError(f"{role} {root} is not a member of the communicator")
    return member_set


def _parents_from_routes(
    topo: Topology, root_switch: int, targets: Iterable[int]
) -> dict[int, int]:
    """switch -> parent switch for the union of minimal paths from ``root_switch`` to each of
    ``targets``. The root maps to itself."""
    parents = {root_switch: root_switch}
    for target in sorted(set(targets)):
        path = minimal_path(topo, root_switch, target)
        for parent, switch in itertools.pairwise(path):
            known = parents.setdefault(switch, parent)
            if known != parent:  # would mean routing is not prefix-consistent: a bug
                raise TreeError(
                    f"routes from switch {root_switch} reach switch {switch} from both "
                    f"{known} and {parent}"
                )
    return parents


def _ordered_switch_ports(topo: Topology, switch: int, children: Iterable[int]) -> list[int]:
    ports = [topo.port_to(switch, child) for child in children]
    kinds = topo.ports(switch)
    return sorted(ports, key=lambda port: (_CHILD_KIND_RANK[kinds[port].kind], port))


def _assemble(
    topo: Topology,
    kind: str,
    root_node: int,
    members: frozenset[int],
    root_switch: int,
    root_parent_port: int,
    deliver_to: frozenset[int],
) -> Tree:
    """The tree of minimal routes from ``root_switch`` to the switches of ``deliver_to``, with a
    host port for each host of ``deliver_to``."""
    hosts = [topo.host_by_node(node) for node in deliver_to]
    parents = _parents_from_routes(topo, root_switch, (h.switch for h in hosts))
    children: dict[int, list[int]] = {switch: [] for switch in parents}
    for switch, parent in parents.items():
        if switch != root_switch:
            children[parent].append(switch)
    host_ports: dict[int, list[int]] = {switch: [] for switch in parents}
    for host in hosts:
        host_ports[host.switch].append(host.port)
    nodes = {}
    for switch in sorted(parents):
        parent_port = (
            root_parent_port if switch == root_switch else topo.port_to(switch, parents[switch])
        )
        child_ports = _ordered_switch_ports(topo, switch, children[switch]) + sorted(
            host_ports[switch]
        )
        nodes[switch] = TreeNode(switch, parent_port, tuple(child_ports))
    return Tree(kind, root_node, members, root_switch, nodes, topo)


def innet_tree(topo: Topology, members: Iterable[int], root: int) -> Tree:
    """Switch-only broadcast tree from the root host's switch to every other member."""
    member_set = _check_members(topo, members, root)
    root_host = topo.host_by_node(root)
    return _assemble(
        topo,
        TREE_INNET,
        root,
        member_set,
        root_host.switch,
        root_host.port,
        member_set - {root},
    )


def _members_by_group(topo: Topology, members: frozenset[int]) -> dict[int, list[int]]:
    """group -> its members in increasing node id order."""
    return members_by_group(sorted(members), lambda node: topo.host_by_node(node).group)


def _entry_switch(topo: Topology, root_switch: int, group: int) -> int:
    """The first switch of ``group`` on routes from ``root_switch``: on a dragonfly the router of
    ``group`` holding the global link from the root's group, on a line the group's only switch."""
    route = minimal_path(topo, root_switch, topo.groups[group][0])
    return next(switch for switch in route if topo.switches[switch].group == group)


def _relay_of(topo: Topology, group_members: list[int], group: int, root_switch: int) -> int:
    entry = _entry_switch(topo, root_switch, group)
    at_entry = [node for node in group_members if topo.host_by_node(node).switch == entry]
    return (at_entry or group_members)[0]


def ragasa_relay(topo: Topology, members: Iterable[int], root: int, group: int) -> int:
    """The relay of a remote ``group`` for a broadcast from ``root``: the lowest-numbered member
    attached to the group's entry router (the one holding the global link from the root's group;
    on a line, the group's only switch), so the spread tree stops there without a local hop;
    else the lowest-numbered member of the group."""
    member_set = _check_members(topo, members, root)
    root_host = topo.host_by_node(root)
    in_group = _members_by_group(topo, member_set).get(group)
    if group == root_host.group or not in_group:
        raise TopologyError(f"group {group} is not a remote group with members for root {root}")
    return _relay_of(topo, in_group, group, root_host.switch)


def ragasa_group_tree(topo: Topology, members: Iterable[int], relay: int) -> Tree:
    """Tree from ``relay`` to every other member of the relay's group. It depends only on
    (relay, members), so broadcasts from different roots can share it."""
    member_set = _check_members(topo, members, relay, role="relay")
    relay_host = topo.host_by_node(relay)
    group_members = frozenset(
        node for node in member_set if topo.host_by_node(node).group == relay_host.group
    )
    return _assemble(
        topo,
        TREE_RAGASA_GROUP,
        relay,
        group_members,
        relay_host.switch,
        relay_host.port,
        group_members - {relay},
    )


def ragasa_trees(topo: Topology, members: Iterable[int], root: int) -> RagasaPlan:
    """Ragasa's broadcast plan for ``root``: see :class:`RagasaPlan` and :func:`ragasa_relay`."""
    member_set = _check_members(topo, members, root)
    root_host = topo.host_by_node(root)
    relays = tuple(
        _relay_of(topo, group_members, group, root_host.switch)
        for group, group_members in sorted(_members_by_group(topo, member_set).items())
        if group != root_host.group
    )
    spread = _assemble(
        topo,
        TREE_RAGASA_SPREAD,
        root,
        frozenset({root, *relays}),
        root_host.switch,
        root_host.port,
        frozenset(relays),
    )
    group_trees = {host: ragasa_group_tree(topo, member_set, host) for host in (root, *relays)}
    return RagasaPlan(root, spread, group_trees, relays)


def _member_switch_spread(topo: Topology, candidate: int, member_switches: set[int]) -> int:
    """Largest minimal-route hop count from ``candidate`` to a switch of ``member_switches``."""
    return max(hop_count(topo, candidate, switch) for switch in member_switches)


def _dragonfly_spread(
    topo: Topology, candidate: int, switches_by_group: dict[int, set[int]]
) -> int:
    """Same as :func:`_member_switch_spread` on a dragonfly, in O(groups): toward another group
    the farthest member switch is 1 hop (the global link) plus 1 if the candidate is not that
    group's gateway plus 1 if some member switch is not the entry router."""
    own_group = topo.switches[candidate].group
    worst = 0
    for group, switches in switches_by_group.items():
        if group == own_group:
            worst = max(worst, 0 if switches == {candidate} else 1)
            continue
        entry = topo.gateway(group, own_group)
        hops = 1 + (topo.gateway(own_group, group) != candidate) + bool(switches - {entry})
        worst = max(worst, hops)
    return worst


def barrier_root_switch(topo: Topology, members: Iterable[int]) -> int:
    """The barrier tree's root: the switch minimising the largest minimal-route hop count to a
    switch holding members (so the tree is as shallow as possible: <= 3 on a dragonfly); ties go
    to the switch with the most member hosts attached, then to the lowest index."""
    member_set = _check_members(topo, members, None)
    hosts = [topo.host_by_node(node) for node in member_set]
    attached = Counter(host.switch for host in hosts)
    switches_by_group = {
        group: {topo.host_by_node(node).switch for node in nodes}
        for group, nodes in _members_by_group(topo, member_set).items()
    }
    member_switches = set(attached)

    def rank(candidate: int) -> tuple[int, int, int]:
        if topo.shape.kind == KIND_DRAGONFLY:
            spread = _dragonfly_spread(topo, candidate, switches_by_group)
        else:
            spread = _member_switch_spread(topo, candidate, member_switches)
        return spread, -attached[candidate], candidate

    return min(range(topo.num_switches), key=rank)


def barrier_tree(topo: Topology, members: Iterable[int]) -> Tree:
    """Switch-rooted tree over every member (see :func:`barrier_root_switch`). ``root_node`` is
    the root switch's node id and its ``parent_port`` is 0; child ports list child switches and
    every member host port, so a switch's child mask covers all its arrivals."""
    member_set = _check_members(topo, members, None)
    root_switch = barrier_root_switch(topo, member_set)
    return _assemble(
        topo,
        TREE_BARRIER,
        topo.switch(root_switch).node_id,
        member_set,
        root_switch,
        0,
        member_set,
    )
