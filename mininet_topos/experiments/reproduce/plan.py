"""``make reproduce``: each paper's experiment (README.md, Papers) as cells, per profile.

One module per paper (ragasa.py, ib_mcast.py, tofu2.py, nic_barrier.py, df_scatter.py), and one
for the project's own offload targets (offloads.py), holds its claim, its cells and its report
section; this module puts them together.

A cell is one launch of agents on the network (one workload, one or more tests): the unit that
is measured, saved and skipped on ``--resume``. Cells whose link bytes matter (every rank
broadcasting, scatter and allgather) hold one algorithm and one size, so the switches' counters
read around the launch belong to it alone; the others pack several tests into one launch, as
agent start-up is the largest fixed cost of a cell (tens of seconds for 72 agents on 2 cores).
No network here: planning is unit-tested.
"""

from __future__ import annotations

from types import ModuleType

from mininet_topos.experiments.reproduce import (
    df_scatter,
    ib_mcast,
    nic_barrier,
    offloads,
    ragasa,
    tofu2,
)
from mininet_topos.experiments.reproduce.cells import PROFILES, CellSpec, Claim

# only every rank broadcasting leaves cells out (by the cost model, on large networks)
from mininet_topos.experiments.reproduce.ragasa import left_out, left_out_cells

# the order of the report; a new paper's module goes here
PAPERS: tuple[ModuleType, ...] = (ragasa, ib_mcast, tofu2, nic_barrier, df_scatter, offloads)
# the order they run in: the cheap experiments first, every rank broadcasting last: when the
# budget runs out, what is missing is the largest sizes of one experiment, not whole experiments
RUN_ORDER: tuple[ModuleType, ...] = (nic_barrier, df_scatter, ib_mcast, offloads, tofu2, ragasa)

__all__ = ["CLAIMS", "PAPERS", "PAPER_VALUES", "left_out", "left_out_cells", "plan"]

CLAIMS: dict[str, Claim] = {paper.EXPERIMENT: paper.CLAIM for paper in PAPERS}
PAPER_VALUES: dict[str, float] = {k: v for paper in PAPERS for k, v in paper.PAPER_VALUES.items()}


def plan(profile: str, hosts: int) -> list[CellSpec]:
    """Every cell of a profile on a network of ``hosts`` hosts, in run order."""
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: expected one of {', '.join(PROFILES)}")
    full = profile == "full"
    return [cell for paper in RUN_ORDER for cell in paper.cells(hosts, full)]
