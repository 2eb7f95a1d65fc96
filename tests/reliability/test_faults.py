"""No collective lost, hung or corrupted under loss, duplication and reordering, nor after a
switch restart, nor while an agent is fuzzed."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

pytest.importorskip("mininet", reason="Mininet is not installed (apt-get install mininet)")
pytest.importorskip("scapy", reason="Scapy is not installed (apt-get install python3-scapy)")
from scapy.layers.l2 import Ether
from scapy.packet import Raw, fuzz

from controller import wire
from host_agents.report import format_table
from host_agents.workload import CollectiveTest, Workload
from mininet_topos.links.linkemu import Impairment
from mininet_topos.network import NetcollNetwork
from tests.scapy_layers import Coll

pytestmark = pytest.mark.reliability

# (collective, algorithm, size): the in-network algorithm where one exists, and a host one
CASES = [
    ("bcast", "innet", 16384),
    ("bcast", "binomial", 16384),
    ("barrier", "innet", 0),
    ("barrier", "dissemination", 0),
    ("scatter", "tree", 1024),
    ("allgather", "innet", 1024),
    ("allgather", "innet_packed", 1024),
    ("allgather", "ring", 1024),
]


def launch(
    net: NetcollNetwork, tests: list[CollectiveTest], seed: int, comm_id: int | None = None
) -> Any:
    """Run ``tests`` on every host, on a new communicator unless ``comm_id`` is given."""
    members = tuple(h.node_id for h in net.topo.hosts)
    if comm_id is not None:
        return net.launcher().launch(Workload(comm_id, members, tests, seed=seed), timeout=600)
    with net.communicator(members) as (new_comm, _):
        return launch(net, tests, seed, new_comm)


@pytest.mark.parametrize(
    ("collective", "algorithm", "size"), CASES, ids=[f"{c}-{a}" for c, a, _ in CASES]
)
def test_100_consecutive_operations_under_faults(
    faulty_network: NetcollNetwork, collective: str, algorithm: str, size: int, test_seed: int
) -> None:
    before = faulty_network.fault_stats()["totals"]
    test = CollectiveTest(
        collective, algorithm, (size,), iterations=100, warmup=0, root=1, sync=False
    )
    result = launch(faulty_network, [test], test_seed)
    after = faulty_network.fault_stats()["totals"]
    print(format_table(result.rows))
    lost = after["lost"] - before["lost"]
    print(
        f"links lost {lost}, duplicated {after['duplicated'] - before['duplicated']}, "
        f"reordered {after['reordered'] - before['reordered']}; agents retransmitted "
        f"{result.stats_total('retransmissions') + result.stats_total('mcast_retransmissions')} "
        f"and sent {result.stats_total('nacks_sent')} NACKs"
    )
    assert not result.errors, result.errors[:3]
    assert result.wrong == 0
    assert result.rows[0].iterations == 100
    assert lost > 0, "the faults were not active"


def test_switch_restart_mid_run(faulty_network: NetcollNetwork, test_seed: int) -> None:
    """A switch of every tree restarts while broadcasts and barriers are in flight: the run
    completes with every byte right, and the same communicator keeps working afterwards,
    barriers past the epoch window included (its epochs survive the restart)."""
    net = faulty_network
    net.set_faults(Impairment())  # the restart is the fault here
    try:
        members = tuple(h.node_id for h in net.topo.hosts)
        busy = [
            CollectiveTest("bcast", "innet", (4096,), iterations=300, warmup=0, sync=False),
            CollectiveTest("barrier", "innet", (0,), iterations=30, warmup=0, sync=False),
        ]
        with net.communicator(members) as (comm_id, _):
            # peers wait out the reprogramming (finsy reconnects with a backoff of seconds)
            patient = {"peer_timeout": 60.0}
            workload = Workload(comm_id, members, busy, seed=test_seed, engine=patient)
            outcome: dict[str, Any] = {}
            runner = threading.Thread(
                target=lambda: outcome.update(result=net.launcher().launch(workload, timeout=600))
            )
            runner.start()
            time.sleep(3)  # the agents are busy: the restart lands in the middle of the run
            restarted = net.restart_switch(1, timeout=60)
            runner.join(700)
            assert not runner.is_alive(), "the run in flight did not finish"
            during = outcome["result"]
            print(f"switch 1 reprogrammed {restarted:.1f} s after it was killed")
            print(format_table(during.rows))
            assert net.control is not None and net.control.restarts >= 1
            assert during.ok, during.errors[:3]
            assert during.wrong == 0
            window = net.control.sizes.barrier_window
            tests = [
                CollectiveTest(c, a, (s,), iterations=5, warmup=0, root=2) for c, a, s in CASES
            ]
            tests.append(CollectiveTest("barrier", "innet", (0,), iterations=3 * window, warmup=0))
            after = launch(net, tests, test_seed + 1, comm_id)  # the same communicator
            print(format_table(after.rows))
            assert after.ok, after.errors[:3]
            assert after.wrong == 0
    finally:
        net.set_faults(Impairment(loss=0.02, duplicate=0.02, reorder=0.05))


def test_ten_thousand_bad_frames_at_an_agent(
    faulty_network: NetcollNetwork, test_seed: int
) -> None:
    net = faulty_network
    victim = net.topo.hosts[2]
    link = next(spec for spec in net.emulated if spec.name.startswith(f"{victim.name}-"))
    frames = 10_000
    outcome: dict[str, Any] = {}
    tests = [
        CollectiveTest("bcast", "innet", (8192,), iterations=150, warmup=0, sync=False),
        CollectiveTest("allgather", "ring", (512,), iterations=10, warmup=0),
    ]
    runner = threading.Thread(target=lambda: outcome.update(result=launch(net, tests, test_seed)))
    runner.start()
    time.sleep(3)  # the agents are up and busy: fuzz them in the middle of their work
    inject = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    inject.bind((link.end_a, 0))  # the emulator's end of the victim's link: straight to it
    try:
        eth = Ether(dst=victim.mac, src="02:00:00:00:99:99", type=wire.ETHERTYPE_COLL)
        templates = [bytes(eth / fuzz(Coll()) / Raw(b"x" * (i % 50))) for i in range(200)]
        for i in range(frames):
            inject.send(templates[i % len(templates)])
            if i % 200 == 199:
                time.sleep(0.01)  # spread over a second or two rather than one burst
    finally:
        inject.close()
        runner.join(700)
    result = outcome["result"]
    assert result.ok, result.errors[:3]
    victim_report = result.reports[victim.node_id]
    dropped = sum(victim_report["stats"]["dropped"].values())
    print(f"{frames} fuzzed frames at node {victim.node_id}: {dropped} rejected and counted")
    assert dropped >= frames * 0.99, victim_report["stats"]["dropped"]
