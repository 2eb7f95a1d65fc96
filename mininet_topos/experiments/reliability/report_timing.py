"""Time under loss against the host baseline (issue 33): is an in-network algorithm, with
losses, slower than its host baseline's lossless ratio allows by more than the round trips its
losses cost? Pure arithmetic on the results file (results.py); report.py renders it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mininet_topos.experiments.reliability.results import Cell, Results

BASELINE_SETTING = "no faults, every link"

# (collective, in-network algorithm, the host algorithm its speed is judged against)
PAIRS = (
    ("bcast", "innet", "binomial"),
    ("barrier", "innet", "dissemination"),
    ("allgather", "innet", "recursive_doubling"),
    ("allgather", "innet_packed", "recursive_doubling"),
    ("allreduce", "innet", "recursive_doubling"),
)

# one round trip through the fabric, agents included: a lossless in-network barrier is an
# ARRIVE up to the spine and a RELEASE back down, with nothing else in flight
ROUND_TRIP_CELL = ("barrier", "innet")


@dataclass(frozen=True)
class TimeUnderLoss:
    setting: str
    collective: str
    algorithm: str
    baseline: str
    lossless_ratio: float  # baseline's time over the algorithm's, without faults
    seconds: float  # the algorithm's time per operation under the setting's faults
    at_ratio_s: float  # the baseline's time under the faults over the lossless ratio
    round_trips: int  # the losses' round trips a rank waits: frames lost per operation
    # shared among the ranks, rounded up
    round_trip_s: float

    @property
    def allowed(self) -> float:
        return self.at_ratio_s + self.round_trips * self.round_trip_s

    @property
    def excess_s(self) -> float:
        """How much slower than its lossless ratio allows, before the losses' round trips."""
        return self.seconds - self.at_ratio_s

    @property
    def within(self) -> bool:
        return self.seconds <= self.allowed


def _timed(results: Results, setting: str, collective: str, algorithm: str) -> Cell | None:
    """The cell if it holds timed operations."""
    for cell in results.cells:
        if (cell.setting, cell.collective, cell.algorithm) == (setting, collective, algorithm):
            return cell if cell.seconds_per_operation() else None
    return None


def _seconds(cell: Cell) -> float:
    return cell.seconds_per_operation() or 0.0


def time_under_loss(results: Results, ranks: int) -> list[TimeUnderLoss]:
    """Every pair measured both without faults and under a lossy setting, in matrix order."""
    round_trip = _timed(results, BASELINE_SETTING, *ROUND_TRIP_CELL)
    if round_trip is None:
        return []
    out = []
    lossy = [label for label in results.settings if label != BASELINE_SETTING]
    for setting in lossy:
        for collective, algorithm, baseline in PAIRS:
            fast0 = _timed(results, BASELINE_SETTING, collective, algorithm)
            host0 = _timed(results, BASELINE_SETTING, collective, baseline)
            fast = _timed(results, setting, collective, algorithm)
            host = _timed(results, setting, collective, baseline)
            if fast0 is None or host0 is None or fast is None or host is None:
                continue
            ratio = _seconds(host0) / _seconds(fast0)
            waits = math.ceil(fast.frames_lost() / max(1, fast.operations) / ranks)
            out.append(
                TimeUnderLoss(
                    setting,
                    collective,
                    algorithm,
                    baseline,
                    ratio,
                    _seconds(fast),
                    _seconds(host) / ratio,
                    waits,
                    _seconds(round_trip),
                )
            )
    return out


def render_time_under_loss(results: Results, ranks: int) -> list[str]:
    rows = time_under_loss(results, ranks)
    if not rows:
        return []
    lines = [
        "",
        "## Time under loss against the host baseline",
        "",
        "Issue 33's time condition: with losses, an in-network algorithm may be slower than its",
        "host baseline's lossless ratio allows by at most the round trips its losses cost. The",
        "lossless ratio is the baseline's time per operation over the algorithm's in the row",
        f"without faults ({BASELINE_SETTING!r}: the same relay, nothing lost). Allowed is the",
        "baseline's time under the faults divided by that ratio, plus the losses' round trips: the",
        "frames the algorithm's cell lost per operation, shared among the",
        f"{ranks} ranks (rounded up: what one rank waits for), times one round trip through the",
        "fabric, a lossless in-network barrier's time per operation. Times are per operation.",
        "",
        "| faults | collective | algorithm | baseline | lossless ratio | time | allowed "
        "| slower than the ratio by | losses' round trips | within |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.setting} | {row.collective} | {row.algorithm} | {row.baseline} "
            f"| {row.lossless_ratio:.2f}x | {row.seconds * 1e3:.0f} ms "
            f"| {row.allowed * 1e3:.0f} ms | {row.excess_s * 1e3:.0f} ms "
            f"| {row.round_trips} x {row.round_trip_s * 1e3:.0f} ms "
            f"| {'yes' if row.within else 'no'} |"
        )
    return lines
