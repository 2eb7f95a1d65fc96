"""The records a :class:`controller.topology.Topology` is made of: switches, hosts, links,
ports, the management node and the shape, the names and limits they follow, and their JSON
forms. Re-exported by :mod:`controller.topology`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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
