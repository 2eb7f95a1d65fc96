"""Pure topology model of a netcoll network: switches, hosts, links and their port numbers.

Nothing here imports Mininet: the launcher builds the network *from* this model, and host
agents read the JSON it saves. Three shapes exist:

``dragonfly(p, a, h)`` -- Df(p,a,h)
    p hosts per router, a routers per group with all-to-all local links, h global links per
    router, ``g = a*h + 1`` groups and exactly one global link per pair of groups. Switch
    (router) indices are group-major: ``index = group*a + router``.

``single_switch(n)``
    One switch with n hosts (group 0, router 0).

``line(k, m)``
    k switches in a chain with m hosts each. Every switch is its own group (``group = index``,
    ``router = 0``), so the chain links join groups the way global links do and the
    dragonfly-style tree code (other groups first, then the group, then hosts) stays correct.

Port numbering (ports start at 1, port 0 means "none")::

    dragonfly   1..p                 hosts: host k (0-based local index) at port k+1
                p+1 .. p+a-1         local links to the other routers of the group, in
                                     increasing router order, skipping the router itself
                p+a .. p+a+h-1       global links: global port k of router j in group G
                                     carries the group's global link number l = j*h + k
                p+a+h                management port, switch 0 only
    single      1..n hosts, n+1 management
    line        1..m hosts, m+1 left neighbour, m+2 right neighbour (when they exist),
                m+3 management on switch 0

Global-link arrangements (which group a group's link number l reaches, g groups):

``absolute``   link l of group i goes to group ``t = l if l < i else l + 1``; at group t the
               same link is number ``i if i < t else i - 1``.
``relative``   link l of group i goes to group ``(i + l + 1) mod g``; at the far end it is
               number ``g - l - 2``.
``circulant``  link l of group i goes to group ``i + d`` (l even) or ``i - d`` (l odd), with
               ``d = l // 2 + 1`` (mod g); at the far end it is number ``l + 1`` / ``l - 1``
               (or ``l`` itself for the self-inverse offset ``d = g/2`` when ``a*h`` is odd).

Node ids follow :mod:`controller.wire`: hosts 1..N numbered group-major, then router, then
local index (``node_id = (switch_index*p + k) + 1``), switch i is ``switch_node_id(i)`` and the
management node ``MGMT_NODE_ID`` (named ``ncm0``) hangs off switch 0 on its own port.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import wire

FORMAT = "netcoll-topology/1"

KIND_DRAGONFLY = "dragonfly"
KIND_SINGLE = "single"
KIND_LINE = "line"
SHAPE_KINDS = (KIND_DRAGONFLY, KIND_SINGLE, KIND_LINE)
PARAM_NAMES: dict[str, tuple[str, ...]] = {
    KIND_DRAGONFLY: ("p", "a", "h"),
    KIND_SINGLE: ("n",),
    KIND_LINE: ("k", "hosts_per_switch"),
}
SPEC_PREFIX: dict[str, str] = {KIND_DRAGONFLY: "df", KIND_SINGLE: "single", KIND_LINE: "line"}

ARRANGEMENTS = ("absolute", "relative", "circulant")

LINK_KINDS = ("local", "global", "line")
PORT_KINDS = ("host", "local", "global", "line", "mgmt")

MGMT_NAME = "ncm0"
MAX_SWITCHES = wire.SWITCH_ID_MAX - wire.SWITCH_ID_BASE + 1
MAX_HOSTS = wire.HOST_ID_MAX - wire.HOST_ID_MIN + 1

ACCEPTED_SPECS = (
    "df:P,A,H[:absolute|relative|circulant] (e.g. df:2,4,2 or df:2,4,2:relative), "
    "single:N (e.g. single:4), line:K,M (K switches with M hosts each, e.g. line:3,2)"
)


class TopologyError(ValueError):
    """An invalid shape, an unknown host or switch, or an inconsistent topology file."""


@dataclass(frozen=True, slots=True)
class SwitchInfo:
    index: int
    name: str
    node_id: int
    group: int
    router: int  # index of the router within its group


@dataclass(frozen=True, slots=True)
class HostInfo:
    node_id: int
    name: str
    switch: int
    port: int  # the switch port the host is attached to
    mac: str
    ip: str
    group: int
    router: int
    local_index: int  # 0-based position among the hosts of its switch


@dataclass(frozen=True, slots=True)
class Link:
    """A switch-to-switch link; ``a``/``b`` are switch indices."""

    a: int
    a_port: int
    b: int
    b_port: int
    kind: str  # "local" | "global" | "line"


@dataclass(frozen=True, slots=True)
class PortInfo:
    """One switch port. ``peer`` is the name of what is plugged in (host, switch or ``ncm0``);
    ``peer_port`` is the switch port at the far end of a switch link, None for hosts and the
    management node (they have a single interface)."""

    port: int
    kind: str  # "host" | "local" | "global" | "line" | "mgmt"
    peer: str
    peer_port: int | None


@dataclass(frozen=True, slots=True)
class Management:
    """Where the management node (which sends mini packets) is attached."""

    node_id: int
    name: str
    switch: int
    port: int
    mac: str
    ip: str


@dataclass(frozen=True, slots=True)
class Shape:
    kind: str  # "dragonfly" | "single" | "line"
    params: tuple[int, ...]  # named by PARAM_NAMES[kind]
    arrangement: str | None = None  # dragonflies only

    @property
    def spec(self) -> str:
        """The canonical spec string accepted by :func:`parse_spec`."""
        text = f"{SPEC_PREFIX[self.kind]}:{','.join(str(v) for v in self.params)}"
        return f"{text}:{self.arrangement}" if self.arrangement else text

    def named_params(self) -> dict[str, int]:
        return dict(zip(PARAM_NAMES[self.kind], self.params, strict=True))


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
        runtime: Mapping[str, Any] | None = None,
    ) -> None:
        self.shape = shape
        self.switches: tuple[SwitchInfo, ...] = tuple(switches)
        self.hosts: tuple[HostInfo, ...] = tuple(sorted(hosts, key=lambda h: h.node_id))
        self.links: tuple[Link, ...] = tuple(links)
        self.management = management
        # Free-form fields the Mininet launcher adds (interface names, PIDs...): round-tripped.
        self.runtime: dict[str, Any] = dict(runtime or {})

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
            "runtime": self.runtime,
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
                runtime=data.get("runtime") or {},
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
            and self.runtime == other.runtime
        )

    __hash__ = None  # type: ignore[assignment]  # mutable runtime dict: not hashable

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


def _switch_to_dict(switch: SwitchInfo, ports: Mapping[int, PortInfo]) -> dict[str, Any]:
    return {
        "index": switch.index,
        "name": switch.name,
        "node_id": switch.node_id,
        "group": switch.group,
        "router": switch.router,
        "ports": [
            {"port": p.port, "kind": p.kind, "peer": p.peer, "peer_port": p.peer_port}
            for p in sorted(ports.values(), key=lambda p: p.port)
        ],
    }


def _host_to_dict(host: HostInfo) -> dict[str, Any]:
    return {
        "node_id": host.node_id,
        "name": host.name,
        "switch": host.switch,
        "port": host.port,
        "mac": host.mac,
        "ip": host.ip,
        "group": host.group,
        "router": host.router,
        "local_index": host.local_index,
    }


def _shape_from_dict(data: Mapping[str, Any]) -> Shape:
    kind = data["kind"]
    if kind not in PARAM_NAMES:
        raise TopologyError(f"unknown shape kind {kind!r} (known: {', '.join(SHAPE_KINDS)})")
    params = tuple(int(data["params"][name]) for name in PARAM_NAMES[kind])
    return Shape(kind, params, data.get("arrangement"))


# ------------------------------------------------------------------------------- builders


def _require_positive(shape_text: str, valid_example: str, **values: Any) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TopologyError(
                f"{shape_text}: {name} must be an integer >= 1, got {value!r}; "
                f"a valid shape looks like {valid_example}"
            )


def _check_size(shape_text: str, switches: int, hosts: int) -> None:
    if hosts > MAX_HOSTS:
        raise TopologyError(
            f"{shape_text} has {hosts} hosts, more than the {MAX_HOSTS} host node ids "
            f"({wire.HOST_ID_MIN}..{wire.HOST_ID_MAX}); choose a smaller shape, e.g. df:6,12,6"
        )
    if switches > MAX_SWITCHES:
        raise TopologyError(
            f"{shape_text} has {switches} switches, more than the {MAX_SWITCHES} switch node ids"
        )


def _make_switch(index: int, group: int, router: int) -> SwitchInfo:
    return SwitchInfo(index, f"ncs{index}", wire.switch_node_id(index), group, router)


def _make_hosts(switch: SwitchInfo, count: int) -> list[HostInfo]:
    """``count`` hosts on ports 1..count of ``switch``, numbered switch-major from 1."""
    hosts = []
    for k in range(count):
        node = switch.index * count + k + 1
        hosts.append(
            HostInfo(
                node_id=node,
                name=f"nch{node}",
                switch=switch.index,
                port=k + 1,
                mac=wire.host_mac(node),
                ip=wire.host_ip(node),
                group=switch.group,
                router=switch.router,
                local_index=k,
            )
        )
    return hosts


def _management(port: int) -> Management:
    node = wire.MGMT_NODE_ID
    return Management(node, MGMT_NAME, 0, port, wire.host_mac(node), wire.host_ip(node))


def global_link_peer(arrangement: str, group: int, link: int, num_groups: int) -> tuple[int, int]:
    """(far group, far link number) of global link ``link`` of ``group`` (see module docstring)."""
    g = num_groups
    if not 0 <= group < g or not 0 <= link < g - 1:
        raise TopologyError(f"global link {link} of group {group} does not exist with {g} groups")
    if arrangement == "absolute":
        target = link if link < group else link + 1
        return target, (group if group < target else group - 1)
    if arrangement == "relative":
        return (group + link + 1) % g, g - link - 2
    if arrangement == "circulant":
        offset = link // 2 + 1
        if 2 * offset == g:  # the offset g/2 is its own inverse: same link number at both ends
            return (group + offset) % g, link
        if link % 2 == 0:
            return (group + offset) % g, link + 1
        return (group - offset) % g, link - 1
    raise TopologyError(_unknown_arrangement(arrangement))


def _unknown_arrangement(arrangement: str) -> str:
    return (
        f"unknown global-link arrangement {arrangement!r}; choose one of {', '.join(ARRANGEMENTS)}"
    )


def local_port(p: int, router: int, other_router: int) -> int:
    """Port of ``router`` toward ``other_router`` of the same group in a Df(p, a, h)."""
    return p + 1 + (other_router if other_router < router else other_router - 1)


def global_port(p: int, a: int, h: int, link: int) -> tuple[int, int]:
    """(router in group, port) carrying the group's global link number ``link``."""
    return link // h, p + a + link % h


