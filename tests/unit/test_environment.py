"""`deps` plans (dry run, never installing anything) and the `doctor` report."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mininet_topos.tooling import deps, doctor, environment, machine
from mininet_topos.tooling.deps import plan_deps, run_plan
from mininet_topos.tooling.doctor import Check, format_report
from mininet_topos.tooling.machine import (
    APT_PACKAGES,
    P4LANG_PACKAGES,
    OsRelease,
    probe,
    read_os_release,
)

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLING = REPO_ROOT / "mininet_topos" / "tooling"
SYSTEM_PYTHON = "/usr/bin/python3"

DEBIAN_12 = OsRelease("debian", "12", (), "Debian GNU/Linux 12 (bookworm)")
UBUNTU_2204 = OsRelease("ubuntu", "22.04", ("debian",), "Ubuntu 22.04.4 LTS")


def run_module(
    *args: str, timeout: float = 30, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    """Run the module the way `make` does: the system Python, from the repository root."""
    python = SYSTEM_PYTHON if Path(SYSTEM_PYTHON).exists() else sys.executable
    return subprocess.run(
        [python, "-m", "mininet_topos.tooling.environment", *args],
        cwd=REPO_ROOT,
        env={**os.environ, **extra_env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def plan_text(osr: OsRelease, tmp_path: Path, **kwargs: object) -> tuple[int, str]:
    """Plan deps for ``osr`` with nothing installed, dry-run it, return (status, output)."""
    defaults: dict[str, object] = {
        "is_root": True,
        "venv": tmp_path / "venv",
        "interpreter": "/usr/bin/python3",
        "which": lambda name: None,
        "installed": lambda packages: set(),
        "interpreter_version": lambda interpreter: (3, 12),
    }
    defaults.update(kwargs)
    plan = plan_deps(osr, **defaults)  # type: ignore[arg-type]
    lines: list[str] = []
    status = run_plan(plan, dry_run=True, out=lines.append)
    return status, "\n".join(lines)


# ------------------------------------------------------------------------------------------
# the module itself
# ------------------------------------------------------------------------------------------


def test_tooling_is_stdlib_only_and_old_python_compatible() -> None:
    """deps, doctor and stop run under the system python3 before the venv exists, on older LTS
    releases too: the tooling room (and the package above it) imports the standard library and
    itself only."""
    sources = [*TOOLING.glob("*.py"), TOOLING.parent / "__init__.py"]
    for source in sources:
        tree = ast.parse(source.read_text(), feature_version=(3, 8))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module)
        outside = {
            name
            for name in imported - {"__future__"}
            if name.split(".")[0] not in sys.stdlib_module_names
            and not name.startswith("mininet_topos.tooling")
        }
        assert not outside, f"{source.name} imports {sorted(outside)}"


def test_read_os_release(tmp_path: Path) -> None:
    path = tmp_path / "os-release"
    path.write_text(
        'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\n'
        "ID=ubuntu\nID_LIKE=debian\n# comment\n"
    )
    osr = read_os_release(path)
    assert osr == OsRelease("ubuntu", "22.04", ("debian",), "Ubuntu 22.04.4 LTS")
    assert osr.uses_apt
    assert machine.p4lang_obs_dir(osr) == "xUbuntu_22.04"
    assert machine.p4lang_obs_dir(DEBIAN_12) is None
    assert machine.p4lang_obs_dir(OsRelease("debian", "11")) == "Debian_11"
    assert not OsRelease("fedora", "40").uses_apt


# ------------------------------------------------------------------------------------------
# deps
# ------------------------------------------------------------------------------------------


def test_deps_dry_run_on_this_machine() -> None:
    result = run_module("deps", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    apt_lines = [line for line in out.splitlines() if "apt-get install" in line]
    assert any("mininet" in line and "python3-thrift" in line for line in apt_lines), out
    assert "DEBIAN_FRONTEND=noninteractive" in out
    assert "--system-site-packages" in out and "pip install -e '.[dev]'" in out
    assert "dry run, nothing was changed" in out
    osr = read_os_release()
    tools_present = all(machine.find_tool(tool) for tool in machine.P4_TOOLS)
    if tools_present:
        assert "# skip p4lang packages" in out
    elif (osr.id, osr.version_id) == ("debian", "12"):
        assert out.count("p4lang publishes no p4c/BMv2 packages for Debian") == 2  # twice
        assert "vagrant up" in out and "v1.2.4.8" in out


def test_deps_honours_venv_and_system_python(tmp_path: Path) -> None:
    venv = tmp_path / "somevenv"
    result = run_module("deps", "--dry-run", VENV=str(venv), SYSTEM_PYTHON=sys.executable)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{sys.executable} -m venv --system-site-packages {venv}" in result.stdout
    assert f"{venv}/bin/python -m pip install -e" in result.stdout


def test_debian_12_gets_the_unmissable_message(tmp_path: Path) -> None:
    status, out = plan_text(DEBIAN_12, tmp_path)
    assert status == 0, "no p4lang packages for the distribution is not a failure"
    assert "apt-get install -y " + " ".join(APT_PACKAGES) in out
    assert "p4lang-p4c" not in out and "download.opensuse.org" not in out
    message = deps.p4_missing_message(DEBIAN_12, list(machine.P4_TOOLS))
    assert out.count(message) == 2, "printed where it happens and again at the very end"
    assert out.rstrip().endswith("dry run, nothing was changed")
    for needle in (
        "Missing: p4c-bm2-ss, simple_switch_grpc",
        "p4lang publishes no p4c/BMv2 packages for Debian GNU/Linux 12",
        "vagrant up",
        "v1.2.4.8",
        "p4c-bm2-ss and p4test",
        "1.15",
        machine.P4C_URL,
        machine.BMV2_URL,
        machine.PI_URL,
    ):
        assert needle in message


def test_ubuntu_gets_p4lang_packages_with_sudo(tmp_path: Path) -> None:
    status, out = plan_text(UBUNTU_2204, tmp_path, is_root=False)
    assert status == 0
    lines = out.splitlines()
    repo = "http://download.opensuse.org/repositories/home:/p4lang/xUbuntu_22.04/ /"
    assert any(line.startswith("+ sudo sh -c") and repo in line for line in lines), out
    assert any(
        "Release.key | gpg --dearmor > /etc/apt/trusted.gpg.d/home_p4lang" in line for line in lines
    )
    installs = [line for line in lines if "apt-get install" in line]
    assert installs[0].startswith("+ sudo env DEBIAN_FRONTEND=noninteractive apt-get install")
    assert installs[-1].endswith(" ".join(P4LANG_PACKAGES))
    # apt-get update runs before each install (the second one after adding the repository).
    updates = [n for n, line in enumerate(lines) if line.endswith("apt-get update")]
    assert len(updates) == 2 and updates[1] < lines.index(installs[-1])
    assert "TOOLCHAIN NOT INSTALLED" not in out


def test_p4lang_step_skipped_when_tools_on_path(tmp_path: Path) -> None:
    status, out = plan_text(UBUNTU_2204, tmp_path, which=lambda name: f"/usr/local/bin/{name}")
    assert status == 0
    assert "# skip p4lang packages (p4c-bm2-ss and simple_switch_grpc already on PATH)" in out
    assert "opensuse" not in out


def test_apt_skipped_when_everything_installed(tmp_path: Path) -> None:
    status, out = plan_text(DEBIAN_12, tmp_path, installed=lambda packages: set(packages))
    assert status == 0
    assert f"# skip system packages (all {len(APT_PACKAGES)} packages already installed)" in out


def test_too_old_system_python_fails_clearly(tmp_path: Path) -> None:
    status, out = plan_text(UBUNTU_2204, tmp_path, interpreter_version=lambda i: (3, 10))
    assert status == 1
    assert "is Python 3.10, the project needs >= 3.11" in out
    assert "pip install" not in out


def test_venv_steps_are_idempotent(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "pyvenv.cfg").write_text(
        "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.12.3\n"
    )
    _, out = plan_text(DEBIAN_12, tmp_path, venv=venv)
    assert "--system-site-packages --clear" in out, "a venv without system site is rebuilt"

    (venv / "pyvenv.cfg").write_text(
        "home = /usr/bin\ninclude-system-site-packages = true\nversion = 3.12.3\n"
    )
    _, out = plan_text(DEBIAN_12, tmp_path, venv=venv)
    assert "# skip create venv" in out
    assert "+ cd " in out and "pip install -e '.[dev]'" in out  # no stamp yet

    stamp = deps.venv_stamp(REPO_ROOT / "pyproject.toml", "/usr/bin/python3", (3, 12))
    (venv / machine.STAMP_NAME).write_text(stamp)
    _, out = plan_text(DEBIAN_12, tmp_path, venv=venv)
    assert "# skip install project (venv up to date" in out

    _, out = plan_text(DEBIAN_12, tmp_path, venv=venv, interpreter_version=lambda i: (3, 13))
    assert "--clear" in out, "a venv for another Python version is rebuilt"


def test_run_plan_executes_and_stops_at_a_failing_step(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    plan = deps.DepsPlan(
        steps=[
            deps.Step("ok", ["touch", str(marker)]),
            deps.Step("bad", ["false"], fatal=True),
            deps.Step("never", ["touch", str(tmp_path / "never")]),
        ]
    )
    lines: list[str] = []
    assert run_plan(plan, dry_run=False, out=lines.append) == 1
    assert marker.exists() and not (tmp_path / "never").exists()
    assert "netcoll deps: step 'bad' failed (exit status 1): false" in lines
    assert lines[-1] == "netcoll deps: FAILED (see the step above)"


# ------------------------------------------------------------------------------------------
# doctor
# ------------------------------------------------------------------------------------------


def test_doctor_json_is_quick_and_complete() -> None:
    started = time.monotonic()
    result = run_module("doctor", "--json", timeout=60)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert elapsed < 15, f"doctor took {elapsed:.1f} s"
    data = json.loads(result.stdout)
    checks = {check["name"]: check for check in data["checks"]}
    for name in (
        "p4c-bm2-ss",
        "p4test",
        "simple_switch_grpc",
        "simple_switch_grpc thrift",
        "simple_switch_CLI",
        "thrift (simple_switch_CLI)",
        "mininet",
        "root",
        "venv",
        "finsy",
        "grpc",
        "google.protobuf",
        "scapy",
        "pytest",
        "ruff",
        "mypy",
        "tna.p4 (optional)",
    ):
        assert name in checks, name
        assert isinstance(checks[name]["found"], bool)
        assert isinstance(checks[name]["detail"], str)
    assert checks["root"]["found"] == (os.geteuid() == 0)
    required = {name for name, check in checks.items() if check["required"]}
    assert required == set(machine.REQUIRED_CHECKS)
    missing = sorted(n for n in required if not checks[n]["found"])
    assert sorted(data["missing_required"]) == missing
    assert data["ok"] == (not missing)


def test_doctor_strict_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    status = environment.main(["doctor", "--strict"])
    out = capsys.readouterr().out
    assert status == (1 if "required but missing" in out else 0)
    assert environment.main(["doctor"]) == 0
    capsys.readouterr()


def test_probe_turns_hangs_and_missing_tools_into_lines() -> None:
    started = time.monotonic()
    hung = probe(["sleep", "10"], timeout=0.3)
    assert time.monotonic() - started < 5
    assert not hung.ok and "timed out after 0 s: sleep 10" in hung.error
    missing = probe(["/nonexistent/nc-tool", "--version"])
    assert not missing.ok and "cannot run /nonexistent/nc-tool" in missing.error


def test_report_is_aligned() -> None:
    checks = [
        Check("p4c-bm2-ss", False, "not on PATH", "install p4lang-p4c", True),
        Check("root", True, "euid 0", required=True),
        Check("google.protobuf", True, "5.29.0"),
    ]
    lines = format_report(checks).splitlines()
    status_columns = {
        line.index("found") if "found" in line else line.index("MISSING") for line in lines[:3]
    }
    assert len(status_columns) == 1
    assert lines[0].endswith("(install p4lang-p4c)")
    assert lines[-1] == "doctor: required but missing: p4c-bm2-ss"


def test_cli_interpreter_and_tna_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "simple_switch_CLI"
    script.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    assert doctor.script_interpreter(str(script)) == machine.find_tool("python3")
    script.write_text("#!/opt/py/bin/python3 -u\n")
    assert doctor.script_interpreter(str(script)) == "/opt/py/bin/python3"

    monkeypatch.setenv("TNA_INCLUDE_DIR", str(tmp_path))
    check = doctor.check_tna()
    assert not check.found and "has no tna.p4" in check.detail and not check.required
    (tmp_path / "tna.p4").write_text("// arch\n")
    check = doctor.check_tna()
    assert check.found and str(tmp_path) in check.detail
