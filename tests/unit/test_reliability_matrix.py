"""The fault matrix accumulated over runs: what a resumed run still has to do, the results
file, and the report written from it. No network: parts are made up or come from a stand-in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mininet_topos.experiments import provenance
from mininet_topos.experiments.reliability import runner as reliability
from mininet_topos.experiments.reliability.report import render
from mininet_topos.experiments.reliability.results import IncompatibleResults, Part, Results, Run

pytestmark = pytest.mark.unit

KEYS = reliability.matrix_keys()


def part(run: int = 0, operations: int = 100, seconds: float = 10.0, **extra: Any) -> Part:
    values: dict[str, Any] = {
        "run": run,
        "started": f"2026-11-2{run + 3}T10:0{run}:00Z",
        "seed": 1,
        "operations": operations,
        "retransmissions": 5,
        "nacks": 2,
        "wrong": 0,
        "failures": 0,
        "seconds": seconds,
        "lost_frames": 7,
        "queue_drops": 0,
    }
    return Part(**{**values, **extra})


def fresh() -> Results:
    return Results("df:2,4,2", "all", reliability.settings_record())


def with_runs(results: Results, count: int) -> Results:
    for i in range(count):
        results.runs.append(
            Run(f"2026-11-2{i + 3}T10:00:00Z", f"cmd {i}", "abc1234", 7 + i, "x86_64, 2 cores", 60)
        )
    return results


def test_the_matrix_has_every_setting_including_bursts_and_flaps() -> None:
    labels = {key[0] for key in KEYS}
    assert len(KEYS) == len(reliability.SETTINGS) * len(reliability.CELLS) == 70
    bursty = next(s for s in reliability.SETTINGS if s.impairment.bursty())
    flap = next(s for s in reliability.SETTINGS if s.impairment.flaps())
    assert {bursty.label, flap.label} <= labels
    assert bursty.impairment.mean_loss() == pytest.approx(0.01, rel=0.01)


def test_a_fresh_file_plans_every_cell_in_matrix_order() -> None:
    assert fresh().plan(KEYS, 1000) == [(key, 1000) for key in KEYS]
    assert fresh().plan(KEYS, 1000, chunk=250) == [(key, 250) for key in KEYS]


def test_a_resumed_run_plans_only_what_each_cell_lacks() -> None:
    results = fresh()
    results.cell(KEYS[0]).parts += [part(operations=600), part(run=1, operations=400)]
    results.cell(KEYS[1]).parts.append(part(operations=950))
    results.cell(KEYS[2]).parts.append(part(operations=0, failures=3))  # a failed part
    plan = dict(results.plan(KEYS, 1000, chunk=200))
    assert KEYS[0] not in plan
    assert plan[KEYS[1]] == 50
    assert plan[KEYS[2]] == 200
    assert len(plan) == len(KEYS) - 1


def test_the_results_file_round_trips_and_tolerates_newer_fields(tmp_path: Path) -> None:
    results = with_runs(fresh(), 2)
    results.cell(KEYS[3]).parts += [part(run=0, note="x"), part(run=1, queue_drops=4)]
    path = tmp_path / "r.json"
    results.save(path)
    assert Results.load(path) == results
    data = json.loads(path.read_text())
    data["cells"][0]["parts"] = [{**data["cells"][0]["parts"][0], "from_the_future": 1}]
    data["runs"][0]["also_new"] = True
    path.write_text(json.dumps(data))
    assert Results.load(path).cells[0].parts[0].note == "x"
    path.write_text(json.dumps({**data, "format": 99}))
    with pytest.raises(IncompatibleResults):
        Results.load(path)


def test_resuming_refuses_a_file_of_another_matrix() -> None:
    results = fresh()
    with pytest.raises(IncompatibleResults, match="df:2,2,1"):
        results.check_compatible("df:2,2,1", "all", reliability.settings_record())
    with pytest.raises(IncompatibleResults, match="per-router"):
        results.check_compatible("df:2,4,2", "per-router", reliability.settings_record())
    changed = reliability.settings_record()
    label = next(iter(changed))
    changed[label] = {**changed[label], "scope": "one global link"}
    with pytest.raises(IncompatibleResults, match=label):
        results.check_compatible("df:2,4,2", "all", changed)
    added = {**reliability.settings_record(), "new": {"scope": "every link", "impairment": {}}}
    results.check_compatible("df:2,4,2", "all", added)
    assert "new" in results.settings


def test_a_file_recorded_before_an_impairment_field_existed_still_resumes() -> None:
    """Settings recorded without a field added later (the link's rate) are the same
    settings: docs/reliability.json must keep resuming and reporting."""
    results = fresh()
    for setting in results.settings.values():
        setting["impairment"].pop("rate_mbit", None)
    results.check_compatible("df:2,4,2", "all", reliability.settings_record())
    changed = reliability.settings_record()
    label = next(iter(changed))
    changed[label]["impairment"] = {**changed[label]["impairment"], "loss": 0.5}
    with pytest.raises(IncompatibleResults, match=label):
        results.check_compatible("df:2,4,2", "all", changed)


def test_estimates_come_from_a_cells_earlier_parts() -> None:
    results = fresh()
    assert results.estimate_seconds(KEYS[0], 100) is None
    results.cell(KEYS[0]).parts += [
        part(operations=100, seconds=30),
        part(operations=300, seconds=50),
    ]
    assert results.estimate_seconds(KEYS[0], 100) == pytest.approx(20.0)


def test_the_report_gives_each_cells_operations_parts_and_runs() -> None:
    results = with_runs(fresh(), 2)
    results.runs[1].finished = ""
    results.runs[0].finished = "2026-11-23T11:30:00Z"
    results.cell(KEYS[0]).parts += [
        part(run=0, operations=600, emulator_frames=6000, emulator_cpu_s=0.6),
        part(run=1, operations=400, wrong=1, note="node 3: timeout"),
    ]
    results.cell(KEYS[1]).parts += [part(run=1, operations=50, queue_drops=None)] * 2
    results.cell(KEYS[1]).parts[0] = part(run=0, operations=0, failures=1, queue_drops=3)
    report = render(results, KEYS, 1000)
    label, collective, algorithm, _ = KEYS[0]
    # retransmissions and NACKs per frame lost: 10 / 14 and 4 / 14
    assert (
        f"| {label} | {collective} | {algorithm} | 1000 | 2 (1, 2) | 10 | 4 | 1 | 0 | 20 | 14 | 0 "
        "| 0.7 | 0.3 |" in report
    )
    assert f"| {KEYS[1][0]} | {KEYS[1][1]} | {KEYS[1][2]} | 50 | 2 (1, 2) |" in report
    # one part from before drops were counted; its 3 drops are losses too: 10 / 17, 4 / 17
    assert "| 1 | 20 | 14 | 3+? | 0.6 | 0.2 |" in report
    assert f"| {KEYS[2][0]} | {KEYS[2][1]} | {KEYS[2][2]} | not run |" in report
    assert (
        "2 of 70 cells ran, 1 hold the full 1000 operations: 1050 operations, "
        "1 wrong results, 1 failures" in report
    )
    assert "over 2 runs from 2026-11-23 to 2026-11-24" in report
    assert (
        "| 1 | 2026-11-23 10:00 | 2026-11-23 11:30 | 2 | 600 | `cmd 0` | abc1234 | ? | 7 |"
        in report
    )
    assert "| 2 | 2026-11-24 10:00 | (did not finish) | 2 | 450 | `cmd 1` |" in report
    assert f"* {label}, {collective} {algorithm}, run 2: node 3: timeout" in report
    assert "forwarded 600 / 600 / 600 frames/s and used 6% / 6% / 6% of a core" in report
    assert "bursty loss 1.0% on average (bursts of 5 frames" in report
    assert "down 1 s from 1 s, every 5 s, on one global link" in report


def test_the_report_says_how_many_protocol_versions_the_parts_measured() -> None:
    results = with_runs(fresh(), 3)
    for run, digest in zip(results.runs, ("aaaa", "aaaa", "bbbb"), strict=True):
        run.protocol = digest
    results.cell(KEYS[0]).parts += [part(run=0), part(run=1)]
    report = render(results, KEYS, 1000)
    assert "Every part measured one protocol version (aaaa:" in report
    assert "| `cmd 2` | abc1234 | bbbb | 9 |" in report  # a run without parts is still listed
    results.cell(KEYS[1]).parts.append(part(run=2))
    assert "The parts measured 2 protocol versions (aaaa, bbbb:" in render(results, KEYS, 1000)


def test_a_run_of_other_protocol_code_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    results = with_runs(fresh(), 2)
    results.runs[0].protocol = results.runs[1].protocol = "aaaa"
    reliability.warn_protocol_change(results)
    assert capsys.readouterr().out == ""
    results.runs[1].protocol = "bbbb"
    reliability.warn_protocol_change(results)
    assert "differs from every earlier run's (aaaa; this run bbbb" in capsys.readouterr().out


def test_the_protocol_digest_follows_the_protocol_code_not_the_commit() -> None:
    if provenance.protocol("HEAD") == "unknown":
        pytest.skip("no git history here (not a checkout, or a shallow one)")
    # before, the docs-only commit named here predated mininet_topos/links, so its digest was
    # "unknown" and the test skipped wherever it ran
    docs_only = "aa37345"  # a commit that changed only docs/porting-to-tofino.md
    assert provenance.protocol(docs_only) != "unknown"
    assert provenance.protocol(f"{docs_only}~1") == provenance.protocol(docs_only)
    assert provenance.protocol("aad67b1") != provenance.protocol("aad67b1~1")  # host_agents
    # the Tofino shim is not the program BMv2 runs: a change to it alone is the same protocol
    tna_only = "41e1885"  # changed only p4src/tna/state.p4
    assert provenance.protocol(tna_only) == provenance.protocol(f"{tna_only}~1")
    # nor is the Tofino build and BfRt driver, though it lives under controller/
    tofino_driver_only = "b5c3941"  # changed only controller/tofino/
    assert provenance.protocol(tofino_driver_only) == provenance.protocol(f"{tofino_driver_only}~1")
    assert provenance.protocol("no-such-commit") == "unknown"


class FakeNet:
    def create_comm(self, members: tuple[int, ...]) -> tuple[int, float]:
        return 1, 0.0


def test_a_resumed_run_adds_parts_cell_by_cell_saving_after_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    results = fresh()
    results.cell(KEYS[0]).parts.append(part(operations=1000))
    results.cell(KEYS[1]).parts.append(part(operations=700, seconds=7000))  # 10 s per op
    calls: list[tuple[Any, int, int]] = []
    saved: list[int] = []

    def fake_part(
        net: Any, comm: int, members: Any, key: Any, ops: int, seed: int, run: int, timeout: float
    ) -> Part:
        calls.append((key, ops, seed))
        return part(run=run, operations=ops, seconds=1.0)

    monkeypatch.setattr(reliability, "run_part", fake_part)
    monkeypatch.setattr(reliability, "members_of", lambda net, which: (1, 2))
    budget = reliability.Budget(seconds=1000.0, started=reliability.time.monotonic())
    reliability.run_matrix(
        FakeNet(),  # type: ignore[arg-type]
        results,
        lambda: saved.append(sum(c.operations for c in results.cells)),
        target=1000,
        chunk=500,
        budget=budget,
        seed=100,
        run=1,
        which="all",
        keys=KEYS,
    )
    # the full cell is skipped, the slow one would overrun the budget (300 ops x 10 s),
    # every other cell gets two parts of 500 with seeds that differ per part
    ran = [key for key, _, _ in calls]
    assert KEYS[0] not in ran and KEYS[1] not in ran
    assert ran == [k for k in KEYS[2:]] * 2
    assert {seed for key, _, seed in calls if key == KEYS[2]} == {100, 101}
    assert all(results.cell(k).operations == 1000 for k in KEYS[2:])
    assert len(saved) == len(calls) and saved == sorted(saved)


def test_a_part_the_budget_cut_short_is_not_recorded_as_failures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A part still running when the budget ran out is killed by the launcher: its ranks'
    "no result" are not the cell's failures (a 5% dissemination part recorded 144)."""
    results = fresh()
    budget = reliability.Budget(seconds=5.0, started=reliability.time.monotonic())

    def fake_part(
        net: Any, comm: int, members: Any, key: Any, ops: int, seed: int, run: int, timeout: float
    ) -> Part:
        budget.started -= 10.0  # the part ran past the budget
        return part(run=run, operations=0, failures=144, note="node 1: no result within 5 s")

    monkeypatch.setattr(reliability, "run_part", fake_part)
    monkeypatch.setattr(reliability, "members_of", lambda net, which: (1, 2))
    saved: list[int] = []
    reliability.run_matrix(
        FakeNet(),  # type: ignore[arg-type]
        results,
        lambda: saved.append(1),
        target=50,
        chunk=50,
        budget=budget,
        seed=1,
        run=1,
        which="all",
        keys=KEYS[:2],
    )
    assert all(not results.cell(k).parts for k in KEYS[:2]) and not saved


def test_report_only_writes_the_report_from_the_results_file(tmp_path: Path) -> None:
    results = with_runs(fresh(), 1)
    results.cell(KEYS[4]).parts.append(part(operations=1000))
    path, report = tmp_path / "r.json", tmp_path / "r.md"
    results.save(path)
    argv = ["--results", str(path), "--report", str(report), "--report-only"]
    assert reliability.main(argv) == 0
    assert "| 1000 | 1 (1) |" in report.read_text()
    assert reliability.main([*argv, "--topo", "df:2,2,1"]) == 1  # another matrix
    assert reliability.main(["--results", str(tmp_path / "none.json"), "--report-only"]) == 1


def test_a_run_can_add_to_the_cells_of_some_collectives_only() -> None:
    keys = reliability.chosen_keys("allreduce")
    assert {key[1] for key in keys} == {"allreduce"}
    assert len(keys) == 2 * len(reliability.SETTINGS)
    assert reliability.chosen_keys("") == KEYS
    with pytest.raises(ValueError, match="allgatherr not in the matrix"):
        reliability.chosen_keys("bcast,allgatherr")


def test_a_run_can_add_to_the_cells_of_some_fault_settings_and_algorithms_only() -> None:
    keys = reliability.chosen_keys("allreduce,bcast", "loss1,bursty1", "innet")
    assert keys == [
        ("1% loss, every link", "bcast", "innet", 16384),
        ("1% loss, every link", "allreduce", "innet", 1024),
        ("bursty 1% loss, every link", "bcast", "innet", 16384),
        ("bursty 1% loss, every link", "allreduce", "innet", 1024),
    ]
    assert len(reliability.chosen_keys("", "flap")) == len(reliability.CELLS)
    assert {s.name for s in reliability.SETTINGS} >= {"loss1", "loss5", "flap"}
    with pytest.raises(ValueError, match="--faults: loss3 not in the matrix"):
        reliability.chosen_keys("", "loss1,loss3")
    with pytest.raises(ValueError, match="--algorithms: ring not in the matrix"):
        reliability.chosen_keys("", "", "ring")


def test_an_unknown_fault_setting_stops_the_run_before_any_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--results", str(tmp_path / "r.json"), "--report", str(tmp_path / "r.md")]
    assert reliability.main([*argv, "--faults", "loss3"]) == 2
    assert "--faults: loss3 not in the matrix" in capsys.readouterr().err


def test_a_part_counts_what_the_agents_counted_until_their_tests_ended() -> None:
    """The finalizing barrier's ARRIVE resends (ranks done first wait for the last) are not
    the collective's: a part counts each agent's test_stats, or its stats where an agent did
    not report them."""
    from host_agents.launcher import LaunchResult

    reports = {
        1: {
            "stats": {"retransmissions": 2, "arrive_retransmissions": 9, "nacks_sent": 5},
            "test_stats": {"retransmissions": 2, "arrive_retransmissions": 0, "nacks_sent": 4},
        },
        2: {"stats": {"reduce_retransmissions": 3, "nacks_sent": 1}},
    }

    class Emulated:
        name, kind = "g0", "global"

    class Net:
        emulated = [Emulated()]

        def set_faults(self, *args: Any) -> None:
            pass

        def fault_stats(self) -> dict[str, Any]:
            return {"totals": {"lost": 0, "forwarded": 0}}

        def launcher(self) -> Any:
            return self

        def launch(self, workload: Any, timeout: float) -> LaunchResult:
            return LaunchResult(reports=reports)

    assert LaunchResult(reports=reports).stats_total("arrive_retransmissions") == 9
    got = reliability.run_part(Net(), 1, (1, 2), KEYS[0], 10, 1, 0, 60.0)  # type: ignore[arg-type]
    assert (got.retransmissions, got.nacks) == (5, 5)
