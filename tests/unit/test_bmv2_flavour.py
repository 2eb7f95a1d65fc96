"""Which BMv2 build runs, as results and `make doctor` report it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from mininet_topos import bmv2, environment

pytestmark = pytest.mark.unit


def fake_switch(tmp_path: Path, name: str, help_text: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{help_text}\nEOF\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_the_event_logger_option_tells_the_logging_build(tmp_path: Path) -> None:
    logging = fake_switch(tmp_path, "logging", "--nanolog arg  IPC socket for events\n--log-level")
    speed = fake_switch(tmp_path, "speed", "--log-level arg\n--thrift-port arg")
    assert environment.bmv2_flavour(logging) == "logging"
    assert environment.bmv2_flavour(speed) == "speed"
    assert environment.bmv2_flavour(str(tmp_path / "absent")) == "missing"
    assert bmv2.timing_warning(speed) is None
    warning = bmv2.timing_warning(logging)
    assert warning is not None and "NETCOLL_BMV2" in warning
    assert bmv2.describe(speed) == {"binary": speed, "flavour": "speed"}


def test_the_binary_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(environment.BMV2_ENV, "/opt/bmv2-fast/bin/simple_switch_grpc")
    assert environment.default_bmv2() == "/opt/bmv2-fast/bin/simple_switch_grpc"
    assert bmv2.Bmv2Options().config("s0", 0, {}).binary == "/opt/bmv2-fast/bin/simple_switch_grpc"
    monkeypatch.delenv(environment.BMV2_ENV)
    assert environment.default_bmv2() == "simple_switch_grpc"
