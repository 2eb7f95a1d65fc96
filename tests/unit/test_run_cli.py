"""The Mininet CLI of ``make run``: every command its help and the README name exists, and
``restart I`` restarts switch I through the network (no Mininet network needed: a stand-in)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("mininet.cli", reason="Mininet is not importable (make deps)")

from controller import wire
from mininet_topos.network import BringUpError, NetcollNetwork, NetworkOptions, run

pytestmark = pytest.mark.unit
README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_command_the_docs_name_exists() -> None:
    assert run.__doc__ is not None
    docstring = run.__doc__.split("the CLI has", 1)[1].split("(", 1)[0]
    named = set(re.findall(r"``(\w+)``", docstring))
    in_readme = set(re.findall(r"^\| `(\w+)[ `]", README.read_text(), re.MULTILINE))
    commands = {"comm", "free", "comms", "coll", "counters", "tables", "barrier", "restart"}
    assert named == commands
    assert commands <= in_readme
    for name in commands:
        assert callable(getattr(run.NetcollCLI, f"do_{name}", None)), name


class FakeNetwork:
    def __init__(self) -> None:
        self.restarted: list[int] = []

    def restart_switch(self, index: int) -> float:
        self.restarted.append(index)
        return 1.25


def test_restart_restarts_the_named_switch(capsys: pytest.CaptureFixture[str]) -> None:
    net = FakeNetwork()
    cli = SimpleNamespace(netcoll=net)
    run.NetcollCLI.do_restart(cli, "2")  # type: ignore[arg-type]
    assert net.restarted == [2]
    assert "switch 2 restarted and programmed again in 1.2 s" in capsys.readouterr().out
    run.NetcollCLI.do_restart(cli, "")  # type: ignore[arg-type]
    run.NetcollCLI.do_restart(cli, "two")  # type: ignore[arg-type]
    assert net.restarted == [2]
    assert capsys.readouterr().out.count("usage: restart SWITCH_INDEX") == 2


def test_restart_of_an_unknown_switch_names_the_valid_ones() -> None:
    net = NetcollNetwork(NetworkOptions(spec="df:2,2,1"))
    net.mininet = SimpleNamespace(switches=[SimpleNamespace(index=i) for i in range(6)])  # type: ignore[assignment]
    net.control = SimpleNamespace()  # type: ignore[assignment]
    with pytest.raises(ValueError, match=r"no switch 6: the switches are 0\.\.5"):
        net.restart_switch(6)


def test_agents_cut_segments_to_the_links_mtu() -> None:
    parser = argparse.ArgumentParser()
    run.add_network_arguments(parser)
    jumbo = NetcollNetwork(run.options_from(parser.parse_args([])))
    assert jumbo.options.mtu == wire.JUMBO_MTU
    assert jumbo.segment_size == wire.JUMBO_MTU - wire.HEADER_LEN
    standard = NetcollNetwork(run.options_from(parser.parse_args(["--mtu", "1500"])))
    assert standard.segment_size == wire.MAX_PAYLOAD == 1460


def test_an_mtu_no_frame_fits_is_refused_before_anything_starts() -> None:
    net = NetcollNetwork(NetworkOptions(spec="df:2,2,1", mtu=40))
    with pytest.raises(BringUpError, match=r"MTU 40 is outside 48\.\.65535"):
        net.start()


def test_jumbo_links_keep_the_bytes_in_flight_of_standard_frames() -> None:
    """BMv2's per-port socket buffer sets how many bytes may be in flight, not segments: at
    9000-byte frames the windows shrink so a burst stays the size tested at 1500."""
    from host_agents.engine import EngineConfig
    from mininet_topos.network import windows_for

    base = EngineConfig()
    jumbo = windows_for(wire.max_payload(wire.JUMBO_MTU))
    burst = jumbo["mcast_window"] * wire.max_payload(wire.JUMBO_MTU)
    assert burst <= base.mcast_window * base.segment_size
    assert jumbo["ack_every"] * 2 <= jumbo["mcast_window"]  # checkpoints inside the window
    assert windows_for(base.segment_size)["mcast_window"] == base.mcast_window
