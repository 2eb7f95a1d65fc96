"""Desired switch state, computed without any switch: what every table, group and slot holds."""

from __future__ import annotations

import pytest

from controller import trees, wire
from controller.desired_state import (
    ALL_PORTS_GROUP,
    SUBSET_GROUP_BASE,
    Allocators,
    Communicator,
    Membership,
    desired_state,
)
from controller.switch_state import (
    BarrierSlot,
    CapacityError,
    PortRole,
    ReplicationMode,
    Sizes,
    SlotTree,
    StaticTree,
    TreeKey,
    bitmap_ports,
    ports_bitmap,
)
from controller.topology import TopologyError
from controller.topology_build import dragonfly, single_switch

pytestmark = pytest.mark.unit

DF = dragonfly(2, 4, 2)
ALL = tuple(h.node_id for h in DF.hosts)


def test_base_state_knows_every_port_and_node() -> None:
    states = desired_state(DF)
    assert len(states) == 36
    for s, state in states.items():
        assert state.node_id == wire.switch_node_id(s)
        roles = {p: role for p, (role, _) in state.ports.items()}
        kinds = {p: info.kind for p, info in DF.ports(s).items()}
        for port, kind in kinds.items():
            expected = {"host": PortRole.HOST, "mgmt": PortRole.MGMT}.get(kind, PortRole.SWITCH)
            assert roles[port] == expected
        # routes to every host, every other switch and the management node, never to itself
        assert set(state.routes) == set(ALL) | {
            wire.switch_node_id(o) for o in range(36) if o != s
        } | {wire.MGMT_NODE_ID}
    host = DF.hosts[5]
    assert states[host.switch].ports[host.port] == (PortRole.HOST, host.node_id)


def test_replication_groups_cover_every_port_subset() -> None:
    state = desired_state(DF)[0]  # switch 0 also has the management port: 8 ports
    assert state.replication is not None and state.replication.mode == ReplicationMode.SUBSET_GROUPS
    subsets = {g: p for g, p in state.groups.items() if g > SUBSET_GROUP_BASE}
    assert len(subsets) == 2**8 - 1
    for group, ports in subsets.items():
        assert ports_bitmap(ports) == group - SUBSET_GROUP_BASE
    wide = desired_state(single_switch(20), replication="auto")[0]
    assert wide.replication is not None and wide.replication.mode == ReplicationMode.ALL_PORTS
    assert wide.groups == {ALL_PORTS_GROUP: tuple(range(1, 22))}
    with pytest.raises(CapacityError, match="subset groups"):
        desired_state(single_switch(20), replication="subset")


def test_static_trees_are_the_innet_and_ragasa_trees() -> None:
    states = desired_state(DF, [Communicator(1, ALL)])
    root = ALL[10]
    tree = trees.innet_tree(DF, ALL, root)
    for switch, node in tree.nodes.items():
        binding = states[switch].trees[TreeKey(1, root, wire.Tree.INNET)]
        assert isinstance(binding, StaticTree)
        assert binding.parent_port == node.parent_port
        assert states[switch].groups[binding.group] == node.child_ports
    plan = trees.ragasa_trees(DF, ALL, root)
    for relay, group_tree in plan.group_trees.items():
        for switch in group_tree.nodes:
            assert TreeKey(1, relay, wire.Tree.RAGASA_GROUP) in states[switch].trees
    # every member roots an innet tree: 72 bindings at a switch every tree crosses
    assert sum(1 for k in states[0].trees if k.tree == wire.Tree.INNET) == 72


def test_barrier_slots_follow_the_barrier_tree() -> None:
    members = ALL[::5]
    states = desired_state(DF, [Communicator(4, members)])
    tree = trees.barrier_tree(DF, members)
    holders = {s for s, st in states.items() if 4 in st.barrier_slots}
    assert holders == set(tree.nodes)
    for switch, node in tree.nodes.items():
        slot = states[switch].barrier_slots[4]
        assert slot == BarrierSlot(
            parent_port=node.parent_port, child_mask=ports_bitmap(node.child_ports)
        )
        assert bitmap_ports(slot.child_mask) == tuple(sorted(node.child_ports))
    roots = [s for s in holders if states[s].barrier_slots[4].parent_port == 0]
    assert roots == [tree.root_switch]


def test_mini_packet_membership_uses_slots() -> None:
    states = desired_state(DF, [Communicator(2, ALL[:20], membership=Membership.MINI_PACKETS)])
    for state in states.values():
        for binding in state.trees.values():
            assert isinstance(binding, SlotTree)
            assert binding.slot in state.tree_slots
        assert not [g for g in state.groups if g < ALL_PORTS_GROUP]  # no per-tree groups


