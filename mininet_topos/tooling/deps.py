"""``make deps``: install system packages, p4c/BMv2 where p4lang packages them, and the venv.

The plan is computed first, so ``--dry-run`` prints exactly what a run would do.

This module is standard-library only and avoids syntax newer than Python 3.8: ``make deps`` and
``make doctor`` run under the system ``/usr/bin/python3`` *before* the project venv exists.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mininet_topos.tooling.machine import (
    APT_PACKAGES,
    APT_TIMEOUT,
    BMV2_URL,
    P4_TOOLS,
    P4C_URL,
    P4LANG_KEY_BASE,
    P4LANG_KEY_FILE,
    P4LANG_LIST_FILE,
    P4LANG_PACKAGES,
    P4LANG_REPO_BASE,
    PI_URL,
    PIP_TIMEOUT,
    REPO_ROOT,
    STAMP_NAME,
    STEP_TIMEOUT,
    OsRelease,
    find_tool,
    p4lang_obs_dir,
    p4lang_supported_list,
    probe,
    read_os_release,
    read_pyvenv_cfg,
    system_python,
    venv_dir,
)

# --------------------------------------------------------------------------------------------
# deps
# --------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One thing ``deps`` does: run ``argv``, print ``message``, or call ``action``.

    ``skip_reason`` set means the step is already satisfied; ``--dry-run`` still shows it so
    the printed plan is the complete recipe for a fresh machine.
    """

    title: str
    argv: list[str] = field(default_factory=list)
    message: str = ""
    action: Callable[[], None] | None = None
    action_text: str = ""
    skip_reason: str = ""
    cwd: str | None = None
    timeout: float = STEP_TIMEOUT
    fatal: bool = False


@dataclass
class DepsPlan:
    """Everything ``deps`` will do, computed up front so ``--dry-run`` can print it exactly."""

    steps: list[Step] = field(default_factory=list)
    final_notices: list[str] = field(default_factory=list)


def banner(title: str, lines: Sequence[str]) -> str:
    """A framed block that stands out in the scroll of apt and pip output."""
    rule = "=" * 78
    body = ["!! " + title, rule, *("   " + line if line else "" for line in lines)]
    return "\n".join([rule, *body, rule])


def p4_missing_message(osr: OsRelease, missing: Sequence[str]) -> str:
    """The explanation printed when p4c/BMv2 cannot be installed from packages here."""
    return banner(
        "netcoll deps: P4 TOOLCHAIN NOT INSTALLED -- ACTION NEEDED",
        [
            "Missing: {}".format(", ".join(missing)),
            f"p4lang publishes no p4c/BMv2 packages for {osr.label}",
            f"(packages exist only for {p4lang_supported_list()}).",
            "Compiling P4 programs, the dataplane tests and the Mininet runs need them.",
            "",
            "Two ways out:",
            "1. Use the project VM (Ubuntu 24.04, p4lang packages installed; see Vagrantfile):",
            "     vagrant up && vagrant ssh -c 'cd /vagrant && sudo make test'",
            "2. Build from source, following each project's README:",
            "     p4c, tag v1.2.4.8 or later; only the targets p4c-bm2-ss and p4test are needed",
            "         " + P4C_URL,
            "     PI (the P4Runtime server library simple_switch_grpc links against)",
            "         " + PI_URL,
            "     behavioral-model 1.15.x configured --with-pi, for simple_switch_grpc",
            "         " + BMV2_URL,
            "   then run `make doctor` to check the result.",
            "",
            "The rest of `make deps` goes ahead; this alone is not treated as a failure.",
        ],
    )


def dpkg_installed(packages: Sequence[str]) -> set[str]:
    """Which of ``packages`` dpkg reports as installed (empty set if dpkg is unavailable)."""
    if not packages or not find_tool("dpkg-query"):
        return set()
    result = probe(["dpkg-query", "-W", "-f=${Package}\t${Status}\n", *packages])
    installed = set()
    for line in result.output.splitlines():
        name, _, status = line.partition("\t")
        if status.strip().endswith("install ok installed"):
            installed.add(name.split(":")[0])
    return installed


