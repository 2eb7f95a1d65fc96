"""Removing what runs recorded (``stop_all``, ``stop_run``): processes by PID and start time,
interfaces, netns and files, each named in a state file the registry trusts, nothing else."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mininet_topos.tooling.registry import (
    COMMAND_TIMEOUT,
    KILL_GRACE,
    LOCK_NAME,
    NETNS_DIR,
    RunStateError,
    fsync_dir,
    proc_info,
    resolve_state_dir,
)
from mininet_topos.tooling.runs import ProcessRecord, RunState, list_runs, load_run

# --------------------------------------------------------------------------------------------
# Removing: stop_all
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One line of a StopReport: a resource (or state file) and what happened to it."""

    kind: str
    name: str
    run: str = ""
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.kind} {self.name}"
        if self.detail:
            text += f": {self.detail}"
        if self.run:
            text += f" [run {self.run}]"
        return text


_PLURALS = {"process": "processes", "link": "links", "file": "files"}


@dataclass
class StopReport:
    """What ``stop_all`` removed, found already gone, and could not remove."""

    removed: list[Item] = field(default_factory=list)
    already_gone: list[Item] = field(default_factory=list)
    errors: list[Item] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    """Names of the runs whose state files were processed."""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def __str__(self) -> str:
        counts: dict[str, int] = {}
        for item in self.removed:
            if item.kind != "state":
                counts[item.kind] = counts.get(item.kind, 0) + 1
        removed = sum(counts.values())
        by_kind = ", ".join(
            f"{n} {kind if n == 1 else _PLURALS.get(kind, kind)}"
            for kind, n in sorted(counts.items())
        )
        summary = f"stop: {len(self.runs)} run(s); removed {removed}"
        if by_kind:
            summary += f" ({by_kind})"
        summary += f"; {len(self.already_gone)} already gone; "
        summary += f"{len(self.errors)} error(s)" if self.errors else "no errors"
        lines = [summary, *(f"  error: {item}" for item in self.errors)]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def _alive(proc: ProcessRecord) -> bool:
    """Still the very process that was recorded, and not yet exited?"""
    info = proc_info(proc.pid)
    return info is not None and not info.exited and info.start_time == proc.start_time


def _signal_if_same(proc: ProcessRecord, sig: int) -> str:
    """Send ``sig`` only if the PID still names the recorded process.

    Returns 'sent', 'gone' or 'reused'; raises PermissionError. With a pidfd the check and the
    signal address the same process even if the PID is recycled in between.
    """
    pidfd = -1
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(proc.pid)
    if pidfd < 0 and proc_info(proc.pid) is None:
        return "gone"
    try:
        info = proc_info(proc.pid)
        if info is None or info.exited:
            return "gone"
        if info.start_time != proc.start_time:
            return "reused"
        try:
            if pidfd >= 0:
                signal.pidfd_send_signal(pidfd, sig)
            else:
                os.kill(proc.pid, sig)
        except ProcessLookupError:
            return "gone"
        return "sent"
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _stop_processes(
    targets: list[tuple[str, ProcessRecord]], timeout: float, report: StopReport
) -> set[str]:
    """SIGTERM all, wait up to ``timeout``, SIGKILL the rest; return runs that had errors."""
    failed: set[str] = set()
    me = os.getpid()
    pending: list[tuple[str, ProcessRecord]] = []
    for run, proc in targets:
        item_name = str(proc)
        if proc.pid == me:
            report.already_gone.append(Item("process", item_name, run, "is netcoll-stop itself"))
            continue
        try:
            outcome = _signal_if_same(proc, signal.SIGTERM)
        except PermissionError:
            report.errors.append(
                Item("process", item_name, run, "not permitted to signal it (run as root?)")
            )
            failed.add(run)
            continue
        if outcome == "sent":
            pending.append((run, proc))
        elif outcome == "reused":
            report.already_gone.append(
                Item("process", item_name, run, "exited; its PID now belongs to another process")
            )
        else:
            report.already_gone.append(Item("process", item_name, run, "already exited"))

    deadline = time.monotonic() + max(timeout, 0.0)
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        still = [(run, proc) for run, proc in pending if _alive(proc)]
        for run, proc in pending:
            if (run, proc) not in still:
                report.removed.append(Item("process", str(proc), run, "stopped by SIGTERM"))
        pending = still

    killed: list[tuple[str, ProcessRecord]] = []
    for run, proc in pending:
        try:
            outcome = _signal_if_same(proc, signal.SIGKILL)
        except PermissionError:
            report.errors.append(Item("process", str(proc), run, "not permitted to SIGKILL it"))
            failed.add(run)
            continue
        if outcome == "sent":
            killed.append((run, proc))
        else:
            report.removed.append(Item("process", str(proc), run, "stopped by SIGTERM"))

    deadline = time.monotonic() + KILL_GRACE
    while killed and time.monotonic() < deadline and any(_alive(p) for _, p in killed):
        time.sleep(0.05)
    for run, proc in killed:
        if _alive(proc):
            report.errors.append(
                Item("process", str(proc), run, f"still alive {KILL_GRACE:.0f} s after SIGKILL")
            )
            failed.add(run)
        else:
            detail = f"ignored SIGTERM for {timeout:g} s, stopped by SIGKILL"
            report.removed.append(Item("process", str(proc), run, detail))
    return failed


