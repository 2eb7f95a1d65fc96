"""Switch-merged multicast ACKs, the receivers' side (``p4src/common/ackmerge.p4``).

In this mode a receiver does not ACK its co-root: it sends an ACK flagged MERGE into the tree
at checkpoints only, cum = k * ack_every for each checkpoint k it crosses and the final cum =
seg_count. When a segment it already has comes again, the root has not heard a merged ACK
(lost, or a switch restarted): the receiver repeats the checkpoint that segment belongs to (the
root retransmits from its slowest cum, a checkpoint boundary, so that is the checkpoint it
waits for), at most once per ``nack_delay * 4`` (one retransmission round). Every receiver uses
the same ack_every, so the switches count the same checkpoint k from each child; when all
children have it, one ACK goes up, and the root hears one stream in total.
"""

from __future__ import annotations

import collections

from controller import wire
from controller.wire import Flag, Op
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.feedback import NO_SACK
from host_agents.transport.keys import McastKey
from host_agents.transport.messages import Incoming
from host_agents.transport.stamps import echo_of

# crossing more checkpoints at once (a repair filled a long gap) sends only the newest few:
# the switches keep NETCOLL_ACK_WINDOW (8) cells per tree, and ACKs are cumulative
MAX_CHECKPOINTS_AT_ONCE = 4


def checkpoint_reached(cum: int, seg_count: int, every: int) -> int:
    """The highest checkpoint ordinal a receiver holding ``cum`` in-order segments has."""
    if cum >= seg_count:
        return -(-seg_count // every)  # the final checkpoint, ceil(seg_count / every)
    return cum // every


def checkpoint_cum(ordinal: int, seg_count: int, every: int) -> int:
    """The cumulative ACK checkpoint ``ordinal`` stands for."""
    return min(ordinal * every, seg_count)


class SwitchAcks:
    """Checkpoint ACKs of one host, sent into the multicast tree for the switches to merge."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        # (multicast, checkpoint) -> when last repeated, the newest completed_memory of them
        self._repeated: collections.OrderedDict[tuple[McastKey, int], float] = (
            collections.OrderedDict()
        )

    @property
    def every(self) -> int:
        return max(1, self.endpoint.cfg.ack_every)

    def on_segment(self, msg: Incoming, hdr: wire.Header, *, new: bool) -> None:
        """Segment ``hdr`` of ``msg`` arrived: new data may cross checkpoints; one we had
        already is a retransmission asking for a checkpoint again."""
        if new:
            self.progress(msg, hdr)
        else:
            self.repeat(hdr, msg.contiguous, msg.seg_count)

    def progress(self, msg: Incoming, hdr: wire.Header) -> None:
        """Send every checkpoint ``msg`` crossed since the last one sent."""
        reached = checkpoint_reached(msg.contiguous, msg.seg_count, self.every)
        first = max(msg.checkpoint + 1, reached - MAX_CHECKPOINTS_AT_ONCE + 1)
        for ordinal in range(first, reached + 1):
            self._send(hdr, ordinal, msg.seg_count)
        msg.checkpoint = max(msg.checkpoint, reached)

    def repeat(self, hdr: wire.Header, cum: int, seg_count: int) -> None:
        """Segment ``hdr.seg_idx`` came again to a receiver holding ``cum`` segments in order:
        repeat the checkpoint the segment belongs to, if reached and not just repeated."""
        asked = min(
            hdr.seg_idx // self.every + 1, checkpoint_reached(seg_count, seg_count, self.every)
        )
        if checkpoint_reached(cum, seg_count, self.every) < asked:
            return  # not there yet: the ACK goes when it is
        key = (McastKey.of(hdr), asked)
        now = self.endpoint.loop.time()
        if now - self._repeated.get(key, -1e9) < self.endpoint.cfg.nack_delay * 4:
            return
        self._repeated[key] = now
        self._repeated.move_to_end(key)
        while len(self._repeated) > self.endpoint.cfg.completed_memory:
            self._repeated.popitem(last=False)
        self._send(hdr, asked, seg_count)

    def _send(self, hdr: wire.Header, ordinal: int, seg_count: int) -> None:
        key = McastKey.of(hdr)
        ack = key.feedback(
            Op.ACK,
            self.endpoint.node,
            key.root,
            seq=checkpoint_cum(ordinal, seg_count, self.every),
            seg_idx=ordinal,
            seg_count=seg_count,
            flags=Flag.MERGE,
            stamp=echo_of(hdr),  # which copy prompted it: the root's round trip from any copy
        )
        self.endpoint.send_frame(self.endpoint.directory.mac(key.root), ack, NO_SACK)
        self.endpoint.stats.acks_sent += 1
