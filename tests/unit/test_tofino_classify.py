"""Classify as one constant table (NETCOLL_CLASSIFY_TABLE, the TNA program's): its entries, read
from p4src/common/forwarding.p4 and taken first match first, classify every combination of
Classify's inputs as the reference model's Classify does (controller/switch_model.py, which the
BMv2 tests check against the v1model program's if statements), NetcollIngress's range check of
a barrier's communicator included (the table makes it). Frames are long enough: TNA ingress has
no frame length, so the length test never applies there."""

from __future__ import annotations

import itertools

import pytest

from controller import wire
from controller.switch_frames import Parsed
from controller.switch_model import Decision, SwitchModel
from controller.switch_state import PortRole, SwitchState
from controller.wire import DropReason, Op
from tests import p4_const_tables

pytestmark = pytest.mark.unit

KEYS = (
    "parse_error",
    "coll_valid",
    "version",
    "op",
    "port_role",
    "src_diff",
    "my_node",
    "dst_diff",
    "payload_len",
    "flags",
    "ipv4_valid",
    "ipv4_prefix",
    "ipv4_src_diff",
    "comm_id",
)
CLASS_NAMES = {
    "CLASS_ROUTE": "route",
    "CLASS_MCAST": "mcast",
    "CLASS_BARRIER": "barrier",
    "CLASS_LOCAL": "local",
    "CLASS_AGG": "agg",
    "CLASS_ACK_MERGE": "ack_merge",
}
PORT, PORT_NODE, MY_NODE = 1, 0x21, 0x4001
COMM_SLOTS = 256  # NETCOLL_COMM_SLOTS, the model's Sizes().comm_slots


def _special(agg_payload_bytes: int) -> p4_const_tables.Resolve:
    """The table's tokens that are not constants of common/constants.p4."""
    specials = {"COMM_SLOT_LAST": COMM_SLOTS - 1, "AGG_PAYLOAD_BYTES": agg_payload_bytes}
    return specials.get


def _entries() -> tuple[p4_const_tables.Entry, ...]:
    return p4_const_tables.entries("common/forwarding.p4", "classification", len(KEYS))


def _table(keys: dict[str, int], agg_payload_bytes: int) -> tuple[str | None, int]:
    """(class, drop reason) of the first entry that matches; the default otherwise."""
    entry = p4_const_tables.first_match(_entries(), KEYS, keys, _special(agg_payload_bytes))
    if entry is None:
        return None, DropReason.NON_COLLECTIVE
    argument = entry.arguments[0] if entry.arguments else None
    if entry.action in ("classify_collective", "route_ipv4"):
        return CLASS_NAMES[argument or "CLASS_ROUTE"], DropReason.NONE
    if entry.action == "classify_barrier":
        return "barrier", DropReason.NONE
    if entry.action == "barrier_out_of_range":
        return "barrier", DropReason.COMM_RANGE
    assert argument is not None
    return None, p4_const_tables.constant(argument)


def test_the_entries_are_read() -> None:
    entries = _entries()
    assert len(entries) > 20
    assert entries[0].action == "reject" and entries[0].arguments == ("DROP_MALFORMED",)


def test_the_table_classifies_as_the_model_does() -> None:
    model_for = {
        my_node: SwitchModel(SwitchState(switch=0, node_id=my_node)) for my_node in (0, MY_NODE)
    }
    agg_payload_bytes = model_for[0].sizes.agg_payload_bytes
    checked = 0
    for (
        parse_error,
        kind,
        version,
        op,
        role,
        src,
        my_node,
        dst,
        payload_len,
        flags,
        ipv4_prefix,
        ipv4_src,
        comm_id,
    ) in itertools.product(
        (False, True),
        ("coll", "ipv4", "other"),
        (wire.PROTOCOL_VERSION, wire.PROTOCOL_VERSION + 1),
        (*range(16), 255),
        tuple(PortRole),
        (PORT_NODE, PORT_NODE + 1),
        (0, MY_NODE),
        (0, MY_NODE, MY_NODE + 1),
        (agg_payload_bytes, agg_payload_bytes + 4),
        (0, wire.Flag.MERGE),
        (wire.IPV4_PREFIX >> 16, 0x0B00),
        (PORT_NODE, PORT_NODE + 1),
        (0, COMM_SLOTS - 1, COMM_SLOTS),
    ):
        model = model_for[my_node]
        model.state.ports = {PORT: (role, PORT_NODE)}
        parsed = Parsed(parse_error=parse_error)
        coll_valid = kind == "coll" and not parse_error
        ipv4_valid = kind == "ipv4" and not parse_error
        if coll_valid:
            parsed.coll = wire.Header(
                op=op,
                flags=flags,
                src_node=src,
                dst_node=dst,
                payload_len=payload_len,
                version=version,
                comm_id=comm_id,
            )
        if ipv4_valid:
            parsed.ipv4_src = 0x0A000000 | ipv4_src
            parsed.ipv4_dst = (ipv4_prefix << 16) | 0x0005
        decision = Decision()
        klass = model._classify(parsed, PORT, 1 << 16, decision)
        if klass == "barrier" and comm_id >= model.sizes.comm_slots:
            decision.drop_reason = DropReason.COMM_RANGE  # NetcollIngress's range check
        keys = {
            "parse_error": int(parse_error),
            "coll_valid": int(coll_valid),
            "version": version,
            "op": op,
            "port_role": int(role),
            "src_diff": src ^ PORT_NODE,
            "my_node": my_node,
            "dst_diff": dst ^ my_node,
            "payload_len": payload_len,
            "flags": int(flags),
            "ipv4_valid": int(ipv4_valid),
            "ipv4_prefix": ipv4_prefix,
            "ipv4_src_diff": ipv4_src ^ PORT_NODE,
            "comm_id": comm_id,
        }
        assert _table(keys, agg_payload_bytes) == (klass, decision.drop_reason), keys
        checked += 1
    assert checked > 100_000
    assert model_for[0].sizes.comm_slots == COMM_SLOTS
    assert p4_const_tables.constant("OP_MP") == Op.MP
