"""The fidelity verdict: a cell counts as network-bound only with CPU headroom and with busy
links sending at their rate."""

from __future__ import annotations

import json

import pytest

from mininet_topos.links.fidelity import (
    CPU_BOUND,
    NETWORK_BOUND,
    PortSample,
    judge,
    link_use,
    parse_qdiscs,
)

pytestmark = pytest.mark.unit

TC_JSON = json.dumps(
    [
        {
            "kind": "htb",
            "handle": "5:",
            "root": True,
            "dev": "ncs0-eth1",
            "bytes": 9000,
            "packets": 6,
            "drops": 0,
            "backlog": 3028,
            "qlen": 2,
        },
        {
            "kind": "pfifo",
            "handle": "10:",
            "parent": "5:1",
            "dev": "ncs0-eth1",
            "bytes": 9000,
            "packets": 6,
            "drops": 4,
            "backlog": 3028,
            "qlen": 2,
        },
        {"kind": "noqueue", "handle": "0:", "root": True, "dev": "lo", "bytes": 0, "drops": 0},
    ]
)


def test_qdisc_statistics_are_read_per_shaped_port() -> None:
    ports = parse_qdiscs(TC_JSON, {"ncs0-eth1"})
    assert ports == {"ncs0-eth1": PortSample(sent_bytes=9000, drops=4, backlog_bytes=3028)}


def test_a_deliberately_cpu_bound_cell_is_flagged() -> None:
    # both cores busy for the whole window, as every unshaped Df(2,4,2) cell measured
    verdict = judge(True, {"bmv2": 1.2, "agents": 0.8}, {"bmv2": 0.1, "agents": 0.02}, 1.0, cores=2)
    assert verdict.verdict == CPU_BOUND
    assert "100% of 2 cores" in verdict.short()


def test_one_saturated_process_is_enough_to_flag_a_cell() -> None:
    verdict = judge(True, {"bmv2": 0.95}, {"bmv2": 0.95}, 1.0, cores=2)
    assert not verdict.network_bound
    assert "one bmv2 process used 0.95 of a core" in verdict.short()


def test_unshaped_links_are_never_network_bound() -> None:
    verdict = judge(False, {"bmv2": 0.01}, {"bmv2": 0.01}, 1.0, cores=2)
    assert not verdict.network_bound and "unshaped" in verdict.short()


def test_headroom_and_links_at_their_rate_make_a_network_bound_cell() -> None:
    rate = 10.0  # Mb/s: 1.25 MB/s, so 0.25 MB per 0.2 s sample while backlogged
    samples = [
        (t * 0.2, {"p": PortSample(int(t * 250_000), 0, 5000 if t < 5 else 0)}) for t in range(6)
    ]
    use = link_use(samples, {"p": rate}, 0.0, 1.0)
    assert use.busy_rate_share == pytest.approx(1.0)
    assert use.busiest_port == "p" and use.busiest_utilisation == pytest.approx(1.0)
    verdict = judge(True, {"bmv2": 0.3, "agents": 0.2}, {"bmv2": 0.05}, 1.0, links=use, cores=2)
    assert verdict.verdict == NETWORK_BOUND, verdict.reasons


def test_a_backlogged_link_sending_below_its_rate_is_flagged() -> None:
    # frames queued throughout, but they left at 60% of the rate: something else paced them
    samples = [(t * 0.2, {"p": PortSample(int(t * 150_000), 0, 9000)}) for t in range(6)]
    use = link_use(samples, {"p": 10.0}, 0.0, 1.0)
    assert use.busy_rate_share == pytest.approx(0.6)
    verdict = judge(True, {"bmv2": 0.1}, {"bmv2": 0.05}, 1.0, links=use, cores=2)
    assert not verdict.network_bound and "60% of their rate" in verdict.short()
