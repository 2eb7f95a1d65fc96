"""Multicast, the receivers' side.

For an acknowledged multicast a receiver ACKs cumulatively to its ACK target (its group's
co-root, or the root: :mod:`host_agents.plans`): once complete, and before that, for a message
longer than the root's window, every ``ack_every`` segments or ``ack_delay``, for a shorter one
only with a NACK. It reports a gap with a
NACK after a random delay, cancelled if the repair another receiver asked for arrives first.
A missing tail (no later segment shows the gap) is reported after a silence, so a lost last
segment costs a round trip to the ACK target, not a timeout at the root. Both waits are learnt
from how the NACKs turned out (:mod:`host_agents.transport.nack_timing`).
With switch-merged ACKs the ACKs are checkpoints into the tree instead
(:mod:`host_agents.transport.merged_acks`); NACKs go the same way.
For a published one (NO_ACK) it only collects segments; the caller asks for repairs
(:mod:`host_agents.transport.publish`).
"""

from __future__ import annotations

from collections.abc import Callable

from controller import wire
from controller.wire import Flag, Op
from host_agents.entitlement import Refusal
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.feedback import MAX_NACK_RANGES, NO_SACK, pack_ranges
from host_agents.transport.inbox import Inbox
from host_agents.transport.keys import McastKey
from host_agents.transport.merged_acks import SwitchAcks
from host_agents.transport.messages import Incoming
from host_agents.transport.nack_timing import NackTiming
from host_agents.transport.publish import RepairRequests
from host_agents.transport.queue_wait import queue_allowance, silence_is_loss

AckSink = Callable[[wire.Header], None]  # an ACK this node sends to itself (as a co-root)
NackSink = Callable[[McastKey, list[tuple[int, int]]], None]  # the same for a NACK
RelaySink = Callable[[McastKey, int], None]  # a segment, for this node's co-root duty


