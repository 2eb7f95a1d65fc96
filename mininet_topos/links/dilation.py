"""Time dilation (Gupta et al., NSDI 2006): keep a paper's network in proportion, and slow
all of it by one factor until this machine's CPU keeps up.

A paper's links (rates, per-link latency) are scaled by a dilation factor D: rates divided
by D, delays multiplied by D. Every network-bound time then grows by D and every ratio of two
network-bound times stays the paper's; what does not scale is the CPU each frame costs, which
is why D exists. It is chosen from a calibration of this machine: a cell's CPU per operation
stays the same at any D while its time per operation grows with D, so the share of the cores
it offers falls as 1/D. With the heaviest cell's CPU per operation C (seconds, all processes)
and its network time per operation at the paper's own rates T (seconds),

    D = C / (TARGET_CPU_SHARE x cores x T),

rounded up to 1, 2 or 5 times a power of ten, so tables read in round numbers.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from mininet_topos.links.shaping import DEFAULT_QUEUE, LinkModel
from mininet_topos.links.units import (
    RATE_MAX_MBIT,
    RATE_MIN_MBIT,
    LinkParameterError,
    format_delay,
    format_rate,
)

TARGET_CPU_SHARE = 0.4  # of the cores, for the heaviest cell: the rest is headroom


@dataclass(frozen=True)
class PaperLinks:
    """A paper's link parameters, undilated."""

    name: str
    rate_gbit: float  # host and local links
    global_rate_gbit: float
    delay_s: float  # one way, per link
    source: str

    def dilated(self, factor: float, queue: int = DEFAULT_QUEUE) -> LinkModel:
        """The paper's links slowed by ``factor``: rates / factor, delays x factor."""
        if factor < 1:
            raise LinkParameterError(f"dilation factor {factor:g} must be at least 1")
        rate = self.rate_gbit * 1000 / factor
        global_rate = self.global_rate_gbit * 1000 / factor
        for mbit in (rate, global_rate):
            if not RATE_MIN_MBIT <= mbit <= RATE_MAX_MBIT:
                raise LinkParameterError(
                    f"dilation {factor:g} gives {self.name} links {format_rate(mbit)}, outside "
                    f"{format_rate(RATE_MIN_MBIT)}-{format_rate(RATE_MAX_MBIT)}: choose a factor "
                    f"between {self.rate_gbit * 1000 / RATE_MAX_MBIT:g} and "
                    f"{self.global_rate_gbit * 1000 / RATE_MIN_MBIT:g}"
                )
        return LinkModel(
            rate=rate,
            global_rate=global_rate,
            delay=self.delay_s * factor,
            global_delay=self.delay_s * factor,
            queue=queue,
        )

    def describe(self, factor: float) -> str:
        links = self.dilated(factor)
        return (
            f"{self.name} links ({self.rate_gbit:g} Gb/s, global {self.global_rate_gbit:g} Gb/s, "
            f"{format_delay(self.delay_s)} per link) dilated {factor:g}x: "
            f"{format_rate(links.rate)}, global {format_rate(links.global_rate)}, "
            f"{format_delay(links.delay)} per link"
        )


PAPERS: dict[str, PaperLinks] = {
    # [DF-scatter] (topology-aware scatter/allgather on dragonfly), its simulation's parameters
    "df-scatter": PaperLinks("df-scatter", 45.1, 40.4, 100e-9, "[DF-scatter]"),
}
DEFAULT_PROFILE = "df-scatter"


def round_up_125(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k that is at least ``value``."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value * (1 - 1e-9):
            return float(step * power)
    return float(10 * power)


def choose_factor(
    cpu_per_op_s: float, paper_time_per_op_s: float, cores: int, target: float = TARGET_CPU_SHARE
) -> float:
    """The dilation that brings a cell's offered CPU to ``target`` of the cores."""
    if cpu_per_op_s <= 0 or paper_time_per_op_s <= 0 or cores <= 0:
        raise ValueError("calibration needs positive CPU per operation, time and cores")
    return round_up_125(cpu_per_op_s / (target * cores * paper_time_per_op_s))


@dataclass
class Calibration:
    """What one pilot run on this machine measured, and the factor it implies."""

    profile: str
    pilot_factor: float
    cell: str  # the heaviest cell of the pilot
    cpu_per_op_s: float  # all processes, per operation
    time_per_op_s: float  # at the pilot's factor
    cores: int
    bmv2: str
    factor: float = 0.0

    @property
    def paper_time_per_op_s(self) -> float:
        """The cell's time at the paper's own rates: a network-bound time scales with D."""
        return self.time_per_op_s / self.pilot_factor

    def __post_init__(self) -> None:
        if not self.factor:
            self.factor = choose_factor(self.cpu_per_op_s, self.paper_time_per_op_s, self.cores)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Calibration:
        try:
            return cls(**json.loads(path.read_text()))
        except FileNotFoundError:
            raise LinkParameterError(
                f"no calibration at {path}: run 'make calibrate' first, or give --dilation N"
            ) from None
        except (TypeError, ValueError) as exc:
            raise LinkParameterError(f"{path} is not a calibration: {exc}") from None
