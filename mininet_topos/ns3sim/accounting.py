"""What each link should carry, predicted from the controller's routes and trees and the
messages the algorithms sent, to check the simulation against (and the other way round).

Links are keyed as :mod:`host_agents.fabric` keys them: ``(switch, port)`` for what a switch
sends out of a port, ``(-1, node)`` for what a host sends. Bytes are netcoll frame bytes (data
plus one Ethernet and netcoll header per segment), what BMv2's port counters count.
"""

from __future__ import annotations

import itertools
from collections import Counter

from controller import routing, trees, wire
from controller.topology import Topology
from mininet_topos.ns3sim.transport import Traffic

LinkKey = tuple[int, int]
FRAME_OVERHEAD = wire.ETH_HEADER_LEN + wire.HEADER_LEN  # what one netcoll frame adds to data


def frame_bytes(nbytes: int, segment: int = wire.MAX_PAYLOAD) -> int:
    """Bytes of a message's netcoll frames (as BMv2 counts them), all segments."""
    full, rest = divmod(nbytes, segment)
    segments = full + (1 if rest or not nbytes else 0)
    return nbytes + segments * FRAME_OVERHEAD


def unicast_links(topo: Topology, src: int, dst: int) -> list[LinkKey]:
    """Links a message from host ``src`` to host ``dst`` crosses on the minimal route."""
    path = routing.host_path(topo, src, dst)
    links: list[LinkKey] = [(-1, src)]
    links.extend((here, topo.port_to(here, there)) for here, there in itertools.pairwise(path))
    links.append((path[-1], topo.host_by_node(dst).port))
    return links


def tree_links(tree: trees.Tree) -> list[LinkKey]:
    """A multicast along ``tree``: the root's host link, then every child port of the tree."""
    links: list[LinkKey] = [(-1, tree.root_node)]
    for switch, node in tree.nodes.items():
        links.extend((switch, port) for port in node.child_ports)
    return links


def barrier_links(tree: trees.Tree) -> list[LinkKey]:
    """One in-network barrier: an ARRIVE from each member host and from each switch but the
    root to its parent, then a RELEASE out of every child port."""
    links: list[LinkKey] = [(-1, node) for node in sorted(tree.members)]
    for switch, node in tree.nodes.items():
        if tree.parent_switch(switch) is not None:
            links.append((switch, node.parent_port))
        links.extend((switch, port) for port in node.child_ports)
    return links


def predicted_link_bytes(
    topo: Topology,
    members: tuple[int, ...],
    traffic: Traffic,
    multicast_trees: dict[tuple[str, int], trees.Tree],
    segment: int = wire.MAX_PAYLOAD,
) -> Counter[LinkKey]:
    predicted: Counter[LinkKey] = Counter()
    for (src, dst, size), count in traffic.unicasts.items():
        for link in unicast_links(topo, src, dst):
            predicted[link] += frame_bytes(size, segment) * count
    for (kind, root, size), count in traffic.multicasts.items():
        for link in tree_links(multicast_trees[(kind, root)]):
            predicted[link] += frame_bytes(size, segment) * count
    if traffic.barriers:
        instances, rest = divmod(traffic.barriers, len(members))
        assert rest == 0, "every member arrives at every barrier"
        for link in barrier_links(trees.barrier_tree(topo, members)):
            predicted[link] += frame_bytes(0, segment) * instances
    # a reduction chunk travels like a barrier whose ARRIVEs and RELEASE carry its lanes
    for chunk_bytes, contributions in traffic.reductions.items():
        chunks, rest = divmod(contributions, len(members))
        assert rest == 0, "every member contributes every chunk"
        for link in barrier_links(trees.barrier_tree(topo, members)):
            predicted[link] += frame_bytes(chunk_bytes, segment) * chunks
    return predicted
