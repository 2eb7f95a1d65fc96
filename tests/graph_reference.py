"""Reference graph searches for the tests: plain BFS, to check the closed-form answers."""

from __future__ import annotations

from collections import deque

from controller.topology import Topology


def shortest_hops(topo: Topology, source: int) -> dict[int, int]:
    """Router hops from switch ``source`` to every switch it reaches."""
    dist = {source: 0}
    queue = deque([source])
    while queue:
        here = queue.popleft()
        for there in topo.neighbours(here):
            if there not in dist:
                dist[there] = dist[here] + 1
                queue.append(there)
    return dist
