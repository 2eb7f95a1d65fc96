"""A crash-safe registry of what a netcoll run creates, so ``make stop`` removes exactly that.

Why: Mininet's own cleanup (``mn -c``) and the p4lang tutorials' ``pkill``-by-name remove
*everything* that looks like a switch or a veth on the machine, including other users' work.
netcoll instead writes down each thing it is about to create, one JSON line per thing, appended
and fsynced *before* the thing exists. A run that is SIGKILLed therefore still leaves a complete
list behind, and ``stop_all`` removes only what is on such a list:

* processes, identified by PID *and* the start time the kernel reports in ``/proc/<pid>/stat``,
  so a PID reused by an unrelated process is never signalled;
* root-namespace interfaces (``ip link del``), named netns (``ip netns del``), files and dirs.

All names netcoll creates start with :data:`PREFIX`; :func:`check_ifname` also enforces Linux's
15-character interface-name limit, which dragonfly switch/port names easily exceed.

State files live in ``$NETCOLL_STATE_DIR`` (default ``/tmp/netcoll-state``), one
``<run>.jsonl`` per run. Because ``make stop`` runs as root and acts on these records, a state
directory or file that someone else could have written is refused, not trusted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

PREFIX = "nc"
"""Every interface, netns and run name netcoll creates starts with this."""

IFNAME_MAX = 15
"""Linux IFNAMSIZ is 16 including the terminating NUL."""

STATE_DIR_ENV = "NETCOLL_STATE_DIR"
DEFAULT_STATE_DIR = Path("/tmp/netcoll-state")
STATE_SUFFIX = ".jsonl"
LOCK_NAME = ".stop.lock"
NETNS_DIR = Path("/run/netns")
KILL_GRACE = 3.0
"""Seconds to wait for processes to vanish after SIGKILL before reporting an error."""
COMMAND_TIMEOUT = 10.0
"""Seconds an ``ip`` command may take before it is reported as hung."""

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_IFNAME_RE = re.compile(r"[A-Za-z0-9_.-]+")


class RunStateError(RuntimeError):
    """The state registry cannot be used safely (name taken, unsafe permissions, I/O)."""


# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------


def check_ifname(name: str) -> str:
    """Return ``name`` if it is a valid netcoll interface name, else raise ValueError.

    Linux silently refuses (or tools truncate) names longer than 15 characters, which turns a
    naming bug into a confusing failure far from its cause; check before creating anything.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"interface name must be a non-empty string, got {name!r}")
    if not name.startswith(PREFIX):
        raise ValueError(
            f"interface name {name!r} does not start with the project prefix {PREFIX!r}; "
            "netcoll only creates (and `make stop` only removes) prefixed names"
        )
    if len(name) > IFNAME_MAX:
        raise ValueError(
            f"interface name {name!r} is {len(name)} characters; Linux allows at most "
            f"{IFNAME_MAX} (IFNAMSIZ 16 with the NUL): shorten the switch/port naming scheme"
        )
    if not _IFNAME_RE.fullmatch(name) or name in (".", ".."):
        raise ValueError(
            f"interface name {name!r} may only contain letters, digits, '_', '.' and '-'"
        )
    return name


def check_netns_name(name: str) -> str:
    """Return ``name`` if it is a valid netcoll netns name (prefixed, no path characters)."""
    if not isinstance(name, str) or not name.startswith(PREFIX):
        raise ValueError(f"netns name {name!r} does not start with the project prefix {PREFIX!r}")
    if not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"netns name {name!r} may only contain letters, digits, '_', '.' and '-' "
            "(at most 128 characters)"
        )
    return name


def _check_run_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"run name {name!r} must be 1-128 letters, digits, '_', '.' or '-' "
            "(it becomes a file name in the state directory)"
        )
    return name


def _check_file_path(path: Path) -> Path:
    """Absolute, and not a directory so shallow that removing it would be a disaster."""
    path = Path(os.path.abspath(path))
    if len(path.parts) < 3:
        raise ValueError(
            f"refusing to register {str(path)!r} for removal: use a dedicated file or "
            "directory at least two levels below / (e.g. /tmp/nc-run1)"
        )
    return path


