"""``netcoll-stop`` / ``make stop``: remove exactly what netcoll runs recorded, nothing else.

It prints the plan (every recorded run and what it holds), removes it through
:func:`mininet_topos.tooling.cleanup.stop_all`, and prints the report. Exit status: 0 when
nothing was recorded or everything was removed, 1 on any error (the affected state files are
kept so the command can simply be repeated once the cause is fixed).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from mininet_topos.tooling.cleanup import stop_all
from mininet_topos.tooling.registry import STATE_DIR_ENV, RunStateError, resolve_state_dir
from mininet_topos.tooling.runs import list_runs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="netcoll-stop",
        description=(
            "Stop the processes and remove the interfaces, netns and files that netcoll runs "
            "recorded. Never matches by name and never runs `mn -c`."
        ),
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help=f"run-state directory (default: ${STATE_DIR_ENV} or /tmp/netcoll-state)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds to wait after SIGTERM before SIGKILL (default: 10)",
    )
    parser.add_argument("--dry-run", action="store_true", help="only print what would be removed")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="list every item removed or already gone"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``netcoll-stop``; returns the exit status."""
    args = build_parser().parse_args(argv)
    state_dir = resolve_state_dir(args.state_dir)
    try:
        runs = list_runs(state_dir)
    except RunStateError as exc:
        print(f"netcoll-stop: {exc}", file=sys.stderr)
        return 1
    if not runs:
        print(f"netcoll-stop: nothing recorded in {state_dir}; nothing to do.")
        return 0

    print(f"netcoll-stop: {len(runs)} recorded run(s) in {state_dir}:")
    for run in runs:
        print(run.describe())
    if args.dry_run:
        print("netcoll-stop: dry run, nothing was changed.")
        return 0

    needs_root = [run.name for run in runs if run.trusted and (run.links or run.netns)]
    if needs_root and os.geteuid() != 0:
        print(
            "netcoll-stop: removing network interfaces and namespaces needs root "
            f"(runs: {', '.join(needs_root)}). Nothing was changed.\n"
            "  Run it as root:  sudo make stop   (or: sudo netcoll-stop)",
            file=sys.stderr,
        )
        return 1

    report = stop_all(state_dir, timeout=args.timeout)
    if args.verbose:
        for item in report.removed:
            print(f"  removed: {item}")
        for item in report.already_gone:
            print(f"  already gone: {item}")
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
