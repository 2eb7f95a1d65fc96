"""The README's results table, rendered from ``make reproduce``'s results file: one row per paper,
with our figure, the paper's, and the command that measures it again.

    python -m mininet_topos.experiments.reproduce.summary             # print the table
    python -m mininet_topos.experiments.reproduce.summary --write README.md

The figures come from the same code as docs/results.md's summary (each paper's ``section``), so
the README cannot say something the report does not; ``tests/unit/test_readme_results.py``
checks that the README holds exactly what this renders from docs/results.json.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path
from typing import Any

from mininet_topos.experiments.reproduce.plan import PAPERS
from mininet_topos.experiments.reproduce.report import cpu_bound_cells
from mininet_topos.experiments.reproduce.results import Results

RESULTS = Path("docs/results.json")
BEGIN = (
    "<!-- results table: python -m mininet_topos.experiments.reproduce.summary --write README.md"
    " -->"
)
END = "<!-- end of results table -->"


def command(experiment: str, env: dict[str, Any] | None = None) -> str:
    """The make command that measures ``experiment`` again as the last run did: its BMv2
    build and, on dilated links, its factor."""
    env = env or {}
    binary = env.get("bmv2", {}).get("binary", "")
    bmv2 = f"BMV2={binary} " if env.get("bmv2", {}).get("flavour") == "speed" else ""
    dilation = f" --dilation {env['dilation']:g}" if env.get("dilation") else ""
    return f"`make reproduce {bmv2}REPRODUCE_ARGS='--only {experiment}{dilation}'`"


def render(results: Results) -> str:
    """The table and a line saying where its figures come from."""
    env = results.runs[-1].environment if results.runs else {}
    cores = int(env.get("cores", 2) or 2)
    lines = [
        "| paper | comparison | ours | the paper's | measured by |",
        "|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as img_dir:  # the sections draw their plots: unused
        for paper in PAPERS:
            section = paper.section(results, Path(img_dir), cores)
            what, theirs, ours, _ = section.summary
            what = what or paper.CLAIM.title
            if judged := cpu_bound_cells(results, paper.EXPERIMENT):
                ours = f"{ours} ({judged}: not a result)"
            settings = _link_settings(results, paper.EXPERIMENT)
            if len(settings) > 1:
                ours = f"{ours} (cells on {len(settings)} link settings: not side by side)"
            own = settings[0][1] if settings else env
            lines.append(
                f"| {paper.CLAIM.paper} | {what} | {ours} | {theirs} | "
                f"{command(paper.EXPERIMENT, own)} |"
            )
    when = _provenance(results)
    links = "; ".join(text for text, _ in _link_settings(results)) or _links_text(env)
    lines += [
        "",
        f"{results.topo}, {results.profile} profile, {len(results.cells)} cells ({when}); "
        f"{links}; every section with its spread, plots, fidelity verdicts and "
        "where we differ: `docs/results.md`.",
    ]
    return "\n".join(lines)


def _links_text(env: dict[str, Any]) -> str:
    links = env.get("links", {}).get("describe", "links unshaped")
    return links + (f", dilation {env['dilation']:g}x" if env.get("dilation") else "")


def _link_settings(
    results: Results, experiment: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The link settings the cells (of ``experiment``, or all) were measured on, newest run
    first: (its text, the environment of its newest run). A --resume on other links keeps the
    older cells, so each row names its own runs' links, not the last run's."""
    runs = {c.run for c in results.cells.values() if experiment in (None, c.experiment)}
    settings: dict[str, dict[str, Any]] = {}
    newest_first = sorted(runs, key=lambda i: results.runs[i].started, reverse=True)
    for index in newest_first:
        env = results.runs[index].environment
        settings.setdefault(_links_text(env), env)
    return list(settings.items())


def _provenance(results: Results) -> str:
    """When and at which commit the cells were measured: every run that holds cells, newest
    first (a --resume or a merged file mixes runs, and the newest run need not hold most)."""
    held = collections.Counter(cell.run for cell in results.cells.values())
    parts = [
        f"{held[i]} at `{run.commit}` on {run.started[:10]}"
        for i, run in sorted(enumerate(results.runs), key=lambda r: r[1].started, reverse=True)
        if held[i]
    ]
    return "; ".join(parts) if parts else "not run yet"


def block(results: Results) -> str:
    return f"{BEGIN}\n{render(results)}\n{END}"


def replace_block(text: str, new_block: str) -> str:
    """``text`` with the block between the markers replaced (markers included)."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + new_block + text[end:]


def current_block(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--write", type=Path, help="replace the table in this file (README.md)")
    args = parser.parse_args(argv)
    results = Results.load(args.results)
    if args.write is None:
        print(render(results))
        return 0
    args.write.write_text(replace_block(args.write.read_text(), block(results)))
    print(f"*** wrote the results table into {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
