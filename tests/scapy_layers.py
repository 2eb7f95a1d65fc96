"""Scapy layers for the collective protocol, built from :data:`controller.wire.HEADER_FIELDS`.

Use these to craft, dissect and fuzz frames in tests and tools; the agents' hot path uses the
``struct`` codecs of :mod:`controller.wire` instead (Scapy is far too slow to measure with).
"""

from __future__ import annotations

from typing import Any

from scapy.fields import BitEnumField, BitField, Field
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers

from controller import wire

_ENUMS: dict[str, dict[int, str]] = {
    "op": {op.value: op.name for op in wire.Op},
    "tree": {t.value: t.name for t in wire.Tree},
}
_MP_ENUMS: dict[str, dict[int, str]] = {
    "kind": {k.value: k.name for k in wire.MpKind},
    "status": {s.value: s.name for s in wire.MpStatus},
}


def _fields(spec: tuple[tuple[str, int], ...], enums: dict[str, dict[int, str]]) -> list[Field]:
    fields: list[Field] = []
    for name, width in spec:
        if name in enums:
            fields.append(BitEnumField(name, 0, width, enums[name]))
        else:
            fields.append(BitField(name, 0, width))
    return fields


class Coll(Packet):
    """The 40-byte collective header."""

    name = "Collective"
    fields_desc = _fields(wire.HEADER_FIELDS, _ENUMS)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if self.op in (wire.Op.MP, wire.Op.MP_REPLY):
            return MiniPacketBody
        return Packet.guess_payload_class(self, payload)


class MiniPacketBody(Packet):
    """The 20-byte mini packet body that follows the header when op is MP or MP_REPLY."""

    name = "MiniPacket"
    fields_desc = _fields(wire.MP_FIELDS, _MP_ENUMS)


bind_layers(Ether, Coll, type=wire.ETHERTYPE_COLL)


def coll_frame(
    *,
    payload: bytes = b"",
    src_mac: str = "02:00:00:00:00:00",
    dst_mac: str = "ff:ff:ff:ff:ff:ff",
    mp: dict[str, Any] | None = None,
    fix_lengths: bool = True,
    **fields: Any,
) -> Packet:
    """An Ether/Coll[/MiniPacketBody]/payload frame with version, length and CRC filled in.

    ``fields`` are Coll field values (``op=wire.Op.MCAST, comm_id=1, ...``). With
    ``fix_lengths=False`` the caller's payload_len and payload_crc are kept, which is how
    truncated and inconsistent frames are made.
    """
    values = {"version": wire.PROTOCOL_VERSION, "seg_count": 1, **fields}
    if fix_lengths:
        values.setdefault("payload_len", len(payload))
        values.setdefault("payload_crc", wire.payload_crc(payload))
    pkt = Ether(src=src_mac, dst=dst_mac, type=wire.ETHERTYPE_COLL) / Coll(**values)
    if mp is not None:
        pkt = pkt / MiniPacketBody(**mp)
    if payload:
        pkt = pkt / Raw(load=payload)
    return pkt
