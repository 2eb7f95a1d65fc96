"""What a run on a network costs: bytes on links, and CPU per process type.

Shared by ``make bench`` and ``make reproduce``: the switches' per-port, per-op counters read
before and after a workload give the bytes it put on links and on global links; the physical
minimum (each link carrying each segment once) is what those bytes are compared with; and the
CPU time of the switch processes, the link emulator and this process, read from /proc before
and after, with the agents' own (each reports its CPU per test), says which one was busy.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller import p4info, routing, trees, wire
from controller.topology import Topology
from host_agents.launcher import LaunchResult
from host_agents.workload import Workload
from mininet_topos.links.fidelity import QdiscSampler, Samples, Verdict, judge, link_use

if TYPE_CHECKING:
    from mininet_topos.network import NetcollNetwork

DATA_COLUMNS = (
    wire.Op.MCAST,
    wire.Op.UNICAST,
    wire.Op.ACK,
    wire.Op.NACK,
    wire.Op.CTRL,
    wire.Op.REDUCE,
    wire.Op.RESULT,
)
BARRIER_COLUMNS = (wire.Op.ARRIVE, wire.Op.RELEASE)


class LinkMeter:
    """Bytes that crossed links, from every switch's per-port, per-op counters."""

    def __init__(self, net: NetcollNetwork) -> None:
        self.net = net
        assert net.control is not None
        self.control = net.control
        self.kinds = {
            (s, p): info.kind
            for s in range(net.topo.num_switches)
            for p, info in net.topo.ports(s).items()
        }

    def snapshot(self) -> dict[tuple[str, int, int, int], int]:
        out: dict[tuple[str, int, int, int], int] = {}
        for index, switch in self.control.switches.items():
            for name in (p4info.RX_COUNTER, p4info.TX_COUNTER):
                cells = self.net.call(switch.read_counter(name))
                for cell, (_, nbytes) in cells.items():
                    out[(name, index, cell // 16, cell % 16)] = nbytes
        return out

    def delta(
        self, before: dict[Any, int], after: dict[Any, int], columns: tuple[int, ...]
    ) -> tuple[int, int]:
        """(bytes on all links, bytes on global links) between two snapshots."""
        link = global_ = 0
        for key, value in after.items():
            name, switch, port, column = key
            if column not in columns:
                continue
            diff = value - before.get(key, 0)
            kind = self.kinds.get((switch, port))
            if kind is None or kind == "mgmt":
                continue
            # each traversal once: what switches send on any link, plus what hosts send to them
            if name == p4info.TX_COUNTER or (name == p4info.RX_COUNTER and kind == "host"):
                link += diff
                if kind == "global" and name == p4info.TX_COUNTER:
                    global_ += diff
        return link, global_


def frame_bytes(nbytes: int, segment: int = wire.MAX_PAYLOAD) -> list[int]:
    """Frame sizes of a message's segments of at most ``segment`` bytes, headers included."""
    if nbytes == 0:
        return [wire.ETH_HEADER_LEN + wire.HEADER_LEN]
    full, rest = divmod(nbytes, segment)
    sizes = [segment] * full + ([rest] if rest else [])
    return [wire.ETH_HEADER_LEN + wire.HEADER_LEN + s for s in sizes]


def minimum_bytes(
    topo: Topology,
    collective: str,
    members: tuple[int, ...],
    root: int,
    size: int,
    segment: int = wire.MAX_PAYLOAD,
) -> int | None:
    """The physical minimum: every link on the way carries each segment exactly once."""
    if collective == "bcast":
        tree = trees.innet_tree(topo, members, members[root])
        return sum(frame_bytes(size, segment)) * (1 + tree.switch_links() + len(members) - 1)
    if collective == "allgather":
        total = 0
        for r in members:
            tree = trees.innet_tree(topo, members, r)
            total += sum(frame_bytes(size, segment)) * (1 + tree.switch_links() + len(members) - 1)
        return total
    if collective in ("allreduce", "reduce"):
        # the switches' aggregation: each vector up every barrier-tree link once and the
        # result down it once (a reduce could stop at the root: the same order of bytes)
        tree = trees.barrier_tree(topo, members)
        links = len(tree.nodes) - 1 + len(members)
        return 2 * sum(frame_bytes(size, segment)) * links
    if collective == "scatter":
        source = members[root]
        return sum(
            sum(frame_bytes(size, segment)) * routing.host_path_hops(topo, source, dst)
            for dst in members
            if dst != source
        )
    return None


def minimum_global_bytes(
    topo: Topology,
    collective: str,
    members: tuple[int, ...],
    root: int,
    size: int,
    segment: int = wire.MAX_PAYLOAD,
) -> int | None:
    """The least a collective can put on global links: every group without the data must
    take it in once (a broadcast's segments once per other group; a scatter's blocks for the
    ranks outside the root's group once each). ``all_roots`` is a broadcast from every rank."""
    groups = {topo.host_by_node(n).group for n in members}
    frames = sum(frame_bytes(size, segment))
    if collective == "bcast":
        return frames * (len(groups) - 1)
    if collective in ("allgather", "all_roots"):
        return frames * (len(groups) - 1) * len(members)
    if collective == "scatter":
        home = topo.host_by_node(members[root]).group
        return frames * sum(1 for n in members if topo.host_by_node(n).group != home)
    return None


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process from /proc (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the command name: state is field 3, utime 14 and stime 15 (1-based, man proc)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of the network's own processes: the BMv2 switches, the link emulator
    (when links are emulated) and this process (control plane, counters)."""

    def __init__(self, net: NetcollNetwork) -> None:
        self.net = net

    def pids(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {"bmv2": [], "link emulator": []}
        if self.net.mininet is not None:
            for switch in self.net.mininet.switches:
                process = getattr(switch, "process", None)
                if process is not None and process.proc is not None:
                    out["bmv2"].append(process.proc.pid)
        if self.net.emulator is not None:
            out["link emulator"].append(self.net.emulator.pid)
        return out

    def snapshot(self) -> dict[str, dict[int, float]]:
        snap = {
            kind: {pid: cpu for pid in pids if (cpu := process_cpu_seconds(pid)) is not None}
            for kind, pids in self.pids().items()
        }
        snap["harness"] = {os.getpid(): time.process_time()}
        return snap


@dataclass
class CpuUse:
    """CPU seconds per process type during one launch, and of its busiest process."""

    wall_s: float
    total_s: dict[str, float] = field(default_factory=dict)
    busiest_s: dict[str, float] = field(default_factory=dict)
    processes: dict[str, int] = field(default_factory=dict)


def cpu_use(
    before: dict[str, dict[int, float]],
    after: dict[str, dict[int, float]],
    agents: list[float],
    wall_s: float,
) -> CpuUse:
    """From two :meth:`CpuMeter.snapshot` and the agents' own CPU seconds."""
    use = CpuUse(wall_s=wall_s)
    for kind, now in after.items():
        deltas = [cpu - before.get(kind, {}).get(pid, 0.0) for pid, cpu in now.items()]
        if deltas:
            use.total_s[kind] = sum(deltas)
            use.busiest_s[kind] = max(deltas)
            use.processes[kind] = len(deltas)
    if agents:
        use.total_s["agents"] = sum(agents)
        use.busiest_s["agents"] = max(agents)
        use.processes["agents"] = len(agents)
    return use


def agents_cpu(result: LaunchResult) -> list[float]:
    """Each agent's CPU over its tests (start-up and rendezvous left out)."""
    out = []
    for report in result.reports.values():
        tests = report.get("tests", [])
        if tests:
            out.append(sum(float(t.get("cpu_seconds", 0.0)) for t in tests))
    return out


Snapshot = dict[str, dict[int, float]]


class CpuSampler:
    """Samples :meth:`CpuMeter.snapshot` every ``interval`` seconds in a thread (with
    ``time.monotonic()``, the clock agents stamp their windows with), so the CPU spent in a
    window known only afterwards (the agents' tests, start-up left out) can be read off."""

    def __init__(self, meter: CpuMeter, interval: float = 0.1) -> None:
        self.meter = meter
        self.interval = interval
        self.samples: list[tuple[float, Snapshot]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def __enter__(self) -> CpuSampler:
        self.samples.append((time.monotonic(), self.meter.snapshot()))
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.samples.append((time.monotonic(), self.meter.snapshot()))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append((time.monotonic(), self.meter.snapshot()))


def snapshot_at(samples: list[tuple[float, Snapshot]], at: float) -> Snapshot:
    """Each process's CPU seconds at ``at``, interpolated linearly between samples (clamped
    to the first and last); a process missing from a sample keeps its nearest value."""
    if not samples:
        return {}
    if at <= samples[0][0]:
        return samples[0][1]
    for (t0, s0), (t1, s1) in itertools.pairwise(samples):
        if t0 <= at <= t1:
            share = (at - t0) / (t1 - t0) if t1 > t0 else 1.0
            return {
                kind: {
                    pid: s0.get(kind, {}).get(pid, cpu)
                    + share * (cpu - s0.get(kind, {}).get(pid, cpu))
                    for pid, cpu in now.items()
                }
                for kind, now in s1.items()
            }
    return samples[-1][1]


@dataclass
class Metered:
    result: LaunchResult
    link_bytes: int  # over the whole launch, warm-up and synchronising frames included
    global_link_bytes: int
    cpu: CpuUse  # over the whole launch
    samples: list[tuple[float, Snapshot]] = field(default_factory=list)
    port_samples: Samples = field(default_factory=list)  # shaped switch ports' qdiscs
    port_rates: dict[str, float] = field(default_factory=dict)  # their rates, Mb/s
    shaped: bool = False

    def cpu_between(self, start: float, end: float) -> CpuUse:
        """CPU per process type between two ``time.monotonic()`` instants (the agents'
        windows): switches and emulator from the samples, agents from their own reports."""
        return cpu_use(
            snapshot_at(self.samples, start),
            snapshot_at(self.samples, end),
            agents_cpu(self.result),
            end - start,
        )

    def verdict_between(self, start: float, end: float) -> Verdict:
        """Network-bound or CPU-bound over a window (links/fidelity.py)."""
        cpu = self.cpu_between(start, end)
        links = link_use(self.port_samples, self.port_rates, start, end) if self.shaped else None
        return judge(self.shaped, cpu.total_s, cpu.busiest_s, cpu.wall_s, links)

    def verdict(self) -> Verdict:
        """Over the agents' timed windows where they reported them, else the launch."""
        span = self.result.timed_span()
        if span is not None:
            return self.verdict_between(*span)
        use = self.cpu
        links = (
            link_use(self.port_samples, self.port_rates, -float("inf"), float("inf"))
            if self.shaped
            else None
        )
        return judge(self.shaped, use.total_s, use.busiest_s, use.wall_s, links)


def metered_launch(
    net: NetcollNetwork,
    meter: LinkMeter,
    workload: Workload,
    columns: tuple[int, ...] = DATA_COLUMNS,
    timeout: float = 1800,
) -> Metered:
    """Run ``workload`` and read what it cost: link bytes of ``columns`` (wire ops) and CPU."""
    before = meter.snapshot()
    started = time.perf_counter()
    ports = net.link_plan.shaped_ports
    with CpuSampler(CpuMeter(net)) as sampler, QdiscSampler(set(ports)) as port_sampler:
        result = net.launcher().launch(workload, timeout=timeout)
    wall = time.perf_counter() - started
    after = meter.snapshot()
    link, global_ = meter.delta(before, after, columns)
    use = cpu_use(sampler.samples[0][1], sampler.samples[-1][1], agents_cpu(result), wall)
    return Metered(
        result,
        link,
        global_,
        use,
        sampler.samples,
        port_samples=port_sampler.samples,
        port_rates=dict(ports),
        shaped=net.options.links.shaped,
    )


def columns_for(collective: str) -> tuple[int, ...]:
    """A barrier counts every frame (host barriers are unicast messages); data collectives
    leave out the ARRIVE/RELEASE of the synchronising barriers between iterations."""
    return BARRIER_COLUMNS + DATA_COLUMNS if collective == "barrier" else DATA_COLUMNS
