"""Reduce and allreduce: the lane arithmetic, and every algorithm on the in-process fabric
against a host computation, at every rank, for every operation."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable

import numpy as np
import pytest

from controller import wire
from controller.topology_build import dragonfly
from host_agents.collectives import Call, algorithm_names
from host_agents.comm import CollectiveError, Comm, CommOptions
from host_agents.engine import EngineConfig
from host_agents.reduction import (
    ReduceOp,
    fixed_point_error_bound,
    from_fixed,
    op_named,
    reduce_all,
    to_fixed,
    vector,
    wire_bytes,
)
from tests.fabric import Cluster, Faults

pytestmark = pytest.mark.unit

TOPO = dragonfly(2, 2, 2)
HOSTS = [h.node_id for h in TOPO.hosts]
CONFIG = EngineConfig(rto_initial=0.02, rto_min=0.005, barrier_rto=0.01, nack_delay=0.001)
OPTIONS = CommOptions(progress_timeout=30, first_data_timeout=60, op_timeout=120)
OPS = [op.name.lower() for op in ReduceOp]


def run(body: Callable[[asyncio.AbstractEventLoop], Awaitable[None]], timeout: float = 240) -> None:
    async def main() -> None:
        await asyncio.wait_for(body(asyncio.get_running_loop()), timeout)

    asyncio.run(main())


def lanes(*values: int) -> bytes:
    return wire_bytes(np.array(values, dtype=np.int64).astype(np.int32))


def test_lane_arithmetic_is_the_switches() -> None:
    big = 2**31 - 1
    assert vector(combine_all(ReduceOp.SUM, lanes(big, -1), lanes(1, -1))).tolist() == [
        -(2**31),
        -2,
    ]  # wraps like a 32-bit adder
    assert vector(combine_all(ReduceOp.MIN, lanes(-5, 3), lanes(2, -7))).tolist() == [-5, -7]
    assert vector(combine_all(ReduceOp.MAX, lanes(-5, 3), lanes(2, -7))).tolist() == [2, 3]
    assert vector(combine_all(ReduceOp.AND, lanes(0b1100), lanes(0b1010))).tolist() == [0b1000]
    assert vector(combine_all(ReduceOp.OR, lanes(0b1100), lanes(0b1010))).tolist() == [0b1110]
    assert vector(combine_all(ReduceOp.XOR, lanes(0b1100), lanes(0b1010))).tolist() == [0b0110]
    assert lanes(1) == b"\0\0\0\1"  # big-endian on the wire


def combine_all(op: ReduceOp, *parts: bytes) -> bytes:
    return reduce_all(list(parts), op)


def test_fixed_point_floats_stay_within_the_stated_bound() -> None:
    rng = np.random.default_rng(7)
    ranks, scale = 9, 2.0**16
    values = [rng.uniform(-1000, 1000, 64) for _ in range(ranks)]
    total = reduce_all([wire_bytes(to_fixed(v, scale)) for v in values], ReduceOp.SUM)
    got = from_fixed(vector(total), scale)
    assert np.max(np.abs(got - np.sum(values, axis=0))) <= fixed_point_error_bound(ranks, scale)
    with pytest.raises(ValueError, match="do not fit int32"):
        to_fixed(np.array([1e9]), scale)


def contributions(n: int, nbytes: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(nbytes) for _ in range(n)]


@pytest.mark.parametrize("algorithm", sorted(algorithm_names()["allreduce"]))
def test_allreduce_every_size_and_operation(algorithm: str, test_rng: random.Random) -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        for n in (1, 2, 3, 5, 8, 13):
            cluster = Cluster(
                TOPO, tuple(test_rng.sample(HOSTS, n)), loop=loop, config=CONFIG, options=OPTIONS
            )
            for nbytes, op in ((4, "sum"), (100, "min"), (4096, "max"), (40_000, "xor")):
                parts = contributions(n, nbytes, n * nbytes)
                results = await asyncio.gather(
                    *(
                        c.run("allreduce", Call(parts[c.rank], 0, nbytes, op), algorithm=algorithm)
                        for c in cluster.comms
                    )
                )
                expected = reduce_all(parts, op_named(op))
                for comm, got in zip(cluster.comms, results, strict=True):
                    assert got == expected, f"rank {comm.rank} of {n}: wrong {op} of {nbytes} B"

    run(body)


def test_reduce_every_root_and_operation(test_rng: random.Random) -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        n = 7
        cluster = Cluster(
            TOPO, tuple(test_rng.sample(HOSTS, n)), loop=loop, config=CONFIG, options=OPTIONS
        )
        for root in range(n):
            op = OPS[root % len(OPS)]
            parts = contributions(n, 1024, root)
            results = await asyncio.gather(
                *(c.run("reduce", Call(parts[c.rank], root, 1024, op)) for c in cluster.comms)
            )
            assert results[root] == reduce_all(parts, op_named(op))
            assert all(r is None for i, r in enumerate(results) if i != root)

    run(body)


@pytest.mark.parametrize("algorithm", sorted(algorithm_names()["allreduce"]))
def test_allreduce_at_the_real_mtu_under_loss(algorithm: str, test_seed: int) -> None:
    config = EngineConfig(
        segment_size=wire.MAX_PAYLOAD, rto_initial=0.02, rto_min=0.005, nack_delay=0.001
    )

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        faults = Faults(loss=0.03, duplicate=0.03, reorder=0.05, reorder_delay=0.003)
        cluster = Cluster(
            TOPO, tuple(HOSTS[:11]), loop=loop, config=config, options=OPTIONS, faults=faults,
            seed=test_seed,
        )  # fmt: skip
        parts = contributions(11, 64 * 1024, test_seed)
        results = await asyncio.gather(
            *(
                c.run("allreduce", Call(parts[c.rank], 0, 64 * 1024), algorithm=algorithm)
                for c in cluster.comms
            )
        )
        assert all(r == reduce_all(parts, ReduceOp.SUM) for r in results)
        assert cluster.fabric.lost > 0

    run(body)


def test_bad_reduction_calls_fail_at_once_naming_the_problem() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        comm = Cluster(TOPO, tuple(HOSTS[:2]), loop=loop).comms[0]
        with pytest.raises(CollectiveError, match="whole 32-bit lanes"):
            comm.start("allreduce", Call(b"abc", 0, 3))
        with pytest.raises(CollectiveError, match="unknown reduction 'avg'"):
            comm.start("allreduce", Call(b"abcd", 0, 4, "avg"))

    run(body)


def test_innet_reductions_and_barriers_interleave_past_the_barrier_window() -> None:
    """In-network reductions are numbered by the communicator's barrier epochs, so ten of them
    in a row must leave the next barriers inside the switches' window."""
    options = CommOptions(progress_timeout=10, first_data_timeout=10, op_timeout=60)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(TOPO, tuple(HOSTS[:9]), loop=loop, config=CONFIG, options=options)
        for round_ in range(3):
            for i in range(10):
                parts = contributions(9, 64, round_ * 100 + i)
                results = await asyncio.gather(
                    *(
                        c.run("allreduce", Call(parts[c.rank], 0, 64), algorithm="innet")
                        for c in cluster.comms
                    )
                )
                assert all(r == reduce_all(parts, ReduceOp.SUM) for r in results)
            for _ in range(2):
                await asyncio.gather(*(c.barrier(algorithm="innet") for c in cluster.comms))

    run(body)


