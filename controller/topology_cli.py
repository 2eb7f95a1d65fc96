"""``netcoll-topo``: build a topology from a spec, print its summary and write its files.

    netcoll-topo df:2,4,2 [--arrangement relative] [--write topo.json] [--edges routers.edges]
                 [--summary]

The summary is printed when ``--summary`` is given or when no file is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from controller.topology import (
    ACCEPTED_SPECS,
    ARRANGEMENTS,
    KIND_DRAGONFLY,
    Topology,
    TopologyError,
)
from controller.topology_build import dragonfly, parse_spec

PROG = "netcoll-topo"

_SUMMARY_LABELS = (
    ("shape", "shape"),
    ("groups", "groups"),
    ("routers_per_group", "routers per group"),
    ("routers", "routers"),
    ("hosts", "hosts"),
    ("local_links", "local links"),
    ("global_links", "global links"),
    ("line_links", "line links"),
    ("radix", "radix"),
    ("router_hop_diameter", "router-hop diameter"),
    ("management", "management"),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Build a netcoll topology, print its summary and write its JSON and edges.",
        epilog=f"Accepted specs: {ACCEPTED_SPECS}",
    )
    parser.add_argument("spec", help="topology spec, e.g. df:2,4,2, single:4 or line:3,2")
    parser.add_argument(
        "--arrangement",
        choices=ARRANGEMENTS,
        help="global-link arrangement of a dragonfly (default: the spec's, else absolute)",
    )
    parser.add_argument("--write", metavar="JSON", help="write the topology JSON here")
    parser.add_argument(
        "--edges", metavar="FILE", help='write router edges here, one "r1 r2 local|global" a line'
    )
    parser.add_argument("--summary", action="store_true", help="print the summary")
    return parser


def _build(spec: str, arrangement: str | None) -> Topology:
    topo = parse_spec(spec)
    if arrangement is None or arrangement == topo.shape.arrangement:
        return topo
    if topo.shape.kind != KIND_DRAGONFLY:
        raise TopologyError(f"--arrangement applies to dragonflies only, not to {spec!r}")
    if spec.count(":") == 2:
        raise TopologyError(
            f"{spec!r} already names arrangement {topo.shape.arrangement!r}; "
            f"drop it or --arrangement {arrangement}"
        )
    p, a, h = topo.shape.params
    return dragonfly(p, a, h, arrangement)


def format_summary(topo: Topology) -> str:
    summary = topo.summary()
    if topo.shape.kind != "line":
        summary.pop("line_links")
    width = max(len(label) for _, label in _SUMMARY_LABELS)
    return "\n".join(
        f"{label:<{width}}  {summary[key]}" for key, label in _SUMMARY_LABELS if key in summary
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        topo = _build(args.spec, args.arrangement)
    except TopologyError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.write:
            topo.save(args.write)
            print(f"wrote {args.write}")
        if args.edges:
            topo.write_router_edges(args.edges)
            print(f"wrote {args.edges}")
    except OSError as exc:
        print(f"{PROG}: error: cannot write: {exc}", file=sys.stderr)
        return 1
    if args.summary or not (args.write or args.edges):
        print(format_summary(topo))
    return 0


if __name__ == "__main__":
    sys.exit(main())
