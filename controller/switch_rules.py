"""The switch's pure decision rules, as the P4 program applies them: epochs in serial
arithmetic, mini-packet generations, aggregation admission, merged-ACK sends. Used by
:class:`controller.switch_model.SwitchModel` and re-exported there."""

from __future__ import annotations

import enum

from controller.wire import DropReason, MpStatus, Op

MASK16 = 0xFFFF
MASK32 = 0xFFFFFFFF


def epoch_after(a: int, b: int) -> bool:
    """common/barrier.p4 epoch_distance_after(a - b): a after b modulo 2**16."""
    distance = (a - b) & MASK16
    return distance != 0 and distance < 0x8000


def generation_status(offered: int, stored: int) -> MpStatus:
    """common/membership.p4 mp_generation_status."""
    ahead = (offered - stored) & MASK32
    if ahead == 0:
        return MpStatus.DUPLICATE
    return MpStatus.OK if ahead < 0x80000000 else MpStatus.STALE


AGG_RESULT_KNOWN = 0x80000000  # bit 31 of agg_arrived: never a child bit (ports < 32)


class AggKey(enum.Enum):
    """common/reduce.p4 agg_key_relation: a slot's key against a packet's."""

    SAME = 1
    FRESH = 2  # newer chunk, other configuration, or a never-used slot
    STALE = 3


class AggVerdict(enum.Enum):
    ABSORB = 1
    SEND_UP = 2
    DISTRIBUTE = 3
    ANSWER = 4
    ASK = 5  # the REDUCE down to the children not recorded yet (controller/switch_reduce.py)


class LaneMode(enum.Enum):
    NONE = 0
    SET = 1
    COMBINE = 2
    READ = 3


def agg_key_relation(stored_tag: int, stored_owner: int, tag: int, owner: int) -> AggKey:
    """common/reduce.p4 agg_key_relation (tags compared with 32-bit serial arithmetic)."""
    if stored_owner == owner and stored_tag == tag:
        return AggKey.SAME
    if stored_owner != owner or generation_status(tag, stored_tag) == MpStatus.OK:
        return AggKey.FRESH
    return AggKey.STALE


def agg_admission_reason(
    op: int, in_port: int, in_bit: int, child_mask: int, parent: int
) -> DropReason:
    """common/reduce.p4 AggAdmission."""
    if child_mask == 0:
        return DropReason.BARRIER_UNCONFIGURED
    if op == Op.REDUCE:
        return DropReason.NONE if child_mask & in_bit else DropReason.NOT_CHILD
    if parent == 0 or in_port != parent:
        return DropReason.NOT_PARENT
    return DropReason.NONE


def agg_classify(
    is_result: bool, fresh: bool, previous: int, in_bit: int, child_mask: int, parent: int
) -> tuple[AggVerdict | None, LaneMode, DropReason]:
    """common/reduce.p4 AggClassify: (verdict, what happens to the lanes, drop reason)."""
    if is_result:
        return AggVerdict.DISTRIBUTE, LaneMode.SET, DropReason.NONE
    if previous & AGG_RESULT_KNOWN or (parent == 0 and previous == child_mask):
        return AggVerdict.ANSWER, LaneMode.READ, DropReason.NONE
    if previous & in_bit:
        if previous == child_mask:
            return AggVerdict.SEND_UP, LaneMode.READ, DropReason.NONE
        return None, LaneMode.NONE, DropReason.AGG_DUPLICATE
    mode = LaneMode.SET if fresh else LaneMode.COMBINE
    if previous | in_bit != child_mask:
        return AggVerdict.ABSORB, mode, DropReason.NONE
    return (AggVerdict.DISTRIBUTE if parent == 0 else AggVerdict.SEND_UP), mode, DropReason.NONE


def ack_sends_up(previous: int, in_bit: int, child_mask: int) -> bool:
    """common/ackmerge.p4 ack_sends_up: the ACK completes the cell, or is the leader child's
    (lowest child port's) repeat at a complete cell."""
    leader = child_mask & -child_mask
    return previous | in_bit == child_mask and (previous != child_mask or in_bit == leader)


def agg_epoch_in_window(op: int, epoch: int, released: int, window: int) -> bool:
    """common/reduce.p4 agg_epoch_in_window: a REDUCE opens an instance only within the
    barrier window after the released epoch."""
    ahead = (epoch - released) & MASK16
    return op != Op.REDUCE or not epoch_after(epoch, released) or ahead <= window


def ack_cum_merge(stored_tag: int, stored_cum: int, tag: int, cum: int) -> int:
    """common/ackmerge.p4 ack_cum_merge: the lowest cum the cell's children claimed under
    ``tag`` (a cell left by another tag starts again from ``cum``)."""
    return stored_cum if stored_tag == tag and stored_cum < cum else cum
