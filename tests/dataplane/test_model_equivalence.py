"""The reference model against BMv2: random event sequences, same outputs, same drops.

Each sequence re-configures the barrier and membership slots by mini packet (new
generations) and then plays random events: broadcasts, arrivals, releases, reductions
(REDUCE/RESULT: every operation, duplicates, late and stale chunks, bad lane counts, out-of-range
indices), unicasts, mini packets from every kind of port, IPv4, malformed and truncated frames.
In some sequences most events are reductions from the communicator's children, so chunks
complete; in others most are switch-merged ACKs (checkpoints of a few epochs, duplicates,
non-children, out-of-range checkpoints and cums, unknown trees), so ACK-merge cells complete.
Every frame's outputs must match byte for byte on every port, and each sequence's drop
counters must match.
"""

from __future__ import annotations

import os
import random
import struct
from collections import Counter

from controller import wire
from controller.switch_model import SwitchModel
from controller.switch_state import ports_bitmap
from controller.wire import AggOp, MpKind, Op
from mininet_topos.network.single_switch import SingleSwitchLab
from tests.dataplane_scenarios import (
    ALL_PORTS,
    CHILD_NODE,
    CHILD_PORT,
    COMM,
    HOST_PORTS,
    MGMT_PORT,
    OTHER_COMM,
    PARENT_NODE,
    PARENT_PORT,
    REMOTE_ROOT,
    SWITCH_NODE,
    base_state,
    mp_frame,
    with_trees,
)

SEQUENCES = int(os.environ.get("NETCOLL_DP_SEQUENCES", "1000"))
EVENTS = 8
NODES = (*HOST_PORTS, PARENT_NODE, CHILD_NODE, wire.MGMT_NODE_ID, SWITCH_NODE, 999, 0xFFFF)


