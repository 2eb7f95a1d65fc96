"""The reliability tier: collectives on a small dragonfly whose every link loses, duplicates
and reorders frames (the seeded link emulator), a switch restarted mid-run, and fuzzing.
NETCOLL_RELIABILITY_TOPO picks the topology (default df:2,2,1)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.requirements import ROOT, network_unavailable

TOPO = os.environ.get("NETCOLL_RELIABILITY_TOPO", "df:2,2,1")


@pytest.fixture(scope="module")
def faulty_network(test_seed: int) -> Iterator[Any]:
    reason = network_unavailable()
    if reason is not None:
        pytest.skip(reason)
    from mininet_topos.links.linkemu import Impairment
    from mininet_topos.network import NetcollNetwork, NetworkOptions

    options = NetworkOptions(
        spec=TOPO,
        build_dir=ROOT / "build",
        log_dir=ROOT / "logs" / "reliability",
        emulate_links=True,
        faults=Impairment(loss=0.02, duplicate=0.02, reorder=0.05),
        fault_seed=test_seed,
    )
    with NetcollNetwork(options) as net:
        print(f"\n{net.report}")
        yield net


@pytest.fixture(scope="module")
def test_seed() -> int:  # module scope for the network fixture; same value as tests/conftest
    from tests.conftest import DEFAULT_SEED

    seed = int(os.environ.get("NETCOLL_TEST_SEED", DEFAULT_SEED))
    print(f"seed={seed} (replay with NETCOLL_TEST_SEED={seed})")
    return seed
