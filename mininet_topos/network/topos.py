"""Mininet topologies built from the controller's topology model.

Usable with ``mn --custom mininet_topos/network/topos.py --topo dragonfly,2,2,1`` (Mininet's
``topos`` dictionary), which gives the bare network; ``make run`` also starts BMv2 and programs it.
Names carry the project prefix and fit Linux's 15-character interface names: switch ``ncsI``
(ports ``ncsI-ethP``), host ``nchN`` for node N, management node ``ncm0``.
"""

from __future__ import annotations

from typing import Any

from mininet.topo import Topo

from controller import topology as model
from controller import topology_build
from mininet_topos.links.linkemu import LinkSpec


class NetcollTopo(Topo):
    """Any shape of the topology model: ``NetcollTopo("df:2,4,2")``.

    With ``relay=True`` every host and switch link a--b is built as a--ncr0--b through the
    root-namespace node ``ncr0``, whose interfaces the link emulator (linkemu.py) bridges
    with seeded faults; ``self.emulated`` lists those links. The management link stays direct.
    """

    RELAY = "ncr0"

    def build(
        self,
        spec: str = "df:2,2,1",
        net: model.Topology | None = None,
        relay: bool = False,
        **_: Any,
    ) -> None:
        net = net or topology_build.parse_spec(spec)
        self.model = net
        self.emulated: list[LinkSpec] = []
        self._relay_port = 0
        if relay:
            self.addHost(self.RELAY, inNamespace=False, ip=None)
        for switch in net.switches:
            self.addSwitch(switch.name, index=switch.index)
        for host in net.hosts:
            self.addHost(host.name, ip=f"{host.ip}/16", mac=host.mac)
            switch_name = net.switch(host.switch).name
            name = f"{host.name}-{switch_name}:{host.port}"
            self._link(relay, name, "host", (host.name, 0), (switch_name, host.port))
        for link in net.links:
            a, b = net.switch(link.a).name, net.switch(link.b).name
            name = f"{a}:{link.a_port}-{b}:{link.b_port}"
            self._link(relay, name, link.kind, (a, link.a_port), (b, link.b_port))
        mgmt = net.management
        # the management node lives in the root namespace, without an IP address: the
        # controller sends mini packets from it and nothing else of the machine sees it
        self.addHost(mgmt.name, inNamespace=False, ip=None, mac=mgmt.mac)
        self.addLink(mgmt.name, net.switch(mgmt.switch).name, port1=0, port2=mgmt.port)

    def _link(
        self, relay: bool, name: str, kind: str, a: tuple[str, int], b: tuple[str, int]
    ) -> None:
        if not relay:
            self.addLink(a[0], b[0], port1=a[1], port2=b[1])
            return
        first, second = self._relay_port, self._relay_port + 1
        self._relay_port += 2
        self.addLink(a[0], self.RELAY, port1=a[1], port2=first)
        self.addLink(self.RELAY, b[0], port1=second, port2=b[1])
        self.emulated.append(
            LinkSpec(name, f"{self.RELAY}-eth{first}", f"{self.RELAY}-eth{second}", kind)
        )


class DragonflyTopo(NetcollTopo):
    """``--topo dragonfly,P,A,H[,ARRANGEMENT]``"""

    def __init__(self, p: int = 2, a: int = 2, h: int = 1, arrangement: str = "absolute") -> None:
        super().__init__(net=topology_build.dragonfly(int(p), int(a), int(h), arrangement))


class SingleTopo(NetcollTopo):
    """``--topo single,N``"""

    def __init__(self, n: int = 4) -> None:
        super().__init__(net=topology_build.single_switch(int(n)))


class LineTopo(NetcollTopo):
    """``--topo line,K,M``"""

    def __init__(self, k: int = 3, m: int = 2) -> None:
        super().__init__(net=topology_build.line(int(k), int(m)))


topos = {"netcoll": NetcollTopo, "dragonfly": DragonflyTopo, "single": SingleTopo, "line": LineTopo}
