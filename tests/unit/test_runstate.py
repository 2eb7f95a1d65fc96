"""Run-state registry and `make stop`: real processes, real veths and netns, real crashes.

The point of the registry is that `make stop` removes exactly what a run recorded, even after
the run was SIGKILLed, and never anything else (no name matching, no reused PIDs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mininet_topos.tooling import stop
from mininet_topos.tooling.cleanup import Item, StopReport, stop_all
from mininet_topos.tooling.registry import (
    PREFIX,
    RunRegistry,
    RunStateError,
    check_ifname,
    proc_info,
)
from mininet_topos.tooling.runs import list_runs, load_run

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root to create veths and netns")


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start `sleep 60` children; whatever a test leaves alive is killed afterwards."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)


def sleeper(procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["sleep", "60"])
    procs.append(proc)
    return proc


def running(pid: int) -> bool:
    """Alive and not a zombie (orphans may wait a moment for their reaper)."""
    info = proc_info(pid)
    return info is not None and not info.exited


def rewrite_records(path: Path, edit: dict[str, object], kind: str) -> None:
    lines = path.read_text().splitlines()
    out = []
    for line in lines:
        record = json.loads(line)
        if record["kind"] == kind:
            record.update(edit)
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n")


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=False)


def kinds(items: list[Item], kind: str) -> list[Item]:
    return [item for item in items if item.kind == kind]


# ------------------------------------------------------------------------------------------
# names
# ------------------------------------------------------------------------------------------


def test_prefix_and_ifname_rules() -> None:
    assert PREFIX == "nc"
    assert check_ifname("ncs1-eth1") == "ncs1-eth1"
    assert check_ifname("nc" + "x" * 13) == "nc" + "x" * 13  # exactly 15
    with pytest.raises(ValueError, match=r"16 characters.*at most 15"):
        check_ifname("nc" + "x" * 14)
    with pytest.raises(ValueError, match="prefix 'nc'"):
        check_ifname("s1-eth1")
    with pytest.raises(ValueError, match="letters, digits"):
        check_ifname("nc a")
    with pytest.raises(ValueError):
        check_ifname("")


def test_registry_validates_before_recording(state_dir: Path) -> None:
    reg = RunRegistry("ncnames", state_dir)
    with pytest.raises(ValueError, match="at most 15"):
        reg.record_link("ncs12-eth12-long")
    with pytest.raises(ValueError, match="prefix"):
        reg.record_netns("h1")
    with pytest.raises(ValueError, match="refusing"):
        reg.record_file(Path("/tmp"))
    with pytest.raises(ValueError, match="run name"):
        RunRegistry("../escape", state_dir)
    reg.close()


# ------------------------------------------------------------------------------------------
# the state file
# ------------------------------------------------------------------------------------------


def test_records_are_on_disk_immediately_and_close_removes_the_file(
    state_dir: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    proc = sleeper(spawn)
    reg = RunRegistry("ncrec", state_dir)
    assert reg.path == state_dir / "ncrec.jsonl"
    assert reg.path.stat().st_mode & 0o777 == 0o600
    reg.record_process(proc.pid, "sleeper")
    reg.record_link("ncrec0")
    reg.record_netns("ncrecns")
    reg.record_file(state_dir / "sock")
    # Read while the registry is still open: every record must already be there.
    records = [json.loads(line) for line in reg.path.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["run", "process", "link", "netns", "file"]
    process = records[1]
    assert process["pid"] == proc.pid
    assert process["argv0"] == "sleep"
    assert process["role"] == "sleeper"
    stat_fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    assert process["start_time"] == int(stat_fields[19])  # field 22 of /proc/<pid>/stat

    run = load_run(reg.path)
    assert run.owner_pid == os.getpid() and run.owner_alive
    assert run.links == ["ncrec0"] and run.netns == ["ncrecns"]
    assert run.files == [state_dir / "sock"]
    assert f"pid {proc.pid} sleeper (sleep)" in run.describe()

    reg.close()
    reg.close()  # idempotent
    assert not reg.path.exists()
    with pytest.raises(RunStateError, match="closed"):
        reg.record_link("ncrec1")


def test_same_run_name_twice_is_refused(state_dir: Path) -> None:
    reg = RunRegistry("ncdup", state_dir)
    with pytest.raises(RunStateError, match=r"already exists.*make stop"):
        RunRegistry("ncdup", state_dir)
    reg.close()
    RunRegistry("ncdup", state_dir).close()


def test_context_manager_keeps_state_when_the_run_failed(state_dir: Path) -> None:
    with RunRegistry("ncok", state_dir) as reg:
        reg.record_link("ncok0")
    assert not (state_dir / "ncok.jsonl").exists()
    with pytest.raises(RuntimeError), RunRegistry("ncfail", state_dir) as reg:
        reg.record_link("ncfail0")
        raise RuntimeError("run crashed")
    assert [run.name for run in list_runs(state_dir)] == ["ncfail"]


def test_recording_an_exited_process_fails_clearly(state_dir: Path) -> None:
    proc = subprocess.Popen(["true"])
    proc.wait(timeout=5)
    with RunRegistry("ncgone", state_dir) as reg, pytest.raises(ProcessLookupError):
        reg.record_process(proc.pid, "too late")


def test_unsafe_state_dir_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(RunStateError, match="writable by group/others"):
        RunRegistry("ncx", shared)
    with pytest.raises(RunStateError, match="writable by group/others"):
        list_runs(shared)
    report = stop_all(shared)
    assert not report.ok and "writable" in str(report)


def test_env_var_selects_the_state_dir(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCOLL_STATE_DIR", str(state_dir))
    reg = RunRegistry("ncenv")
    assert reg.path.parent == state_dir
    reg.close()


# ------------------------------------------------------------------------------------------
# stop_all on processes
# ------------------------------------------------------------------------------------------


def test_stop_all_kills_recorded_processes_only(
    state_dir: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    recorded = [sleeper(spawn), sleeper(spawn)]
    bystander = sleeper(spawn)
    reg = RunRegistry("ncprocs", state_dir)
    for number, proc in enumerate(recorded):
        reg.record_process(proc.pid, f"sleeper{number}")
    reg.detach()

    report = stop_all(state_dir, timeout=5)
    assert report.ok, str(report)
    assert {item.name for item in kinds(report.removed, "process")} == {
        f"pid {p.pid} sleeper{n} (sleep)" for n, p in enumerate(recorded)
    }
    for proc in recorded:
        assert proc.wait(timeout=5) == -signal.SIGTERM
    assert bystander.poll() is None
    assert not (state_dir / "ncprocs.jsonl").exists()
    assert "removed 2 (2 processes)" in str(report)
    assert stop_all(state_dir).runs == []  # nothing left


def test_reused_pid_is_not_killed(state_dir: Path, spawn: list[subprocess.Popen[bytes]]) -> None:
    proc = sleeper(spawn)
    reg = RunRegistry("ncreuse", state_dir)
    reg.record_process(proc.pid, "victim")
    reg.detach()
    info = proc_info(proc.pid)
    assert info is not None
    # Pretend the recorded process had started one tick later: same PID, different process.
    rewrite_records(reg.path, {"start_time": info.start_time + 1}, "process")

    report = stop_all(state_dir, timeout=1)
    assert report.ok, str(report)
    assert proc.poll() is None, "a PID whose start time differs must never be signalled"
    gone = kinds(report.already_gone, "process")
    assert len(gone) == 1 and "belongs to another process" in gone[0].detail
    assert not reg.path.exists()


def test_sigterm_ignorer_gets_sigkill_after_timeout(state_dir: Path) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with RunRegistry("ncstubborn", state_dir) as reg:
            reg.record_process(proc.pid, "stubborn")
            reg.detach()
        started = time.monotonic()
        report = stop_all(state_dir, timeout=0.3)
        assert time.monotonic() - started < 5
        assert report.ok, str(report)
        assert "SIGKILL" in kinds(report.removed, "process")[0].detail
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


CRASH_CHILD = r"""
import os, signal, subprocess, sys
from pathlib import Path
from mininet_topos.tooling.registry import RunRegistry

