"""The agents' measurement modes on the in-process fabric: every rank a root at once
([Ragasa]), computation between start and wait ([Tofu2]), per-iteration stamps and the
start call's CPU time, each with every byte checked."""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

import pytest

from controller.topology import Topology
from controller.topology_build import dragonfly
from host_agents.agent import run_test
from host_agents.comm import CommOptions
from host_agents.engine import EngineConfig
from host_agents.workload import ALIGN_LEAD_S, CollectiveTest, Workload
from tests.fabric import Cluster

pytestmark = pytest.mark.unit

TOPO: Topology = dragonfly(2, 2, 1)
MEMBERS = tuple(h.node_id for h in TOPO.hosts)[:6]
FAST = EngineConfig(rto_initial=0.02, rto_min=0.005, barrier_rto=0.01, nack_delay=0.001)
OPTIONS = CommOptions(progress_timeout=30.0, first_data_timeout=60.0, op_timeout=120.0)


def run_everywhere(test: CollectiveTest) -> list[list[dict[str, Any]]]:
    async def body() -> list[list[dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        cluster = Cluster(TOPO, MEMBERS, loop=loop, config=FAST, options=OPTIONS)
        runs = [run_test(comm, test, 0, 7) for comm in cluster.comms]
        return list(await asyncio.wait_for(asyncio.gather(*runs), 120))

    return asyncio.run(body())


@pytest.mark.parametrize("algorithm", ["innet", "binomial"])
def test_every_rank_a_root_at_once_delivers_every_roots_bytes(algorithm: str) -> None:
    test = CollectiveTest("bcast", algorithm, (3000,), iterations=2, warmup=1, mode="all_roots")
    for entries in run_everywhere(test):
        (entry,) = entries
        assert entry["wrong"] == 0
        assert entry["root"] == -1 and entry["mode"] == "all_roots"
        assert len(entry["times"]) == len(entry["stamps"]) == 2
        assert all(end >= start for start, end in entry["stamps"])
        assert entry["cpu_seconds"] > 0


@pytest.mark.parametrize("persistent", [True, False])
def test_overlap_sweeps_computation_after_a_reference_without_any(persistent: bool) -> None:
    test = CollectiveTest(
        "bcast",
        "innet",
        (5000,),
        iterations=2,
        warmup=1,
        persistent=persistent,
        mode="overlap",
        compute=(0.5, 2.0),
    )
    for entries in run_everywhere(test):
        (entry,) = entries
        assert entry["wrong"] == 0
        assert len(entry["times"]) == len(entry["start_cpu"]) == 2
        assert [point["fraction"] for point in entry["overlap"]] == [0.5, 2.0]
        longest = entry["overlap"][1]
        # a fraction of this rank's own median time without computation
        assert longest["compute_s"] == pytest.approx(2.0 * statistics.median(entry["times"]))
        # the computation blocks the loop, so start to wait-return lasts at least as long
        assert min(longest["times"]) >= longest["compute_s"]


def test_single_mode_records_stamps_and_the_start_calls_cpu() -> None:
    test = CollectiveTest("bcast", "binomial", (1, 2000), iterations=3, warmup=1)
    for entries in run_everywhere(test):
        assert [e["size"] for e in entries] == [1, 2000]
        for entry in entries:
            assert entry["wrong"] == 0
            assert len(entry["stamps"]) == len(entry["start_cpu"]) == 3
            assert all(0 <= cpu < 0.5 for cpu in entry["start_cpu"])


def test_modes_are_checked_and_survive_the_workload_file(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="mode"):
        CollectiveTest("bcast", mode="sometimes")
    with pytest.raises(ValueError, match="rooted"):
        CollectiveTest("barrier", mode="all_roots")
    with pytest.raises(ValueError, match="compute"):
        CollectiveTest("bcast", mode="overlap", compute=(-1.0,))
    test = CollectiveTest("bcast", "innet", (16384,), mode="overlap", compute=(0.5, 1.0))
    path = tmp_path / "workload.json"
    Workload(1, (1, 2), [test]).save(path)
    assert Workload.load(path).tests == [test]


@pytest.mark.parametrize(
    ("mode", "lead"), [("single", ALIGN_LEAD_S), ("overlap", ALIGN_LEAD_S), ("all_roots", 0.6)]
)
def test_an_aligned_start_is_one_time_rank_0_chose_and_each_rank_says_how_late_it_began(
    mode: str, lead: float
) -> None:
    test = CollectiveTest(
        "bcast",
        "innet",
        (2000,),
        iterations=2,
        warmup=1,
        mode=mode,
        aligned=True,
        align_lead_s=lead,
    )
    reports = [entries[0] for entries in run_everywhere(test)]
    for i in range(2):
        # the agreed time is the stamp less the delay: the same at every rank
        agreed = [r["stamps"][i][0] - r["start_delays"][i] for r in reports]
        assert max(agreed) - min(agreed) < 1e-6
        assert all(0 <= r["start_delays"][i] < 0.1 for r in reports)
    # and it was set ahead by the test's lead: iterations are at least the lead apart
    starts = [r["stamps"][1][0] - r["stamps"][0][0] for r in reports]
    assert min(starts) >= lead
    assert all(r["wrong"] == 0 for r in reports)


def test_an_aligned_start_needs_the_barrier_before_it() -> None:
    with pytest.raises(ValueError, match="aligned"):
        CollectiveTest("bcast", sync=False, aligned=True)
    plain = run_everywhere(CollectiveTest("bcast", "binomial", (10,), iterations=1, warmup=0))
    assert all(entries[0]["start_delays"] == [] for entries in plain)
