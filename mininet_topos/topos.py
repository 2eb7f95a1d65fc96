"""Mininet topologies built from the controller's topology model.

Usable with ``mn --custom mininet_topos/topos.py --topo dragonfly,2,2,1`` (Mininet's ``topos``
dictionary), which gives the bare network; ``make run`` also starts BMv2 and programs it.
Names carry the project prefix and fit Linux's 15-character interface names: switch ``ncsI``
(ports ``ncsI-ethP``), host ``nchN`` for node N, management node ``ncm0``.
"""

from __future__ import annotations

from typing import Any

from mininet.topo import Topo

from controller import topology as model


class NetcollTopo(Topo):
    """Any shape of the topology model: ``NetcollTopo("df:2,4,2")``."""

    def build(self, spec: str = "df:2,2,1", net: model.Topology | None = None, **_: Any) -> None:
        net = net or model.parse_spec(spec)
        self.model = net
        for switch in net.switches:
            self.addSwitch(switch.name, index=switch.index)
        for host in net.hosts:
            self.addHost(host.name, ip=f"{host.ip}/16", mac=host.mac)
            self.addLink(host.name, net.switch(host.switch).name, port1=0, port2=host.port)
        for link in net.links:
            self.addLink(
                net.switch(link.a).name,
                net.switch(link.b).name,
                port1=link.a_port,
                port2=link.b_port,
            )
        mgmt = net.management
        # the management node lives in the root namespace, without an IP address: the
        # controller sends mini packets from it and nothing else of the machine sees it
        self.addHost(mgmt.name, inNamespace=False, ip=None, mac=mgmt.mac)
        self.addLink(mgmt.name, net.switch(mgmt.switch).name, port1=0, port2=mgmt.port)


class DragonflyTopo(NetcollTopo):
    """``--topo dragonfly,P,A,H[,ARRANGEMENT]``"""

    def __init__(self, p: int = 2, a: int = 2, h: int = 1, arrangement: str = "absolute") -> None:
        super().__init__(net=model.dragonfly(int(p), int(a), int(h), arrangement))


class SingleTopo(NetcollTopo):
    """``--topo single,N``"""

    def __init__(self, n: int = 4) -> None:
        super().__init__(net=model.single_switch(int(n)))


class LineTopo(NetcollTopo):
    """``--topo line,K,M``"""

    def __init__(self, k: int = 3, m: int = 2) -> None:
        super().__init__(net=model.line(int(k), int(m)))


topos = {"netcoll": NetcollTopo, "dragonfly": DragonflyTopo, "single": SingleTopo, "line": LineTopo}
