"""BMv2's ratio beside ns-3's with the same links, and whether they agree within 25%."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from controller import wire
from mininet_topos.experiments.reproduce.ns3_side import COMPARISONS, bmv2_ratio, simulate, table
from mininet_topos.experiments.reproduce.results import Results
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

        def run(self, collective: str, name: str, size: int) -> SimpleNamespace:
            fast = name in ("innet", "lin")
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

        def run(self, collective: str, name: str, size: int) -> SimpleNamespace:
            # the offload's mean is near its slowest rank's; the baselines' far below it
            if name in ("innet", "lin"):
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