def python_version_of(interpreter: str) -> tuple[int, int] | None:
    """(major, minor) of an interpreter, or None if it cannot be run."""
    result = probe([interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
    match = re.fullmatch(r"(\d+)\.(\d+)", result.output.strip()) if result.ok else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def required_python(pyproject: Path) -> tuple[int, int] | None:
    """The ``>=X.Y`` lower bound of ``requires-python`` (tomllib is 3.11+, so a regex)."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r'requires-python\s*=\s*"\s*>=\s*(\d+)\.(\d+)', text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def venv_stamp(pyproject: Path, interpreter: str, version: tuple[int, int] | None) -> str:
    """What the stamp in the venv must contain for ``pip install`` to be skipped.

    It changes when pyproject.toml (dependencies) or the base interpreter changes, e.g. when a
    venv created on the host is seen again inside the VM through a shared folder.
    """
    try:
        digest = hashlib.sha256(pyproject.read_bytes()).hexdigest()
    except OSError:
        digest = "no-pyproject"
    return f"pyproject-sha256={digest}\npython={interpreter} {version}\n"


def venv_problem(venv: Path, version: tuple[int, int] | None) -> str:
    """Why the venv must be (re)created, or '' if it is usable as is."""
    if not (venv / "bin" / "python").exists():
        return f"no venv at {venv}"
    cfg = read_pyvenv_cfg(venv)
    if cfg.get("include-system-site-packages", "").lower() != "true":
        return "venv lacks --system-site-packages (Mininet would not import)"
    venv_version = cfg.get("version_info") or cfg.get("version") or ""
    if version and not venv_version.startswith(f"{version[0]}.{version[1]}."):
        return f"venv built for Python {venv_version}, system Python is {version[0]}.{version[1]}"
    return ""


def plan_deps(
    osr: OsRelease,
    *,
    is_root: bool,
    venv: Path,
    interpreter: str,
    repo_root: Path = REPO_ROOT,
    which: Callable[[str], str | None] = find_tool,
    installed: Callable[[Sequence[str]], set[str]] = dpkg_installed,
    interpreter_version: Callable[[str], tuple[int, int] | None] = python_version_of,
) -> DepsPlan:
    """Compute every step of ``deps`` for this machine without changing anything.

    The probes are injectable so tests can plan for Ubuntu 22.04 while running on Debian 12.
    """
    plan = DepsPlan()
    sudo = [] if is_root else ["sudo"]
    apt = [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]

    # 1. Distribution packages.
    if osr.uses_apt:
        have = installed(APT_PACKAGES)
        missing_pkgs = [p for p in APT_PACKAGES if p not in have]
        skip = "" if missing_pkgs else f"all {len(APT_PACKAGES)} packages already installed"
        plan.steps.append(
            Step(
                "apt-get update",
                [*apt, "update"],
                skip_reason=skip,
                timeout=APT_TIMEOUT,
                fatal=True,
            )
        )
        plan.steps.append(
            Step(
                "system packages",
                [*apt, "install", "-y", *APT_PACKAGES],
                skip_reason=skip,
                timeout=APT_TIMEOUT,
                fatal=True,
            )
        )
    else:
        text = banner(
            f"netcoll deps: {osr.label} is not Debian/Ubuntu; install system packages yourself",
            [
                "deps only knows apt. Install the equivalents of:",
                "  " + " ".join(APT_PACKAGES),
                f"(Mininet for {interpreter}, scapy, and thrift for simple_switch_CLI).",
            ],
        )
        plan.steps.append(Step("system packages", message=text))
        plan.final_notices.append(text)

    # 2. p4c, BMv2 and PI from p4lang's packages, where they exist.
    missing_tools = [tool for tool in P4_TOOLS if not which(tool)]
    obs_dir = p4lang_obs_dir(osr)
    if not missing_tools:
        plan.steps.append(
            Step("p4lang packages", skip_reason=f"{' and '.join(P4_TOOLS)} already on PATH")
        )
    elif obs_dir and osr.uses_apt:
        repo_url = f"{P4LANG_REPO_BASE}/{obs_dir}/"
        key_url = f"{P4LANG_KEY_BASE}/{obs_dir}/Release.key"
        add_list = f"echo {shlex.quote(f'deb {repo_url} /')} > {P4LANG_LIST_FILE}"
        # pipefail: a failed download must not leave an empty key file behind.
        tmp_key = P4LANG_KEY_FILE + ".tmp"
        add_key = (
            f"curl -fsSL {shlex.quote(key_url)} | gpg --dearmor > {tmp_key}"
            f" && mv {tmp_key} {P4LANG_KEY_FILE}"
        )
        plan.steps += [
            Step("p4lang apt source", [*sudo, "sh", "-c", add_list], fatal=True),
            Step(
                "p4lang signing key", [*sudo, "bash", "-o", "pipefail", "-c", add_key], fatal=True
            ),
            Step("apt-get update (p4lang)", [*apt, "update"], timeout=APT_TIMEOUT, fatal=True),
            Step(
                "p4lang packages",
                [*apt, "install", "-y", *P4LANG_PACKAGES],
                timeout=APT_TIMEOUT,
                fatal=True,
            ),
        ]
    else:
        text = p4_missing_message(osr, missing_tools)
        plan.steps.append(Step("p4lang packages", message=text))
        plan.final_notices.append(text)

    # 3. The project venv on top of the system Python that Mininet is installed for.
    version = interpreter_version(interpreter)
    needed = required_python(repo_root / "pyproject.toml")
    if version is None and not osr.uses_apt:
        text = (
            f"netcoll deps: cannot run {interpreter} "
            "(set SYSTEM_PYTHON to the Python Mininet is installed for)"
        )
        plan.steps.append(Step("venv", message=text, fatal=True))
        return plan
    if version and needed and version < needed:
        text = banner(
            f"netcoll deps: {interpreter} is Python {version[0]}.{version[1]}, "
            f"the project needs >= {needed[0]}.{needed[1]}",
            [
                "Mininet is installed for the system Python, and the venv must be built on",
                "that same interpreter (--system-site-packages). Use a distribution whose",
                "python3 is new enough (e.g. Ubuntu 24.04, Debian 12; see the Vagrantfile), or",
                "point SYSTEM_PYTHON at a newer interpreter that can import mininet.",
            ],
        )
        plan.steps.append(Step("venv", message=text, fatal=True))
        return plan

    venv_python = str(venv / "bin" / "python")
    pyproject = repo_root / "pyproject.toml"
    problem = venv_problem(venv, version)
    stamp_path = venv / STAMP_NAME
    expected = venv_stamp(pyproject, interpreter, version)
    try:
        current = stamp_path.read_text(encoding="utf-8")
    except OSError:
        current = ""
    up_to_date = (
        "" if problem or current != expected else "venv up to date: stamp matches pyproject.toml"
    )

    create = [interpreter, "-m", "venv", "--system-site-packages"]
    if problem and (venv / "pyvenv.cfg").exists():
        create.append("--clear")  # a venv for another interpreter cannot be upgraded in place
    plan.steps.append(
        Step(
            "create venv",
            [*create, str(venv)],
            skip_reason="" if problem else f"venv exists at {venv}",
            fatal=True,
        )
    )
    plan.steps.append(
        Step(
            "install project",
            [venv_python, "-m", "pip", "install", "-e", ".[dev]"],
            skip_reason=up_to_date,
            cwd=str(repo_root),
            timeout=PIP_TIMEOUT,
            fatal=True,
        )
    )

    # ns-3 for `make simulate`: wheels exist for some Pythons and platforms only, so a
    # failure here is reported and the rest of the project still installs
    plan.steps.append(
        Step(
            "install ns-3 (optional, for make simulate)",
            [venv_python, "-m", "pip", "install", "-e", ".[sim]"],
            skip_reason=up_to_date,
            cwd=str(repo_root),
            timeout=PIP_TIMEOUT,
        )
    )

    def write_stamp() -> None:
        stamp_path.write_text(venv_stamp(pyproject, interpreter, version), encoding="utf-8")

    plan.steps.append(
        Step(
            "stamp",
            action=write_stamp,
            skip_reason=up_to_date,
            action_text=f"write {stamp_path}",
        )
    )
    return plan


def run_plan(plan: DepsPlan, *, dry_run: bool, out: Callable[[str], None] = print) -> int:
    """Execute (or, with ``dry_run``, print) the plan; return the process exit code.

    A failing fatal step stops the plan; the final notices (e.g. the missing P4 toolchain) are
    printed either way, last, where they cannot scroll out of sight.
    """
    status = 0
    for step in plan.steps:
        if not _run_step(step, dry_run=dry_run, out=out):
            status = 1
            break
    for notice in plan.final_notices:
        out("")
        out(notice)
    if status:
        out("netcoll deps: FAILED (see the step above)")
    else:
        out(f"netcoll deps: {'dry run, nothing was changed' if dry_run else 'done'}")
    return status


def _run_step(step: Step, *, dry_run: bool, out: Callable[[str], None]) -> bool:
    """Print and (unless ``dry_run``) perform one step; False if a fatal step failed."""
    shown = shlex.join(step.argv) if step.argv else step.action_text
    if step.cwd and step.argv:
        shown = f"cd {shlex.quote(step.cwd)} && {shown}"
    if step.message:
        out(step.message)
        return not step.fatal
    if step.skip_reason:
        out(f"# skip {step.title} ({step.skip_reason})" + (f": {shown}" if shown else ""))
        return True
    out(f"+ {shown}")
    if dry_run:
        return True
    error = ""
    try:
        if step.action is not None:
            step.action()
        else:
            proc = subprocess.run(step.argv, cwd=step.cwd, timeout=step.timeout, check=False)
            if proc.returncode != 0:
                error = f"exit status {proc.returncode}"
    except subprocess.TimeoutExpired:
        error = f"timed out after {step.timeout:.0f} s"
    except OSError as exc:
        error = str(exc)
    if not error:
        return True
    out(f"netcoll deps: step '{step.title}' failed ({error}): {shown}")
    return not step.fatal


def deps_main(dry_run: bool = False) -> int:
    """``deps``: install system packages, the P4 toolchain where packaged, and the venv."""
    is_root = os.geteuid() == 0
    if not is_root and not dry_run and not find_tool("sudo"):
        print("netcoll deps: not root and sudo is not installed; run it as root.")
        return 1
    osr = read_os_release()
    print(f"netcoll deps: {osr.label}, {'root' if is_root else 'using sudo'}")
    plan = plan_deps(osr, is_root=is_root, venv=venv_dir(), interpreter=system_python())
    return run_plan(plan, dry_run=dry_run)
