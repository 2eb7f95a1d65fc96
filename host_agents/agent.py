"""One host agent: the process the launcher starts on every Mininet host.

It opens a raw socket on the host's interface, joins the communicator the workload names,
waits at a rendezvous until every agent is ready (so all start together), runs the tests,
checks every byte it received, and writes its per-rank results as JSON.

    netcoll-agent --node 3 --topology /tmp/netcoll-run/topology.json --interface nch3-eth0 \
        --service /tmp/netcoll-run/service.sock --workload RUN/workload.json \
        --out RUN/results/3/result.json
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from host_agents import workload_modes
from host_agents.collectives import Call
from host_agents.comm import Comm, CommOptions, Persistent
from host_agents.directory import Directory
from host_agents.engine import Engine, EngineConfig
from host_agents.plans import PlanBook
from host_agents.port import RawSocketPort
from host_agents.service_client import ServiceClient
from host_agents.workload import CollectiveTest, Instance, Workload

LOG = logging.getLogger("netcoll.agent")
# a directory: every agent runs under cProfile and leaves its statistics there
PROFILE_ENV = "NETCOLL_AGENT_PROFILE"


async def run_test(comm: Comm, test: CollectiveTest, index: int, seed: int) -> list[dict[str, Any]]:
    """Every size of one test: warm-up and timed iterations, each checked."""
    out = []
    for size in test.sizes:
        cpu_before, window_start = time.process_time(), time.monotonic()
        if test.mode != "single":
            measure = (
                workload_modes.all_roots if test.mode == "all_roots" else workload_modes.overlap
            )
            entry = await measure(comm, test, index, seed, size)
            cpu = time.process_time() - cpu_before
            window = (window_start, time.monotonic())
            out.append({**entry, "cpu_seconds": cpu, "window": window})
            continue
        times: list[float] = []
        stamps: list[tuple[float, float]] = []  # monotonic start and end: one clock per machine
        start_cpu: list[float] = []  # CPU time of the start call alone ([Tofu2]'s MPI_Start)
        wrong = 0
        delays: list[float] = []  # aligned starts: how long after the agreed time it began
        persistent: Persistent[Any] | None = None
        init_s = 0.0
        if test.persistent:
            persistent = await _init_persistent(comm, test, size)
            init_s = persistent.init_seconds
        chosen = ""
        for iteration in range(test.warmup + test.iterations):
            go = await workload_modes.start_together(comm, test)
            instance = Instance(
                test.collective,
                seed,
                index,
                size,
                iteration,
                test.root,
                comm.size,
                comm.rank,
                test.op,
            )
            data = instance.contribution()
            began, started = time.monotonic(), time.perf_counter()
            result, cpu = await _one(comm, test, size, data, persistent)
            elapsed = time.perf_counter() - started
            chosen = persistent.algorithm if persistent else comm.last_choice
            expected = instance.expected()
            if expected is not None and result != expected:
                wrong += 1
                LOG.error(
                    "rank %d: %s %s size %d iteration %d: wrong data",
                    comm.rank,
                    test.collective,
                    chosen,
                    size,
                    iteration,
                )
            if iteration >= test.warmup:
                times.append(elapsed)
                stamps.append((began, time.monotonic()))
                start_cpu.append(cpu)
                if go is not None:
                    delays.append(began - go)
        out.append(
            {
                "collective": test.collective,
                "algorithm": test.algorithm,
                "chosen": chosen,
                "size": size,
                "root": test.root,
                "persistent": test.persistent,
                "init_seconds": init_s,
                "times": times,
                "wrong": wrong,
                "start_delays": delays,
                "mode": test.mode,
                "stamps": stamps,
                "start_cpu": start_cpu,
                "cpu_seconds": time.process_time() - cpu_before,
                # when this size ran (monotonic, one clock per machine): CPU of the switches
                # is read for this window
                "window": (window_start, time.monotonic()),
            }
        )
    return out


async def _init_persistent(comm: Comm, test: CollectiveTest, size: int) -> Persistent[Any]:
    return await comm.init(
        test.collective, root=test.root, size=size, algorithm=test.algorithm, op=test.op
    )


async def _one(
    comm: Comm,
    test: CollectiveTest,
    size: int,
    data: bytes | None,
    persistent: Persistent[Any] | None,
) -> tuple[Any, float]:
    """The operation's result, and the CPU time its start call took."""
    cpu = time.thread_time()
    if persistent is not None:
        request = persistent.start(data)
    else:
        call = Call(data, test.root, size, test.op)
        request = comm.start(test.collective, call, algorithm=test.algorithm)
    cpu = time.thread_time() - cpu
    return await request.wait(), cpu


