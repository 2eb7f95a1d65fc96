"""``make doctor``: check every tool the project needs, with versions, each probe bounded.

This module is standard-library only and avoids syntax newer than Python 3.8: ``make deps`` and
``make doctor`` run under the system ``/usr/bin/python3`` *before* the project venv exists.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from mininet_topos.tooling.machine import (
    BMV2_ENV,
    CHECK_TIMEOUT,
    REQUIRED_CHECKS,
    VENV_MODULES,
    bmv2_flavour,
    default_bmv2,
    find_tool,
    first_line,
    probe,
    read_pyvenv_cfg,
    system_python,
    venv_dir,
)

# --------------------------------------------------------------------------------------------
# doctor
# --------------------------------------------------------------------------------------------


@dataclass
class Check:
    """One doctor line: whether ``name`` was found, its version or path, and a hint if not."""

    name: str
    found: bool
    detail: str = ""
    hint: str = ""
    required: bool = False


def _tool_version_check(name: str, hint: str, version_flag: str | None = "--version") -> Check:
    """Locate a binary and ask it for its version (bounded)."""
    path = find_tool(name)
    required = name in REQUIRED_CHECKS
    if not path:
        return Check(name, False, "not on PATH", hint, required)
    if version_flag is None:
        return Check(name, True, path, "", required)
    result = probe([path, version_flag])
    if result.error:
        return Check(name, False, f"{path} ({result.error})", hint, required)
    # p4c prints its own name first and "Version 1.2.4.8 (...)" on the next line
    lines = [line.strip() for line in result.output.splitlines() if line.strip()]
    versioned = [line for line in lines if "version" in line.lower()]
    version = (versioned or lines or [f"exit status {result.returncode}"])[0]
    return Check(name, True, f"{version}  {path}", "", required)


def check_p4c() -> Check:
    return _tool_version_check(
        "p4c-bm2-ss", "install p4lang-p4c or build p4c >= v1.2.4.8; `make deps` explains"
    )


def check_p4test() -> Check:
    return _tool_version_check("p4test", "optional: comes with p4c, checks P4 sources")


def check_simple_switch_grpc() -> Check:
    return _tool_version_check(
        "simple_switch_grpc", "install p4lang-bmv2 or build BMv2 1.15.x --with-pi"
    )


def check_bmv2_build() -> Check:
    """Which simple_switch_grpc runs (NETCOLL_BMV2 or PATH) and whether it is built for
    timing; optional: a logging build works, only slower."""
    binary = default_bmv2()
    flavour = bmv2_flavour(binary)
    hint = (
        f"time on a BMv2 built without logging macros, event logger and packet trace at -O3, "
        f"installed apart and named by {BMV2_ENV} (make BMV2=...)"
    )
    return Check(
        "BMv2 build (timing)",
        flavour == "speed",
        f"{flavour} build: {shutil.which(binary) or binary}",
        "" if flavour == "speed" else hint,
    )


def check_thrift_server() -> Check:
    """Does simple_switch_grpc serve the Thrift runtime (registers, simple_switch_CLI)?

    BMv2's P4Runtime server does not implement register read/write, so the Thrift port is the
    fallback for register state; a build ``--without-thrift`` lacks ``--thrift-port``.
    """
    name = "simple_switch_grpc thrift"
    path = find_tool("simple_switch_grpc")
    if not path:
        return Check(name, False, "simple_switch_grpc not found", "see simple_switch_grpc")
    result = probe([path, "--help"])
    if result.error:
        return Check(name, False, result.error, "simple_switch_grpc --help must not hang")
    if "--thrift-port" in result.output:
        return Check(name, True, "--thrift-port supported")
    return Check(name, False, "no --thrift-port in --help", "rebuild BMv2 with Thrift")


def script_interpreter(script: str) -> str | None:
    """The interpreter a script's ``#!`` line resolves to (``/usr/bin/env X`` uses PATH)."""
    try:
        with open(script, "rb") as handle:
            line = handle.readline(256).decode("utf-8", errors="replace")
    except OSError:
        return None
    if not line.startswith("#!"):
        return None
    words = line[2:].split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        args = [w for w in words[1:] if not w.startswith("-")]
        return find_tool(args[0]) if args else None
    return words[0]


