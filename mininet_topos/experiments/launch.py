"""``make launch``: bring up a network, run one workload on its hosts, print the table.

    python -m mininet_topos.experiments.launch --topo df:2,2,1 --collective bcast \\
        --algorithms innet,binomial --sizes 1,16384 --iterations 10 [--members random:8]

The same launcher serves the Mininet CLI's ``coll`` command and the tests. Random subsets and
roots come from --seed, which is printed.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from host_agents.collectives import COLLECTIVES
from host_agents.comm import ACK_MERGE_MODES
from host_agents.report import format_table, save
from host_agents.workload import CollectiveTest, Workload
from mininet_topos.network import NetcollNetwork
from mininet_topos.network.bmv2 import describe
from mininet_topos.network.run import add_network_arguments, with_network
from mininet_topos.tooling.machine import default_bmv2


def choose_members(spec: str, hosts: list[int], rng: random.Random) -> tuple[int, ...]:
    if spec == "all":
        return tuple(hosts)
    if spec.startswith("random:"):
        return tuple(rng.sample(hosts, int(spec.removeprefix("random:"))))
    return tuple(int(n) for n in spec.split(","))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_network_arguments(parser)
    parser.add_argument("--collective", required=True, choices=list(COLLECTIVES))
    parser.add_argument("--algorithms", default="auto", help="comma-separated algorithm names")
    parser.add_argument(
        "--sizes",
        default="0",
        help="comma-separated sizes in bytes (per rank for scatter/allgather)",
    )
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--root", default="0", help="root rank, or 'random'")
    parser.add_argument("--members", default="all", help="all, random:N, or NODE,NODE,...")
    parser.add_argument(
        "--persistent", action="store_true", help="init once, start every iteration"
    )
    parser.add_argument("--no-sync", action="store_true", help="no barrier between iterations")
    parser.add_argument("--split", choices=("group", "switch"), help="run on MPI_Comm_split parts")
    parser.add_argument("--seed", type=int, default=None, help="seed for data, subsets and roots")
    parser.add_argument(
        "--ack-merge",
        choices=ACK_MERGE_MODES,
        default="coroots",
        help="who merges the ACKs of in-network broadcasts: host co-roots or the switches",
    )
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print(f"*** seed {seed}")
    return with_network(args, "launching on", lambda net: launch(net, args, seed))


def launch(net: NetcollNetwork, args: argparse.Namespace, seed: int) -> int:
    rng = random.Random(seed)
    members = choose_members(args.members, [h.node_id for h in net.topo.hosts], rng)
    root = rng.randrange(len(members)) if args.root == "random" else int(args.root)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    tests = [
        CollectiveTest(
            args.collective,
            name,
            sizes,
            args.iterations,
            args.warmup,
            root,
            args.persistent,
            not args.no_sync,
        )
        for name in args.algorithms.split(",")
    ]
    comm_id, install = net.create_comm(members)
    print(
        f"*** communicator {comm_id} of {len(members)} hosts installed in "
        f"{install * 1e3:.1f} ms; root rank {root}"
    )
    workload = Workload(
        comm_id, members, tests, seed=seed, split=args.split, options={"ack_merge": args.ack_merge}
    )
    result = net.launcher().launch(workload)
    print(format_table(result.rows))
    print(
        f"*** ACK merging: {args.ack_merge}; multicast ACK frames reaching the roots: "
        f"{result.stats_total('mcast_acks_at_root')}"
    )
    meta = {
        "seed": seed,
        "topology": args.topo,
        "mtu": args.mtu,
        "bmv2": describe(default_bmv2()),
        "ack_merge": args.ack_merge,
        "mcast_acks_at_root": result.stats_total("mcast_acks_at_root"),
    }
    json_path, _ = save(result.rows, args.out, f"launch-{args.collective}-{seed}", meta)
    print(f"*** results in {json_path}")
    for error in result.errors[:10]:
        print(f"error: {error}", file=sys.stderr)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
