"""Pure topology model of a netcoll network: switches, hosts, links and their port numbers.

Nothing here imports Mininet: the launcher builds the network *from* this model, and host
agents read the JSON it saves. The shapes (dragonfly, single switch, line), their port
numbering and global-link arrangements are built in :mod:`controller.topology_build`; the
records a topology is made of are in :mod:`controller.topology_records`.

Node ids follow :mod:`controller.wire`: hosts 1..N numbered group-major, then router, then
local index (``node_id = (switch_index*p + k) + 1``), switch i is ``switch_node_id(i)`` and the
management node ``MGMT_NODE_ID`` (named ``ncm0``) hangs off switch 0 on its own port.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from controller import wire
from controller.topology_records import ACCEPTED_SPECS as ACCEPTED_SPECS
from controller.topology_records import ARRANGEMENTS as ARRANGEMENTS
from controller.topology_records import FORMAT as FORMAT
from controller.topology_records import KIND_DRAGONFLY as KIND_DRAGONFLY
from controller.topology_records import KIND_LINE as KIND_LINE
from controller.topology_records import KIND_SINGLE as KIND_SINGLE
from controller.topology_records import LINK_KINDS as LINK_KINDS
from controller.topology_records import MAX_HOSTS as MAX_HOSTS
from controller.topology_records import MAX_SWITCHES as MAX_SWITCHES
from controller.topology_records import MGMT_NAME as MGMT_NAME
from controller.topology_records import PARAM_NAMES as PARAM_NAMES
from controller.topology_records import PORT_KINDS as PORT_KINDS
from controller.topology_records import SHAPE_KINDS as SHAPE_KINDS
from controller.topology_records import SPEC_PREFIX as SPEC_PREFIX
from controller.topology_records import HostInfo as HostInfo
from controller.topology_records import Link as Link
from controller.topology_records import Management as Management
from controller.topology_records import PortInfo as PortInfo
from controller.topology_records import Shape as Shape
from controller.topology_records import SwitchInfo as SwitchInfo
from controller.topology_records import TopologyError as TopologyError
from controller.topology_records import _host_to_dict, _shape_from_dict, _switch_to_dict


class Topology:
    """Switches, hosts, links and the management attachment, with lookups over them.

    Build one with :func:`dragonfly`, :func:`single_switch`, :func:`line`, :func:`parse_spec` or
    :meth:`load`. The constructor derives every port map from the hosts, links and management
    attachment and rejects port clashes, parallel links and more than one link between a pair of
    groups (the dragonfly property minimal routing relies on).
    """

    def __init__(
        self,
        shape: Shape,
        switches: Iterable[SwitchInfo],
        hosts: Iterable[HostInfo],
        links: Iterable[Link],
        management: Management,
    ) -> None:
        self.shape = shape
        self.switches: tuple[SwitchInfo, ...] = tuple(switches)
        self.hosts: tuple[HostInfo, ...] = tuple(sorted(hosts, key=lambda h: h.node_id))
        self.links: tuple[Link, ...] = tuple(links)
        self.management = management

        for position, switch in enumerate(self.switches):
            if switch.index != position:
                raise TopologyError(
                    f"switch {switch.name} has index {switch.index}, not {position}"
                )
        self._host_by_node = {h.node_id: h for h in self.hosts}
        self._host_by_name = {h.name: h for h in self.hosts}
        if len(self._host_by_node) != len(self.hosts) or len(self._host_by_name) != len(self.hosts):
            raise TopologyError("two hosts share a node id or a name")
        self._ports: dict[int, dict[int, PortInfo]] = {s.index: {} for s in self.switches}
        self._neighbours: dict[int, dict[int, int]] = {s.index: {} for s in self.switches}
        self._port_peer_switch: dict[int, dict[int, int]] = {s.index: {} for s in self.switches}
        self._hosts_of_switch: dict[int, list[HostInfo]] = {s.index: [] for s in self.switches}
        self._attach_hosts()
        self._attach_links()
        self._attach_management()
        self._groups = self._collect_groups()
        self._gateways = self._collect_gateways()

    # ----------------------------------------------------------------- construction helpers

    def _add_port(self, switch: int, info: PortInfo) -> None:
        if switch not in self._ports:
            raise TopologyError(f"{info.peer} attaches to unknown switch {switch}")
        if info.port < 1:
            raise TopologyError(f"port {info.port} of {self.switches[switch].name} is not >= 1")
        taken = self._ports[switch].get(info.port)
        if taken is not None:
            raise TopologyError(
                f"port {info.port} of {self.switches[switch].name} is used by both "
                f"{taken.peer} and {info.peer}"
            )
        self._ports[switch][info.port] = info

    def _attach_hosts(self) -> None:
        for host in self.hosts:
            self._add_port(host.switch, PortInfo(host.port, "host", host.name, None))
            self._hosts_of_switch[host.switch].append(host)

    def _attach_links(self) -> None:
        for link in self.links:
            if link.kind not in LINK_KINDS:
                raise TopologyError(f"link kind {link.kind!r} is not one of {LINK_KINDS}")
            if link.a == link.b or link.a not in self._ports or link.b not in self._ports:
                raise TopologyError(f"link {link} does not join two distinct known switches")
            if link.b in self._neighbours[link.a]:
                raise TopologyError(f"more than one link between switches {link.a} and {link.b}")
            a_name, b_name = self.switches[link.a].name, self.switches[link.b].name
            self._add_port(link.a, PortInfo(link.a_port, link.kind, b_name, link.b_port))
            self._add_port(link.b, PortInfo(link.b_port, link.kind, a_name, link.a_port))
            self._neighbours[link.a][link.b] = link.a_port
            self._neighbours[link.b][link.a] = link.b_port
            self._port_peer_switch[link.a][link.a_port] = link.b
            self._port_peer_switch[link.b][link.b_port] = link.a

    def _attach_management(self) -> None:
        mgmt = self.management
        self._add_port(mgmt.switch, PortInfo(mgmt.port, "mgmt", mgmt.name, None))

    def _collect_groups(self) -> tuple[tuple[int, ...], ...]:
        by_group: dict[int, list[SwitchInfo]] = {}
        for switch in self.switches:
            by_group.setdefault(switch.group, []).append(switch)
        if sorted(by_group) != list(range(len(by_group))):
            raise TopologyError(f"groups must be numbered 0..n-1, got {sorted(by_group)}")
        return tuple(
            tuple(s.index for s in sorted(by_group[g], key=lambda s: s.router))
            for g in range(len(by_group))
        )

    def _collect_gateways(self) -> dict[tuple[int, int], int]:
        """(group, other group) -> the switch of ``group`` holding the link to ``other``."""
        gateways: dict[tuple[int, int], int] = {}
        for link in self.links:
            group_a, group_b = self.switches[link.a].group, self.switches[link.b].group
            if group_a == group_b:
                continue
            if (group_a, group_b) in gateways:
                raise TopologyError(f"more than one link between groups {group_a} and {group_b}")
            gateways[(group_a, group_b)] = link.a
            gateways[(group_b, group_a)] = link.b
        return gateways

    # ----------------------------------------------------------------------------- lookups

    def switch(self, index: int) -> SwitchInfo:
        if not 0 <= index < len(self.switches):
            raise TopologyError(
                f"switch {index} is not in {self.shape.spec} "
                f"(switches are 0..{len(self.switches) - 1})"
            )
        return self.switches[index]

    def switch_by_node(self, node_id: int) -> SwitchInfo:
        index = node_id - wire.SWITCH_ID_BASE
        if not wire.SWITCH_ID_BASE <= node_id <= wire.SWITCH_ID_MAX or index >= len(self.switches):
            raise TopologyError(f"node {node_id} is not a switch of {self.shape.spec}")
        return self.switches[index]

    def is_host(self, node_id: int) -> bool:
        return node_id in self._host_by_node

    def host_by_node(self, node_id: int) -> HostInfo:
        host = self._host_by_node.get(node_id)
        if host is None:
            raise TopologyError(
                f"node {node_id} is not a host of {self.shape.spec} "
                f"(hosts are {self._host_range_text()})"
            )
        return host

    def host_by_name(self, name: str) -> HostInfo:
        host = self._host_by_name.get(name)
        if host is None:
            raise TopologyError(f"no host named {name!r} in {self.shape.spec}")
        return host

    def _host_range_text(self) -> str:
        if not self.hosts:
            return "none"
        return f"{self.hosts[0].node_id}..{self.hosts[-1].node_id}"

    @property
    def port_map(self) -> dict[int, dict[int, PortInfo]]:
        """switch index -> {port: PortInfo} (do not mutate)."""
        return self._ports

    def ports(self, switch: int) -> dict[int, PortInfo]:
        self.switch(switch)
        return self._ports[switch]

    def neighbours(self, switch: int) -> dict[int, int]:
        """Neighbour switch index -> local egress port toward it."""
        self.switch(switch)
        return self._neighbours[switch]

    def port_to(self, switch: int, neighbour: int) -> int:
        port = self.neighbours(switch).get(neighbour)
        if port is None:
            raise TopologyError(
                f"switch {switch} ({self.switches[switch].name}) has no link to switch {neighbour}"
            )
        return port

    def peer_switch(self, switch: int, port: int) -> int | None:
        """The switch at the far end of ``port``, or None for host, management and unused ports."""
        self.switch(switch)
        return self._port_peer_switch[switch].get(port)

    def host_at_port(self, switch: int, port: int) -> HostInfo | None:
        info = self.ports(switch).get(port)
        if info is None or info.kind != "host":
            return None
        return self._host_by_name[info.peer]

    def hosts_of_switch(self, switch: int) -> tuple[HostInfo, ...]:
        self.switch(switch)
        return tuple(self._hosts_of_switch[switch])

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """Switch indices of each group, in router order."""
        return self._groups

    def group_of(self, switch: int) -> int:
        return self.switch(switch).group

    def gateway(self, group: int, other_group: int) -> int:
        """The switch of ``group`` that holds the link to ``other_group``."""
        switch = self._gateways.get((group, other_group))
        if switch is None:
            raise TopologyError(f"no link from group {group} to group {other_group}")
        return switch

    def has_gateway(self, group: int, other_group: int) -> bool:
        return (group, other_group) in self._gateways

    # ------------------------------------------------------------------------------ sizes

    @property
    def num_switches(self) -> int:
        return len(self.switches)

    @property
    def num_hosts(self) -> int:
        return len(self.hosts)

    @property
    def num_groups(self) -> int:
        return len(self._groups)

    @property
    def routers_per_group(self) -> int:
        return max(len(g) for g in self._groups)

    @property
    def radix(self) -> int:
        """Largest number of non-management ports on one switch."""
        return max(
            sum(1 for info in ports.values() if info.kind != "mgmt")
            for ports in self._ports.values()
        )

    def link_count(self, kind: str) -> int:
        return sum(1 for link in self.links if link.kind == kind)

    @property
    def num_local_links(self) -> int:
        return self.link_count("local")

    @property
    def num_global_links(self) -> int:
        return self.link_count("global")

    def router_edges(self) -> list[tuple[int, int, str]]:
        """(r1, r2, "local"|"global") with routers numbered group-major (= switch index).

        An edge is "global" when it joins two groups, so the chain links of a line topology
        (one group per switch) are "global" here.
        """
        return [
            (
                min(link.a, link.b),
                max(link.a, link.b),
                "local" if self.switches[link.a].group == self.switches[link.b].group else "global",
            )
            for link in self.links
        ]

    def router_diameter(self) -> int:
        """Exact hop diameter of the switch graph.

        Uses bitset reachability instead of one BFS per switch: ``reach[v]`` is the set of switches
        within k hops of v, and ``reach_{k+1}[v] = OR of reach_k[u]`` over v and its neighbours.
        That costs diameter * (switches + 2*links) big-int ORs, so Df(6,12,6) takes milliseconds.
        """
        count = len(self.switches)
        everything = (1 << count) - 1
        reach = [1 << v for v in range(count)]
        closed_neighbourhoods = [[v, *self._neighbours[v]] for v in range(count)]
        diameter = 0
        while any(r != everything for r in reach):
            grown = []
            for members in closed_neighbourhoods:
                acc = 0
                for u in members:
                    acc |= reach[u]
                grown.append(acc)
            if grown == reach:
                raise TopologyError(f"the switch graph of {self.shape.spec} is not connected")
            reach = grown
            diameter += 1
        return diameter

    def summary(self) -> dict[str, Any]:
        return {
            "shape": self.shape.spec,
            "groups": self.num_groups,
            "routers_per_group": self.routers_per_group,
            "routers": self.num_switches,
            "hosts": self.num_hosts,
            "local_links": self.num_local_links,
            "global_links": self.num_global_links,
            "line_links": self.link_count("line"),
            "radix": self.radix,
            "router_hop_diameter": self.router_diameter(),
            "management": f"{self.management.name} on switch {self.management.switch} "
            f"port {self.management.port}",
        }

    # ---------------------------------------------------------------------- serialization

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "shape": {
                "kind": self.shape.kind,
                "params": self.shape.named_params(),
                "arrangement": self.shape.arrangement,
                "spec": self.shape.spec,
            },
            "switches": [_switch_to_dict(s, self._ports[s.index]) for s in self.switches],
            "hosts": [_host_to_dict(h) for h in self.hosts],
            "links": [
                {"a": lk.a, "a_port": lk.a_port, "b": lk.b, "b_port": lk.b_port, "kind": lk.kind}
                for lk in self.links
            ],
            "management": {
                "node_id": self.management.node_id,
                "name": self.management.name,
                "switch": self.management.switch,
                "port": self.management.port,
                "mac": self.management.mac,
                "ip": self.management.ip,
            },
            "router_edges": [list(edge) for edge in self.router_edges()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Topology:
        """Rebuild a topology saved by :meth:`to_dict`; the stored port maps and router edges
        must match the ones derived from hosts, links and management, or TopologyError."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise TopologyError(f"not a {FORMAT} document (format is {found!r})")
        try:
            topo = cls(
                shape=_shape_from_dict(data["shape"]),
                switches=[
                    SwitchInfo(s["index"], s["name"], s["node_id"], s["group"], s["router"])
                    for s in data["switches"]
                ],
                hosts=[HostInfo(**h) for h in data["hosts"]],
                links=[Link(**lk) for lk in data["links"]],
                management=Management(**data["management"]),
            )
        except (KeyError, TypeError) as exc:
            raise TopologyError(f"malformed topology document: {exc!r}") from exc
        rebuilt = topo.to_dict()
        for key in ("switches", "router_edges"):
            if rebuilt[key] != data[key]:
                raise TopologyError(
                    f"topology document is inconsistent: stored {key!r} differ from the ones "
                    "derived from its hosts, links and management attachment"
                )
        return topo

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Topology:
        try:
            data = json.loads(Path(path).read_text())
        except json.JSONDecodeError as exc:
            raise TopologyError(f"{path} is not JSON: {exc}") from exc
        return cls.from_dict(data)

    def write_router_edges(self, path: str | Path) -> None:
        """One line per switch link: ``r1 r2 local|global``."""
        lines = [f"{r1} {r2} {kind}\n" for r1, r2, kind in self.router_edges()]
        Path(path).write_text("".join(lines))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Topology):
            return NotImplemented
        return (
            self.shape == other.shape
            and self.switches == other.switches
            and self.hosts == other.hosts
            and self.links == other.links
            and self.management == other.management
        )

    __hash__ = None  # type: ignore[assignment]  # compared by value, never used as a key

    def __repr__(self) -> str:
        return (
            f"Topology({self.shape.spec}: {self.num_switches} switches, "
            f"{self.num_hosts} hosts, {len(self.links)} links)"
        )


def members_by_group(
    members: Iterable[int], group_of: Callable[[int], int]
) -> dict[int, list[int]]:
    """Members split by dragonfly group: ``{group: members}``, groups in increasing order, each
    group's members in the order given. ``group_of`` maps a member to its group (a host's node
    id through the topology or an agent's directory, a rank through its communicator); one
    function for everyone, so every side orders groups and members alike."""
    by_group: dict[int, list[int]] = {}
    for member in members:
        by_group.setdefault(group_of(member), []).append(member)
    return dict(sorted(by_group.items()))
