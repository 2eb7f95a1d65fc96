"""common/barrier.p4 BarrierDecide as a pure function: what a switch sends for an ARRIVE or
RELEASE once BarrierState has classified it and updated the slot. Used by
:class:`controller.switch_model.SwitchModel`; docs/protocol.md has the state machine."""

from __future__ import annotations

from dataclasses import dataclass

from controller import wire
from controller.switch_rules import MASK16, epoch_after
from controller.wire import DropReason, Flag, Op


@dataclass(frozen=True, slots=True)
class BarrierView:
    """What BarrierDecide reads of the slot and the ingress port."""

    child_mask: int
    parent: int  # 0 at the root switch
    parent_bit: int  # the parent port's child bit (0 at the root)
    released: int  # as read before this packet
    arrived: int  # the cell's bitmap for the packet's epoch, after this packet
    echo_to: int  # the ingress port's bit if it is a host port, else 0
    me: int  # this switch's node id


@dataclass(frozen=True, slots=True)
class BarrierOut:
    """The packet to send and how (``kind``: reply, mcast to ``children``, or unicast to the
    parent), or why it is dropped."""

    coll: wire.Header | None = None
    kind: str = ""
    children: int = 0
    drop: int = DropReason.NONE


def barrier_decide(coll: wire.Header, verdict: str, view: BarrierView) -> BarrierOut:
    """``verdict``: answer (already released), advance (RELEASE from the parent), asked
    (ARRIVE with REPLY_NOW from the parent) or count (an arrival recorded)."""
    epoch, me = coll.epoch, view.me
    complete = view.arrived == view.child_mask
    repairs = bool(coll.flags & Flag.REPLY_NOW)
    resent = bool(coll.flags & Flag.RETRANSMIT)
    first_open = (epoch - view.released) & MASK16 == 1
    missing = view.child_mask & ~view.arrived if first_open else 0

    def mcast(children: int, **fields: int) -> BarrierOut:
        return BarrierOut(coll.with_(src_node=me, **fields), "mcast", children)

    if verdict == "answer":
        return BarrierOut(coll.with_(op=Op.RELEASE, src_node=me), "reply")
    if verdict == "advance":
        return mcast(view.child_mask)
    if verdict == "asked":
        previous = (epoch - 1) & MASK16
        flags = coll.flags & ~Flag.RETRANSMIT & 0xFF  # an answer asks nothing
        if epoch_after(previous, view.released):
            return mcast(view.child_mask, op=Op.RELEASE, epoch=previous, flags=flags)
        if previous != view.released:
            return BarrierOut(drop=DropReason.STALE_RELEASE)
        if complete:
            return BarrierOut(coll.with_(src_node=me, flags=flags), "reply")
        if missing:
            return mcast(missing, flags=flags)
        return BarrierOut(drop=DropReason.ABSORBED)
    if not complete and repairs:
        asked = missing if resent else 0
        if asked:
            return mcast(asked | view.echo_to, dst_node=coll.src_node)
        if view.echo_to:
            return BarrierOut(coll.with_(src_node=me, dst_node=coll.src_node), "reply")
        return BarrierOut(drop=DropReason.ABSORBED)
    if not complete:
        return BarrierOut(drop=DropReason.ABSORBED)
    if view.parent == 0:
        return mcast(view.child_mask, op=Op.RELEASE)
    if repairs and view.echo_to and view.parent_bit:
        return mcast(view.parent_bit | view.echo_to, dst_node=coll.src_node)
    return BarrierOut(coll.with_(src_node=me), "unicast")