# --------------------------------------------------------------------------------------------
# /proc helpers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcInfo:
    """What /proc says about a PID: its state letter and start time (clock ticks since boot)."""

    state: str
    start_time: int

    @property
    def exited(self) -> bool:
        """Zombies (Z) and dead tasks (X) have exited; only their parent's wait() is missing."""
        return self.state in ("Z", "X")


def proc_info(pid: int) -> ProcInfo | None:
    """Parse ``/proc/<pid>/stat``; None if there is no such process.

    The command name (field 2) may contain spaces and parentheses, so split after the *last*
    ')'; the fields after it start at field 3 (state), which puts starttime (22) at index 19.
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode("utf-8", errors="replace")
    except OSError:  # gone (ENOENT/ESRCH) or unreadable: either way not ours to signal
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    if len(rest) < 20:
        return None
    return ProcInfo(state=rest[0], start_time=int(rest[19]))


def proc_argv0(pid: int) -> str:
    """``argv[0]`` from ``/proc/<pid>/cmdline`` ('' for zombies and kernel threads)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------------
# State directory
# --------------------------------------------------------------------------------------------


def resolve_state_dir(state_dir: Path | str | None = None) -> Path:
    """The explicit ``state_dir``, else ``$NETCOLL_STATE_DIR``, else ``/tmp/netcoll-state``."""
    if state_dir is not None:
        return Path(state_dir)
    env = os.environ.get(STATE_DIR_ENV)
    return Path(env) if env else DEFAULT_STATE_DIR


def _trust_problem(path: Path, *, kind: str) -> str:
    """Why ``path`` must not be trusted, or '' if it is ours (or root's) and not shared-writable.

    ``make stop`` runs as root and kills processes / deletes files named in these records; a
    record another user could write would let that user direct root's hand.
    """
    try:
        st = path.lstat()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"cannot inspect {kind} {path}: {exc.strerror}"
    euid = os.geteuid()
    if kind == "state dir" and not stat.S_ISDIR(st.st_mode):
        return f"{kind} {path} is not a directory (or is a symlink)"
    if kind == "state file" and not stat.S_ISREG(st.st_mode):
        return f"{kind} {path} is not a regular file (or is a symlink)"
    if st.st_uid not in (euid, 0):
        return (
            f"{kind} {path} belongs to uid {st.st_uid}, not to you (uid {euid}) or root; "
            "refusing to act on records someone else could have written"
        )
    if st.st_mode & 0o022:
        return (
            f"{kind} {path} is writable by group/others (mode {st.st_mode & 0o777:o}); "
            "refusing to act on records someone else could have written"
        )
    return ""


