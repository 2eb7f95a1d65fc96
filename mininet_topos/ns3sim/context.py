"""The collective context on simulated time: host_agents' own CollCtx, one method changed.

Everything an algorithm calls (isend, irecv, recv, wait_incoming, switch_barrier, group_of,
switch_of, node, error, ...) is CollCtx's code, running over the engine-shaped
:class:`~mininet_topos.ns3sim.transport.SimEngine`. Only ``wait`` differs: CollCtx bounds every
wait with a watchdog timer polled every half second, which in a simulation costs more than
the message it waits for (27 million waits in one Df(6,12,6) ring allgather). The simulation
bounds waits globally instead: when nothing is left to happen the loop raises
:class:`~mininet_topos.ns3sim.loop.SimStall`, and the runner bounds simulated time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from host_agents.comm import CollCtx
from host_agents.engine import EngineError

T = TypeVar("T")


class SimCtx(CollCtx):
    async def wait(
        self, fut: Awaitable[T], what: str, *, progress: Callable[[], int] | None = None
    ) -> T:
        try:
            return await fut
        except EngineError as exc:
            raise self.error(f"{what}: {exc}") from exc
