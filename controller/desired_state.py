"""From (topology, communicators) to the state every switch should hold: a pure function.

Nothing here talks to a switch. The result, one :class:`SwitchState` per switch, is what the
drivers push, what the reference model executes, and what unit tests inspect.

* Base state, for every switch: port roles, its node id, unicast routes to every host, switch
  and the management node (minimal dragonfly routing), and the replication groups that child
  bitmaps select (one group per port subset, or one all-ports group; see ``Replication``).
* Per communicator: a barrier slot at every switch of its barrier tree (written by mini
  packets) and, for each root, bindings for its ``innet`` tree and its ``ragasa`` spread tree,
  plus one ``ragasa`` group tree per relay. A binding is *static* (P4Runtime: parent port and a
  per-tree multicast group) or *slot* (mini packets write parent port and child bitmap). Every
  switch of an ``innet`` tree also gets an ACK-merge entry (the tree reversed: parent port
  towards the root, the child ports, a slot of checkpoint cells and its generation), used by
  communicators whose hosts choose switch-merged ACKs.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller import routing, trees, wire
from controller.switch_state import (
    AckMerge,
    BarrierSlot,
    CapacityError,
    PortRole,
    Replication,
    ReplicationMode,
    Sizes,
    SlotTree,
    StaticTree,
    SwitchState,
    TreeKey,
    TreeSlot,
    ports_bitmap,
)
from controller.topology import Topology, TopologyError

# Multicast group id space of one switch. P4Runtime (PI) accepts ids below 0x8000 (the rest
# is reserved), so:
#   1 .. ALL_PORTS_GROUP-1      per-tree groups of static bindings
#   ALL_PORTS_GROUP             every port, for ALL_PORTS replication
#   SUBSET_GROUP_BASE + bitmap  one group per port subset (bitmap < 2**14), SUBSET_GROUPS
ALL_PORTS_GROUP = 0x3FFF
SUBSET_GROUP_BASE = 0x4000
SUBSET_PORT_LIMIT = 14  # SUBSET_GROUP_BASE + 2**14 - 1 is the highest id P4Runtime accepts
SUBSET_MAX_PORTS = 10  # 2**10 - 1 groups per switch is the most "auto" installs


class Membership(enum.Enum):
    """Which path installs a communicator's broadcast trees."""

    P4RUNTIME = "p4runtime"  # static bindings and per-tree multicast groups
    MINI_PACKETS = "mp"  # slot bindings whose content mini packets write


@dataclass(frozen=True, slots=True)
class Communicator:
    comm_id: int
    members: tuple[int, ...]  # host node ids in rank order
    roots: tuple[int, ...] | None = None  # roots to install trees for; None: every member
    membership: Membership = Membership.P4RUNTIME
    ragasa: bool = True  # also install Ragasa's spread and group trees

    def root_nodes(self) -> tuple[int, ...]:
        return self.members if self.roots is None else self.roots


@dataclass(slots=True)
class IdAllocator:
    """Stable small-integer ids per (switch, key): a key keeps its id while it exists, so a
    change pushes only what changed. Freed ids are reused lowest first."""

    first: int
    limit: int  # exclusive
    what: str
    assigned: dict[tuple[int, TreeKey], int] = field(default_factory=dict)

    def get(self, switch: int, key: TreeKey) -> int:
        ident = self.assigned.get((switch, key))
        if ident is not None:
            return ident
        used = {v for (s, _), v in self.assigned.items() if s == switch}
        for candidate in range(self.first, self.limit):
            if candidate not in used:
                self.assigned[(switch, key)] = candidate
                return candidate
        raise CapacityError(
            f"switch {switch}: no free {self.what} for communicator {key.comm_id} root "
            f"{key.root_node} tree {key.tree} ({self.limit - self.first} in use); free "
            "communicators or rebuild the program with more"
        )

    def release_except(self, live: set[tuple[int, TreeKey]]) -> None:
        for k in [k for k in self.assigned if k not in live]:
            del self.assigned[k]