def test_a_result_lost_between_two_innet_reductions_is_still_answered() -> None:
    """Rank 1 loses the RESULT of a one-chunk reduction while rank 0 already starts the next:
    the next one must not take the slot rank 1 is still asking about (chunk numbers go on
    from one instance to the next)."""
    members = tuple(HOSTS[:2])  # one switch, two ranks
    victim = TOPO.host_by_node(members[1])
    lost: list[int] = []

    def drop_first_result(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.Header.unpack_from(frame, wire.ETH_HEADER_LEN)
        if hdr.op == wire.Op.RESULT and link == (victim.switch, victim.port) and not lost:
            lost.append(hdr.epoch)
            return True
        return False

    options = CommOptions(progress_timeout=5, first_data_timeout=5, op_timeout=30)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            TOPO, members, loop=loop, config=CONFIG, options=options,
            faults=Faults(drop_if=drop_first_result),
        )  # fmt: skip

        def parts(i: int) -> list[bytes]:
            return contributions(2, 4, i)

        async def rank_runs(comm: Comm) -> list[bytes]:  # each rank at its own pace
            return [
                await comm.run("allreduce", Call(parts(i)[comm.rank], 0, 4), algorithm="innet")
                for i in range(4)
            ]

        per_rank = await asyncio.gather(*(rank_runs(c) for c in cluster.comms))
        for got in per_rank:
            assert got == [reduce_all(parts(i), ReduceOp.SUM) for i in range(4)]
        assert lost, "the test lost no RESULT"

    run(body, timeout=60)


