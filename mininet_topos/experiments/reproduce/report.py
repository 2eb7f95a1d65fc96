"""docs/results.md from ``make reproduce``'s results file: one section per paper.

Each section states the paper's claim and conditions, our figure measured the same way (with
its spread over iterations: min / median / max, and the mean), the ratio of ours to the
paper's, a plot under docs/img/, which process type set the pace, and a plain sentence on
where and why we differ. No network: the report is rebuilt from the file at any time
(``--report-only``).
"""

from __future__ import annotations

from pathlib import Path

from mininet_topos.experiments.reproduce import ns3_side, rate_check
from mininet_topos.experiments.reproduce.plan import CLAIMS, PAPERS
from mininet_topos.experiments.reproduce.results import Results

REFERENCE_TOPOLOGY = "df:2,4,2"  # the papers' Df(2,4,2); figures on anything else are a try-out


# -- the whole report --------------------------------------------------------------------------

DEFAULT_COMMAND = "python -m mininet_topos.experiments.reproduce"


def failed_cell_lines(results: Results) -> list[str]:
    """Cells that failed or got wrong results: their figures are missing from the sections
    below, and the first error says why (`--resume` measures them again)."""
    failed = [c for c in results.cells.values() if not c.ok]
    if not failed:
        return []
    lines = [
        "",
        f"**{len(failed)} cells failed** and are missing below "
        "(`REPRODUCE_ARGS=--resume` measures them again):",
        "",
    ]
    for c in failed:
        wrong = sum(m.wrong for m in c.measurements)
        why = c.errors[0] if c.errors else f"{wrong} wrong results"
        more = f" (and {len(c.errors) - 1} more errors)" if len(c.errors) > 1 else ""
        lines.append(f"* `{c.key}` (run {c.run + 1}): {why}{more}")
    return lines


def render(
    results: Results, img_dir: Path, report_dir: Path, source: Path
) -> tuple[str, list[Path]]:
    env = results.runs[-1].environment if results.runs else {}
    cores = int(env.get("cores", 2) or 2)
    sections = [paper.section(results, img_dir, cores) for paper in PAPERS]
    lines = ["# The papers' experiments, reproduced", ""]
    if results.topo != REFERENCE_TOPOLOGY:
        lines += [
            f"> **These figures are from {results.topo}, not the papers' Df(2,4,2).** They "
            "validate the harness; `make reproduce` on Df(2,4,2) replaces them.",
            "",
        ]
    flavours = {r.environment.get("bmv2", {}).get("flavour", "?") for r in results.runs}
    if flavours - {"speed"}:
        lines += [
            f"> **Timed on a BMv2 {'/'.join(sorted(flavours))} build**, not only the one built "
            "for speed: switch time is several times larger there (`make doctor` says which "
            "build runs; `make reproduce BMV2=...` picks one).",
            "",
        ]
    lines += [
        f"Written by `make reproduce` from `{source}` ({results.profile} "
        f"profile, {len(results.cells)} cells). Regenerate: "
        f"`{results.runs[-1].command if results.runs else DEFAULT_COMMAND}`"
        "; `--report-only` rewrites this page from the results file. Times are given as "
        "median (min-max over iterations, mean).",
        "",
        "## Summary",
        "",
        "| paper | what | the paper's | ours | ours / the paper's |",
        "|---|---|---|---|---|",
    ]
    for section in sections:
        claim = CLAIMS[section.experiment]
        what, theirs, ours, against = section.summary
        if judged := cpu_bound_cells(results, section.experiment):
            # a CPU-bound cell's time is the emulator's, not the network's: no result
            ours, against = f"{ours} ({judged}: not a result)", "-"
        lines.append(f"| {claim.paper} | {what or claim.title} | {theirs} | {ours} | {against} |")
    lines += failed_cell_lines(results)
    lines += ["", "## Environment", "", *environment_lines(results), ""]
    lines += ["## BMv2 beside ns-3", "", *ns3_side.table(results), ""]
    lines += ["## Fidelity", "", rate_check.line(results.rate_check), ""]
    lines += [*fidelity_lines(results), ""]
    for section in sections:
        claim = CLAIMS[section.experiment]
        lines += [
            f"## {claim.paper}: {claim.title}",
            "",
            f"**The paper:** {claim.text} *Conditions:* {claim.conditions}",
            "",
            "**Ours:**",
            "",
            *section.body,
            "",
        ]
        for path in section.figures:
            lines += [f"![{claim.title}]({_relative(path, report_dir)})", ""]
    return "\n".join(lines), [p for s in sections for p in s.figures]


