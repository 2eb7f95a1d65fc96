"""CI says what it proved: .ci/summary.py counts per tier, fails a run where p4c and BMv2 are
installed yet a data-plane, e2e or reliability test skipped, and says what went untested
where they are not; the e2e subset keeps each collective's in-network algorithms."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from host_agents.collectives import COLLECTIVES

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


summary = load("ci_summary", ROOT / ".ci" / "summary.py")


def report(path: Path, cases: list[tuple[str, str]]) -> Path:
    """A JUnit file of (classname, outcome) cases, as pytest writes it."""
    body = {
        "passed": "",
        "skipped": '<skipped type="pytest.skip" message="needs root">x</skipped>',
        "failed": '<failure message="boom">x</failure>',
    }
    xml = "".join(
        f'<testcase classname="{cls}" name="t{i}" time="1.5">{body[outcome]}</testcase>'
        for i, (cls, outcome) in enumerate(cases)
    )
    path.write_text(f'<testsuites><testsuite name="pytest">{xml}</testsuite></testsuites>')
    return path


def run(tmp_path: Path, switches: str, cases: list[tuple[str, str]], *extra: str) -> int:
    xml = report(tmp_path / "r.xml", cases)
    return int(summary.main(["--switches", switches, *extra, str(xml)]))


def test_counts_and_times_per_tier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        ("tests.unit.test_wire", "passed"),
        ("tests.unit.test_wire", "passed"),
        ("tests.dataplane.test_scenarios", "passed"),
        ("tests.e2e.test_collectives", "passed"),
        ("tests.reliability.test_faults", "passed"),
    ]
    assert run(tmp_path, "yes", cases) == 0
    out = capsys.readouterr().out
    rows = {line.split("  ")[1]: line.split()[-4:] for line in out.splitlines()[2:6]}
    assert rows == {
        "unit": ["2", "0", "0", "3s"],  # passed, failed, skipped, test seconds
        "data plane (single BMv2)": ["1", "0", "0", "2s"],
        "e2e subset (Mininet)": ["1", "0", "0", "2s"],
        "reliability (faults)": ["1", "0", "0", "2s"],
    }
    assert out.splitlines()[-1].startswith("CI: tested the P4 program on BMv2")


@pytest.mark.parametrize("tier", ["dataplane", "e2e", "reliability"])
def test_a_skip_that_hides_the_switches_fails_where_they_are_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tier: str
) -> None:
    cases = [("tests.unit.test_wire", "passed"), (f"tests.{tier}.test_x", "skipped")]
    assert run(tmp_path, "yes", cases) == 1
    out = capsys.readouterr().out
    assert "skipped    1 x: needs root" in out
    assert "CI: FAILED: p4c and BMv2 are installed, yet 1" in out


def test_a_unit_skip_is_not_a_failure(tmp_path: Path) -> None:
    assert run(tmp_path, "yes", [("tests.unit.test_tofino_build", "skipped")]) == 0


def test_without_the_switches_the_last_line_says_what_was_not_tested(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [("tests.unit.test_wire", "passed"), ("tests.dataplane.test_x", "skipped")]
    assert run(tmp_path, "no", cases, "--missing", "p4c-bm2-ss,simple_switch_grpc") == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("CI: NOT TESTED: the P4 program, the BMv2 switches and the Mininet")
    assert "(p4c-bm2-ss, simple_switch_grpc not installed)" in last


def test_a_failed_test_fails_and_claims_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [("tests.unit.test_wire", "passed"), ("tests.e2e.test_collectives", "failed")]
    assert run(tmp_path, "yes", cases) == 1
    out = capsys.readouterr().out
    assert "CI: FAILED: failed or erroneous tests: 1 e2e subset (Mininet)" in out
    assert "CI: tested" not in out


def test_the_e2e_subset_keeps_in_network_algorithms_and_one_host_algorithm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.e2e import test_collectives

    monkeypatch.setattr(test_collectives, "SUBSET", True)
    rng = random.Random(7)
    for collective, coll in COLLECTIVES.items():
        table = coll.algorithms
        chosen = test_collectives.algorithms_under_test(collective, rng)
        innet = [n for n, a in table.items() if a.needs_switch_state]
        assert chosen[: len(innet)] == innet
        assert len(chosen) == len(innet) + 1
        assert chosen[-1] in table and not table[chosen[-1]].needs_switch_state
    monkeypatch.setattr(test_collectives, "SUBSET", False)
    assert test_collectives.algorithms_under_test("bcast", rng) == list(
        COLLECTIVES["bcast"].algorithms
    )
