"""What a CI run proved: per-tier counts and times from the JUnit reports, every skip reason
once, and the verdict on skips.

    python .ci/summary.py --switches yes|no [--missing TOOL,...] [--steps FILE] REPORT.xml ...

Tiers come from the test's module (tests/unit, tests/dataplane, tests/e2e, tests/reliability).
With ``--switches yes`` (p4c and BMv2 installed) a skipped data-plane, e2e or reliability test
fails the run: the skip would hide that the P4, the switches or the network went untested.
With ``--switches no`` the last lines say what was not tested. Exit status 1 on such a skip
or a failed test, else 0.
"""

from __future__ import annotations

import argparse
import collections
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

TIERS = ("unit", "dataplane", "e2e", "reliability")
NEEDS_SWITCHES = ("dataplane", "e2e", "reliability")  # a skip here hides untested switches
TIER_NAMES = {
    "unit": "unit",
    "dataplane": "data plane (single BMv2)",
    "e2e": "e2e subset (Mininet)",
    "reliability": "reliability (faults)",
}


@dataclass
class Tier:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    skips: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped


def tier_of(classname: str) -> str:
    parts = classname.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "tests" and parts[1] in TIERS else "unit"


def read_reports(paths: list[Path]) -> dict[str, Tier]:
    tiers = {name: Tier() for name in TIERS}
    for path in paths:
        if not path.exists():
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            tier = tiers[tier_of(case.get("classname", ""))]
            tier.seconds += float(case.get("time") or 0)
            outcome = "passed"
            for child in case:
                if child.tag == "skipped":
                    outcome = "skipped"
                    tier.skips[(child.get("message") or "no reason given").strip()] += 1
                elif child.tag in ("failure", "error"):
                    outcome = "failed"
            setattr(tier, outcome, getattr(tier, outcome) + 1)
    return tiers


def read_steps(path: Path | None) -> list[tuple[str, int, int]]:
    """(step, seconds, exit status) lines that .ci/run appends as it goes."""
    if path is None or not path.exists():
        return []
    steps = []
    for line in path.read_text().splitlines():
        name, seconds, status = line.rsplit(" ", 2)
        steps.append((name, int(seconds), int(status)))
    return steps


def verdict(tiers: dict[str, Tier], switches: bool, missing: list[str]) -> tuple[bool, list[str]]:
    """(ok, the closing lines)."""
    lines = []
    failed = [f"{t.failed} {TIER_NAMES[name]}" for name, t in tiers.items() if t.failed]
    ok = not failed
    if failed:
        lines.append("CI: FAILED: failed or erroneous tests: " + ", ".join(failed))
    if switches:
        skipped = [name for name in NEEDS_SWITCHES if tiers[name].skipped]
        if skipped:
            ok = False
            lines.append(
                "CI: FAILED: p4c and BMv2 are installed, yet "
                + ", ".join(f"{tiers[n].skipped} {TIER_NAMES[n]} test(s)" for n in skipped)
                + " skipped (reasons above): the switches were not fully tested"
            )
        empty = [TIER_NAMES[name] for name in NEEDS_SWITCHES if tiers[name].total == 0]
        if empty:
            lines.append("CI: note: no test was collected for " + ", ".join(empty))
        if ok:
            lines.append(
                "CI: tested the P4 program on BMv2, the control plane on a Mininet dragonfly "
                "and the collectives end to end, with and without faults"
            )
    else:
        lines.append(
            "CI: NOT TESTED: the P4 program, the BMv2 switches and the Mininet network "
            f"({', '.join(missing) or 'p4c or BMv2'} not installed): only the Python "
            "(unit tier, reference model, in-process fabric) was tested"
        )
    return ok, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switches", choices=("yes", "no"), required=True)
    parser.add_argument("--missing", default="", help="tools not installed, comma-separated")
    parser.add_argument("--steps", type=Path, help="the step times .ci/run wrote")
    parser.add_argument("reports", nargs="*", type=Path)
    args = parser.parse_args(argv)
    tiers = read_reports(args.reports)
    print("CI summary, per tier:")
    print(f"  {'tier':27s} {'passed':>6s} {'failed':>6s} {'skipped':>7s} {'test time':>10s}")
    for name in TIERS:
        t = tiers[name]
        print(
            f"  {TIER_NAMES[name]:27s} {t.passed:6d} {t.failed:6d} {t.skipped:7d} {t.seconds:9.0f}s"
        )
    reasons = collections.Counter[str]()
    for t in tiers.values():
        reasons.update(t.skips)
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  skipped {n:4d} x: {reason}")
    steps = read_steps(args.steps)
    if steps:
        print("CI steps: " + ", ".join(f"{name} {s} s (exit {rc})" for name, s, rc in steps))
    missing = [tool for tool in args.missing.split(",") if tool]
    ok, lines = verdict(tiers, args.switches == "yes", missing)
    for line in lines:
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
