"""``make reproduce``: each paper's own experiment on one network, and the report.

One bring-up runs every cell still to measure (mininet_topos/experiments/reproduce/plan.py: every
rank broadcasting at once [Ragasa], latency and throughput [IB-mcast], the persistent broadcast's
init, start and overlap [Tofu2], barrier against communicator size [NIC-barrier], scatter and
allgather with global-link bytes [DF-scatter]); the results file is saved after every cell, so
``--resume`` continues where a run stopped, and the report (docs/results.md, plots under docs/img/)
is written from the file.

    python -m mininet_topos.experiments.reproduce --topo df:2,4,2 --profile quick [--resume]
    python -m mininet_topos.experiments.reproduce --report-only  # the report from the file
    python -m mininet_topos.experiments.reproduce --ns3-only  # ns-3 again beside the file's cells
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller import topology_build, wire
from host_agents.comm import ACK_MERGE_MODES
from mininet_topos.experiments.align import align_lead, diameter, with_lead
from mininet_topos.experiments.provenance import commit, now
from mininet_topos.experiments.reproduce import ns3_side, rate_check
from mininet_topos.experiments.reproduce.cells import BUDGET_S, PROFILES, CellSpec, estimate_seconds
from mininet_topos.experiments.reproduce.plan import CLAIMS, left_out, left_out_cells, plan
from mininet_topos.experiments.reproduce.report import write_report
from mininet_topos.experiments.reproduce.results import (
    CellResult,
    IncompatibleResults,
    Results,
    Run,
    summarise,
)
from mininet_topos.links.dilation import DEFAULT_PROFILE
from mininet_topos.links.options import add_link_arguments, link_options_given, links_or_exit
from mininet_topos.links.shaping import LinkModel
from mininet_topos.tooling.doctor import check_p4c
from mininet_topos.tooling.machine import default_bmv2

if TYPE_CHECKING:
    from mininet_topos.experiments.measure import LinkMeter
    from mininet_topos.network import NetcollNetwork

DEFAULT_SEED = 20261121


def environment(
    topo: str,
    seed: int,
    profile: str,
    links: LinkModel | None = None,
    dilation: float | None = None,
) -> dict[str, Any]:
    """What the report states about where the figures come from."""
    from mininet_topos.network.bmv2 import describe

    links = links or LinkModel()

    p4c = check_p4c()
    return {
        "topology": topo,
        "seed": seed,
        "profile": profile,
        "bmv2": describe(default_bmv2()),
        "p4c": p4c.detail if p4c.found else "not found",
        "cores": os.cpu_count() or 0,
        "mtu": wire.JUMBO_MTU,  # the networks' default (NetworkOptions.mtu), which reproduce keeps
        "machine": platform.machine(),
        "load_average": list(os.getloadavg()),
        "links": {**links.as_dict(), "describe": links.describe()},
        "dilation": dilation,
    }


def members_of(net: NetcollNetwork, count: int) -> tuple[int, ...]:
    """The first ``count`` hosts (every host for 0): hosts are numbered router by router, so
    a smaller communicator occupies whole routers and groups, like a job's allocation."""
    hosts = [h.node_id for h in net.topo.hosts]
    return tuple(hosts[:count] if count else hosts)


