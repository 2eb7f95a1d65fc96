"""10,000 bad frames at a switch: it stays up, counts every frame and every drop, and not
one register, table entry or multicast group changes.

Frames: Scapy ``fuzz`` of the collective header (with and without a mini packet body),
random bytes under the collective EtherType, truncations at every length, spoofed mini
packets from host ports, out-of-range communicators, epochs, slots, chunks, reduction
operations and node ids, RESULTs from host ports.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

pytest.importorskip("mininet", reason="Mininet is not installed (apt-get install mininet)")
pytest.importorskip("scapy", reason="Scapy is not installed (apt-get install python3-scapy)")
from scapy.layers.l2 import Ether
from scapy.packet import Raw, fuzz

from controller import wire
from controller.switch_state import ports_bitmap
from controller.wire import MpKind
from mininet_topos.network.single_switch import SingleSwitchLab
from tests.dataplane_scenarios import (
    ALL_PORTS,
    COMM,
    HOST_PORTS,
    MGMT_PORT,
    PARENT_PORT,
    base_state,
    mp_frame,
    with_trees,
)
from tests.requirements import BUILD_DIR, switch_unavailable
from tests.scapy_layers import Coll, MiniPacketBody

pytestmark = [
    pytest.mark.reliability,
    pytest.mark.skipif(switch_unavailable() is not None, reason=str(switch_unavailable())),
]

FRAMES = 10_000


@pytest.fixture(scope="module")
def lab() -> Iterator[SingleSwitchLab]:
    with SingleSwitchLab(BUILD_DIR, ALL_PORTS, replication="subset") as bench:
        yield bench


def bad_frames(rng: random.Random, count: int) -> Iterator[tuple[int, bytes]]:
    eth = Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:00:01", type=wire.ETHERTYPE_COLL)
    for i in range(count):
        port = rng.choice(HOST_PORTS) if i % 3 else rng.choice(ALL_PORTS)
        kind = i % 6
        if kind == 0:
            frame = bytes(eth / fuzz(Coll()) / Raw(rng.randbytes(rng.randrange(0, 64))))
        elif kind == 1:
            frame = bytes(eth / fuzz(Coll(op=wire.Op.MP)) / fuzz(MiniPacketBody()))
        elif kind == 2:
            frame = bytes(eth)[:14] + rng.randbytes(rng.randrange(0, 120))
        elif kind == 3:
            good = wire.build_frame(
                wire.Header(
                    op=rng.choice(list(wire.Op)), src_node=port, dst_node=rng.randrange(1 << 16)
                ),
                rng.randbytes(30),
            )
            frame = good[: rng.randrange(14, len(good))]
        elif kind == 4 and i % 12 == 4:  # a RESULT from a host port, for the real slot
            hdr = wire.Header(
                op=wire.Op.RESULT, src_node=port, comm_id=COMM, epoch=1, tree=wire.AggOp.SUM
            )
            frame = wire.build_frame(hdr, wire.pack_lanes([i], wire.AGG_LANES))
        elif kind == 4:  # spoofed membership from a host port, aimed at real slots
            port = rng.choice(HOST_PORTS)
            frame = mp_frame(
                rng.choice((MpKind.WRITE_TREE, MpKind.WRITE_BARRIER)),
                rng.choice((5, COMM)),
                10**6 + i,
                parent=port,
                children=ports_bitmap((port,)),
            )
        else:  # out-of-range everything, from a host with its own source id
            ops = (wire.Op.ARRIVE, wire.Op.RELEASE, wire.Op.MCAST, wire.Op.UNICAST)
            hdr = wire.Header(
                op=rng.choice((*ops, wire.Op.REDUCE, wire.Op.RESULT)),
                src_node=port,
                dst_node=rng.choice((0, 0x3FFF, 0x7FFF, 0xFFFF)),
                comm_id=rng.choice((0, 255, 256, 0xFFFF)),
                epoch=rng.randrange(1 << 16),
                seg_idx=rng.choice((0, 1, 1 << 16, 0xFFFFFFFF)),
                root_node=rng.randrange(1 << 16),
                tree=rng.randrange(256),
            )
            # reductions with the exact lane payload half the time, so they reach the checks
            size = 4 * wire.AGG_LANES if rng.random() < 0.5 else rng.randrange(0, 200)
            frame = wire.build_frame(hdr, rng.randbytes(size))
        yield port, frame


def test_ten_thousand_bad_frames_change_nothing(lab: SingleSwitchLab, test_seed: int) -> None:
    state = with_trees(base_state(lab))
    lab.configure(state)
    # real state to protect: a barrier slot mid-epoch and a written membership slot
    lab.send(
        MGMT_PORT,
        mp_frame(MpKind.WRITE_BARRIER, COMM, 1, parent=PARENT_PORT, children=ports_bitmap((1, 2))),
    )
    lab.send(MGMT_PORT, mp_frame(MpKind.WRITE_TREE, 5, 1, parent=2, children=ports_bitmap((1, 4))))
    lab.send(1, wire.build_frame(wire.Header(op=wire.Op.ARRIVE, src_node=1, comm_id=COMM, epoch=1)))

    registers, tables = lab.registers(), lab.tables()
    drops_before, rx_before, sent_before = (
        sum(lab.drops().values()),
        lab.rx_packets(),
        lab.frames_sent,
    )
    silent = 0
    rng = random.Random(test_seed)
    probe = wire.build_frame(
        wire.Header(op=wire.Op.UNICAST, src_node=1, dst_node=3), b"still alive"
    )
    for i, (port, frame) in enumerate(bad_frames(rng, FRAMES)):
        out = lab.send(port, frame)
        if not any(out.values()):
            silent += 1
        if i % 1000 == 999:  # the switch keeps forwarding in the middle of it all
            assert [len(v) for p, v in lab.send(1, probe).items() if v] == [1]
    assert lab.alive(), "the switch died"
    counted = lab.rx_packets() - rx_before
    assert counted == lab.frames_sent - sent_before, "some frames were not counted on ingress"
    dropped = sum(lab.drops().values()) - drops_before
    assert dropped >= silent, f"{silent} frames vanished but only {dropped} drops were counted"
    assert lab.tables() == tables, "a table entry or multicast group changed"
    assert lab.registers() == registers, "a register changed"
    print(
        f"{FRAMES} bad frames: {silent} produced nothing, {dropped} drops counted, state unchanged"
    )
