"""Timed allgathers on the in-process fabric, shared by the allgather recovery tests: every
rank's seconds to return, with every rank's bytes checked."""

from __future__ import annotations

import asyncio
import random

from host_agents.comm import Comm


def blocks(instance: int, size: int, ranks: int) -> list[bytes]:
    """Each rank's block of one instance, different per instance and rank."""
    return [random.Random(instance * 100 + r).randbytes(size) for r in range(ranks)]


async def timed_allgather(
    comms: list[Comm], instance: int, started: float, size: int, algorithm: str
) -> tuple[list[float], list[bytes]]:
    """Every rank's allgather: (seconds from ``started`` to each rank's return, results)."""
    loop = asyncio.get_running_loop()
    data = blocks(instance, size, len(comms))
    done = [0.0] * len(comms)

    async def one(comm: Comm) -> bytes:
        got = await comm.allgather(data[comm.rank], algorithm=algorithm)
        done[comm.rank] = loop.time() - started
        return bytes(got)

    results = await asyncio.gather(*(one(c) for c in comms))
    assert all(r == b"".join(data) for r in results), "a rank got wrong blocks"
    return done, results
