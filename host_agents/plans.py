"""Who acknowledges a multicast to whom: the same answer on every host, without messages.

Every rank derives the plan of a (communicator, root, tree) from the topology file and the
communicator's members, so receivers know their ACK target even when data arrives before they
call the collective.

* ``innet``: the root aggregates its own dragonfly group; in every other group the member with
  the lowest node id is the co-root, merging its group's ACKs into one for the root. The root
  waits for at most one ACK stream per group (9 on Df(2,4,2) instead of 71).
* ``ragasa`` spread: the relays ACK the root directly; ``ragasa`` group: the group's members
  ACK their relay directly (a group is at most a*p hosts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from controller import trees, wire
from host_agents.directory import Directory


@dataclass(frozen=True, slots=True)
class McastPlan:
    """Who ACKs a multicast to whom.

    ``ack_target[n]`` is where receiver n sends ACKs and NACKs; ``aggregates[c]`` lists the
    members co-root c merges (c itself included); ``root_sources`` are the nodes whose merged
    ACKs the root waits for.
    """

    receivers: tuple[int, ...]
    ack_target: dict[int, int]
    aggregates: dict[int, tuple[int, ...]]
    root_sources: tuple[int, ...]


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
            return innet_plan(self.directory, members, root)
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


def innet_plan(directory: Directory, members: tuple[int, ...], root: int) -> McastPlan:
    by_group: dict[int, list[int]] = defaultdict(list)
    for m in members:
        by_group[directory.group_of(m)].append(m)
    root_group = directory.group_of(root)
    ack_target: dict[int, int] = {}
    aggregates: dict[int, tuple[int, ...]] = {}
    sources: list[int] = []
    for group, group_members in sorted(by_group.items()):
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
    return McastPlan(receivers, ack_target, aggregates, tuple(sources))


def ragasa_relays(directory: Directory, members: tuple[int, ...], root: int) -> tuple[int, ...]:
    """One relay per remote group, chosen exactly as the switches' spread tree was built."""
    topo = directory.topology
    if topo is None:
        raise ValueError("Ragasa needs the topology to choose relays")
    root_group = directory.group_of(root)
    groups = sorted({directory.group_of(m) for m in members} - {root_group})
    return tuple(trees.ragasa_relay(topo, members, root, g) for g in groups)
