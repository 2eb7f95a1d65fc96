"""Issue 33's time condition in the fault matrix's report: an in-network algorithm under loss
against its host baseline's lossless ratio plus the round trips its losses cost. Made-up parts,
no network."""

from __future__ import annotations

import pytest

from mininet_topos.experiments.reliability import runner as reliability
from mininet_topos.experiments.reliability.report import render
from mininet_topos.experiments.reliability.report_timing import BASELINE_SETTING, time_under_loss
from mininet_topos.experiments.reliability.results import Part, Results

pytestmark = pytest.mark.unit

LOSSY = "1% loss, every link"


def add(
    results: Results,
    setting: str,
    collective: str,
    algorithm: str,
    seconds: float,
    lost: int = 0,
    operations: int = 100,
    resent: int = 0,
    nacks: int = 0,
) -> None:
    size = next(s for c, a, s in reliability.CELLS if (c, a) == (collective, algorithm))
    cell = results.cell((setting, collective, algorithm, size))
    cell.parts.append(
        Part(
            run=0,
            started="2026-11-28T08:00:00Z",
            seed=1,
            operations=operations,
            retransmissions=resent,
            nacks=nacks,
            wrong=0,
            failures=0,
            seconds=seconds,
            lost_frames=lost,
            queue_drops=0,
        )
    )


def matrix(lossy_innet_s: float, lost: int) -> Results:
    """Allgather: without faults innet 2 s and recursive doubling 1 s per operation (a ratio
    of 0.5); under loss recursive doubling 1.5 s; a lossless barrier (the round trip) 0.1 s."""
    results = Results("df:2,4,2", "all", reliability.settings_record())
    add(results, BASELINE_SETTING, "barrier", "innet", 10.0)
    add(results, BASELINE_SETTING, "allgather", "innet", 200.0)
    add(results, BASELINE_SETTING, "allgather", "recursive_doubling", 100.0)
    add(results, LOSSY, "allgather", "recursive_doubling", 150.0)
    add(results, LOSSY, "allgather", "innet", lossy_innet_s * 100, lost=lost)
    return results


def test_the_allowance_is_the_lossless_ratio_plus_each_ranks_round_trips() -> None:
    # 7,200 frames lost in 100 operations: 72 per operation, one per rank of 72
    (row,) = time_under_loss(matrix(3.05, lost=7200), ranks=72)
    assert (row.collective, row.algorithm, row.baseline) == (
        "allgather",
        "innet",
        "recursive_doubling",
    )
    assert row.lossless_ratio == pytest.approx(0.5)
    assert row.round_trips == 1 and row.round_trip_s == pytest.approx(0.1)
    assert row.allowed == pytest.approx(1.5 / 0.5 + 0.1)
    assert row.excess_s == pytest.approx(0.05)
    assert row.within


def test_slower_than_the_round_trips_explain_is_not_within() -> None:
    (row,) = time_under_loss(matrix(3.2, lost=7200), ranks=72)
    assert not row.within
    # more losses per rank buy more round trips: 2 each
    (row,) = time_under_loss(matrix(3.2, lost=7201), ranks=72)
    assert row.round_trips == 2 and row.within


def test_no_verdict_without_the_lossless_row() -> None:
    results = matrix(3.0, lost=100)
    results.cells = [c for c in results.cells if c.setting != BASELINE_SETTING]
    assert time_under_loss(results, ranks=72) == []
    page = render(results, reliability.matrix_keys(), 200)
    assert "Time under loss" not in page


def test_the_report_shows_the_verdict() -> None:
    page = render(matrix(3.2, lost=7200), reliability.matrix_keys(), 200)
    section = page.split("## Time under loss against the host baseline")[1]
    assert (
        "| 1% loss, every link | allgather | innet | recursive_doubling | 0.50x | 3200 ms "
        "| 3100 ms | 200 ms | 1 x 100 ms | no |" in section
    )
