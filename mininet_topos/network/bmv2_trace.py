"""What BMv2 interprets per packet: tables, conditions and primitives per pipeline pass.

BMv2 spends most of its CPU interpreting the program (docs/performance.md), so the work a
packet costs is about the number of operations its passes run. This reads a trace-level
BMv2 log (``make run RUN_ARGS="--log-level trace"``, or the data-plane harness with
``log_level="trace"``; only BMv2's default build writes one) and prints, per pipeline and per
class of packet (the ``meta.class == CLASS_...`` test that came out true), the passes seen
and their mean counts.

    python -m mininet_topos.network.bmv2_trace /tmp/netcoll-run/ncs0-packets.txt
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# [time] [bmv2] [level] [thread N] [packet id] [cxt 0] message
LINE = re.compile(r"\[[^]]*\] \[bmv2\] \[.\] \[thread (\d+)\] \[[^]]*\] \[cxt \d+\] (.*)")
CLASS_TEST = re.compile(r'Condition "meta\.class == (CLASS_\w+)[^"]*" \(\w+\) is true')
KINDS = ("tables", "conditions", "primitives")


@dataclass
class Pass:
    pipeline: str
    klass: str = "-"
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))


def passes(lines: Iterable[str]) -> list[Pass]:
    """Every complete pipeline pass in a trace log. Threads interleave their lines, so a pass
    is followed by the thread that started it."""
    open_passes: dict[str, Pass] = {}
    done: list[Pass] = []
    for line in lines:
        match = LINE.match(line)
        if match is None:
            continue
        thread, message = match.groups()
        if message.startswith("Pipeline '") and message.endswith("': start"):
            open_passes[thread] = Pass(message.split("'")[1])
            continue
        current = open_passes.get(thread)
        if current is None:
            continue
        if message.startswith("Pipeline '") and message.endswith("': end"):
            done.append(open_passes.pop(thread))
        elif message.startswith("Applying table"):
            current.counts["tables"] += 1
        elif "Condition " in message:
            current.counts["conditions"] += 1
            test = CLASS_TEST.search(message)
            if test is not None and current.klass == "-":
                current.klass = test.group(1)
        elif "Primitive" in message:
            current.counts["primitives"] += 1
    return done


def summary(found: list[Pass]) -> list[tuple[str, str, int, dict[str, float]]]:
    """(pipeline, class, passes, mean count per kind), ingress first."""
    groups: dict[tuple[str, str], list[Pass]] = defaultdict(list)
    for p in found:
        groups[(p.pipeline, p.klass)].append(p)
    rows = []
    for (pipeline, klass), group in sorted(
        groups.items(), key=lambda kv: (kv[0][0] != "ingress", kv[0])
    ):
        means = {k: sum(p.counts[k] for p in group) / len(group) for k in KINDS}
        rows.append((pipeline, klass, len(group), means))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path, help="BMv2 trace logs")
    args = parser.parse_args(argv)
    found: list[Pass] = []
    for path in args.logs:
        with path.open(errors="replace") as log:
            found += passes(log)
    if not found:
        print("no pipeline passes found: is this a trace-level log of BMv2's default build?")
        return 1
    print(
        f"{'pipeline':<9} {'class':<18} {'passes':>7} {'tables':>7} "
        f"{'conditions':>11} {'primitives':>11}"
    )
    for pipeline, klass, count, means in summary(found):
        print(
            f"{pipeline:<9} {klass:<18} {count:>7} {means['tables']:>7.1f} "
            f"{means['conditions']:>11.1f} {means['primitives']:>11.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