class Sequencer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.generation: Counter[tuple[int, int]] = Counter()
        self.epoch: Counter[int] = Counter()
        self.children: dict[int, tuple[int, ...]] = {}
        self.reduction_focus = False
        self.ack_focus = False

    def port_src(self, port: int) -> int:
        if port in HOST_PORTS:
            return port if self.rng.random() < 0.9 else self.rng.choice(HOST_PORTS)
        return self.rng.choice((PARENT_NODE, CHILD_NODE, wire.MGMT_NODE_ID))

    def mp(
        self, kind: int, slot: int, *, generation: int, parent: int, children: int, epoch: int = 0
    ) -> bytes:
        return mp_frame(
            kind,
            slot,
            generation,
            parent=parent,
            children=children,
            epoch=epoch,
            seq=self.rng.randrange(1 << 32),
        )

    def reset_frames(self) -> list[tuple[int, bytes]]:
        """New generations for the slots the events touch: a fresh starting point."""
        rng, out = self.rng, []
        for comm in (COMM, OTHER_COMM):
            self.generation[(MpKind.WRITE_BARRIER, comm)] += 1
            parent = rng.choice((0, 0, PARENT_PORT))
            children = tuple(p for p in (*HOST_PORTS, CHILD_PORT) if rng.random() < 0.6) or (1,)
            self.children[comm] = children
            self.epoch[comm] = rng.randrange(1 << 16)
            out.append(
                (
                    MGMT_PORT,
                    self.mp(
                        MpKind.WRITE_BARRIER,
                        comm,
                        generation=self.generation[(MpKind.WRITE_BARRIER, comm)],
                        parent=parent,
                        children=ports_bitmap(children),
                        epoch=self.epoch[comm],
                    ),
                )
            )
        self.generation[(MpKind.WRITE_TREE, 5)] += 1
        children = tuple(p for p in ALL_PORTS if rng.random() < 0.4)
        out.append(
            (
                MGMT_PORT,
                self.mp(
                    MpKind.WRITE_TREE,
                    5,
                    generation=self.generation[(MpKind.WRITE_TREE, 5)],
                    parent=rng.choice((2, 2, PARENT_PORT)),
                    children=ports_bitmap(children),
                ),
            )
        )
        self.reduction_focus = rng.random() < 0.4
        self.ack_focus = not self.reduction_focus and rng.random() < 0.4
        return out

    def merged_ack(self) -> tuple[int, bytes]:
        """A switch-merged ACK: mostly from a child of a tree with an ACK-merge entry, on a
        few checkpoints of a couple of epochs, with the odd bad one."""
        rng = self.rng
        if rng.random() < 0.7:  # well-formed, on one of two checkpoints: cells complete
            root = rng.choice((1, REMOTE_ROOT))
            port = rng.choice((2, 3, CHILD_PORT))
            checkpoint = rng.choice((1, 3))
            hdr = wire.Header(
                op=Op.ACK,
                src_node=node_of(port),
                dst_node=root,
                root_node=root,
                comm_id=COMM,
                epoch=rng.choice((1, 1, 1, 2)),
                flags=wire.Flag.MERGE,
                seq=min(16 * checkpoint, 40),
                seg_idx=checkpoint,
                seg_count=40,
            )
            return port, wire.build_frame(hdr, b"\0" * 8, src_mac=wire.mac_bytes(wire.host_mac(1)))
        comm, root = rng.choice(
            ((COMM, 1), (COMM, REMOTE_ROOT), (OTHER_COMM, 4), (COMM, 3), (0xFFFF, 1))
        )
        port = rng.choice((2, 3, CHILD_PORT)) if rng.random() < 0.7 else rng.choice(ALL_PORTS)
        src = port if port in HOST_PORTS and rng.random() < 0.95 else self.port_src(port)
        checkpoint = rng.choice((1, 3, 9, 0, 1 << 16, 0xFFFF))
        seg_count = rng.choice((40, 40, 16 * 9, 0))
        seq = rng.choice((min(16 * checkpoint, seg_count),) * 3 + (0, seg_count + 1))
        hdr = wire.Header(
            op=Op.ACK,
            src_node=src,
            dst_node=root,
            root_node=root,
            comm_id=comm,
            epoch=rng.choice((1, 2, 0x8001)),
            tree=rng.choice((0, 0, 0, 1)),
            flags=wire.Flag.MERGE | rng.choice((0, 0, 0, wire.Flag.LAST)),
            seq=seq % (1 << 32),
            seg_idx=checkpoint,
            seg_count=seg_count,
        )
        mac = wire.mac_bytes(wire.host_mac(src & 0x3FFF))
        frame = wire.build_frame(hdr, b"\0" * 8, src_mac=mac)
        if rng.random() < 0.03:
            frame = frame[: rng.randrange(14, len(frame))]
        return port, frame

    def reduction(self) -> tuple[int, bytes]:
        """A REDUCE or RESULT: mostly from a child (or the parent) of the communicator, on a
        few chunks of the current epoch, with the odd late, bad or malformed one."""
        rng = self.rng
        comm = rng.choice((COMM, COMM, COMM, OTHER_COMM, 200, 0xFFFF))
        kind = Op.REDUCE if rng.random() < 0.85 else Op.RESULT
        children = self.children.get(comm, (1,))
        if kind == Op.RESULT:
            port = PARENT_PORT if rng.random() < 0.7 else rng.choice(ALL_PORTS)
        else:
            port = rng.choice(children) if rng.random() < 0.85 else rng.choice(ALL_PORTS)
        src = port if port in HOST_PORTS and rng.random() < 0.95 else self.port_src(port)
        epoch = (self.epoch[comm] + rng.choice((0, 0, 0, 0, -1, 1, 0x8000))) & 0xFFFF
        chunk = rng.choice((0, 0, 1, 1, 2, wire.AGG_WINDOW, wire.AGG_WINDOW + 1, 1 << 16))
        op = rng.choice((*AggOp, AggOp.SUM, AggOp.MIN, 0, wire.AGG_OP_MAX + 1))
        values = [rng.choice((rng.randrange(-(1 << 31), 1 << 31), -1, 0, 1)) for _ in range(8)]
        pad = wire.agg_identity(AggOp(op)) if 1 <= op <= wire.AGG_OP_MAX else 0
        payload = wire.pack_lanes(values, wire.AGG_LANES, pad)
        if rng.random() < 0.05:
            payload = payload[: rng.choice((0, 4, len(payload) - 4))] or payload + b"\0" * 4
        # the last chunk (seg_idx + 1 = seg_count) moves the barrier's released epoch
        count = rng.choice((chunk + 1, chunk + 1, chunk + 2, 1, 0)) % (1 << 32)
        hdr = wire.Header(
            op=kind,
            src_node=src,
            comm_id=comm,
            epoch=epoch,
            seg_idx=chunk,
            seg_count=count,
            tree=op,
        )
        frame = wire.build_frame(hdr, payload, src_mac=wire.mac_bytes(wire.host_mac(src & 0x3FFF)))
        if rng.random() < 0.03:
            frame = frame[: rng.randrange(14, len(frame))]
        return port, frame

    def event(self) -> tuple[int, bytes]:
        rng = self.rng
        if rng.random() < (0.7 if self.reduction_focus else 0.1):
            return self.reduction()
        if rng.random() < (0.8 if self.ack_focus else 0.05):
            return self.merged_ack()
        port = rng.choice(ALL_PORTS)
        kind = rng.choice(("mcast", "arrive", "arrive", "release", "unicast", "mp", "ipv4", "bad"))
        src = self.port_src(port)
        payload = rng.randbytes(rng.choice((0, 1, 60, 300)))
        if kind == "mcast":
            hdr = wire.Header(
                op=Op.MCAST,
                src_node=src,
                comm_id=rng.choice((COMM, OTHER_COMM, 9)),
                root_node=rng.choice((1, 2, 4, src)),
                tree=rng.choice((0, 0, 0, 1, 7)),
            )
            return port, wire.build_frame(hdr, payload)
        if kind in ("arrive", "release"):
            comm = rng.choice((COMM, COMM, OTHER_COMM, 200, 0xFFFF))
            epoch = (self.epoch[comm] + rng.choice((-1, 0, 1, 1, 1, 2, 3, 5, 100))) & 0xFFFF
            op = Op.ARRIVE if kind == "arrive" else Op.RELEASE
            if kind == "release" and rng.random() < 0.7:
                port = PARENT_PORT
            return port, wire.build_frame(
                wire.Header(op=op, src_node=src, comm_id=comm, epoch=epoch)
            )
        if kind == "unicast":
            op = rng.choice((Op.UNICAST, Op.ACK, Op.NACK, Op.PING, Op.PONG, Op.CTRL, Op.MP_REPLY))
            hdr = wire.Header(op=op, src_node=src, dst_node=rng.choice(NODES))
            mp = wire.MiniPacket(kind=1) if op == Op.MP_REPLY else None
            return port, wire.build_frame(hdr, payload, mp=mp)
        if kind == "mp":
            if rng.random() < 0.6:
                port = MGMT_PORT
            mp_kind = rng.choice((1, 2, 3, 4, 1, 2, 0, 9))
            slot = rng.choice((5, COMM, OTHER_COMM, 300, 2000, 0xFFFF))
            stored = self.generation[(mp_kind, slot)]
            generation = max(0, stored + rng.choice((-1, 0, 1, 1, 10)))
            if mp_kind in (MpKind.WRITE_TREE, MpKind.WRITE_BARRIER) and port == MGMT_PORT:
                self.generation[(mp_kind, slot)] = max(stored, generation)
            children = ports_bitmap(tuple(p for p in ALL_PORTS if rng.random() < 0.4))
            return port, self.mp(
                mp_kind,
                slot,
                generation=generation,
                parent=rng.choice((0, 2, PARENT_PORT)),
                children=children,
                epoch=rng.randrange(1 << 16),
            )
        if kind == "ipv4":
            dst = rng.choice((0x0A000000 | rng.choice(NODES), 0xC0A80001))
            src_ip = 0x0A000000 | src
            ipv4 = struct.pack(
                "!BBHHHBBHII", 0x45, 0, 20 + len(payload), 0, 0, 64, 17, 0, src_ip, dst
            )
            return port, b"\xff" * 6 + wire.mac_bytes(
                wire.host_mac(src)
            ) + b"\x08\x00" + ipv4 + payload
        good = wire.build_frame(
            wire.Header(op=rng.choice(list(Op)), src_node=src, dst_node=rng.choice(NODES)), payload
        )
        variant = rng.randrange(4)
        if variant == 0:
            return port, good[: rng.randrange(14, len(good))]
        if variant == 1:
            return port, good[:14] + bytes([rng.randrange(256)]) + good[15:]
        if variant == 2:
            return port, good[:15] + bytes([rng.choice((0, wire.OP_MAX + 1, 99, 255))]) + good[16:]
        return port, good[:46] + struct.pack("!H", rng.randrange(1 << 16)) + good[48:]


