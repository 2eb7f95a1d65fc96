"""Repairs the losses caused: a lossy cell's retransmissions and NACKs per frame lost, less
what the same cell sends without faults (issue 33). On the CPU-bound emulator timers fire
with nothing lost (a lossless 1 KiB in-network allreduce resent 806 chunks in 200 operations,
recursive doubling's allgather 20,298 messages), and at 1% loss that floor is a large part of
the matrix's per-loss columns. Pure arithmetic on the results file; report.py renders it."""

from __future__ import annotations

from dataclasses import dataclass

from mininet_topos.experiments.reliability.report_timing import BASELINE_SETTING
from mininet_topos.experiments.reliability.results import Cell, Results


@dataclass(frozen=True)
class BeyondLossless:
    cell: Cell
    lossless: Cell

    def per_loss(self, name: str) -> float:
        """``name`` (retransmissions or nacks) per frame lost, as the matrix's column."""
        return self.cell.total(name) / self.cell.frames_lost()

    def beyond(self, name: str) -> float:
        """The same less the lossless cell's rate per operation, scaled to this cell's."""
        floor = self.lossless.total(name) / self.lossless.operations * self.cell.operations
        return (self.cell.total(name) - floor) / self.cell.frames_lost()


def beyond_lossless(results: Results) -> list[BeyondLossless]:
    """Every lossy cell that lost frames and whose lossless cell ran, in matrix order."""
    lossless = {
        (c.collective, c.algorithm, c.size): c
        for c in results.cells
        if c.setting == BASELINE_SETTING and c.operations
    }
    out = []
    for cell in results.cells:
        floor = lossless.get((cell.collective, cell.algorithm, cell.size))
        if cell.setting != BASELINE_SETTING and floor and cell.operations and cell.frames_lost():
            out.append(BeyondLossless(cell, floor))
    return out


def render_beyond_lossless(results: Results) -> list[str]:
    rows = beyond_lossless(results)
    if not rows:
        return []
    lines = [
        "",
        "## Repairs beyond the lossless cell's",
        "",
        "Timers fire without any loss when the emulator's CPU, not the network, sets the round",
        "trip: the row without faults shows how often. Here each lossy cell's retransmissions and",
        "NACKs per frame lost, as in the table above, and the same with the lossless cell's rate",
        "per operation taken off first (what the losses themselves cost). Issue 33's bar is on",
        "the first.",
        "",
        "| faults | collective | algorithm | retransmitted per frame lost | beyond the lossless "
        "rate | NACKs per frame lost | beyond the lossless rate |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        c = row.cell
        lines.append(
            f"| {c.setting} | {c.collective} | {c.algorithm} "
            f"| {row.per_loss('retransmissions'):.2f} | {row.beyond('retransmissions'):.2f} "
            f"| {row.per_loss('nacks'):.2f} | {row.beyond('nacks'):.2f} |"
        )
    return lines