def test_results_that_take_longer_than_the_first_timeout_bring_no_retransmission_storm() -> None:
    """Each chunk's RESULT takes several times ``barrier_rto`` to come back (10 ms per link),
    but results keep arriving: the timer restarts on every one and learns the round trip, so
    only the first windows are resent, and the next reduction starts from what was learnt.
    Per-chunk timers resent every one of the 40 chunks two or three times, and every duplicate
    that met a complete slot went up the tree again.

    The learnt timeout is capped at 4 x barrier_rto: with 10 ms of barrier_rto and 5 ms links
    the round trip came within 10 ms of that cap, and on a loaded machine the event loop's
    delays crossed it now and then (spurious resends, the test flaky; 2 failures in 8 runs
    beside a benchmark with the two doubled). Here barrier_rto is 40 ms and links 10 ms: the
    round trip is still longer than the first timeout, and 100 ms short of the cap. With the
    cap at 1 x barrier_rto the first reduction resends 36 chunks and this fails."""
    members = tuple(HOSTS[:9])
    nbytes = 40 * wire.AGG_LANES * 4  # 40 chunks
    in_flight = wire.AGG_WINDOW // 2
    config = dataclasses.replace(CONFIG, barrier_rto=4 * CONFIG.barrier_rto)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            TOPO, members, loop=loop, config=config, options=OPTIONS, faults=Faults(delay=0.01)
        )
        parts = contributions(len(members), nbytes, 5)
        resent: list[list[int]] = []
        for _ in range(2):
            results = await asyncio.gather(
                *(
                    c.run("allreduce", Call(parts[c.rank], 0, nbytes), algorithm="innet")
                    for c in cluster.comms
                )
            )
            assert all(r == reduce_all(parts, ReduceOp.SUM) for r in results)
            resent.append([c.engine.stats.reduce_retransmissions for c in cluster.comms])
        assert cluster.stats()["reduce_sent"] == 2 * 40 * len(members)
        first, both = resent
        assert max(first) <= 5 * in_flight, first
        assert max(b - f for b, f in zip(both, first, strict=True)) <= 2 * in_flight, both

    run(body, timeout=60)


def test_a_lost_contribution_is_resent_when_later_results_overtake_it() -> None:
    """One host's REDUCE of a middle chunk is lost: the next chunks' results arrive without
    it, and every rank resends it at once instead of waiting out a 1 s timeout."""
    members = tuple(HOSTS[:4])
    victim = TOPO.host_by_node(members[2])
    config = EngineConfig(barrier_rto=1.0, reduce_rto_max=2.0)
    lost: list[int] = []

    def drop_chunk_5(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.Header.unpack_from(frame, wire.ETH_HEADER_LEN)
        mine = hdr.op == wire.Op.REDUCE and hdr.src_node == victim.node_id
        if mine and hdr.seg_idx == 5 and not lost:
            lost.append(hdr.seg_idx)
            return True
        return False

    nbytes = 12 * wire.AGG_LANES * 4

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            TOPO, members, loop=loop, config=config, options=OPTIONS,
            faults=Faults(drop_if=drop_chunk_5),
        )  # fmt: skip
        parts = contributions(len(members), nbytes, 6)
        started = loop.time()
        results = await asyncio.gather(
            *(
                c.run("allreduce", Call(parts[c.rank], 0, nbytes), algorithm="innet")
                for c in cluster.comms
            )
        )
        elapsed = loop.time() - started
        assert all(r == reduce_all(parts, ReduceOp.SUM) for r in results)
        assert lost, "the test lost no REDUCE"
        assert elapsed < 0.5, f"{elapsed:.2f} s: the loss waited for the timeout"

    run(body, timeout=60)


def test_ranks_that_always_enter_early_learn_to_wait_for_the_last_one() -> None:
    """One rank starts every reduction 50 ms after the others (5 times ``barrier_rto``): the
    others' first chunks wait for it, which no resend shortens. They learn how long a first
    result takes and stop resending after the first instances (with ``barrier_rto`` as the
    first chunk's timeout they resent it twice in every instance)."""
    members = tuple(HOSTS[:9])
    instances = 8

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(TOPO, members, loop=loop, config=CONFIG, options=OPTIONS)

        async def rank_runs(comm: Comm) -> None:
            for i in range(instances):
                if comm.rank == len(members) - 1:
                    await asyncio.sleep(0.05)
                part = contributions(len(members), 4, i)[comm.rank]
                got = await comm.run("allreduce", Call(part, 0, 4), algorithm="innet")
                assert got == reduce_all(contributions(len(members), 4, i), ReduceOp.SUM)

        await asyncio.gather(*(rank_runs(c) for c in cluster.comms))
        resent = [c.engine.stats.reduce_retransmissions for c in cluster.comms]
        assert max(resent) <= instances // 2, resent

    run(body, timeout=60)
