"""The simulation tier: skipped, with the reason, where ns-3's wheel is not installed."""

from __future__ import annotations

import pytest

from mininet_topos.ns3sim.loader import unavailable_reason


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = unavailable_reason()
    for item in items:
        if "tests/simulation" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.simulation)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