def run_cell(
    net: NetcollNetwork,
    meter: LinkMeter,
    spec: CellSpec,
    seed: int,
    run: int,
    ack_merge: str = "coroots",
) -> CellResult:
    from host_agents.workload import Workload
    from mininet_topos.experiments.measure import (
        columns_for,
        metered_launch,
        minimum_bytes,
        minimum_global_bytes,
    )

    members = members_of(net, spec.members)
    started, started_at = time.monotonic(), now()
    roots: dict[str, Any] = {"roots": []} if spec.fresh_trees else {}
    with net.communicator(members, **roots) as (comm_id, _install):
        options = {"ack_merge": ack_merge}
        lead = align_lead(net.options.links, len(members), diameter(net.topo, members))
        tests = with_lead(spec.tests, lead)
        workload = Workload(comm_id, members, tests, seed=seed, options=options)
        metered = metered_launch(net, meter, workload, columns_for(spec.tests[0].collective))
    result = metered.result
    span = result.timed_span()
    # the agents' tests alone (their start-up and rendezvous left out), else the whole launch
    cpu = metered.cpu_between(*span) if span is not None else metered.cpu
    cell = CellResult(
        key=spec.key,
        experiment=spec.experiment,
        run=run,
        started=started_at,
        seconds=time.monotonic() - started,
        members=len(members),
        errors=result.errors[:5],
        measurements=summarise(result.reports, members),
        operations=spec.operations,
        cpu={
            "wall_s": cpu.wall_s,
            "total_s": cpu.total_s,
            "busiest_s": cpu.busiest_s,
            "processes": cpu.processes,
            "load_average": os.getloadavg()[0],  # others' jobs share the cores too
            "launch_wall_s": metered.cpu.wall_s,
            "launch_total_s": metered.cpu.total_s,
        },
        fidelity=metered.verdict().as_dict(),
    )
    if spec.metered:
        test = spec.tests[0]
        cell.link_bytes = metered.link_bytes // spec.operations
        cell.global_link_bytes = metered.global_link_bytes // spec.operations
        # every rank a root: the minimum is one broadcast tree per root, as for allgather
        kind = "allgather" if test.mode == "all_roots" else test.collective
        segment = net.segment_size
        cell.minimum_bytes = minimum_bytes(
            net.topo, kind, members, test.root, test.sizes[0], segment
        )
        cell.minimum_global_bytes = minimum_global_bytes(
            net.topo,
            "all_roots" if test.mode == "all_roots" else test.collective,
            members,
            test.root,
            test.sizes[0],
            segment,
        )
    return cell


def progress(done: int, total: int, elapsed: float, what: str) -> str:
    """``[#####-----] 5/10 cells, 3.2 min, about 3.2 min left: what``"""
    width = 20
    filled = width * done // total if total else width
    left = f", about {elapsed / done * (total - done) / 60:.1f} min left" if done else ""
    bar = "#" * filled + "-" * (width - filled)
    return f"[{bar}] {done}/{total} cells, {elapsed / 60:.1f} min{left}: {what}"


