"""The data-plane tier: BMv2 in a namespace of its own. Skips, with one line saying why, where
root, simple_switch_grpc or the compiled program is missing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mininet_topos.network.single_switch import SingleSwitchLab
from tests.dataplane_scenarios import ALL_PORTS
from tests.requirements import BUILD_DIR, switch_unavailable

REASON = switch_unavailable()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/dataplane/" in str(item.fspath):
            item.add_marker(pytest.mark.dataplane)
            if REASON is not None:
                item.add_marker(pytest.mark.skip(reason=REASON))


@pytest.fixture(scope="session", params=["subset", "all_ports"])
def lab(request: pytest.FixtureRequest) -> Iterator[SingleSwitchLab]:
    if REASON is not None:
        pytest.skip(REASON)
    with SingleSwitchLab(BUILD_DIR, ALL_PORTS, replication=request.param) as bench:
        yield bench