def dragonfly(p: int, a: int, h: int, arrangement: str = "absolute") -> Topology:
    """Df(p, a, h): see the module docstring for numbering and arrangements."""
    shape_text = f"df:{p},{a},{h}"
    _require_positive(
        shape_text, "df:2,4,2 (p hosts/router, a routers/group, h global/router)", p=p, a=a, h=h
    )
    if arrangement not in ARRANGEMENTS:
        raise TopologyError(_unknown_arrangement(arrangement))
    num_groups = a * h + 1
    _check_size(shape_text, a * num_groups, p * a * num_groups)

    switches = [_make_switch(g * a + r, g, r) for g in range(num_groups) for r in range(a)]
    hosts = [host for s in switches for host in _make_hosts(s, p)]
    links: list[Link] = []
    for group in range(num_groups):
        base = group * a
        for r1 in range(a):
            for r2 in range(r1 + 1, a):
                links.append(
                    Link(
                        base + r1, local_port(p, r1, r2), base + r2, local_port(p, r2, r1), "local"
                    )
                )
    for group in range(num_groups):
        for link in range(a * h):
            far_group, far_link = global_link_peer(arrangement, group, link, num_groups)
            if group > far_group:
                continue  # each link once, from its lower-numbered group
            near_router, near_port = global_port(p, a, h, link)
            far_router, far_port = global_port(p, a, h, far_link)
            links.append(
                Link(
                    group * a + near_router,
                    near_port,
                    far_group * a + far_router,
                    far_port,
                    "global",
                )
            )
    shape = Shape(KIND_DRAGONFLY, (p, a, h), arrangement)
    return Topology(shape, switches, hosts, links, _management(p + a + h))


