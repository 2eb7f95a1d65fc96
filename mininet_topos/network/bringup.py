"""What a bring-up reports (``BringUp``: time phase by phase), the asyncio loop thread the
control plane runs on, and the SIGTERM handler that turns a kill into an orderly teardown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class BringUp:
    mininet_s: float = 0.0
    switches_s: float = 0.0
    programming_s: float = 0.0
    total_s: float = 0.0
    switches: int = 0
    hosts: int = 0
    phases: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return (
            f"bring-up of {self.hosts} hosts and {self.switches} BMv2 switches: "
            f"{self.total_s:.1f} s (Mininet {self.mininet_s:.1f} s, switches ready "
            f"{self.switches_s:.1f} s, programming {self.programming_s:.1f} s)"
        )


class LoopThread:
    """An asyncio loop in a daemon thread, for the control plane."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="netcoll-control", daemon=True
        )
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)
