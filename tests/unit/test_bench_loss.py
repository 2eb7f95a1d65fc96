"""``make bench --loss``: the setting parsed, carried to the network options, and the
side-by-side table of time under loss against time without it. No network."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

pytest.importorskip("mininet", reason="bench.py builds NetworkOptions, which imports Mininet")

from host_agents.report import Row
from mininet_topos.experiments import bench, bench_options, bench_report
from mininet_topos.links.linkfaults import Impairment

pytestmark = pytest.mark.unit


def parse(*argv: str) -> argparse.Namespace:
    return bench.build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.01", Impairment(loss=0.01)),
        ("0.01,0.02,0.05", Impairment(loss=0.01, duplicate=0.02, reorder=0.05)),
        ("1%,1%", Impairment(loss=0.01, duplicate=0.01)),
        ("0", Impairment()),
    ],
)
def test_loss_settings_parse_as_fractions_or_percentages(text: str, expected: Impairment) -> None:
    assert parse("--loss", text).loss == [expected]


@pytest.mark.parametrize("text", ["lots", "0.01,,0.02", "0.1,0.1,0.1,0.1", "1.5", "-1%"])
def test_bad_loss_settings_are_refused_with_usage(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse("--loss", text)
    assert "--loss" in capsys.readouterr().err


def test_without_loss_the_network_is_direct() -> None:
    args = parse("--topo", "df:2,2,1")
    losses = bench.loss_settings(args.loss)
    options = bench.network_options(args, losses)
    assert losses is None
    assert (options.emulate_links, options.faults) == (False, None)


def test_a_loss_setting_reaches_the_network_through_the_emulator_after_no_loss() -> None:
    args = parse("--loss", "0.05", "--loss", "0.01,0.01,0.02", "--loss", "0.05", "--seed", "9")
    losses = bench.loss_settings(args.loss)
    options = bench.network_options(args, losses)
    assert losses == [
        Impairment(),
        Impairment(loss=0.05),
        Impairment(loss=0.01, duplicate=0.01, reorder=0.02),
    ]
    assert options.emulate_links and options.faults == Impairment()
    assert options.fault_seed == 9
    assert bench.label_of(losses[2]) == "loss 1%, duplicate 1%, reorder 2%"
    assert bench_report.slug(bench.label_of(losses[2])) == "loss1-duplicate1-reorder2"


def row(collective: str, algorithm: str, size: int, avg_us: float) -> Row:
    return Row(collective, algorithm, algorithm, size, False, avg_us, avg_us, avg_us, 5, 8, 0)


def test_the_side_by_side_table_gives_slowdowns_and_speedups_per_setting() -> None:
    rows = {
        "loss 0%": [row("bcast", "innet", 16384, 50_000), row("bcast", "binomial", 16384, 150_000)],
        "loss 1%": [row("bcast", "innet", 16384, 100_000), row("bcast", "binomial", 16384, 2e6)],
        "loss 5%": [row("bcast", "binomial", 16384, 3e6)],  # innet failed here
    }
    table = bench_report.side_by_side(rows).splitlines()
    assert table[0] == "| collective | algorithm | bytes | loss 0% | loss 1% | loss 5% |"
    assert "| bcast | innet | 16384 | 50.0 ms | 100.0 ms (2.0x) | failed |" in table
    assert "| bcast | binomial | 16384 | 150.0 ms | 2.00 s (13.3x) | 3.00 s (20.0x) |" in table
    assert "| bcast | innet over binomial | 16384 | 3.0x | 20.0x | - |" in table


def test_the_emulator_load_between_two_stats() -> None:
    before = {
        "uptime_seconds": 10.0,
        "cpu_seconds": 1.0,
        "totals": {"forwarded": 1000, "queue_drops": 0},
    }
    after = {
        "uptime_seconds": 20.0,
        "cpu_seconds": 1.5,
        "totals": {"forwarded": 51000, "queue_drops": 3},
    }
    assert bench_report.emulator_load(before, after) == (
        "link emulator: 5000 frames/s, 5% of a core, 10.0 us CPU per frame, 3 queue drops"
    )


def test_the_innet_broadcast_runs_once_per_ack_merging_mode_asked_for() -> None:
    assert parse("--ack-merge", "coroots,switch").ack_merge == "coroots,switch"
    assert bench.variants("bcast", "innet", ("coroots", "switch")) == [
        ("innet[coroots ACKs]", {"ack_merge": "coroots"}),
        ("innet[switch ACKs]", {"ack_merge": "switch"}),
    ]
    # one mode, or any other algorithm: one row under its own name, in the mode given
    assert bench.variants("bcast", "innet", ("switch",)) == [("innet", {"ack_merge": "switch"})]
    assert bench.variants("bcast", "binomial", ("coroots", "switch")) == [
        ("binomial", {"ack_merge": "coroots"})
    ]


def test_the_packed_allgather_runs_once_per_ack_merging_mode_too() -> None:
    # its packs are acknowledged in-network broadcasts: the mode changes its frames
    assert bench.variants("allgather", "innet_packed", ("coroots", "switch")) == [
        ("innet_packed[coroots ACKs]", {"ack_merge": "coroots"}),
        ("innet_packed[switch ACKs]", {"ack_merge": "switch"}),
    ]
    assert bench.variants("allgather", "innet", ("coroots", "switch")) == [
        ("innet", {"ack_merge": "coroots"})
    ]


def test_an_unknown_ack_merging_mode_is_refused_with_the_known_ones() -> None:
    with pytest.raises(SystemExit):
        parse("--ack-merge", "coroots,routers")
    with pytest.raises(argparse.ArgumentTypeError, match="coroots, switch"):
        bench_options.ack_merge_modes("routers")


def test_engine_settings_take_the_field_type_and_refuse_unknown_keys() -> None:
    assert parse("--engine", "repair_quiet_min=0.1", "--engine", "ack_every=8").engine == [
        ("repair_quiet_min", 0.1),
        ("ack_every", 8),
    ]
    with pytest.raises(argparse.ArgumentTypeError, match="repair_quiet_min"):
        bench_options.engine_setting("repair_quiet=0.1")
    with pytest.raises(argparse.ArgumentTypeError, match="not of type int"):
        bench_options.engine_setting("ack_every=fast")


def test_a_boolean_engine_setting_reads_false_as_false(monkeypatch: pytest.MonkeyPatch) -> None:
    """bool("false") is True: a boolean field is read from its spelling, not by the type."""

    @dataclasses.dataclass
    class WithSwitch:
        check: bool = True

    monkeypatch.setattr(bench_options, "EngineConfig", WithSwitch)
    assert bench_options.engine_setting("check=false") == ("check", False)
    assert bench_options.engine_setting("check=True") == ("check", True)
    with pytest.raises(argparse.ArgumentTypeError, match="not true or false"):
        bench_options.engine_setting("check=maybe")
