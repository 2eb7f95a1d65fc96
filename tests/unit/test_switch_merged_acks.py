"""Switch-merged multicast ACKs end to end on the in-process fabric (reference-model switches):
a communicator created with ``ack_merge="switch"`` broadcasts correctly, its root hears ONE
ACK stream (from its own switch) instead of one per dragonfly group, and it recovers from a
lost merged ACK, loss, duplication and reordering, and a switch that forgets its cells."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable

import pytest

from controller import wire
from controller.topology import Topology
from controller.topology_build import dragonfly
from host_agents.comm import Comm, CommOptions
from host_agents.directory import Directory
from host_agents.engine import EngineConfig
from host_agents.entitlement import Entitlement, Refusal
from host_agents.plans import PlanBook
from host_agents.transport.config import EngineStats
from host_agents.transport.keys import McastKey
from host_agents.transport.merged_acks import SwitchAcks, checkpoint_cum, checkpoint_reached
from host_agents.transport.messages import Incoming
from tests.fabric import Cluster, Faults

pytestmark = pytest.mark.unit

TOPO: Topology = dragonfly(2, 2, 2)  # 5 groups, 10 routers, 20 hosts
HOSTS = tuple(h.node_id for h in TOPO.hosts)
CONFIG = EngineConfig(rto_initial=0.02, rto_min=0.005, nack_delay=0.001, peer_timeout=30.0)
# counting ACKs: no loss, and no timer (root timeout, tail NACK, co-root probe) may fire on a
# slow machine, so every ACK counted is one the protocol needs
PATIENT = dataclasses.replace(
    CONFIG, rto_initial=5.0, rto_min=5.0, tail_delay=1.0, coroot_probe_delay=5.0
)
TIMEOUTS = {"progress_timeout": 30.0, "first_data_timeout": 60.0, "op_timeout": 120.0}
SWITCH = CommOptions(ack_merge="switch", **TIMEOUTS)  # type: ignore[arg-type]
COROOTS = CommOptions(ack_merge="coroots", **TIMEOUTS)  # type: ignore[arg-type]
KIB16 = 16 * 1024


def run(body: Callable[[asyncio.AbstractEventLoop], Awaitable[None]], timeout: float = 120) -> None:
    async def main() -> None:
        await asyncio.wait_for(body(asyncio.get_running_loop()), timeout)

    asyncio.run(main())


async def bcast(comms: list[Comm], root: int, data: bytes) -> None:
    results = await asyncio.gather(
        *(
            c.bcast(data if c.rank == root else None, root, size=len(data), algorithm="innet")
            for c in comms
        )
    )
    for comm, got in zip(comms, results, strict=True):
        assert got == data, f"rank {comm.rank} got wrong data"
    # the root returned once its segments were out: its ACKs are collected in the background
    await asyncio.gather(*(c.settle() for c in comms))


def acks_at(comm: Comm) -> int:
    return comm.engine.stats.mcast_acks_at_root


def is_merged_ack(frame: bytes) -> bool:
    try:
        hdr = wire.parse_frame(frame, check_crc=False).hdr
    except wire.WireError:
        return False
    return hdr.op == wire.Op.ACK and bool(hdr.flags & wire.Flag.MERGE)


def test_checkpoints() -> None:
    # 40 segments at ack_every 16: checkpoints 1 (16), 2 (32), 3 (40, the final one)
    assert [checkpoint_reached(c, 40, 16) for c in (0, 15, 16, 31, 32, 39, 40)] == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
    ]
    assert [checkpoint_cum(k, 40, 16) for k in (1, 2, 3)] == [16, 32, 40]
    # a message of whole checkpoints: the final one is the last full one, not one more
    assert checkpoint_reached(32, 32, 16) == 2 and checkpoint_cum(2, 32, 16) == 32
    assert checkpoint_reached(1, 1, 16) == 1 and checkpoint_cum(1, 1, 16) == 1


class Recorder:
    """The endpoint a receiver's SwitchAcks sends through, recording its ACKs."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.node = HOSTS[3]
        self.cfg = EngineConfig(nack_delay=0.005)
        self.loop = loop
        self.stats = EngineStats()
        self.directory = Directory.from_topology(TOPO)
        self.sent: list[wire.Header] = []

    def send_frame(self, dst_mac: bytes, hdr: wire.Header, payload: bytes = b"") -> None:
        self.sent.append(hdr)

    def checkpoints(self) -> list[tuple[int, int]]:
        out = [(h.seg_idx, h.seq) for h in self.sent]
        for h in self.sent:  # MERGE ACKs to the root, about its multicast
            assert h.op == wire.Op.ACK and h.flags & wire.Flag.MERGE
            assert h.dst_node == h.root_node == HOSTS[0] and h.seg_count == 40
        self.sent.clear()
        return out


