"""BMv2's ratio beside ns-3's with the same links, and whether they agree within 25%; and
``--ns3-only``, which simulates ns-3 again on the links the stored BMv2 cells ran on."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from controller import wire
from mininet_topos.experiments.reproduce import ns3_side
from mininet_topos.experiments.reproduce import runner as reproduce
from mininet_topos.experiments.reproduce.ns3_side import COMPARISONS, bmv2_ratio, simulate, table
from mininet_topos.experiments.reproduce.results import Results, Run
from mininet_topos.ns3sim import simulation as simulation_module
from mininet_topos.ns3sim.network import LinkParams
from tests.unit.test_reproduce import cell, measurement

pytestmark = pytest.mark.unit


def ib_mcast(innet_s: float, binomial_s: float) -> Results:
    results = Results("df:2,4,2", "quick", 1)
    for name, t in (("innet", innet_s), ("binomial", binomial_s)):
        m = measurement(
            collective="bcast", algorithm=name, size=1, mode="single", completion_s=[t, t, t]
        )
        results.cells[f"ib-mcast:{name}"] = cell(f"ib-mcast:{name}", m)
    return results


def test_the_bmv2_ratio_is_the_fastest_baseline_over_the_offload() -> None:
    latency = next(c for c in COMPARISONS if c.key == "latency")
    assert bmv2_ratio(ib_mcast(0.01, 0.03), latency) == pytest.approx(3.0)
    assert bmv2_ratio(Results("df:2,4,2", "quick", 1), latency) is None


def test_the_table_says_where_bmv2_and_ns3_agree_and_where_not() -> None:
    results = ib_mcast(0.01, 0.03)
    results.ns3 = {
        "latency": {"ratio": 2.6, "params": "links 4.51Mbps/1ms"},
        "throughput": {"ratio": 5.0, "params": "links 4.51Mbps/1ms"},
    }
    text = "\n".join(table(results))
    assert "| 3.00x | 2.60x | 2.38x | yes |" in text  # 15% apart
    results.ns3["latency"]["ratio"] = 5.0
    assert "no (40% apart)" in "\n".join(table(results))
    assert "not simulated" in table(Results("df:2,4,2", "quick", 1))[0].lower()


def test_ns3_cuts_messages_as_the_links_mtu_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reproduction passes BMv2's MTU (9000: Mininet's jumbo frames); ns-3 must then cut
    messages into the same 8960-byte segments, not its former 1460."""
    built: list[LinkParams] = []

    class Recorded:
        def __init__(self, topo: object, params: LinkParams) -> None:
            built.append(params)

        def run(
            self, collective: str, name: str, size: int, mode: str = "single"
        ) -> SimpleNamespace:
            fast = name in ("innet", "lin", "ragasa")
            return SimpleNamespace(avg_us=10.0 if fast else 30.0, max_us=20.0 if fast else 40.0)

        def close(self) -> None:
            pass

    monkeypatch.setattr(simulation_module, "Simulation", Recorded)
    links = {"rate_mbit": 0.451, "global_rate_mbit": 0.404, "delay_s": 0.01}
    out = simulate("df:2,4,2", links, wire.JUMBO_MTU)
    assert [(p.mtu, p.segment) for p in built] == [(9000, 8960)]
    assert {r["segment"] for r in out.values()} == {8960}
    assert "MTU 9000 (8960-byte segments)" in out["latency"]["params"]
    # the windows and ACK cadence BMv2's agents had on these links (windows_for, timers_for):
    # a jumbo frame at 0.404 Mb/s takes 178 ms, so the 2 ms delayed ACK stretched 178 times
    (params,) = built
    assert (params.window, params.mcast_window, params.ack_every) == (10, 5, 2)
    assert params.ack_delay == pytest.approx(0.002 * 9014 * 8 / 0.404e6 / 1e-3)
    assert all(r["acks"] for r in out.values())