@dataclass(slots=True)
class AckGenerations:
    """The 8-bit configuration generation of each (switch, ACK-merge slot), 1..255: it moves on
    whenever the slot gets other content (another tree, parent or children), so the cells the
    old content left are never counted for the new (their tags carry the old generation)."""

    held: dict[tuple[int, int], tuple[tuple[TreeKey, int, int], int]] = field(default_factory=dict)

    def get(self, switch: int, slot: int, content: tuple[TreeKey, int, int]) -> int:
        previous = self.held.get((switch, slot))
        if previous is not None and previous[0] == content:
            return previous[1]
        generation = (previous[1] % 255 if previous is not None else 0) + 1
        self.held[(switch, slot)] = (content, generation)
        return generation


@dataclass(slots=True)
class Allocators:
    groups: IdAllocator = field(
        default_factory=lambda: IdAllocator(1, ALL_PORTS_GROUP, "multicast group")
    )
    slots: IdAllocator | None = None
    ack_slots: IdAllocator | None = None
    ack_generations: AckGenerations = field(default_factory=AckGenerations)

    def tree_slots(self, sizes: Sizes) -> IdAllocator:
        if self.slots is None:
            self.slots = IdAllocator(0, sizes.tree_slots, "membership slot")
        return self.slots

    def ack_merge_slots(self, sizes: Sizes) -> IdAllocator:
        if self.ack_slots is None:
            self.ack_slots = IdAllocator(0, sizes.ack_slots, "ACK-merge slot")
        return self.ack_slots


def replication_for(
    topo: Topology, switch: int, mode: str
) -> tuple[Replication, dict[int, tuple[int, ...]]]:
    """The replication config and its groups for one switch (mode: auto, subset, all_ports)."""
    ports = sorted(topo.ports(switch))
    max_port = max(ports) if ports else 0
    if mode == "auto":
        mode = "subset" if max_port <= SUBSET_MAX_PORTS else "all_ports"
    if mode == "subset":
        if max_port > SUBSET_PORT_LIMIT:
            raise CapacityError(
                f"switch {switch}: {max_port} ports need {2**max_port - 1} subset groups; "
                "use replication all_ports"
            )
        groups = {
            SUBSET_GROUP_BASE + bitmap: tuple(p for p in ports if bitmap >> (p - 1) & 1)
            for bitmap in range(1, 1 << max_port)
        }
        return Replication(ReplicationMode.SUBSET_GROUPS, SUBSET_GROUP_BASE), groups
    if mode == "all_ports":
        return Replication(ReplicationMode.ALL_PORTS, ALL_PORTS_GROUP), {
            ALL_PORTS_GROUP: tuple(ports)
        }
    raise ValueError(f"replication mode {mode!r}: expected auto, subset or all_ports")


def base_state(topo: Topology, switch: int, replication: str = "auto") -> SwitchState:
    info = topo.switch(switch)
    state = SwitchState(switch=switch, node_id=info.node_id)
    for port, pinfo in topo.ports(switch).items():
        if pinfo.kind == "host":
            state.ports[port] = (PortRole.HOST, topo.host_by_name(pinfo.peer).node_id)
        elif pinfo.kind == "mgmt":
            state.ports[port] = (PortRole.MGMT, wire.MGMT_NODE_ID)
        else:
            state.ports[port] = (PortRole.SWITCH, 0)
    state.routes = routing.forwarding_table(topo, switch)
    state.replication, state.groups = replication_for(topo, switch, replication)
    return state


def check_communicator(topo: Topology, comm: Communicator, sizes: Sizes) -> None:
    where = f"communicator {comm.comm_id}"
    if not 0 < comm.comm_id < sizes.comm_slots:
        raise CapacityError(
            f"{where}: ids run from 1 to {sizes.comm_slots - 1} (the program's barrier slots)"
        )
    if not comm.members:
        raise TopologyError(f"{where} has no members")
    if len(set(comm.members)) != len(comm.members):
        raise TopologyError(f"{where} lists a host twice")
    for node in comm.members:
        if not topo.is_host(node):
            raise TopologyError(
                f"{where} names node {node}, which is not a host of {topo.shape.spec}"
            )
    for root in comm.root_nodes():
        if root not in comm.members:
            raise TopologyError(f"{where}: root {root} is not a member")