def _fsync_dir(path: Path) -> None:
    """Make a file creation/removal in ``path`` durable (best effort)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def ensure_state_dir(state_dir: Path) -> Path:
    """Create the state directory (mode 0700) if needed and check it is safe to use."""
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise RunStateError(
            f"cannot create the run-state directory {state_dir}: {exc.strerror}; "
            f"set {STATE_DIR_ENV} to a directory you can write"
        ) from exc
    problem = _trust_problem(state_dir, kind="state dir")
    if problem:
        raise RunStateError(problem + f" (set {STATE_DIR_ENV} to use another directory)")
    return state_dir


# --------------------------------------------------------------------------------------------
# Writing: RunRegistry
# --------------------------------------------------------------------------------------------


class RunRegistry:
    """Append-only record of one run's processes, links, netns and files.

    Record each resource *before* creating it (a crash in between leaves a record of something
    that does not exist, which ``stop_all`` reports as already gone; the opposite order could
    leave something that exists but is not recorded). Processes can only be recorded after they
    started, since their start time is part of their identity.

    Use :meth:`close` after a clean teardown; as a context manager the state file is deleted
    only when the block exits without an exception, so a failed run stays stoppable.
    """

    def __init__(self, name: str, state_dir: Path | None = None) -> None:
        self.name = _check_run_name(name)
        self.state_dir = ensure_state_dir(resolve_state_dir(state_dir))
        self.path = self.state_dir / f"{name}{STATE_SUFFIX}"
        self._lock = threading.Lock()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        try:
            self._fd: int | None = os.open(self.path, flags, 0o600)
        except FileExistsError as exc:
            raise RunStateError(
                f"run state {self.path} already exists: a run named {name!r} is still going or "
                "did not clean up; run `make stop` (or netcoll-stop) first, or pick another name"
            ) from exc
        except OSError as exc:
            raise RunStateError(f"cannot create run state {self.path}: {exc.strerror}") from exc
        _fsync_dir(self.state_dir)
        me = os.getpid()
        info = proc_info(me)
        self._append(
            {
                "kind": "run",
                "name": name,
                "pid": me,
                "start_time": info.start_time if info else None,
                "argv0": proc_argv0(me),
                "created": time.time(),
            }
        )

    # -- recording ---------------------------------------------------------------------------

    def record_process(self, pid: int, role: str) -> None:
        """Record a running process by PID, its /proc start time and argv[0].

        The start time is what lets ``stop_all`` tell this process from a later one that was
        given the same PID after this one exited.
        """
        info = proc_info(pid)
        if info is None or info.exited:
            raise ProcessLookupError(
                f"cannot record pid {pid} ({role}): it has already exited (no live /proc/{pid})"
            )
        self._append(
            {
                "kind": "process",
                "pid": pid,
                "start_time": info.start_time,
                "argv0": proc_argv0(pid),
                "role": role,
            }
        )

    def record_link(self, ifname: str) -> None:
        """Record a root-namespace interface; call *before* ``ip link add``."""
        self._append({"kind": "link", "ifname": check_ifname(ifname)})

    def record_netns(self, name: str) -> None:
        """Record a named netns; call *before* ``ip netns add``."""
        self._append({"kind": "netns", "name": check_netns_name(name)})

    def record_file(self, path: Path) -> None:
        """Record a file, socket or directory (removed recursively) to delete at stop."""
        self._append({"kind": "file", "path": str(_check_file_path(Path(path)))})

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """The caller tore everything down cleanly: forget the run (delete its state file)."""
        with self._lock:
            if self._fd is None:
                return
            os.close(self._fd)
            self._fd = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            _fsync_dir(self.state_dir)

    def detach(self) -> None:
        """Stop writing but keep the state file, so ``make stop`` can clean up later."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    @property
    def closed(self) -> bool:
        return self._fd is None

    def __enter__(self) -> RunRegistry:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.detach()

    def __repr__(self) -> str:
        return f"RunRegistry({self.name!r}, path={str(self.path)!r}, closed={self.closed})"

    def _append(self, record: dict[str, Any]) -> None:
        """One ``write`` of one complete line, then fsync: a SIGKILL right after loses nothing."""
        data = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                raise RunStateError(f"run registry {self.name!r} is closed")
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)


# --------------------------------------------------------------------------------------------
# Reading: list_runs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessRecord:
    """A recorded process; ``start_time`` is in clock ticks since boot (/proc/<pid>/stat)."""

    pid: int
    start_time: int
    argv0: str = ""
    role: str = ""

    def __str__(self) -> str:
        parts = [f"pid {self.pid}", self.role, f"({self.argv0})" if self.argv0 else ""]
        return " ".join(part for part in parts if part)


@dataclass
class RunState:
    """Everything one state file says, in recording order, duplicates removed."""

    name: str
    path: Path
    owner_pid: int | None = None
    owner_start_time: int | None = None
    created: float | None = None
    processes: list[ProcessRecord] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    trusted: bool = True
    """False if someone other than us or root could have written the file: it is not acted on."""
    problems: list[str] = field(default_factory=list)
    """Why the file cannot be trusted or fully parsed; these become errors in stop_all."""
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.processes or self.links or self.netns or self.files)

    @property
    def owner_alive(self) -> bool:
        """Is the process that created this run still running (same PID *and* start time)?"""
        if self.owner_pid is None:
            return False
        info = proc_info(self.owner_pid)
        return info is not None and not info.exited and info.start_time == self.owner_start_time

    def describe(self) -> str:
        """A few human lines for ``make stop`` to print before acting."""
        owner = "creator still running" if self.owner_alive else "creator gone"
        if self.owner_pid is None:
            owner = "creator unknown"
        head = f"run {self.name} ({owner}; {self.path})"
        lines = [head]
        if self.processes:
            lines.append("  processes: " + _first(self.processes, ", "))
        if self.links:
            lines.append("  links:     " + _first(self.links, " "))
        if self.netns:
            lines.append("  netns:     " + _first(self.netns, " "))
        if self.files:
            lines.append("  files:     " + _first(self.files, " "))
        if self.empty:
            lines.append("  (nothing recorded)")
        lines += [f"  problem:   {p}" for p in self.problems]
        lines += [f"  note:      {n}" for n in self.notes]
        return "\n".join(lines)


