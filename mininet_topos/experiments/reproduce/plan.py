"""``make reproduce``: each paper's experiment (README.md, Papers) as cells, per profile.

A cell is one launch of agents on the network (one workload, one or more tests): the unit that
is measured, saved and skipped on ``--resume``. Cells whose link bytes matter (every rank
broadcasting, scatter and allgather) hold one algorithm and one size, so the switches' counters
read around the launch belong to it alone; the others pack several tests into one launch, as
agent start-up is the largest fixed cost of a cell (tens of seconds for 72 agents on 2 cores).
No network here: planning is unit-tested.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller import wire
from host_agents.workload import CollectiveTest

PROFILES = ("quick", "full")
# the whole run's budget: cells are not started once it is spent (--resume continues)
BUDGET_S = {"quick": 20 * 60.0, "full": 2 * 3600.0}


@dataclass(frozen=True)
class Claim:
    """What a paper reports, in its words and as the number we compare with."""

    paper: str  # the README's key, e.g. "[Ragasa]"
    title: str
    text: str
    conditions: str


CLAIMS = {
    "ragasa": Claim(
        "[Ragasa]",
        "every rank broadcasting at once",
        "When all nodes broadcast with middle-size messages (16 KB), Ragasa is 2.99x faster "
        "than binomial; for large messages the two perform alike.",
        "Df(2,4,2), 72 nodes, each node the root of one broadcast, all at the same time; "
        "router-offloaded replication.",
    ),
    "ib-mcast": Claim(
        "[IB-mcast]",
        "multicast broadcast latency and throughput",
        "Hardware-multicast broadcast with a reliability substrate lowers MPI_Bcast latency "
        "by up to 58% and raises broadcast throughput by up to 112% against point-to-point.",
        "8-node InfiniBand cluster, one root; small-message latency, large-message throughput.",
    ),
    "tofu2": Claim(
        "[Tofu2]",
        "persistent broadcast: init once, cheap starts, overlap",
        "MPI_Bcast_init costs 60-251 us; MPI_Start then costs 2-8 us, proportional to the "
        "segment count; the offloaded persistent broadcast beats the nonblocking one, and the "
        "time between start and wait can be spent computing.",
        "Fujitsu FX100, Tofu2, 12 processes, Trinaryx3 pipelined broadcast offloaded to the NIC.",
    ),
    "nic-barrier": Claim(
        "[NIC-barrier]",
        "barrier against communicator size",
        "The NIC-based barrier is 2.48x-3.38x faster than host-based barriers; its time "
        "follows T = T_init + (ceil(log2 N) - 1) T_trig + T_fin (Myrinet: 3.6 + 3.5 per "
        "step + 3.84 us; Quadrics: 1.9 + 2.12 per step + 0.4 us).",
        "Myrinet and Quadrics clusters of 8 and 16 nodes; dissemination, pairwise exchange, "
        "gather-broadcast.",
    ),
    "df-scatter": Claim(
        "[DF-scatter]",
        "topology-aware scatter and allgather",
        "Scatter of 1 KiB per terminal: LIN is twice as fast as TREE, GLF and LLF. "
        "Allgather: TAR (topology-aware ring) wins by keeping data off global links; BRUCK "
        "stays better for small transfers.",
        "CODES simulation of Df(6,12,6), 5,256 terminals, global links 4.7 GiB/s.",
    ),
}
PAPER_VALUES = {
    "ragasa": 2.99,  # Ragasa over binomial, all ranks broadcasting 16 KB
    "ib-mcast_latency": 0.58,  # latency reduction
    "ib-mcast_throughput": 1.12,  # throughput increase
    "tofu2_start_over_init": 8 / 60,  # the largest start against the smallest init
    "nic-barrier_low": 2.48,
    "nic-barrier_high": 3.38,
    "df-scatter": 2.0,  # LIN over the other scatters
}

# the order they run in: when the budget cuts a size short, the last ones miss
BCAST_ALL_ROOTS = ("innet", "binomial", "ragasa", "scatter_allgather")
BARRIER = ("innet", "dissemination", "pairwise", "gather_bcast")
SCATTER = ("tree", "lin", "glf", "llf")
ALLGATHER = ("ring", "bruck", "tar", "innet")


@dataclass(frozen=True)
class CellSpec:
    experiment: str  # "ragasa" .. "df-scatter"
    label: str  # unique within the experiment
    tests: tuple[CollectiveTest, ...]
    members: int = 0  # the communicator: the first N hosts; 0 for every host
    metered: bool = False  # one algorithm, one size: link bytes per operation are meaningful
    fresh_trees: bool = False  # a communicator without trees (persistent init installs them)

    @property
    def key(self) -> str:
        return f"{self.experiment}:{self.label}"

    @property
    def operations(self) -> int:
        """Timed and warm-up operations per size of the (first) test: link bytes divide by it."""
        test = self.tests[0]
        return test.iterations + test.warmup


def segments(nbytes: int, segment: int = wire.MAX_PAYLOAD) -> int:
    """How many frames a message of ``nbytes`` travels in, ``segment`` payload bytes each
    (the cost model counts standard 1500-byte frames, which it was calibrated with)."""
    return max(1, -(-nbytes // segment))


def member_counts(hosts: int, full: bool) -> tuple[int, ...]:
    """Communicator sizes for the barrier, always 2 and every host: in between, the full
    profile takes every power of two and the midpoints between them (2, 3, 4, 6, 8, 12, ...),
    the quick one every other power of two (2, 8, 32, ...)."""
    counts = {2, hosts}
    n = 2
    while n < hosts:
        if full:
            counts.add(n)
            if n + n // 2 < hosts:
                counts.add(n + n // 2)
        n *= 2 if full else 4
        if not full and n < hosts:
            counts.add(n)
    return tuple(sorted(c for c in counts if 2 <= c <= hosts))


def plan(profile: str, hosts: int) -> list[CellSpec]:
    """Every cell of a profile on a network of ``hosts`` hosts, in run order."""
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: expected one of {', '.join(PROFILES)}")
    full = profile == "full"
    # the cheap experiments first, every rank broadcasting last: when the budget runs out,
    # what is missing is the largest sizes of one experiment, not whole experiments
    return [
        *_barrier(hosts, full),
        *_scatter_allgather(full),
        *_latency_throughput(full),
        *_persistent(full),
        *_all_roots(hosts, full),
    ]


# the longest an all-roots cell may take by the cost model: larger sizes are left out on large
# networks (reported as such), so each profile keeps to its budget
ALL_ROOTS_CELL_CAP_S = {"full": 12 * 60.0, "quick": 5 * 60.0}
# van de Geijn's messages grow with ranks^3 when every rank roots one: its sizes are left out
# on their own (the others keep theirs side by side), reported like the rest
SLOWEST_ALL_ROOTS = "scatter_allgather"


def _all_roots_uncapped(full: bool) -> list[CellSpec]:
    # (size, iterations, warm-up): every rank roots one broadcast, so an operation moves
    # ranks^2 times the size; large sizes get fewer. The quick profile's 16 KiB cells skip
    # the warm-up: the 1 B cells before them warmed every path.
    sizes = (
        (
            (1, 5, 1),
            (1024, 5, 1),
            (16384, 3, 1),
            (65536, 1, 0),
            (262144, 1, 0),
            (1048576, 1, 0),
        )
        if full
        else ((1, 2, 1), (16384, 2, 0))
    )
    return [
        CellSpec(
            "ragasa",
            f"{algorithm}/{size}",
            (
                CollectiveTest(
                    "bcast", algorithm, (size,), it, warm, root=0, mode="all_roots", aligned=True
                ),
            ),
            metered=True,
        )
        for size, it, warm in sizes
        for algorithm in BCAST_ALL_ROOTS
    ]


def _all_roots(hosts: int, full: bool) -> list[CellSpec]:
    cells = _all_roots_uncapped(full)
    cap = ALL_ROOTS_CELL_CAP_S["full" if full else "quick"]

    def too_long(cell: CellSpec) -> bool:
        return estimate_seconds(cell, hosts) > cap

    # a size is kept for every other algorithm or for none, so the sizes compare side by side
    dropped_sizes = {
        c.tests[0].sizes[0]
        for c in cells
        if c.tests[0].algorithm != SLOWEST_ALL_ROOTS and too_long(c)
    }
    return [
        c
        for c in cells
        if c.tests[0].sizes[0] not in dropped_sizes
        and not (c.tests[0].algorithm == SLOWEST_ALL_ROOTS and too_long(c))
    ]


def left_out_cells(profile: str, hosts: int) -> list[CellSpec]:
    """Cells of every rank broadcasting that the profile leaves out on this many hosts (run
    only when named in --only)."""
    full = profile == "full"
    kept = {c.key for c in _all_roots(hosts, full)}
    return [c for c in _all_roots_uncapped(full) if c.key not in kept]


def left_out(profile: str, hosts: int) -> list[str]:
    return [c.key for c in left_out_cells(profile, hosts)]


def _latency_throughput(full: bool) -> list[CellSpec]:
    sizes = (1, 16, 256, 1024, 4096, 16384, 65536, 262144, 1048576) if full else (1, 16384, 262144)
    iterations = 10 if full else 5
    return [
        CellSpec(
            "ib-mcast",
            algorithm,
            (CollectiveTest("bcast", algorithm, sizes, iterations, 1, root=0, aligned=True),),
        )
        for algorithm in ("innet", "binomial")
    ]


def _persistent(full: bool) -> list[CellSpec]:
    sizes = (1, 4096, 16384, 65536, 262144) if full else (1, 16384, 65536)
    fractions = (0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0) if full else (0.25, 0.5, 1.0, 2.0)
    iterations = 10 if full else 4

    def test(persistent: bool) -> CollectiveTest:
        return CollectiveTest(
            "bcast",
            "innet",
            sizes,
            iterations,
            1,
            root=0,
            persistent=persistent,
            mode="overlap",
            compute=fractions,
            aligned=True,
        )

    # persistent first: its init is what installs the root's trees
    return [CellSpec("tofu2", "innet", (test(True), test(False)), fresh_trees=True)]


def _barrier(hosts: int, full: bool) -> list[CellSpec]:
    iterations = 50 if full else 20
    return [
        CellSpec(
            "nic-barrier",
            f"n{n}",
            tuple(CollectiveTest("barrier", a, (0,), iterations, 2, sync=False) for a in BARRIER),
            members=n,
        )
        for n in member_counts(hosts, full)
    ]


def _scatter_allgather(full: bool) -> list[CellSpec]:
    sizes = (1024, 4096, 16384) if full else (1024,)
    iterations = 5 if full else 3
    cells = []
    for size in sizes:
        for collective, algorithms in (("scatter", SCATTER), ("allgather", ALLGATHER)):
            for algorithm in algorithms:
                test = CollectiveTest(
                    collective, algorithm, (size,), iterations, 1, root=0, aligned=True
                )
                cells.append(
                    CellSpec(
                        "df-scatter", f"{collective}/{algorithm}/{size}", (test,), metered=True
                    )
                )
    return cells


# -- how long a cell should take -------------------------------------------------------------
# A cost model for sizing the profiles, calibrated on the speed build of BMv2 on the 2-core
# machine: df:2,2,1 runs of this harness (2026-11-23, load average about 14; the model gives
# their times within about a third, slower) and the Df(2,4,2) figures of README's Measured
# section. Scaled by ranks and segments; agents' start-up is their CPU over the two cores.

AGENT_START_S = 0.15  # per agent: ~0.3 CPU-s of interpreter start-up on 2 cores, plus rendezvous
PER_UNIT_S = {
    # every rank a root: per rank^2 x segment (in-network is timeout-bound here today)
    ("all_roots", "innet"): 1.8e-3,
    ("all_roots", "ragasa"): 2.2e-3,
    ("all_roots", "host"): 0.6e-3,
    # van de Geijn from every root at once: per message, ranks x ranks x non-empty chunks
    # (min(size, ranks)); 16 KiB on Df(2,4,2) was 275 s per operation, 373,000 messages of
    # 228 B, both cores busy (make reproduce, 2026-11-24)
    ("all_roots", "scatter_allgather"): 0.74e-3,
    ("bcast", "any"): 0.2e-3,  # one root: per rank x segment
    ("scatter", "any"): 1.5e-3,  # per rank x segment of one block
    ("allgather", "any"): 0.35e-3,  # per rank^2 x segment of one block
    ("barrier", "innet"): 1e-3,  # per rank
    ("barrier", "host"): 4e-3,
}
OP_FLOOR_S = 0.01  # the least an operation takes (a wake-up and a round trip)


def operation_seconds(test: CollectiveTest, size: int, ranks: int) -> float:
    """The model's time of one operation of ``test`` at ``size`` on ``ranks`` ranks."""
    segs = segments(size)
    host = "innet" if test.algorithm == "innet" else "host"
    if test.mode == "all_roots" and test.algorithm == "scatter_allgather":
        messages = ranks * ranks * min(size, ranks)
        return OP_FLOOR_S + PER_UNIT_S[("all_roots", "scatter_allgather")] * messages
    if test.mode == "all_roots":
        kind = test.algorithm if test.algorithm in ("innet", "ragasa") else "host"
        return OP_FLOOR_S + PER_UNIT_S[("all_roots", kind)] * ranks * ranks * segs
    if test.collective == "barrier":
        return OP_FLOOR_S + PER_UNIT_S[("barrier", host)] * ranks
    if test.collective == "allgather":
        return OP_FLOOR_S + PER_UNIT_S[("allgather", "any")] * ranks * ranks * segs
    if test.collective == "scatter":
        return OP_FLOOR_S + PER_UNIT_S[("scatter", "any")] * ranks * segs
    return OP_FLOOR_S + PER_UNIT_S[("bcast", "any")] * ranks * segs


def estimate_seconds(spec: CellSpec, hosts: int) -> float:
    """The model's time of one cell: its agents' start-up and every operation it runs,
    with the synchronising barrier before each (and the computation of an overlap sweep)."""
    ranks = spec.members or hosts
    total = 1.0 + AGENT_START_S * ranks
    sync = OP_FLOOR_S + PER_UNIT_S[("barrier", "innet")] * ranks
    for test in spec.tests:
        for size in test.sizes:
            one = operation_seconds(test, size, ranks) + (sync if test.sync else 0.0)
            ops = test.iterations + test.warmup
            # an overlap sweep: one pass per fraction, each op lasting about 1 + fraction of it
            ops_time = ops * one + sum(test.iterations * one * (1 + f) for f in test.compute)
            total += ops_time
    return total
