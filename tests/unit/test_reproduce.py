"""``make reproduce`` without a network: the cells each profile plans and how long the cost
model says they take, resuming a results file, summarising agents' reports, the barrier model
fit, and the report written from a saved results file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mininet_topos.experiments.reproduce import cells as reproduce_cells
from mininet_topos.experiments.reproduce import df_scatter, nic_barrier, ragasa, tofu2
from mininet_topos.experiments.reproduce import plan as reproduce_plan
from mininet_topos.experiments.reproduce import report as reproduce_report
from mininet_topos.experiments.reproduce import runner as reproduce
from mininet_topos.experiments.reproduce import words as reproduce_words
from mininet_topos.experiments.reproduce.results import (
    CellResult,
    IncompatibleResults,
    Measurement,
    Results,
    Run,
    summarise,
)

pytestmark = pytest.mark.unit

DF242_HOSTS = 72
EXPERIMENTS = {"ragasa", "ib-mcast", "tofu2", "nic-barrier", "df-scatter", "offloads"}


# -- planning -----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", reproduce_cells.PROFILES)
@pytest.mark.parametrize("hosts", [12, DF242_HOSTS])
def test_every_experiment_has_cells_with_unique_keys(profile: str, hosts: int) -> None:
    cells = reproduce_plan.plan(profile, hosts)
    keys = [c.key for c in cells]
    assert len(keys) == len(set(keys))
    assert {c.experiment for c in cells} == EXPERIMENTS
    for cell in cells:
        if cell.metered:  # link bytes per operation belong to one test at one size
            assert len(cell.tests) == 1 and len(cell.tests[0].sizes) == 1


def test_the_quick_profile_holds_each_papers_key_conditions() -> None:
    cells = reproduce_plan.plan("quick", DF242_HOSTS)
    all_roots = {
        (c.tests[0].algorithm, c.tests[0].sizes[0]) for c in cells if c.experiment == "ragasa"
    }
    for algorithm in ("innet", "ragasa", "binomial"):
        assert (algorithm, 16384) in all_roots
    # van de Geijn from every root: 1 B here, 16 KiB (ranks^3 messages, minutes) left out
    assert ("scatter_allgather", 1) in all_roots
    assert all(c.tests[0].mode == "all_roots" for c in cells if c.experiment == "ragasa")
    barrier = [c for c in cells if c.experiment == "nic-barrier"]
    assert [c.members for c in barrier] == [2, 8, 32, 72]
    assert {t.algorithm for t in barrier[0].tests} == set(nic_barrier.BARRIER)
    (persistent,) = [c for c in cells if c.experiment == "tofu2"]
    assert persistent.fresh_trees and persistent.tests[0].persistent  # init installs trees
    assert not persistent.tests[1].persistent and 16384 in persistent.tests[0].sizes
    single = [c for c in cells if c.experiment == "ib-mcast"]
    assert {c.tests[0].algorithm for c in single} == {"innet", "binomial"}
    assert all(16384 in c.tests[0].sizes for c in single)
    scatter = {c.tests[0].algorithm for c in cells if c.key.startswith("df-scatter:scatter")}
    assert scatter == set(df_scatter.SCATTER)


@pytest.mark.parametrize(("profile", "limit_min"), [("quick", 20), ("full", 120)])
def test_the_profiles_fit_their_time_on_df242_by_the_cost_model(
    profile: str, limit_min: float
) -> None:
    cells = reproduce_plan.plan(profile, DF242_HOSTS)
    bring_up_and_report_s = 30
    total = sum(reproduce_cells.estimate_seconds(c, DF242_HOSTS) for c in cells)
    assert total + bring_up_and_report_s < limit_min * 60
    assert reproduce_cells.BUDGET_S[profile] <= limit_min * 60


def test_the_full_profile_leaves_out_whole_sizes_too_long_for_a_large_network() -> None:
    kept = [c for c in reproduce_plan.plan("full", DF242_HOSTS) if c.experiment == "ragasa"]
    by_size: dict[int, set[str]] = {}
    for cell in kept:
        by_size.setdefault(cell.tests[0].sizes[0], set()).add(cell.tests[0].algorithm)
    # every size kept runs every algorithm side by side, but van de Geijn's ranks^3 messages
    # leave it out alone where it would take too long
    others = set(ragasa.BCAST_ALL_ROOTS) - {ragasa.SLOWEST_ALL_ROOTS}
    assert all(algorithms >= others for algorithms in by_size.values())
    assert 16384 in by_size and 1048576 not in by_size
    assert ragasa.SLOWEST_ALL_ROOTS not in by_size[16384]
    assert ragasa.SLOWEST_ALL_ROOTS in by_size[1]
    left = reproduce_plan.left_out("full", DF242_HOSTS)
    assert "ragasa:innet/1048576" in left and "ragasa:scatter_allgather/16384" in left
    assert reproduce_plan.left_out("quick", DF242_HOSTS) == ["ragasa:scatter_allgather/16384"]
    # a small network runs every size up to 1 MiB
    small = {
        c.tests[0].sizes[0] for c in reproduce_plan.plan("full", 12) if c.experiment == "ragasa"
    }
    assert max(small) == 1048576 and reproduce_plan.left_out("full", 12) == []


def test_barrier_sizes_run_from_two_to_every_host() -> None:
    assert nic_barrier.member_counts(72, full=False) == (2, 8, 32, 72)
    full = nic_barrier.member_counts(72, full=True)
    assert full[0] == 2 and full[-1] == 72 and {3, 6, 12, 48} <= set(full)
    assert nic_barrier.member_counts(2, full=True) == (2,)


def test_the_cost_model_grows_with_ranks_and_size() -> None:
    (cell,) = [c for c in reproduce_plan.plan("quick", 12) if c.key == "ragasa:innet/16384"]
    assert reproduce_cells.estimate_seconds(cell, 72) > 20 * reproduce_cells.estimate_seconds(
        cell, 12
    )


# -- results file and resume -----------------------------------------------------------------


def measurement(**values: Any) -> Measurement:
    base: dict[str, Any] = {
        "collective": "bcast",
        "algorithm": "innet",
        "chosen": "innet",
        "size": 16384,
        "persistent": False,
        "mode": "all_roots",
        "ranks": 72,
        "completion_s": [1.0, 1.2, 0.8],
        "rank_means_s": [0.9, 1.0],
        "wrong": 0,
    }
    return Measurement(**{**base, **values})


def cell(key: str, *measured: Measurement, **values: Any) -> CellResult:
    base: dict[str, Any] = {
        "key": key,
        "experiment": key.split(":")[0],
        "run": 0,
        "started": "2026-11-23T16:00:00Z",
        "seconds": 10.0,
        "members": 72,
        "measurements": list(measured),
        "cpu": {
            "wall_s": 10.0,
            "total_s": {"bmv2": 6.0, "agents": 8.0},
            "busiest_s": {"bmv2": 1.0, "agents": 0.5},
            "processes": {"bmv2": 36, "agents": 72},
        },
        "fidelity": NETWORK_BOUND_VERDICT,
    }
    return CellResult(**{**base, **values})


NETWORK_BOUND_VERDICT: dict[str, Any] = {
    "verdict": "network-bound",
    "reasons": [],
    "cpu_share": 0.3,
    "busiest_process": "bmv2",
    "busiest_process_cores": 0.2,
    "cores": 2,
    "links": {"busiest_port": "ncs0-eth1", "busiest_utilisation": 0.8},
}
CPU_BOUND_VERDICT: dict[str, Any] = {
    **NETWORK_BOUND_VERDICT,
    "verdict": "CPU-bound: timing not faithful",
    "reasons": ["processes used 95% of 2 cores (limit 70%)"],
    "cpu_share": 0.95,
}


def test_resume_measures_only_missing_and_failed_cells() -> None:
    keys = [c.key for c in reproduce_plan.plan("quick", DF242_HOSTS)]
    results = Results("df:2,4,2", "quick", 1)
    assert results.pending(keys) == keys
    results.cells[keys[0]] = cell(keys[0], measurement())
    results.cells[keys[1]] = cell(keys[1], measurement(), errors=["node 3: no result"])
    results.cells[keys[2]] = cell(keys[2], measurement(wrong=1))
    assert results.pending(keys) == keys[1:]


def test_again_measures_the_named_cells_anew_and_needs_resume_and_only() -> None:
    """Before --again, measuring one experiment on other links meant a new results file (every
    other paper's cells set aside) or deleting cells from the JSON by hand."""
    planned = reproduce_plan.plan("quick", DF242_HOSTS)
    results = Results("df:2,4,2", "quick", 1)
    for spec in planned:
        results.cells[spec.key] = cell(spec.key, measurement())
    offloads = [c for c in planned if c.experiment == "offloads"]
    assert offloads
    assert reproduce.to_measure(results, offloads, again=False) == []
    assert reproduce.to_measure(results, offloads, again=True) == offloads
    args = reproduce.parse_args(["--resume", "--only", "offloads", "--again"])
    assert args.again and args.only == ["offloads"]
    for incomplete in (["--again", "--only", "offloads"], ["--again", "--resume"]):
        with pytest.raises(SystemExit):
            reproduce.parse_args(incomplete)


def test_resume_refuses_another_topology_or_profile() -> None:
    results = Results("df:2,4,2", "quick", 1)
    results.check_compatible("df:2,4,2", "quick")
    with pytest.raises(IncompatibleResults, match="df:2,2,1"):
        results.check_compatible("df:2,2,1", "quick")
    with pytest.raises(IncompatibleResults, match="full"):
        results.check_compatible("df:2,4,2", "full")


def test_the_results_file_round_trips_and_tolerates_new_fields(tmp_path: Path) -> None:
    results = Results("df:2,4,2", "quick", 5)
    results.runs.append(Run("2026-11-23T16:00:00Z", "cmd", "abc", {"cores": 2}))
    results.cells["ragasa:innet/16384"] = cell("ragasa:innet/16384", measurement(), link_bytes=9)
    path = tmp_path / "results.json"
    results.save(path)
    data = json.loads(path.read_text())
    data["cells"]["ragasa:innet/16384"]["measurements"][0]["from_a_later_version"] = 1
    data["cells"]["ragasa:innet/16384"]["also_new"] = 2
    path.write_text(json.dumps(data))
    assert Results.load(path) == results


def test_a_resumed_run_continues_the_file_and_a_new_one_keeps_the_old(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    Results("df:2,2,1", "quick", 1).save(path)
    resumed = reproduce.open_results(
        reproduce.parse_args(["--topo", "df:2,2,1", "--resume", "--results", str(path)])
    )
    assert resumed.topo == "df:2,2,1"
    with pytest.raises(IncompatibleResults):
        reproduce.open_results(reproduce.parse_args(["--resume", "--results", str(path)]))
    fresh = reproduce.open_results(reproduce.parse_args(["--results", str(path)]))
    assert fresh.topo == "df:2,4,2" and not fresh.cells
    assert path.with_suffix(".previous.json").exists()
    missing = tmp_path / "none.json"
    assert reproduce.main(["--report-only", "--results", str(missing)]) == 1


def test_only_adds_up_and_a_name_nobody_plans_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = reproduce.parse_args(["--only", "tofu2", "--only", "ib-mcast,nic-barrier:n2"])
    assert args.only == ["tofu2", "ib-mcast", "nic-barrier:n2"]
    cells = reproduce_plan.plan("quick", DF242_HOSTS)
    assert reproduce.unknown_names(args.only, cells) == []
    assert reproduce.unknown_names(["ib-mcat", "tofu2"], cells) == ["ib-mcat"]
    results = tmp_path / "r.json"
    assert reproduce.main(["--only", "ib-mcat", "--results", str(results)]) == 2
    assert "--only ib-mcat: no such experiment" in capsys.readouterr().err
    assert not results.exists()


def test_a_cell_the_profile_leaves_out_runs_when_named() -> None:
    (key,) = reproduce_plan.left_out("quick", DF242_HOSTS)
    (cell,) = reproduce_plan.left_out_cells("quick", DF242_HOSTS)
    assert cell.key == key
    assert key not in {c.key for c in reproduce_plan.plan("quick", DF242_HOSTS)}


# -- what agents report, summarised ------------------------------------------------------------


def report(rank: int, start: float, times: list[float], **entry: Any) -> dict[str, Any]:
    base = {
        "collective": "bcast",
        "algorithm": "innet",
        "chosen": "innet",
        "size": 1024,
        "root": 0,
        "persistent": False,
        "mode": "single",
        "times": times,
        "stamps": [[start + i, start + i + t] for i, t in enumerate(times)],
        "start_cpu": [1e-5 * (rank + 1)] * len(times),
        "wrong": 0,
        "cpu_seconds": 0.5,
    }
    return {"rank": rank, "tests": [{**base, **entry}]}


def test_completion_runs_from_the_first_start_to_the_last_end() -> None:
    reports = {
        10: report(0, 100.0, [0.1, 0.2]),
        11: report(1, 100.05, [0.3, 0.1]),
    }
    (m,) = summarise(reports, (10, 11))
    assert m.completion_s == pytest.approx([0.35, 0.2])
    assert m.rank_means_s == pytest.approx([0.15, 0.2])
    assert m.root_start_cpu_s == [1e-5, 1e-5]  # the root's own calls
    assert m.agent_cpu_s == [0.5, 0.5]


def test_the_timeline_says_when_the_last_rank_started_and_who_finished_last() -> None:
    reports = {
        10: report(0, 100.0, [0.1, 0.2], start_delays=[0.001, 0.002]),  # the root
        11: report(1, 100.03, [0.02, 0.4], start_delays=[0.031, 0.0]),
        12: report(2, 100.01, [0.05, 0.1], start_delays=[0.011, 0.004]),
    }
    (m,) = summarise(reports, (10, 11, 12))
    assert m.last_start_s == pytest.approx([0.03, 0.03])
    assert m.last_receiver_end_s == pytest.approx([0.06, 0.43])
    assert m.root_end_s == pytest.approx([0.1, 0.2])
    assert sorted(m.start_delay_s) == pytest.approx([0.0, 0.001, 0.002, 0.004, 0.011, 0.031])
    rows = reproduce_words.timeline_rows([("innet", m)])
    assert rows[2].startswith("| 1 KiB | innet | 30.0 ms | 3.0 ms (31.0 ms) |")


def test_every_rank_rooting_has_no_root_timeline() -> None:
    reports = {n: report(n - 10, 0.0, [0.1], root=-1, mode="all_roots") for n in (10, 11)}
    (m,) = summarise(reports, (10, 11))
    assert m.root_end_s == [] and reproduce_words.timeline_rows([("innet", m)]) == []


def test_a_barriers_time_is_each_ranks_own_averaged() -> None:
    reports = {
        10: report(0, 0.0, [0.1, 0.3], collective="barrier", size=0),
        11: report(1, 5.0, [0.3, 0.1], collective="barrier", size=0),
    }
    (m,) = summarise(reports, (10, 11))
    assert m.completion_s == pytest.approx([0.2, 0.2])


def test_an_overlap_sweep_starts_with_no_computation() -> None:
    sweep = [{"fraction": 1.0, "compute_s": 0.1, "times": [0.25, 0.3]}]
    reports = {
        10: report(0, 0.0, [0.1, 0.1], mode="overlap", overlap=sweep),
        11: report(1, 0.0, [0.2, 0.1], mode="overlap", overlap=sweep),
    }
    (m,) = summarise(reports, (10, 11))
    assert [p["fraction"] for p in m.overlap] == [0.0, 1.0]
    assert m.overlap[0]["completion_s"] == pytest.approx([0.2, 0.1])
    assert m.overlap[1]["completion_s"] == pytest.approx([0.25, 0.3])
    assert tofu2.overlap_fit(m.overlap) == 0.0  # 0.275 s is far above 0.15 s


# -- the barrier model --------------------------------------------------------------------------


def test_the_fit_recovers_the_papers_model() -> None:
    fixed, trig = 7.44e-6, 3.5e-6  # Myrinet: 3.6 + 3.84 us fixed, 3.5 us per step
    points = [(n, fixed + nic_barrier.steps(n) * trig) for n in (2, 4, 8, 16, 72)]
    model = nic_barrier.fit(points)
    assert model is not None
    assert model.fixed_s == pytest.approx(fixed) and model.trig_s == pytest.approx(trig)
    assert model.rms_s == pytest.approx(0.0, abs=1e-12)
    assert model.predict(1024) == pytest.approx(fixed + 9 * trig)
    assert nic_barrier.fit([(4, 1.0), (3, 1.1)]) is None  # one step count: no slope


# -- the report from a saved results file ----------------------------------------------------


def every_experiment() -> Results:
    results = Results("df:2,2,1", "quick", 1)
    results.runs.append(
        Run(
            "2026-11-23T16:00:00Z",
            "python -m mininet_topos.experiments.reproduce --topo df:2,2,1",
            "abc",
            {"cores": 2, "bmv2": {"flavour": "speed", "binary": "bmv2"}, "p4c": "1.2.4.8"},
        )
    )
    add = results.cells.__setitem__
    for algorithm, t in (
        ("binomial", 2.0),
        ("ragasa", 0.5),
        ("innet", 1.0),
        ("scatter_allgather", 1.5),
    ):
        for size in (1, 16384):
            key = f"ragasa:{algorithm}/{size}"
            m = measurement(algorithm=algorithm, size=size, completion_s=[t, t * 1.1, t * 0.9])
            measured = {"link_bytes": 300, "global_link_bytes": 50, "minimum_bytes": 100}
            add(key, cell(key, m, **measured, minimum_global_bytes=25))
    for algorithm, t in (("innet", 0.01), ("binomial", 0.03)):
        ms = [
            measurement(
                algorithm=algorithm, size=s, mode="single", completion_s=[t * (1 + s / 1e4)]
            )
            for s in (1, 16384, 262144)
        ]
        add(f"ib-mcast:{algorithm}", cell(f"ib-mcast:{algorithm}", *ms))
    sweep = [
        {"fraction": 0.0, "compute_s": 0.0, "completion_s": [0.1]},
        {"fraction": 0.5, "compute_s": 0.05, "completion_s": [0.105]},
        {"fraction": 1.0, "compute_s": 0.1, "completion_s": [0.2]},
    ]
    ms = [
        measurement(
            size=16384,
            mode="overlap",
            persistent=True,
            completion_s=[0.1],
            init_s=[0.4],
            root_start_cpu_s=[4e-5],
            overlap=sweep,
        ),
        measurement(size=16384, mode="overlap", completion_s=[0.15], overlap=sweep),
    ]
    add("tofu2:innet", cell("tofu2:innet", *ms))
    for n in (2, 8, 12):
        ms = [
            measurement(
                collective="barrier",
                algorithm=a,
                size=0,
                mode="single",
                completion_s=[base + step * nic_barrier.steps(n)],
            )
            for a, base, step in (
                ("innet", 1e-3, 1e-3),
                ("gather_bcast", 2e-3, 4e-3),
                ("dissemination", 2e-3, 6e-3),
            )
        ]
        add(f"nic-barrier:n{n}", cell(f"nic-barrier:n{n}", *ms, members=n))
    for collective, algorithm, t in (
        ("scatter", "lin", 0.01),
        ("scatter", "tree", 0.02),
        ("allgather", "tar", 0.1),
    ):
        key = f"df-scatter:{collective}/{algorithm}/1024"
        m = measurement(
            collective=collective, algorithm=algorithm, size=1024, mode="single", completion_s=[t]
        )
        add(key, cell(key, m, link_bytes=200, global_link_bytes=20, minimum_bytes=100))
    reduces = [
        measurement(collective="allreduce", algorithm=a, size=4, mode="single", completion_s=[t])
        for a, t in (("innet", 0.1), ("binomial", 0.4))
    ]
    add("offloads:allreduce", cell("offloads:allreduce", *reduces))
    return results


def test_the_report_has_every_paper_its_ratio_and_its_plot(tmp_path: Path) -> None:
    written = reproduce_report.write_report(
        every_experiment(), tmp_path / "results.md", tmp_path / "img", tmp_path / "r.json"
    )
    text = written[0].read_text()
    for key in ("[Ragasa]", "[IB-mcast]", "[Tofu2]", "[NIC-barrier]", "[DF-scatter]"):
        assert f"## {key}" in text
    assert "not the papers' Df(2,4,2)" in text  # a try-out topology says so
    assert "ragasa 4.00x, innet 2.00x" in text  # speedups over binomial at 16 KiB
    assert "1.34x (ragasa)" in text  # 4.00 / 2.99
    assert "LIN is 2.00x the fastest of TREE" in text
    assert "1/10000" in text  # start 40 us of CPU against an init of 0.4 s
    assert "T_trig" in text and "| innet | 1.0 ms | 1.0 ms |" in text  # the fit, recovered
    assert "| 3.00x | 50 (2.00x) |" in text  # link and global-link bytes vs their minimum
    assert "speed build" in text and "1.2.4.8" in text
    assert "Where we differ" in text and "set the pace" in text
    assert len(written) == 7 and all(p.exists() and p.suffix == ".png" for p in written[1:])
    assert all(f"img/results-{e}.png" in text for e in sorted(EXPERIMENTS))


def test_a_cpu_bound_cell_withholds_its_papers_ratio(tmp_path: Path) -> None:
    results = every_experiment()
    key = next(k for k in results.cells if k.startswith("ragasa:"))
    results.cells[key].fidelity = CPU_BOUND_VERDICT
    text = reproduce_report.write_report(
        results, tmp_path / "results.md", tmp_path / "img", tmp_path / "r.json"
    )[0].read_text()
    ragasa = next(line for line in text.splitlines() if line.startswith("| [Ragasa]"))
    assert "CPU-bound: not a result" in ragasa and ragasa.endswith("| - |")
    assert "1.34x (ragasa)" not in ragasa
    assert f"| `{key}` | CPU-bound: timing not faithful: processes used 95%" in text
    # the other papers keep theirs
    assert "LIN is 2.00x the fastest of TREE" in text


def test_the_report_writes_without_measurements(tmp_path: Path) -> None:
    written = reproduce_report.write_report(
        Results("df:2,4,2", "quick", 1), tmp_path / "r.md", tmp_path / "img", tmp_path / "r.json"
    )
    text = written[0].read_text()
    assert text.count("Not measured yet.") == 6 and "not the papers'" not in text


def test_the_pace_names_what_was_busy() -> None:
    saturated = cell(
        "x:1",
        cpu={
            "wall_s": 10,
            "total_s": {"bmv2": 15, "agents": 4},
            "busiest_s": {"bmv2": 1, "agents": 0.2},
        },
    )
    assert "saturated" in reproduce_words.pace([saturated], 2)
    one_hot = cell(
        "x:2", cpu={"wall_s": 10, "total_s": {"agents": 9.5}, "busiest_s": {"agents": 9.5}}
    )
    assert "One agents process" in reproduce_words.pace([one_hot], 2)
    idle = cell("x:3", cpu={"wall_s": 10, "total_s": {"bmv2": 1}, "busiest_s": {"bmv2": 0.1}})
    assert "waiting" in reproduce_words.pace([idle], 2)
    busy_machine = cell("x:4", cpu={**idle.cpu, "load_average": 14.0})
    assert "load average up to 14 on 2" in reproduce_words.pace([busy_machine], 2)
    assert "waiting for a core" in reproduce_words.pace([busy_machine], 2)


def test_progress_shows_done_total_and_time_left() -> None:
    line = reproduce.progress(5, 10, 300.0, "ragasa innet")
    assert line.startswith("[##########----------] 5/10 cells, 5.0 min, about 5.0 min left")


def test_the_report_names_the_cells_that_failed_and_why(tmp_path: Path) -> None:
    results = every_experiment()
    errors = ["node 1 (rank 0): ring step 9: nothing arrived for 120.2 s", "node 2: the same"]
    results.cells["ragasa:binomial/16384"] = cell("ragasa:binomial/16384", errors=errors)
    text = reproduce_report.write_report(
        results, tmp_path / "r.md", tmp_path / "img", tmp_path / "r.json"
    )[0].read_text()
    assert "**1 cells failed**" in text
    assert "* `ragasa:binomial/16384` (run 1): node 1 (rank 0): ring step 9: nothing" in text
    assert "(and 1 more errors)" in text
    clean = reproduce_report.write_report(
        every_experiment(), tmp_path / "c.md", tmp_path / "img", tmp_path / "c.json"
    )[0].read_text()
    assert "failed" not in clean


def test_the_ack_merging_is_chosen_on_the_command_line() -> None:
    from mininet_topos.experiments.reproduce.runner import build_parser

    assert build_parser().parse_args([]).ack_merge == "coroots"
    assert build_parser().parse_args(["--ack-merge", "switch"]).ack_merge == "switch"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--ack-merge", "routers"])
