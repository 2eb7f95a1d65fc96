"""Who acknowledges a multicast to whom: the same answer on every host, without messages.

Every rank derives the plan of a (communicator, root, tree) from the topology file and the
communicator's members, so receivers know their ACK target even when data arrives before they
call the collective.

* ``innet``: the root aggregates its own dragonfly group; in every other group the member with
  the lowest node id is the co-root, merging its group's ACKs into one for the root. The root
  waits for at most one ACK stream per group (9 on Df(2,4,2) instead of 71).
* ``innet`` with switch-merged ACKs (a communicator created with ``ack_merge="switch"``): the
  receivers ACK checkpoints up the tree, the switches merge them (``p4src/common/ackmerge.p4``)
  and the root waits for ONE stream, from its own switch. NACKs still go to the co-roots.
* ``ragasa`` spread: the relays ACK the root directly; ``ragasa`` group: the group's members
  ACK their relay directly (a group is at most a*p hosts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller import trees, wire
from controller.topology import members_by_group
from host_agents.directory import Directory


@dataclass(frozen=True, slots=True)
class McastPlan:
    """Who ACKs a multicast to whom.

    ``ack_target[n]`` is where receiver n sends ACKs and NACKs; ``aggregates[c]`` lists the
    members co-root c merges (c itself included); ``root_sources`` are the nodes that report
    to the root (co-roots or direct receivers); ``ack_sources`` those whose ACK streams it
    waits for: the same, or with switch-merged ACKs only its switch (``merged_by``).
    """

    receivers: tuple[int, ...]
    ack_target: dict[int, int]
    aggregates: dict[int, tuple[int, ...]]
    root_sources: tuple[int, ...]
    # switch-merged ACKs: the node id of the root's switch, whose merged stream is the root's
    # only ACK source; receivers send checkpoint ACKs into the tree. 0: ACKs go to ack_target
    merged_by: int = 0

    @property
    def ack_sources(self) -> tuple[int, ...]:
        return (self.merged_by,) if self.merged_by else self.root_sources


PlanFunc = Callable[[int, int, int], McastPlan]  # (comm, root, tree) -> plan


class PlanBook:
    """Cached multicast plans of one host."""

    def __init__(self, directory: Directory) -> None:
        self.directory = directory
        self._cache: dict[tuple[int, int, int], McastPlan] = {}

    def forget(self, comm: int) -> None:
        for key in [k for k in self._cache if k[0] == comm]:
            del self._cache[key]

    def __call__(self, comm: int, root: int, tree: int) -> McastPlan:
        key = (comm, root, tree)
        plan = self._cache.get(key)
        if plan is None:
            plan = self._build(comm, root, tree)
            self._cache[key] = plan
        return plan

    def _build(self, comm: int, root: int, tree: int) -> McastPlan:
        members = self.directory.comms.get(comm)
        if members is None or root not in members:
            return McastPlan((), {}, {}, ())
        if tree == wire.Tree.INNET:
            merged = comm in self.directory.switch_acks
            return innet_plan(self.directory, members, root, merged=merged)
        if tree == wire.Tree.RAGASA_SPREAD:
            relays = ragasa_relays(self.directory, members, root)
            return direct_plan(root, relays)
        if tree == wire.Tree.RAGASA_GROUP:
            group = self.directory.group_of(root)
            receivers = tuple(
                m for m in members if m != root and self.directory.group_of(m) == group
            )
            return direct_plan(root, receivers)
        return McastPlan((), {}, {}, ())


def direct_plan(root: int, receivers: tuple[int, ...]) -> McastPlan:
    return McastPlan(
        receivers=receivers,
        ack_target=dict.fromkeys(receivers, root),
        aggregates={},
        root_sources=receivers,
    )


def innet_plan(
    directory: Directory, members: tuple[int, ...], root: int, *, merged: bool = False
) -> McastPlan:
    by_group = members_by_group(members, directory.group_of)
    root_group = directory.group_of(root)
    ack_target: dict[int, int] = {}
    aggregates: dict[int, tuple[int, ...]] = {}
    sources: list[int] = []
    for group, group_members in by_group.items():
        if group == root_group:
            others = tuple(sorted(m for m in group_members if m != root))
            if others:
                aggregates[root] = others
                ack_target.update(dict.fromkeys(others, root))
                sources.append(root)
            continue
        coroot = min(group_members)
        aggregates[coroot] = tuple(sorted(group_members))
        ack_target.update(dict.fromkeys(group_members, coroot))
        sources.append(coroot)
    receivers = tuple(m for m in members if m != root)
    if merged and receivers:
        switch = wire.switch_node_id(directory.switch_of(root))
        return McastPlan(receivers, ack_target, aggregates, tuple(sources), merged_by=switch)
    return McastPlan(receivers, ack_target, aggregates, tuple(sources))


def ragasa_relays(directory: Directory, members: tuple[int, ...], root: int) -> tuple[int, ...]:
    """One relay per remote group, chosen exactly as the switches' spread tree was built."""
    topo = directory.topology
    if topo is None:
        raise ValueError("Ragasa needs the topology to choose relays")
    root_group = directory.group_of(root)
    groups = [g for g in members_by_group(members, directory.group_of) if g != root_group]
    return tuple(trees.ragasa_relay(topo, members, root, g) for g in groups)
