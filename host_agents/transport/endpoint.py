"""What every protocol object needs from the engine that hosts it.

The engine (:class:`host_agents.engine.Engine`) owns the port, the clock, the counters and
drop accounting; unicast, multicast, aggregation and the barrier see it only through this
interface, so none of them imports the engine.
"""

from __future__ import annotations

import asyncio
import random
from typing import Protocol

from controller import wire
from host_agents.directory import Directory
from host_agents.plans import PlanFunc
from host_agents.transport.config import EngineConfig, EngineStats
from host_agents.transport.queue_delay import QueueDelay

BROADCAST_MAC = b"\xff" * 6  # multicast data and ARRIVE: the switch decides where they go


class Endpoint(Protocol):
    @property
    def node(self) -> int: ...

    @property
    def cfg(self) -> EngineConfig: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def stats(self) -> EngineStats: ...

    @property
    def directory(self) -> Directory: ...

    @property
    def plan(self) -> PlanFunc | None: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def queue_delay(self) -> QueueDelay:
        """Queueing lately seen in roots' send stamps (``queue_delay.QueueDelay``)."""
        ...

    @property
    def last_heard(self) -> float:
        """Loop time of the newest frame this host received that crossed the network's
        queues (data, ACK or NACK: ``queue_delay.QUEUED_OPS``): while it is recent, the
        host's own link is still delivering, so queues, not losses, may explain a silence
        (:mod:`host_agents.transport.queue_wait`)."""
        ...

    def send_frame(
        self, dst_mac: bytes, hdr: wire.Header, payload: bytes | memoryview = b""
    ) -> None:
        """Put one frame on the wire (counted)."""

    def drop(self, reason: str, hdr: wire.Header | None) -> None:
        """Count and log a rejected frame under ``reason``."""
