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

from host_agents.report import Row, aggregate
from host_agents.workload import Workload

Spawner = Callable[[int, list[str]], "subprocess.Popen[bytes]"]


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

    def stats_total(self, key: str) -> int:
        return sum(int(r.get("stats", {}).get(key, 0)) for r in self.reports.values())


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
        self.runs = 0

    def launch(self, workload: Workload, timeout: float = 600.0) -> LaunchResult:
        """Run ``workload`` on every member; bounded by ``timeout`` seconds."""
        self.runs += 1
        run = self.run_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{self.runs}"
        shutil.rmtree(run, ignore_errors=True)
        (run / "results").mkdir(parents=True)
        (run / "logs").mkdir()
        workload.rendezvous = f"{run.name}-{time.time_ns()}"
        workload.engine = {**self.engine_defaults, **workload.engine}
        workload.save(run / "workload.json")
        started = time.perf_counter()
        procs: dict[int, subprocess.Popen[bytes]] = {}
        result = LaunchResult()
        try:
            for node in workload.members:
                procs[node] = self.spawn(node, self._argv(node, run))
            deadline = time.monotonic() + timeout
            for node, proc in procs.items():
                remaining = max(0.1, deadline - time.monotonic())
                try:
                    proc.wait(remaining)
                except subprocess.TimeoutExpired:
                    result.errors.append(f"node {node}: no result within {timeout:.0f} s (killed)")
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(5)
        result.seconds = time.perf_counter() - started
        for node in workload.members:
            path = run / "results" / f"{node}.json"
            if not path.exists():
                log = (
                    (run / "logs" / f"{node}.log").read_text(errors="replace").strip().splitlines()
                )
                result.errors.append(
                    f"node {node}: wrote no results ({log[-1] if log else 'no log'})"
                )
                continue
            report = json.loads(path.read_text())
            result.reports[node] = report
            if report.get("error"):
                result.errors.append(f"node {node} (rank {report.get('rank')}): {report['error']}")
        result.rows = aggregate(result.reports.values())
        return result

    def _argv(self, node: int, run: Path) -> list[str]:
        return [
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
            str(run / "results" / f"{node}.json"),
            "--log-level",
            self.log_level,
        ]
