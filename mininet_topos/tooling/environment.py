"""Machine setup for netcoll: ``deps`` installs what it needs, ``doctor`` reports what is there.

Usage::

    python3 -m mininet_topos.environment deps [--dry-run]
    python3 -m mininet_topos.environment doctor [--strict] [--json]

This module is deliberately standard-library only and avoids syntax newer than Python 3.8:
``make deps`` runs it with the system ``/usr/bin/python3`` *before* the project venv exists,
on whatever Ubuntu/Debian release the user has, so it must at least start and explain itself.

Environment variables:

``VENV``            the project venv (default ``.venv`` in the repository root)
``SYSTEM_PYTHON``   the interpreter Mininet is installed for (default ``/usr/bin/python3``)
``TNA_INCLUDE_DIR`` directory holding ``tna.p4`` for ``make build-tna`` (optional)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository checkout (parent of ``mininet_topos/``); relative ``VENV`` paths start here."""

# --------------------------------------------------------------------------------------------
# What the project needs. Keep every package list here, in one place.
# --------------------------------------------------------------------------------------------

APT_PACKAGES: tuple[str, ...] = (
    "mininet",
    "python3-scapy",
    "python3-venv",
    "python3-pip",
    "python3-thrift",  # BMv2's simple_switch_CLI imports thrift in the system interpreter
    "iproute2",
    "ethtool",
    "tcpdump",
    "iputils-ping",
    "curl",
    "gnupg",
    "make",
    "git",
)
"""Debian/Ubuntu packages installed by ``deps`` (curl and gnupg also fetch the p4lang key)."""

P4LANG_PACKAGES: tuple[str, ...] = ("p4lang-p4c", "p4lang-bmv2", "p4lang-pi")
"""p4lang's own packages: p4c (p4c-bm2-ss, p4test), BMv2 (simple_switch_grpc) and PI."""

P4_TOOLS: tuple[str, ...] = ("p4c-bm2-ss", "simple_switch_grpc")
"""The P4 binaries the project cannot work without; p4lang packages are skipped if present."""

P4LANG_REPO_BASE = "http://download.opensuse.org/repositories/home:/p4lang"
P4LANG_KEY_BASE = "https://download.opensuse.org/repositories/home:/p4lang"
P4LANG_OBS_DIRS: dict[tuple[str, str], str] = {
    ("ubuntu", "20.04"): "xUbuntu_20.04",
    ("ubuntu", "22.04"): "xUbuntu_22.04",
    ("ubuntu", "24.04"): "xUbuntu_24.04",
    ("debian", "11"): "Debian_11",
}
"""Distributions for which p4lang publishes packages on the openSUSE Build Service."""

P4LANG_LIST_FILE = "/etc/apt/sources.list.d/home:p4lang.list"
P4LANG_KEY_FILE = "/etc/apt/trusted.gpg.d/home_p4lang.gpg"

P4C_URL = "https://github.com/p4lang/p4c"
BMV2_URL = "https://github.com/p4lang/behavioral-model"
PI_URL = "https://github.com/p4lang/PI"

VENV_MODULES: tuple[tuple[str, str], ...] = (
    ("finsy", "finsy"),
    ("grpc", "grpcio"),
    ("google.protobuf", "protobuf"),
    ("scapy", "scapy"),
    ("pytest", "pytest"),
    ("ruff", "ruff"),
    ("mypy", "mypy"),
)
"""(import name, distribution name) of the Python packages ``doctor`` expects in the venv."""

REQUIRED_CHECKS: frozenset[str] = frozenset(
    {"p4c-bm2-ss", "simple_switch_grpc", "mininet", "root", "venv"}
)
"""Checks whose failure makes ``doctor --strict`` exit 1; everything else is advisory."""

DEFAULT_SYSTEM_PYTHON = "/usr/bin/python3"
DEFAULT_VENV = ".venv"
STAMP_NAME = ".netcoll-deps-stamp"
CHECK_TIMEOUT = 10.0
"""Seconds any single doctor probe may take; a hung tool becomes a 'timed out' line."""
APT_TIMEOUT = 3600.0
PIP_TIMEOUT = 1800.0
STEP_TIMEOUT = 600.0

# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResult:
    """Outcome of one bounded subprocess call; ``error`` explains why it could not run."""

    returncode: int | None
    output: str
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.error


def probe(argv: Sequence[str], timeout: float = CHECK_TIMEOUT) -> ProbeResult:
    """Run ``argv`` with a timeout, merging stdout and stderr, never raising.

    Doctor must turn every failure mode (missing binary, crash, hang) into one readable line,
    so all of them come back as data rather than exceptions.
    """
    try:
        proc = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(None, "", f"timed out after {timeout:.0f} s: {shlex.join(argv)}")
    except OSError as exc:
        return ProbeResult(None, "", f"cannot run {argv[0]}: {exc.strerror or exc}")
    text = proc.stdout.decode("utf-8", errors="replace").strip()
    return ProbeResult(proc.returncode, text)


