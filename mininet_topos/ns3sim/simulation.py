"""Run the host agents' collectives on a simulated network and measure them.

A :class:`Simulation` holds one ns-3 network, one endpoint and one communicator member per
host, and the communicator's barrier tree in the routers. Collectives come from
:data:`host_agents.collectives.COLLECTIVES`: each descriptor lays out the buffers, runs the
algorithm against a :class:`~mininet_topos.ns3sim.context.SimContext` and says what each rank
must end with. :meth:`Simulation.run` starts one collective on every rank at the same simulated
instant (as if released by a barrier), or one rooted at every rank at once (mode
``all_roots``, [Ragasa]'s experiment: mininet_topos/ns3sim/operations.py), runs until all have
finished, checks every rank's result byte for byte and reports per-rank times and the bytes
every link carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from controller import routing, trees, wire
from controller.topology import Topology
from host_agents import collectives as collectives_module
from host_agents.algorithms import allgather as allgather_module
from host_agents.collectives import collective
from host_agents.directory import Directory
from mininet_topos.ns3sim.accounting import FRAME_OVERHEAD, frame_bytes
from mininet_topos.ns3sim.context import SimRank
from mininet_topos.ns3sim.loop import SimLoop
from mininet_topos.ns3sim.network import ACK_BYTES, LinkParams, SimNetwork
from mininet_topos.ns3sim.operations import rank_work
from mininet_topos.ns3sim.transport import Transport

COMM_ID = 1
# Above this many bytes of algorithm buffers the run is hollow (see Simulation.hollow).
EXACT_LIMIT = 2 << 30
# Simulated seconds no single collective may exceed (the communicator's op_timeout).
SIM_TIMEOUT = 600.0


def buffer_bytes(collective: str, size: int, ranks: int) -> int:
    """Bytes the algorithms' buffers take on all ranks together, roughly."""
    if collective == "allgather":
        return 2 * size * ranks * ranks
    if collective == "scatter":
        return 2 * size * ranks
    return size * ranks


@dataclass(slots=True)
class Outcome:
    """One collective on every rank."""

    collective: str
    algorithm: str
    size: int
    ranks: int
    times_us: list[float]  # per rank, simulated
    wrong: int
    checked: str  # "bytes" (every byte compared) or "sizes" (a hollow run)
    link_bytes: int  # netcoll frame bytes of data over every link direction (ACKs apart)
    global_link_bytes: int
    wire_bytes: int  # what ns-3's devices sent (PPP, the 44-byte frame header, ACKs included)
    packets: int  # data frames over every link direction
    drops: int
    messages: int
    wall_s: float
    cpu_s: float  # this process's CPU time: the simulator is one thread on one core
    per_link: dict[tuple[int, int], int] = field(default_factory=dict, repr=False)
    ack_packets: int = 0  # ACK frames over every link direction
    ack_bytes: int = 0  # their netcoll frame bytes (the engine's: header and SACK bitmap)
    mode: str = "single"  # or "all_roots": every rank rooted one (mininet_topos/ns3sim/operations)

    @property
    def avg_us(self) -> float:
        return statistics.fmean(self.times_us)

    @property
    def max_us(self) -> float:
        return max(self.times_us)


class Progress:
    """A line on stderr every ``every`` wall seconds while a long collective runs."""

    def __init__(self, label: str, every: float, done: Callable[[], int], total: int) -> None:
        self.label, self.every, self.done, self.total = label, every, done, total
        self.started = self.last = time.monotonic()

    def tick(self, sim_now: float, delivered: int) -> None:
        now = time.monotonic()
        if self.every <= 0 or now - self.last < self.every:
            return
        self.last = now
        print(
            f"    .. {self.label}: {now - self.started:5.0f} s wall, simulated "
            f"{sim_now * 1e6:10.1f} us, {delivered} messages delivered, "
            f"{self.done()}/{self.total} ranks done",
            file=sys.stderr,
            flush=True,
        )