def test_link_params_take_the_frame_size() -> None:
    assert LinkParams().segment == wire.MAX_PAYLOAD == 1460
    assert LinkParams(mtu=9000).segment == 8960
    with pytest.raises(ValueError, match="MTU"):
        LinkParams(mtu=40)


def test_the_note_names_the_frame_only_where_ns3_cut_other_segments() -> None:
    results = ib_mcast(0.01, 0.03)
    old = {"ratio": 5.0, "params": "links 0.451Mbps", "mtu": 9000}  # saved before: 1460
    results.ns3 = {"latency": old}
    assert "ns-3 cut messages into 1460-byte segments" in "\n".join(table(results))
    results.ns3 = {"latency": {**old, "segment": 8960}}
    text = "\n".join(table(results))
    assert "1460-byte" not in text and "same segments" in text
    assert "completed there when the receiver held the message" in text  # before the ACKs
    results.ns3 = {"latency": {**old, "segment": 8960, "acks": True}}
    text = "\n".join(table(results))
    assert "same segments, and ns-3's sends complete as the engine's" in text
    assert "held the message" not in text and "start skew" in text


def test_ns3_times_are_taken_as_bmv2_takes_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """BMv2's completion_s is the first start to the last end (a barrier: the mean over
    ranks); ns-3's mean over ranks set beside it made a broadcast's offload look slower than
    it is: the ratio must come from ns-3's slowest rank, and the barrier's from the mean."""

    class Ranks:
        def __init__(self, topo: object, params: object) -> None:
            pass

        def run(
            self, collective: str, name: str, size: int, mode: str = "single"
        ) -> SimpleNamespace:
            # the offload's mean is near its slowest rank's; the baselines' far below it
            if name in ("innet", "lin", "ragasa"):
                return SimpleNamespace(avg_us=50.0, max_us=55.0)
            return SimpleNamespace(avg_us=125.0, max_us=240.0)

        def close(self) -> None:
            pass

    monkeypatch.setattr(simulation_module, "Simulation", Ranks)
    out = simulate("df:2,4,2", {"rate_mbit": 0.451, "delay_s": 0.01}, wire.JUMBO_MTU)
    assert out["latency"]["ratio"] == pytest.approx(240.0 / 55.0)
    assert out["latency"]["statistic"] == "slowest rank"
    assert out["barrier"]["ratio"] == pytest.approx(125.0 / 50.0)
    assert out["latency"]["mean_us"]["binomial"] == 125.0
    results = ib_mcast(0.01, 0.03)
    results.ns3 = out
    assert "slowest rank" in "\n".join(table(results))


# -- --ns3-only: ns-3 again beside the BMv2 cells already in the file ------------------------

STORED_LINKS = {
    "rate_mbit": 0.9,
    "global_rate_mbit": 0.8,
    "delay_s": 0.02,
    "global_delay_s": 0.03,
    "queue_packets": 500,
    "describe": "host/local links 900kb/s 20ms, global links 800kb/s 30ms, queue 500 packets",
}


def stored(results: Results, links: dict[str, Any] | None = None) -> Results:
    """``results`` as a BMv2 run on other links than any default left them."""
    env = {"links": links or STORED_LINKS, "mtu": 1500, "dilation": 50000.0, "cores": 2}
    results.runs.append(Run("2026-11-27T05:39:05Z", "python -m ... --dilation 50000", "abc", env))
    return results


def ns3_only(tmp_path: Path, results: Results, *extra: str) -> int:
    path = tmp_path / "results.json"
    results.save(path)
    report = ["--report", str(tmp_path / "results.md"), "--img-dir", str(tmp_path / "img")]
    return reproduce.main(["--ns3-only", "--results", str(path), *report, *extra])


