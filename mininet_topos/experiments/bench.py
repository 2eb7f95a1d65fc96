"""``make bench``: every algorithm side by side on one network, with the bytes it moved.

For each collective, algorithm and size it runs one workload on every host and reads the
switches' per-port counters before and after, so each row of the OSU-style table carries the
bytes the operation put on links, on global links, and its ratio to the physical minimum (each
link carrying each segment once). It also measures the persistent broadcast (install once,
start many times: [Tofu2]) and the two ways of replicating membership written by mini
packets (port-subset groups against one all-ports group filtered in egress). Everything runs
in one invocation so comparisons are ratios from the same machine state.

With ``--loss`` the network comes up through the seeded link emulator
(mininet_topos/links/linkemu.py) and every cell runs once per loss setting, back to back, first
without loss through the same emulator: time under loss is compared side by side with time without
it, and every table, result file and the side-by-side summary name the setting.

    python -m mininet_topos.experiments.bench --topo df:2,4,2 --out results [--quick]
    python -m mininet_topos.experiments.bench --loss 0.01,0.01,0.02 --loss 0.05 --collectives bcast
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import logging
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from controller import p4info, wire
from host_agents.collectives import COLLECTIVES
from host_agents.report import Row, format_table, save
from host_agents.workload import CollectiveTest, Workload
from mininet_topos.experiments.bench_options import ack_merge_modes, engine_setting, parse_loss
from mininet_topos.experiments.bench_report import (
    emulator_load,
    plot,
    side_by_side,
    slug,
    speedup_table,
)
from mininet_topos.experiments.measure import (
    LinkMeter,
    columns_for,
    metered_launch,
    minimum_bytes,
)
from mininet_topos.links.linkfaults import Impairment
from mininet_topos.links.options import add_link_arguments, links_or_exit
from mininet_topos.network import NetcollNetwork, NetworkOptions
from mininet_topos.network.bmv2 import describe, timing_warning

FULL_SIZES = {
    "bcast": (1, 1024, 16384, 262144),
    "scatter": (1, 1024, 16384),
    "allgather": (1, 1024, 16384),
    "barrier": (0,),
    "allreduce": (4, 1024, 65536),
    "reduce": (1024, 65536),
}
QUICK_SIZES = {
    "bcast": (1, 16384),
    "scatter": (1024,),
    "allgather": (1024,),
    "barrier": (0,),
    "allreduce": (4, 1024),
    "reduce": (1024,),
}
DIRECT = "no loss"  # how rows without --loss are labelled (the links are in the meta)


def run_cell(
    net: NetcollNetwork,
    meter: LinkMeter,
    comm_id: int,
    members: tuple[int, ...],
    test: CollectiveTest,
    seed: int,
    options: dict[str, Any] | None = None,
    engine: dict[str, Any] | None = None,
) -> Row | None:
    workload = Workload(
        comm_id, members, [test], seed=seed, options=options or {}, engine=engine or {}
    )
    run = metered_launch(net, meter, workload, columns_for(test.collective))
    result = run.result
    use = run.cpu
    print(
        "    cpu: "
        + ", ".join(f"{kind} {sec:.1f} s" for kind, sec in sorted(use.total_s.items()))
        + f" in {use.wall_s:.1f} s of wall time",
        flush=True,
    )
    if result.errors or not result.rows:
        print(f"  {test.collective} {test.algorithm}: FAILED {result.errors[:2]}")
        return None
    row = result.rows[0]
    operations = test.iterations + test.warmup
    row.link_bytes = run.link_bytes // operations
    row.global_link_bytes = run.global_link_bytes // operations
    row.minimum_bytes = minimum_bytes(
        net.topo, test.collective, members, test.root, test.sizes[0], net.segment_size
    )
    row.acks_at_root = result.stats_total("mcast_acks_at_root") / operations
    verdict = run.verdict()
    row.fidelity = verdict.verdict
    links = verdict.links
    busiest = (
        f", busiest port {links.busiest_port} at {links.busiest_utilisation:.0%} of its rate"
        if links is not None and links.busiest_port
        else ""
    )
    print(
        f"    fidelity: {verdict.short()}; processes {verdict.cpu_share:.0%} of "
        f"{verdict.cores} cores{busiest}",
        flush=True,
    )
    return row


# algorithms whose multicasts the receivers acknowledge: the ACK-merging mode changes them
ACKED_MULTICASTS = {("bcast", "innet"), ("allgather", "innet_packed")}


def variants(
    collective: str, name: str, ack_merges: tuple[str, ...]
) -> list[tuple[str, dict[str, Any]]]:
    """(row label, workload options) for each way to run one algorithm: an acknowledged
    in-network multicast once per ACK-merging mode asked for, back to back; everything else
    once."""
    if (collective, name) in ACKED_MULTICASTS and len(ack_merges) > 1:
        return [(f"{name}[{mode} ACKs]", {"ack_merge": mode}) for mode in ack_merges]
    return [(name, {"ack_merge": ack_merges[0]})]


def compare_algorithms(
    net: NetcollNetwork,
    sizes: dict[str, tuple[int, ...]],
    iterations: int,
    seed: int,
    losses: list[Impairment] | None = None,
    collectives: set[str] | None = None,
    algorithm_names: set[str] | None = None,
    ack_merges: tuple[str, ...] = ("coroots",),
    engine: dict[str, Any] | None = None,
) -> dict[str, list[Row]]:
    """Rows per setting (its description; ``DIRECT`` without ``losses``). With ``losses``
    each cell runs once per setting, one right after the other, so the settings meet the same
    machine state."""
    members = tuple(h.node_id for h in net.topo.hosts)
    comm_id, install = net.create_comm(members)
    print(f"*** communicator of {len(members)} hosts installed in {install * 1e3:.0f} ms")
    meter = LinkMeter(net)
    settings: list[Impairment | None] = list(losses) if losses else [None]
    rows: dict[str, list[Row]] = {label_of(s): [] for s in settings}
    for collective, table in ((c.name, c.algorithms) for c in COLLECTIVES.values()):
        if collectives and collective not in collectives:
            continue
        for name in table:
            if algorithm_names and name not in algorithm_names:
                continue
            for size, setting, (label, options) in itertools.product(
                sizes[collective], settings, variants(collective, name, ack_merges)
            ):
                if setting is not None:
                    net.set_faults(setting)
                # barriers back to back: a synchronising barrier before each would count too
                test = CollectiveTest(
                    collective,
                    name,
                    (size,),
                    iterations=iterations,
                    warmup=1,
                    root=1,
                    sync=collective != "barrier",
                )
                started = time.perf_counter()
                before = net.fault_stats() if setting is not None else None
                row = run_cell(net, meter, comm_id, members, test, seed, options, engine)
                if before is not None:
                    print(f"    {emulator_load(before, net.fault_stats())}")
                if row is None:
                    continue
                if label != name:  # one algorithm run several ways: a row each
                    row.algorithm = row.chosen = label
                rows[label_of(setting)].append(row)
                ratio = (
                    f"{row.link_bytes / row.minimum_bytes:.2f}x minimum"
                    if row.minimum_bytes and row.link_bytes is not None
                    else ""
                )
                under = f" [{label_of(setting)}]" if setting is not None else ""
                acks = (
                    f", {row.acks_at_root:.1f} ACK frames at the root" if row.acks_at_root else ""
                )
                print(
                    f"  {collective:9s} {label:18s} {size:>7} B: {row.avg_us:10.0f} us, "
                    f"{row.link_bytes:>9} link bytes {ratio} "
                    f"({time.perf_counter() - started:.0f} s){acks}{under}",
                    flush=True,
                )
    if losses:
        net.set_faults(losses[0])
    net.free_comm(comm_id)
    return rows


def label_of(setting: Impairment | None) -> str:
    return DIRECT if setting is None else setting.describe()


def loss_settings(given: list[Impairment] | None) -> list[Impairment] | None:
    """The settings a bench compares: none without --loss (direct links); otherwise no loss
    through the emulator first, as the reference, then each setting given, once."""
    if not given:
        return None
    settings = [Impairment()]
    for setting in given:
        if setting not in settings:
            settings.append(setting)
    return settings


def network_options(args: argparse.Namespace, losses: list[Impairment] | None) -> NetworkOptions:
    links, dilation = links_or_exit(args)
    return NetworkOptions(
        links=links,
        dilation=dilation,
        spec=args.topo,
        build_dir=args.build_dir,
        log_dir=Path("logs/bench"),
        emulate_links=losses is not None,
        faults=losses[0] if losses else None,
        fault_seed=args.seed,
        mtu=args.mtu,
    )


def persistent_vs_plain(
    net: NetcollNetwork, size: int, iterations: int, seed: int
) -> dict[str, Any]:
    """[Tofu2]: install a root's trees once (bcast_init), then start many times."""
    members = tuple(h.node_id for h in net.topo.hosts)
    tests = [
        CollectiveTest(
            "bcast", "innet", (size,), iterations=iterations, warmup=1, root=3, persistent=True
        ),
        CollectiveTest("bcast", "innet", (size,), iterations=iterations, warmup=1, root=3),
    ]
    # no trees until a persistent init
    with net.communicator(members, roots=[]) as (comm_id, install):
        result = net.launcher().launch(Workload(comm_id, members, tests, seed=seed), timeout=1800)
    rows = {("persistent" if r.persistent else "plain"): r for r in result.rows}
    out = {
        "communicator_install_us": install * 1e6,
        "bcast_init_us": rows["persistent"].init_us if "persistent" in rows else None,
        "persistent_avg_us": rows["persistent"].avg_us if "persistent" in rows else None,
        "plain_avg_us": rows["plain"].avg_us if "plain" in rows else None,
        "errors": result.errors[:3],
    }
    print(
        f"  persistent bcast of {size} B: init {out['bcast_init_us']:.0f} us once, "
        f"then {out['persistent_avg_us']:.0f} us per start+wait; "
        f"plain bcast {out['plain_avg_us']:.0f} us"
    )
    return out


