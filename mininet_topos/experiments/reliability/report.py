"""``docs/reliability.md`` from the fault matrix's results file (reliability_results.py):
every cell with the operations it holds and the runs its parts came from, the runs with when
they ran, and what the link emulator carried meanwhile. Pure rendering: no network."""

from __future__ import annotations

from controller import topology_build
from mininet_topos.experiments.provenance import PROTOCOL_COVERS
from mininet_topos.experiments.reliability.report_floor import render_beyond_lossless
from mininet_topos.experiments.reliability.report_timing import render_time_under_loss
from mininet_topos.experiments.reliability.results import Cell, CellKey, Results
from mininet_topos.links.linkfaults import Impairment

FUZZING = (
    "Bad input is covered by the `reliability` test tier (`make test-reliability`): 10,000\n"
    "fuzzed and spoofed frames at a switch leave every register, table entry and multicast\n"
    "group unchanged with every frame counted, and 10,000 fuzzed frames at a busy agent are\n"
    "all rejected and counted while its collectives complete correctly."
)


def _day(stamp: str) -> str:
    return stamp[:10]


def _minute(stamp: str) -> str:
    return stamp[:16].replace("T", " ") if stamp else "(did not finish)"


def _runs_of(cell: Cell) -> str:
    runs = sorted({p.run + 1 for p in cell.parts})
    return ", ".join(str(r) for r in runs)


def _queue_drops(cell: Cell) -> str:
    counted = [p.queue_drops for p in cell.parts if p.queue_drops is not None]
    if not counted:
        return "?"
    return str(sum(counted)) + ("" if len(counted) == len(cell.parts) else "+?")


def _per_loss(cell: Cell, name: str) -> str:
    """``name`` per frame the links lost (seeded losses and the emulator's queue drops: what
    the protocol had to repair); "-" where nothing was lost."""
    value = cell.per_loss(name)
    return "-" if value is None else f"{value:.1f}"


def _cell_row(cell: Cell) -> str:
    if not cell.parts:
        return f"| {cell.setting} | {cell.collective} | {cell.algorithm} | not run |||||||||||"
    return (
        f"| {cell.setting} | {cell.collective} | {cell.algorithm} | {cell.operations} "
        f"| {len(cell.parts)} ({_runs_of(cell)}) | {cell.total('retransmissions')} "
        f"| {cell.total('nacks')} | {cell.total('wrong')} | {cell.total('failures')} "
        f"| {cell.total('seconds'):.0f} | {cell.total('lost_frames')} "
        f"| {_queue_drops(cell)} | {_per_loss(cell, 'retransmissions')} "
        f"| {_per_loss(cell, 'nacks')} |"
    )


def _settings(results: Results) -> list[str]:
    lines = []
    for label, setting in results.settings.items():
        impairment = Impairment(**setting["impairment"])
        lines.append(f"* **{label}**: {impairment.describe()}, on {setting['scope']}.")
    return lines


def _emulator_load(results: Results) -> list[str]:
    parts = [p for c in results.cells for p in c.parts if p.seconds > 0 and p.emulator_frames]
    if not parts:
        return []
    rates = sorted(p.emulator_frames / p.seconds for p in parts)
    cpu = sorted(p.emulator_cpu_s / p.seconds for p in parts)
    drops = sum(p.queue_drops or 0 for p in parts)
    median = len(parts) // 2
    return [
        "",
        f"The link emulator forwarded {rates[0]:.0f} / {rates[median]:.0f} / {rates[-1]:.0f} "
        f"frames/s and used {cpu[0]:.0%} / {cpu[median]:.0%} / {cpu[-1]:.0%} of a core "
        f"(min / median / max over the {len(parts)} parts); frames dropped at its receive "
        f"queues (not seeded): {drops}. Its capacity is measured by "
        "`sudo python -m mininet_topos.links.linkemu_rate` (docs/usage.md, Faults).",
    ]


def _protocols(results: Results) -> list[str]:
    """One line on the protocol versions the parts measured (runs table, protocol)."""
    versions = results.protocols()
    if not versions:
        return []
    if len(versions) == 1:
        return [
            "",
            f"Every part measured one protocol version ({versions[0] or '?'}: a digest of "
            f"{PROTOCOL_COVERS}, in the runs table).",
        ]
    named = ", ".join(v or "?" for v in versions)
    return [
        "",
        f"The parts measured {len(versions)} protocol versions ({named}: a digest of "
        f"{PROTOCOL_COVERS}, in the runs table); the commits of the runs say what changed "
        "between them.",
    ]


