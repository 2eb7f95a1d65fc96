"""make reproduce's offload cells (the project's own targets, issue 31): the in-network
allreduce against the fastest host allreduce measured beside it, the packed allgather against
recursive doubling. Made-up measurements, no network."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mininet_topos.experiments.reproduce import offloads
from mininet_topos.experiments.reproduce import plan as reproduce_plan
from mininet_topos.experiments.reproduce.results import Measurement, Results
from tests.unit.test_reproduce import cell, measurement

pytestmark = pytest.mark.unit


def timed(collective: str, algorithm: str, size: int, seconds: float) -> Measurement:
    return measurement(
        collective=collective,
        algorithm=algorithm,
        chosen=algorithm,
        size=size,
        mode="single",
        completion_s=[seconds * 0.9, seconds, seconds * 1.5],
    )


def test_the_quick_profile_runs_every_host_allreduce_beside_innet_and_both_allgathers() -> None:
    cells = [c for c in reproduce_plan.plan("quick", 72) if c.experiment == "offloads"]
    assert [c.label for c in cells] == [
        "allreduce",
        "allgather/innet_packed",
        "allgather/recursive_doubling",
    ]
    allreduce = {(t.algorithm, t.sizes) for t in cells[0].tests}
    assert allreduce == {(a, (4, 1024)) for a in offloads.ALLREDUCE}
    assert all(c.metered for c in cells[1:]) and not cells[0].metered


def test_the_speedup_is_over_the_fastest_host_algorithm_at_each_size(tmp_path: Path) -> None:
    results = Results("df:2,4,2", "quick", 1)
    reduce_cell = cell(
        "offloads:allreduce",
        replace(
            timed("allreduce", "innet", 4, 0.1),
            last_start_s=[0.02, 0.03, 0.04],
            root_end_s=[0.05, 0.06, 0.07],
            last_receiver_end_s=[0.09, 0.1, 0.11],
        ),
        timed("allreduce", "recursive_doubling", 4, 0.4),
        timed("allreduce", "binomial", 4, 0.25),  # the fastest host one at 4 B
        timed("allreduce", "innet", 1024, 0.2),
        timed("allreduce", "ring", 1024, 0.7),
    )
    results.cells[reduce_cell.key] = reduce_cell
    for name, seconds in (("innet_packed", 1.0), ("recursive_doubling", 2.5)):
        c = cell(f"offloads:allgather/{name}", timed("allgather", name, 1024, seconds))
        results.cells[c.key] = c
    found = offloads.speedups(results)
    assert found[("allreduce", 4)] == (pytest.approx(2.5), "binomial")
    assert found[("allreduce", 1024)] == (pytest.approx(3.5), "ring")
    assert found[("allgather", 1024)] == (pytest.approx(2.5), "recursive_doubling")
    section = offloads.section(results, tmp_path, 2)
    assert section.summary[2] == "2.50x and 3.50x; 2.50x"
    assert section.summary[3] == "0.83x and 1.17x; 1.25x"  # over the targets 3x and 2x
    # what the emulated hosts add (ns-3's do not): the late start, the spread of the ends
    assert section.figures and section.figures[0].exists()
    assert any(
        "at 4 B, 30.0 ms of the last rank's late start and 40.0 ms" in line for line in section.body
    ), section.body


def test_nothing_measured_says_so(tmp_path: Path) -> None:
    section = offloads.section(Results("df:2,4,2", "quick", 1), tmp_path, 2)
    assert section.body == ["Not measured yet."]
