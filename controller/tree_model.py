"""A tree as data: per switch its parent port and child ports (:class:`TreeNode`), the whole
tree with the checks that it is one (:class:`Tree`), Ragasa's plan of trees, and the child-bitmap
convention of the data plane. :mod:`controller.trees` builds them and re-exports these names."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from controller import wire
from controller.topology import Topology, TopologyError

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
