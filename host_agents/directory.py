"""What an agent knows about the network: every node's MAC and place, and the communicators.

Built from the topology file the network writes at bring-up (``mininet_topos/network/network.py``:
``<run dir>/topology.json``), whose path the launcher passes as ``--topology`` (never by
importing Mininet), or directly from a :class:`controller.topology.Topology` in tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from controller import wire
from controller.topology import Topology


@dataclass(frozen=True, slots=True)
class Place:
    """Where a host sits: dragonfly group, global router index, port on that router."""

    group: int
    switch: int
    port: int


@dataclass(slots=True)
class Directory:
    macs: dict[int, bytes]
    places: dict[int, Place]
    topology: Topology | None = None
    comms: dict[int, tuple[int, ...]] = field(default_factory=dict)  # comm id -> member nodes
    switch_acks: set[int] = field(default_factory=set)  # comms whose multicast ACKs switches merge

    @classmethod
    def from_topology(cls, topo: Topology) -> Directory:
        macs = {h.node_id: wire.mac_bytes(h.mac) for h in topo.hosts}
        places = {h.node_id: Place(h.group, h.switch, h.port) for h in topo.hosts}
        return cls(macs=macs, places=places, topology=topo)

    @classmethod
    def load(cls, path: Path) -> Directory:
        return cls.from_topology(Topology.load(path))

    def mac(self, node: int) -> bytes:
        try:
            return self.macs[node]
        except KeyError:
            raise KeyError(f"node {node} is not a host of this topology") from None

    def group_of(self, node: int) -> int:
        return self.places[node].group

    def switch_of(self, node: int) -> int:
        return self.places[node].switch
