"""``make build-tna``: check the Tofino program (p4src/tna/netcoll.p4) against Tofino.

Which check runs depends on what is installed, and the output says which one ran:

1. A Tofino compiler (``bf-p4c`` from Intel's SDE, or p4c 1.2.5+ built with its Tofino backend,
   whose driver is ``p4c`` once ``p4c-barefoot`` is installed): the program is compiled for
   Tofino 1 (``--arch tna``) and Tofino 2 (``--arch t2na``) into ``OUT/<target>/``, each with
   its profile (the defines of ``Target.defines``), with ``-g`` so that the compiler writes its
   resource report; the stages and per-stage use printed come from that report
   (``resources.json`` and ``metrics.json``, read by :mod:`controller.tofino.resources`).
2. Otherwise ``p4test`` type-checks it with ``-D__TARGET_TOFINO__=1`` against ``tna.p4`` and
   ``=2`` against ``t2na.p4``, the architecture files of p4c's Tofino backend. That proves the
   program is well typed against Tofino's externs and intrinsic metadata, not that it fits the
   hardware (stages, the one-access-per-register rule): docs/porting-to-tofino.md reviews those.
3. Without either, the check is skipped with a message naming the variable to set (exit 0;
   ``--require`` turns the skip into a failure).

The architecture files come from ``--include-dir`` / ``$TNA_INCLUDE_DIR``, else from the
``share/p4c/p4include`` of an installed Tofino-capable p4c. They are never copied into this
repository. Exit status: 0 passed or skipped, 1 a check failed, 2 bad configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from controller.tofino import resources
from controller.tofino.assembly import (
    ASSEMBLER,
    DRIVER_ASSEMBLER_BUG,
    Which,
    resource_summary,
    run_assembler,
)
from controller.tofino.diagnostics import own_warnings, tool_version

REPO = Path(__file__).resolve().parents[2]
DEFAULT_PROGRAM = REPO / "p4src" / "tna" / "netcoll.p4"
INCLUDE_DIR_VARIABLE = "TNA_INCLUDE_DIR"
COMPILER_VARIABLE = "TNA_P4C"
# Tofino compilers in the order they are looked for; p4c-barefoot is the open-source backend,
# reached through the p4c driver.
TOFINO_COMPILERS = ("bf-p4c", "p4c-tofino")
# A full compile's longest wait: Tofino 2's PHV allocation alone ran past 20 minutes here
COMPILE_TIMEOUT_S = 4 * 3600
# The control-plane schema alone: the compiler writes bfrt.json once the midend is through;
# skipping the back end for the program's one pipe (Pipeline(...) pipe in tna/netcoll.p4)
# takes seconds instead of the minutes of a full compile
SCHEMA_ONLY_FLAGS = ("-Xp4c=--skip-compilation pipe",)
OPEN_SOURCE_BACKEND = "p4c-barefoot"
ARCH_FILES = ("tna.p4", "t2na.p4")
# Where p4c installs its include files when no tool points elsewhere.
STANDARD_INCLUDE_DIRS = (Path("/usr/local/share/p4c/p4include"), Path("/usr/share/p4c/p4include"))
EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Target:
    name: str  # p4c --target
    arch: str  # p4c --arch
    define: int  # __TARGET_TOFINO__
    arch_file: str  # what the program includes for this target
    defines: tuple[str, ...] = ()  # the target's profile: -D<name>=<value> for the compiler

    def full(self) -> Target:
        """The same target without its profile: the whole program."""
        return Target(self.name, self.arch, self.define, self.arch_file)

    @property
    def label(self) -> str:
        profile = "".join(f", {d}" for d in self.defines)
        return f"{self.name} ({self.arch_file}, __TARGET_TOFINO__={self.define}{profile})"


# Tofino 1's profile (docs/porting-to-tofino.md, "Profiles"): no in-network reduction (REDUCE
# and RESULT are dropped, the hosts reduce) and no mini-packet membership (every MP kind is
# answered BAD_KIND: the control plane writes slots as register cells, bfrt.py with
# registers=True); broadcast, barrier and ACK merging are kept. With the reduction's slot and
# 8 lanes p4c-barefoot 1.2.5.16 placed 27 ingress stages of 12; with 16 lanes it left the
# lanes without PHV containers, with 32 the egress parser exceeded its 160-byte parse depth.
# 8 lanes keep the (unused) parsed header small.
TOFINO1_PROFILE = ("NETCOLL_NO_REDUCTION", "NETCOLL_NO_MINI_PACKETS", "NETCOLL_AGG_LANES=8")
# Tofino 2's profile: 16 lanes per REDUCE (the hosts read it from bfrt.json,
# controller/tofino/sizes.py) and 8 aggregation slots per communicator. With 32 lanes PHV
# allocation fails (p4c-barefoot 1.2.5.16), and the lanes' 8 stages of 4 stateful ALUs after
# the reduction's verdict (stage 13) would end past the device's 20 (docs/porting-to-tofino.md);
# v1model's window of 16 doubles every reduction register for half a window more in flight.
TOFINO2_PROFILE = ("NETCOLL_AGG_WINDOW=8", "NETCOLL_AGG_LANES=16")
TARGETS = (
    Target("tofino", "tna", 1, "tna.p4", defines=TOFINO1_PROFILE),
    Target("tofino2", "t2na", 2, "t2na.p4", defines=TOFINO2_PROFILE),
)
# --profile: "default" compiles each target with its profile above, "full" the whole program
# (every target without its profile's defines; --define still adds to it)
PROFILES = ("default", "full")


class ConfigError(Exception):
    """The user asked for something that cannot work (a wrong include dir, a missing tool)."""


@dataclass(slots=True)
class Outcome:
    target: Target
    ok: bool
    command: list[str]
    diagnostics: str = ""
    warnings: int = 0  # warnings about the program (not about the architecture files)
    resources: dict[str, Any] = field(default_factory=dict)
    report: list[str] = field(default_factory=list)  # the resource report, printable
    assembled_by_hand: bool = False  # the driver crashed before bfas, run here instead


def has_arch_files(directory: Path) -> bool:
    return all((directory / name).is_file() for name in ARCH_FILES)


def installed_include_dirs(tools: Iterable[str | None], which: Which = shutil.which) -> list[Path]:
    """``<prefix>/share/p4c/p4include`` of each installed tool, then the usual prefixes."""
    candidates: list[Path] = []
    for tool in tools:
        found = which(tool) if tool else None
        if found:
            prefix = Path(found).resolve().parent.parent
            candidates.append(prefix / "share" / "p4c" / "p4include")
    candidates += STANDARD_INCLUDE_DIRS
    unique: list[Path] = []
    for path in candidates:
        if path not in unique:
            unique.append(path)
    return unique


def find_include_dir(
    explicit: str | None, tools: Iterable[str | None], which: Which = shutil.which
) -> Path | None:
    """The directory holding tna.p4 and t2na.p4: the variable if set, else an installed one.

    A variable that is set but names no such directory is a ConfigError, not a skip: the user
    asked for that directory."""
    if explicit:
        path = Path(explicit).expanduser()
        if not has_arch_files(path):
            raise ConfigError(
                f"{INCLUDE_DIR_VARIABLE}={explicit} does not contain {' and '.join(ARCH_FILES)}; "
                "point it at p4c's backends/tofino/bf-p4c/p4include (p4c 1.2.5 or later)"
            )
        return path
    for path in installed_include_dirs(tools, which):
        if has_arch_files(path):
            return path
    return None


def find_tofino_compiler(explicit: str | None, which: Which = shutil.which) -> list[str] | None:
    """The command that compiles for Tofino: ``bf-p4c``, or ``p4c`` when p4c-barefoot exists.

    ``p4c-barefoot`` itself is the backend: named explicitly, it stands for the driver installed
    beside it (``bf-p4c`` or ``p4c``), which also runs the assembler and the report tools."""
    if explicit:
        found = which(explicit)
        if found is None:
            raise ConfigError(f"{COMPILER_VARIABLE}={explicit} is not an executable on PATH")
        if Path(found).name == OPEN_SOURCE_BACKEND:
            for driver_name in ("bf-p4c", "p4c"):
                sibling = Path(found).parent / driver_name
                if which(str(sibling)):
                    return [str(sibling)]
            raise ConfigError(
                f"{COMPILER_VARIABLE}={explicit} is the backend; no bf-p4c or p4c driver beside it"
            )
        return [found]
    for name in TOFINO_COMPILERS:
        found = which(name)
        if found:
            return [found]
    driver = which("p4c")
    if which(OPEN_SOURCE_BACKEND) and driver:
        return [driver]
    return None


def typecheck(
    p4test: str, program: Path, include_dir: Path, target: Target, defines: Sequence[str] = ()
) -> Outcome:
    command = [
        p4test,
        "--std",
        "p4-16",
        f"-D__TARGET_TOFINO__={target.define}",
        *(f"-D{d}" for d in (*target.defines, *defines)),
        "-I",
        str(include_dir),
        str(program),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    diagnostics = (result.stdout + result.stderr).strip()
    warnings = own_warnings(diagnostics, include_dir)
    # The program must type-check without warnings of its own, like the v1model build.
    return Outcome(target, result.returncode == 0 and warnings == 0, command, diagnostics, warnings)


def compile_command(
    compiler: Sequence[str],
    program: Path,
    target_dir: Path,
    target: Target,
    defines: Sequence[str] = (),
    schema_only: bool = False,
) -> list[str]:
    return [
        *compiler,
        "--std",
        "p4-16",
        "--target",
        target.name,
        "--arch",
        target.arch,
        # -g: the compiler writes resources.json (and, through its driver, metrics.json and
        # mau.resources.log) only with debug information on
        "-g",
        *(f"-D{d}" for d in (*target.defines, *defines)),
        "-o",
        str(target_dir),
        "--bf-rt-schema",
        str(target_dir / "bfrt.json"),
        *(SCHEMA_ONLY_FLAGS if schema_only else ()),
        str(program),
    ]


def compile_for(
    compiler: list[str],
    program: Path,
    out_dir: Path,
    target: Target,
    defines: Sequence[str] = (),
    schema_only: bool = False,
    timeout_s: float = COMPILE_TIMEOUT_S,
) -> Outcome:
    """Compile for target into out_dir/<target>; schema_only stops after bfrt.json."""
    target_dir = out_dir / target.name
    target_dir.mkdir(parents=True, exist_ok=True)
    command = compile_command(compiler, program, target_dir, target, defines, schema_only)
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return Outcome(target, False, command, f"the compiler ran past {timeout_s:.0f} s: stopped")
    diagnostics = (result.stdout + result.stderr).strip()
    outcome = Outcome(target, result.returncode == 0, command, diagnostics)
    if not outcome.ok and not schema_only and DRIVER_ASSEMBLER_BUG in diagnostics:
        assemble_by_hand(compiler, target_dir, outcome, timeout_s)
    if not schema_only and (outcome.ok or resources.find_report(target_dir, "resources.json")):
        # a placement the assembler refuses (too many stages) is reported too
        outcome.resources, outcome.report = resource_summary(target_dir)
    return outcome


def assemble_by_hand(
    compiler: Sequence[str], target_dir: Path, outcome: Outcome, timeout_s: float
) -> None:
    """The driver crashed before its assembler: the outcome becomes the assembler's, run by
    hand (which checks the stages the device has), if there was one to run."""
    ok, lines = run_assembler(compiler, target_dir, timeout_s)
    outcome.diagnostics = "\n".join([outcome.diagnostics, *lines])
    if ok is not None:
        outcome.ok = ok
        outcome.assembled_by_hand = True


def report(outcomes: Sequence[Outcome], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    for outcome in outcomes:
        verdict = "ok" if outcome.ok else "FAILED"
        print(f"build-tna:   {outcome.target.label}: {verdict}", file=out)
        if outcome.diagnostics and (not outcome.ok or outcome.warnings):
            print(outcome.diagnostics, file=out)
        elif outcome.assembled_by_hand:
            for line in outcome.diagnostics.splitlines():
                if f"ran {ASSEMBLER}" in line or f"/{ASSEMBLER} " in line:
                    print(f"build-tna:   {line}", file=out)
        if outcome.warnings:
            print(f"build-tna:   {outcome.warnings} warning(s) about the program", file=out)
        for line in outcome.report:
            print(f"build-tna:     {line}", file=out)


def write_record(out_dir: Path, record: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "check.json").write_text(json.dumps(record, indent=2) + "\n")


def run(args: argparse.Namespace, which: Which = shutil.which) -> int:
    program = Path(args.program)
    if not program.is_file():
        raise ConfigError(f"no TNA program at {program}")
    out_dir = Path(args.out)
    targets = [t for t in TARGETS if t.name in args.targets]
    if args.profile == "full":
        targets = [t.full() for t in targets]
    explicit_dir = args.include_dir or os.environ.get(INCLUDE_DIR_VARIABLE) or None
    explicit_compiler = args.p4c or os.environ.get(COMPILER_VARIABLE) or None

    compiler = find_tofino_compiler(explicit_compiler, which)
    if compiler is not None:
        version = tool_version(compiler)
        print(
            f"build-tna: compiling with the Tofino compiler {compiler[0]} ({version}) for "
            f"{', '.join(t.name for t in targets)}; it uses its own architecture files"
        )
        outcomes = [compile_for(compiler, program, out_dir, t, args.define) for t in targets]
        check = "tofino-compiler"
        include_dir: Path | None = None
    else:
        p4test = which(args.p4test) if args.p4test else None
        include_dir = find_include_dir(explicit_dir, [args.p4test, "p4c"], which)
        if include_dir is None or p4test is None:
            missing = (
                f"no {' / '.join(ARCH_FILES)} found (set {INCLUDE_DIR_VARIABLE} to p4c's "
                "backends/tofino/bf-p4c/p4include, or install p4c 1.2.5+ with its Tofino backend)"
                if include_dir is None
                else f"p4test ({args.p4test or 'P4TEST'}) is not installed"
            )
            print(
                f"build-tna: SKIPPED: no Tofino compiler ({' / '.join(TOFINO_COMPILERS)} / "
                f"p4c with {OPEN_SOURCE_BACKEND}) and {missing}"
            )
            write_record(out_dir, {"check": "skipped", "reason": missing})
            return EXIT_CONFIG if args.require else EXIT_OK
        version = tool_version([p4test])
        print(
            f"build-tna: no Tofino compiler found; type-checking with p4test ({version}) "
            f"against the architecture files in {include_dir} for "
            f"{', '.join(t.name for t in targets)} (types only: stages and the "
            "one-access-per-register rule are reviewed in docs/porting-to-tofino.md)"
        )
        outcomes = [typecheck(p4test, program, include_dir, t, args.define) for t in targets]
        check = "p4test"

    report(outcomes)
    write_record(
        out_dir,
        {
            "check": check,
            "tool_version": version,
            "program": str(program),
            "include_dir": str(include_dir) if include_dir else None,
            "defines": list(args.define),
            "profile": args.profile,
            "targets": [
                {
                    "target": o.target.name,
                    "arch": o.target.arch,
                    "ok": o.ok,
                    "command": o.command,
                    "warnings": o.warnings,
                    "assembled_by_hand": o.assembled_by_hand,
                    "resources": o.resources,
                }
                for o in outcomes
            ],
        },
    )
    failed = [o.target.name for o in outcomes if not o.ok]
    if failed:
        print(f"build-tna: FAILED for {', '.join(failed)}")
        return EXIT_FAILED
    print(f"build-tna: passed ({check}) for {', '.join(o.target.name for o in outcomes)}")
    return EXIT_OK


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m controller.tofino.build",
        description="Compile (Tofino compiler) or type-check (p4test) the TNA program.",
    )
    parser.add_argument("--program", default=str(DEFAULT_PROGRAM), help="the TNA program")
    parser.add_argument("--p4test", default="p4test", help="p4test to type-check with")
    parser.add_argument(
        "--p4c",
        default="",
        help=f"Tofino compiler (default ${COMPILER_VARIABLE}, else bf-p4c, p4c-tofino, "
        f"or p4c when {OPEN_SOURCE_BACKEND} is installed)",
    )
    parser.add_argument(
        "--include-dir",
        default="",
        help=f"directory with tna.p4 and t2na.p4 (default ${INCLUDE_DIR_VARIABLE}, else the "
        "installed p4c's share/p4c/p4include)",
    )
    parser.add_argument("--out", default="build/tna", help="output directory")
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default="default",
        help="default: each target with its profile (Tofino 1 without in-network reduction); "
        "full: the whole program on every target",
    )
    parser.add_argument(
        "--targets",
        default=",".join(t.name for t in TARGETS),
        type=lambda text: [name for name in text.split(",") if name],
        help="comma-separated subset of tofino,tofino2",
    )
    parser.add_argument(
        "--define",
        "-D",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a define for every target's compile, after the target's profile (repeatable)",
    )
    parser.add_argument(
        "--require", action="store_true", help="fail instead of skipping when no tool is found"
    )
    args = parser.parse_args(argv)
    unknown = set(args.targets) - {t.name for t in TARGETS}
    if unknown:
        parser.error(f"unknown target(s) {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except ConfigError as exc:
        print(f"build-tna: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
