"""[Ragasa]'s experiment on ns-3: every rank roots one broadcast, all started at once, as the
BMv2 cell runs it (host_agents.workload_modes.all_roots), on a simulated Df(2,2,1) with
jumbo frames (16 KiB: two segments per broadcast)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.topology_build import parse_spec
from mininet_topos.ns3sim.network import LinkParams
from mininet_topos.ns3sim.simulation import Simulation, minimum_bytes

SIZE = 16384
ALGORITHMS = ("innet", "ragasa", "binomial")


@pytest.fixture(scope="module")
def simulation() -> Iterator[Simulation]:
    sim = Simulation(parse_spec("df:2,2,1"), LinkParams(mtu=9000), seed=7, progress_every=0)
    yield sim
    sim.close()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_rank_gets_every_roots_bytes(simulation: Simulation, algorithm: str) -> None:
    """Each of the 12 ranks ends with each of the 12 roots' 16 KiB, byte for byte, and each
    rank gave root r's broadcast the same epoch (one per root, in root order)."""
    before = [member.epoch for member in simulation.ranks]
    outcome = simulation.run("bcast", algorithm, SIZE, mode="all_roots")
    assert (outcome.mode, outcome.checked, outcome.wrong, outcome.drops) == (
        "all_roots",
        "bytes",
        0,
        0,
    )
    assert len(outcome.times_us) == 12 and min(outcome.times_us) > 0
    assert [m.epoch - b for m, b in zip(simulation.ranks, before, strict=True)] == [12] * 12


def test_every_roots_in_network_tree_carries_each_segment_once(simulation: Simulation) -> None:
    """All 12 in-network broadcasts at once move exactly 12 physical minima (each root's tree
    carrying each of its segments once), and more than any one of them takes longer."""
    members, segment = simulation.members, simulation.params.segment
    every = simulation.run("bcast", "innet", SIZE, mode="all_roots")
    minima = [
        minimum_bytes(simulation.topo, "bcast", members, root, SIZE, segment)
        for root in range(len(members))
    ]
    assert every.link_bytes == sum(m or 0 for m in minima)
    one = simulation.run("bcast", "innet", SIZE, root=0)
    assert one.link_bytes == minima[0]
    assert every.max_us > one.max_us


def test_the_offloads_beat_binomial_with_every_rank_a_root(simulation: Simulation) -> None:
    times = {
        name: simulation.run("bcast", name, SIZE, mode="all_roots").max_us for name in ALGORITHMS
    }
    assert times["innet"] < times["binomial"] and times["ragasa"] < times["binomial"]


def test_only_a_rooted_collective_runs_from_every_root(simulation: Simulation) -> None:
    with pytest.raises(ValueError, match="rooted collective"):
        simulation.run("barrier", "dissemination", 0, mode="all_roots")
    with pytest.raises(ValueError, match="mode 'overlap'"):
        simulation.run("bcast", "innet", SIZE, mode="overlap")
