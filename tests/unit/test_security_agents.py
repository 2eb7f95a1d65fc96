"""Attacks on host agents from another host, on the in-process fabric (reference-model switches).

Each test runs a real collective among members while a non-member host (or a member claiming a
role it does not hold) sends what the attack needs, with its own node id (the switches reject
any other: SRC_SPOOF). Each asserts what a user relies on: every member's result is the
root's data, the attempt is counted by reason, and no state was taken for it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from controller import wire
from controller.topology import Topology
from controller.topology_build import dragonfly
from controller.wire import Flag, Op
from host_agents.comm import Comm, CommOptions
from host_agents.engine import Engine, EngineConfig
from host_agents.entitlement import Refusal
from host_agents.transport.early import segment_charge, start_charge
from tests.fabric import Cluster, FabricPort, Faults

pytestmark = [pytest.mark.unit, pytest.mark.security]

TOPO: Topology = dragonfly(2, 2, 1)  # 3 groups, 6 routers, 12 hosts
HOSTS = [h.node_id for h in TOPO.hosts]
MEMBERS = (HOSTS[0], HOSTS[3], HOSTS[5], HOSTS[8], HOSTS[10])  # three groups, five switches
OUTSIDER = HOSTS[11]  # shares a switch with a member
# timers long enough that a loaded machine causes no spurious retransmission (one test counts
# them), short enough that a real loss is repaired at once
CONFIG = EngineConfig(rto_initial=0.2, rto_min=0.05, barrier_rto=0.02, peer_timeout=10.0)
OPTIONS = CommOptions(progress_timeout=10.0, first_data_timeout=20.0, op_timeout=60.0)
SIZE = 6000  # five segments at the real MTU


def run(body: Callable[[asyncio.AbstractEventLoop], Awaitable[None]], timeout: float = 60) -> None:
    async def main() -> None:
        await asyncio.wait_for(body(asyncio.get_running_loop()), timeout)

    asyncio.run(main())


class Attacker:
    """A host that sends hand-made frames under its own node id and records what it gets."""

    def __init__(self, cluster: Cluster, node: int, loop: asyncio.AbstractEventLoop) -> None:
        self.node = node
        self.fabric = cluster.fabric
        self.received: list[wire.Frame] = []
        if node not in cluster.members:  # a member's port stays its agent's
            port: FabricPort = cluster.fabric.port(node)
            port.start(loop, lambda frame: self.received.append(wire.parse_frame(frame)))

    def send(self, hdr: wire.Header, payload: bytes = b"") -> None:
        hdr = hdr.with_(src_node=self.node)
        self.fabric.host_transmit(self.node, wire.build_frame(hdr, payload, dst_mac=b"\xff" * 6))

    def data_frames(self, comm: int) -> list[wire.Frame]:
        return [
            f for f in self.received if f.hdr.comm_id == comm and f.hdr.op in (Op.MCAST, Op.UNICAST)
        ]


def cluster_of(loop: asyncio.AbstractEventLoop, faults: Faults | None = None) -> Cluster:
    return Cluster(TOPO, MEMBERS, loop=loop, config=CONFIG, options=OPTIONS, faults=faults)


def dropped(comm: Comm, reason: str) -> int:
    return comm.engine.stats.dropped[reason]


async def bcast_everywhere(comms: list[Comm], root: int, data: bytes, algorithm: str) -> None:
    results = await asyncio.gather(
        *(
            c.bcast(data if c.rank == root else None, root, size=len(data), algorithm=algorithm)
            for c in comms
        )
    )
    for comm, got in zip(comms, results, strict=True):
        assert got == data, f"rank {comm.rank} did not get the root's data"


def forged_segment(comm: Comm, root: int, *, repair: bool, epoch: int = 1) -> wire.Header:
    return wire.Header(
        op=Op.UNICAST if repair else Op.MCAST,
        comm_id=comm.comm_id,
        epoch=epoch,
        tree=wire.Tree.INNET,
        flags=Flag.REPAIR if repair else Flag.NONE,
        dst_node=comm.engine.node,
        root_node=comm.node(root),
        seg_idx=0,
        seg_count=-(-SIZE // wire.MAX_PAYLOAD),
        msg_len=SIZE,
        payload_len=wire.MAX_PAYLOAD,
    )


@pytest.mark.parametrize("who", ["outsider", "member"])
def test_a_forged_repair_does_not_become_a_members_broadcast(who: str) -> None:
    """A repair-flagged unicast claiming the root's multicast, sent before the broadcast."""

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = cluster_of(loop)
        victim = cluster.comms[2]
        sender = OUTSIDER if who == "outsider" else cluster.comms[1].engine.node
        attacker = Attacker(cluster, sender, loop)
        attacker.send(forged_segment(victim, 0, repair=True), b"X" * wire.MAX_PAYLOAD)
        await asyncio.sleep(0.01)
        data = random.Random(1).randbytes(SIZE)
        await bcast_everywhere(cluster.comms, 0, data, "innet")
        assert dropped(victim, Refusal.NOT_ROOT) == 1
        assert victim.engine.early_bytes_held == 0

    run(body)


