"""common/reduce.p4 AggHeaderCheck, agg_repair and ReduceDecide as pure functions: which
headers a switch refuses, how it repairs a reduction, and what it sends for a REDUCE or RESULT
once AggState has classified it and updated the slot. Used by
:class:`controller.switch_model.SwitchModel`; docs/protocol.md has the state machine."""

from __future__ import annotations

from controller import wire
from controller.switch_barrier import BarrierOut
from controller.switch_rules import AGG_RESULT_KNOWN, AggVerdict, LaneMode
from controller.wire import DropReason, Flag, Op

AggDecision = tuple[AggVerdict | None, LaneMode, DropReason]


def agg_header_reason(coll: wire.Header, comm_slots: int) -> DropReason:
    """common/reduce.p4 AggHeaderCheck: every index from the header checked before a register
    is touched."""
    if coll.comm_id >= comm_slots:
        return DropReason.COMM_RANGE
    if coll.seg_idx >= wire.AGG_CHUNK_LIMIT:
        return DropReason.AGG_CHUNK_RANGE
    if not 1 <= coll.tree <= wire.AGG_OP_MAX:
        return DropReason.AGG_BAD_OP
    return DropReason.NONE


def agg_admission_with_asks(reason: DropReason, in_port: int, parent: int) -> DropReason:
    """common/reduce.p4 AggAdmissionWithAsks, from AggAdmission's ``reason``: a
    REDUCE from the parent port is admitted (the parent asks for this subtree's part)."""
    if reason == DropReason.NOT_CHILD and parent != 0 and in_port == parent:
        return DropReason.NONE
    return reason


def agg_repair(
    coll: wire.Header, previous: int, in_bit: int, child_mask: int, classified: AggDecision
) -> AggDecision:
    """common/reduce.p4 agg_repair: an ask from the parent (a REDUCE from its port) is
    answered with the slot's aggregate when complete and passed to the missing children when
    not; a resent REDUCE that finds its child recorded and the slot incomplete asks them."""
    if coll.op != Op.REDUCE:
        return classified
    if not child_mask & in_bit:
        if previous & AGG_RESULT_KNOWN:
            return None, LaneMode.NONE, DropReason.AGG_DUPLICATE
        if previous == child_mask:
            return AggVerdict.SEND_UP, LaneMode.READ, DropReason.NONE
        return AggVerdict.ASK, LaneMode.NONE, DropReason.NONE
    _, lanes, reason = classified
    if reason == DropReason.AGG_DUPLICATE and coll.flags & Flag.RETRANSMIT:
        return AggVerdict.ASK, lanes, DropReason.NONE
    return classified


def reduce_decide(
    coll: wire.Header, verdict: AggVerdict, child_mask: int, previous: int, me: int, before: int
) -> BarrierOut:
    """common/reduce.p4 ReduceDecide for a verdict other than ABSORB: the packet and how it
    leaves (``kind`` as in BarrierOut: reply, unicast to the parent, or mcast to ``children``).
    ``before``: at the root, the tag of the chunk it completed before (agg_completed), which
    its RESULT carries in seq; an answer from a slot carries 0, a RESULT passed down its own."""
    out = coll.with_(src_node=me, payload_crc=0)
    if verdict == AggVerdict.ANSWER:
        return BarrierOut(out.with_(op=Op.RESULT, seq=0), "reply")
    if verdict == AggVerdict.SEND_UP:
        return BarrierOut(out, "unicast")
    if verdict == AggVerdict.ASK:  # still a REDUCE: to the children not recorded
        return BarrierOut(out, "mcast", child_mask & ~previous)
    if coll.op == Op.REDUCE:
        out = out.with_(seq=before)
    return BarrierOut(out.with_(op=Op.RESULT), "mcast", child_mask)
