"""The fault matrix's report: a lossy cell's repairs per frame lost, as the matrix's column and
beyond what the same cell sends without faults. Made-up parts, no network."""

from __future__ import annotations

import pytest

from mininet_topos.experiments.reliability import runner as reliability
from mininet_topos.experiments.reliability.report import render
from mininet_topos.experiments.reliability.report_floor import beyond_lossless
from mininet_topos.experiments.reliability.report_timing import BASELINE_SETTING
from mininet_topos.experiments.reliability.results import Results
from tests.unit import test_reliability_timing as timing

pytestmark = pytest.mark.unit

LOSSY = "1% loss, every link"


def add(results: Results, setting: str, resent: int, nacks: int, lost: int, ops: int) -> None:
    timing.add(results, setting, "allreduce", "innet", 10.0, lost, ops, resent, nacks)


def test_the_lossless_cells_rate_is_taken_off_per_operation() -> None:
    results = Results("df:2,4,2", "all", reliability.settings_record())
    add(results, BASELINE_SETTING, resent=800, nacks=20, lost=0, ops=200)  # 4 per operation
    add(results, LOSSY, resent=1000, nacks=30, lost=400, ops=100)
    (row,) = beyond_lossless(results)
    assert row.per_loss("retransmissions") == pytest.approx(2.5)
    assert row.beyond("retransmissions") == pytest.approx((1000 - 400) / 400)
    assert row.beyond("nacks") == pytest.approx((30 - 10) / 400)
    report = render(results, reliability.matrix_keys(), 200)
    assert "## Repairs beyond the lossless cell's" in report
    assert f"| {LOSSY} | allreduce | innet | 2.50 | 1.50 | 0.07 | 0.05 |" in report


def test_a_cell_without_its_lossless_cell_or_without_losses_has_no_row() -> None:
    results = Results("df:2,4,2", "all", reliability.settings_record())
    add(results, LOSSY, resent=10, nacks=0, lost=5, ops=100)
    assert beyond_lossless(results) == []
    assert "beyond the lossless" not in render(results, reliability.matrix_keys(), 200)
    add(results, BASELINE_SETTING, resent=0, nacks=0, lost=0, ops=100)
    add(results, "2% loss, every link", resent=0, nacks=0, lost=0, ops=100)
    assert [r.cell.setting for r in beyond_lossless(results)] == [LOSSY]
