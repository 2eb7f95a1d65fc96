"""``make reliability``: the fault matrix on a dragonfly, and its report.

For every fault setting (loss, duplication and reordering on every link at several rates, and
heavy loss on one global link) and every collective (its in-network algorithm and one host
algorithm), run N consecutive operations on every host, check every byte at every rank, and
write a table of operations, retransmissions, NACKs, wrong results, failures and time to
``docs/reliability.md``. Faults come from the seeded link emulator (mininet_topos/linkemu.py).

    python -m mininet_topos.reliability --topo df:2,4,2 --ops 1000 --budget 7200
"""

from __future__ import annotations

import argparse
import logging
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from host_agents.workload import CollectiveTest, Workload
from mininet_topos.linkemu import Impairment
from mininet_topos.network import BringUpError, NetcollNetwork, NetworkOptions


@dataclass(frozen=True)
class FaultSetting:
    label: str
    impairment: Impairment
    one_global_link: bool = False


SETTINGS = (
    FaultSetting("1% loss, every link", Impairment(loss=0.01, duplicate=0.01, reorder=0.02)),
    FaultSetting("2% loss, every link", Impairment(loss=0.02, duplicate=0.01, reorder=0.02)),
    FaultSetting("5% loss, every link", Impairment(loss=0.05, duplicate=0.01, reorder=0.02)),
    FaultSetting(
        "10% loss, one global link",
        Impairment(loss=0.10, duplicate=0.01, reorder=0.02),
        one_global_link=True,
    ),
)

FULL_OPS = 1000  # operations per cell of the full matrix
NOT_RUN = "not run"  # how a cell the budget left out is noted

# (collective, algorithm, bytes): the in-network algorithm where one exists, and a host one
CELLS = (
    ("bcast", "innet", 16384),
    ("bcast", "binomial", 16384),
    ("barrier", "innet", 0),
    ("barrier", "dissemination", 0),
    ("allgather", "innet", 1024),
    ("allgather", "recursive_doubling", 1024),
    ("scatter", "lin", 1024),
)


@dataclass
class Outcome:
    setting: str
    collective: str
    algorithm: str
    operations: int
    retransmissions: int
    nacks: int
    wrong: int
    failures: int
    seconds: float
    lost_frames: int
    note: str = ""

    @property
    def ran(self) -> bool:
        return not self.note.startswith(NOT_RUN)


def members_of(net: NetcollNetwork, which: str) -> tuple[int, ...]:
    """``all`` hosts, or ``per-router``: the first host of every router, so every switch and
    every link still carries the collectives with half the agents on the CPUs."""
    if which == "all":
        return tuple(h.node_id for h in net.topo.hosts)
    if which == "per-router":
        return tuple(net.topo.hosts_of_switch(s.index)[0].node_id for s in net.topo.switches)
    raise ValueError(f"--members {which!r}: expected all or per-router")