class Simulation:
    def __init__(
        self,
        topo: Topology,
        params: LinkParams | None = None,
        *,
        members: tuple[int, ...] | None = None,
        seed: int = 1,
        progress_every: float = 30.0,
    ) -> None:
        self.topo = topo
        self.params = params or LinkParams()
        started = time.monotonic()
        self.net = SimNetwork.build(topo, self.params)
        sim = self.net.sim
        self.members = members or tuple(h.node_id for h in topo.hosts)
        self.loop = SimLoop(sim.Advance, sim.Now, sim.Idle, self._deliver, self._lost)
        self.transport = Transport(self.net, self.loop)
        self.transport.members = self.members
        self.loop.describe_waiters = self.transport.waiting
        directory = Directory.from_topology(topo)
        self.ranks = [
            SimRank(COMM_ID, self.members, rank, self.transport.endpoint(node), directory)
            for rank, node in enumerate(self.members)
        ]
        self.net.install_barrier(trees.barrier_tree(topo, self.members))
        self.rng = random.Random(seed)
        self.progress_every = progress_every
        self._progress: Progress | None = None
        self.build_s = time.monotonic() - started

    def _deliver(self) -> None:
        self.transport.deliver()
        if self._progress is not None:
            self._progress.tick(self.loop.now, int(self.net.sim.delivered))

    def _lost(self) -> str:
        return self.transport.lost()

    def close(self) -> None:
        self.loop.close()
        self.net.sim.Destroy()

    # -- one collective -----------------------------------------------------------------------

    def hollow(self, collective: str, size: int) -> bool:
        """Whether buffers are too big to hold for real: then payloads are not carried (ns-3
        still moves every byte's worth of packets) and results are checked by size only."""
        # only allgather's buffers grow with the square of the ranks
        return collective == "allgather" and (
            buffer_bytes(collective, size, len(self.members)) > EXACT_LIMIT
        )

    def run(
        self, collective: str, algorithm: str, size: int, root: int = 0, *, mode: str = "single"
    ) -> Outcome:
        """One operation from ``root`` on every rank (``mode="single"``), or one rooted at
        every rank, all started at once (``"all_roots"``: mininet_topos/ns3sim/operations.py);
        a rank's time ends when all its operations have returned."""
        coll = collective_of(collective)
        work = rank_work(mode, root, coll)
        ranks = len(self.members)
        name, _ = coll.choose(algorithm, size, ranks, True)
        chosen = coll.algorithms[name]
        hollow = self.hollow(collective, size)
        self.transport.hollow = hollow
        self.transport.traffic.clear()
        sim = self.net.sim
        sim.ResetCounters()
        delivered_before = int(sim.delivered)
        started_wall = time.monotonic()
        started_cpu = time.process_time()
        seed = self.rng.getrandbits(32)
        owned = _owner_bytes(seed)
        outputs: list[Any] = [None] * ranks
        finished: list[float] = [0.0] * ranks
        start = self.loop.now
        done_count = 0

        async def one(member: SimRank) -> None:
            nonlocal done_count
            label = f"{collective}({name})"
            outputs[member.rank] = await work.run(member, coll, chosen, label, owned, size, hollow)
            finished[member.rank] = self.loop.now
            await member.settle()
            done_count += 1

        tasks: list[asyncio.Task[None]] = []

        async def everyone() -> None:
            tasks.extend(self.loop.create_task(one(member)) for member in self.ranks)
            await asyncio.wait_for(asyncio.gather(*tasks), SIM_TIMEOUT)

        every = " from every root" if mode == "all_roots" else ""
        self._progress = Progress(
            f"{collective} {name} {size} B{every}", self.progress_every, lambda: done_count, ranks
        )
        try:
            with _hollow_buffers(hollow):
                self.loop.run_until_complete(everyone())
        except BaseException:
            self._abandon(tasks)
            raise
        finally:
            self._progress = None
        self._drain()
        wall = time.monotonic() - started_wall
        cpu = time.process_time() - started_cpu
        wrong = work.wrong(coll, owned, size, outputs, hollow)
        counters = self.net.link_counters()
        acks = sum(self.net.ack_counters().values())
        kinds = self._port_kinds()
        per_link = {
            link: payload + packets * FRAME_OVERHEAD
            for link, (packets, payload, _) in counters.items()
            if packets
        }
        return Outcome(
            collective=collective,
            algorithm=name,
            size=size,
            ranks=ranks,
            times_us=[(t - start) * 1e6 for t in finished],
            wrong=wrong,
            checked="sizes" if hollow else "bytes",
            link_bytes=sum(per_link.values()),
            global_link_bytes=sum(v for k, v in per_link.items() if kinds.get(k) == "global"),
            wire_bytes=sum(w for _, _, w in counters.values()),
            packets=sum(p for p, _, _ in counters.values()),
            drops=self.net.drops(),
            messages=int(sim.delivered) - delivered_before,
            wall_s=wall,
            cpu_s=cpu,
            per_link=per_link,
            ack_packets=acks,
            ack_bytes=acks * (ACK_BYTES + FRAME_OVERHEAD),
            mode=mode,
        )

    def _drain(self) -> None:
        """Run until the network is idle: every rank has finished, but the last multicast ACKs
        (which no rank waits for) may still be on their way; they belong to this run's links,
        and the next run starts on quiet ones."""
        sim = self.net.sim
        while sim.Advance(-1.0):
            self.transport.deliver()
        self.loop.now = float(sim.Now())

    def _abandon(self, tasks: list[asyncio.Task[None]]) -> None:
        """After a failed collective: cancel what still waits, so the next one starts clean."""
        for task in tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self.transport.reset()

    def _port_kinds(self) -> dict[tuple[int, int], str]:
        return {
            (s, p): info.kind
            for s in range(self.topo.num_switches)
            for p, info in self.topo.ports(s).items()
        }