def check_simple_switch_cli() -> Check:
    return _tool_version_check(
        "simple_switch_CLI",
        "optional: comes with BMv2, Thrift register fallback",
        version_flag=None,
    )


def check_cli_thrift() -> Check:
    """Can the interpreter that runs simple_switch_CLI import ``thrift``?

    ``#!/usr/bin/env python3`` picks whatever python3 is first on PATH (pyenv, conda...),
    which is often not the one python3-thrift was installed for.
    """
    name = "thrift (simple_switch_CLI)"
    cli = find_tool("simple_switch_CLI")
    interp = script_interpreter(cli) if cli else None
    note = ""
    if interp is None:
        interp = system_python()
        note = f" (simple_switch_CLI not found; checked {interp})"
    code = (
        "import thrift, importlib.metadata as m\n"
        "try: print(m.version('thrift'))\n"
        "except Exception: print(thrift.__file__)"
    )
    result = probe([interp, "-c", code])
    if result.ok:
        return Check(name, True, f"{first_line(result.output)} under {interp}{note}")
    reason = result.error or first_line(result.output.splitlines()[-1] if result.output else "")
    return Check(
        name,
        False,
        "{}: {}{}".format(interp, reason or "import failed", note),
        "apt-get install python3-thrift, and make simple_switch_CLI run under that Python",
    )


def check_mininet() -> Check:
    interp = system_python()
    result = probe([interp, "-c", "import mininet.net; print(mininet.net.VERSION)"])
    if result.ok:
        return Check("mininet", True, f"{first_line(result.output)} under {interp}", required=True)
    reason = result.error or first_line(result.output.splitlines()[-1] if result.output else "")
    return Check(
        "mininet",
        False,
        "{}: {}".format(interp, reason or "import failed"),
        "apt-get install mininet (or set SYSTEM_PYTHON)",
        required=True,
    )


def check_root() -> Check:
    euid = os.geteuid()
    if euid == 0:
        return Check("root", True, "euid 0", required=True)
    return Check(
        "root", False, f"euid {euid}", "Mininet and BMv2 need root: use sudo", required=True
    )


def check_venv() -> list[Check]:
    """The venv itself plus one check per Python package, probed in one bounded process."""
    venv = venv_dir()
    python = venv / "bin" / "python"
    hint_pkg = f"run `make deps` (pip install -e '.[dev]' into {venv})"
    if not python.exists():
        checks = [Check("venv", False, f"no {python}", "run `make deps`", required=True)]
        checks += [Check(mod, False, "no venv", hint_pkg) for mod, _ in VENV_MODULES]
        return checks
    cfg = read_pyvenv_cfg(venv)
    system_site = cfg.get("include-system-site-packages", "").lower() == "true"
    detail = "{} (Python {})".format(venv, cfg.get("version_info") or cfg.get("version") or "?")
    venv_check = Check("venv", True, detail, required=True)
    if not system_site:
        venv_check = Check(
            "venv",
            False,
            detail + " without --system-site-packages",
            "recreate it with `make deps` so Mininet imports",
            True,
        )
    script = (
        "import importlib, importlib.metadata as md, json, sys\n"
        "out = {}\n"
        "for mod, dist in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        m = importlib.import_module(mod)\n"
        "    except Exception as e:\n"
        "        out[mod] = [False, '%s: %s' % (type(e).__name__, e)]\n"
        "        continue\n"
        "    v = getattr(m, '__version__', None)\n"
        "    try:\n"
        "        v = md.version(dist)\n"
        "    except Exception:\n"
        "        pass\n"
        "    out[mod] = [True, str(v or '?')]\n"
        "print(json.dumps(out))\n"
    )
    result = probe([str(python), "-c", script, json.dumps(VENV_MODULES)], timeout=CHECK_TIMEOUT)
    answers: dict[str, list[object]] = {}
    if result.ok:
        try:
            answers = json.loads(result.output.splitlines()[-1])
        except (ValueError, IndexError):
            answers = {}
    checks = [venv_check]
    for mod, _ in VENV_MODULES:
        if mod in answers:
            ok, text = answers[mod]
            checks.append(Check(mod, bool(ok), str(text), "" if ok else hint_pkg))
        else:
            why = result.error or f"probe failed: {first_line(result.output)}"
            checks.append(Check(mod, False, why, hint_pkg))
    return checks


