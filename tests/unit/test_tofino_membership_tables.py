"""MembershipCheck and LocalReply as constant tables (NETCOLL_MEMBERSHIP_TABLES, the TNA
program's; common/membership.p4): their entries, read from the source and taken first match
first, decide every MP kind and the slots at both ends of each range as the reference model's
_membership and _local do (controller/switch_model.py, which the BMv2 tests check against the
v1model program's if statements)."""

from __future__ import annotations

import itertools

import pytest

from controller import wire
from controller.switch_frames import Parsed
from controller.switch_model import Decision, SwitchModel
from controller.switch_state import SwitchState
from controller.wire import DropReason, MpKind, MpStatus, Op
from tests import p4_const_tables

pytestmark = pytest.mark.unit

SOURCE = "common/membership.p4"
MODEL = SwitchModel(SwitchState(switch=0, node_id=0x4001))
TREE_SLOTS, COMM_SLOTS = MODEL.sizes.tree_slots, MODEL.sizes.comm_slots
SPECIAL = {"TREE_SLOT_LAST": TREE_SLOTS - 1, "COMM_SLOT_LAST": COMM_SLOTS - 1}
KINDS = (0, *MpKind, 5, 255)
SLOTS = (0, COMM_SLOTS - 1, COMM_SLOTS, TREE_SLOTS - 1, TREE_SLOTS, 0xFFFF)
# what each admitted kind asks of the state controls
STATE_OPS = {
    MpKind.WRITE_TREE: ("STATE_TREE_MP_WRITE", 0),
    MpKind.READ_TREE: ("STATE_TREE_MP_READ", 0),
    MpKind.WRITE_BARRIER: ("STATE_BARRIER_MP_WRITE", 1),
    MpKind.READ_BARRIER: ("STATE_BARRIER_MP_READ", 1),
}


def _apply(table: str, keys: tuple[str, ...], values: dict[str, int]) -> tuple[str, list[int]]:
    _, action, arguments = p4_const_tables.applied(SOURCE, table, keys, values, SPECIAL.get)
    return action, [p4_const_tables.value(a, SPECIAL.get) for a in arguments]


def test_the_admission_table_refuses_and_admits_as_the_model_does() -> None:
    assert COMM_SLOTS < TREE_SLOTS  # so SLOTS holds every boundary of both ranges
    for kind, slot in itertools.product(KINDS, SLOTS):
        action, arguments = _apply("mp_admission", ("kind", "slot"), {"kind": kind, "slot": slot})
        mp = wire.MiniPacket(kind=kind, slot=slot, generation=1)
        model_status, _ = SwitchModel(MODEL.state)._membership(mp)
        if model_status in (MpStatus.BAD_KIND, MpStatus.BAD_SLOT):
            assert (action, arguments) == ("refuse", [model_status]), (kind, slot)
        else:  # admitted: the state control decides the generation's status
            name, barrier = STATE_OPS[MpKind(kind)]
            expected = [p4_const_tables.constant(name), barrier]
            assert (action, arguments) == ("admit", expected), (kind, slot)


def test_the_reply_table_answers_as_the_model_does() -> None:
    for op, status in itertools.product((Op.PING, Op.MP), MpStatus):
        action, arguments = _apply(
            "reply_of", ("op", "status"), {"op": int(op), "status": int(status)}
        )
        decision = Decision()
        parsed = Parsed(coll=wire.Header(op=op, src_node=0x21, dst_node=0x4001))
        if op == Op.MP:
            parsed.mp = wire.MiniPacket(kind=0, slot=0)  # the model's _membership: BAD_KIND
        model = SwitchModel(MODEL.state)
        model._membership = lambda mp, s=status: (s, mp)  # type: ignore[method-assign]
        model._local(parsed, decision)
        assert parsed.coll is not None
        if op == Op.PING:
            assert parsed.coll.op == Op.PONG and action == "pong"
            continue
        assert parsed.coll.op == Op.MP_REPLY
        reason = DropReason(arguments[0]) if action == "mp_reply_counted" else DropReason.NONE
        assert action in ("mp_reply", "mp_reply_counted"), (op, status)
        assert reason == decision.drop_reason, (op, status)
