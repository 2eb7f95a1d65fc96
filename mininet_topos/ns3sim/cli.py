"""``make simulate``: collectives side by side on an ns-3 dragonfly, like ``make bench`` on BMv2.

    python -m mininet_topos.ns3sim --topo df:6,12,6 \\
        --run scatter:tree,lin,glf,llf:1024 --run allgather:ring,bruck,tar:1024 \\
        --run bcast:innet,binomial:16384 --run barrier:innet,dissemination:0

Each ``--run COLLECTIVE:ALGORITHMS:SIZES`` adds rows (``all`` for every algorithm); without
``--run`` every algorithm runs at make bench's quick sizes. Writes the OSU-style table (with
link bytes, global-link bytes and the ratio to the physical minimum), JSON, CSV and one PNG
per collective under ``--out``. Simulated time is deterministic: one run per cell is the
result, the spread reported is over ranks.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from controller import wire
from controller.topology_build import parse_spec
from host_agents.collectives import algorithm_names
from host_agents.report import Row, format_table, save
from mininet_topos.ns3sim.loader import Ns3Unavailable, unavailable_reason
from mininet_topos.ns3sim.network import LinkParams

QUICK = (
    "bcast:all:1,16384",
    "barrier:all:0",
    "scatter:all:1024",
    "allgather:all:1024",
    "allreduce:all:1024",
    "reduce:all:1024",
)
DEFAULTS = LinkParams()
BASELINES = {
    "bcast": "binomial",
    "barrier": "dissemination",
    "scatter": "tree",
    "allgather": "ring",
}


def parse_run(text: str) -> list[tuple[str, str, int]]:
    """'scatter:tree,lin:1024,16384' -> [(scatter, tree, 1024), ...]."""
    parts = text.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(
            f"--run {text!r}: expected COLLECTIVE:ALGORITHMS:SIZES, e.g. bcast:innet,binomial:16384"
        )
    collective, names, sizes = parts
    table = algorithm_names().get(collective)
    if table is None:
        raise argparse.ArgumentTypeError(
            f"--run {text!r}: unknown collective {collective!r}; "
            f"known: {', '.join(algorithm_names())}"
        )
    chosen = list(table) if names == "all" else names.split(",")
    for name in chosen:
        if name not in table:
            raise argparse.ArgumentTypeError(
                f"--run {text!r}: unknown {collective} algorithm {name!r}; "
                f"known: {', '.join(table)}"
            )
    try:
        size_list = [int(s) for s in sizes.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--run {text!r}: sizes must be integers") from None
    return [(collective, name, size) for name in chosen for size in size_list]


def to_row(outcome: Any, minimum: int | None) -> Row:
    return Row(
        collective=outcome.collective,
        algorithm=outcome.algorithm,
        chosen=outcome.algorithm,
        size=outcome.size,
        persistent=False,
        avg_us=outcome.avg_us,
        min_us=min(outcome.times_us),
        max_us=outcome.max_us,
        iterations=1,
        ranks=outcome.ranks,
        wrong=outcome.wrong,
        link_bytes=outcome.link_bytes,
        global_link_bytes=outcome.global_link_bytes,
        minimum_bytes=minimum,
    )


def plot(rows: list[Row], out: Path, stem: str) -> list[Path]:
    """Per collective: time per algorithm (bars, whiskers from the fastest to the slowest
    rank) and the bytes it put on all links and on global links."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for collective in algorithm_names():
        chosen = [r for r in rows if r.collective == collective]
        if not chosen:
            continue
        fig, (ax_time, ax_bytes) = plt.subplots(1, 2, figsize=(11, 4))
        labels = [f"{r.algorithm}\n{r.size} B" for r in chosen]
        xs = range(len(chosen))
        ax_time.bar(xs, [r.avg_us for r in chosen], color="tab:blue")
        ax_time.errorbar(
            xs,
            [r.avg_us for r in chosen],
            yerr=[
                [r.avg_us - r.min_us for r in chosen],
                [r.max_us - r.avg_us for r in chosen],
            ],
            fmt="none",
            ecolor="black",
            capsize=3,
        )
        ax_time.set_xticks(list(xs), labels, fontsize=7)
        ax_time.set(ylabel="simulated time (us), avg and min-max over ranks", title=collective)
        width = 0.4
        ax_bytes.bar(
            [x - width / 2 for x in xs],
            [r.link_bytes or 0 for r in chosen],
            width,
            label="all links",
        )
        ax_bytes.bar(
            [x + width / 2 for x in xs],
            [r.global_link_bytes or 0 for r in chosen],
            width,
            label="global links",
        )
        ax_bytes.set_xticks(list(xs), labels, fontsize=7)
        ax_bytes.set(ylabel="bytes on links", title=f"{collective}: link bytes")
        ax_bytes.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"{stem}-{collective}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="netcoll-simulate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--topo", default="df:2,4,2", help="topology spec (default df:2,4,2)")
    parser.add_argument(
        "--run",
        action="append",
        type=parse_run,
        metavar="COLLECTIVE:ALGORITHMS:SIZES",
        help="cells to run (repeatable); default: every algorithm at quick sizes",
    )
    parser.add_argument("--root", type=int, default=1, help="root rank (default 1, as make bench)")
    parser.add_argument("--rate", default=DEFAULTS.rate, help="host and local link rate")
    parser.add_argument("--global-rate", default=DEFAULTS.global_rate)
    parser.add_argument("--delay", default=DEFAULTS.delay, help="host and local link latency")
    parser.add_argument("--global-delay", default=DEFAULTS.global_delay)
    parser.add_argument(
        "--switch-queue",
        type=int,
        default=DEFAULTS.switch_queue,
        help="packets per switch egress queue (drop-tail)",
    )
    parser.add_argument(
        "--mtu",
        type=int,
        default=DEFAULTS.mtu,
        help=f"bytes per frame: hosts cut messages into MTU less netcoll's {wire.HEADER_LEN}-byte "
        f"header (default {DEFAULTS.mtu}; the Mininet networks' links carry {wire.JUMBO_MTU})",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=DEFAULTS.window,
        help="unicast segments a host keeps unacknowledged (the engine's message_window)",
    )
    parser.add_argument(
        "--ack-every",
        type=int,
        default=DEFAULTS.ack_every,
        help="segments a receiver acknowledges at once (the engine's ack_every)",
    )
    parser.add_argument(
        "--ack-delay",
        type=float,
        default=DEFAULTS.ack_delay,
        help="seconds before a receiver acknowledges fewer (the engine's ack_delay; the agents "
        "stretch it on slow links, mininet_topos/links/timing.py)",
    )
    parser.add_argument(
        "--mcast-window",
        type=int,
        default=DEFAULTS.mcast_window,
        help="segments a multicast root runs ahead of its slowest ACK (the engine's)",
    )
    parser.add_argument(
        "--placement",
        choices=("linear", "random"),
        default="linear",
        help="ranks on hosts in node order (neighbouring ranks share a router, as make bench "
        "places them) or shuffled by --seed (ranks spread over the machine, as a batch "
        "scheduler may place them)",
    )
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument(
        "--progress", type=float, default=30.0, help="seconds between progress lines (0: none)"
    )
    args = parser.parse_args(argv)
    cells = [c for run in (args.run or [parse_run(q) for q in QUICK]) for c in run]
    try:
        params = LinkParams(
            rate=args.rate,
            global_rate=args.global_rate,
            delay=args.delay,
            global_delay=args.global_delay,
            switch_queue=args.switch_queue,
            mtu=args.mtu,
            window=args.window,
            ack_every=args.ack_every,
            ack_delay=args.ack_delay,
            mcast_window=args.mcast_window,
        )
    except ValueError as exc:
        parser.error(str(exc))
    reason = unavailable_reason()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    from mininet_topos.ns3sim.simulation import Simulation, minimum_bytes

    topo = parse_spec(args.topo)
    print(
        f"*** {topo.shape.spec}: {topo.num_hosts} hosts, {topo.num_switches} switches; "
        f"{params.describe()}",
        flush=True,
    )
    members = tuple(h.node_id for h in topo.hosts)
    if args.placement == "random":
        shuffled = list(members)
        random.Random(args.seed).shuffle(shuffled)
        members = tuple(shuffled)
    try:
        simulation = Simulation(
            topo, params, members=members, seed=args.seed, progress_every=args.progress
        )
    except Ns3Unavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"*** network built in {simulation.build_s:.1f} s", flush=True)
    rows: list[Row] = []
    cells_meta: list[dict[str, Any]] = []
    failures = 0
    for collective, name, size in cells:
        try:
            outcome = simulation.run(collective, name, size, root=args.root)
        except Exception as exc:  # one failed cell must not lose the others' results
            failures += 1
            print(f"  {collective:9s} {name:18s} {size:>7} B: FAILED {exc}", flush=True)
            cells_meta.append(
                {"collective": collective, "algorithm": name, "size": size, "error": str(exc)}
            )
            continue
        minimum = minimum_bytes(topo, collective, members, args.root, size, params.segment)
        row = to_row(outcome, minimum)
        rows.append(row)
        ratio = f"{row.link_bytes / minimum:.2f}x minimum" if minimum and row.link_bytes else ""
        print(
            f"  {collective:9s} {name:18s} {size:>7} B: {outcome.avg_us:10.1f} us "
            f"(max {outcome.max_us:.1f}), {outcome.link_bytes:>12} link bytes {ratio}, "
            f"{outcome.global_link_bytes} global; {outcome.messages} messages, "
            f"{outcome.drops} drops, checked {outcome.checked}: {outcome.wrong} wrong; "
            f"{outcome.wall_s:.1f} s wall, {outcome.cpu_s:.1f} s CPU",
            flush=True,
        )
        cells_meta.append(
            {
                "collective": collective,
                "algorithm": name,
                "size": size,
                "wall_s": outcome.wall_s,
                "cpu_s": outcome.cpu_s,
                "checked": outcome.checked,
                "messages": outcome.messages,
                "packets": outcome.packets,
                "ack_packets": outcome.ack_packets,
                "ack_bytes": outcome.ack_bytes,
                "wire_bytes": outcome.wire_bytes,
                "drops": outcome.drops,
                "median_us": statistics.median(outcome.times_us),
            }
        )
    simulation.close()
    print()
    print(format_table(rows))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    meta = {
        "backend": "ns-3",
        "topology": topo.shape.spec,
        "links": asdict(params),
        "root": args.root,
        "placement": args.placement,
        "seed": args.seed,
        "build_s": simulation.build_s,
        "cells": cells_meta,
        "command": " ".join(["python -m mininet_topos.ns3sim", *(argv or sys.argv[1:])]),
    }
    stem = f"simulate-{topo.shape.spec.replace(':', '').replace(',', '-')}-{stamp}"
    json_path, csv_path = save(rows, args.out, stem, meta)
    pictures = plot(rows, args.out, stem)
    print(f"*** wrote {json_path}, {csv_path}, " + ", ".join(str(p) for p in pictures))
    (args.out / f"{stem}-summary.json").write_text(json.dumps(meta, indent=1))
    return 1 if failures or any(r.wrong for r in rows) else 0
