"""Halving the rate must double a bandwidth-bound time: the check's verdict and its sentence."""

from __future__ import annotations

import pytest

from mininet_topos.experiments.reproduce.rate_check import judge, line

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("full", "half", "ok"),
    [(1.0, 2.0, True), (1.0, 1.75, True), (1.0, 2.3, True), (1.0, 1.6, False), (1.0, 2.5, False)],
)
def test_twice_the_time_within_15_percent_passes(full: float, half: float, ok: bool) -> None:
    assert judge(full, half)["ok"] is ok


def test_a_cpu_bound_time_that_does_not_follow_the_rate_fails_and_says_so() -> None:
    result = {
        "cell": "rate-check:innet/262144",
        **judge(0.5, 0.55),
        "fidelity": ["CPU-bound: timing not faithful", "network-bound"],
        "errors": [],
    }
    text = line(result)
    assert "1.10x as long" in text and "FAILED" in text and "CPU-bound" in text


def test_missing_times_are_a_failure_to_measure_not_a_pass() -> None:
    result = {"cell": "c", **judge(None, 1.0), "fidelity": [None, None], "errors": ["boom"]}
    assert result["ok"] is False
    assert line(result) == "Rate check: failed to measure (boom)."
    assert line({}) == "Rate check: not run."
