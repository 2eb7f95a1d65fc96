"""The fault matrix: its fault settings, its cells (collective, algorithm, size) and the ones a
run is told to add parts to (``--collectives``, ``--faults``, ``--algorithms``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mininet_topos.experiments.reliability.results import CellKey
from mininet_topos.links.linkfaults import Impairment


@dataclass(frozen=True)
class FaultSetting:
    label: str
    name: str  # what --faults calls it (labels hold commas, which separate the names)
    impairment: Impairment
    one_global_link: bool = False

    def describe(self) -> dict[str, Any]:
        """What the results file records, so a resumed run can check it is the same."""
        scope = "one global link" if self.one_global_link else "every link"
        return {"scope": scope, "impairment": asdict(self.impairment)}


SETTINGS = (
    # the baseline the time under loss is judged against (report_timing.py): the same relay,
    # nothing lost, duplicated or reordered
    FaultSetting("no faults, every link", "none", Impairment()),
    FaultSetting(
        "1% loss, every link", "loss1", Impairment(loss=0.01, duplicate=0.01, reorder=0.02)
    ),
    FaultSetting(
        "2% loss, every link", "loss2", Impairment(loss=0.02, duplicate=0.01, reorder=0.02)
    ),
    FaultSetting(
        "5% loss, every link", "loss5", Impairment(loss=0.05, duplicate=0.01, reorder=0.02)
    ),
    FaultSetting(
        "10% loss, one global link",
        "global-loss10",
        Impairment(loss=0.10, duplicate=0.01, reorder=0.02),
        one_global_link=True,
    ),
    # about 1% of frames lost on average, but in bursts of 5 on average: whole windows go;
    # the chain steps every 1 ms of an idle link too, so a burst does not last for seconds
    FaultSetting(
        "bursty 1% loss, every link",
        "bursty1",
        Impairment(
            burst_enter=0.002, burst_exit=0.2, burst_tick=0.001, duplicate=0.01, reorder=0.02
        ),
    ),
    # every frame across the link lost for 1 s in every 5 s, from 1 s after the part starts
    FaultSetting(
        "link flap, one global link",
        "flap",
        Impairment(down_after=1.0, down_for=1.0, down_every=5.0),
        one_global_link=True,
    ),
)

FULL_OPS = 1000  # operations per cell of the full matrix

# (collective, algorithm, bytes): the in-network algorithm where one exists, and a host one
CELLS = (
    ("bcast", "innet", 16384),
    ("bcast", "binomial", 16384),
    ("barrier", "innet", 0),
    ("barrier", "dissemination", 0),
    ("allgather", "innet", 1024),
    ("allgather", "innet_packed", 1024),
    ("allgather", "recursive_doubling", 1024),
    ("scatter", "lin", 1024),
    ("allreduce", "innet", 1024),
    ("allreduce", "recursive_doubling", 1024),
)


def matrix_keys() -> list[CellKey]:
    return [(s.label, c, a, size) for s in SETTINGS for c, a, size in CELLS]


def _wanted(option: str, chosen: str, known: set[str]) -> set[str]:
    """The comma-separated names ``chosen`` (empty: every one of ``known``), checked."""
    if not chosen:
        return known
    wanted = set(chosen.split(","))
    if wanted - known:
        unknown = ", ".join(sorted(wanted - known))
        raise ValueError(f"{option}: {unknown} not in the matrix ({', '.join(sorted(known))})")
    return wanted


def chosen_keys(collectives: str, faults: str = "", algorithms: str = "") -> list[CellKey]:
    """The matrix's cells of these collectives, fault settings (by name) and algorithms
    (each comma-separated; empty: every one)."""
    by_label = {s.label: s.name for s in SETTINGS}
    wanted_collectives = _wanted("--collectives", collectives, {c for c, _, _ in CELLS})
    wanted_faults = _wanted("--faults", faults, set(by_label.values()))
    wanted_algorithms = _wanted("--algorithms", algorithms, {a for _, a, _ in CELLS})
    return [
        key
        for key in matrix_keys()
        if key[1] in wanted_collectives
        and by_label[key[0]] in wanted_faults
        and key[2] in wanted_algorithms
    ]


def settings_record() -> dict[str, dict[str, Any]]:
    return {s.label: s.describe() for s in SETTINGS}
