"""BMv2 switch options belong to one network: each switch's process is configured from the
options its network gave it, so two networks in one process never share ports or files."""

from __future__ import annotations

from pathlib import Path

import pytest

from mininet_topos.network.bmv2 import Bmv2Options

pytestmark = pytest.mark.unit


def test_each_switch_gets_its_own_ports_from_its_networks_options() -> None:
    first = Bmv2Options(run_dir=Path("/tmp/a"), grpc_base=30000, thrift_base=20000)
    second = Bmv2Options(
        run_dir=Path("/tmp/b"), grpc_base=31000, thrift_base=21000, log_level="debug"
    )
    ports = {1: "ncs3-eth1", 2: "ncs3-eth2"}
    a, b = first.config("ncs3", 3, ports), second.config("ncs3", 3, ports)
    assert (a.device_id, a.grpc_address, a.thrift_port) == (4, "127.0.0.1:30003", 20003)
    assert (b.grpc_address, b.thrift_port) == ("127.0.0.1:31003", 21003)
    assert a.log_path == Path("/tmp/a/ncs3.log") and b.log_path == Path("/tmp/b/ncs3.log")
    command_a, command_b = a.command(), b.command()
    assert "-L" not in command_a and command_b[command_b.index("-L") + 1] == "debug"
    assert command_a[4:8] == ["-i", "1@ncs3-eth1", "-i", "2@ncs3-eth2"]
    assert command_a[command_a.index("--grpc-server-addr") + 1] == "127.0.0.1:30003"
    # options are values: building one network's switches cannot change another's
    assert first.config("ncs3", 3, ports) == a


def test_pcap_only_when_asked() -> None:
    ports = {1: "ncs0-eth1"}
    assert "--pcap" not in Bmv2Options().config("ncs0", 0, ports).command()
    command = Bmv2Options(pcap_dir=Path("logs")).config("ncs0", 0, ports).command()
    assert command[command.index("--pcap") + 1] == "logs"


def test_a_switch_configured_outside_a_network_runs_the_selected_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The single-switch data-plane harness builds its Bmv2Config directly: it must run the
    BMv2 the user selected (make BMV2=, NETCOLL_BMV2), like the Mininet switches, not
    whichever simple_switch_grpc is first on PATH."""
    from mininet_topos.network.bmv2 import Bmv2Config

    monkeypatch.setenv("NETCOLL_BMV2", "/opt/bmv2-fast/bin/simple_switch_grpc")
    config = Bmv2Config("lab", 1, {1: "sw1"}, "unix:/tmp/lab.sock", Path("/tmp/lab"))
    assert config.command()[0] == "/opt/bmv2-fast/bin/simple_switch_grpc"
    monkeypatch.delenv("NETCOLL_BMV2")
    config = Bmv2Config("lab", 1, {1: "sw1"}, "unix:/tmp/lab.sock", Path("/tmp/lab"))
    assert config.command()[0] == "simple_switch_grpc"
