"""[NIC-barrier]'s barrier model fitted to measured barrier times.

The paper's model is T(N) = T_init + (ceil(log2 N) - 1) T_trig + T_fin: a fixed cost to enter
and to leave, and one trigger per further doubling. Barrier times against N alone cannot tell
T_init from T_fin (both are constant in N), so the fit gives their sum and T_trig, by least
squares, with the root-mean-square residual saying how well the shape fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# the paper's constants in microseconds: (T_init, T_trig, T_fin)
PAPER_MODELS = {"Myrinet": (3.6, 3.5, 3.84), "Quadrics": (1.9, 2.12, 0.4)}


@dataclass(frozen=True)
class BarrierModel:
    fixed_s: float  # T_init + T_fin
    trig_s: float  # T_trig: each further doubling of N
    rms_s: float  # root-mean-square residual
    points: int

    def predict(self, n: int) -> float:
        return self.fixed_s + steps(n) * self.trig_s


def steps(n: int) -> int:
    """ceil(log2 N) - 1, the number of triggers after the first step."""
    return max(0, math.ceil(math.log2(n)) - 1) if n > 1 else 0


def fit(points: list[tuple[int, float]]) -> BarrierModel | None:
    """Least squares over (N, seconds) points; None with fewer than two distinct step counts."""
    if len({steps(n) for n, _ in points}) < 2:
        return None
    design = np.array([[1.0, steps(n)] for n, _ in points])
    times = np.array([t for _, t in points])
    (fixed, trig), *_ = np.linalg.lstsq(design, times, rcond=None)
    residual = times - design @ np.array([fixed, trig])
    rms = float(np.sqrt(np.mean(residual**2)))
    return BarrierModel(float(fixed), float(trig), rms, len(points))
