"""AggState's decisions as constant tables (p4src/tna/agg_decisions.p4, the TNA program's): their
entries, read from the source and taken first match first, decide every combination of the
decisions' inputs as the reference model does (controller/switch_rules.py agg_key_relation and
agg_classify, which the BMv2 tests check against the v1model program's if statements). The keys
are computed here as AggState's actions and registers compute them, so the operands are
checked too."""

from __future__ import annotations

import itertools

import pytest

from controller.switch_rules import (
    AGG_RESULT_KNOWN,
    MASK32,
    AggKey,
    AggVerdict,
    LaneMode,
    agg_classify,
    agg_key_relation,
)
from controller.wire import DropReason, Op
from tests import p4_const_tables

pytestmark = pytest.mark.unit

SOURCE = "tna/agg_decisions.p4"
TABLE = "agg_classification"
KEYS = ("op", "result_known", "parent", "incomplete", "counted", "relation", "missing_after")
Outcome = tuple[AggVerdict | None, LaneMode, DropReason]


def _outcome(action: str, arguments: tuple[str, ...]) -> Outcome:
    if action == "duplicate":
        return None, LaneMode.NONE, DropReason.AGG_DUPLICATE
    assert action == "decide", action
    verdict, lanes = (p4_const_tables.constant(a) for a in arguments)
    return AggVerdict(verdict), LaneMode(lanes), DropReason.NONE


def _table(keys: dict[str, int], reached: set[int] | None = None) -> Outcome:
    """The table's outcome; ``reached`` collects the entry taken (-1: the default)."""
    index, action, arguments = p4_const_tables.applied(SOURCE, TABLE, KEYS, keys)
    if reached is not None:
        reached.add(index)
    return _outcome(action, arguments)


def _keys(
    op: Op, previous: int, in_bit: int, child_mask: int, parent: int, fresh: bool
) -> dict[str, int]:
    """The keys as AggState computes them (p4src/tna/state.p4): compute_missing_before before
    the slot register, compute_arrival_operands after it."""
    missing_before = child_mask ^ in_bit
    return {
        "op": int(op),
        "result_known": previous & AGG_RESULT_KNOWN,
        "parent": parent,
        "incomplete": previous ^ child_mask,
        "counted": previous & in_bit,
        "relation": (AggKey.FRESH if fresh else AggKey.SAME).value,
        "missing_after": missing_before ^ previous,
    }


def test_the_entries_are_read() -> None:
    table = p4_const_tables.entries(SOURCE, TABLE, len(KEYS))
    assert len(table) == 10
    assert table[0].match[0] == "OP_RESULT"
    assert p4_const_tables.default_action(SOURCE, TABLE) == (
        "decide",
        ("AGG_ANSWER", "AGG_LANES_READ"),
    )


def test_the_table_decides_as_the_model_does() -> None:
    """Three child ports (bits 0, 1, 2; a parent's port is outside the mask), every set of
    them recorded before, with and without the result flag, a REDUCE or RESULT from each port,
    at the root and below it, on a fresh slot and a kept one."""
    child_mask = 0b0111
    ports = (0b0001, 0b0010, 0b0100, 0b1000)
    reached: set[int] = set()
    checked = 0
    for op, recorded, known, in_bit, parent, fresh in itertools.product(
        (Op.REDUCE, Op.RESULT), range(8), (False, True), ports, (0, 4), (False, True)
    ):
        previous = recorded | (AGG_RESULT_KNOWN if known else 0)
        expected = agg_classify(op == Op.RESULT, fresh, previous, in_bit, child_mask, parent)
        keys = _keys(op, previous, in_bit, child_mask, parent, fresh)
        outcome = _table(keys, reached)
        assert outcome == expected, (op, bin(recorded), known, bin(in_bit), parent, fresh)
        checked += 1
    assert checked == 512
    # every entry and the default decide some input: none is left unchecked
    assert reached == set(range(-1, 10)), reached


def test_a_wider_tree_decides_as_the_model_does() -> None:
    """Thirty child ports, the most a port bitmap's 31 bits below the flag hold with a parent:
    the first, the last and a middle port, each recorded set that matters to them."""
    child_mask = (1 << 30) - 1
    parent_bit = 1 << 30
    for op, in_bit, recorded, parent, fresh in itertools.product(
        (Op.REDUCE, Op.RESULT),
        (1, 1 << 15, 1 << 29, parent_bit),
        (0, 1, 1 << 15, 1 << 29, child_mask, child_mask ^ 1, child_mask ^ (1 << 29)),
        (0, 31),
        (False, True),
    ):
        for known in (False, True):
            previous = recorded | (AGG_RESULT_KNOWN if known else 0)
            expected = agg_classify(op == Op.RESULT, fresh, previous, in_bit, child_mask, parent)
            keys = _keys(op, previous, in_bit, child_mask, parent, fresh)
            assert _table(keys) == expected, (op, hex(previous), hex(in_bit), parent, fresh)


RELATION_KEYS = ("relation", "ahead")
RELATION_TABLE = "agg_relation_of"


def _relation(relation_before: AggKey, ahead: int) -> tuple[AggKey, DropReason]:
    keys = {"relation": relation_before.value, "ahead": ahead}
    _, action, arguments = p4_const_tables.applied(SOURCE, RELATION_TABLE, RELATION_KEYS, keys)
    if action == "stale":
        return AggKey.STALE, DropReason.AGG_STALE
    assert action == "relation", action
    return AggKey(p4_const_tables.constant(arguments[0])), DropReason.NONE


def test_the_relation_table_refines_as_the_model_does() -> None:
    """Owners the same or not, tags at every distance that matters in serial arithmetic (the
    same, one and 2**31 - 1 ahead, 2**31 apart, behind), across the 32-bit wrap."""
    distances = (0, 1, 2, 0x7FFFFFFF, 0x80000000, 0x80000001, MASK32)
    checked = 0
    for stored_tag, distance, owners_differ in itertools.product(
        (0, 5, 0x7FFFFFFF, 0xFFFFFFFE), distances, (False, True)
    ):
        tag = (stored_tag + distance) & MASK32
        stored_owner, owner = 7, (8 if owners_differ else 7)
        expected = agg_key_relation(stored_tag, stored_owner, tag, owner)
        # agg_owner_take gives stored ^ offered, the action FRESH for a change, else SAME
        before = AggKey.FRESH if stored_owner ^ owner else AggKey.SAME
        # agg_key_claim gives tag - stored
        relation, reason = _relation(before, (tag - stored_tag) & MASK32)
        assert relation == expected, (hex(stored_tag), hex(distance), owners_differ)
        assert reason == (DropReason.AGG_STALE if expected == AggKey.STALE else DropReason.NONE)
        checked += 1
    assert checked == 56
