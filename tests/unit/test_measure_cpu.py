"""What make reproduce measures besides time: CPU per process type (from /proc, sampled
over a launch, read off for a window known only afterwards: the agents' tests) and the least
a collective can put on global links."""

from __future__ import annotations

import os
import time

import pytest

from mininet_topos.experiments.measure import cpu_use, process_cpu_seconds, snapshot_at

pytestmark = pytest.mark.unit


def test_proc_stat_gives_this_processes_cpu_and_nothing_for_a_gone_one() -> None:
    before = process_cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    after = process_cpu_seconds(os.getpid())
    assert before is not None and after is not None and after >= before + 0.03
    assert process_cpu_seconds(2**22 + 1) is None  # above pid_max's default: never a process


SAMPLES = [
    (10.0, {"bmv2": {1: 0.0, 2: 5.0}}),
    (11.0, {"bmv2": {1: 1.0, 2: 5.0}}),
    (13.0, {"bmv2": {1: 1.0, 2: 7.0}, "link emulator": {9: 3.0}}),
]


def test_a_window_between_samples_is_interpolated() -> None:
    assert snapshot_at(SAMPLES, 10.5)["bmv2"] == {1: 0.5, 2: 5.0}
    assert snapshot_at(SAMPLES, 12.0)["bmv2"] == {1: 1.0, 2: 6.0}
    assert snapshot_at(SAMPLES, 9.0) == SAMPLES[0][1]
    assert snapshot_at(SAMPLES, 99.0) == SAMPLES[-1][1]
    assert snapshot_at([], 1.0) == {}


def test_cpu_use_sums_each_type_and_names_its_busiest_process() -> None:
    use = cpu_use(snapshot_at(SAMPLES, 10.5), snapshot_at(SAMPLES, 13.0), [0.2, 0.7], 2.5)
    assert use.total_s["bmv2"] == pytest.approx(2.5)  # 0.5 + 2.0
    assert use.busiest_s["bmv2"] == pytest.approx(2.0)
    assert use.total_s["agents"] == pytest.approx(0.9) and use.busiest_s["agents"] == 0.7
    assert use.processes == {"bmv2": 2, "link emulator": 1, "agents": 2}
    assert use.total_s["link emulator"] == 3.0  # started within the window: all of it counts


def test_the_global_link_minimum_is_each_other_group_taking_the_data_once() -> None:
    from controller.topology_build import dragonfly
    from mininet_topos.experiments.measure import frame_bytes, minimum_global_bytes

    topo = dragonfly(2, 2, 1)  # 3 groups of 4 hosts
    members = tuple(h.node_id for h in topo.hosts)
    frames = sum(frame_bytes(1024))
    assert minimum_global_bytes(topo, "bcast", members, 0, 1024) == 2 * frames
    assert minimum_global_bytes(topo, "all_roots", members, 0, 1024) == 2 * frames * 12
    assert minimum_global_bytes(topo, "scatter", members, 0, 1024) == 8 * frames
    one_group = members[:4]
    assert minimum_global_bytes(topo, "bcast", one_group, 0, 1024) == 0