def test_ns3_only_refuses_a_file_without_bmv2_cells_to_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object) -> None:
        raise AssertionError("simulated with nothing to compare")

    monkeypatch.setattr(ns3_side, "simulate", never)
    assert ns3_only(tmp_path, stored(Results("df:2,4,2", "quick", 1))) == 1
    assert "no BMv2 cells to compare with" in capsys.readouterr().err
    # a failed cell, or an offload without its baseline, compares nothing either
    failed = stored(ib_mcast(0.01, 0.03))
    failed.cells["ib-mcast:binomial"].errors = ["node 3: no result"]
    assert ns3_only(tmp_path, failed) == 1
    assert "no BMv2 cells to compare with" in capsys.readouterr().err
    assert not Results.load(tmp_path / "results.json").ns3
    assert not (tmp_path / "results.md").exists()
    missing = ["--ns3-only", "--results", str(tmp_path / "none.json")]
    assert reproduce.main(missing) == 1
    assert "does not exist" in capsys.readouterr().err


def test_ns3_only_simulates_the_links_the_stored_cells_ran_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, dict[str, Any], int]] = []

    def recorded(topo: str, links: dict[str, Any], mtu: int) -> dict[str, dict[str, Any]]:
        calls.append((topo, links, mtu))
        return {"latency": {"ratio": 2.9, "params": "links 0.9Mbps/20000000ns"}}

    monkeypatch.setattr(ns3_side, "simulate", recorded)
    results = stored(ib_mcast(0.01, 0.03))
    results.topo = "df:2,2,1"
    # the stored run's links, not the command's defaults (df-scatter at --dilation auto)
    assert ns3_only(tmp_path, results, "--topo", "df:2,2,1") == 0
    links = {k: v for k, v in STORED_LINKS.items() if k != "describe"}
    assert calls == [("df:2,2,1", links, 1500)]
    assert "MTU 1500, dilation 50000x (run 0 of the file)" in capsys.readouterr().out
    saved = Results.load(tmp_path / "results.json")
    assert saved.ns3["latency"] == {
        "ratio": 2.9,
        "params": "links 0.9Mbps/20000000ns",
        "bmv2_runs": [0],
        "dilation": 50000.0,
    }
    assert saved.cells == results.cells and saved.runs == results.runs  # BMv2's left as they were
    report = (tmp_path / "results.md").read_text()
    assert "| 3.00x | 2.90x |" in report and "run 0 of the results file, dilation 50000x" in report


def test_ns3_only_takes_no_link_options_and_one_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ns3_side, "simulate", lambda *args: pytest.fail("simulated"))
    assert ns3_only(tmp_path, stored(ib_mcast(0.01, 0.03)), "--rate", "1", "--dilation", "9") == 2
    assert "leave out --rate, --dilation" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the one or the other
        reproduce.parse_args(["--ns3", "--ns3-only"])
    # cells measured by two runs on different links: one ns-3 run cannot stand beside both
    results = stored(stored(ib_mcast(0.01, 0.03)), {**STORED_LINKS, "rate_mbit": 0.45})
    results.cells["ib-mcast:binomial"].run = 1
    assert ns3_only(tmp_path, results) == 1
    assert "ran on different networks" in capsys.readouterr().err


# -- [Ragasa]: every rank a root at once ------------------------------------------------------

RAGASA_S = {"innet": 21.95, "ragasa": 22.39, "binomial": 76.14}  # docs/results.json, run 2


def ragasa_cells(results: Results | None = None) -> Results:
    """The BMv2 cells of every rank broadcasting 16 KiB, as make reproduce records them (and
    a one-root broadcast of the same size, which must not count)."""
    results = results or Results("df:2,4,2", "quick", 1)
    for name, t in RAGASA_S.items():
        m = measurement(algorithm=name, chosen=name, size=16384, completion_s=[t, t])
        results.cells[f"ragasa:{name}/16384"] = cell(f"ragasa:{name}/16384", m, run=0)
    one_root = measurement(algorithm="innet", size=16384, mode="single", completion_s=[0.1])
    results.cells["ragasa:innet/one-root"] = cell("ragasa:innet/one-root", one_root)
    return results