def test_unicast_data_from_an_outsider_is_refused_and_takes_no_memory() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = cluster_of(loop)
        victim = cluster.comms[1]
        attacker = Attacker(cluster, OUTSIDER, loop)
        hdr = wire.Header(
            op=Op.UNICAST,
            comm_id=victim.comm_id,
            epoch=1,
            tag=0,
            dst_node=victim.engine.node,
            seg_count=1,
            msg_len=100,
            payload_len=100,
        )
        attacker.send(hdr, b"Y" * 100)
        await asyncio.sleep(0.01)
        assert dropped(victim, Refusal.NOT_MEMBER) == 1
        assert victim.engine.early_bytes_held == 0
        data = random.Random(2).randbytes(SIZE)
        await bcast_everywhere(cluster.comms, 0, data, "binomial")
        assert attacker.received == [], "nothing is acknowledged to an outsider"

    run(body)


@pytest.mark.parametrize("who", ["outsider", "member"])
def test_a_nack_gets_no_published_block_and_no_multicast_repair(who: str) -> None:
    """Allgather publishes every block: a NACK from someone not entitled gets nothing back."""

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = cluster_of(loop)
        root = cluster.comms[0]
        # a member asking a root it does not report to, for a tree it is not in: for the
        # acknowledged broadcast tree of rank 0, a member whose ACKs go to its co-root
        plan = root.engine.plan(root.comm_id, root.engine.node, wire.Tree.INNET)
        member = next(
            n for n, target in plan.ack_target.items() if target not in (n, root.engine.node)
        )
        sender = OUTSIDER if who == "outsider" else member
        attacker = Attacker(cluster, sender, loop)
        publish = root.engine.mcast_publish

        def publish_then_attack(comm: int, epoch: int, tree: int, data: object) -> object:
            key = publish(comm, epoch, tree, data)  # type: ignore[arg-type]
            nack = wire.Header(
                op=Op.NACK,
                comm_id=comm,
                epoch=epoch,
                tree=tree,
                root_node=root.engine.node,
                dst_node=root.engine.node,
            )
            if who == "outsider":
                attacker.send(nack, b"\0\0\0\0\0\0\0\1")  # segment 0
            return key

        root.engine.mcast_publish = publish_then_attack  # type: ignore[method-assign]
        blocks = [random.Random(r).randbytes(1000) for r in range(len(MEMBERS))]
        results = await asyncio.gather(
            *(c.allgather(blocks[c.rank], algorithm="innet") for c in cluster.comms)
        )
        assert all(r == b"".join(blocks) for r in results)
        if who == "outsider":
            assert dropped(root, Refusal.NOT_REPORTER) == 1
            assert attacker.data_frames(root.comm_id) == []

        # an acknowledged broadcast: a NACK from a non-reporter must not make the root
        # multicast again to the whole tree
        send = root.engine.mcast_send
        nack_ranges = b"\0\0\0\0\0\0\0\x20"  # segments 0..31

        def send_then_attack(comm: int, epoch: int, tree: int, source: object) -> object:
            sending = send(comm, epoch, tree, source)  # type: ignore[arg-type]
            attacker.send(
                wire.Header(
                    op=Op.NACK,
                    comm_id=comm,
                    epoch=epoch,
                    tree=tree,
                    root_node=root.engine.node,
                    dst_node=root.engine.node,
                ),
                nack_ranges,
            )
            return sending

        root.engine.mcast_send = send_then_attack  # type: ignore[method-assign]
        before = root.engine.stats.mcast_retransmissions
        refused = dropped(root, Refusal.NOT_REPORTER)
        await bcast_everywhere(cluster.comms, 0, random.Random(3).randbytes(SIZE), "innet")
        await root.settle()  # the root's ACKs, and any repair, come after it returned
        assert dropped(root, Refusal.NOT_REPORTER) == refused + 1
        assert root.engine.stats.mcast_retransmissions == before, "the NACK caused a repair"

    run(body)