state_dir, veth_a, veth_b, netns = Path(sys.argv[1]), *sys.argv[2:5]
reg = RunRegistry("nccrash", state_dir)
orphan = subprocess.Popen(["sleep", "60"], start_new_session=True, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
reg.record_process(orphan.pid, "orphan")
if veth_a:
    reg.record_link(veth_a)
    reg.record_link(veth_b)
    subprocess.run(["ip", "link", "add", veth_a, "type", "veth", "peer", "name", veth_b],
                   check=True, timeout=10)
    reg.record_netns(netns)
    subprocess.run(["ip", "netns", "add", netns], check=True, timeout=10)
print(orphan.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def run_crashing_child(state_dir: Path, *names: str) -> int:
    """Record (and create) things in a child that then SIGKILLs itself; return the orphan pid."""
    args = list(names) or ["", "", ""]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    child = subprocess.run(
        [sys.executable, "-c", CRASH_CHILD, str(state_dir), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    return int(child.stdout.strip())


def test_processes_of_a_sigkilled_run_are_stopped(state_dir: Path) -> None:
    orphan = run_crashing_child(state_dir)
    try:
        assert running(orphan)
        (run,) = list_runs(state_dir)
        assert not run.owner_alive
        assert "creator gone" in run.describe()
        report = stop_all(state_dir, timeout=5)
        assert report.ok, str(report)
        deadline = time.monotonic() + 5
        while running(orphan) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(orphan)
        assert list_runs(state_dir) == []
    finally:
        if running(orphan):
            os.kill(orphan, signal.SIGKILL)


# ------------------------------------------------------------------------------------------
# stop_all on links, netns and files
# ------------------------------------------------------------------------------------------


@needs_root
def test_links_and_netns_of_a_sigkilled_run_are_removed(state_dir: Path) -> None:
    tag = f"{os.getpid() % 10000:04d}"
    veth_a, veth_b, netns = f"nct{tag}a", f"nct{tag}b", f"nctns{tag}"
    other_a, other_b = f"nct{tag}x", f"nct{tag}y"  # same prefix, never recorded
    for name in (veth_a, other_a):  # leftovers of an earlier aborted run of this test
        ip("link", "del", "dev", name)
    ip("netns", "del", netns)
    orphan = 0
    try:
        created = ip("link", "add", other_a, "type", "veth", "peer", "name", other_b)
        assert created.returncode == 0, created.stderr
        orphan = run_crashing_child(state_dir, veth_a, veth_b, netns)
        assert veth_a in ip("-o", "link", "show").stdout
        assert netns in ip("netns", "list").stdout

        report = stop_all(state_dir, timeout=5)
        assert report.ok, str(report)
        assert {i.name for i in kinds(report.removed, "link")} == {veth_a}
        # Deleting one end of a veth removes its peer: reported, not an error.
        assert {i.name for i in kinds(report.already_gone, "link")} == {veth_b}
        assert {i.name for i in kinds(report.removed, "netns")} == {netns}
        links = ip("-o", "link", "show").stdout
        assert veth_a not in links and veth_b not in links
        assert netns not in ip("netns", "list").stdout
        assert other_a in links and other_b in links, "an unrecorded veth must survive"
        assert not running(orphan)
        assert list_runs(state_dir) == []
    finally:
        ip("link", "del", "dev", other_a)
        ip("link", "del", "dev", veth_a)
        ip("netns", "del", netns)
        if orphan and running(orphan):
            os.kill(orphan, signal.SIGKILL)


@pytest.mark.skipif(not IS_ROOT, reason="needs root to chown a state file to another user")
def test_state_written_by_another_user_is_not_acted_on(
    state_dir: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    proc = sleeper(spawn)
    reg = RunRegistry("ncforeign", state_dir)
    reg.record_process(proc.pid, "sleeper")
    reg.detach()
    os.chown(reg.path, 65534, 65534)  # as if user `nobody` had written it
    report = stop_all(state_dir, timeout=1)
    assert not report.ok
    assert "belongs to uid 65534" in str(report)
    assert proc.poll() is None
    assert reg.path.exists()


def test_files_dirs_and_symlinks(state_dir: Path, tmp_path: Path) -> None:
    plain, tree = tmp_path / "nc.sock", tmp_path / "nc-tmp"
    target = tmp_path / "precious"
    link = tmp_path / "nc-link"
    plain.write_text("x")
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_text("x")
    target.mkdir()
    (target / "keep").write_text("x")
    link.symlink_to(target)
    with RunRegistry("ncfiles", state_dir) as reg:
        for path in (plain, tree, link, tmp_path / "never-created"):
            reg.record_file(path)
        reg.detach()
    report = stop_all(state_dir)
    assert report.ok, str(report)
    assert not plain.exists() and not tree.exists() and not link.exists()
    assert (target / "keep").exists(), "a recorded symlink is removed, not what it points to"
    assert [i.name for i in kinds(report.already_gone, "file")] == [str(tmp_path / "never-created")]


def test_damaged_state_files(state_dir: Path, spawn: list[subprocess.Popen[bytes]]) -> None:
    proc = sleeper(spawn)
    with RunRegistry("nctorn", state_dir) as reg:
        reg.record_process(proc.pid, "sleeper")
        reg.detach()
    with open(reg.path, "a") as handle:  # the writer died in mid-write
        handle.write('{"kind": "link", "ifn')
    run = load_run(reg.path)
    assert not run.problems and run.notes and len(run.processes) == 1
    report = stop_all(state_dir, timeout=5)
    assert report.ok, str(report)
    assert proc.wait(timeout=5) == -signal.SIGTERM

    with RunRegistry("ncbad", state_dir) as reg:
        reg.record_link("ncbad0")
        reg.detach()
    with open(reg.path, "a") as handle:
        handle.write("not json\n")
        handle.write('{"kind": "link", "ifname": "eth0"}\n')  # unprefixed: never removed
    report = stop_all(state_dir, timeout=1)
    assert not report.ok
    text = str(report)
    assert "line 3: not valid JSON" in text and "prefix" in text
    assert [i.name for i in kinds(report.already_gone, "link")] == ["ncbad0"]
    assert reg.path.exists(), "a damaged state file is kept for a human to look at"


def test_stop_report_summary() -> None:
    report = StopReport(
        removed=[Item("process", "pid 1 a"), Item("link", "nc0"), Item("state", "/x")],
        already_gone=[Item("link", "nc1")],
        runs=["r"],
    )
    assert str(report) == (
        "stop: 1 run(s); removed 2 (1 link, 1 process); 1 already gone; no errors"
    )
    report.errors.append(Item("netns", "ncns", "r", "Operation not permitted"))
    assert not report.ok
    assert "1 error(s)" in str(report)
    assert "error: netns ncns: Operation not permitted [run r]" in str(report)


def test_stop_all_without_state_dir(tmp_path: Path) -> None:
    report = stop_all(tmp_path / "absent")
    assert report.ok and not report.removed and str(report).startswith("stop: 0 run(s)")


# ------------------------------------------------------------------------------------------
# netcoll-stop
# ------------------------------------------------------------------------------------------


def test_stop_cli(
    state_dir: Path, spawn: list[subprocess.Popen[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert stop.main(["--state-dir", str(state_dir)]) == 0
    assert "nothing to do" in capsys.readouterr().out

    proc = sleeper(spawn)
    with RunRegistry("nccli", state_dir) as reg:
        reg.record_process(proc.pid, "cli-sleeper")
        reg.detach()
    assert stop.main(["--state-dir", str(state_dir), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "run nccli" in out and "cli-sleeper" in out and "nothing was changed" in out
    assert proc.poll() is None

    assert stop.main(["--state-dir", str(state_dir), "--timeout", "5", "-v"]) == 0
    out = capsys.readouterr().out
    assert "removed: process" in out and "no errors" in out
    assert proc.wait(timeout=5) == -signal.SIGTERM


def test_stop_cli_requires_root_for_links(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with RunRegistry("ncneedroot", state_dir) as reg:
        reg.record_link("ncneedroot0")
        reg.detach()
    fake_euid = os.geteuid() or 1000  # anyone but root
    monkeypatch.setattr(os, "geteuid", lambda: fake_euid)
    assert stop.main(["--state-dir", str(state_dir)]) == 1
    err = capsys.readouterr().err
    assert "needs root" in err and "sudo make stop" in err and "Nothing was changed" in err
    assert reg.path.exists()
