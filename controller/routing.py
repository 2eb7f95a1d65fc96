"""Routes over a :class:`~controller.topology.Topology`: minimal paths, next hops, forwarding
tables, and Valiant paths for analysis.

Dragonfly minimal routing (at most one global link, at most 3 router-to-router hops)::

    src router --local--> gateway of the source group toward the destination group
               --global--> entry router of the destination group (holds the link back)
               --local--> destination router

where the first (last) local hop is skipped when the source (entry) router is already the
gateway (destination). The route between two switches depends only on the pair, and every
prefix and every suffix of a minimal path is itself the minimal path between its ends. The
suffix property makes destination-based forwarding tables agree with :func:`minimal_path`; the
prefix property makes the union of minimal paths from one switch a tree (see
:mod:`controller.trees`). Line topologies route along the chain.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from controller import wire
from controller.topology import KIND_LINE, Topology, TopologyError


@dataclass(frozen=True, slots=True)
class PathLink:
    """One switch-to-switch traversal of a path: leave ``switch`` by ``port`` toward ``peer``."""

    switch: int
    port: int
    kind: str  # "local" | "global" | "line"
    peer: int


def minimal_path(topo: Topology, src_switch: int, dst_switch: int) -> list[int]:
    """Switch indices from ``src_switch`` to ``dst_switch``, both included."""
    src, dst = topo.switch(src_switch), topo.switch(dst_switch)
    if src.index == dst.index:
        return [src.index]
    if topo.shape.kind == KIND_LINE:
        step = 1 if dst.index > src.index else -1
        return list(range(src.index, dst.index + step, step))
    if src.group == dst.group:
        return [src.index, dst.index]  # all-to-all inside a group: one local hop
    path = [src.index]
    gateway = topo.gateway(src.group, dst.group)
    if gateway != src.index:
        path.append(gateway)
    entry = topo.gateway(dst.group, src.group)
    path.append(entry)
    if entry != dst.index:
        path.append(dst.index)
    return path


def hop_count(topo: Topology, src_switch: int, dst_switch: int) -> int:
    """Switch-to-switch hops of the minimal path (its length minus one), without building it."""
    src, dst = topo.switch(src_switch), topo.switch(dst_switch)
    if src.index == dst.index:
        return 0
    if topo.shape.kind == KIND_LINE:
        return abs(src.index - dst.index)
    if src.group == dst.group:
        return 1
    gateway = topo.gateway(src.group, dst.group)
    entry = topo.gateway(dst.group, src.group)
    return 1 + (gateway != src.index) + (entry != dst.index)


def next_switch(topo: Topology, switch: int, dst_switch: int) -> int:
    """The second switch of ``minimal_path(switch, dst_switch)``; ``switch`` must differ."""
    if switch == dst_switch:
        raise TopologyError(f"switch {switch} is the destination itself: there is no next switch")
    here, dst = topo.switch(switch), topo.switch(dst_switch)
    if topo.shape.kind == KIND_LINE:
        return switch + (1 if dst_switch > switch else -1)
    if here.group == dst.group:
        return dst.index
    gateway = topo.gateway(here.group, dst.group)
    return gateway if gateway != switch else topo.gateway(dst.group, here.group)


def _target_switch(topo: Topology, dst_node: int) -> tuple[int, int | None]:
    """(switch where ``dst_node`` lives, its port there or None when it is the switch itself)."""
    if topo.is_host(dst_node):
        host = topo.host_by_node(dst_node)
        return host.switch, host.port
    if dst_node == topo.management.node_id:
        return topo.management.switch, topo.management.port
    if wire.SWITCH_ID_BASE <= dst_node <= wire.SWITCH_ID_MAX:
        return topo.switch_by_node(dst_node).index, None
    raise TopologyError(
        f"node {dst_node} is neither a host, a switch nor the management node of {topo.shape.spec}"
    )


def next_hop_port(topo: Topology, switch: int, dst_node: int) -> int:
    """Egress port at ``switch`` toward node ``dst_node`` (host, switch or management node),
    along the minimal path. A switch's own node id has no egress port: TopologyError."""
    topo.switch(switch)
    target, port_there = _target_switch(topo, dst_node)
    if target == switch:
        if port_there is None:
            raise TopologyError(
                f"node {dst_node} is switch {switch} itself: packets to it are consumed there"
            )
        return port_there
    return topo.port_to(switch, next_switch(topo, switch, target))


def forwarding_table(topo: Topology, switch: int) -> dict[int, int]:
    """node id -> egress port at ``switch`` for every host, every other switch and the
    management node. The switch's own node id is left out (the data plane handles it)."""
    own = topo.switch(switch)
    port_toward = {
        other.index: topo.port_to(switch, next_switch(topo, switch, other.index))
        for other in topo.switches
        if other.index != switch
    }
    table: dict[int, int] = {}
    for host in topo.hosts:
        table[host.node_id] = host.port if host.switch == switch else port_toward[host.switch]
    for other_index, port in port_toward.items():
        table[topo.switches[other_index].node_id] = port
    mgmt = topo.management
    table[mgmt.node_id] = mgmt.port if mgmt.switch == switch else port_toward[mgmt.switch]
    assert own.node_id not in table
    return table


def valiant_path(topo: Topology, src_switch: int, dst_switch: int, rng: random.Random) -> list[int]:
    """Minimal path to a random intermediate group, then minimal path to ``dst_switch``.

    The intermediate group is drawn uniformly from the groups other than the source's and the
    destination's; the path enters it at its router holding the link from the source group and
    leaves it minimally from there (so at most two global links and 5 switch hops). When no
    such group exists (same group, line or single topologies, fewer than 3 groups) the minimal
    path is returned. Used for analysis and link-load accounting only: the data plane forwards
    minimally.
    """
    src, dst = topo.switch(src_switch), topo.switch(dst_switch)
    if topo.shape.kind == KIND_LINE or src.group == dst.group:
        return minimal_path(topo, src.index, dst.index)
    candidates = [g for g in range(topo.num_groups) if g not in (src.group, dst.group)]
    if not candidates:
        return minimal_path(topo, src.index, dst.index)
    middle_group = rng.choice(candidates)
    middle = topo.gateway(middle_group, src.group)
    first = minimal_path(topo, src.index, middle)
    return first + minimal_path(topo, middle, dst.index)[1:]


def path_links(topo: Topology, path: list[int]) -> list[PathLink]:
    """The links a switch path traverses, in order; raises if two consecutive switches are not
    neighbours."""
    links = []
    for here, there in itertools.pairwise(path):
        port = topo.port_to(here, there)
        links.append(PathLink(here, port, topo.ports(here)[port].kind, there))
    return links


def host_path(topo: Topology, src_node: int, dst_node: int) -> list[int]:
    """Switches a unicast from host ``src_node`` to host ``dst_node`` crosses."""
    src, dst = topo.host_by_node(src_node), topo.host_by_node(dst_node)
    return minimal_path(topo, src.switch, dst.switch)


def host_path_hops(topo: Topology, src_node: int, dst_node: int) -> int:
    """Links a unicast from host to host traverses: the two host links plus the switch-to-switch
    hops (0 for a host to itself)."""
    if src_node == dst_node:
        topo.host_by_node(src_node)
        return 0
    return len(host_path(topo, src_node, dst_node)) + 1
