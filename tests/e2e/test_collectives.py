"""Every collective with every algorithm on a running dragonfly, data checked at every rank.

Sizes: bcast 1 B, 16 KiB and 1 MiB; scatter and allgather blocks of 1 B, 1 KiB and 16 KiB;
allreduce and reduce vectors of 4 B, 1 KiB and 64 KiB (sums, checked against a host sum);
on the full communicator, then on a random subset with a random root (seeded, printed); and
a persistent broadcast started 100 times with the buffer changed between starts.

CI's subset (``make test-e2e-subset``: marker ``e2e_subset``, NETCOLL_E2E_SUBSET=1) runs only
the random subset, with each collective's in-network algorithms and one host algorithm drawn
from the seed.
"""

from __future__ import annotations

import os
import random

import pytest

from host_agents.collectives import COLLECTIVES, algorithm_names
from host_agents.report import format_table
from host_agents.workload import CollectiveTest, Workload

SIZES = {
    "bcast": (1, 16384, 1 << 20),
    "scatter": (1, 1024, 16384),
    "allgather": (1, 1024, 16384),
    "barrier": (0,),
    "allreduce": (4, 1024, 65536),
    "reduce": (4, 1024, 65536),
}
CASES = [(kind, name) for kind, table in algorithm_names().items() for name in table]
SUBSET = os.environ.get("NETCOLL_E2E_SUBSET", "") not in ("", "0")


def algorithms_under_test(collective: str, rng: random.Random) -> list[str]:
    """Every algorithm of ``collective``; in CI's subset its in-network ones and one host
    algorithm drawn from ``rng``."""
    table = COLLECTIVES[collective].algorithms
    if not SUBSET:
        return list(table)
    innet = [n for n, a in table.items() if a.needs_switch_state]
    return [*innet, rng.choice([n for n, a in table.items() if not a.needs_switch_state])]


def run(
    network, members: tuple[int, ...], tests: list[CollectiveTest], seed: int, timeout: float = 1200
):  # type: ignore[no-untyped-def]
    with network.communicator(members) as (comm_id, install):
        result = network.launcher().launch(
            Workload(comm_id, members, tests, seed=seed), timeout=timeout
        )
    print(f"communicator {comm_id} ({len(members)} ranks) installed in {install * 1e3:.1f} ms")
    print(format_table(result.rows))
    assert not result.errors, result.errors[:5]
    assert result.wrong == 0, f"{result.wrong} iterations delivered wrong data"
    assert {row.ranks for row in result.rows} == {len(members)}, "a rank reported no result"
    assert len(result.rows) == sum(len(t.sizes) for t in tests)
    return result


@pytest.mark.parametrize(("collective", "algorithm"), CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_full_communicator(network, collective: str, algorithm: str, test_seed: int) -> None:  # type: ignore[no-untyped-def]
    members = tuple(h.node_id for h in network.topo.hosts)
    root = len(members) // 3
    test = CollectiveTest(
        collective, algorithm, SIZES[collective], iterations=2, warmup=1, root=root
    )
    run(network, members, [test], test_seed)


@pytest.mark.e2e_subset
@pytest.mark.parametrize("collective", list(algorithm_names()))
def test_random_subset_and_root(
    network, collective: str, test_rng: random.Random, test_seed: int
) -> None:  # type: ignore[no-untyped-def]
    hosts = [h.node_id for h in network.topo.hosts]
    members = tuple(test_rng.sample(hosts, test_rng.randrange(3, len(hosts))))
    root = test_rng.randrange(len(members))
    names = algorithms_under_test(collective, test_rng)
    print(f"subset of {len(members)} hosts {members}, root rank {root}, algorithms {names}")
    tests = [
        CollectiveTest(collective, name, SIZES[collective][:2], iterations=1, warmup=0, root=root)
        for name in names
    ]
    run(network, members, tests, test_seed)


@pytest.mark.parametrize("algorithm", ["innet", "binomial"])
def test_persistent_bcast_started_100_times(network, algorithm: str, test_seed: int) -> None:  # type: ignore[no-untyped-def]
    members = tuple(h.node_id for h in network.topo.hosts)
    test = CollectiveTest(
        "bcast", algorithm, (4096,), iterations=100, warmup=0, root=5, persistent=True
    )
    result = run(network, members, [test], test_seed)
    assert result.rows[0].iterations == 100


def test_split_by_group_then_collectives_on_the_parts(network, test_seed: int) -> None:  # type: ignore[no-untyped-def]
    """MPI_Comm_split through the communicator service: one communicator per dragonfly group,
    each running in-network collectives on its own switch state, then freed."""
    members = tuple(h.node_id for h in network.topo.hosts)
    tests = [
        CollectiveTest("bcast", "innet", (4096,), iterations=3, warmup=0, root=1),
        CollectiveTest("barrier", "innet", (0,), iterations=3, warmup=0),
        CollectiveTest("allgather", "innet", (256,), iterations=2, warmup=0),
    ]
    with network.communicator(members) as (comm_id, _):
        result = network.launcher().launch(
            Workload(comm_id, members, tests, seed=test_seed, split="group"), timeout=900
        )
    assert result.ok, result.errors[:5]
    parts = {r["split"]["comm_id"] for r in result.reports.values()}
    assert len(parts) == network.topo.num_groups
    assert network.control is not None
    assert not parts & set(network.control.comms), "the parts were not freed"