async def run_agent(args: argparse.Namespace) -> dict[str, Any]:
    workload = Workload.load(args.workload)
    directory = Directory.load(args.topology)
    config = EngineConfig(**workload.engine)
    engine = Engine(
        args.node,
        RawSocketPort(args.interface),
        directory,
        config,
        plan=PlanBook(directory),
        seed=workload.seed + args.node,
    )
    service = ServiceClient(args.service)
    comm = Comm(
        engine,
        workload.comm_id,
        workload.members,
        innet=workload.innet,
        service=service,
        options=CommOptions(**workload.options),
    )
    report: dict[str, Any] = {"node": args.node, "rank": comm.rank, "tests": [], "error": None}
    try:
        released = await service.rendezvous(
            workload.rendezvous,
            args.node,
            tuple(workload.members),
            timeout=args.start_timeout,
            comm_id=workload.comm_id if workload.innet else None,
        )
        if released is not None:
            comm.resume_barrier_epochs(released)
        target = comm
        if workload.split is not None:
            place = directory.group_of if workload.split == "group" else directory.switch_of
            part = await comm.split(place(args.node), key=comm.rank)
            assert part is not None, "every rank has a color"
            target = part
            report["split"] = {"comm_id": part.comm_id, "rank": part.rank, "size": part.size}
        for index, test in enumerate(workload.tests):
            if target is not comm:
                test = dataclasses.replace(test, root=test.root % target.size)
            report["tests"] += await run_test(target, test, index, workload.seed)
        if target is not comm:
            await target.free()
        # like MPI_Finalize: a rank keeps serving (co-root ACK merging, repairs) until every
        # rank is done, so nobody's last collective waits on an agent that already left
        if comm.innet:
            # first what the last collectives left running (a multicast root's ACKs, a
            # published block's confirmation), while every rank still serves its repairs
            await comm.settle()
            report["test_stats"] = engine.stats.as_dict()  # the barrier's are not the tests'
            await comm.barrier(algorithm="innet")
        else:
            report["test_stats"] = engine.stats.as_dict()
            # a host barrier's last message may lose its ACK after the receiver passed the
            # barrier: stay until the sender's retransmissions (if any) stop
            await comm.barrier(algorithm="dissemination")
            await engine.linger(quiet=config.rto_max * 1.25, limit=config.peer_timeout)
    except Exception as exc:
        report["error"] = str(exc)
        LOG.error("%s", exc)
        LOG.debug("%s", traceback.format_exc())
    finally:
        engine.stats.receive_drops = engine.port.receive_drops()
        report["stats"] = engine.stats.as_dict()
        report["cpu_seconds"] = time.process_time()  # the whole process, start-up included
        await service.close()
    return report


def _run_profiled(args: argparse.Namespace) -> dict[str, Any]:
    """The agent under cProfile, its statistics written to ``$NETCOLL_AGENT_PROFILE/node-N.prof``
    (``python -m pstats``): where an agent's CPU goes in a real run, wake-ups included."""
    out = Path(os.environ[PROFILE_ENV])
    out.mkdir(parents=True, exist_ok=True)
    profiler = cProfile.Profile()
    try:
        return profiler.runcall(asyncio.run, run_agent(args))
    finally:
        profiler.dump_stats(out / f"node-{args.node}.prof")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="netcoll host agent (one per Mininet host)")
    parser.add_argument("--node", type=int, required=True, help="this host's node id")
    parser.add_argument(
        "--topology", type=Path, required=True, help="topology file the launcher wrote"
    )
    parser.add_argument("--interface", required=True, help="the host's network interface")
    parser.add_argument("--service", type=Path, required=True, help="communicator service socket")
    parser.add_argument("--workload", type=Path, required=True)
    parser.add_argument(
        "--out", type=Path, required=True, help="where to write this rank's results"
    )
    parser.add_argument(
        "--start-timeout", type=float, default=120.0, help="seconds to wait for the other agents"
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format=f"%(asctime)s node {args.node} %(levelname)s %(message)s"
    )
    report = _run_profiled(args) if os.environ.get(PROFILE_ENV) else asyncio.run(run_agent(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report))
    return 1 if report["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
