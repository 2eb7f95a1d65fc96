"""What a switch-merged ACK may claim, checked by the multicast's root.

The switches merge the receivers' checkpoint ACKs (``p4src/common/ackmerge.p4``) and send up
the lowest cum the cell's children claimed, never the completing child's own claim. The root
checks what reaches it anyway, against what it alone knows: checkpoint ``k`` (``seg_idx``)
stands for cum ``min(k * ack_every, seg_count)`` (:func:`checkpoint_cum`; every receiver uses
the root's ``ack_every``), ``seg_count`` is the root's own, and no cum may exceed the segments
the root has sent. A claim that fails any of these is dropped (``merged ACK claim``).

The echoed send stamp of a merged ACK sets the root's round trip. It is taken only when it is
a stamp the root put on a transmission of a segment of that checkpoint (its own range of
segments): a member cannot make up a stamp, and one that completes a cell last can only report
a round trip as long as its own ACK's delay, as any slow receiver would.
"""

from __future__ import annotations

import collections

from host_agents.transport.merged_acks import checkpoint_cum
from host_agents.transport.stamps import NO_STAMP

CLAIM_REFUSED = "merged ACK claim"  # the drop reason
STAMPS_PER_SEGMENT = 8  # transmissions remembered per segment (retransmissions are few)


def claim_refusal(
    checkpoint: int, cum: int, seg_count: int, *, root_seg_count: int, every: int, sent: int
) -> str | None:
    """Why a merged ACK for ``checkpoint`` claiming ``cum`` of ``seg_count`` segments cannot
    be true for a multicast of ``root_seg_count`` segments of which ``sent`` went out; None
    when it can."""
    if seg_count != root_seg_count:
        return f"{CLAIM_REFUSED}: seg_count {seg_count}, not {root_seg_count}"
    last = -(-root_seg_count // every)
    if not 1 <= checkpoint <= last:
        return f"{CLAIM_REFUSED}: checkpoint {checkpoint} outside 1..{last}"
    if cum != checkpoint_cum(checkpoint, root_seg_count, every):
        return f"{CLAIM_REFUSED}: cum {cum} for checkpoint {checkpoint}"
    if cum > sent:
        return f"{CLAIM_REFUSED}: cum {cum} beyond the {sent} segments sent"
    return None


class SentStamps:
    """The send stamps a root put on each segment's transmissions (bounded per segment)."""

    def __init__(self) -> None:
        self._stamps: dict[int, collections.deque[int]] = {}

    def record(self, seg: int, stamp: int) -> None:
        if stamp == NO_STAMP:
            return
        self._stamps.setdefault(seg, collections.deque(maxlen=STAMPS_PER_SEGMENT)).append(stamp)

    def echo_for(self, echo: int, checkpoint: int, seg_count: int, every: int) -> int:
        """``echo`` when the root stamped it on a segment of ``checkpoint``, else NO_STAMP."""
        if echo == NO_STAMP:
            return NO_STAMP
        first = checkpoint_cum(checkpoint - 1, seg_count, every)
        last = checkpoint_cum(checkpoint, seg_count, every)
        for seg in range(first, last):
            if echo in self._stamps.get(seg, ()):
                return echo
        return NO_STAMP