def test_ids_stay_put_when_other_communicators_come_and_go() -> None:
    allocators = Allocators()
    first = desired_state(DF, [Communicator(1, ALL[:10])], allocators=allocators)
    groups_before = {s: dict(st.trees) for s, st in first.items()}
    both = desired_state(
        DF, [Communicator(1, ALL[:10]), Communicator(2, ALL[30:50])], allocators=allocators
    )
    for s, bindings in groups_before.items():
        for key, binding in bindings.items():
            assert both[s].trees[key] == binding, (
                "adding a communicator moved an existing tree's group"
            )
    again = desired_state(DF, [Communicator(1, ALL[:10])], allocators=allocators)
    assert {s: st.trees for s, st in again.items()} == groups_before
    assert {s: st.groups for s, st in again.items()} == {s: st.groups for s, st in first.items()}


def test_errors_say_what_and_where() -> None:
    with pytest.raises(TopologyError, match="node 999"):
        desired_state(DF, [Communicator(1, (1, 2, 999))])
    with pytest.raises(TopologyError, match="root 5 is not a member"):
        desired_state(DF, [Communicator(1, (1, 2), roots=(5,))])
    with pytest.raises(TopologyError, match="used twice"):
        desired_state(DF, [Communicator(1, (1, 2)), Communicator(1, (3, 4))])
    with pytest.raises(CapacityError, match="ids run from 1 to 255"):
        desired_state(DF, [Communicator(256, (1, 2))])
    with pytest.raises(CapacityError, match="broadcast tree bindings exceed the program's 100"):
        desired_state(DF, [Communicator(1, ALL)], sizes=Sizes(bcast_trees=100))
    with pytest.raises(CapacityError, match="no free membership slot"):
        desired_state(
            DF,
            [Communicator(1, ALL, membership=Membership.MINI_PACKETS)],
            sizes=Sizes(tree_slots=10),
        )


def test_ack_merge_entries_reverse_every_innet_tree() -> None:
    """Every switch of each innet tree merges its ACKs: up the tree's parent port (the root
    host's port at the root's switch), from exactly its child ports; ragasa trees get none."""
    members = ALL[:20]
    states = desired_state(DF, [Communicator(3, members, roots=(members[0], members[7]))])
    for root in (members[0], members[7]):
        key = TreeKey(3, root, wire.Tree.INNET)
        tree = trees.innet_tree(DF, members, root)
        for switch, node in tree.nodes.items():
            merge = states[switch].ack_merges[key]
            assert merge.parent_port == node.parent_port != 0
            assert merge.child_mask == ports_bitmap(node.child_ports)
            assert 0 <= merge.slot < Sizes().ack_slots and 1 <= merge.generation <= 255
        root_place = DF.host_by_node(root)
        assert states[root_place.switch].ack_merges[key].parent_port == root_place.port
        untouched = set(states) - set(tree.nodes)
        assert all(key not in states[s].ack_merges for s in untouched)
    assert not any(k.tree != wire.Tree.INNET for state in states.values() for k in state.ack_merges)


def test_ack_merge_generation_moves_only_when_a_slot_changes() -> None:
    """Cells are tagged with the generation, so a slot whose tree changes must not keep it,
    and one that stays the same must (its cells stay valid across unrelated changes)."""
    allocators = Allocators()
    first = desired_state(DF, [Communicator(3, ALL[:20], roots=(ALL[0],))], allocators=allocators)
    again = desired_state(
        DF,
        [Communicator(3, ALL[:20], roots=(ALL[0],)), Communicator(4, ALL[20:30], roots=(ALL[20],))],
        allocators=allocators,
    )
    key = TreeKey(3, ALL[0], wire.Tree.INNET)
    for switch, state in first.items():
        if key in state.ack_merges:
            assert again[switch].ack_merges[key] == state.ack_merges[key]
    # the communicator loses members: trees shrink, changed slots get a new generation
    changed = desired_state(DF, [Communicator(3, ALL[:10], roots=(ALL[0],))], allocators=allocators)
    moved = 0
    for switch, state in changed.items():
        if key in state.ack_merges and key in first[switch].ack_merges:
            old, new = first[switch].ack_merges[key], state.ack_merges[key]
            if (old.parent_port, old.child_mask) != (new.parent_port, new.child_mask):
                assert new.generation != old.generation or new.slot != old.slot
                moved += 1
    assert moved > 0
