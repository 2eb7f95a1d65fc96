"""Losses that other copies show: a co-root's members (transport/outrun.py) and a root's ACK
sources (mcast_root_state.outrun), as RACK (RFC 8985) reads a later delivery."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest

from controller import wire
from host_agents.transport.keys import McastKey
from host_agents.transport.mcast_root_state import McastRoot, outrun
from host_agents.transport.outrun import Progress, outran

pytestmark = pytest.mark.unit

MEMBER = 7
REORDER = 0.005


@dataclass
class Copy:
    """What a co-root knows of one multicast it aggregates (outrun.Progress)."""

    complete_at: float | None
    cum: dict[int, int]
    seg_count: int = 1
    outrun: set[int] = field(default_factory=set)


def key(root: int, epoch: int = 3) -> McastKey:
    return McastKey(root, 1, epoch, wire.Tree.INNET)


def copies(**extra: Copy) -> dict[McastKey, Progress]:
    """Pack 1 completed at the co-root at 1.0 s and the member lacks it; pack 2 at 1.2 s,
    which the member has just completed."""
    table: dict[McastKey, Progress] = {
        key(1): Copy(1.0, {MEMBER: 0}),
        key(2): Copy(1.2, {MEMBER: 1}),
    }
    table.update({key(int(name[1:])): c for name, c in extra.items()})
    return table


def test_a_member_that_completed_a_later_copy_lost_the_earlier_one() -> None:
    assert outran(copies(), key(2), MEMBER, REORDER) == [key(1)]


def test_copies_within_a_reordering_of_each_other_say_nothing() -> None:
    assert outran(copies(), key(2), MEMBER, reorder=0.3) == []


def test_only_the_same_operation_and_a_member_still_lacking_count() -> None:
    table = copies(
        r3=Copy(0.5, {MEMBER: 0}),  # earlier, lacking: named
        r4=Copy(0.5, {MEMBER: 1}),  # earlier, but the member has it
        r5=Copy(1.5, {MEMBER: 0}),  # completed after the one the member has
        r6=Copy(None, {MEMBER: 0}),  # not complete at the co-root: nothing to repair from
    )
    table[McastKey(8, 1, 4, wire.Tree.INNET)] = Copy(0.5, {MEMBER: 0})  # another operation
    assert set(outran(table, key(2), MEMBER, REORDER)) == {key(1), key(3)}


def test_a_member_is_named_once_per_copy() -> None:
    table = copies()
    cast(Copy, table[key(1)]).outrun.add(MEMBER)
    assert outran(table, key(2), MEMBER, REORDER) == []


def test_nothing_is_named_before_the_later_copy_completed_at_the_coroot() -> None:
    table = copies()
    cast(Copy, table[key(2)]).complete_at = None
    assert outran(table, key(2), MEMBER, REORDER) == []


def root(**overrides: Any) -> McastRoot:
    """A root's view: 71 receivers, its copy all sent at 1.0 s; the other ACK sources had it
    all by 1.1 s (they took 0.1 s)."""
    state: dict[str, Any] = {
        "merged": False,
        "receivers": tuple(range(2, 73)),
        "all_sent_at": 1.0,
        "answered": {2: 1.05, 3: 1.1},
    }
    state.update(overrides)
    return cast(McastRoot, SimpleNamespace(**state))


def test_a_root_repairs_a_source_the_others_outran_by_more_than_they_took() -> None:
    assert outrun(root(), [9], now=1.25, floor=0.05)
    assert not outrun(root(), [9], now=1.15, floor=0.05)  # late by less than they took
    assert not outrun(root(), [9], now=1.14, floor=0.1)  # nor by less than the floor


def test_many_behind_or_nothing_answered_or_switch_merged_is_a_queue_or_a_timeout() -> None:
    assert not outrun(root(), list(range(2, 40)), now=5.0, floor=0.05)
    assert not outrun(root(answered={}), [9], now=5.0, floor=0.05)
    assert not outrun(root(all_sent_at=None), [9], now=5.0, floor=0.05)
    assert not outrun(root(merged=True), [9], now=5.0, floor=0.05)
    assert not outrun(root(), [], now=5.0, floor=0.05)