def find_tool(name: str) -> str | None:
    """Locate an executable on PATH, then in /usr/local/bin and /usr/bin.

    ``sudo`` and ``make`` sometimes run with a reduced PATH; source builds land in /usr/local.
    """
    found = shutil.which(name)
    if found:
        return found
    for directory in ("/usr/local/bin", "/usr/bin", "/usr/local/sbin", "/usr/sbin"):
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def first_line(text: str, limit: int = 80) -> str:
    """The first non-empty line of ``text``, shortened, for one-line reports."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def system_python() -> str:
    """The interpreter Mininet is installed for (env ``SYSTEM_PYTHON``)."""
    return os.environ.get("SYSTEM_PYTHON") or DEFAULT_SYSTEM_PYTHON


def venv_dir() -> Path:
    """The project venv (env ``VENV``); relative paths are taken from the repository root."""
    path = Path(os.environ.get("VENV") or DEFAULT_VENV)
    return path if path.is_absolute() else REPO_ROOT / path


# --------------------------------------------------------------------------------------------
# Distribution detection
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OsRelease:
    """The few /etc/os-release fields that decide how dependencies are installed."""

    id: str
    version_id: str
    id_like: tuple[str, ...] = ()
    pretty_name: str = ""

    @property
    def uses_apt(self) -> bool:
        family = {self.id, *self.id_like}
        return bool(family & {"debian", "ubuntu"})

    @property
    def label(self) -> str:
        return self.pretty_name or (f"{self.id} {self.version_id}").strip()


def read_os_release(path: Path | None = None) -> OsRelease:
    """Parse os-release (``/etc/os-release``, falling back to ``/usr/lib/os-release``)."""
    candidates = [path] if path else [Path("/etc/os-release"), Path("/usr/lib/os-release")]
    for candidate in candidates:
        try:
            text = candidate.read_text(encoding="utf-8")
        except OSError:
            continue
        values: dict[str, str] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, _, raw = line.partition("=")
            try:
                parts = shlex.split(raw)
            except ValueError:
                parts = [raw.strip("\"'")]
            values[key.strip()] = parts[0] if parts else ""
        return OsRelease(
            id=values.get("ID", "unknown").lower(),
            version_id=values.get("VERSION_ID", ""),
            id_like=tuple(values.get("ID_LIKE", "").lower().split()),
            pretty_name=values.get("PRETTY_NAME", ""),
        )
    return OsRelease(id="unknown", version_id="", pretty_name="unknown (no os-release)")


def p4lang_obs_dir(osr: OsRelease) -> str | None:
    """The OBS directory holding p4lang packages for this distribution, or None if none."""
    return P4LANG_OBS_DIRS.get((osr.id, osr.version_id))


def p4lang_supported_list() -> str:
    """Human list of the distributions p4lang publishes packages for."""
    names = []
    for (dist, version), _ in P4LANG_OBS_DIRS.items():
        names.append("{} {}".format("Ubuntu" if dist == "ubuntu" else "Debian", version))
    return ", ".join(names)


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


def read_pyvenv_cfg(venv: Path) -> dict[str, str]:
    """The key = value pairs of ``<venv>/pyvenv.cfg`` (empty if absent)."""
    values: dict[str, str] = {}
    try:
        text = (venv / "pyvenv.cfg").read_text(encoding="utf-8")
    except OSError:
        return values
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    return values


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


# Which simple_switch_grpc runs: a path or a name on PATH. A build for timing (configured
# without logging macros, event logger and packet trace, at -O3) is several times faster than
# the default one; install it under its own prefix and point NETCOLL_BMV2 (make BMV2=...) at it.
BMV2_ENV = "NETCOLL_BMV2"


def default_bmv2() -> str:
    return os.environ.get(BMV2_ENV) or "simple_switch_grpc"


# A per-packet debug message BMv2 compiles in only with its logging macros: present in the
# default build, absent from one built for timing (its --help is the same either way).
BMV2_LOGGING_MARK = b"Processing packet received on port"


def bmv2_flavour(binary: str) -> str:
    """``logging`` for BMv2's default build, ``speed`` for one built without logging macros
    (the timing build), ``missing`` when there is no such binary."""
    path = shutil.which(binary)
    if path is None:
        return "missing"
    try:
        with open(path, "rb") as image:
            return "logging" if BMV2_LOGGING_MARK in image.read() else "speed"
    except OSError:
        return "missing"


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


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m mininet_topos.environment",
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
    """Entry point for ``python3 -m mininet_topos.environment``."""
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