def describe_cell(spec: CellSpec) -> str:
    test = spec.tests[0]
    algorithms = ",".join(dict.fromkeys(t.algorithm for t in spec.tests))
    sizes = ",".join(str(s) for s in test.sizes)
    who = f"{spec.members} ranks" if spec.members else "all ranks"
    return f"{spec.experiment} {test.collective} {test.mode} {algorithms} {sizes} B, {who}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        results = open_results(args)
    except (IncompatibleResults, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    def save() -> None:
        results.save(args.results)
        written = write_report(results, args.report, args.img_dir, args.results)
        print(f"*** wrote {args.results}, {args.report} and {len(written) - 1} plots", flush=True)

    if args.ns3_only:
        return refresh_ns3(args, results, save)
    if args.ns3:
        links, _ = links_or_exit(args, DEFAULT_PROFILE)
        print(f"*** ns-3: the comparisons on {args.topo}, {links.describe()}", flush=True)
        results.ns3 = ns3_side.simulate(args.topo, links.as_dict(), wire.JUMBO_MTU)
        save()
    if args.report_only or args.ns3:
        save()
        return 0
    topo = topology_build.parse_spec(args.topo)
    # a cell the profile leaves out still runs when --only names it
    planned = plan(args.profile, topo.num_hosts) + [
        c for c in left_out_cells(args.profile, topo.num_hosts) if c.key in (args.only or [])
    ]
    if unknown := unknown_names(args.only or [], planned):
        print(
            f"error: --only {','.join(unknown)}: no such experiment or cell in the "
            f"{args.profile} profile (experiments: {', '.join(sorted(CLAIMS))})",
            file=sys.stderr,
        )
        return 2
    cells = [c for c in planned if not args.only or c.experiment in args.only or c.key in args.only]
    pending = to_measure(results, cells, args.again)
    estimate = sum(estimate_seconds(c, topo.num_hosts) for c in pending)
    print(
        f"*** reproduce, {args.profile} profile on {args.topo}: {len(cells)} cells, "
        f"{len(pending)} to measure (about {estimate / 60:.0f} min by the cost model), budget "
        f"{args.budget / 60:.0f} min; results in {args.results}"
    )
    if skipped := left_out(args.profile, topo.num_hosts):
        print(f"*** left out on {args.topo} (longer than the cost model allows): {skipped}")
    if not pending and not (args.rate_check and not results.rate_check.get("ok")):
        save()
        return 0
    return run(args, results, pending, save, argv)


def run(
    args: argparse.Namespace,
    results: Results,
    pending: list[CellSpec],
    save: Any,
    argv: list[str] | None,
) -> int:
    # Mininet only when something runs: --report-only works on any machine
    from mininet_topos.experiments.measure import LinkMeter
    from mininet_topos.network import BringUpError, NetcollNetwork, NetworkOptions
    from mininet_topos.network.bmv2 import timing_warning

    links, dilation = links_or_exit(args, DEFAULT_PROFILE)
    env = environment(args.topo, args.seed, args.profile, links, dilation)
    print(f"*** BMv2: {env['bmv2']['binary']} ({env['bmv2']['flavour']} build); p4c {env['p4c']}")
    if (warning := timing_warning(env["bmv2"])) is not None:
        print(f"*** {warning}")
    index = len(results.runs)
    command = " ".join(["python -m mininet_topos.experiments.reproduce", *(argv or sys.argv[1:])])
    results.runs.append(Run(now(), command, commit(), env))
    started = time.monotonic()
    failed = 0
    options = NetworkOptions(
        spec=args.topo,
        build_dir=args.build_dir,
        log_dir=args.log_dir,
        links=links,
        dilation=dilation,
    )
    try:
        with NetcollNetwork(options) as net:
            print(f"*** {net.report}")
            dilated = f", dilation {dilation:g}x" if dilation else ""
            print(f"*** {net.link_plan.describe()}{dilated}")
            meter = LinkMeter(net)
            hosts = net.topo.num_hosts
            for done, spec in enumerate(pending):
                elapsed = time.monotonic() - started
                if (need := estimate_seconds(spec, hosts)) > args.budget - elapsed:
                    print(
                        f"    not started: {describe_cell(spec)} needs about {need / 60:.1f} "
                        f"min by the cost model, {(args.budget - elapsed) / 60:.1f} min of the "
                        "budget are left (--resume continues)"
                    )
                    continue
                print(progress(done, len(pending), elapsed, describe_cell(spec)), flush=True)
                cell = run_cell(net, meter, spec, args.seed, index, args.ack_merge)
                results.cells[spec.key] = cell
                results.save(args.results)
                failed += not cell.ok
                print(f"    {cell_line(cell)}", flush=True)
            else:
                print(progress(len(pending), len(pending), time.monotonic() - started, "done"))
            if args.rate_check and not results.rate_check.get("ok"):
                print("*** rate check: one bandwidth-bound cell at the rate and at half of it")
                results.rate_check = rate_check.check(
                    net, lambda spec: run_cell(net, meter, spec, args.seed, index, args.ack_merge)
                )
                print(f"    {rate_check.line(results.rate_check)}", flush=True)
    except BringUpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        results.runs[index].finished = now()
        save()
    return 1 if failed else 0


def refresh_ns3(args: argparse.Namespace, results: Results, save: Any) -> int:
    """--ns3-only: the comparisons on ns-3 again, on the links, frames and topology
    the stored BMv2 cells ran on (the file's runs recorded them), and the report."""
    if given := link_options_given(args):
        print(
            f"error: --ns3-only simulates the links the stored BMv2 cells ran on: leave out "
            f"{', '.join(given)}",
            file=sys.stderr,
        )
        return 2
    try:
        stored = ns3_side.stored_run(results)
    except ValueError as exc:
        print(f"error: {args.results}: {exc}", file=sys.stderr)
        return 1
    print(
        f"*** ns-3 beside the stored BMv2 cells on {stored.topo}: {stored.describe()}", flush=True
    )
    results.ns3 = ns3_side.simulate_stored(stored)
    save()
    return 0


def cell_line(cell: CellResult) -> str:
    """One line per measured cell: median completion per test and size, and any error."""
    parts = []
    for m in cell.measurements:
        times = sorted(m.completion_s)
        median = times[len(times) // 2] if times else float("nan")
        parts.append(
            f"{m.algorithm}{' persistent' if m.persistent else ''} {m.size} B {median * 1e3:.1f} ms"
        )
    text = "; ".join(parts) + f" ({cell.seconds:.0f} s)"
    if cell.link_bytes is not None:
        text += f", {cell.link_bytes} link bytes per operation"
    if cell.fidelity:
        bound = cell.fidelity["verdict"]
        reasons = "; ".join(cell.fidelity.get("reasons", []))
        text += f"; {bound}" + (f" ({reasons})" if reasons else "")
    if not cell.ok:
        text += f"; FAILED: {(cell.errors or ['wrong data'])[0][:160]}"
    return text


def open_results(args: argparse.Namespace) -> Results:
    """The existing file with --resume or --report-only (checked to be the same topology and
    profile); otherwise a new one, the old file kept as .previous.json."""
    if (args.resume or args.report_only or args.ns3 or args.ns3_only) and args.results.exists():
        results = Results.load(args.results)
        if not args.report_only:
            results.check_compatible(args.topo, args.profile)
        return results
    if args.report_only or args.ns3_only:
        raise ValueError(f"{args.results} does not exist: nothing to report or compare with")
    if args.results.exists():
        backup = args.results.with_suffix(".previous.json")
        backup.write_bytes(args.results.read_bytes())
        print(f"*** starting a new results file; the old one is kept as {backup}")
    return Results(args.topo, args.profile, args.seed)


def to_measure(results: Results, cells: list[CellSpec], again: bool) -> list[CellSpec]:
    """The cells this run measures, in plan order: those missing from the file or failed
    there, or (``again``: --again) every one of them, the file's other cells kept."""
    todo = {c.key for c in cells} if again else set(results.pending([c.key for c in cells]))
    return [c for c in cells if c.key in todo]


def unknown_names(only: list[str], cells: list[CellSpec]) -> list[str]:
    """The --only names that are neither an experiment nor a cell of the plan (a typo would
    otherwise measure nothing and say so only as "0 cells")."""
    known = {c.experiment for c in cells} | {c.key for c in cells}
    return [name for name in only if name not in known]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topo", default="df:2,4,2")
    parser.add_argument("--profile", choices=PROFILES, default="quick")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds this run may take (default: 20 min quick, 2 h full); cells are not "
        "started once it is spent",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--ack-merge",
        choices=ACK_MERGE_MODES,
        default="coroots",
        help="who merges the in-network broadcasts' ACKs (the run's command in the report "
        "says which)",
    )
    parser.add_argument(
        "--only",
        action="extend",  # repeated, each adds: a second --only must not replace the first
        type=lambda s: s.split(","),
        help="only these experiments (ragasa,nic-barrier) or cells "
        "(nic-barrier:n8,ragasa:innet/16384); repeat to add more",
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue the results file: only missing cells"
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="with --resume and --only: measure those cells again (on this run's links), "
        "keeping the results file's other cells",
    )
    parser.add_argument("--results", type=Path, default=Path("docs/results.json"))
    parser.add_argument("--report", type=Path, default=Path("docs/results.md"))
    parser.add_argument("--img-dir", type=Path, default=Path("docs/img"))
    parser.add_argument(
        "--report-only", action="store_true", help="write the report from the results file"
    )
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--log-dir", type=Path, default=Path("logs/reproduce"))
    add_link_arguments(parser, default_profile=DEFAULT_PROFILE)
    ns3 = parser.add_mutually_exclusive_group()
    ns3.add_argument(
        "--ns3",
        action="store_true",
        help="simulate the comparisons on ns-3 with the links the options give, into "
        "the results file (no BMv2 run)",
    )
    ns3.add_argument(
        "--ns3-only",
        action="store_true",
        help="simulate them on ns-3 again beside the BMv2 cells already in the results file, "
        "on the links, MTU and topology their runs recorded (no BMv2 run, no link options), "
        "and write the report",
    )
    parser.add_argument(
        "--no-rate-check",
        dest="rate_check",
        action="store_false",
        help="leave out the check that half the rate doubles a bandwidth-bound time",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.again and not (args.resume and args.only):
        parser.error("--again measures the --only cells again in a --resume'd file: give both")
    if args.budget is None:
        args.budget = BUDGET_S[args.profile]
    return args


if __name__ == "__main__":
    sys.exit(main())
