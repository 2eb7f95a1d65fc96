"""``make reliability``: the fault matrix on a dragonfly, accumulated over runs, and its report.

For every fault setting (loss, duplication and reordering on every link at several rates,
bursty loss, heavy loss on one global link, a global link that goes down and comes back) and
every collective (its in-network algorithm and one host algorithm), run consecutive operations
on every host and check every byte at every rank. Each run adds parts to the cells still short
of ``--ops`` (``--resume`` continues the results file, cell by cell), saves the results file
(``docs/reliability.json``) after every part and writes the report (``docs/reliability.md``)
from it. Faults come from the seeded link emulator (mininet_topos/links/linkemu.py).

    python -m mininet_topos.experiments.reliability --topo df:2,4,2 --ops 1000 --budget 7200 \\
        --resume
    python -m mininet_topos.experiments.reliability --report-only  # the report from the file
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from host_agents.workload import CollectiveTest, Workload
from mininet_topos.experiments.provenance import commit, now, protocol
from mininet_topos.experiments.reliability.matrix import CELLS as CELLS
from mininet_topos.experiments.reliability.matrix import FULL_OPS as FULL_OPS
from mininet_topos.experiments.reliability.matrix import SETTINGS as SETTINGS
from mininet_topos.experiments.reliability.matrix import FaultSetting as FaultSetting
from mininet_topos.experiments.reliability.matrix import chosen_keys as chosen_keys
from mininet_topos.experiments.reliability.matrix import matrix_keys as matrix_keys
from mininet_topos.experiments.reliability.matrix import settings_record as settings_record
from mininet_topos.experiments.reliability.report import render
from mininet_topos.experiments.reliability.results import (
    CellKey,
    IncompatibleResults,
    Part,
    Results,
    Run,
)
from mininet_topos.links.linkfaults import Impairment
from mininet_topos.links.options import add_link_arguments, links_or_exit

if TYPE_CHECKING:
    from mininet_topos.network import NetcollNetwork


def members_of(net: NetcollNetwork, which: str) -> tuple[int, ...]:
    """``all`` hosts, or ``per-router``: the first host of every router, so every switch and
    every link still carries the collectives with half the agents on the CPUs."""
    if which == "all":
        return tuple(h.node_id for h in net.topo.hosts)
    if which == "per-router":
        return tuple(net.topo.hosts_of_switch(s.index)[0].node_id for s in net.topo.switches)
    raise ValueError(f"--members {which!r}: expected all or per-router")


def run_part(
    net: NetcollNetwork,
    comm_id: int,
    members: tuple[int, ...],
    key: CellKey,
    operations: int,
    seed: int,
    run: int,
    timeout: float,
) -> Part:
    """One batch of ``operations`` consecutive operations of a cell, its fault setting
    applied afresh (a flap's schedule starts with the part)."""
    label, collective, algorithm, size = key
    setting = next(s for s in SETTINGS if s.label == label)
    global_link = next(spec.name for spec in net.emulated if spec.kind == "global")
    net.set_faults(Impairment())
    net.set_faults(setting.impairment, [global_link] if setting.one_global_link else None)
    before = net.fault_stats()
    test = CollectiveTest(
        collective, algorithm, (size,), iterations=operations, warmup=0, root=1, sync=False
    )
    started, started_at = time.monotonic(), now()
    result = net.launcher().launch(Workload(comm_id, members, [test], seed=seed), timeout=timeout)
    seconds = time.monotonic() - started
    after = net.fault_stats()
    net.set_faults(Impairment())  # nothing stays down between parts
    row = result.rows[0] if result.rows else None
    return Part(
        run=run,
        started=started_at,
        seed=seed,
        operations=row.iterations if row else 0,
        retransmissions=sum(result.stats_total(k, tests_only=True) for k in RESENT_COUNTERS),
        nacks=result.stats_total("nacks_sent", tests_only=True),
        wrong=result.wrong,
        failures=len(result.errors),
        seconds=seconds,
        lost_frames=after["totals"]["lost"] - before["totals"]["lost"],
        emulator_frames=after["totals"]["forwarded"] - before["totals"]["forwarded"],
        emulator_cpu_s=after.get("cpu_seconds", 0.0) - before.get("cpu_seconds", 0.0),
        queue_drops=after["totals"].get("queue_drops", 0) - before["totals"].get("queue_drops", 0),
        note=result.errors[0][:NOTE_CHARS] if result.errors else "",
    )


# of a failed part's first error, kept in the results: enough for the rank, the step and what
# the step says went missing (120 cut an allgather's list of missing blocks off)
NOTE_CHARS = 400

# what a part's retransmissions add up, as the agents counted them until their tests ended:
# the finalizing barrier's ARRIVE resends, while the first ranks done wait for the last, are
# not the collective's (430 of a 16 KiB broadcast cell's 3,241 at 1% loss)
RESENT_COUNTERS = (
    "retransmissions",
    "mcast_retransmissions",
    "arrive_retransmissions",
    "reduce_retransmissions",
)


@dataclass
class Budget:
    seconds: float
    started: float

    def remaining(self) -> float:
        return self.seconds - (time.monotonic() - self.started)


def run_matrix(
    net: NetcollNetwork,
    results: Results,
    save: Any,
    *,
    target: int,
    chunk: int,
    budget: Budget,
    seed: int,
    run: int,
    which: str,
    keys: list[CellKey],
) -> None:
    """Parts for every cell short of ``target``, in matrix order, pass after pass (when
    ``chunk`` splits them) until the matrix is full or the budget is spent; a part whose
    earlier parts say it would not fit in what is left is not started (a cell without
    earlier parts may overrun the budget by one part)."""
    members = members_of(net, which)
    comm_id, _ = net.create_comm(members)
    while plan := results.plan(keys, target, chunk):
        ran = 0
        for index, (key, operations) in enumerate(plan):
            label, collective, algorithm, _ = key
            name = f"{label} {collective} {algorithm}"
            if budget.remaining() <= 0:
                print(f"*** the budget is spent: {len(plan) - index} parts of this pass not run")
                return
            estimate = results.estimate_seconds(key, operations)
            if estimate is not None and estimate > budget.remaining():
                print(
                    f"[{index + 1}/{len(plan)}] {name}: not started, its earlier parts say it "
                    f"would take {estimate:.0f} s"
                )
                continue
            cell = results.cell(key)
            part = run_part(
                net,
                comm_id,
                members,
                key,
                operations,
                seed + len(cell.parts),  # every part of a cell gets its own data and roots
                run,
                timeout=max(60.0, budget.remaining()),
            )
            if budget.remaining() <= 0 and part.operations < operations and part.failures:
                # stopped by the budget, not by the protocol (agents bound every wait of their
                # own well inside a part): its ranks' "no result" are not failures of the
                # cell, which stays short and gets the part again on --resume
                print(
                    f"[{index + 1}/{len(plan)}] {name}: cut by the budget after "
                    f"{part.seconds:.0f} s, not recorded ({part.note})"
                )
                return
            cell.parts.append(part)
            save()
            ran += 1
            print(
                f"[{index + 1}/{len(plan)}] {name:48s} {part.operations} ops "
                f"(cell {cell.operations}/{target}), {part.retransmissions} retransmissions, "
                f"{part.nacks} NACKs, wrong {part.wrong}, failures {part.failures}, "
                f"{part.seconds:.0f} s, emulator {part.emulator_frames / part.seconds:.0f} "
                f"frames/s ({budget.remaining():.0f} s of budget left)",
                flush=True,
            )
        if not ran:
            break


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topo", default="df:2,4,2")
    parser.add_argument("--ops", type=int, default=FULL_OPS, help="operations a full cell holds")
    parser.add_argument(
        "--chunk",
        type=int,
        default=0,
        help="at most this many operations per part (0: all a cell lacks), so a short budget "
        "spreads over the cells",
    )
    parser.add_argument("--budget", type=float, default=7200.0, help="seconds this run may take")
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument(
        "--collectives",
        default="",
        help="only add parts to the cells of these collectives (comma-separated, e.g. "
        "allreduce); the report still shows every cell",
    )
    parser.add_argument(
        "--faults",
        default="",
        help="only add parts to the cells of these fault settings (comma-separated: "
        + ", ".join(s.name for s in SETTINGS)
        + "); the report still shows every cell",
    )
    parser.add_argument(
        "--algorithms",
        default="",
        help="only add parts to the cells of these algorithms (comma-separated, e.g. innet)",
    )
    parser.add_argument("--members", default="all", help="all, or per-router (one host per router)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the results file: add parts to the cells short of --ops",
    )
    parser.add_argument("--results", type=Path, default=Path("docs/reliability.json"))
    parser.add_argument("--report", type=Path, default=Path("docs/reliability.md"))
    parser.add_argument(
        "--report-only", action="store_true", help="write the report from the results file"
    )
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--log-dir", type=Path, default=Path("logs/reliability"))
    add_link_arguments(parser)
    args = parser.parse_args(argv)
    args.links, args.dilation = links_or_exit(args)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        results = open_results(args)
    except (IncompatibleResults, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    def save() -> None:
        results.save(args.results)
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(render(results, matrix_keys(), args.ops))

    if args.report_only:
        save()
        print(f"*** wrote {args.report} from {args.results}")
        return 0
    return run(args, results, save, argv)


def open_results(args: argparse.Namespace) -> Results:
    """The results file to add to: the existing one with --resume (or --report-only), checked
    to be the same matrix; otherwise a new one (an existing file is kept as .previous)."""
    if (args.resume or args.report_only) and args.results.exists():
        results = Results.load(args.results)
        results.check_compatible(args.topo, args.members, settings_record())
        measured_on = {r.links for r in results.runs}
        if args.resume and measured_on and measured_on != {args.links.describe()}:
            raise IncompatibleResults(
                f"{args.results} was measured on {', '.join(sorted(measured_on))}; this run "
                f"has {args.links.describe()}: give another --results file for these links"
            )
        for earlier in results.runs:  # files from before runs recorded it
            if not earlier.protocol and "+" not in earlier.commit:
                earlier.protocol = protocol(earlier.commit)
        return results
    if args.report_only:
        raise ValueError(f"{args.results} does not exist: nothing to report")
    if args.results.exists():
        backup = args.results.with_suffix(".previous.json")
        shutil.copyfile(args.results, backup)
        print(f"*** starting a new results file; the old one is kept as {backup}")
    return Results(args.topo, args.members, settings_record())


def warn_protocol_change(results: Results) -> None:
    """Say so when this run (the last) measures other protocol code than the runs before."""
    *earlier, this = results.runs
    before = {r.protocol for r in earlier}
    if earlier and this.protocol not in before:
        print(
            f"*** note: the protocol code (p4src, controller, host_agents, the link emulator) "
            f"differs from every earlier run's ({', '.join(sorted(before))}; this run "
            f"{this.protocol} at {this.commit}): the cells will hold parts of "
            f"{len(before) + 1} protocol versions, and the report says so"
        )


def run(args: argparse.Namespace, results: Results, save: Any, argv: list[str] | None) -> int:
    # Mininet only when a run needs it: --report-only works on any machine
    from mininet_topos.network import BringUpError, NetcollNetwork, NetworkOptions

    index = len(results.runs)
    fault_seed = args.seed + index  # a new run meets new fault sequences
    results.runs.append(
        Run(
            started=now(),
            command=" ".join(
                ["python -m mininet_topos.experiments.reliability", *(argv or sys.argv[1:])]
            ),
            commit=commit(),
            fault_seed=fault_seed,
            machine=f"{platform.machine()}, {os.cpu_count() or 0} cores",
            budget_s=args.budget,
            protocol=protocol(),
            links=args.links.describe(),
        )
    )
    warn_protocol_change(results)
    try:
        keys = chosen_keys(args.collectives, args.faults, args.algorithms)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        results.runs.pop()
        return 2
    plan = results.plan(keys, args.ops, args.chunk)
    print(
        f"*** reliability matrix on {args.topo}, run {index + 1}: "
        f"{len(SETTINGS)} fault settings x {len(CELLS)} cells, {len(plan)} cells short of "
        f"{args.ops} operations, budget {args.budget / 60:.0f} min"
    )
    if not plan:
        print("*** every cell is full: nothing to run")
        results.runs.pop()
        save()
        return 0
    net = NetcollNetwork(
        NetworkOptions(
            spec=args.topo,
            build_dir=args.build_dir,
            log_dir=args.log_dir,
            emulate_links=True,
            fault_seed=fault_seed,
            links=args.links,
            dilation=args.dilation,
        )
    )
    budget = Budget(args.budget, time.monotonic())
    save()
    try:
        with net:
            print(f"*** {net.report}")
            run_matrix(
                net,
                results,
                save,
                target=args.ops,
                chunk=args.chunk,
                budget=budget,
                seed=args.seed,
                run=index,
                which=args.members,
                keys=keys,
            )
    except BringUpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        results.runs[index].finished = now()
        save()
    cells = results.ordered_cells(matrix_keys())
    bad = [c for c in cells if c.total("wrong") or c.total("failures")]
    short = [c for c in cells if c.operations < args.ops]
    print(
        f"*** wrote {args.results} and {args.report}: run {index + 1} took "
        f"{(args.budget - budget.remaining()) / 60:.1f} min; {len(bad)} cells with wrong "
        f"results or failures, {len(short)} short of {args.ops} operations"
        + (" (make reliability RELIABILITY_ARGS=--resume continues)" if short else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