def cpu_bound_cells(results: Results, experiment: str) -> str:
    """'' when every measured cell of ``experiment`` was network-bound, else how many were
    not (CPU-bound, or on unshaped links, or never judged)."""
    cells = [c for c in results.cells.values() if c.experiment == experiment and c.ok]
    bad = [c for c in cells if not c.network_bound]
    if not bad:
        return ""
    unjudged = sum(1 for c in bad if not c.fidelity)
    what = "not judged" if unjudged == len(bad) else "CPU-bound"
    return f"{len(bad)} of {len(cells)} cells {what}"


def fidelity_lines(results: Results) -> list[str]:
    """Each cell's verdict and the figures behind it (links/fidelity.py)."""
    lines = [
        "| cell | verdict | processes' share of the cores | busiest process | busiest port |",
        "|---|---|---:|---|---|",
    ]
    for cell in results.cells.values():
        f = cell.fidelity
        if not f:
            lines.append(f"| `{cell.key}` | not judged (measured before verdicts) | - | - | - |")
            continue
        links = f.get("links") or {}
        port = (
            f"{links['busiest_port']} {links['busiest_utilisation']:.0%} of its rate"
            if links.get("busiest_port")
            else "-"
        )
        verdict = f["verdict"] + (f": {'; '.join(f['reasons'])}" if f.get("reasons") else "")
        lines.append(
            f"| `{cell.key}` | {verdict} | {f['cpu_share']:.0%} of {f['cores']} | "
            f"{f['busiest_process']} {f['busiest_process_cores']:.2f} core | {port} |"
        )
    return lines


def environment_lines(results: Results) -> list[str]:
    lines = [
        "| run | started | commit | BMv2 | p4c | cores (load) | command |",
        "|---|---|---|---|---|---|---|",
    ]
    for index, run in enumerate(results.runs):
        env = run.environment
        bmv2 = env.get("bmv2", {})
        load = env.get("load_average", [])
        cells = sum(1 for c in results.cells.values() if c.run == index)
        lines.append(
            f"| {index + 1} ({cells} cells) | {run.started} | {run.commit} | "
            f"{bmv2.get('flavour', '?')} build, `{bmv2.get('binary', '?')}` | "
            f"{str(env.get('p4c', '?')).split('  ')[0]} | {env.get('cores', '?')} "
            f"({f'{load[0]:.1f}' if load else '?'}) | `{run.command}` |"
        )
    lines += ["", f"Topology {results.topo}; seed {results.seed}; profile {results.profile}."]
    for index, run in enumerate(results.runs):
        links = run.environment.get("links", {}).get("describe", "links unshaped")
        dilation = run.environment.get("dilation")
        factor = f", dilation {dilation:g}x" if dilation else ""
        lines.append(f"Run {index + 1}: {links}{factor}.")
    return lines


def _relative(path: Path, report_dir: Path) -> str:
    try:
        return str(path.resolve().relative_to(report_dir.resolve()))
    except ValueError:
        return str(path)


def write_report(results: Results, report: Path, img_dir: Path, source: Path) -> list[Path]:
    """Write the report and its plots (``source``: the results file, as the report names
    it); returns the report's path, then every plot's."""
    img_dir.mkdir(parents=True, exist_ok=True)
    report.parent.mkdir(parents=True, exist_ok=True)
    text, figures = render(results, img_dir, report.parent, source)
    report.write_text(text + "\n")
    return [report, *figures]