def replication_modes(
    options: NetworkOptions, size: int, iterations: int, seed: int
) -> dict[str, Any]:
    """Membership written by mini packets, replicated by subset groups or one filtered group."""
    out: dict[str, Any] = {}
    for mode in ("subset", "all_ports"):
        net = NetcollNetwork(dataclasses.replace(options, replication=mode, membership="mp"))
        with net:
            members = tuple(h.node_id for h in net.topo.hosts)
            comm_id, install = net.create_comm(members)
            assert net.control is not None
            filtered_before = sum(_filtered(net, i) for i in net.control.switches)
            test = CollectiveTest(
                "bcast", "innet", (size,), iterations=iterations, warmup=1, root=1
            )
            result = net.launcher().launch(
                Workload(comm_id, members, [test], seed=seed), timeout=1800
            )
            filtered = sum(_filtered(net, i) for i in net.control.switches) - filtered_before
            row = result.rows[0] if result.rows else None
            out[mode] = {
                "install_us": install * 1e6,
                "bcast_avg_us": row.avg_us if row else None,
                "copies_filtered_in_egress": filtered,
                "errors": result.errors[:3],
            }
            print(
                f"  replication {mode:9s}: bcast {size} B {out[mode]['bcast_avg_us']:.0f} us, "
                f"install {install * 1e3:.0f} ms, {filtered} copies made and dropped in egress"
            )
    return out