def ranks_of(results: Results) -> int:
    """How many ranks each operation had: every host, or one per router."""
    topology = topology_build.parse_spec(results.topo)
    return len(topology.hosts) if results.members == "all" else len(topology.switches)


def render(results: Results, keys: list[CellKey], target: int) -> str:
    """The report; ``keys`` orders the cells, ``target`` is the operations a full cell holds."""
    cells = results.ordered_cells(keys)
    ran = [c for c in cells if c.parts]
    full = [c for c in cells if c.operations >= target]
    who = "every host" if results.members == "all" else "one host of every router"
    starts = [r.started for r in results.runs]
    if not starts:
        span = "(no run yet)"
    elif len(starts) == 1:
        span = f"in one run on {_day(starts[0])}"
    else:
        span = f"over {len(starts)} runs from {_day(min(starts))} to {_day(max(starts))}"
    lines = [
        "# Reliability report",
        "",
        "Accumulated by `make reliability` (mininet_topos/experiments/reliability/runner.py) "
        f"{span}: {results.topo}, {who} in one communicator, consecutive operations of each "
        f"collective with no barrier between them, {target} per cell for the full matrix. "
        "`make reliability RELIABILITY_ARGS=--resume` continues it: each run adds parts to the "
        "cells still short of the target and saves them in `docs/reliability.json`, from which "
        "this page is written.",
        "",
        "Faults come from the seeded link emulator (mininet_topos/links/linkemu.py): every host",
        "and switch link runs through it, and each frame's fate is decided by a random generator",
        "seeded per link and direction (and per run, so parts do not replay each other).",
        "",
        *_settings(results),
        "",
        "Operations count every operation of every part; parts gives how many parts the cell",
        "holds and, in brackets, the runs (below) they came from. Wrong results count operations",
        "where any rank's bytes differed from what it should have received; failures count ranks",
        "that reported an error (every wait is bounded, so a hang is a failure). Retransmissions",
        "add unicast retransmissions, the roots' multicast repairs, ARRIVE and REDUCE resends,",
        "and NACKs count receivers' NACKs, as the agents counted them until their tests ended",
        "(the finalizing barrier's resends are not the collective's; parts from before that was",
        "reported include them); a co-root's repairs from its own copy are not counted. Time is",
        "the wall",
        "time of all parts. Frames dropped at the emulator's receive queues are losses nobody",
        "seeded (the emulator fell behind); `?` marks parts from before it counted them. The",
        "last two columns divide retransmissions and NACKs by every frame lost (both kinds): what",
        "a repair costs per loss (issue 33's bar at 1% loss: at most 1.5 and 2).",
        "",
        "| faults | collective | algorithm | operations | parts (runs) | retransmissions | NACKs "
        "| wrong results | failures | time (s) | frames lost by the links "
        "| frames dropped at the emulator's queues | retransmitted per frame lost "
        "| NACKs per frame lost |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(_cell_row(c) for c in cells),
        "",
        f"{len(ran)} of {len(cells)} cells ran, {len(full)} hold the full {target} operations: "
        f"{sum(c.operations for c in ran)} operations, "
        f"{sum(c.total('wrong') for c in ran)} wrong results, "
        f"{sum(c.total('failures') for c in ran)} failures.",
        *_emulator_load(results),
        *_protocols(results),
        *render_time_under_loss(results, ranks_of(results)),
        *render_beyond_lossless(results),
        "",
        "## Runs",
        "",
        "| run | started (UTC) | finished (UTC) | parts | operations | command | commit "
        "| protocol | fault seed | machine | links |",
        "|---:|---|---|---:|---:|---|---|---|---:|---|---|",
    ]
    for index, run in enumerate(results.runs):
        parts = sum(1 for c in results.cells for p in c.parts if p.run == index)
        lines.append(
            f"| {index + 1} | {_minute(run.started)} | {_minute(run.finished)} | {parts} "
            f"| {results.run_operations(index)} | `{run.command}` | {run.commit} "
            f"| {run.protocol or '?'} | {run.fault_seed} | {run.machine} | {run.links} |"
        )
    notes = [
        f"* {c.setting}, {c.collective} {c.algorithm}, run {p.run + 1}: {p.note}"
        for c in cells
        for p in c.parts
        if p.note
    ]
    if notes:
        lines += ["", "Notes:", "", *notes]
    lines += ["", FUZZING, ""]
    return "\n".join(lines)
