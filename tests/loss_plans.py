"""One chosen frame lost per epoch on the in-process fabric: the loss plans of the repair tests
(tests/unit/test_barrier_repairs.py, tests/unit/test_allreduce_repairs.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from controller import wire
from controller.topology import Topology
from host_agents.comm import Comm
from host_agents.engine import EngineConfig
from tests.fabric import Cluster, Faults, LinkKey

# picks the frame to lose from its link and header
Chooser = Callable[[LinkKey, wire.Header], bool]


class OneLossPerEpoch:
    """A Faults drop_if: in each planned epoch, the first frame its chooser picks is lost, and
    no other. With first_sends_only, frames carrying flags (resends, answers) are never picked."""

    def __init__(self, plan: dict[int, Chooser], first_sends_only: bool = False) -> None:
        self.plan = plan
        self.first_sends_only = first_sends_only
        self.lost: list[int] = []  # the epochs that lost their frame, in order

    def __call__(self, link: LinkKey, frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        choose = self.plan.get(hdr.epoch)
        if choose is None or hdr.epoch in self.lost or (self.first_sends_only and hdr.flags):
            return False
        if not choose(link, hdr):
            return False
        self.lost.append(hdr.epoch)
        return True

    def assert_every_loss_happened(self) -> None:
        assert sorted(self.lost) == sorted(self.plan), (
            f"frames lost in epochs {self.lost}, planned {sorted(self.plan)}"
        )


def resends_per_epoch(
    topo: Topology,
    hosts: tuple[int, ...],
    config: EngineConfig,
    drop_if: OneLossPerEpoch,
    epochs: int,
    counter: str,
    collective: Callable[[Comm], Awaitable[object]],
) -> dict[int, int]:
    """Run the collective on every rank once per epoch (1 .. epochs) under the plan's losses;
    for each epoch, how much the engines' counter grew (every wait bounded at 60 s)."""

    async def main() -> dict[int, int]:
        loop = asyncio.get_running_loop()
        cluster = Cluster(
            topo, hosts, loop=loop, config=config, faults=Faults(drop_if=drop_if), seed=33
        )
        resends: dict[int, int] = {}
        for epoch in range(1, epochs + 1):
            before = cluster.stats()[counter]
            await asyncio.wait_for(asyncio.gather(*map(collective, cluster.comms)), 60)
            resends[epoch] = cluster.stats()[counter] - before
        return resends

    return asyncio.run(main())
