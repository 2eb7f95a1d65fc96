"""The launcher stops a run as soon as an agent dies without results, and names it first.

An agent that crashes at start (an import error, a bad interface) leaves the others waiting at
the rendezvous for minutes; they then all report "no answer to rendezvous", and the one line
that says what happened was in the dead agent's log only.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from host_agents.launcher import Launcher
from host_agents.workload import CollectiveTest, Workload

pytestmark = pytest.mark.unit

MEMBERS = (1, 2, 3)


def launcher(tmp_path: Path, scripts: dict[int, str]) -> Launcher:
    """Agents that run ``scripts[node]`` instead of host_agents.agent, logging like Mininet's."""

    def spawn(node: int, argv: list[str]) -> subprocess.Popen[bytes]:
        run = Path(argv[argv.index("--workload") + 1]).parent
        out = argv[argv.index("--out") + 1]
        log = (run / "logs" / f"{node}.log").open("wb")
        return subprocess.Popen([sys.executable, "-c", scripts[node], out], stdout=log, stderr=log)

    return Launcher(
        spawn,
        topology_file=tmp_path / "topology.json",
        service=tmp_path / "service.sock",
        run_dir=tmp_path / "runs",
        interfaces={n: f"nch{n}-eth0" for n in MEMBERS},
    )


def workload() -> Workload:
    return Workload(7, MEMBERS, [CollectiveTest("barrier", "innet", (0,), 1, 0)])


WAITS = "import time; time.sleep(60)"  # an agent waiting for a rendezvous that never comes
CRASHES = (
    "import sys; print('ModuleNotFoundError: No module named x', file=sys.stderr); sys.exit(1)"
)


def test_an_agent_that_dies_without_results_stops_the_run_and_is_named_first(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    result = launcher(tmp_path, {1: WAITS, 2: CRASHES, 3: WAITS}).launch(workload(), timeout=120)
    assert time.monotonic() - started < 10, "the others must not be waited for"
    assert result.errors[0] == (
        "node 2: exited with status 1 without results: ModuleNotFoundError: No module named x"
    )
    assert sorted(result.errors[1:]) == [
        "node 1: wrote no results (no log); stopped after node 2 exited",
        "node 3: wrote no results (no log); stopped after node 2 exited",
    ]


def test_an_agent_that_fails_with_its_results_written_does_not_stop_the_others(
    tmp_path: Path,
) -> None:
    report = (
        "import json, sys, time; time.sleep({delay}); "
        "open(sys.argv[1], 'w').write(json.dumps("
        "{{'node': {node}, 'rank': {rank}, 'tests': [], 'error': {error!r}}})); "
        "sys.exit({status})"
    )
    scripts = {
        1: report.format(delay=0, node=1, rank=0, error="peer 3 gone", status=1),
        2: report.format(delay=1, node=2, rank=1, error=None, status=0),
        3: report.format(delay=1, node=3, rank=2, error=None, status=0),
    }
    result = launcher(tmp_path, scripts).launch(workload(), timeout=30)
    assert sorted(result.reports) == [1, 2, 3], "the others finished and were heard"
    assert result.errors == ["node 1 (rank 0): peer 3 gone"]
