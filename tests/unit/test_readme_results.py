"""The README's results table is what ``python -m mininet_topos.experiments.reproduce.summary``
renders from docs/results.json, so a new results file cannot leave old figures on the front
page, and every row names the command that measures it again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mininet_topos.experiments.reproduce import summary
from mininet_topos.experiments.reproduce.plan import PAPERS
from mininet_topos.experiments.reproduce.results import Results

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_table_is_the_generated_one() -> None:
    readme = (ROOT / "README.md").read_text()
    expected = summary.block(Results.load(ROOT / "docs" / "results.json"))
    assert summary.current_block(readme) == expected, (
        "README.md's results table is stale: "
        "python -m mininet_topos.experiments.reproduce.summary --write README.md"
    )


def test_every_row_names_its_command() -> None:
    table = summary.render(Results.load(ROOT / "docs" / "results.json"))
    # below the header and its rule, one row per paper (and the project's own targets)
    rows = [line for line in table.splitlines()[2:] if line.startswith("| ")]
    assert len(rows) == len(PAPERS)
    results = Results.load(ROOT / "docs" / "results.json")
    for row, paper in zip(rows, PAPERS, strict=True):
        assert f"--only {paper.EXPERIMENT}" in row, row
        runs = {c.run for c in results.cells.values() if c.experiment == paper.EXPERIMENT}
        if len(runs) != 1:
            continue
        env = results.runs[runs.pop()].environment
        if env.get("dilation"):  # measured on dilated links: the command says by how much
            assert f"--dilation {env['dilation']:g}'" in row, row


def test_the_table_follows_the_file(tmp_path: Path) -> None:
    """Nothing is hard-coded: an empty results file renders no figures."""
    empty = Results("df:2,2,1", "quick", 1)
    text = summary.render(empty)
    assert "not run yet" in text
    assert "2.24x" not in text
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{summary.BEGIN}\nold\n{summary.END}\nafter\n")
    empty.save(tmp_path / "results.json")
    assert summary.main(["--results", str(tmp_path / "results.json"), "--write", str(readme)]) == 0
    written = readme.read_text()
    assert written == f"before\n{summary.block(empty)}\nafter\n"


def test_the_table_names_every_run_its_cells_came_from() -> None:
    """Cells from two runs name both commits, newest first: before, the table named only the
    last run in the file, so cells kept from an older protocol read as measured at the newer
    commit (or the other way)."""
    results = Results.load(ROOT / "docs" / "results.json")
    old = dataclasses.replace(results.runs[0], commit="0ld0001", started="2026-01-01T00:00:00Z")
    new = dataclasses.replace(results.runs[0], commit="5ew0002", started="2026-12-01T00:00:00Z")
    results.runs = [new, old]  # the older run last, as when a file keeps an older run's cells
    keys = sorted(results.cells)
    for n, key in enumerate(keys):
        results.cells[key] = dataclasses.replace(results.cells[key], run=0 if n % 3 else 1)
    line = summary.render(results).splitlines()[-1]
    held_new = sum(1 for n in range(len(keys)) if n % 3)
    assert f"{held_new} at `5ew0002`" in line
    assert f"{len(keys) - held_new} at `0ld0001`" in line
    assert line.index("`5ew0002`") < line.index("`0ld0001`")


def test_each_row_names_the_links_its_own_cells_were_measured_on() -> None:
    """A --resume on other links keeps the older cells: each row's command gives the dilation
    its own cells had (before, every row took the last run's), and a paper whose cells span
    two settings says its figures are not side by side."""
    results = Results.load(ROOT / "docs" / "results.json")
    base = results.runs[0]
    slow = dataclasses.replace(
        base, started="2026-12-02T00:00:00Z", environment={**base.environment, "dilation": 2e5}
    )
    fast = dataclasses.replace(
        base, started="2026-12-01T00:00:00Z", environment={**base.environment, "dilation": 1e5}
    )
    results.runs = [fast, slow]
    for key, cell in results.cells.items():
        run = 1 if cell.experiment == "offloads" else 0
        results.cells[key] = dataclasses.replace(cell, run=run)
    table = summary.render(results)
    lines = table.splitlines()[2 : 2 + len(PAPERS)]
    rows = {paper.EXPERIMENT: row for paper, row in zip(PAPERS, lines, strict=True)}
    assert "--dilation 200000'" in rows["offloads"]
    assert "--dilation 100000'" in rows["ragasa"]
    footer = table.splitlines()[-1]
    assert "dilation 200000x" in footer and "dilation 100000x" in footer
    # one offloads cell from the other run: that row's ratios mix two settings
    key = next(k for k, c in results.cells.items() if c.experiment == "offloads")
    results.cells[key] = dataclasses.replace(results.cells[key], run=0)
    row = summary.render(results).splitlines()[2 + [p.EXPERIMENT for p in PAPERS].index("offloads")]
    assert "cells on 2 link settings: not side by side" in row
