"""Link options on the command line: explicit links, a dilated paper profile, clear errors."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from mininet_topos.links.dilation import Calibration
from mininet_topos.links.options import add_link_arguments, link_model_from
from mininet_topos.links.units import LinkParameterError

pytestmark = pytest.mark.unit


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_link_arguments(parser, default_profile="df-scatter")
    return parser.parse_args(list(argv))


def test_explicit_links_in_mininets_units() -> None:
    links, factor = link_model_from(
        parse("--rate", "10", "--global-rate", "5", "--delay", "2ms", "--queue", "64")
    )
    assert factor is None
    assert (links.rate, links.global_rate, links.delay, links.queue) == (10.0, 5.0, 2e-3, 64)


def test_no_option_is_unshaped_unless_the_command_has_a_default_profile(tmp_path: Path) -> None:
    args = parse("--dilation", "10000")
    assert link_model_from(args)[0].shaped is False
    links, factor = link_model_from(args, default_profile="df-scatter")
    assert factor == 10_000 and links.rate == pytest.approx(4.51)
    assert link_model_from(parse("--link-profile", "none"), "df-scatter")[0].shaped is False


def test_auto_dilation_reads_the_calibration(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    Calibration("df-scatter", 10_000, "cell", 0.125, 0.05, 2, "fast").save(path)
    links, factor = link_model_from(
        parse("--link-profile", "df-scatter", "--calibration", str(path))
    )
    assert factor == 50_000 and links.delay == pytest.approx(5e-3)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (("--link-profile", "df-scatter", "--rate", "10"), "leave out --rate"),
        (("--link-profile", "df-scatter", "--dilation", "fast"), "a number, or 'auto'"),
        (("--link-profile", "df-scatter", "--dilation", "0.5"), "at least 1"),
        (
            ("--link-profile", "df-scatter", "--calibration", "/nonexistent/c.json"),
            "make calibrate",
        ),
        (("--rate", "ten"), "not a number of Mb/s"),
        (("--rate", "10", "--delay", "2 weeks"), "not a delay"),
        (("--rate", "10", "--queue", "-3"), "out of range"),
    ],
)
def test_bad_link_options_are_refused_with_the_reason(argv: tuple[str, ...], match: str) -> None:
    with pytest.raises(LinkParameterError, match=match):
        link_model_from(parse(*argv))
