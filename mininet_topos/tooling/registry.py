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
import json
import os
import re
import stat
import threading
import time
from dataclasses import dataclass
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


def check_file_path(path: Path) -> Path:
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


def trust_problem(path: Path, *, kind: str) -> str:
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


def fsync_dir(path: Path) -> None:
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
    problem = trust_problem(state_dir, kind="state dir")
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
        fsync_dir(self.state_dir)
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
        self._append({"kind": "file", "path": str(check_file_path(Path(path)))})

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
            fsync_dir(self.state_dir)

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
