"""Link parameters: Mininet's units in, range errors that say what to give instead."""

from __future__ import annotations

import pytest

from mininet_topos.links.units import (
    LinkParameterError,
    format_delay,
    format_rate,
    parse_delay,
    parse_queue,
    parse_rate,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2ms", 2e-3), ("150us", 150e-6), ("1s", 1.0), ("0.5", 0.5), ("100ns", 100e-9), ("0", 0.0)],
)
def test_delays_read_as_mininet_writes_them(text: str, seconds: float) -> None:
    assert parse_delay(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["2 fortnights", "ms", "-1ms", "11s", "2m"])
def test_a_bad_delay_is_refused_with_the_form_to_use(text: str) -> None:
    with pytest.raises(LinkParameterError, match="delay"):
        parse_delay(text)


@pytest.mark.parametrize("text", ["0", "-5", "20000", "fast", "0.001"])
def test_a_rate_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(LinkParameterError, match="Mb/s"):
        parse_rate(text)


def test_rates_and_queues_in_range_pass_through() -> None:
    assert parse_rate("10") == 10.0
    assert parse_rate(0.5) == 0.5
    assert parse_queue("64") == 64
    with pytest.raises(LinkParameterError, match="packets"):
        parse_queue("0")
    with pytest.raises(LinkParameterError, match="whole number"):
        parse_queue("lots")


def test_figures_print_in_the_unit_that_reads_best() -> None:
    assert format_delay(2e-3) == "2ms"
    assert format_delay(100e-9) == "100ns"
    assert format_rate(45100.0) == "45.1Gb/s"
    assert format_rate(0.512) == "512kb/s"
    assert format_rate(None) == "unshaped"
