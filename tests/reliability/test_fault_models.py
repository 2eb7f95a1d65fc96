"""Collectives stay correct on links that lose frames in bursts (Gilbert-Elliott) and on a
link that goes down mid-run and comes back, on the seeded link emulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("mininet", reason="Mininet is not installed (apt-get install mininet)")

from host_agents.launcher import LaunchResult
from host_agents.report import format_table
from host_agents.workload import CollectiveTest, Workload
from mininet_topos.links.linkemu import Impairment
from mininet_topos.network import NetcollNetwork

pytestmark = pytest.mark.reliability

# 2% of frames lost on average, in bursts of 5 frames (or 5 ms of an idle link)
BURSTY = Impairment(
    burst_enter=0.004, burst_exit=0.2, burst_tick=0.001, duplicate=0.01, reorder=0.02
)


@pytest.fixture
def network(faulty_network: NetcollNetwork) -> Iterator[NetcollNetwork]:
    """The module's network, given back with the tier's usual faults."""
    yield faulty_network
    faulty_network.set_faults(Impairment(loss=0.02, duplicate=0.02, reorder=0.05))


def run(net: NetcollNetwork, tests: list[CollectiveTest], seed: int) -> LaunchResult:
    members = tuple(h.node_id for h in net.topo.hosts)
    with net.communicator(members) as (comm_id, _):
        return net.launcher().launch(Workload(comm_id, members, tests, seed=seed), timeout=600)


@pytest.mark.parametrize("algorithm", ["innet", "binomial"])
def test_broadcasts_survive_bursty_loss(
    network: NetcollNetwork, algorithm: str, test_seed: int
) -> None:
    network.set_faults(BURSTY)
    before = network.fault_stats()["totals"]
    test = CollectiveTest("bcast", algorithm, (16384,), iterations=60, warmup=0, root=1, sync=False)
    result = run(network, [test], test_seed)
    after = network.fault_stats()["totals"]
    print(format_table(result.rows))
    assert result.ok, result.errors[:3]
    assert result.rows[0].iterations == 60
    assert after["lost"] - before["lost"] > 0, "the bursty loss was not active"


def test_collectives_complete_across_a_link_that_goes_down_and_comes_back(
    network: NetcollNetwork, test_seed: int
) -> None:
    network.set_faults(Impairment())
    # the root's own host link, down 0.5 s in every 1.5: nothing it sends or should receive
    # gets through then. Any second of traffic meets an outage wherever the run starts in
    # the cycle (with 1 s in every 3, a quick run fitted between two outages)
    root = network.topo.hosts[1]
    link = next(s.name for s in network.emulated if s.name.startswith(f"{root.name}-"))
    network.set_faults(Impairment(down_for=0.5, down_every=1.5), [link])
    before = network.fault_stats()["totals"]
    tests = [
        CollectiveTest("bcast", "innet", (16384,), iterations=40, warmup=0, root=1, sync=False),
        CollectiveTest("allgather", "ring", (1024,), iterations=5, warmup=0),
        CollectiveTest("barrier", "innet", (0,), iterations=20, warmup=0),
    ]
    result = run(network, tests, test_seed)
    after = network.fault_stats()["totals"]
    print(format_table(result.rows))
    print(f"frames lost while the link was down: {after['down_lost'] - before['down_lost']}")
    assert result.ok, result.errors[:3]
    assert after["down_lost"] > before["down_lost"], "the link never went down"