def _run_ip(args: list[str]) -> str:
    """Run ``ip ARGS`` with a timeout; return '' on success or the error text."""
    ip = shutil.which("ip") or next(
        (p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip") if os.path.exists(p)), None
    )
    if ip is None:
        return "the `ip` command (iproute2) is not installed"
    try:
        proc = subprocess.run(
            [ip, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"`ip {' '.join(args)}` hung for {COMMAND_TIMEOUT:.0f} s"
    except OSError as exc:
        return f"cannot run ip: {exc.strerror}"
    if proc.returncode != 0:
        return (proc.stderr or proc.stdout).strip() or f"exit status {proc.returncode}"
    return ""


def link_exists(ifname: str) -> bool:
    """Is there an interface of this name in *our* network namespace?"""
    try:
        socket.if_nametoindex(ifname)
    except OSError:
        return False
    return True


def netns_exists(name: str) -> bool:
    """Is there a named netns (a bind mount under /run/netns)?"""
    return os.path.lexists(NETNS_DIR / name)


def _remove_links(run: RunState, report: StopReport) -> bool:
    ok = True
    for ifname in run.links:
        if not link_exists(ifname):
            report.already_gone.append(Item("link", ifname, run.name, "does not exist"))
            continue
        error = _run_ip(["link", "del", "dev", ifname])
        if not error:
            report.removed.append(Item("link", ifname, run.name))
        elif not link_exists(ifname):  # e.g. removed with its veth peer meanwhile
            report.already_gone.append(Item("link", ifname, run.name, "went away meanwhile"))
        else:
            report.errors.append(Item("link", ifname, run.name, error))
            ok = False
    return ok


def _remove_netns(run: RunState, report: StopReport) -> bool:
    ok = True
    for name in run.netns:
        if not netns_exists(name):
            report.already_gone.append(Item("netns", name, run.name, "does not exist"))
            continue
        error = _run_ip(["netns", "del", name])
        if error and netns_exists(name):
            report.errors.append(Item("netns", name, run.name, error))
            ok = False
        else:
            report.removed.append(Item("netns", name, run.name))
    return ok


def _remove_files(run: RunState, report: StopReport) -> bool:
    ok = True
    for path in run.files:
        if not os.path.lexists(path):
            report.already_gone.append(Item("file", str(path), run.name, "does not exist"))
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as exc:
            report.errors.append(Item("file", str(path), run.name, exc.strerror or str(exc)))
            ok = False
            continue
        report.removed.append(Item("file", str(path), run.name))
    return ok


@contextlib.contextmanager
def _stop_lock(directory: Path) -> Iterator[None]:
    """Serialise concurrent ``make stop`` invocations on the same state directory."""
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def stop_all(state_dir: Path | None = None, *, timeout: float = 10.0) -> StopReport:
    """Remove everything recorded by every run, then the runs' state files.

    Order: processes (all runs at once, so one ``timeout`` bounds the whole SIGTERM wait),
    then links, netns and files per run. A state file is deleted only when all of its
    resources are gone; after an error it stays, so ``make stop`` can be repeated once the
    cause (usually: not root) is fixed. Nothing that is not recorded is ever touched.
    """
    report = StopReport()
    directory = resolve_state_dir(state_dir)
    try:
        if not list_runs(directory):
            return report
        with _stop_lock(directory):
            # Read under the lock: a concurrent stop may have finished some runs meanwhile.
            _stop_runs(list_runs(directory), timeout, report)
            fsync_dir(directory)
    except RunStateError as exc:
        report.errors.append(Item("state", str(directory), "", str(exc)))
    except OSError as exc:
        report.errors.append(Item("state", str(directory), "", exc.strerror or str(exc)))
    return report


def stop_run(path: Path, *, timeout: float = 10.0) -> StopReport:
    """Remove what one run recorded (its own teardown, after the tidy part is done), leaving
    every other run alone."""
    report = StopReport()
    if not path.exists():
        return report
    try:
        with _stop_lock(path.parent):
            _stop_runs([load_run(path)], timeout, report)
    except RunStateError as exc:
        report.errors.append(Item("state", str(path), "", str(exc)))
    return report


def _stop_runs(runs: list[RunState], timeout: float, report: StopReport) -> None:
    trusted = []
    for run in runs:
        report.runs.append(run.name)
        if not run.trusted:
            for problem in run.problems:
                report.errors.append(Item("state", str(run.path), run.name, problem))
            report.notes.append(f"{run.path} was not acted on; remove it by hand if stale")
            continue
        trusted.append(run)

    targets = [(run.name, proc) for run in trusted for proc in run.processes]
    failed = _stop_processes(targets, timeout, report)
    for run in trusted:
        ok = run.name not in failed
        ok = _remove_links(run, report) and ok
        ok = _remove_netns(run, report) and ok
        ok = _remove_files(run, report) and ok
        for problem in run.problems:  # damaged lines: whatever could be read was handled
            report.errors.append(Item("state", str(run.path), run.name, problem))
            ok = False
        if not ok:
            report.notes.append(
                f"kept {run.path} so `make stop` can retry (delete it by hand once resolved)"
            )
            continue
        try:
            run.path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            report.errors.append(
                Item("state", str(run.path), run.name, f"cannot delete: {exc.strerror}")
            )
            continue
        report.removed.append(Item("state", str(run.path), run.name))
