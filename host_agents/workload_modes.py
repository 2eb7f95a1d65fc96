"""Measurement modes beyond one operation per iteration (``CollectiveTest.mode``).

``all_roots``: every rank roots one operation, all started at once and then all waited for
([Ragasa]'s experiment: all 72 hosts broadcasting together). ``overlap``: a blocking
"computation" of growing length between start and wait, to find how much of it fits without
delaying completion ([Tofu2]); the start's own CPU time is measured around the call.

The computation is ``time.sleep``, not a spinning loop: like computation it keeps the agent's
event loop from progressing the collective, but it leaves the shared cores to the switches and
the other agents, as a rank's own core would on a real machine.
"""

from __future__ import annotations

import asyncio
import statistics
import struct
import time
from typing import Any

from host_agents.collectives import Call
from host_agents.comm import Comm, Persistent
from host_agents.workload import CollectiveTest, Instance

_GO = struct.Struct("!d")


async def start_together(comm: Comm, test: CollectiveTest) -> float | None:
    """Before an iteration: the barrier (OSU style), then for an aligned test a wait until the
    start time rank 0 broadcast, on the clock every Mininet host shares; that time (None when
    not aligned), so the caller can record how late the rank really started."""
    if not test.sync or test.collective == "barrier":
        return None
    await comm.barrier(algorithm="innet" if comm.innet else "dissemination")
    if not test.aligned:
        return None
    go = _GO.pack(time.monotonic() + test.align_lead_s) if comm.rank == 0 else None
    got = await comm.bcast(go, 0, size=_GO.size, algorithm="binomial")
    (at,) = _GO.unpack(bytes(got))
    wait = at - time.monotonic()
    if wait > 0:  # else it learned the time too late and starts now
        await asyncio.sleep(wait)
    return float(at)


def _instance(
    comm: Comm, test: CollectiveTest, index: int, seed: int, size: int, it: int, root: int
) -> Instance:
    return Instance(test.collective, seed, index, size, it, root, comm.size, comm.rank, test.op)


def _entry(test: CollectiveTest, size: int, root: int, **measured: Any) -> dict[str, Any]:
    return {
        "collective": test.collective,
        "algorithm": test.algorithm,
        "size": size,
        "root": root,
        "persistent": test.persistent,
        "mode": test.mode,
        "init_seconds": 0.0,
        **measured,
    }


async def all_roots(
    comm: Comm, test: CollectiveTest, index: int, seed: int, size: int
) -> dict[str, Any]:
    """Each iteration: one operation rooted at every rank, all in flight together."""
    times: list[float] = []
    stamps: list[tuple[float, float]] = []
    wrong = 0
    delays: list[float] = []
    chosen = ""
    for iteration in range(test.warmup + test.iterations):
        go = await start_together(comm, test)
        instances = [
            _instance(comm, test, index, seed, size, iteration, root) for root in range(comm.size)
        ]
        calls = [Call(i.contribution(), i.root, size, test.op) for i in instances]
        began, started = time.monotonic(), time.perf_counter()
        requests = [comm.start(test.collective, c, algorithm=test.algorithm) for c in calls]
        results = await asyncio.gather(*(r.wait() for r in requests))
        elapsed = time.perf_counter() - started
        chosen = comm.last_choice
        for instance, got in zip(instances, results, strict=True):
            expected = instance.expected()
            wrong += expected is not None and got != expected
        if iteration >= test.warmup:
            times.append(elapsed)
            stamps.append((began, time.monotonic()))
            if go is not None:
                delays.append(began - go)
    # root -1: every rank is one, so the report never mixes this with a single-root row
    return _entry(
        test, size, -1, chosen=chosen, times=times, stamps=stamps, wrong=wrong, start_delays=delays
    )


async def overlap(
    comm: Comm, test: CollectiveTest, index: int, seed: int, size: int
) -> dict[str, Any]:
    """start, computation, wait: first without computation (the reference time T0, the
    entry's ``times``), then with each ``test.compute`` fraction of this rank's own T0."""
    persistent: Persistent[Any] | None = None
    init_s = 0.0
    if test.persistent:
        persistent = await comm.init(
            test.collective, root=test.root, size=size, algorithm=test.algorithm, op=test.op
        )
        init_s = persistent.init_seconds
    counter = wrong = 0
    delays: list[float] = []
    start_cpu: list[float] = []
    stamps: list[tuple[float, float]] = []

    async def phase(compute_s: float, count: int, timed_from: int) -> list[float]:
        nonlocal counter, wrong
        times = []
        for n in range(count):
            go = await start_together(comm, test)
            instance = _instance(comm, test, index, seed, size, counter, test.root)
            counter += 1
            data = instance.contribution()
            began, started = time.monotonic(), time.perf_counter()
            cpu = time.thread_time()
            if persistent is not None:
                request = persistent.start(data)
            else:
                call = Call(data, test.root, size, test.op)
                request = comm.start(test.collective, call, algorithm=test.algorithm)
            cpu = time.thread_time() - cpu
            if compute_s > 0:
                time.sleep(compute_s)  # blocks the loop, as computation would
            result = await request.wait()
            elapsed = time.perf_counter() - started
            expected = instance.expected()
            wrong += expected is not None and result != expected
            if n >= timed_from:
                times.append(elapsed)
                if compute_s == 0:
                    start_cpu.append(cpu)
                    stamps.append((began, time.monotonic()))
                    if go is not None:
                        delays.append(began - go)
        return times

    reference = await phase(0.0, test.warmup + test.iterations, test.warmup)
    t0 = statistics.median(reference)
    sweep = []
    for fraction in test.compute:
        if fraction <= 0:
            continue
        times = await phase(fraction * t0, test.iterations, 0)
        sweep.append({"fraction": fraction, "compute_s": fraction * t0, "times": times})
    chosen = persistent.algorithm if persistent else comm.last_choice
    return _entry(
        test,
        size,
        test.root,
        chosen=chosen,
        init_seconds=init_s,
        times=reference,
        stamps=stamps,
        start_cpu=start_cpu,
        overlap=sweep,
        wrong=wrong,
        start_delays=delays,
    )
