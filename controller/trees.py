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
from dataclasses import dataclass, field

from controller import wire
from controller.routing import hop_count, minimal_path
from controller.topology import KIND_DRAGONFLY, Topology, TopologyError, members_by_group

TREE_INNET = "innet"
TREE_RAGASA_SPREAD = "ragasa_spread"
TREE_RAGASA_GROUP = "ragasa_group"
TREE_BARRIER = "barrier"

# Wire encoding of the broadcast tree kinds (barrier trees are not MCAST trees).
WIRE_TREE = {
    TREE_INNET: wire.Tree.INNET,
    TREE_RAGASA_SPREAD: wire.Tree.RAGASA_SPREAD,
    TREE_RAGASA_GROUP: wire.Tree.RAGASA_GROUP,
}

MAX_CHILD_PORT = 32  # the data plane's child bitmap is 32 bits wide

# Serve remote groups first: links leaving the group, then local links.
_CHILD_KIND_RANK = {"global": 0, "line": 0, "local": 1}


class TreeError(TopologyError):
    """A tree that is inconsistent with itself or with its topology."""


@dataclass(frozen=True, slots=True)
class TreeNode:
    switch: int
    parent_port: int  # 0: no parent (root of a switch-rooted tree)
    child_ports: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Tree:
    """A tree over switches. ``root_node`` is the root host for broadcast trees (its port at
    ``root_switch`` is the root's ``parent_port``), or the root switch's own node id
    (``wire.switch_node_id(root_switch)``) for switch-rooted barrier trees, whose root has
    ``parent_port`` 0. ``members`` are the hosts the tree is about: for a broadcast tree the
    root plus every host it delivers to, for a barrier every host that arrives."""

    kind: str
    root_node: int
    members: frozenset[int]
    root_switch: int
    nodes: dict[int, TreeNode]
    topology: Topology = field(repr=False, compare=False)

    @property
    def switch_rooted(self) -> bool:
        return wire.SWITCH_ID_BASE <= self.root_node <= wire.SWITCH_ID_MAX

    def children_switches(self, switch: int) -> tuple[int, ...]:
        """Child switches of ``switch``, in child-port order."""
        peers = (self.topology.peer_switch(switch, p) for p in self.nodes[switch].child_ports)
        return tuple(peer for peer in peers if peer is not None)

    def host_ports(self, switch: int) -> tuple[int, ...]:
        """Child ports of ``switch`` that lead to hosts."""
        return tuple(
            port
            for port in self.nodes[switch].child_ports
            if self.topology.host_at_port(switch, port) is not None
        )

    def parent_switch(self, switch: int) -> int | None:
        """The parent switch, or None at the root switch."""
        if switch == self.root_switch:
            return None
        return self.topology.peer_switch(switch, self.nodes[switch].parent_port)

    def switch_links(self) -> int:
        """Number of switch-to-switch edges of the tree."""
        return sum(len(self.children_switches(s)) for s in self.nodes)

    def depth(self) -> int:
        """Largest number of switch hops from the root switch to a switch of the tree."""
        depth, level = 0, [self.root_switch]
        while True:
            level = [child for s in level for child in self.children_switches(s)]
            if not level:
                return depth
            depth += 1

    def hosts_reached(self) -> frozenset[int]:
        """Hosts on the tree's host child ports (a broadcast's root is not among them)."""
        reached = set()
        for switch in self.nodes:
            for port in self.host_ports(switch):
                host = self.topology.host_at_port(switch, port)
                assert host is not None
                reached.add(host.node_id)
        return frozenset(reached)

    def expected_hosts(self) -> frozenset[int]:
        """Hosts the tree must deliver to: every member but a broadcast's root."""
        return self.members if self.switch_rooted else self.members - {self.root_node}

    def validate(self) -> None:
        """Raise :class:`TreeError` on any inconsistency: ports that do not exist or do not match
        the topology's links, parent and child ports that disagree, cycles or unreachable
        switches, useless leaves, and hosts reached other than exactly once each member."""
        if self.root_switch not in self.nodes:
            raise TreeError(f"{self.kind} tree: root switch {self.root_switch} has no node")
        # Parents first, then children: a child port whose switch names another parent then
        # means "two parents", distinct from "parent port leads nowhere".
        for switch, node in self.nodes.items():
            if node.switch != switch:
                raise TreeError(f"{self.kind} tree: node of switch {switch} says {node.switch}")
            if switch == self.root_switch:
                self._check_root_parent(node)
            else:
                self._check_parent(node)
        for node in self.nodes.values():
            self._check_child_ports(node)
        self._check_acyclic_and_connected()
        self._check_deliveries()

    def _check_root_parent(self, node: TreeNode) -> None:
        topo = self.topology
        if self.switch_rooted:
            if self.root_node != topo.switch(self.root_switch).node_id or node.parent_port != 0:
                raise TreeError(
                    f"{self.kind} tree: switch root {self.root_node} must be switch "
                    f"{self.root_switch}'s node id with parent port 0"
                )
            return
        root = topo.host_by_node(self.root_node)
        if root.node_id not in self.members:
            raise TreeError(f"{self.kind} tree: root host {root.node_id} is not a member")
        if root.switch != self.root_switch or node.parent_port != root.port:
            raise TreeError(
                f"{self.kind} tree: root switch {self.root_switch} must take the root host "
                f"{root.node_id} (switch {root.switch} port {root.port}) as parent, "
                f"has parent port {node.parent_port}"
            )

    def _check_parent(self, node: TreeNode) -> None:
        parent = self.topology.peer_switch(node.switch, node.parent_port)
        if parent is None or parent not in self.nodes:
            raise TreeError(
                f"{self.kind} tree: parent port {node.parent_port} of switch {node.switch} "
                "does not lead to a switch of the tree"
            )
        back_port = self.topology.port_to(parent, node.switch)
        if back_port not in self.nodes[parent].child_ports:
            raise TreeError(
                f"{self.kind} tree: switch {node.switch} names {parent} as parent but "
                f"port {back_port} of {parent} is not a child port"
            )

    def _check_child_ports(self, node: TreeNode) -> None:
        ports = self.topology.ports(node.switch)
        if len(set(node.child_ports)) != len(node.child_ports):
            raise TreeError(f"{self.kind} tree: switch {node.switch} repeats a child port")
        if not node.child_ports and node.switch != self.root_switch:
            raise TreeError(f"{self.kind} tree: switch {node.switch} is a leaf with no child")
        for port in node.child_ports:
            info = ports.get(port)
            if info is None or info.kind == "mgmt" or port == node.parent_port:
                raise TreeError(
                    f"{self.kind} tree: child port {port} of switch {node.switch} is not a "
                    "host or switch-link port other than the parent port"
                )
            child = self.topology.peer_switch(node.switch, port)
            if child is None:
                continue
            if child not in self.nodes:
                raise TreeError(
                    f"{self.kind} tree: port {port} of switch {node.switch} leads to switch "
                    f"{child}, which is not in the tree"
                )
            if self.nodes[child].parent_port != self.topology.port_to(child, node.switch):
                raise TreeError(
                    f"{self.kind} tree: switch {child} is a child of {node.switch} but its "
                    f"parent port {self.nodes[child].parent_port} points elsewhere"
                )

    def _check_acyclic_and_connected(self) -> None:
        seen = {self.root_switch}
        frontier = [self.root_switch]
        while frontier:
            switch = frontier.pop()
            for child in self.children_switches(switch):
                if child in seen:
                    raise TreeError(f"{self.kind} tree: switch {child} is reached twice (cycle)")
                seen.add(child)
                frontier.append(child)
        unreachable = set(self.nodes) - seen
        if unreachable:
            raise TreeError(
                f"{self.kind} tree: switches {sorted(unreachable)} are not reachable from the root"
            )

    def _check_deliveries(self) -> None:
        counts: Counter[int] = Counter()
        for switch in self.nodes:
            for port in self.host_ports(switch):
                host = self.topology.host_at_port(switch, port)
                assert host is not None
                counts[host.node_id] += 1
        expected = self.expected_hosts()
        twice = sorted(h for h, c in counts.items() if c > 1)
        strangers = sorted(set(counts) - expected)
        missing = sorted(expected - set(counts))
        if twice or strangers or missing:
            raise TreeError(
                f"{self.kind} tree rooted at {self.root_node}: hosts reached twice {twice}, "
                f"reached but not expected {strangers}, never reached {missing}"
            )


@dataclass(frozen=True, slots=True)
class RagasaPlan:
    """Ragasa's broadcast from ``root``: ``spread`` reaches ``relays`` (one per remote group
    holding members, in group order); ``group_trees`` maps each relay, and the root itself for
    its own group, to the tree delivering to the other members of that host's group."""

    root: int
    spread: Tree
    group_trees: dict[int, Tree]
    relays: tuple[int, ...]

    def trees(self) -> list[Tree]:
        return [self.spread, *self.group_trees.values()]


def child_bitmap(ports: Iterable[int]) -> int:
    """The data plane's child-bit convention: bit (port - 1) set for every port."""
    bitmap = 0
    for port in ports:
        if not 1 <= port <= MAX_CHILD_PORT:
            raise TopologyError(
                f"port {port} does not fit the {MAX_CHILD_PORT}-bit child bitmap (ports 1..32)"
            )
        bitmap |= 1 << (port - 1)
    return bitmap


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
