"""What the project needs and what this machine is: the package lists, bounded probes of
tools, the distribution, the venv's place, and which BMv2 binary runs (``NETCOLL_BMV2``).

This module is standard-library only and avoids syntax newer than Python 3.8: ``make deps`` and
``make doctor`` run under the system ``/usr/bin/python3`` *before* the project venv exists.

Environment variables:

``VENV``            the project venv (default ``.venv`` in the repository root)
``SYSTEM_PYTHON``   the interpreter Mininet is installed for (default ``/usr/bin/python3``)
``TNA_INCLUDE_DIR`` directory holding ``tna.p4`` for ``make build-tna`` (optional)
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
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