def test_the_ragasa_comparisons_take_the_cells_of_every_rank_a_root() -> None:
    by_key = {c.key: c for c in COMPARISONS}
    ragasa, innet = by_key["all-roots-ragasa"], by_key["all-roots-innet"]
    assert (ragasa.mode, ragasa.size, ragasa.paper) == ("all_roots", 16384, 2.99)
    results = ragasa_cells()
    assert bmv2_ratio(results, ragasa) == pytest.approx(76.14 / 22.39)
    assert bmv2_ratio(results, innet) == pytest.approx(76.14 / 21.95)
    # the one-root comparisons do not take them
    assert bmv2_ratio(results, by_key["latency"]) is None


def test_ns3_runs_every_rank_a_root_for_ragasa(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Ragasa comparisons simulate every rank rooting one 16 KiB broadcast (binomial, the
    baseline both share, once), and the report sets ns-3's ratio beside BMv2's."""
    calls: list[tuple[str, str, int, str]] = []

    class Recorded:
        def __init__(self, topo: object, params: object) -> None:
            pass

        def run(
            self, collective: str, name: str, size: int, mode: str = "single"
        ) -> SimpleNamespace:
            calls.append((collective, name, size, mode))
            fast = name in ("innet", "lin", "ragasa")
            return SimpleNamespace(avg_us=10.0 if fast else 30.0, max_us=20.0 if fast else 68.0)

        def close(self) -> None:
            pass

    monkeypatch.setattr(simulation_module, "Simulation", Recorded)
    out = simulate("df:2,4,2", {"rate_mbit": 0.451, "delay_s": 0.01}, wire.JUMBO_MTU)
    all_roots = [c for c in calls if c[3] == "all_roots"]
    assert sorted(all_roots) == [
        ("bcast", name, 16384, "all_roots") for name in ("binomial", "innet", "ragasa")
    ]
    assert len(calls) == len(set(calls))  # nothing simulated twice
    assert out["all-roots-ragasa"]["ratio"] == pytest.approx(68.0 / 20.0)
    assert out["all-roots-ragasa"]["mode"] == "all_roots"
    assert out["all-roots-ragasa"]["statistic"] == "slowest rank"
    results = ragasa_cells()
    results.ns3 = out
    text = "\n".join(table(results))
    assert (
        "| bcast 16384 B, every rank a root at once: ragasa over the fastest of binomial "
        "| 3.40x | 3.40x | 2.99x | yes |" in text
    )
    assert "| bcast 16384 B, every rank a root at once: innet over the fastest of binomial " in text
    assert "| 3.47x | 3.40x | - | yes |" in text


def test_ns3_only_sets_ragasa_beside_the_stored_ragasa_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose only comparable cells are the Ragasa ones (and one with them in a later
    run on the same links, as docs/results.json holds them) is simulated, not refused."""
    calls: list[tuple[str, dict[str, Any], int]] = []

    def recorded(topo: str, links: dict[str, Any], mtu: int) -> dict[str, dict[str, Any]]:
        calls.append((topo, links, mtu))
        return {"all-roots-ragasa": {"ratio": 3.1, "params": "links 0.9Mbps/20000000ns"}}

    monkeypatch.setattr(ns3_side, "simulate", recorded)
    assert ns3_only(tmp_path, stored(ragasa_cells())) == 0
    assert len(calls) == 1
    report = (tmp_path / "results.md").read_text()
    assert (
        "every rank a root at once: ragasa over the fastest of binomial | 3.40x | 3.10x" in report
    )
    results = stored(stored(ib_mcast(0.01, 0.03)))
    ragasa_cells(results)
    for key in RAGASA_S:
        results.cells[f"ragasa:{key}/16384"].run = 1
    assert ns3_only(tmp_path, results) == 0
    assert "(run 0, 1 of the file)" in capsys.readouterr().out
