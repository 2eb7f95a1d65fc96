"""The controller's topology as an ns-3 network: nodes, point-to-point links, minimal routes,
multicast trees and barrier trees.

Addresses: host ``h`` is 10.group.router.(local index + 1), so a router reaches a remote group
by one /16 route and a router of its own group by one /24 (dragonfly minimal routing in
83 prefixes per router at Df(6,12,6), where ns-3's global routing does not finish). Router
ports take addresses outside 10/8, one per port. Every route and tree entry names a device
(a port), as a switch's table does; the routers forward in ``netcoll_sim.cc``, by exact match on
those prefixes, not through ns-3's IP stack (which walks every route per packet).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from controller import routing, wire
from controller.topology import Topology
from controller.trees import Tree
from host_agents.plans import McastPlan
from host_agents.transport.config import EngineConfig
from mininet_topos.ns3sim.loader import load

ROUTER_ADDRESS_BASE = int(ipaddress.IPv4Address("11.0.0.0"))
MULTICAST_BASE = int(ipaddress.IPv4Address("232.0.0.0"))
HOST_LINK, LOCAL_LINK, GLOBAL_LINK = 0, 1, 2
LINK_KIND = {"local": LOCAL_LINK, "line": LOCAL_LINK, "global": GLOBAL_LINK}
ENGINE = EngineConfig()
ACK_BYTES = 8  # an ACK frame's body (netcoll_sim.cc): the engine's selective-ACK bitmap
NS3_OVERHEAD = 2 + 44  # what ns-3 puts around a frame's body: PPP and netcoll_sim's header


@dataclass(frozen=True, slots=True)
class LinkParams:
    """Rates, latencies, the switch queue, the frame size and the hosts' ACK protocol. The
    rates are [DF-scatter]'s (5.25 GiB/s terminal and local links, 4.7 GiB/s global links, in
    ns-3's bits per second). Hosts cut messages into ``mtu`` less netcoll's header, as the
    agents do on links of that MTU (Mininet's links carry 9000-byte frames, wire.JUMBO_MTU).
    Receivers acknowledge as the engine's do (``ack_every``, ``ack_delay``: EngineConfig's),
    and a multicast root runs at most ``mcast_window`` segments ahead of its slowest ACK
    source; the defaults are the engine's, which the agents on Mininet scale with the frame
    and the links (mininet_topos.network.windows_for, timers_for)."""

    rate: str = "45.1Gbps"  # host and local links
    global_rate: str = "40.4Gbps"
    delay: str = "100ns"  # per link, propagation
    global_delay: str = "100ns"
    switch_queue: int = 1000  # packets per switch egress port (drop-tail)
    host_queue: int = 1000  # packets; hosts queue messages, their NIC holds a packet or two
    # unicast segments a host keeps unacknowledged (the engine's message_window)
    window: int = ENGINE.message_window
    mtu: int = wire.MTU  # bytes of a frame: its segments take wire.max_payload(mtu) of message
    ack_every: int = ENGINE.ack_every  # segments a receiver acknowledges at once
    ack_delay: float = ENGINE.ack_delay  # seconds before it acknowledges fewer
    mcast_window: int = ENGINE.mcast_window  # segments a multicast root runs ahead

    def __post_init__(self) -> None:
        wire.max_payload(self.mtu)  # ValueError outside what a frame can be
        if min(self.window, self.ack_every, self.mcast_window) < 1 or self.ack_delay < 0:
            raise ValueError("windows and ack_every take 1 or more, ack_delay 0 s or more")

    @property
    def segment(self) -> int:
        """Message bytes per frame."""
        return wire.max_payload(self.mtu)

    def describe(self) -> str:
        return (
            f"links {self.rate}/{self.delay}, global {self.global_rate}/{self.global_delay}, "
            f"switch queues {self.switch_queue} packets, host window {self.window} segments, "
            f"MTU {self.mtu} ({self.segment}-byte segments), ACK every {self.ack_every} "
            f"segments or after {self.ack_delay * 1e3:g} ms, multicast window "
            f"{self.mcast_window} segments"
        )


def host_address(topo: Topology, node: int) -> int:
    host = topo.host_by_node(node)
    return int(ipaddress.IPv4Address(f"10.{host.group}.{host.router}.{host.local_index + 1}"))


def dotted(address: int) -> str:
    return str(ipaddress.IPv4Address(address))


@dataclass(slots=True)
class SimNetwork:
    """One ns-3 network built from a topology; device indices and addresses for the rest."""

    topo: Topology
    params: LinkParams
    sim: Any = None  # netcoll_sim::Sim
    host_index: dict[int, int] = field(default_factory=dict)  # node id -> ns-3 node index
    host_addr: dict[int, int] = field(default_factory=dict)  # node id -> address
    # (switch, port) -> (device index at the switch, device index at the far end); the far end
    # is a host or a switch
    port_devices: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    host_device: dict[int, int] = field(default_factory=dict)  # node id -> its device index
    trees_installed: set[tuple[str, int]] = field(default_factory=set)

    @classmethod
    def build(cls, topo: Topology, params: LinkParams) -> SimNetwork:
        _, nc = load()
        net = cls(topo, params, nc.Sim())
        net._build()
        return net

    def router_node(self, switch: int) -> int:
        return self.topo.num_hosts + switch

    def _build(self) -> None:
        topo, sim, p = self.topo, self.sim, self.params
        sim.Configure(p.rate, p.delay, p.switch_queue, p.host_queue, p.window, p.segment)
        sim.SetAcks(p.ack_every, p.ack_delay, p.mcast_window)
        sim.SetGlobalRate(p.global_rate, p.global_delay)
        sim.CreateNodes(topo.num_hosts, topo.num_switches)
        next_router_addr = ROUTER_ADDRESS_BASE
        for index, host in enumerate(topo.hosts):
            self.host_index[host.node_id] = index
            addr = host_address(topo, host.node_id)
            self.host_addr[host.node_id] = addr
            link = sim.AddLink(
                index, self.router_node(host.switch), HOST_LINK, addr, next_router_addr
            )
            self.host_device[host.node_id] = 2 * link
            self.port_devices[(host.switch, host.port)] = (2 * link + 1, 2 * link)
            next_router_addr += 1
        for link_info in topo.links:
            a_addr, b_addr = next_router_addr, next_router_addr + 1
            next_router_addr += 2
            link = sim.AddLink(
                self.router_node(link_info.a),
                self.router_node(link_info.b),
                LINK_KIND[link_info.kind],
                a_addr,
                b_addr,
            )
            self.port_devices[(link_info.a, link_info.a_port)] = (2 * link, 2 * link + 1)
            self.port_devices[(link_info.b, link_info.b_port)] = (2 * link + 1, 2 * link)
        for switch in range(topo.num_switches):
            self._install_routes(switch)

    def _device(self, switch: int, port: int) -> int:
        """The device of ``switch``'s ``port``."""
        return self.port_devices[(switch, port)][0]

    def _install_routes(self, switch: int) -> None:
        """Minimal routes, as controller.routing computes them, aggregated by prefix."""
        topo, sim = self.topo, self.sim
        here = topo.switch(switch)
        for port, info in topo.ports(switch).items():
            if info.kind == "host":
                host = topo.host_at_port(switch, port)
                assert host is not None
                sim.AddHostRoute(switch, self.host_addr[host.node_id], self._device(switch, port))
        by_group: dict[int, list[int]] = {}
        for switch_info in topo.switches:
            by_group.setdefault(switch_info.group, []).append(switch_info.index)
        for group, members in by_group.items():
            if group != here.group:
                # the first hop toward a group is the same for all of its routers
                target = members[0]
                port = topo.port_to(switch, routing.next_switch(topo, switch, target))
                net = int(ipaddress.IPv4Address(f"10.{group}.0.0"))
                sim.AddNetworkRoute(switch, net, 0xFFFF0000, self._device(switch, port))
                continue
            for other in members:
                if other == switch:
                    continue
                router = topo.switch(other).router
                port = topo.port_to(switch, routing.next_switch(topo, switch, other))
                net = int(ipaddress.IPv4Address(f"10.{group}.{router}.0"))
                sim.AddNetworkRoute(switch, net, 0xFFFFFF00, self._device(switch, port))

    # -- trees ------------------------------------------------------------------------------

    def group_address(self, kind: str, root: int) -> int:
        """One multicast group per (tree kind, root): a router's tree table is keyed by group
        alone, and trees of different roots leave by different ports."""
        kinds = ("innet", "ragasa_spread", "ragasa_group")
        return MULTICAST_BASE + (kinds.index(kind) << 16) + self.host_index[root] + 1

    def install_tree(self, tree: Tree) -> None:
        """A broadcast tree as multicast routes: at each switch, packets of the tree's group
        arriving by the parent port go out of exactly the child ports, and packets arriving by
        any other port are dropped, as our switches check the parent port."""
        key = (tree.kind, tree.root_node)
        if key in self.trees_installed:
            return
        self.trees_installed.add(key)
        group = self.group_address(tree.kind, tree.root_node)
        for switch, node in tree.nodes.items():
            children = [self._device(switch, port) for port in node.child_ports]
            self.sim.AddMulticastRoute(
                switch, group, self._device(switch, node.parent_port), children
            )

    def install_ack_plan(self, tree: Tree, plan: McastPlan) -> None:
        """Who acknowledges the multicasts of ``tree`` to whom (the engine's plan)."""
        receivers = list(plan.receivers)
        self.sim.SetAckPlan(
            self.group_address(tree.kind, tree.root_node),
            self.host_index[tree.root_node],
            [self.host_index[r] for r in receivers],
            [self.host_index[plan.ack_target[r]] for r in receivers],
        )

    def install_barrier(self, tree: Tree) -> None:
        """Barrier counting state of every switch of a switch-rooted tree."""
        for switch, node in tree.nodes.items():
            parent = tree.parent_switch(switch)
            parent_device = 0 if parent is None else self._device(switch, node.parent_port)
            self.sim.BarrierRouterSet(switch, len(node.child_ports), parent is None, parent_device)
            for port in node.child_ports:
                self.sim.BarrierRouterChild(switch, self._device(switch, port))

    # -- counters ---------------------------------------------------------------------------

    def link_counters(self) -> dict[tuple[int, int], tuple[int, int, int]]:
        """(packets, payload bytes, wire bytes) of data per link direction (ACK frames apart:
        :meth:`ack_counters`), keyed like host_agents.fabric: (switch, port) for what a
        switch sends out of a port, (-1, node) for what a host sends."""
        devices = {link: device for link, (device, _) in self.port_devices.items()}
        devices.update({(-1, node): device for node, device in self.host_device.items()})
        out: dict[tuple[int, int], tuple[int, int, int]] = {}
        sim = self.sim
        for link, device in devices.items():
            acks = int(sim.DeviceAcks(device))
            out[link] = (
                int(sim.DevicePackets(device)) - acks,
                int(sim.DevicePayload(device)) - acks * ACK_BYTES,
                int(sim.DeviceWire(device)) - acks * (ACK_BYTES + NS3_OVERHEAD),
            )
        return out

    def ack_counters(self) -> dict[tuple[int, int], int]:
        """ACK frames per link direction, keyed as :meth:`link_counters`."""
        sim = self.sim
        out = {link: int(sim.DeviceAcks(d)) for link, (d, _) in self.port_devices.items()}
        out.update({(-1, n): int(sim.DeviceAcks(d)) for n, d in self.host_device.items()})
        return out

    def drops(self) -> int:
        """Packets lost to full queues since the counters were last reset."""
        return sum(int(self.sim.DeviceDrops(d)) for d in range(int(self.sim.Devices())))

    def unrouted(self) -> int:
        """Packets a router had no route or tree entry for (or that came to a tree by a port
        other than its parent's), or a host was not the destination of, since the counters
        were last reset: 0 unless the installed state is wrong."""
        return int(self.sim.Unrouted())
