"""BMv2's ratio beside ns-3's with the same links, and whether they agree within 25%."""

from __future__ import annotations

import pytest

from mininet_topos.experiments.reproduce.ns3_side import COMPARISONS, bmv2_ratio, table
from mininet_topos.experiments.reproduce.results import Results
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
