"""What a user sees when the simulated network cannot deliver, and the CLI's outputs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from controller.topology_build import parse_spec
from mininet_topos.ns3sim import cli
from mininet_topos.ns3sim.loop import SimStall
from mininet_topos.ns3sim.network import LinkParams
from mininet_topos.ns3sim.simulation import Simulation


def test_a_full_switch_queue_stops_the_run_and_says_so() -> None:
    # three packets of queue in front of a global link 100 times slower than the others: a
    # 64 KiB binomial broadcast overflows it, and the messages that lost a packet can never
    # complete
    params = LinkParams(rate="1Gbps", global_rate="10Mbps", switch_queue=3)
    sim = Simulation(parse_spec("df:2,2,1"), params, progress_every=0)
    try:
        with pytest.raises(SimStall, match=r"packets were dropped by full switch queues"):
            sim.run("bcast", "binomial", 65536, root=0)
        # the simulation is usable again afterwards: nothing of the failed run stays queued
        # or holds a host's window (dropped packets are never credited back)
        assert int(sim.net.sim.Outstanding()) == 0
        assert sim.run("barrier", "innet", 0).wrong == 0
        assert sim.run("bcast", "binomial", 4096, root=0).wrong == 0
    finally:
        sim.close()


def test_make_simulate_writes_the_table_json_csv_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(
        [
            "--topo",
            "df:1,2,1",
            "--run",
            "bcast:innet,binomial:1024",
            "--run",
            "barrier:innet:0",
            "--out",
            str(tmp_path),
            "--progress",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "# netcoll bcast, algorithm innet, 6 ranks" in out
    assert "LinkBytes" in out and "GlobalBytes" in out
    (summary,) = tmp_path.glob("*-summary.json")
    meta = json.loads(summary.read_text())
    assert meta["backend"] == "ns-3" and len(meta["cells"]) == 3
    (table,) = [p for p in tmp_path.glob("*.json") if not p.name.endswith("summary.json")]
    rows = json.loads(table.read_text())["rows"]
    assert {r["algorithm"] for r in rows} == {"innet", "binomial"}
    assert len(list(tmp_path.glob("*.csv"))) == 1
    assert {p.name.rsplit("-", 1)[1] for p in tmp_path.glob("*.png")} == {
        "bcast.png",
        "barrier.png",
    }


def test_a_bad_run_spec_is_refused_with_the_known_names() -> None:
    with pytest.raises(SystemExit):
        cli.main(["--run", "scatter:fastest:1024"])


def test_a_multicast_from_a_host_that_is_not_the_trees_root_is_dropped_and_counted() -> None:
    # the routers forward a tree's group only from the parent port, as the switches check it:
    # another host's frames to the group are dropped at its router, and the run says why
    sim = Simulation(parse_spec("df:2,2,1"), progress_every=0)
    try:
        root, intruder = sim.members[0], sim.members[5]
        transport = sim.transport
        transport.tree("innet", root)  # the root's tree is installed
        group = sim.net.group_address("innet", root)
        transport.send(intruder, group, ("m", intruder), b"x" * 100, 100, 11, None)
        with pytest.raises(SimStall, match=r"1 packets found no route or tree entry"):
            sim.loop.run_until_complete(asyncio.sleep(1.0))
        assert sim.net.unrouted() == 1
        assert sim.net.drops() == 0
    finally:
        sim.close()