def node_of(port: int) -> int:
    if port in HOST_PORTS:
        return port
    return CHILD_NODE if port == CHILD_PORT else PARENT_NODE


def model_outputs(model: SwitchModel, port: int, frame: bytes) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for out_port, data in model.process(frame, port).outputs:
        out.setdefault(out_port, []).append(data)
    return out


def normalise(outputs: dict[int, list[bytes]]) -> dict[int, list[bytes]]:
    return {port: sorted(frames) for port, frames in outputs.items() if frames}


def test_model_matches_bmv2_on_random_sequences(lab: SingleSwitchLab, test_seed: int) -> None:
    rng = random.Random(test_seed)
    state = with_trees(base_state(lab))
    lab.configure(state)
    model = SwitchModel(with_trees(base_state(lab)))
    sequencer = Sequencer(rng)
    sequences = SEQUENCES if lab.replication == "subset" else max(1, SEQUENCES // 5)
    for number in range(sequences):
        bmv2_before, model_before = (
            lab.drops(),
            Counter(model.counters.drops + model.counters.egress_drops),
        )
        events = sequencer.reset_frames() + [sequencer.event() for _ in range(EVENTS)]
        for step, (port, frame) in enumerate(events):
            expected = normalise(model_outputs(model, port, frame))
            got = normalise(lab.send(port, frame))
            assert got == expected, (
                f"sequence {number} event {step}: port {port} frame {frame.hex()}\n"
                f"  BMv2:  {summary(got)}\n  model: {summary(expected)}"
            )
        bmv2_delta = lab.drops() - bmv2_before
        model_delta = Counter(model.counters.drops + model.counters.egress_drops) - model_before
        assert bmv2_delta == model_delta, (
            f"sequence {number}: drops BMv2 {dict(bmv2_delta)} model {dict(model_delta)}"
        )
    assert lab.alive()


def summary(outputs: dict[int, list[bytes]]) -> str:
    parts = []
    for port, frames in sorted(outputs.items()):
        for data in frames:
            try:
                hdr = wire.parse_frame(data, check_crc=False).hdr
                parts.append(f"{port}:{Op(hdr.op).name}/e{hdr.epoch}/s{hdr.seg_idx}")
            except (wire.WireError, ValueError):
                parts.append(f"{port}:{len(data)}B")
    return " ".join(parts) or "nothing"