def tna_include_dir() -> tuple[Path | None, str]:
    """Where ``tna.p4`` is: env TNA_INCLUDE_DIR, or p4c's installed ``share/p4c/p4include``."""
    env = os.environ.get("TNA_INCLUDE_DIR")
    if env:
        return (
            (Path(env), "TNA_INCLUDE_DIR")
            if (Path(env) / "tna.p4").is_file()
            else (None, f"TNA_INCLUDE_DIR={env} has no tna.p4")
        )
    prefixes = []
    p4c = find_tool("p4c-bm2-ss")
    if p4c:
        prefixes.append(Path(p4c).resolve().parent.parent)
    prefixes += [Path("/usr/local"), Path("/usr")]
    for prefix in prefixes:
        candidate = prefix / "share" / "p4c" / "p4include"
        if (candidate / "tna.p4").is_file():
            return candidate, "p4c install"
    return None, "no tna.p4 under {}".format(
        ", ".join(str(p / "share/p4c/p4include") for p in prefixes)
    )


def check_tna() -> Check:
    path, how = tna_include_dir()
    if path:
        return Check("tna.p4 (optional)", True, f"{path} ({how})")
    return Check(
        "tna.p4 (optional)",
        False,
        how,
        "only `make build-tna` needs it: p4c >= 1.2.5 or set TNA_INCLUDE_DIR",
    )


def doctor_report() -> list[Check]:
    """Run every check (in parallel, each bounded) and return them in a stable order."""
    probes: list[Callable[[], Check | list[Check]]] = [
        check_p4c,
        check_p4test,
        check_simple_switch_grpc,
        check_bmv2_build,
        check_thrift_server,
        check_simple_switch_cli,
        check_cli_thrift,
        check_mininet,
        check_root,
        check_venv,
        check_tna,
    ]
    with ThreadPoolExecutor(max_workers=len(probes)) as pool:
        results = list(pool.map(lambda fn: fn(), probes))
    checks: list[Check] = []
    for item in results:
        checks.extend(item if isinstance(item, list) else [item])
    return checks


def format_report(checks: Sequence[Check]) -> str:
    """Aligned text: ``name  found|MISSING  version-or-path  (hint)`` plus a summary line."""
    width = max(len(c.name) for c in checks) if checks else 0
    detail_width = min(max((len(c.detail) for c in checks), default=0), 50)
    lines = []
    for c in checks:
        status = "found" if c.found else "MISSING"
        line = f"{c.name:<{width}}  {status:<7}  {c.detail:<{detail_width}}"
        if not c.found and c.hint:
            line += f"  ({c.hint})"
        lines.append(line.rstrip())
    missing = [c.name for c in checks if c.required and not c.found]
    if missing:
        lines.append("doctor: required but missing: {}".format(", ".join(missing)))
    else:
        lines.append("doctor: all required tools found")
    return "\n".join(lines)


def doctor(strict: bool = False, as_json: bool = False) -> int:
    """``doctor``: print the report; with ``strict`` exit 1 if a required check failed."""
    checks = doctor_report()
    missing = [c.name for c in checks if c.required and not c.found]
    if as_json:
        payload = {
            "ok": not missing,
            "missing_required": missing,
            "checks": [asdict(c) for c in checks],
        }
        print(json.dumps(payload, indent=2))
    else:
        print(format_report(checks))
    return 1 if strict and missing else 0