class MulticastReceiver:
    def __init__(
        self,
        endpoint: Endpoint,
        inbox: Inbox,
        repairs: RepairRequests,
        *,
        ack_self: AckSink,
        nack_self: NackSink,
        relay: RelaySink,
        filled: RelaySink,
    ) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.loop = endpoint.loop
        self.inbox = inbox
        self.repairs = repairs
        self._ack_self = ack_self
        self._nack_self = nack_self
        self._relay = relay  # a repair of a segment this node had
        self._filled = filled  # a segment this node lacked
        self.timing = NackTiming(self.cfg, endpoint.stats, self.loop.time)
        self.switch_acks = SwitchAcks(endpoint)

    def incoming(self, key: McastKey, size: int) -> Incoming:
        return self.inbox.expect(key, size, key.root, "broadcast")

    def _ack_target(self, comm: int, root: int, tree: int) -> int | None:
        endpoint = self.endpoint
        if endpoint.plan is None or comm not in endpoint.directory.comms:
            return None
        return endpoint.plan(comm, root, tree).ack_target.get(endpoint.node)

    def _merged(self, hdr: wire.Header) -> bool:
        """Do the switches merge this multicast's ACKs?"""
        plan = self.endpoint.plan
        return plan is not None and bool(plan(hdr.comm_id, hdr.root_node, hdr.tree).merged_by)

    def on_data(self, hdr: wire.Header, payload: memoryview) -> None:
        """A multicast segment (or its unicast repair) from an entitled root."""
        key = McastKey.of(hdr)
        no_ack = bool(hdr.flags & Flag.NO_ACK)
        target = hdr.root_node if no_ack else self._ack_target(hdr.comm_id, hdr.root_node, hdr.tree)
        if target is None:
            self.endpoint.drop(Refusal.NOT_RECEIVER, hdr)
            return
        merged = not no_ack and self._merged(hdr)
        completed = self.inbox.completed.get(key)
        if completed is not None:
            self.timing.arrived(key, hdr.seg_idx, hdr.flags, new=False)
            self.endpoint.stats.duplicates += 1
            if hdr.flags & Flag.REPAIR and not no_ack:
                self._relay(key, hdr.seg_idx)
            if merged:
                self.switch_acks.repeat(hdr, completed, hdr.seg_count)
            elif not no_ack:
                self._report(hdr, target, completed, final=True, duplicate=True)
            return
        admitted = self.inbox.admit(key, hdr, payload)
        if admitted is None:
            return
        msg, new = admitted
        msg.published = no_ack
        if not no_ack:
            self.timing.arrived(key, hdr.seg_idx, hdr.flags, new=new)
            if new:
                self._filled(key, hdr.seg_idx)
        if hdr.flags & Flag.REPAIR:
            if no_ack and (new or hdr.op == Op.UNICAST):
                # a published multicast's pause learns from repairs this node asked for (or
                # needed): a repair multicast for other askers is no false alarm of ours
                self.repairs.repaired(msg, new)
            elif not no_ack:
                # new here too: what the root had to repair to a co-root its group's members
                # may lack as well (a loss above the co-root), and they cannot ask for a
                # message they never saw (a single-segment pack lost on a global link)
                self._relay(key, hdr.seg_idx)
        msg.unacked += 1
        if msg.done.done():
            msg.cancel_timers()
            if merged:
                self.switch_acks.on_segment(msg, hdr, new=new)
            elif not no_ack:
                self._report(hdr, target, msg.seg_count, final=True, duplicate=not new)
            if msg.consumed:
                self.inbox.retire(msg)
            return
        if no_ack:
            return  # the receiver asks for what is missing when things fall silent
        if msg.nack_timer is None:
            if msg.highest >= msg.contiguous:
                # a gap: wait a random moment, the repair another receiver asked for may come
                delay = self.endpoint.rng.uniform(0.2, 1.0) * self.timing.gap_wait
            else:
                delay = self.timing.tail_quiet  # in order so far: ask for the rest if it stalls
            msg.nack_timer = self.loop.call_later(delay, self._nack, msg, hdr, target)
        if merged:
            self.switch_acks.on_segment(msg, hdr, new=new)
            return
        if not new or msg.unacked >= self.cfg.ack_every:
            self._ack_now(msg, hdr, target)
        elif msg.ack_timer is None and not self._fits_window(msg):
            # only a message longer than the root's window needs its progress reported
            # before it completes. A shorter one all goes out at once: nothing at the root
            # waits on its progress, and gaps and a stalled tail are NACKed. On a loaded
            # host this delayed ACK fired between a 16 KiB broadcast's two segments, a
            # second ACK round through the co-roots (docs/performance.md)
            msg.ack_timer = self.loop.call_later(
                self.cfg.ack_delay, self._ack_now, msg, hdr, target
            )

    def _fits_window(self, msg: Incoming) -> bool:
        """Does the root send all of ``msg`` at once (no more segments than its window)? Then
        its receivers report progress only when complete or with a NACK."""
        return msg.seg_count <= self.cfg.mcast_window

    def _ack_now(self, msg: Incoming, hdr: wire.Header, target: int) -> None:
        if msg.ack_timer is not None:
            msg.ack_timer.cancel()
            msg.ack_timer = None
        msg.unacked = 0
        if msg.contiguous > 0:  # nothing in order yet: nothing the root could use
            self._report(hdr, target, msg.contiguous, final=False)

    def _report(
        self, hdr: wire.Header, target: int, cum: int, *, final: bool, duplicate: bool = False
    ) -> None:
        """Our own progress goes to our ACK target, which may be ourselves as co-root.
        ``final`` marks the report of a complete receiver answering a retransmission;
        ``duplicate``, one answering a repair of a segment it had (a D-SACK: whoever sent the
        repair learns it was not needed)."""
        flags = Flag.LAST if final else Flag.NONE
        held = 0
        if duplicate and hdr.flags & Flag.REPAIR:
            flags |= Flag.DUPLICATE
            held = wire.held_us(self.inbox.held_for(McastKey.of(hdr), hdr.seg_idx))
        ack = McastKey.of(hdr).feedback(
            Op.ACK,
            self.endpoint.node,
            target,
            seq=cum,
            seg_count=hdr.seg_count,
            flags=flags,
            seg_idx=hdr.seg_idx if flags & Flag.DUPLICATE else 0,
            msg_len=held,
        )
        if target == self.endpoint.node:
            self._ack_self(ack)
            return
        self.endpoint.send_frame(self.endpoint.directory.mac(target), ack, NO_SACK)
        self.endpoint.stats.acks_sent += 1

    def _nack(self, msg: Incoming, hdr: wire.Header, target: int) -> None:
        msg.nack_timer = None
        if msg.done.done():
            return
        now = self.loop.time()
        silent = now - msg.last_arrival
        merged = self._merged(hdr)
        # a tail that stopped while this host's link still delivers is queued, not lost
        # (queue_wait): asked for once the link goes quiet, or after rto_max in any case.
        # Under switch-merged ACKs the root probes a silent tail itself (its newest segment:
        # what a receiver lacks before it then shows as a gap), so its receivers ask only
        # for gaps: with every rank rooting 16 KiB, 3,298 of 3,734 NACKs were for tails
        # still queued, and 2,342 of 2,377 even when asked only after 2 s of silence
        quiet = self.timing.tail_quiet + queue_allowance(self.endpoint, now)
        limit = max(quiet, self.cfg.rto_max)
        stalled = not merged and silence_is_loss(self.endpoint, now, silent, quiet, limit)
        ranges = msg.missing_ranges(MAX_NACK_RANGES, through_tail=stalled)
        # a NACK is asked again after a few ACK-target round trips, doubling while nothing
        # comes: with every receiver of a big tree asking, a fixed short retry floods the
        # switches with NACKs and the repairs cannot get through (a 1 MiB broadcast stalled)
        retry = msg.nack_retry or self.timing.retry_after()
        if not ranges and merged:
            return  # no gap: the next segment to arrive looks again (or the root's probe)
        if not ranges or now - msg.last_nack < retry:
            # nothing to report yet (segments still flowing) or reported just now: look again
            wait = max(retry - (now - msg.last_nack), quiet - silent)
            if not stalled and silent >= quiet:
                # held: look again at twice the silence, or at the limit if that is sooner
                wait = max(wait, min(silent, limit - silent))
            msg.nack_timer = self.loop.call_later(
                max(wait, self.cfg.nack_delay), self._nack, msg, hdr, target
            )
            return
        msg.last_nack = now
        if self._fits_window(msg) and not merged:
            # a short message's progress goes with each loss report, its only ACKs before
            # completion, so a co-root's probes and relays, and the root's timeout, send
            # what it lacks rather than what it has (with no progress before completion,
            # 16 KiB broadcasts at 5% loss took 119 and 183 ms in two runs, 73-105 before)
            self._ack_now(msg, hdr, target)
        self.endpoint.stats.nacks_sent += 1
        if stalled and msg.highest + 1 <= msg.contiguous:
            self.endpoint.stats.tail_nacks += 1
        self.timing.asked(McastKey.of(hdr), ranges, msg.highest)
        self._send_nack(McastKey.of(hdr), target, ranges)
        msg.nack_retry = min(retry * 2, self.cfg.rto_max)
        msg.nack_timer = self.loop.call_later(retry, self._nack, msg, hdr, target)

    def ask(self, msg: Incoming) -> None:
        """As a co-root, ask the root for all ``msg`` lacks, though nothing of it may have
        come: the caller knows it is due (the other messages of its operation came). A
        co-root that lost every segment of a short multicast, with its group behind it,
        otherwise waits for the root's timeout, a second or more on a loaded emulator. A
        member asks nothing: its co-root repairs it unasked (probe, relay, outrun), and 72
        members asking for packs whose leaders were still gathering sent 600 NACKs per
        lossless packed allgather on BMv2 and took 1.4 times as long."""
        key = msg.key
        if msg.done.done() or not isinstance(key, McastKey):
            return
        target = self._ack_target(key.comm, key.root, key.tree)
        ranges = msg.missing_ranges(MAX_NACK_RANGES, through_tail=True)
        if target != self.endpoint.node or not ranges:
            return
        msg.last_nack = self.loop.time()
        self.endpoint.stats.nacks_sent += 1
        self.endpoint.stats.due_asks += 1
        self._send_nack(key, target, ranges)

    def _send_nack(self, key: McastKey, target: int, ranges: list[tuple[int, int]]) -> None:
        if target == self.endpoint.node:
            self._nack_self(key, ranges)
            return
        nack = key.feedback(Op.NACK, self.endpoint.node, target)
        self.endpoint.send_frame(self.endpoint.directory.mac(target), nack, pack_ranges(ranges))
