"""Reading the run registry: what each state file says a run created (``list_runs``), and
whether it can be trusted. registry.py writes the files; cleanup.py removes what they list."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet_topos.tooling.registry import (
    STATE_SUFFIX,
    RunStateError,
    check_file_path,
    check_ifname,
    check_netns_name,
    proc_info,
    resolve_state_dir,
    trust_problem,
)

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
            path = check_file_path(Path(str(record["path"])))
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
    problem = trust_problem(path, kind="state file")
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
    problem = trust_problem(directory, kind="state dir")
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
