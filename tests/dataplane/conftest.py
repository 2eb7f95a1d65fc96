"""The data-plane tier: BMv2 in a namespace of its own. Skips, with one line saying why, where
root, simple_switch_grpc or the compiled program is missing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mininet_topos.single_switch import SingleSwitchLab
from tests.dataplane_scenarios import ALL_PORTS

BUILD_DIR = Path(__file__).resolve().parents[2] / "build"


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces and veth pairs"
    if shutil.which("simple_switch_grpc") is None:
        return "BMv2 simple_switch_grpc is not installed (make doctor)"
    if not (BUILD_DIR / "netcoll.json").exists():
        return "build/netcoll.json is missing: p4c-bm2-ss is not installed (make build)"
    return None


REASON = unavailable()


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
