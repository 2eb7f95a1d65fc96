"""The end-to-end tier: a Mininet dragonfly of BMv2 switches, one agent per host.

Runs with ``make test-e2e``; skips, with one line saying why, where root, Mininet, BMv2 or
the compiled program is missing. NETCOLL_E2E_TOPO picks the topology (default Df(2,4,2)).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.requirements import ROOT, network_unavailable

TOPO = os.environ.get("NETCOLL_E2E_TOPO", "df:2,4,2")


REASON = network_unavailable()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
            if REASON is not None:
                item.add_marker(pytest.mark.skip(reason=REASON))


@pytest.fixture(scope="session")
def network() -> Iterator[object]:
    if REASON is not None:
        pytest.skip(REASON)
    from mininet_topos.network import NetcollNetwork, NetworkOptions

    net = NetcollNetwork(
        NetworkOptions(spec=TOPO, build_dir=ROOT / "build", log_dir=ROOT / "logs" / "e2e")
    )
    with net:
        print(f"\n{net.report}")
        yield net