def _filtered(net: NetcollNetwork, index: int) -> int:
    assert net.control is not None
    counter = net.call(net.control.switches[index].read_counter(p4info.EGRESS_DROP_COUNTER))
    return counter.get(int(wire.DropReason.FILTERED), (0, 0))[0]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    losses = loss_settings(args.loss)
    options = network_options(args, losses)
    switches = describe(options.bmv2)
    print(f"*** BMv2: {switches['binary']} ({switches['flavour']} build)")
    if (warning := timing_warning(switches)) is not None:
        print(f"*** {warning}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    engine = dict(args.engine or [])
    net = NetcollNetwork(options)
    with net:
        print(f"*** {net.report}")
        dilated = f", dilation {options.dilation:g}x" if options.dilation else ""
        print(f"*** {net.link_plan.describe()}{dilated}")
        if losses:
            print("*** loss settings, each cell in turn: " + "; ".join(map(label_of, losses)))
        rows = compare_algorithms(
            net,
            sizes,
            args.iterations,
            args.seed,
            losses,
            set(args.collectives.split(",")) if args.collectives else None,
            set(args.algorithms.split(",")) if args.algorithms else None,
            tuple(args.ack_merge.split(",")),
            engine,
        )
        persistent: dict[str, Any] = {}
        if not args.no_extras:
            print(f"*** persistent broadcast (install once, start {args.iterations} times)")
            persistent = persistent_vs_plain(net, 16384, args.iterations * 4, args.seed)
    replication: dict[str, Any] = {}
    if not args.no_extras:
        print("*** replication of mini-packet membership")
        replication = replication_modes(options, 16384, args.iterations, args.seed)
    meta = {
        "topology": args.topo,
        "bmv2": switches,
        "iterations": args.iterations,
        "seed": args.seed,
        "links": "link emulator" if losses else "direct",
        "link_model": {**options.links.as_dict(), "describe": options.links.describe()},
        "dilation": options.dilation,
        "mtu": args.mtu,
        "persistent": persistent,
        "replication": replication,
        "engine": engine,
    }
    written: list[Path] = []
    for label, chosen in rows.items():
        print()
        print(f"# links: {label}")
        print(format_table(chosen))
        if speedups := speedup_table(chosen):
            print(speedups)
        setting = next((s for s in losses or [] if label_of(s) == label), None)
        suffix = f"-{slug(label)}" if setting is not None else ""
        extra = {"loss": asdict(setting) if setting else None, "loss_label": label}
        written += save(chosen, args.out, f"bench-{stamp}{suffix}", {**meta, **extra})
        written += plot(chosen, args.out, suffix)
    if losses:
        table = side_by_side(rows)
        print(table)
        summary = args.out / f"bench-{stamp}-loss.md"
        summary.write_text(
            f"Times on {args.topo}, {args.iterations} timed iterations, seed {args.seed}, "
            "every link through the link emulator; in brackets: the slowdown against no "
            "loss.\n\nCommand: `python -m mininet_topos.experiments.bench "
            f"{' '.join(argv or sys.argv[1:])}`"
            f"\n\n{table}\n"
        )
        written.append(summary)
    print("*** wrote " + ", ".join(str(p) for p in written))
    (args.out / f"bench-{stamp}-summary.json").write_text(json.dumps(meta, indent=1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topo", default="df:2,4,2")
    add_link_arguments(parser)
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument(
        "--quick", action="store_true", help="fewer sizes (a few minutes on df:2,2,1)"
    )
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument(
        "--mtu",
        type=int,
        default=wire.JUMBO_MTU,
        help=f"MTU of every link (default {wire.JUMBO_MTU}; {wire.MTU} for standard Ethernet)",
    )
    parser.add_argument(
        "--loss",
        type=parse_loss,
        action="append",
        metavar="LOSS[,DUP[,REORDER]]",
        help="run every cell under this loss too (fractions or percentages, e.g. 0.01,0.01,0.02"
        " or 1%%); repeatable. Brings the network up through the link emulator and runs each "
        "cell without loss through it first",
    )
    parser.add_argument("--collectives", help="only these, comma-separated (bcast,barrier,...)")
    parser.add_argument("--algorithms", help="only these algorithms, comma-separated")
    parser.add_argument(
        "--engine",
        type=engine_setting,
        action="append",
        metavar="KEY=VALUE",
        help="a host-engine setting for every cell (host_agents/transport/config.py "
        "EngineConfig), e.g. repair_quiet_min=0.1; repeatable",
    )
    parser.add_argument(
        "--ack-merge",
        default="coroots",
        type=ack_merge_modes,
        help="who merges the ACKs of the in-network broadcast and of the packed allgather: "
        "coroots (default) or switch; 'coroots,switch' runs each with both, back to back "
        "(rows such as innet[coroots ACKs] and innet[switch ACKs])",
    )
    parser.add_argument(
        "--no-extras",
        action="store_true",
        help="skip the persistent broadcast and the replication modes (two more bring-ups)",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