def single_switch(n: int) -> Topology:
    """One switch, hosts 1..n on ports 1..n, management on port n+1."""
    _require_positive(f"single:{n}", "single:4", n=n)
    _check_size(f"single:{n}", 1, n)
    switch = _make_switch(0, 0, 0)
    return Topology(
        Shape(KIND_SINGLE, (n,)), [switch], _make_hosts(switch, n), [], _management(n + 1)
    )


def line(k: int, hosts_per_switch: int) -> Topology:
    """k switches in a chain, each its own group, m hosts each; see the module docstring."""
    m = hosts_per_switch
    shape_text = f"line:{k},{m}"
    _require_positive(shape_text, "line:3,2 (3 switches, 2 hosts each)", k=k, hosts_per_switch=m)
    _check_size(shape_text, k, k * m)
    switches = [_make_switch(i, i, 0) for i in range(k)]
    hosts = [host for s in switches for host in _make_hosts(s, m)]
    # Port m+2 of switch i (right) faces port m+1 of switch i+1 (left).
    links = [Link(i, m + 2, i + 1, m + 1, "line") for i in range(k - 1)]
    return Topology(Shape(KIND_LINE, (k, m)), switches, hosts, links, _management(m + 3))


def build(shape: Shape) -> Topology:
    if shape.kind == KIND_DRAGONFLY:
        p, a, h = shape.params
        return dragonfly(p, a, h, shape.arrangement or "absolute")
    if shape.kind == KIND_SINGLE:
        return single_switch(*shape.params)
    if shape.kind == KIND_LINE:
        return line(*shape.params)
    raise TopologyError(f"unknown shape kind {shape.kind!r} (known: {', '.join(SHAPE_KINDS)})")


