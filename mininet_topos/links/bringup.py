"""The link model's part in bringing a network up: where the delay goes, which ports are
shaped, and the base delay every emulated link keeps under any fault setting."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from controller import topology as model
from mininet_topos.links.linkfaults import Impairment
from mininet_topos.links.shaping import LinkModel, link_ends, netem_available, shape, unshape


@dataclass
class LinkPlan:
    """How one network realises its link model."""

    links: LinkModel
    netem: bool = False  # delays (and serialisation) by netem in the kernel
    # delays and serialisation by the link emulator (no netem here): HTB paces a link and
    # pushes back on its sender, but lets a frame through at once while it has tokens; a
    # wire holds every frame for its length at the rate, which the emulator adds
    relay_delays: bool = False
    shaped_ports: dict[str, float] = field(default_factory=dict)  # root-ns port -> Mb/s

    @classmethod
    def for_links(cls, links: LinkModel) -> LinkPlan:
        needed = links.delayed or links.shaped
        netem = needed and netem_available()
        return cls(links, netem=netem, relay_delays=needed and not netem)

    def apply(self, mininet: Any, topo: model.Topology, mtu: int, run_dir: Path) -> int:
        """Shape both ends of every link; returns how many interfaces were given a qdisc."""
        if not self.links.shaped and not self.netem:
            return 0
        self.shaped_ports = {
            end.intf: rate
            for end in link_ends(topo)
            if not end.in_namespace and (rate := self.links.rate_of(end.kind)) is not None
        }
        return shape(mininet, topo, self.links, mtu, run_dir, self.netem)

    def reshape(
        self, links: LinkModel, mininet: Any, topo: model.Topology, mtu: int, run_dir: Path
    ) -> None:
        """New rates or queues on a running network (the delays stay where they are put)."""
        if (links.delay_of("local"), links.delay_of("global")) != (
            self.links.delay_of("local"),
            self.links.delay_of("global"),
        ):
            raise ValueError("a running network's delays cannot change: bring it up again")
        if self.links.shaped or self.netem:
            # HTB refuses to change its root in place: every port starts again, empty
            unshape(mininet, topo, run_dir)
            self.shaped_ports = {}
        self.links = links
        if links.shaped or self.netem:
            self.apply(mininet, topo, mtu, run_dir)

    def with_base_delay(self, impairment: Impairment, kind: str) -> Impairment:
        """A fault setting on an emulated link of ``kind``, its propagation delay kept."""
        if not self.relay_delays:
            return impairment
        return replace(
            impairment,
            delay=impairment.delay + self.links.delay_of(kind),
            rate_mbit=self.links.rate_of(kind) or 0.0,
        )

    def describe(self) -> str:
        where = "netem" if self.netem else "the link emulator" if self.relay_delays else ""
        text = self.links.describe()
        return f"{text}; delays by {where}" if where else text
