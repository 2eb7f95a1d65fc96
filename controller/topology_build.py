"""Building a :class:`~controller.topology.Topology`: from a shape, or from a spec string such as
``df:2,4,2`` (:func:`parse_spec`). Three shapes exist:

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
"""

from __future__ import annotations

from typing import Any

from controller import wire
from controller.topology import Topology
from controller.topology_records import (
    ACCEPTED_SPECS,
    ARRANGEMENTS,
    KIND_DRAGONFLY,
    KIND_LINE,
    KIND_SINGLE,
    MAX_HOSTS,
    MAX_SWITCHES,
    MGMT_NAME,
    SHAPE_KINDS,
    HostInfo,
    Link,
    Management,
    Shape,
    SwitchInfo,
    TopologyError,
)

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