def _parse_ints(spec: str, text: str, count: int) -> tuple[int, ...]:
    parts = text.split(",")
    if len(parts) != count:
        raise TopologyError(
            f"topology spec {spec!r} needs {count} comma-separated integers; accepted forms: "
            f"{ACCEPTED_SPECS}"
        )
    try:
        return tuple(int(part) for part in parts)
    except ValueError:
        raise TopologyError(
            f"topology spec {spec!r} has a non-integer parameter; accepted forms: {ACCEPTED_SPECS}"
        ) from None


def parse_spec(spec: str) -> Topology:
    """Build a topology from "df:2,4,2", "df:2,4,2:relative", "single:4" or "line:3,2"."""
    parts = spec.strip().split(":")
    kind = parts[0].lower()
    if kind in ("df", "dragonfly") and len(parts) in (2, 3):
        p, a, h = _parse_ints(spec, parts[1], 3)
        return dragonfly(p, a, h, parts[2] if len(parts) == 3 else "absolute")
    if kind == "single" and len(parts) == 2:
        (n,) = _parse_ints(spec, parts[1], 1)
        return single_switch(n)
    if kind == "line" and len(parts) == 2:
        k, m = _parse_ints(spec, parts[1], 2)
        return line(k, m)
    raise TopologyError(f"unknown topology spec {spec!r}; accepted forms: {ACCEPTED_SPECS}")
