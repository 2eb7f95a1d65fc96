"""Every rank rooting a broadcast at once ([Ragasa]'s experiment) on the whole network: with
switch-merged ACKs, and on links shaped to 10 and 2 Mb/s, where queues, not the CPU, set the
round trip. Every byte right, no root giving up, and (shaped) the in-network broadcasts within
1.5x of the minimum link bytes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from host_agents.launcher import LaunchResult
from host_agents.workload import CollectiveTest, Workload
from mininet_topos.links.shaping import LinkModel

ITERATIONS = 2  # and one warm-up: three operations, each every rank's broadcast at once
LINK_BYTES_FACTOR = 1.5


def all_roots(network: Any, algorithm: str, size: int, ack_merge: str) -> tuple[LaunchResult, Any]:
    from mininet_topos.experiments.measure import LinkMeter, metered_launch, minimum_bytes

    members = tuple(h.node_id for h in network.topo.hosts)
    test = CollectiveTest("bcast", algorithm, (size,), ITERATIONS, 1, mode="all_roots")
    with network.communicator(members) as (comm_id, _):
        workload = Workload(comm_id, members, [test], seed=7, options={"ack_merge": ack_merge})
        run = metered_launch(network, LinkMeter(network), workload)
    minimum = minimum_bytes(network.topo, "allgather", members, 0, size, network.segment_size)
    per_op = run.link_bytes / (ITERATIONS + 1)
    return run.result, (per_op, minimum)


def assert_complete(result: LaunchResult) -> None:
    assert result.ok, result.errors[:3]
    assert result.rows and all(r.wrong == 0 for r in result.rows)
    assert result.stats_total("unacknowledged_multicasts") == 0


@pytest.mark.parametrize("size", [1, 16384])
def test_every_rank_roots_a_switch_merged_broadcast_at_once(network, size: int) -> None:  # type: ignore[no-untyped-def]
    result, _ = all_roots(network, "innet", size, "switch")
    assert_complete(result)


@pytest.fixture
def shaped(network, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The session's network with every link at ``request.param`` Mb/s, unshaped again after."""
    before = network.options.links
    network.reshape(dataclasses.replace(before, rate=float(request.param), global_rate=None))
    try:
        yield network
    finally:
        network.reshape(before if before.shaped else LinkModel())


@pytest.mark.parametrize("shaped", [10, 2], indirect=True, ids=["10Mbps", "2Mbps"])
@pytest.mark.parametrize("algorithm", ["innet", "ragasa", "binomial"])
def test_every_rank_broadcasts_16k_on_shaped_links(shaped, algorithm: str) -> None:  # type: ignore[no-untyped-def]
    result, (per_op, minimum) = all_roots(shaped, algorithm, 16384, "coroots")
    print(
        f"\n{algorithm}: {per_op / 1e6:.1f} MB on the links per operation, "
        f"{per_op / minimum:.2f}x the minimum; {result.rows[0].avg_us / 1e6:.2f} s per operation"
        if result.rows
        else ""
    )
    assert_complete(result)
    if algorithm != "binomial":
        assert per_op <= LINK_BYTES_FACTOR * minimum, (
            f"{per_op:.0f} link bytes per operation, {per_op / minimum:.2f}x the minimum"
        )
