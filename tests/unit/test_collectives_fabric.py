"""Every collective algorithm on the in-process fabric: reference-model switches, no BMv2.

Communicator sizes 1..17 (random members of a 20-host dragonfly, seeded), every root, and
0 B, 1 B, 1 KiB and 1 MiB per rank; then a smaller matrix under seeded loss, duplication and
reordering on every link. Data is a different pattern for every (size, root, instance), so a
result from the wrong instance or a misplaced segment is caught.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable

import pytest

from controller import wire
from controller.topology import Topology
from controller.topology_build import dragonfly
from host_agents.collectives import COLLECTIVES, Call, Case, UnknownAlgorithm, algorithm_names
from host_agents.comm import Comm, CommOptions
from host_agents.engine import EngineConfig
from host_agents.reduction import LANE_BYTES
from tests.fabric import Cluster, Faults

pytestmark = pytest.mark.unit

TOPO: Topology = dragonfly(2, 2, 2)  # 5 groups, 10 routers, 20 hosts
HOSTS = [h.node_id for h in TOPO.hosts]
SIZES = (0, 1, 1024, 1 << 20)
COMM_SIZES = tuple(range(1, 18))
# Segments above the MTU keep the 1 MiB cases quick in-process; test_segmentation_at_mtu
# runs the real segment size.
FAST = EngineConfig(
    segment_size=16384,
    rto_initial=0.02,
    rto_min=0.005,
    barrier_rto=0.01,
    nack_delay=0.001,
    peer_timeout=30.0,  # generous: a busy machine slows the in-process fabric, not its logic
)
OPTIONS = CommOptions(
    progress_timeout=30.0, first_data_timeout=60.0, op_timeout=120.0, check_interval=0.1
)


def pattern(*key: int, size: int) -> bytes:
    return random.Random(hash(key)).randbytes(size)


def run(body: Callable[[asyncio.AbstractEventLoop], Awaitable[None]], timeout: float = 240) -> None:
    async def main() -> None:
        await asyncio.wait_for(body(asyncio.get_running_loop()), timeout)

    asyncio.run(main())


def members_of(rng: random.Random, n: int) -> tuple[int, ...]:
    return tuple(rng.sample(HOSTS, n))


async def bcast_all(comms: list[Comm], root: int, data: bytes, algorithm: str) -> None:
    results = await asyncio.gather(
        *(
            c.bcast(data if c.rank == root else None, root, size=len(data), algorithm=algorithm)
            for c in comms
        )
    )
    for comm, got in zip(comms, results, strict=True):
        assert got == data, f"rank {comm.rank} got wrong data (root {root}, {len(data)} B)"


async def scatter_all(
    comms: list[Comm], root: int, full: bytes, block: int, algorithm: str
) -> None:
    results = await asyncio.gather(
        *(
            c.scatter(full if c.rank == root else None, root, block=block, algorithm=algorithm)
            for c in comms
        )
    )
    for comm, got in zip(comms, results, strict=True):
        expected = full[comm.rank * block : (comm.rank + 1) * block]
        assert got == expected, f"rank {comm.rank} got the wrong block (root {root})"


async def allgather_all(comms: list[Comm], blocks: list[bytes], algorithm: str) -> None:
    results = await asyncio.gather(
        *(c.allgather(blocks[c.rank], algorithm=algorithm) for c in comms)
    )
    whole = b"".join(blocks)
    for comm, got in zip(comms, results, strict=True):
        assert got == whole, f"rank {comm.rank} gathered wrong data"


async def run_checked(
    comms: list[Comm], kind: str, algorithm: str, nbytes: int, root: int, instance: int
) -> None:
    """Any collective of the registry, each rank's input and expected output from its
    descriptor (the checks the agents make); reductions take whole 32-bit lanes."""
    coll = COLLECTIVES[kind]
    if kind in ("allreduce", "reduce"):
        nbytes -= nbytes % LANE_BYTES

    def owned(rank: int, length: int) -> bytes:
        return pattern(len(comms), instance, rank, size=length)

    cases = [Case(owned, root, len(comms), c.rank, nbytes) for c in comms]
    results = await asyncio.gather(
        *(
            c.run(kind, Call(coll.contribution(case), root, nbytes), algorithm=algorithm)
            for c, case in zip(comms, cases, strict=True)
        )
    )
    for case, got in zip(cases, results, strict=True):
        expected = coll.expected(case)
        if expected is not None:
            assert got == expected, f"rank {case.rank}: wrong {kind} result (root {root})"


@pytest.mark.parametrize("nbytes", SIZES)
@pytest.mark.parametrize("algorithm", sorted(algorithm_names()["bcast"]))
def test_bcast_every_size_and_root(algorithm: str, nbytes: int, test_rng: random.Random) -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        for n in COMM_SIZES:
            cluster = Cluster(
                TOPO, members_of(test_rng, n), loop=loop, config=FAST, options=OPTIONS
            )
            for root in range(n):
                await bcast_all(cluster.comms, root, pattern(n, root, size=nbytes), algorithm)

    run(body)


@pytest.mark.parametrize("nbytes", SIZES)
@pytest.mark.parametrize("algorithm", sorted(algorithm_names()["scatter"]))
def test_scatter_every_size_and_root(algorithm: str, nbytes: int, test_rng: random.Random) -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        for n in COMM_SIZES:
            cluster = Cluster(
                TOPO, members_of(test_rng, n), loop=loop, config=FAST, options=OPTIONS
            )
            for root in range(n):
                full = pattern(n, root, size=nbytes * n)
                await scatter_all(cluster.comms, root, full, nbytes, algorithm)

    run(body)


@pytest.mark.parametrize("nbytes", SIZES)
@pytest.mark.parametrize("algorithm", sorted(algorithm_names()["allgather"]))
def test_allgather_every_size(algorithm: str, nbytes: int, test_rng: random.Random) -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        for n in COMM_SIZES:
            cluster = Cluster(
                TOPO, members_of(test_rng, n), loop=loop, config=FAST, options=OPTIONS
            )
            blocks = [pattern(n, r, size=nbytes) for r in range(n)]
            await allgather_all(cluster.comms, blocks, algorithm)

    run(body)


@pytest.mark.parametrize("algorithm", sorted(algorithm_names()["barrier"]))
def test_barrier_every_size(algorithm: str, test_rng: random.Random) -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        for n in COMM_SIZES:
            cluster = Cluster(
                TOPO, members_of(test_rng, n), loop=loop, config=FAST, options=OPTIONS
            )
            for _ in range(3):  # consecutive barriers must not mix
                await asyncio.gather(*(c.barrier(algorithm=algorithm) for c in cluster.comms))

    run(body)


async def _barrier_holds(comms: list[Comm], algorithm: str) -> None:
    """No rank leaves before the last one arrives."""
    late = comms[-1]
    early = [asyncio.ensure_future(c.barrier(algorithm=algorithm)) for c in comms[:-1]]
    await asyncio.sleep(0.05)
    assert not any(f.done() for f in early), "a rank left the barrier before the last arrived"
    await asyncio.gather(late.barrier(algorithm=algorithm), *early)


@pytest.mark.parametrize("algorithm", sorted(algorithm_names()["barrier"]))
def test_barrier_waits_for_the_last_rank(algorithm: str, test_rng: random.Random) -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        for n in (2, 5, 17):
            cluster = Cluster(
                TOPO, members_of(test_rng, n), loop=loop, config=FAST, options=OPTIONS
            )
            await _barrier_holds(cluster.comms, algorithm)

    run(body)


LOSSY = Faults(loss=0.03, duplicate=0.03, reorder=0.05, reorder_delay=0.003)


@pytest.mark.parametrize(
    ("kind", "algorithm"),
    [(kind, name) for kind, table in sorted(algorithm_names().items()) for name in sorted(table)],
)
def test_every_algorithm_under_loss_duplication_reordering(
    kind: str, algorithm: str, test_seed: int, test_rng: random.Random
) -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        for n in (2, 7, 17):
            members = members_of(test_rng, n)
            cluster = Cluster(
                TOPO,
                members,
                loop=loop,
                config=FAST,
                options=OPTIONS,
                faults=LOSSY,
                seed=test_seed + n,
            )
            for instance in range(4):
                root = test_rng.randrange(n)
                nbytes = (1, 1500, 40000, 0)[instance]
                if kind in ("scatter", "allgather"):
                    nbytes = min(nbytes, 3000)
                await run_checked(cluster.comms, kind, algorithm, nbytes, root, instance)
            assert cluster.fabric.lost > 0 or n == 2, "the fault injection did not drop anything"

    run(body)


AT_MTU = dataclasses.replace(FAST, segment_size=wire.MAX_PAYLOAD)


@pytest.mark.parametrize(
    ("kind", "algorithm"),
    [(kind, name) for kind, table in sorted(algorithm_names().items()) for name in sorted(table)],
)
def test_every_algorithm_at_the_real_mtu_under_loss(
    kind: str, algorithm: str, test_seed: int, test_rng: random.Random
) -> None:
    """Real segment counts (1460-byte segments: windows, SACK, NACK ranges and co-root merging
    all at work) under loss, duplication and reordering."""

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        n = 9
        cluster = Cluster(
            TOPO,
            members_of(test_rng, n),
            loop=loop,
            config=AT_MTU,
            options=OPTIONS,
            faults=LOSSY,
            seed=test_seed,
        )
        root = test_rng.randrange(n)
        # 137 segments of a broadcast or reduction; 14 of each scatter or allgather block
        nbytes = 20_000 if kind in ("scatter", "allgather") else 200_000
        for instance in range(3 if kind == "barrier" else 1):
            await run_checked(cluster.comms, kind, algorithm, nbytes, root, instance)
        assert cluster.fabric.lost > 0, "the fault injection did not drop anything"

    run(body)


def test_segmentation_at_mtu_16mib() -> None:
    """A 16 MiB broadcast at the real MTU: 11,500 segments reassembled at every rank."""
    nbytes = 16 << 20
    data = pattern(16, size=nbytes)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        members = tuple(HOSTS[:4])
        mtu = EngineConfig(rto_initial=0.05, rto_min=0.01)
        for algorithm in ("innet", "chain"):
            cluster = Cluster(TOPO, members, loop=loop, config=mtu, options=OPTIONS)
            await bcast_all(cluster.comms, 1, data, algorithm)

    run(body, timeout=300)


def test_innet_bcast_crosses_each_switch_link_once_per_segment() -> None:
    """The physical minimum: an in-network tree sends each segment once per tree link."""
    from controller.trees import innet_tree

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        members = tuple(HOSTS)
        # a root timeout long enough never to fire on a busy machine: a spurious repair (and
        # the co-root passing it on) is not what this counts
        patient = dataclasses.replace(FAST, rto_initial=2.0, rto_min=2.0)
        cluster = Cluster(TOPO, members, loop=loop, config=patient, options=OPTIONS)
        root = 3
        data = pattern(99, size=1000)  # one segment
        await bcast_all(cluster.comms, root, data, "innet")
        tree = innet_tree(TOPO, members, members[root])
        data_frames = sum(
            count
            for (switch, port), count in cluster.fabric.link_frames.items()
            if switch >= 0 and TOPO.ports(switch)[port].kind not in ("host", "mgmt")
        )
        acks_bound = 2 * len(TOPO.groups) * 3  # co-root ACKs cross at most 3 switch hops
        assert tree.switch_links() <= data_frames <= tree.switch_links() + acks_bound

    run(body)


def test_wrong_use_fails_fast_naming_rank_and_step() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            TOPO,
            tuple(HOSTS[:4]),
            loop=loop,
            config=FAST,
            options=CommOptions(
                progress_timeout=0.5, first_data_timeout=0.5, op_timeout=5, check_interval=0.1
            ),
        )
        comms = cluster.comms
        with pytest.raises(UnknownAlgorithm, match="unknown bcast algorithm 'nope'"):
            await comms[0].bcast(b"x", 0, algorithm="nope")
        # the root, rank 3, never arrives: the others fail within the progress timeout, each
        # naming itself, the step and the rank it waits for
        start = loop.time()
        results = await asyncio.gather(
            *(c.bcast(None, 3, size=3, algorithm="binomial") for c in comms[:3]),
            return_exceptions=True,
        )
        assert loop.time() - start < 5
        assert all(isinstance(r, Exception) for r in results), results
        for rank, error in enumerate(results):
            assert f"rank {rank} " in str(error) and "step" in str(error), error
        assert any("waiting for rank 3" in str(e) for e in results)
        # mismatched sizes: the receiver names the sender
        comms2 = Cluster(
            TOPO,
            tuple(HOSTS[4:6]),
            loop=loop,
            config=FAST,
            options=CommOptions(
                progress_timeout=0.5, first_data_timeout=0.5, op_timeout=5, check_interval=0.1
            ),
        ).comms
        results = await asyncio.gather(
            comms2[0].bcast(b"abcd", 0, algorithm="binomial"),
            comms2[1].bcast(None, 0, size=3, algorithm="binomial"),
            return_exceptions=True,
        )
        assert isinstance(results[1], Exception) and "bytes" in str(results[1])

    run(body, timeout=60)


def test_lost_tail_and_lost_coroot_report_still_complete() -> None:
    """The last segment is lost everywhere, and every remote co-root's report to the root is
    lost until the root retransmits: the co-roots must say again where their groups stand,
    or the root retransmits the wrong segments until it gives up."""
    from controller import wire

    members = tuple(HOSTS)
    root = members[0]
    coroots = {
        min(h.node_id for h in TOPO.hosts if h.group == g)
        for g in {h.group for h in TOPO.hosts}
        if g != TOPO.host_by_node(root).group
    }
    retransmitted = False

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        nonlocal retransmitted
        hdr = wire.parse_frame(frame).hdr
        if hdr.op == wire.Op.MCAST:
            if hdr.flags & wire.Flag.RETRANSMIT:
                retransmitted = True
                return False
            return bool(hdr.flags & wire.Flag.LAST)  # the tail's first copy, everywhere
        from_coroot = link[0] == -1 and link[1] in coroots
        return hdr.op == wire.Op.ACK and hdr.dst_node == root and from_coroot and not retransmitted

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        config = dataclasses.replace(FAST, peer_timeout=5.0)
        cluster = Cluster(
            TOPO,
            members,
            loop=loop,
            config=config,
            options=dataclasses.replace(OPTIONS, ack_merge="coroots"),  # co-roots' reports
            faults=Faults(drop_if=drop_if),
        )
        data = pattern(7, size=6 * config.segment_size - 100)  # more than one retransmit burst
        await bcast_all(cluster.comms, 0, data, "innet")
        assert retransmitted and cluster.fabric.lost > 0

    run(body, timeout=60)


def test_a_rank_lingering_after_its_last_barrier_repairs_a_lost_ack() -> None:
    """The ACK of the last message of a host barrier is lost after its receiver passed the
    barrier: the receiver must stay (linger) until the sender's retransmission is re-ACKed,
    or the sender fails once its peer has left."""
    from controller import wire

    members = tuple(HOSTS[:2])
    dropped = 0

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        nonlocal dropped
        hdr = wire.parse_frame(frame).hdr
        if dropped == 0 and hdr.op == wire.Op.ACK and hdr.src_node == members[1]:
            dropped += 1
            return True
        return False

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        config = dataclasses.replace(FAST, peer_timeout=3.0)
        cluster = Cluster(
            TOPO, members, loop=loop, config=config, options=OPTIONS, faults=Faults(drop_if=drop_if)
        )
        first, second = cluster.comms

        async def second_finishes_and_leaves() -> None:
            await second.barrier(algorithm="dissemination")
            await second.engine.linger(quiet=config.rto_max * 1.25, limit=config.peer_timeout)
            second.engine.port.close()  # the agent process exits

        await asyncio.gather(first.barrier(algorithm="dissemination"), second_finishes_and_leaves())
        assert dropped == 1

    run(body, timeout=60)


def test_a_rank_that_waited_long_for_a_barrier_recovers_a_lost_release_quickly() -> None:
    """One rank enters the switch barrier 1 s before the other, and its RELEASE is lost. Its
    ARRIVE retransmissions back off while it waits, but never beyond ``barrier_rto_max``
    (here 0.2 s), so it learns of the release within that (with the default 1 s cap it
    learned 0.5 s late, and the lost RELEASE of one rank holds a whole collective)."""
    from controller import wire

    config = EngineConfig(barrier_rto_max=0.2)
    early_node, late_node = HOSTS[0], HOSTS[-1]
    early_link = (TOPO.host_by_node(early_node).switch, TOPO.host_by_node(early_node).port)
    dropped = 0

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        nonlocal dropped
        if dropped or link != early_link or wire.parse_frame(frame).hdr.op != wire.Op.RELEASE:
            return False
        dropped += 1
        return True

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            TOPO,
            (early_node, late_node),
            loop=loop,
            config=config,
            options=OPTIONS,
            faults=Faults(drop_if=drop_if),
        )
        early, late = cluster.comms
        left: dict[str, float] = {}

        async def enter(comm: Comm, name: str, after: float) -> None:
            await asyncio.sleep(after)
            await comm.barrier(algorithm="innet")
            left[name] = loop.time()

        await asyncio.gather(enter(early, "early", 0.0), enter(late, "late", 1.0))
        assert dropped == 1
        late_by = left["early"] - left["late"]
        assert late_by <= 0.3, f"the early rank learned of the release {late_by:.2f} s late"

    run(body, timeout=30)