def run_matrix(
    net: NetcollNetwork, ops: int, budget: float, seed: int, which: str
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    members = members_of(net, which)
    comm_id, _ = net.create_comm(members)
    global_link = next(spec.name for spec in net.emulated if spec.kind == "global")
    started = time.monotonic()
    total = len(SETTINGS) * len(CELLS)
    for s_index, setting in enumerate(SETTINGS):
        net.set_faults(Impairment())
        net.set_faults(setting.impairment, [global_link] if setting.one_global_link else None)
        for c_index, (collective, algorithm, size) in enumerate(CELLS):
            done = s_index * len(CELLS) + c_index
            elapsed = time.monotonic() - started
            if done and elapsed / done * (done + 1) > budget:
                print(
                    f"[{done}/{total}] budget of {budget:.0f} s reached: "
                    f"{setting.label} {collective} {algorithm} not run"
                )
                outcomes.append(
                    Outcome(
                        setting.label,
                        collective,
                        algorithm,
                        0,
                        0,
                        0,
                        0,
                        0,
                        0.0,
                        0,
                        f"{NOT_RUN}: budget",
                    )
                )
                continue
            before = net.fault_stats()["totals"]["lost"]
            test = CollectiveTest(
                collective, algorithm, (size,), iterations=ops, warmup=0, root=1, sync=False
            )
            cell_started = time.monotonic()
            result = net.launcher().launch(
                Workload(comm_id, members, [test], seed=seed), timeout=budget
            )
            seconds = time.monotonic() - cell_started
            row = result.rows[0] if result.rows else None
            outcome = Outcome(
                setting.label,
                collective,
                algorithm,
                operations=row.iterations if row else 0,
                retransmissions=result.stats_total("retransmissions")
                + result.stats_total("mcast_retransmissions")
                + result.stats_total("arrive_retransmissions"),
                nacks=result.stats_total("nacks_sent"),
                wrong=result.wrong,
                failures=len(result.errors),
                seconds=seconds,
                lost_frames=net.fault_stats()["totals"]["lost"] - before,
                note=result.errors[0][:120] if result.errors else "",
            )
            outcomes.append(outcome)
            print(
                f"[{done + 1}/{total}] {setting.label:27s} {collective:9s} {algorithm:18s} "
                f"{outcome.operations} ops, {outcome.retransmissions} retransmissions, "
                f"{outcome.nacks} NACKs, wrong {outcome.wrong}, failures {outcome.failures}, "
                f"{seconds:.0f} s (elapsed {time.monotonic() - started:.0f} of {budget:.0f} s)",
                flush=True,
            )
    return outcomes


def write_report(
    path: Path,
    outcomes: list[Outcome],
    *,
    topo: str,
    ops: int,
    seed: int,
    seconds: float,
    budget: float,
    members: str = "all",
    command: str = "make reliability",
) -> None:
    who = "every host" if members == "all" else "one host of every router"
    lines = [
        "# Reliability report",
        "",
        "Written by `make reliability` (mininet_topos/reliability.py) on "
        f"{time.strftime('%Y-%m-%d')}: "
        f"{topo}, {who} in one communicator, {ops} consecutive operations per cell "
        f"(no barrier between them), seed {seed}, on {platform.machine()} "
        f"with {_cores()} cores. "
        f"Total {seconds / 60:.1f} min of a {budget / 60:.0f} min budget.",
        "",
        f"Command: `{command}`"
        + (
            ""
            if ops >= FULL_OPS
            else f" (a reduced run: the full matrix is {FULL_OPS} operations per cell)."
        ),
        "",
        "Faults come from the seeded link emulator: every host and switch link runs through it,",
        "and each frame is lost, duplicated or held back (reordered, up to 5 ms) with the",
        "probabilities shown, decided by a random generator seeded per link and direction.",
        "Wrong results count operations where any rank's bytes differed from what it should",
        "have received; failures count ranks that reported an error (every wait is bounded, so",
        "a hang is a failure).",
        "Retransmissions add unicast retransmissions, multicast repairs and ARRIVE resends.",
        "",
        "| faults | collective | algorithm | operations | retransmissions | NACKs "
        "| wrong results | failures | time (s) | frames lost by the links |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for o in outcomes:
        if not o.ran:
            lines.append(f"| {o.setting} | {o.collective} | {o.algorithm} | {o.note} |||||||")
            continue
        lines.append(
            f"| {o.setting} | {o.collective} | {o.algorithm} | {o.operations} "
            f"| {o.retransmissions} | {o.nacks} | {o.wrong} | {o.failures} | {o.seconds:.0f} "
            f"| {o.lost_frames} |"
        )
    ran = [o for o in outcomes if o.ran]
    lines += [
        "",
        f"{len(ran)} of {len(outcomes)} cells ran: {sum(o.operations for o in ran)} operations, "
        f"{sum(o.wrong for o in ran)} wrong results, {sum(o.failures for o in ran)} failures.",
    ]
    notes = [o for o in ran if o.note]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"* {o.setting}, {o.collective} {o.algorithm}: {o.note}" for o in notes]
    lines += [
        "",
        "Bad input is covered by the `reliability` test tier (`make test-reliability`): 10,000",
        "fuzzed and spoofed frames at a switch leave every register, table entry and multicast",
        "group unchanged with every frame counted, and 10,000 fuzzed frames at a busy agent are",
        "all rejected and counted while its collectives complete correctly.",
        "",
    ]
    path.write_text("\n".join(lines))


def _cores() -> int:
    import os

    return os.cpu_count() or 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topo", default="df:2,4,2")
    parser.add_argument("--ops", type=int, default=FULL_OPS, help="consecutive operations per cell")
    parser.add_argument(
        "--budget", type=float, default=7200.0, help="seconds the whole matrix may take"
    )
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--members", default="all", help="all, or per-router (one host per router)")
    parser.add_argument("--report", type=Path, default=Path("docs/reliability.md"))
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--log-dir", type=Path, default=Path("logs/reliability"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    options = NetworkOptions(
        spec=args.topo,
        build_dir=args.build_dir,
        log_dir=args.log_dir,
        emulate_links=True,
        fault_seed=args.seed,
    )
    net = NetcollNetwork(options)
    started = time.monotonic()
    try:
        print(
            f"*** reliability matrix on {args.topo}: "
            f"{len(SETTINGS)} fault settings x {len(CELLS)} cells, "
            f"{args.ops} operations each, budget {args.budget / 60:.0f} min"
        )
        with net:
            print(f"*** {net.report}")
            outcomes = run_matrix(net, args.ops, args.budget, args.seed, args.members)
    except BringUpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    seconds = time.monotonic() - started
    write_report(
        args.report,
        outcomes,
        topo=args.topo,
        ops=args.ops,
        seed=args.seed,
        seconds=seconds,
        budget=args.budget,
        members=args.members,
        command=" ".join(["python -m mininet_topos.reliability", *(argv or sys.argv[1:])]),
    )
    bad = [o for o in outcomes if o.wrong or o.failures or not o.ran]
    print(
        f"*** wrote {args.report}: {len(outcomes)} cells in {seconds / 60:.1f} min, "
        f"{len(bad)} with problems"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
