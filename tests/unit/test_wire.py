"""One protocol definition: the P4 headers and constants, the struct codec and the Scapy layer
must agree field for field and value for value."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

pytest.importorskip("scapy", reason="Scapy is not installed (apt-get install python3-scapy)")
from scapy.layers.l2 import Ether

from controller import wire
from tests.scapy_layers import Coll, MiniPacketBody, coll_frame

pytestmark = pytest.mark.unit

P4SRC = Path(__file__).resolve().parents[2] / "p4src" / "common"
TYPEDEFS = {
    "node_id_t": 16,
    "comm_id_t": 16,
    "epoch_t": 16,
    "port_num_t": 16,
    "port_bitmap_t": 32,
    "mac_addr_t": 48,
}


def p4_header(name: str) -> list[tuple[str, int]]:
    text = (P4SRC / "headers.p4").read_text()
    body = re.search(rf"header {name} \{{(.*?)\}}", text, re.S)
    assert body, f"header {name} not found"
    fields = []
    for line in body.group(1).strip().splitlines():
        match = re.match(r"\s*(bit<(\d+)>|\w+)\s+(\w+);", line)
        assert match, line
        width = int(match.group(2)) if match.group(2) else TYPEDEFS[match.group(1)]
        fields.append((match.group(3), width))
    return fields


def p4_constants(prefix: str) -> dict[str, int]:
    text = (P4SRC / "constants.p4").read_text()
    return {
        m.group(1): int(m.group(2), 0)
        for m in re.finditer(rf"const bit<\d+> ({prefix}\w*) = (\w+);", text)
    }


def test_p4_headers_match_the_codec() -> None:
    assert p4_header("coll_h") == list(wire.HEADER_FIELDS)
    assert p4_header("mp_h") == list(wire.MP_FIELDS)


def test_p4_constants_match_the_enums() -> None:
    ops = p4_constants("OP_")
    assert {k.removeprefix("OP_"): v for k, v in ops.items() if k != "OP_MAX"} == {
        o.name: o.value for o in wire.Op
    }
    assert ops["OP_MAX"] == wire.OP_MAX
    drops = p4_constants("DROP_")
    assert {k.removeprefix("DROP_"): v for k, v in drops.items()} == {
        d.name: d.value for d in wire.DropReason
    }
    statuses = {k.removeprefix("MP_STATUS_"): v for k, v in p4_constants("MP_STATUS_").items()}
    assert statuses == {s.name: s.value for s in wire.MpStatus if s.name != "REQUEST"}
    kinds = {k.removeprefix("MP_"): v for k, v in p4_constants("MP_(?:WRITE|READ)_").items()}
    assert kinds == {k.name: k.value for k in wire.MpKind}
    assert p4_constants("ETHERTYPE_COLL")["ETHERTYPE_COLL"] == wire.ETHERTYPE_COLL
    agg = p4_constants("AGG_")
    assert {
        k.removeprefix("AGG_"): v for k, v in agg.items() if k[4:] in wire.AggOp.__members__
    } == {o.name: o.value for o in wire.AggOp}
    assert agg["AGG_OP_MAX"] == wire.AGG_OP_MAX == max(wire.AggOp)
    assert p4_constants("FLAG_MERGE")["FLAG_MERGE"] == wire.Flag.MERGE


def test_p4_default_sizes_match_the_wire_defaults() -> None:
    text = (P4SRC / "constants.p4").read_text()
    defines = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define (\w+) (\d+)", text)}
    assert defines["NETCOLL_AGG_LANES"] == wire.AGG_LANES
    assert defines["NETCOLL_AGG_WINDOW"] == wire.AGG_WINDOW
    assert defines["NETCOLL_DROP_REASONS"] == wire.DROP_REASON_COUNT > max(wire.DropReason)


def test_struct_and_scapy_agree_both_ways(test_rng: random.Random) -> None:
    for _ in range(200):
        values = {name: test_rng.randrange(1 << width) for name, width in wire.HEADER_FIELDS}
        mp_values = {name: test_rng.randrange(1 << width) for name, width in wire.MP_FIELDS}
        hdr = wire.Header(**values)
        body = wire.MiniPacket(**mp_values)
        packed = hdr.pack() + body.pack()
        scapy = Coll(packed)
        assert {n: scapy.getfieldval(n) for n, _ in wire.HEADER_FIELDS} == values
        assert bytes(Coll(**values)) == hdr.pack()
        assert bytes(MiniPacketBody(**mp_values)) == body.pack()
        assert wire.Header.unpack_from(packed) == hdr


def test_frames_round_trip_and_crc_catches_corruption() -> None:
    hdr = wire.Header(op=wire.Op.UNICAST, comm_id=3, epoch=7, src_node=1, dst_node=2, seq=9)
    frame = wire.build_frame(hdr, b"payload")
    parsed = wire.parse_frame(frame)
    assert parsed.hdr.payload_len == 7 and bytes(parsed.payload) == b"payload"
    assert bytes(Ether(frame)[Coll].payload)[:7] == b"payload"
    corrupted = frame[:-1] + bytes([frame[-1] ^ 1])
    with pytest.raises(wire.WireError, match="CRC"):
        wire.parse_frame(corrupted)
    with pytest.raises(wire.WireError, match="runs past"):
        wire.parse_frame(frame[:-3])
    with pytest.raises(wire.WireError, match="shorter"):
        wire.parse_frame(frame[:30])
    with pytest.raises(wire.WireError, match="unknown op"):
        wire.parse_frame(wire.build_frame(hdr.with_(op=99)))


def test_scapy_helper_builds_what_the_codec_parses() -> None:
    pkt = coll_frame(
        op=wire.Op.MP,
        src_node=wire.MGMT_NODE_ID,
        dst_node=0x4001,
        mp={"kind": 1, "slot": 5, "generation": 3},
    )
    parsed = wire.parse_frame(bytes(pkt))
    assert parsed.mp == wire.MiniPacket(kind=1, slot=5, generation=3)
    assert parsed.hdr.version == wire.PROTOCOL_VERSION


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(1, 2, True), (2, 1, False), (0xFFFF, 0, True), (0, 0xFFFF, False), (5, 5, False)],
)
def test_serial_arithmetic_wraps(a: int, b: int, expected: bool) -> None:
    assert wire.serial_lt(a, b) is expected


def test_serial_diff() -> None:
    assert wire.serial_diff(1, 0xFFFF) == 2
    assert wire.serial_diff(0xFFFF, 1) == -2


def test_lanes_pack_big_endian_wrap_and_pad_with_the_identity() -> None:
    payload = wire.pack_lanes([1, -1, 1 << 31, (1 << 32) + 5], 8, wire.agg_identity(wire.AggOp.MIN))
    assert len(payload) == 32
    assert payload[:8] == b"\x00\x00\x00\x01\xff\xff\xff\xff"
    assert wire.unpack_lanes(payload) == [1, -1, -(1 << 31), 5] + [(1 << 31) - 1] * 4
    with pytest.raises(ValueError, match="do not fit"):
        wire.pack_lanes([0] * 9, 8)
    with pytest.raises(wire.WireError, match="whole"):
        wire.unpack_lanes(b"\0" * 6)


@pytest.mark.parametrize("op", list(wire.AggOp))
def test_identity_leaves_every_value_unchanged(op: wire.AggOp, test_rng: random.Random) -> None:
    for value in [0, 1, -1, (1 << 31) - 1, -(1 << 31)] + [
        test_rng.randrange(-(1 << 31), 1 << 31) for _ in range(50)
    ]:
        assert wire.agg_combine(op, value, wire.agg_identity(op)) == value
        assert wire.agg_combine(op, wire.agg_identity(op), value) == value


def test_combine_wraps_and_compares_signed() -> None:
    assert wire.agg_combine(wire.AggOp.SUM, (1 << 31) - 1, 1) == -(1 << 31)
    assert wire.agg_combine(wire.AggOp.MIN, -1, 1) == -1
    assert wire.agg_combine(wire.AggOp.MAX, -1, 1) == 1
    assert wire.agg_combine(wire.AggOp.AND, -1, 0x0F0F) == 0x0F0F
    assert wire.agg_combine(wire.AggOp.XOR, -1, 1) == -2


def test_reduction_frames_carry_no_crc_and_parse() -> None:
    """Switches rewrite the lanes, so REDUCE/RESULT have payload_crc 0 and are not checked."""
    payload = wire.pack_lanes([7], wire.AGG_LANES)
    for op in (wire.Op.REDUCE, wire.Op.RESULT):
        frame = wire.build_frame(wire.Header(op=op, tree=wire.AggOp.SUM), payload)
        parsed = wire.parse_frame(frame)
        assert parsed.hdr.payload_crc == 0 and wire.unpack_lanes(parsed.payload)[0] == 7
    data = wire.build_frame(wire.Header(op=wire.Op.UNICAST), payload)
    assert wire.parse_frame(data).hdr.payload_crc == wire.payload_crc(payload) != 0
