"""Every collective algorithm on a simulated Df(2,2,1): byte-exact results, and every link
carrying exactly what the controller's routes and trees predict for the messages sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller import trees, wire
from controller.topology_build import parse_spec
from host_agents.collectives import algorithm_names
from mininet_topos.ns3sim import simulation as simulation_module
from mininet_topos.ns3sim.accounting import barrier_links, predicted_link_bytes
from mininet_topos.ns3sim.simulation import Simulation, hollow_buffer

SIZES = {
    "bcast": 20000,
    "scatter": 1000,
    "allgather": 1500,
    "barrier": 0,
    "allreduce": 4000,
    "reduce": 4000,
}
CELLS = [(c, name) for c, names in algorithm_names().items() for name in names]


@pytest.fixture(scope="module")
def simulation() -> Iterator[Simulation]:
    sim = Simulation(parse_spec("df:2,2,1"), seed=7, progress_every=0)
    yield sim
    sim.close()


@pytest.mark.parametrize(("collective", "algorithm"), CELLS)
def test_every_rank_gets_the_right_bytes(
    simulation: Simulation, collective: str, algorithm: str
) -> None:
    outcome = simulation.run(collective, algorithm, SIZES[collective], root=3)
    assert outcome.checked == "bytes"
    assert outcome.wrong == 0
    assert outcome.drops == 0
    assert len(outcome.times_us) == 12 and min(outcome.times_us) > 0


@pytest.mark.parametrize(("collective", "algorithm"), CELLS)
def test_each_link_carries_what_routes_and_trees_predict(
    simulation: Simulation, collective: str, algorithm: str
) -> None:
    outcome = simulation.run(collective, algorithm, SIZES[collective], root=5)
    predicted = predicted_link_bytes(
        simulation.topo,
        simulation.members,
        simulation.transport.traffic,
        simulation.transport.tree_cache,
    )
    assert dict(predicted) == outcome.per_link
    assert outcome.link_bytes == sum(predicted.values()) > 0


def test_the_in_network_broadcast_meets_the_physical_minimum(simulation: Simulation) -> None:
    # each of the 5 tree links and 12 host links carries each of the 14 segments once
    outcome = simulation.run("bcast", "innet", 20000, root=0)
    assert outcome.packets == 14 * (1 + 5 + 11)
    binomial = simulation.run("bcast", "binomial", 20000, root=0)
    assert binomial.link_bytes > outcome.link_bytes
    assert binomial.avg_us > outcome.avg_us


def test_the_in_network_allreduce_crosses_each_tree_link_once_per_chunk_each_way(
    simulation: Simulation,
) -> None:
    """The routers merge each chunk on its way up the barrier tree and send one result down:
    every host link and tree link carries each 128-byte chunk once each way, fewer bytes than
    any host algorithm moves, and one trip up and down beats their rounds."""
    members = simulation.members
    links = barrier_links(trees.barrier_tree(simulation.topo, members))
    chunks = -(-4000 // (wire.AGG_LANES * 4))
    innet = simulation.run("allreduce", "innet", 4000)
    assert innet.packets == chunks * len(links)
    small = simulation.run("allreduce", "innet", 4)
    for host in ("recursive_doubling", "ring", "rabenseifner", "binomial"):
        assert simulation.run("allreduce", host, 4000).link_bytes > innet.link_bytes, host
        assert simulation.run("allreduce", host, 4).max_us > small.max_us, host


@pytest.mark.parametrize("algorithm", ["ring", "bruck", "tar"])
def test_a_hollow_allgather_moves_and_times_exactly_what_a_real_one_does(
    simulation: Simulation, algorithm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past EXACT_LIMIT the buffers are hollow (Df(6,12,6)'s allgather would need 28 GB):
    the network must still carry every byte, so traffic and times equal a real run's."""
    real = simulation.run("allgather", algorithm, 70000)
    monkeypatch.setattr(simulation_module, "EXACT_LIMIT", 1)
    hollow = simulation.run("allgather", algorithm, 70000)
    assert (hollow.checked, real.checked) == ("sizes", "bytes")
    assert hollow.wrong == real.wrong == 0
    assert hollow.per_link == real.per_link
    assert hollow.times_us == pytest.approx(real.times_us, abs=1e-6)


def test_hollow_buffers_are_writable_and_share_their_memory() -> None:
    a, b = hollow_buffer(1 << 20), hollow_buffer(3 << 20)
    assert (len(a), len(b)) == (1 << 20, 3 << 20)
    view = memoryview(b)
    view[(2 << 20) : (2 << 20) + 4] = b"abcd"  # a block write lands at its offset
    assert bytes(b[(2 << 20) : (2 << 20) + 4]) == b"abcd"
    view[:4] = b"wxyz"
    assert bytes(a[:4]) == b"wxyz"  # one memory behind every buffer
