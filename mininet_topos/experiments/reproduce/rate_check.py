"""The fidelity check a whole run owes (Mininet-HiFi): halving the link rate must double a
bandwidth-bound time. One broadcast large enough to be bound by the links' rate runs at the
run's rates and again at half of them, side by side on the same network; its time must grow
by 2x within 15%."""

from __future__ import annotations

import dataclasses
import statistics
from typing import TYPE_CHECKING, Any

from host_agents.workload import CollectiveTest
from mininet_topos.experiments.reproduce.cells import CellSpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from mininet_topos.experiments.reproduce.results import CellResult
    from mininet_topos.network import NetcollNetwork

TOLERANCE = 0.15
SIZE = 262144  # 256 KiB: dozens of frames per link, so serialisation, not latency, dominates
CELL = CellSpec(
    "rate-check",
    f"innet/{SIZE}",
    (CollectiveTest("bcast", "innet", (SIZE,), 3, 1, root=0),),
    metered=True,
)


def median_completion(cell: CellResult) -> float | None:
    times = [t for m in cell.measurements for t in m.completion_s]
    return statistics.median(times) if times and cell.ok else None


def judge(full_s: float | None, half_s: float | None) -> dict[str, Any]:
    """The ratio of the two times and whether it is 2x within :data:`TOLERANCE`."""
    ratio = half_s / full_s if full_s and half_s else None
    ok = ratio is not None and abs(ratio - 2.0) <= 2.0 * TOLERANCE
    return {"full_s": full_s, "half_s": half_s, "ratio": ratio, "ok": ok}


def check(net: NetcollNetwork, run_cell: Callable[[CellSpec], CellResult]) -> dict[str, Any]:
    """Run :data:`CELL` at the network's rates and at half of them (the network is put back
    afterwards); ``run_cell`` measures one cell."""
    links = net.options.links
    if not links.shaped or links.rate is None:
        return {"skipped": "links unshaped: no rate to halve"}
    full = run_cell(CELL)
    halved = dataclasses.replace(
        links, rate=links.rate / 2, global_rate=(links.global_rate or links.rate) / 2
    )
    net.reshape(halved)
    try:
        half = run_cell(CELL)
    finally:
        net.reshape(links)
    return {
        "cell": CELL.key,
        "rate_mbit": links.rate,
        **judge(median_completion(full), median_completion(half)),
        "fidelity": [full.fidelity.get("verdict"), half.fidelity.get("verdict")],
        "errors": (full.errors + half.errors)[:3],
    }


def line(result: dict[str, Any]) -> str:
    """One sentence for the report."""
    if not result:
        return "Rate check: not run."
    if "skipped" in result:
        return f"Rate check: skipped ({result['skipped']})."
    if result["ratio"] is None:
        return f"Rate check: failed to measure ({'; '.join(result['errors']) or 'no time'})."
    verdict = "passed" if result["ok"] else "FAILED"
    return (
        f"Rate check ({result['cell']}): at half the rate the broadcast took "
        f"{result['ratio']:.2f}x as long ({result['full_s'] * 1e3:.0f} ms -> "
        f"{result['half_s'] * 1e3:.0f} ms; 2x within {TOLERANCE:.0%} expected): {verdict}; "
        f"cells {' / '.join(str(v) for v in result['fidelity'])}."
    )
