"""A member forging switch-merged ACKs (issue 32, High 4), on the in-process fabric.

The switches send up the lowest cum a cell's children claimed (``p4src/common/ackmerge.p4``
ack_cum_merge, mirrored by the reference model), and the root checks a merged ACK's cum against
its checkpoint, its own seg_count and what it sent (``host_agents/transport/merged_claims.py``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from controller import wire
from controller.desired_state import Communicator, desired_state
from controller.switch_model import SwitchModel
from controller.topology import Topology
from controller.topology_build import dragonfly
from controller.wire import Flag, Op
from host_agents.comm import CommOptions
from host_agents.engine import EngineConfig
from host_agents.transport.merged_acks import checkpoint_cum
from host_agents.transport.merged_claims import CLAIM_REFUSED, SentStamps, claim_refusal
from host_agents.transport.stamps import NO_STAMP
from tests.fabric import Cluster, Faults

pytestmark = [pytest.mark.unit, pytest.mark.security]

TOPO: Topology = dragonfly(2, 2, 1)
HOSTS = [h.node_id for h in TOPO.hosts]
MEMBERS = (HOSTS[0], HOSTS[3], HOSTS[5], HOSTS[8], HOSTS[10])
ROOT, HURT, FORGER = 0, 2, 4  # ranks
SEGMENT = 256
SEGMENTS = 100
HELD = 32  # segments the hurt receiver gets
CONFIG = EngineConfig(
    rto_initial=0.2, rto_min=0.05, peer_timeout=30.0, segment_size=SEGMENT, ack_every=16
)
OPTIONS = CommOptions(
    ack_merge="switch", progress_timeout=30.0, first_data_timeout=30.0, op_timeout=60.0
)


def run(body: Callable[[asyncio.AbstractEventLoop], Awaitable[None]], timeout: float = 60) -> None:
    async def main() -> None:
        await asyncio.wait_for(body(asyncio.get_running_loop()), timeout)

    asyncio.run(main())


def test_a_forged_final_checkpoint_does_not_make_the_root_report_delivery() -> None:
    """The forger withholds its checkpoint 1 until every honest receiver sent theirs, then
    completes the cell claiming cum = seg_count. Before the fix the root's bcast returned
    success while a receiver held 32 of 100 segments."""

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        hurt = TOPO.host_by_node(MEMBERS[HURT])
        to_hurt = (hurt.switch, hurt.port)

        def drop_if(link: tuple[int, int], frame: bytes) -> bool:
            if link != to_hurt:
                return False
            hdr = wire.parse_frame(frame, check_crc=False).hdr
            return hdr.op in (Op.MCAST, Op.UNICAST) and hdr.seg_idx >= HELD

        cluster = Cluster(
            TOPO, MEMBERS, loop=loop, config=CONFIG, options=OPTIONS, faults=Faults(drop_if=drop_if)
        )
        forger = cluster.comms[FORGER].engine
        sent: list[wire.Header] = []

        def forge(frame: bytes) -> None:
            hdr = wire.parse_frame(frame, check_crc=False).hdr
            if hdr.op != Op.MCAST or sent:
                return
            if hdr.seg_idx == HELD - 1:  # every honest receiver crossed checkpoint 1 by now
                ack = hdr.with_(
                    op=Op.ACK,
                    src_node=forger.node,
                    dst_node=hdr.root_node,
                    seq=hdr.seg_count,  # the lie: everything
                    seg_idx=1,
                    flags=Flag.MERGE,
                    payload_len=0,
                )
                sent.append(ack)
                mac = forger.directory.mac(hdr.root_node)
                loop.call_later(
                    0.05, lambda: forger.port.send(wire.build_frame(ack, b"", dst_mac=mac))
                )

        forger.port.on_frame = forge  # type: ignore[attr-defined]
        data = random.Random(4).randbytes(SEGMENT * SEGMENTS)
        comms = cluster.comms
        tasks = [
            asyncio.ensure_future(
                c.bcast(data if c.rank == ROOT else None, ROOT, size=len(data), algorithm="innet")
            )
            for c in comms
            if c.rank != FORGER
        ]
        root_task = tasks[ROOT]
        try:
            await asyncio.wait({root_task}, timeout=1.5)
            assert sent, "the forger never sent its ACK"
            assert not tasks[HURT].done()
            assert not root_task.done(), (
                f"the root reported delivery while a receiver holds {HELD} of {SEGMENTS} segments"
            )
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    run(body)


def test_the_switch_sends_up_the_cells_lowest_cum_not_the_completing_childs() -> None:
    """The reference model (and the P4 it mirrors) on one cell: two children, the second
    claiming more than the first; the ACK that goes up carries the first's cum."""
    comm = Communicator(1, (HOSTS[0], HOSTS[2], HOSTS[3]))  # the last two share a switch
    states = desired_state(TOPO, [comm])
    switch = TOPO.host_by_node(HOSTS[2]).switch
    model = SwitchModel(states[switch])
    entries = [
        (key, entry)
        for key, entry in states[switch].ack_merges.items()
        if key.root_node == HOSTS[0]
    ]
    assert entries, "no ack_merge entry for the root's tree"
    key, entry = entries[0]
    children = [
        h for h in TOPO.hosts if h.switch == switch and entry.child_mask & model.port_bit(h.port)
    ]
    assert len(children) == 2, children

    def merged(child: int, cum: int) -> bytes:
        hdr = wire.Header(
            op=Op.ACK,
            comm_id=1,
            epoch=1,
            tree=key.tree,
            flags=Flag.MERGE,
            src_node=children[child].node_id,
            dst_node=HOSTS[0],
            root_node=HOSTS[0],
            seq=cum,
            seg_idx=1,
            seg_count=SEGMENTS,
        )
        return wire.build_frame(hdr, b"", dst_mac=b"\xff" * 6)

    first = model.process(merged(0, 16), children[0].port)
    assert not first.outputs
    second = model.process(merged(1, SEGMENTS), children[1].port)
    assert len(second.outputs) == 1
    up = wire.parse_frame(second.outputs[0][1], check_crc=False).hdr
    assert up.seq == 16, f"the switch passed the completing child's claim {up.seq} up"


def test_the_root_checks_a_merged_claim_against_checkpoint_seg_count_and_what_it_sent() -> None:
    every = 16
    ok = checkpoint_cum(2, SEGMENTS, every)
    assert claim_refusal(2, ok, SEGMENTS, root_seg_count=SEGMENTS, every=every, sent=40) is None
    for checkpoint, cum, count, sent in (
        (1, SEGMENTS, SEGMENTS, SEGMENTS),  # cum beyond its checkpoint
        (7, SEGMENTS, SEGMENTS, 40),  # beyond what was sent
        (1, 16, 16, SEGMENTS),  # another seg_count
        (9, SEGMENTS, SEGMENTS, SEGMENTS),  # no such checkpoint
    ):
        refusal = claim_refusal(
            checkpoint, cum, count, root_seg_count=SEGMENTS, every=every, sent=sent
        )
        assert refusal is not None and refusal.startswith(CLAIM_REFUSED)
    stamps = SentStamps()
    stamps.record(20, 1234)
    assert stamps.echo_for(1234, 2, SEGMENTS, every) == 1234
    assert stamps.echo_for(1234, 1, SEGMENTS, every) == NO_STAMP  # not that checkpoint's
    assert stamps.echo_for(999, 2, SEGMENTS, every) == NO_STAMP  # never sent