def test_early_data_reserves_what_arrived_not_what_a_header_claims() -> None:
    """A member sends the first segment of a 200 MiB message nobody asked for, and floods
    unfinished early messages; genuine early data still gets in, the junk expires."""
    config = EngineConfig(
        rto_initial=0.05,
        rto_min=0.01,
        barrier_rto=0.02,
        peer_timeout=10.0,
        early_messages_per_sender=8,
        early_idle_timeout=0.2,
    )

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(TOPO, MEMBERS, loop=loop, config=config, options=OPTIONS)
        victim = cluster.comms[2]
        member = cluster.comms[1].engine.node
        attacker = Attacker(cluster, member, loop)
        claimed = 200 << 20
        for tag in range(10):
            attacker.send(
                wire.Header(
                    op=Op.UNICAST,
                    comm_id=victim.comm_id,
                    epoch=2,
                    tag=1000 + tag,
                    dst_node=victim.engine.node,
                    seg_count=-(-claimed // wire.MAX_PAYLOAD),
                    msg_len=claimed,
                    payload_len=wire.MAX_PAYLOAD,
                ),
                b"Z" * wire.MAX_PAYLOAD,
            )
        await asyncio.sleep(0.01)
        # what arrived, and what holding it costs (issue 32: every byte held is charged)
        seg_count = -(-claimed // wire.MAX_PAYLOAD)
        each = start_charge(seg_count) + segment_charge(wire.MAX_PAYLOAD)
        assert victim.engine.early_bytes_held == 8 * each
        assert dropped(victim, "too many messages nobody has asked for yet from one sender") == 2
        # a genuine early message from another member still gets in: rank 0 runs ahead
        data = random.Random(4).randbytes(SIZE)
        ahead = asyncio.ensure_future(cluster.comms[0].bcast(data, 0, algorithm="binomial"))
        await asyncio.sleep(0.5)  # junk expires meanwhile
        assert dropped(victim, "early message expired") == 8
        results = await asyncio.gather(
            *(c.bcast(None, 0, size=SIZE, algorithm="binomial") for c in cluster.comms[1:])
        )
        await ahead
        assert all(r == data for r in results)
        assert victim.engine.early_bytes_held == 0

    run(body)


def test_a_release_from_another_host_is_refused() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = cluster_of(loop)
        victim = cluster.comms[1]
        # a RELEASE unicast to the victim's node from a host port is dropped by the switch
        # (barrier logic: NOT_PARENT); deliver it straight to the agent to test the agent
        hdr = wire.Header(op=Op.RELEASE, comm_id=victim.comm_id, epoch=1, src_node=OUTSIDER)
        victim.engine._on_frame(wire.build_frame(hdr, b"", dst_mac=b"\xff" * 6))
        assert dropped(victim, Refusal.NOT_MY_SWITCH) == 1
        assert victim.engine.barriers.released_epoch(victim.comm_id) == 0

    run(body)


def test_a_freed_communicator_still_reacknowledges_a_lost_last_ack() -> None:
    """A receiver frees the communicator right after its broadcast while its last ACK was
    lost: the root's retransmission must still be answered."""
    lost: list[bool] = []
    receiver = MEMBERS[4]

    def drop_first_final_ack(_link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.Header.unpack_from(frame, wire.ETH_HEADER_LEN)
        final = hdr.op == Op.ACK and hdr.root_node and hdr.seq == -(-SIZE // wire.MAX_PAYLOAD)
        if final and hdr.src_node == receiver and not lost:
            lost.append(True)
            return True
        return False

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = cluster_of(loop, faults=Faults(drop_if=drop_first_final_ack))
        data = random.Random(5).randbytes(SIZE)
        root = cluster.comms[0]
        sending = asyncio.ensure_future(root.bcast(data, 0, algorithm="innet"))
        others = cluster.comms[1:]

        async def receive_then_free(comm: Comm) -> bytes:
            got = await comm.bcast(None, 0, size=SIZE, algorithm="innet")
            await comm.free()
            return got

        results = await asyncio.gather(*(receive_then_free(c) for c in others))
        assert all(r == data for r in results)
        await sending  # fails (PeerTimeout) if the freed receiver no longer answers
        assert lost, "the test did not lose the final ACK"

    run(body)


def test_a_reused_communicator_id_starts_clean() -> None:
    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = cluster_of(loop)
        data = random.Random(6).randbytes(SIZE)
        await bcast_everywhere(cluster.comms, 0, data, "innet")
        await asyncio.gather(*(c.free() for c in cluster.comms))
        # the control plane hands the same id out again to the same members
        engines: list[Engine] = [c.engine for c in cluster.comms]
        fresh = [Comm(e, 1, MEMBERS, innet=True, options=OPTIONS) for e in engines]
        await bcast_everywhere(fresh, 0, data[::-1], "innet")
        await asyncio.gather(*(c.barrier(algorithm="innet") for c in fresh))

    run(body)


def test_only_a_messages_receiver_can_ask_for_it_to_be_resent() -> None:
    """A unicast sender resends at once on an ACK with Flag.RESEND (a leader of the packed
    allgather waiting for a block), but only one from the message's receiver: a request from
    another member or an outsider resends nothing."""
    config = EngineConfig(rto_initial=2.0, rto_min=0.05, barrier_rto=0.02, peer_timeout=10.0)
    epoch, tag = 5, 77
    held = [True]

    def drop(link: tuple[int, int], frame: bytes) -> bool:
        hdr = wire.parse_frame(frame).hdr
        return held[0] and hdr.op == Op.UNICAST and hdr.tag == tag

    async def body(loop: asyncio.AbstractEventLoop) -> None:
        cluster = Cluster(
            TOPO, MEMBERS, loop=loop, config=config, options=OPTIONS, faults=Faults(drop_if=drop)
        )
        sender, receiver, other = (c.engine for c in cluster.comms[1:4])
        comm_id = cluster.comms[1].comm_id
        data = random.Random(3).randbytes(100)
        sent = sender.send_message(receiver.node, comm_id, epoch, tag, data)
        msg = receiver.incoming(sender.node, comm_id, epoch, tag, len(data))
        await asyncio.sleep(0.1)  # older than a round trip's floor (rto_min), so overdue
        ask = wire.Header(
            op=Op.ACK, comm_id=comm_id, epoch=epoch, tag=tag, flags=Flag.RESEND, seq=0
        )
        for node in (other.node, OUTSIDER):
            Attacker(cluster, node, loop).send(ask.with_(dst_node=sender.node))
        await asyncio.sleep(0.05)
        assert sender.stats.retransmissions == 0
        held[0] = False
        receiver.ask_resend(msg)
        await asyncio.wait_for(sent, 1.0)  # long before the 2 s timeout
        assert sender.stats.retransmissions == 1
        assert bytes(await msg.done) == data

    run(body)