def test_receiver_sends_checkpoints_and_repeats_what_a_retransmission_asks() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        endpoint = Recorder(loop)
        acks = SwitchAcks(endpoint)  # type: ignore[arg-type]
        key = McastKey(HOSTS[0], 1, 5, wire.Tree.INNET)
        msg = Incoming(loop, key, 40 * 1000, 40)

        def segment(seg: int) -> wire.Header:
            return wire.Header(
                op=wire.Op.MCAST, comm_id=1, epoch=5, root_node=HOSTS[0], seg_idx=seg, seg_count=40
            )

        msg.contiguous = 15
        acks.on_segment(msg, segment(14), new=True)
        assert endpoint.checkpoints() == []
        msg.contiguous = 16
        acks.on_segment(msg, segment(15), new=True)
        assert endpoint.checkpoints() == [(1, 16)]
        # a duplicate of segment 20 asks for checkpoint 2, which this receiver lacks
        acks.on_segment(msg, segment(20), new=False)
        assert endpoint.checkpoints() == []
        # a repair fills the gap up to the end: checkpoints 2 and 3 (the final one) at once
        msg.contiguous = 40
        acks.on_segment(msg, segment(17), new=True)
        assert endpoint.checkpoints() == [(2, 32), (3, 40)]
        # the root retransmits from its slowest cum (16): repeat checkpoint 2, once per round,
        # also while the message is complete but not yet taken by the application
        acks.on_segment(msg, segment(16), new=False)
        acks.on_segment(msg, segment(17), new=False)
        assert endpoint.checkpoints() == [(2, 32)]
        acks.repeat(segment(33), 40, 40)  # a completed message's duplicate
        assert endpoint.checkpoints() == [(3, 40)]
        await asyncio.sleep(endpoint.cfg.nack_delay * 4)
        acks.on_segment(msg, segment(16), new=False)
        assert endpoint.checkpoints() == [(2, 32)]

    run(body, timeout=10)


@pytest.mark.parametrize("root", [0, 7, 19])
def test_switch_mode_completes_and_the_root_hears_one_ack(root: int) -> None:
    """16 KiB at the real MTU is 12 segments, one checkpoint: exactly one ACK frame reaches the
    root, from its own switch; co-roots send one per group (5 here, 9 on Df(2,4,2))."""

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        data = random.Random(root).randbytes(KIB16)
        switch = Cluster(TOPO, HOSTS, loop=loop, config=PATIENT, options=SWITCH)
        await bcast(switch.comms, root, data)
        coroots = Cluster(TOPO, HOSTS, loop=loop, config=PATIENT, options=COROOTS)
        await bcast(coroots.comms, root, data)
        assert acks_at(switch.comms[root]) == 1
        groups = len({h.group for h in TOPO.hosts})
        assert acks_at(coroots.comms[root]) >= groups

    run(body)


def test_df242_root_hears_at_least_5x_fewer_acks() -> None:
    """The issue's bar on Df(2,4,2) (72 hosts, 9 groups), 16 KiB from rank 0: one merged ACK
    against one stream per group."""
    topo = dragonfly(2, 4, 2)
    hosts = tuple(h.node_id for h in topo.hosts)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        data = random.Random(9).randbytes(KIB16)
        counts = {}
        for name, options in (("switch", SWITCH), ("coroots", COROOTS)):
            cluster = Cluster(topo, hosts, loop=loop, config=PATIENT, options=options)
            await bcast(cluster.comms, 0, data)
            counts[name] = acks_at(cluster.comms[0])
        assert counts["switch"] == 1
        assert counts["coroots"] >= 5 * counts["switch"]

    run(body)


def test_switch_mode_long_message_one_ack_per_checkpoint() -> None:
    """1 MiB in 64 segments of 16 KiB: checkpoints every 16, so the root hears four merged ACKs
    while the co-roots' stream grows with segments and groups (one per ack_every segments or
    ack_delay per group)."""
    config = dataclasses.replace(PATIENT, segment_size=16384)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        data = random.Random(5).randbytes(1 << 20)
        switch = Cluster(TOPO, HOSTS, loop=loop, config=config, options=SWITCH)
        await bcast(switch.comms, 2, data)
        coroots = Cluster(TOPO, HOSTS, loop=loop, config=config, options=COROOTS)
        await bcast(coroots.comms, 2, data)
        assert switch.comms[2].engine.stats.mcast_retransmissions == 0
        assert acks_at(switch.comms[2]) == 4
        assert acks_at(coroots.comms[2]) >= 5 * 4

    run(body)


def test_lost_merged_ack_is_recovered_by_the_receivers_repeats() -> None:
    """The first two merged ACKs on their way to the root are lost: the root retransmits, the
    complete receivers repeat their final checkpoint, the switches (complete cells) send it up
    again."""
    lost = [0]
    root = 4
    root_switch = TOPO.host_by_node(HOSTS[root]).switch
    root_port = TOPO.host_by_node(HOSTS[root]).port

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        if link == (root_switch, root_port) and is_merged_ack(frame) and lost[0] < 2:
            lost[0] += 1
            return True
        return False

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            TOPO, HOSTS, loop=loop, config=CONFIG, options=SWITCH, faults=Faults(drop_if=drop_if)
        )
        await bcast(cluster.comms, root, random.Random(1).randbytes(KIB16))
        assert lost[0] == 2
        assert acks_at(cluster.comms[root]) >= 1

    run(body)


