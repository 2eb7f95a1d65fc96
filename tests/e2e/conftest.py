"""The end-to-end tier: a Mininet dragonfly of BMv2 switches, one agent per host.

Runs with ``make test-e2e``; skips, with one line saying why, where root, Mininet, BMv2 or
the compiled program is missing. NETCOLL_E2E_TOPO picks the topology (default Df(2,4,2)).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOPO = os.environ.get("NETCOLL_E2E_TOPO", "df:2,4,2")


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to run Mininet"
    if shutil.which("simple_switch_grpc") is None:
        return "BMv2 simple_switch_grpc is not installed (make doctor)"
    if not (ROOT / "build" / "netcoll.json").exists():
        return "build/netcoll.json is missing: p4c-bm2-ss is not installed (make build)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not importable (make deps)"
    return None


REASON = unavailable()


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
    try:
        report = net.start()
        print(f"\n{report}")
        yield net
    finally:
        net.stop()