def collective_of(name: str) -> Any:
    return collective(name)


def _owner_bytes(seed: int) -> Callable[[int, int], bytes]:
    """Each rank's data: ``n`` bytes drawn from (seed, rank), the same on every call, and drawn
    once (expectations ask for the same ranks' data once per rank)."""
    drawn: dict[tuple[int, int], bytes] = {}

    def owned(rank: int, n: int) -> bytes:
        data = drawn.get((rank, n))
        if data is None:
            data = drawn[(rank, n)] = random.Random(seed * 1_000_003 + rank).randbytes(n)
        return data

    return owned


class _HollowArena:
    """One anonymous in-memory file that every hollow buffer maps in full (``MAP_SHARED``): a
    buffer is contiguous and writable like a bytearray, so writing a block is one memcpy, yet
    all buffers share the file's few MiB of memory. (A stride-0 numpy array aliased one byte
    too, but a memoryview wrote into it a byte at a time: 10 us per KiB, most of a message's
    cost at Df(6,12,6).) One mapping per buffer: 10,512 at most for a Df(6,12,6) Bruck
    allgather (results and work buffers), below the kernel's default limit of 65,530."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.size = 0

    def buffer(self, size: int) -> mmap.mmap:
        if self.fd is None:
            self.fd = os.memfd_create("netcoll-hollow")
        if size > self.size:  # growing the file leaves existing mappings as they are
            os.ftruncate(self.fd, size)
            self.size = size
        return mmap.mmap(self.fd, size)


_arena = _HollowArena()


def hollow_buffer(size: int) -> Any:
    """``size`` writable bytes that all hollow buffers share: the algorithms index and copy
    them as a bytearray, and they cost nothing (5,256 ranks x 5 MiB of allgather buffers would
    be 28 GB)."""
    if size == 0:
        return bytearray()
    return _arena.buffer(size)


def _hollow_bytearray(source: Any = 0, *args: Any) -> Any:
    if isinstance(source, int) and source > 1 << 16:
        return hollow_buffer(source)
    return bytearray(source, *args)


@contextlib.contextmanager
def _hollow_buffers(hollow: bool) -> Iterator[None]:
    """In a hollow run, the buffers the allgather descriptor and Bruck allocate with
    ``bytearray(size * block)`` are hollow too: their code is unchanged, the module-level name
    ``bytearray`` is shadowed while the run lasts. A context method handing out buffers would
    make this unnecessary."""
    if not hollow:
        yield
        return
    namespaces = [vars(allgather_module), vars(collectives_module)]
    for namespace in namespaces:
        namespace["bytearray"] = _hollow_bytearray
    try:
        yield
    finally:
        for namespace in namespaces:
            del namespace["bytearray"]


def scatter_minimum(
    topo: Topology,
    members: tuple[int, ...],
    root: int,
    size: int,
    segment: int = wire.MAX_PAYLOAD,
) -> int:
    source = members[root]
    return sum(
        frame_bytes(size, segment) * routing.host_path_hops(topo, source, dst)
        for dst in members
        if dst != source
    )


def minimum_bytes(
    topo: Topology,
    collective: str,
    members: tuple[int, ...],
    root: int,
    size: int,
    segment: int = wire.MAX_PAYLOAD,
) -> int | None:
    """The physical minimum (each link on the way carries each segment once), as make bench
    computes it; for a full-machine allgather every root's tree spans every switch."""
    if collective == "bcast":
        tree = trees.innet_tree(topo, members, members[root])
        return frame_bytes(size, segment) * (1 + tree.switch_links() + len(members) - 1)
    if collective == "allgather":
        if len(members) == topo.num_hosts:
            per_root = frame_bytes(size, segment) * (topo.num_switches + len(members) - 1)
            return per_root * len(members)
        return sum(
            frame_bytes(size, segment)
            * (1 + trees.innet_tree(topo, members, r).switch_links() + len(members) - 1)
            for r in members
        )
    if collective == "scatter":
        return scatter_minimum(topo, members, root, size, segment)
    return None