def test_receivers_that_have_not_called_bcast_yet_repeat_too() -> None:
    """The data arrives early everywhere (no receiver has called bcast yet) and the first
    merged ACK is lost: the receivers' complete but unconsumed messages must answer the
    root's retransmission, or the root waits for receivers that are busy elsewhere."""
    lost = [0]

    def drop_if(link: tuple[int, int], frame: bytes) -> bool:
        if is_merged_ack(frame) and link[0] == TOPO.host_by_node(HOSTS[0]).switch and not lost[0]:
            lost[0] = 1
            return True
        return False

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            TOPO, HOSTS, loop=loop, config=CONFIG, options=SWITCH, faults=Faults(drop_if=drop_if)
        )
        data = random.Random(3).randbytes(KIB16)
        root = cluster.comms[0]
        await asyncio.wait_for(root.bcast(data, 0, size=len(data), algorithm="innet"), 10)
        await asyncio.wait_for(root.settle(), 10)  # every receiver acknowledged, unasked
        assert lost[0] == 1
        results = await asyncio.gather(
            *(c.bcast(None, 0, size=len(data), algorithm="innet") for c in cluster.comms[1:])
        )
        assert all(r == data for r in results)

    run(body)


def test_switch_that_forgets_its_cells_still_completes() -> None:
    """Every switch loses its ACK-merge cells (a restart) while the first merged ACKs are on
    their way: the receivers' repeats rebuild them."""
    wiped = [False]

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(TOPO, HOSTS, loop=loop, config=CONFIG, options=SWITCH)

        def drop_if(link: tuple[int, int], frame: bytes) -> bool:
            if is_merged_ack(frame) and not wiped[0]:
                wiped[0] = True
                for model in cluster.fabric.models.values():
                    model.ack_cells = [(0, 0)] * len(model.ack_cells)
                    model.ack_cums = [(0, 0)] * len(model.ack_cums)
                return True
            return False

        cluster.fabric.faults = Faults(drop_if=drop_if)
        await bcast(cluster.comms, 0, random.Random(2).randbytes(3 * KIB16))
        assert wiped[0]

    run(body)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_switch_mode_under_loss_duplication_reordering(seed: int) -> None:
    config = dataclasses.replace(CONFIG, segment_size=4096)
    faults = Faults(loss=0.03, duplicate=0.03, reorder=0.05, reorder_delay=0.003)

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            TOPO, HOSTS, loop=loop, config=config, options=SWITCH, faults=faults, seed=seed
        )
        rng = random.Random(seed)
        for _ in range(3):
            root = rng.randrange(len(HOSTS))
            size = rng.choice((1, 5000, 200_000))
            await bcast(cluster.comms, root, rng.randbytes(size))

    run(body, timeout=240)


def test_merged_ack_taken_only_from_the_roots_own_switch() -> None:
    directory = Directory.from_topology(TOPO)
    root, other = HOSTS[0], HOSTS[-1]
    directory.comms[1] = HOSTS
    directory.switch_acks.add(1)
    me = Entitlement(root, directory, PlanBook(directory))
    my_switch = wire.switch_node_id(directory.switch_of(root))
    other_switch = wire.switch_node_id(directory.switch_of(other))
    assert my_switch != other_switch

    def ack(src: int, root_node: int = root, comm: int = 1) -> wire.Header:
        return wire.Header(
            op=wire.Op.ACK,
            comm_id=comm,
            root_node=root_node,
            src_node=src,
            dst_node=root_node,
            seq=1,
            seg_idx=1,
            seg_count=1,
            flags=wire.Flag.MERGE,
        )

    assert me.merged_ack(ack(my_switch)) is None
    assert me.merged_ack(ack(other_switch)) == Refusal.NOT_MY_SWITCH
    assert me.merged_ack(ack(other)) == Refusal.NOT_MY_SWITCH
    assert me.merged_ack(ack(my_switch, root_node=other)) == Refusal.NOT_REPORTER
    assert me.merged_ack(ack(my_switch, comm=2)) == Refusal.UNKNOWN_COMM
    # a communicator with co-roots takes no merged ACK, even from the right switch
    directory.switch_acks.discard(1)
    coroots = Entitlement(root, directory, PlanBook(directory))
    assert coroots.merged_ack(ack(my_switch)) == Refusal.NOT_MERGED


def test_ack_merge_mode_is_checked() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        with pytest.raises(ValueError, match="ack_merge"):
            Cluster(TOPO, HOSTS[:2], loop=loop, options=CommOptions(ack_merge="hosts"))

    run(body, timeout=10)
