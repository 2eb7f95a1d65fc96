"""Send stamps echoed in switch-merged ACKs (host_agents/transport/stamps.py): a root learns its
round trip from an ACK whichever copy of a segment prompted it, where Karn's rule alone takes
no sample from a retransmitted segment."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from controller import wire
from controller.topology_build import dragonfly
from host_agents.comm import CommOptions
from host_agents.engine import EngineConfig
from host_agents.transport.keys import McastKey
from host_agents.transport.merged_acks import SwitchAcks
from host_agents.transport.messages import Incoming
from host_agents.transport.stamps import (
    NO_STAMP,
    STAMP_SPAN,
    STAMP_UNIT,
    echo_of,
    echoed_round_trip,
    send_stamp,
)
from tests.fabric import Cluster, Faults
from tests.unit.test_switch_merged_acks import HOSTS, TIMEOUTS, Recorder, run

pytestmark = pytest.mark.unit


def test_a_stamp_is_never_the_no_stamp_value_and_wraps_in_16_bits() -> None:
    assert send_stamp(0.0) != NO_STAMP
    assert send_stamp(STAMP_SPAN) != NO_STAMP  # the tick that wraps to 0
    assert all(0 < send_stamp(t * 0.37) <= 0xFFFF for t in range(1000))


def test_the_round_trip_comes_from_the_echoed_stamp_across_a_wrap() -> None:
    sent = STAMP_SPAN - 0.01  # 10 ms before the stamps wrap
    now = sent + 0.025
    trip = echoed_round_trip(now, send_stamp(sent), since=sent - 1.0)
    assert trip == pytest.approx(0.025, abs=2 * STAMP_UNIT)


def test_an_echo_that_cannot_be_the_multicasts_own_gives_no_round_trip() -> None:
    now = 100.0
    assert echoed_round_trip(now, NO_STAMP, since=99.0) is None
    # stamped before the multicast began: a forged or stale echo, not a sample
    assert echoed_round_trip(now, send_stamp(now - 0.5), since=now - 0.1) is None
    # a multicast older than the stamps' span: its stamps may have wrapped
    assert echoed_round_trip(now, send_stamp(now - 0.5), since=now - STAMP_SPAN) is None
    assert echoed_round_trip(now, send_stamp(now - 0.5), since=now - 0.6) == pytest.approx(
        0.5, abs=2 * STAMP_UNIT
    )


def test_a_receiver_echoes_the_roots_stamp_and_never_a_coroots() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        endpoint = Recorder(loop)
        acks = SwitchAcks(endpoint)  # type: ignore[arg-type]
        key = McastKey(HOSTS[0], 1, 5, wire.Tree.INNET)
        msg = Incoming(loop, key, 40 * 1000, 40)
        from_root = wire.Header(
            op=wire.Op.MCAST, comm_id=1, epoch=5, root_node=HOSTS[0], src_node=HOSTS[0],
            seg_idx=15, seg_count=40, stamp=1234,
        )  # fmt: skip
        msg.contiguous = 16
        acks.on_segment(msg, from_root, new=True)
        # a co-root's repair carries a stamp of its own clock, if any: not the root's to time
        from_coroot = from_root.with_(src_node=HOSTS[5], seg_idx=31, stamp=777)
        msg.contiguous = 32
        acks.on_segment(msg, from_coroot, new=True)
        assert [(h.seq, h.stamp) for h in endpoint.sent] == [(16, 1234), (32, NO_STAMP)]
        assert echo_of(from_root) == 1234 and echo_of(from_coroot) == NO_STAMP

    run(body, timeout=10)


def resent_per_broadcast(config: EngineConfig) -> list[int]:
    """Six 1-byte switch-merged broadcasts from rank 0 on Df(2,2,1) (12 hosts: a light load on
    a busy machine), every link taking 3 ms, so a round trip through the tree takes about
    25 ms: the segments the root resent in each."""
    topo = dragonfly(2, 2, 1)
    hosts = tuple(h.node_id for h in topo.hosts)
    options = CommOptions(ack_merge="switch", **TIMEOUTS)  # type: ignore[arg-type]
    resent: list[int] = []

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            topo, hosts, loop=loop, config=config, options=options, faults=Faults(delay=0.003)
        )
        root = cluster.comms[0]
        for i in range(6):
            before = root.engine.stats.mcast_retransmissions
            data = bytes([i])
            got = await asyncio.gather(
                *(c.bcast(data if c.rank == 0 else None, 0, size=1, algorithm="innet")
                  for c in cluster.comms)
            )  # fmt: skip
            assert all(g == data for g in got)
            await asyncio.gather(*(c.settle() for c in cluster.comms))
            resent.append(root.engine.stats.mcast_retransmissions - before)

    run(body, timeout=60)
    return resent


QUIET = dataclasses.replace(EngineConfig(), tail_delay=1.0, coroot_probe_delay=1.0)


def test_a_switch_merged_root_learns_a_round_trip_longer_than_its_first_timeout() -> None:
    """The first RTO (4 ms) is below the round trip: the root resends every broadcast's only
    segment before its ACK comes. Karn's rule alone never samples such a segment, so every
    broadcast timed out again; the echo of the copy that prompted the merged ACK gives the
    sample, and the broadcasts after the first go (all but a slow moment) without a timeout."""
    # rto_min (100 ms) only binds once a sample came: then the RTO has room for a slow moment
    resent = resent_per_broadcast(dataclasses.replace(QUIET, rto_initial=0.004, rto_min=0.1))
    assert resent[0] >= 1, "the first RTO should be shorter than the round trip"
    # without the echo every broadcast resent (3 each); one slow moment of a busy test run
    # (a collection pause, other jobs) may still outlast a learnt RTO
    assert sum(resent[1:]) <= 2, f"retransmissions per broadcast: {resent}"


def test_a_switch_merged_roots_timeout_is_not_capped_below_its_measured_round_trip() -> None:
    """rto_max (10 ms here) is below the round trip (about 25 ms; with every rank rooting at
    once on Df(2,4,2) it is seconds against rto_max's 2 s): capped by it, the root resent
    every broadcast's segment. Its samples come from echoes, never ambiguous, so its cap is
    merged_rto_max instead."""
    config = dataclasses.replace(QUIET, rto_initial=0.004, rto_min=0.1, rto_max=0.01)
    resent = resent_per_broadcast(dataclasses.replace(config, merged_rto_max=1.0))
    assert sum(resent[1:]) <= 2, f"retransmissions per broadcast: {resent}"
    assert all(resent_per_broadcast(dataclasses.replace(config, merged_rto_max=0.01)))