def communicator_trees(topo: Topology, comm: Communicator) -> dict[TreeKey, trees.Tree]:
    """Every broadcast tree the communicator needs, by the key data packets look it up with."""
    out: dict[TreeKey, trees.Tree] = {}
    for root in comm.root_nodes():
        out[TreeKey(comm.comm_id, root, wire.Tree.INNET)] = trees.innet_tree(
            topo, comm.members, root
        )
        if comm.ragasa:
            plan = trees.ragasa_trees(topo, comm.members, root)
            out[TreeKey(comm.comm_id, root, wire.Tree.RAGASA_SPREAD)] = plan.spread
            for relay, tree in plan.group_trees.items():
                out.setdefault(TreeKey(comm.comm_id, relay, wire.Tree.RAGASA_GROUP), tree)
    return out


def add_communicator(
    states: Mapping[int, SwitchState],
    topo: Topology,
    comm: Communicator,
    tree_map: Mapping[TreeKey, trees.Tree],
    sizes: Sizes,
    allocators: Allocators,
) -> None:
    for key, tree in sorted(tree_map.items()):
        for switch, node in sorted(tree.nodes.items()):
            state = states[switch]
            if comm.membership is Membership.P4RUNTIME:
                group = 0
                if node.child_ports:
                    group = allocators.groups.get(switch, key)
                    state.groups[group] = node.child_ports
                state.trees[key] = StaticTree(node.parent_port, group)
            else:
                slot = allocators.tree_slots(sizes).get(switch, key)
                state.trees[key] = SlotTree(slot)
                state.tree_slots[slot] = TreeSlot(node.parent_port, ports_bitmap(node.child_ports))
            if key.tree == wire.Tree.INNET and node.parent_port and node.child_ports:
                add_ack_merge(state, key, node, sizes, allocators)
    barrier = trees.barrier_tree(topo, comm.members)
    for switch, node in barrier.nodes.items():
        states[switch].barrier_slots[comm.comm_id] = BarrierSlot(
            parent_port=node.parent_port, child_mask=ports_bitmap(node.child_ports)
        )


def add_ack_merge(
    state: SwitchState, key: TreeKey, node: trees.TreeNode, sizes: Sizes, allocators: Allocators
) -> None:
    """ACKs of the tree ``key`` merged here: up its parent port, from its child ports."""
    slot = allocators.ack_merge_slots(sizes).get(state.switch, key)
    children = ports_bitmap(node.child_ports)
    generation = allocators.ack_generations.get(
        state.switch, slot, (key, node.parent_port, children)
    )
    state.ack_merges[key] = AckMerge(slot, node.parent_port, children, generation)


def desired_state(
    topo: Topology,
    comms: Iterable[Communicator] = (),
    *,
    sizes: Sizes | None = None,
    replication: str = "auto",
    allocators: Allocators | None = None,
) -> dict[int, SwitchState]:
    """The state of every switch; raises CapacityError or TopologyError saying what and where."""
    sizes = sizes or Sizes()
    allocators = allocators or Allocators()
    states = {s.index: base_state(topo, s.index, replication) for s in topo.switches}
    planned: list[tuple[Communicator, dict[TreeKey, trees.Tree]]] = []
    seen: set[int] = set()
    for comm in comms:
        if comm.comm_id in seen:
            raise TopologyError(f"communicator id {comm.comm_id} is used twice")
        seen.add(comm.comm_id)
        check_communicator(topo, comm, sizes)
        planned.append((comm, communicator_trees(topo, comm)))
    # ids of trees that no longer exist are freed first, so a change can reuse them
    live = {(s, k) for _, tree_map in planned for k, t in tree_map.items() for s in t.nodes}
    allocators.groups.release_except(live)
    if allocators.slots is not None:
        allocators.slots.release_except(live)
    if allocators.ack_slots is not None:
        allocators.ack_slots.release_except(live)
    for comm, tree_map in planned:
        add_communicator(states, topo, comm, tree_map, sizes, allocators)
    for state in states.values():
        state.check_capacity(sizes)
    return states
