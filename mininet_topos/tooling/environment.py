"""Machine setup for netcoll: ``deps`` installs what it needs, ``doctor`` reports what is there.

Usage::

    python3 -m mininet_topos.tooling.environment deps [--dry-run]
    python3 -m mininet_topos.tooling.environment doctor [--strict] [--json]

The work is done in machine.py (what is needed, what is here), deps.py and doctor.py; this
module is the command line.

This module is standard-library only and avoids syntax newer than Python 3.8: ``make deps`` and
``make doctor`` run under the system ``/usr/bin/python3`` *before* the project venv exists.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mininet_topos.tooling.deps import deps_main
from mininet_topos.tooling.doctor import doctor

# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m mininet_topos.tooling.environment",
        description="Install netcoll's dependencies (deps) or report what is installed (doctor).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    deps = sub.add_parser("deps", help="install system packages, p4c/BMv2 and the venv")
    deps.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    doc = sub.add_parser("doctor", help="report which tools and packages are present")
    doc.add_argument("--strict", action="store_true", help="exit 1 if a required tool is missing")
    doc.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``python3 -m mininet_topos.tooling.environment``."""
    args = build_parser().parse_args(argv)
    if args.command == "deps":
        return deps_main(dry_run=args.dry_run)
    return doctor(strict=args.strict, as_json=args.json)


def doctor_main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point equivalent to ``environment doctor [--strict] [--json]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    return main(["doctor", *args])


if __name__ == "__main__":
    sys.exit(main())