def _first(items: list[Any], sep: str, shown: int = 8) -> str:
    """A list for a human: the first few, then how many more."""
    text = sep.join(str(i) for i in items[:shown])
    return text + (f"{sep}... and {len(items) - shown} more" if len(items) > shown else "")


def _parse_record(run: RunState, record: Any) -> str:
    """Apply one decoded JSON record to ``run``; return an error message or ''."""
    if not isinstance(record, dict):
        return "record is not a JSON object"
    kind = record.get("kind")
    try:
        if kind == "run":
            run.owner_pid = int(record["pid"])
            start = record.get("start_time")
            run.owner_start_time = int(start) if start is not None else None
            run.created = float(record.get("created") or 0) or None
        elif kind == "process":
            proc = ProcessRecord(
                pid=int(record["pid"]),
                start_time=int(record["start_time"]),
                argv0=str(record.get("argv0", "")),
                role=str(record.get("role", "")),
            )
            if proc.pid <= 0:
                return f"invalid pid {proc.pid}"
            if proc not in run.processes:
                run.processes.append(proc)
        elif kind == "link":
            ifname = check_ifname(str(record["ifname"]))
            if ifname not in run.links:
                run.links.append(ifname)
        elif kind == "netns":
            name = check_netns_name(str(record["name"]))
            if name not in run.netns:
                run.netns.append(name)
        elif kind == "file":
            path = _check_file_path(Path(str(record["path"])))
            if path not in run.files:
                run.files.append(path)
        else:
            return f"unknown record kind {kind!r}"
    except (KeyError, TypeError, ValueError) as exc:
        return f"bad {kind} record: {exc}"
    return ""


def load_run(path: Path) -> RunState:
    """Read one state file. Damage is reported in ``problems``/``notes``, never raised."""
    name = path.name[: -len(STATE_SUFFIX)] if path.name.endswith(STATE_SUFFIX) else path.name
    run = RunState(name=name, path=path)
    problem = _trust_problem(path, kind="state file")
    if problem:
        run.trusted = False
        run.problems.append(problem)
        return run
    try:
        data = path.read_bytes()
    except OSError as exc:
        run.problems.append(f"cannot read {path}: {exc.strerror}")
        return run
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" if the file ends with a newline, else an unfinished record
    if tail.strip():
        run.notes.append(
            "ignored an unfinished last record (the writer died in mid-write; nothing was "
            "created for it yet)"
        )
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            run.problems.append(f"line {number}: not valid JSON")
            continue
        error = _parse_record(run, record)
        if error:
            run.problems.append(f"line {number}: {error}")
    return run


def list_runs(state_dir: Path | None = None) -> list[RunState]:
    """Every run recorded in the state directory, oldest first; [] if there is none.

    Raises RunStateError if the directory itself cannot be trusted.
    """
    directory = resolve_state_dir(state_dir)
    if not directory.exists():
        return []
    problem = _trust_problem(directory, kind="state dir")
    if problem:
        raise RunStateError(problem)
    if not os.access(directory, os.R_OK | os.X_OK):
        raise RunStateError(
            f"cannot read the run-state directory {directory} (a run as root created it?): "
            "run this as root, e.g. `sudo make stop`"
        )
    paths = sorted(directory.glob(f"*{STATE_SUFFIX}"), key=_mtime_then_name)
    return [load_run(path) for path in paths]


def _mtime_then_name(path: Path) -> tuple[float, str]:
    try:
        return (path.lstat().st_mtime, path.name)
    except OSError:
        return (0.0, path.name)


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
            _fsync_dir(directory)
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
