"""Which BMv2 build runs, as results and `make doctor` report it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from mininet_topos.network import bmv2
from mininet_topos.tooling import machine

pytestmark = pytest.mark.unit


def fake_switch(tmp_path: Path, name: str, strings: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(b"\x7fELF..." + strings + b"\0--thrift-port\0")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_compiled_in_packet_log_message_tells_the_logging_build(tmp_path: Path) -> None:
    logging = fake_switch(tmp_path, "logging", machine.BMV2_LOGGING_MARK + b" {}")
    speed = fake_switch(tmp_path, "speed", b"Thrift server was started")
    assert machine.bmv2_flavour(logging) == "logging"
    assert machine.bmv2_flavour(speed) == "speed"
    assert machine.bmv2_flavour(str(tmp_path / "absent")) == "missing"
    assert bmv2.timing_warning(bmv2.describe(speed)) is None
    warning = bmv2.timing_warning(bmv2.describe(logging))
    assert warning is not None and "NETCOLL_BMV2" in warning
    assert bmv2.describe(speed) == {"binary": speed, "flavour": "speed"}


def test_the_binary_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(machine.BMV2_ENV, "/opt/bmv2-fast/bin/simple_switch_grpc")
    assert machine.default_bmv2() == "/opt/bmv2-fast/bin/simple_switch_grpc"
    assert bmv2.Bmv2Options().config("s0", 0, {}).binary == "/opt/bmv2-fast/bin/simple_switch_grpc"
    monkeypatch.delenv(machine.BMV2_ENV)
    assert machine.default_bmv2() == "simple_switch_grpc"
