"""Starts one agent per host, releases them together, gathers and checks their results.

The launcher does not know Mininet: it is given a ``spawn(node, argv)`` that starts a process
on the host of ``node`` (``Host.popen`` on Mininet), so the same code runs from the Mininet
CLI, from make targets and from the end-to-end tests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from host_agents.privileges import dropping, own_directory
from host_agents.report import Row, aggregate
from host_agents.workload import Workload

Spawner = Callable[[int, list[str]], "subprocess.Popen[bytes]"]
# how often the launcher looks for agents that exited (a crash stops the run at once)
EXIT_CHECK_S = 0.25


@dataclass
class LaunchResult:
    reports: dict[int, dict[str, Any]] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def wrong(self) -> int:
        return sum(row.wrong for row in self.rows)

    @property
    def ok(self) -> bool:
        return not self.errors and self.wrong == 0

    def stats_total(self, key: str, *, tests_only: bool = False) -> int:
        """``key`` summed over the agents' counters; ``tests_only``: as each agent counted when
        its tests ended, before the finalizing barrier (where it reported that)."""
        which = "test_stats" if tests_only else "stats"
        return sum(int(r.get(which, r.get("stats", {})).get(key, 0)) for r in self.reports.values())

    def timed_span(self) -> tuple[float, float] | None:
        """From the first test window's start to the last one's end (monotonic), as the agents
        reported them: their tests alone, start-up and rendezvous left out; None without any."""
        windows = [
            (float(e["window"][0]), float(e["window"][1]))
            for r in self.reports.values()
            for e in r.get("tests", [])
            if "window" in e
        ]
        if not windows:
            return None
        return min(w[0] for w in windows), max(w[1] for w in windows)


class Launcher:
    def __init__(
        self,
        spawn: Spawner,
        *,
        topology_file: Path,
        service: Path,
        run_dir: Path,
        interfaces: dict[int, str],
        python: str = sys.executable,
        log_level: str = "WARNING",
        engine_defaults: dict[str, Any] | None = None,
        comm_defaults: dict[str, Any] | None = None,
        time_scale: float = 1.0,
    ) -> None:
        self.spawn = spawn
        self.topology_file = topology_file
        self.service = service
        self.run_dir = run_dir
        self.interfaces = interfaces
        self.python = python
        self.log_level = log_level
        # EngineConfig values the network dictates (the compiled program's aggregation sizes);
        # a workload's own engine settings win
        self.engine_defaults = dict(engine_defaults or {})
        # CommOptions the network dictates (its timers, on slow links); the workload's win
        self.comm_defaults = dict(comm_defaults or {})
        # how much slower than unshaped links the network is: launches may take that longer
        self.time_scale = time_scale
        self.runs = 0

    def launch(self, workload: Workload, timeout: float = 600.0) -> LaunchResult:
        """Run ``workload`` on every member; bounded by ``timeout`` seconds (stretched by the
        network's time scale)."""
        timeout *= self.time_scale
        self.runs += 1
        run = self.run_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{self.runs}"
        shutil.rmtree(run, ignore_errors=True)
        (run / "results").mkdir(parents=True)
        (run / "logs").mkdir()
        workload.rendezvous = f"{run.name}-{time.time_ns()}"
        workload.engine = {**self.engine_defaults, **workload.engine}
        workload.options = {**self.comm_defaults, **workload.options}
        workload.save(run / "workload.json")
        started = time.perf_counter()
        procs: dict[int, subprocess.Popen[bytes]] = {}
        result = LaunchResult()
        crashed: dict[int, int] = {}  # node -> exit status: gone without results, in that order
        try:
            for node in workload.members:
                procs[node] = self.spawn(node, self._argv(node, run))
            crashed = self._wait(procs, run, timeout, result)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(5)
        result.seconds = time.perf_counter() - started
        # the agent that died first is the cause; the others' errors (a rendezvous or a peer
        # that never answered) follow from it
        for node, status in crashed.items():
            last = self._last_line(run, node)
            result.errors.append(
                f"node {node}: exited with status {status} without results: {last}"
            )
        for node in workload.members:
            path = self._out(run, node)
            if not path.exists():
                if node in crashed:
                    continue
                cause = f"; stopped after node {next(iter(crashed))} exited" if crashed else ""
                result.errors.append(
                    f"node {node}: wrote no results ({self._last_line(run, node)}){cause}"
                )
                continue
            report = json.loads(path.read_text())
            result.reports[node] = report
            if report.get("error"):
                result.errors.append(f"node {node} (rank {report.get('rank')}): {report['error']}")
        result.rows = aggregate(result.reports.values())
        return result

    def _wait(
        self,
        procs: dict[int, subprocess.Popen[bytes]],
        run: Path,
        timeout: float,
        result: LaunchResult,
    ) -> dict[int, int]:
        """Until every agent exits, ``timeout`` passes, or an agent exits without writing its
        results (a crash: the others would wait for it at the rendezvous or as a peer until
        their own timeouts, minutes away). The crashed agents' exit statuses, in the order they
        were found."""
        deadline = time.monotonic() + timeout
        running = dict(procs)
        crashed: dict[int, int] = {}
        while running:
            for node, proc in list(running.items()):
                status = proc.poll()
                if status is None:
                    continue
                del running[node]
                if status != 0 and not self._out(run, node).exists():
                    crashed[node] = status
            if crashed or not running:
                return crashed
            if time.monotonic() >= deadline:
                for node in running:
                    result.errors.append(f"node {node}: no result within {timeout:.0f} s (killed)")
                return crashed
            time.sleep(EXIT_CHECK_S)
        return crashed

    @staticmethod
    def _last_line(run: Path, node: int) -> str:
        path = run / "logs" / f"{node}.log"
        lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        return lines[-1] if lines else "no log"

    @staticmethod
    def _out(run: Path, node: int) -> Path:
        """Where agent ``node`` writes its results: a directory only it may write."""
        return run / "results" / str(node) / "result.json"

    def _argv(self, node: int, run: Path) -> list[str]:
        """The agent's command: unprivileged (host_agents/privileges.py)."""
        own_directory(self._out(run, node).parent, node)
        return [
            *dropping(node),
            self.python,
            "-m",
            "host_agents.agent",
            "--node",
            str(node),
            "--topology",
            str(self.topology_file),
            "--interface",
            self.interfaces[node],
            "--service",
            str(self.service),
            "--workload",
            str(run / "workload.json"),
            "--out",
            str(self._out(run, node)),
            "--log-level",
            self.log_level,
        ]
