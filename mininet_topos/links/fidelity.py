"""Did a timed run measure the network or the CPU? A verdict per cell, after Mininet-HiFi
(Handigol et al., CoNEXT 2012): an emulated network is faithful while every process gets
the CPU it asks for and every busy link sends at its configured rate.

Two checks, both over the cell's own window:

* CPU: the run's processes (BMv2 switches, agents, link emulator, this harness) together use
  at most :data:`CPU_SHARE_LIMIT` of the cores, and none of them more than
  :data:`PROCESS_CORE_LIMIT` of one core (a process that saturates its core queues frames
  that the links would have carried);
* links: while a shaped port had frames queued in its qdisc at two successive samples, it
  sent at least :data:`BUSY_RATE_SHARE` of its rate. That is the departure-gap test in
  aggregate: a backlogged link whose frames leave further apart than one frame's
  transmission time is waiting on something other than the wire.

A cell on unshaped links has no network to be bound by: its verdict says so.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

CPU_SHARE_LIMIT = 0.7
PROCESS_CORE_LIMIT = 0.85
BUSY_RATE_SHARE = 0.9
NETWORK_BOUND = "network-bound"
CPU_BOUND = "CPU-bound: timing not faithful"


@dataclass(frozen=True)
class PortSample:
    sent_bytes: int
    drops: int
    backlog_bytes: int


def parse_qdiscs(text: str, shaped: set[str] | None = None) -> dict[str, PortSample]:
    """Per interface, from ``tc -s -j qdisc show``: the root qdisc's sent bytes and backlog
    and the drops of every qdisc on it. Only interfaces in ``shaped`` when given."""
    out: dict[str, PortSample] = {}
    for qdisc in json.loads(text or "[]"):
        intf = qdisc.get("dev")
        if intf is None or (shaped is not None and intf not in shaped):
            continue
        seen = out.get(intf, PortSample(0, 0, 0))
        if qdisc.get("root"):
            seen = PortSample(int(qdisc.get("bytes", 0)), seen.drops, int(qdisc.get("backlog", 0)))
        out[intf] = PortSample(
            seen.sent_bytes, seen.drops + int(qdisc.get("drops", 0)), seen.backlog_bytes
        )
    return out


def read_qdiscs(shaped: set[str]) -> dict[str, PortSample]:
    """The root namespace's shaped ports (every switch port) now."""
    done = subprocess.run(
        ["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True, timeout=10
    )
    return parse_qdiscs(done.stdout, shaped)


Samples = list[tuple[float, dict[str, PortSample]]]


class QdiscSampler:
    """Samples the shaped switch ports' qdiscs every ``interval`` seconds in a thread, on
    ``time.monotonic()`` (the clock the agents stamp their windows with)."""

    def __init__(self, shaped: set[str], interval: float = 0.2) -> None:
        self.shaped = shaped
        self.interval = interval
        self.samples: Samples = []
        self.cpu_s = 0.0  # what sampling cost this process, to be honest about it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="qdisc-sampler", daemon=True)

    def _sample(self) -> None:
        started = time.thread_time()
        self.samples.append((time.monotonic(), read_qdiscs(self.shaped)))
        self.cpu_s += time.thread_time() - started

    def __enter__(self) -> QdiscSampler:
        if self.shaped:
            self._sample()
            self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.shaped:
            self._stop.set()
            self._thread.join(10)
            self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()


@dataclass
class LinkUse:
    """What the shaped ports did in a window."""

    busiest_port: str = ""
    busiest_utilisation: float = 0.0  # its sent bits over rate x window
    busy_seconds: float = 0.0  # port-seconds with frames queued throughout a sample interval
    busy_rate_share: float | None = None  # sent while busy over rate x busy time; None: never
    drops: int = 0


def link_use(samples: Samples, rates_mbit: dict[str, float], start: float, end: float) -> LinkUse:
    """From qdisc samples: the busiest port's utilisation, and how fast busy ports sent."""
    window = [(t, s) for t, s in samples if start <= t <= end]
    use = LinkUse()
    if len(window) < 2 or end <= start:
        return use
    first, last = window[0][1], window[-1][1]
    span = window[-1][0] - window[0][0]
    busy_bits = busy_capacity = 0.0
    for intf, rate in rates_mbit.items():
        if intf not in first or intf not in last:
            continue
        sent = last[intf].sent_bytes - first[intf].sent_bytes
        utilisation = sent * 8 / (rate * 1e6 * span) if span > 0 else 0.0
        if utilisation > use.busiest_utilisation:
            use.busiest_port, use.busiest_utilisation = intf, utilisation
        use.drops += last[intf].drops - first[intf].drops
        for (t0, s0), (t1, s1) in itertools.pairwise(window):
            a, b = s0.get(intf), s1.get(intf)
            if a is None or b is None or not (a.backlog_bytes and b.backlog_bytes):
                continue
            use.busy_seconds += t1 - t0
            busy_bits += (b.sent_bytes - a.sent_bytes) * 8
            busy_capacity += rate * 1e6 * (t1 - t0)
    if busy_capacity > 0:
        use.busy_rate_share = busy_bits / busy_capacity
    return use


@dataclass
class Verdict:
    """Network-bound or CPU-bound, with the figures that decided it."""

    verdict: str
    reasons: list[str] = field(default_factory=list)
    cpu_share: float = 0.0  # all the run's processes, of all the cores
    busiest_process: str = ""
    busiest_process_cores: float = 0.0
    cores: int = 0
    links: LinkUse | None = None

    @property
    def network_bound(self) -> bool:
        return self.verdict == NETWORK_BOUND

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def short(self) -> str:
        if self.network_bound:
            return NETWORK_BOUND
        return f"{self.verdict} ({'; '.join(self.reasons)})"


def judge(
    shaped: bool,
    cpu_total_s: dict[str, float],
    cpu_busiest_s: dict[str, float],
    wall_s: float,
    links: LinkUse | None = None,
    cores: int | None = None,
) -> Verdict:
    """The verdict of one cell from its CPU per process type and its links' use."""
    cores = cores or os.cpu_count() or 1
    share = sum(cpu_total_s.values()) / (wall_s * cores) if wall_s > 0 else 0.0
    kind, busiest = max(cpu_busiest_s.items(), key=lambda kv: kv[1], default=("", 0.0))
    busiest_cores = busiest / wall_s if wall_s > 0 else 0.0
    reasons = []
    if not shaped:
        reasons.append("links unshaped: the time is the CPU's")
    if share > CPU_SHARE_LIMIT:
        reasons.append(f"processes used {share:.0%} of {cores} cores (limit {CPU_SHARE_LIMIT:.0%})")
    if busiest_cores > PROCESS_CORE_LIMIT:
        reasons.append(
            f"one {kind} process used {busiest_cores:.2f} of a core (limit {PROCESS_CORE_LIMIT})"
        )
    busy_share = links.busy_rate_share if links is not None else None
    if busy_share is not None and busy_share < BUSY_RATE_SHARE:
        reasons.append(
            f"backlogged ports sent at {busy_share:.0%} of their rate "
            f"(at least {BUSY_RATE_SHARE:.0%} expected)"
        )
    return Verdict(
        verdict=CPU_BOUND if reasons else NETWORK_BOUND,
        reasons=reasons,
        cpu_share=share,
        busiest_process=kind,
        busiest_process_cores=busiest_cores,
        cores=cores,
        links=links,
    )
