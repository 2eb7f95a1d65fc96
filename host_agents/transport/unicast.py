"""Reliable unicast messages named (peer, communicator, epoch, tag).

Sender: a per-message sliding window, a per-peer congestion window (AIMD), timeout
retransmission with exponential backoff (RTO from RTT samples, Karn's rule), fast retransmit
of the holes below a selectively acknowledged segment. Receiver: cumulative ACKs with a
64-segment selective-ACK bitmap, delayed (every ``ack_every`` segments or after ``ack_delay``)
except on a gap, a duplicate or the last segment, and duplicate suppression.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from controller import wire
from controller.wire import Flag, Op
from host_agents.transport.config import EngineError, PeerTimeout
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.feedback import SACK_BITS, pack_sack, unpack_sack
from host_agents.transport.inbox import Inbox
from host_agents.transport.keys import UnicastKey
from host_agents.transport.messages import Incoming, Source, segment_bounds, segment_count
from host_agents.transport.rtt import RttEstimate


@dataclass(slots=True)
class PeerState:
    """Congestion and RTT state towards one destination node."""

    cwnd: float
    rtt: RttEstimate
    in_flight: int = 0
    senders: list[OutgoingMessage] = field(default_factory=list)
    # the newest ACK heard from this peer for any message (time, epoch, tag): a timeout's
    # error says whether the peer was silent or answering other messages
    last_ack: tuple[float, int, int] | None = None
    # segments resent to this peer, (comm, epoch, tag, segment) -> the transmission before
    # the last, kept
    # after their message completes: the D-SACK of a resend usually follows the original's ACK
    resent: dict[tuple[int, int, int, int], float] = field(default_factory=dict)


# resends remembered per peer for D-SACKs (the oldest are forgotten first)
RESENT_MEMORY = 1024


class OutgoingMessage:
    """A unicast message being sent."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, key: UnicastKey, source: Source, segment_size: int
    ) -> None:
        self.key = key
        self.dst = key.peer
        self.source = source
        self.seg_count = segment_count(source.size, segment_size)
        self.acked = 0
        self.next_new = 0
        self.sent_at: dict[int, float] = {}  # in flight: segment -> last transmission time
        self.retransmitted: set[int] = set()
        self.sacked: set[int] = set()
        self.done: asyncio.Future[None] = loop.create_future()
        self.last_progress = loop.time()  # of the ACKs, or since something was in flight
        self.timer: asyncio.TimerHandle | None = None
        # doubles on each timeout of this message only. A backoff kept by the peer until a
        # clean sample (RFC 6298 5.5-5.7) halved the spurious retransmissions of a loaded host
        # but slowed every host algorithm under random loss (binomial 16 KiB at 5% loss:
        # 262 ms against 177), so it stays per message (docs/protocol.md)
        self.backoff = 1.0
        self.transmissions = 0


class Unicast:
    def __init__(self, endpoint: Endpoint, inbox: Inbox) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.loop = endpoint.loop
        self.inbox = inbox
        self._peers: dict[int, PeerState] = {}
        self._outgoing: dict[UnicastKey, OutgoingMessage] = {}

    def _peer(self, node: int) -> PeerState:
        peer = self._peers.get(node)
        if peer is None:
            peer = PeerState(cwnd=self.cfg.cwnd_initial, rtt=RttEstimate(self.cfg.rto_initial))
            self._peers[node] = peer
        return peer

    def purge(self, comm: int) -> None:
        """Fail every message still being sent on ``comm`` (it was freed)."""
        for key in [k for k in self._outgoing if k.comm == comm]:
            self._outgoing[key].done.cancel()

    # -- sending ----------------------------------------------------------------------------

    def send(self, key: UnicastKey, source: Source) -> asyncio.Future[None]:
        """Start sending; the future completes when the receiver has every segment."""
        if key in self._outgoing:
            raise EngineError(
                f"message to node {key.peer} (comm {key.comm}, epoch {key.epoch}, tag "
                f"{key.tag}) is already being sent: each (peer, epoch, tag) names one message"
            )
        msg = OutgoingMessage(self.loop, key, source, self.cfg.segment_size)
        self._outgoing[key] = msg
        dst = key.peer
        peer = self._peer(dst)
        peer.senders.append(msg)
        source.subscribe(lambda: self._pump_peer(dst))
        msg.done.add_done_callback(lambda _f: self._finish(msg))
        self._pump_peer(dst)
        return msg.done

    def _finish(self, msg: OutgoingMessage) -> None:
        self._outgoing.pop(msg.key, None)
        peer = self._peer(msg.dst)
        if msg in peer.senders:
            peer.senders.remove(msg)
        peer.in_flight -= len(msg.sent_at)
        msg.sent_at.clear()
        if msg.timer is not None:
            msg.timer.cancel()
        self._pump_peer(msg.dst)

    def _pump_peer(self, dst: int) -> None:
        peer = self._peer(dst)
        progressed = True
        # round robin over this peer's messages so one large message does not starve others
        while progressed and peer.in_flight < int(peer.cwnd):
            progressed = False
            for msg in list(peer.senders):
                if peer.in_flight >= int(peer.cwnd):
                    break
                if self._send_next_segment(msg, peer):
                    progressed = True

    def _send_next_segment(self, msg: OutgoingMessage, peer: PeerState) -> bool:
        if msg.done.done() or msg.next_new >= msg.seg_count:
            return False
        if msg.next_new - msg.acked >= self.cfg.message_window:
            return False
        seg = msg.next_new
        _, end = segment_bounds(msg.source.size, seg, self.cfg.segment_size)
        if msg.source.available < end:
            return False  # a relay waiting for upstream data
        if not msg.sent_at:
            # the peer owes us an answer from now: time queued behind other messages to it
            # (its window full) is no silence of the peer's
            msg.last_progress = self.loop.time()
        self._transmit(msg, seg, retransmit=False)
        msg.next_new += 1
        peer.in_flight += 1
        self._arm_timer(msg, peer)
        return True

    def _transmit(self, msg: OutgoingMessage, seg: int, *, retransmit: bool) -> None:
        start, end = segment_bounds(msg.source.size, seg, self.cfg.segment_size)
        flags = Flag.RETRANSMIT if retransmit else Flag.NONE
        if seg == msg.seg_count - 1:
            flags |= Flag.LAST | Flag.REPLY_NOW
        hdr = wire.Header(
            op=Op.UNICAST,
            comm_id=msg.key.comm,
            epoch=msg.key.epoch,
            tag=msg.key.tag,
            flags=flags,
            src_node=self.endpoint.node,
            dst_node=msg.dst,
            seg_idx=seg,
            seg_count=msg.seg_count,
            msg_len=msg.source.size,
        )
        endpoint = self.endpoint
        endpoint.send_frame(endpoint.directory.mac(msg.dst), hdr, msg.source.view[start:end])
        if retransmit and seg in msg.sent_at:
            # the transmission before this one: the copy a D-SACK of this one says arrived
            # (if an earlier one did, the sample comes out shorter or negative: never longer)
            resent = self._peer(msg.dst).resent
            resent[(msg.key.comm, msg.key.epoch, msg.key.tag, seg)] = msg.sent_at[seg]
            if len(resent) > RESENT_MEMORY:
                del resent[next(iter(resent))]
        msg.sent_at[seg] = self.loop.time()
        msg.transmissions += 1
        endpoint.stats.data_sent += 1
        if retransmit:
            msg.retransmitted.add(seg)
            endpoint.stats.retransmissions += 1

    def _arm_timer(self, msg: OutgoingMessage, peer: PeerState) -> None:
        if msg.timer is None and msg.sent_at:
            rto = peer.rtt.timeout_for(self.cfg, msg.source.size)
            msg.timer = self.loop.call_later(rto * msg.backoff, self._on_timeout, msg)

    def _on_timeout(self, msg: OutgoingMessage) -> None:
        msg.timer = None
        if msg.done.done() or not msg.sent_at:
            return
        peer = self._peer(msg.dst)
        waited = self.loop.time() - msg.last_progress
        if waited > self.cfg.peer_timeout:
            msg.done.set_exception(PeerTimeout(msg.dst, self._timeout_detail(msg, peer), waited))
            return
        peer.cwnd = max(2.0, peer.cwnd / 2)
        rto = peer.rtt.timeout_for(self.cfg, msg.source.size)
        msg.backoff = min(msg.backoff * 2, self.cfg.rto_max / max(rto, 1e-6))
        for seg in sorted(msg.sent_at)[:4]:
            self._transmit(msg, seg, retransmit=True)
        self._arm_timer(msg, peer)

    def _timeout_detail(self, msg: OutgoingMessage, peer: PeerState) -> str:
        heard = "no ACK heard from it at all"
        if peer.last_ack is not None:
            at, epoch, tag = peer.last_ack
            heard = f"its last ACK {self.loop.time() - at:.1f} s ago (epoch {epoch}, tag {tag})"
        return (
            f"sending a message (epoch {msg.key.epoch}, tag {msg.key.tag}; "
            f"{msg.acked}/{msg.seg_count} segments acknowledged after {msg.transmissions} "
            f"transmissions; {heard})"
        )

    def on_ack(self, hdr: wire.Header, payload: memoryview) -> None:
        known = self._peers.get(hdr.src_node)
        if known is not None:
            known.last_ack = (self.loop.time(), hdr.epoch, hdr.tag)
            if hdr.flags & Flag.DUPLICATE:
                self._spurious(known, hdr)
        # looked up by the ACK's sender: only the receiver can acknowledge a message
        msg = self._outgoing.get(UnicastKey(hdr.src_node, hdr.comm_id, hdr.epoch, hdr.tag))
        if msg is None or msg.done.done():
            return
        peer = self._peer(msg.dst)
        now = self.loop.time()
        cum = min(hdr.seq, msg.seg_count)
        freed = 0
        if cum > msg.acked:
            for seg in range(msg.acked, cum):
                sent = msg.sent_at.pop(seg, None)
                if sent is not None:
                    freed += 1
                    if seg not in msg.retransmitted:
                        peer.rtt.sample(now - sent, self.cfg)
            msg.acked = cum
            msg.last_progress = now
            msg.backoff = 1.0
        sack = unpack_sack(payload)
        highest_sacked = -1
        for i in range(SACK_BITS):
            if sack >> i & 1:
                seg = cum + 1 + i
                highest_sacked = seg
                if msg.sent_at.pop(seg, None) is not None:
                    freed += 1
                    msg.sacked.add(seg)
        if freed:
            peer.in_flight -= freed
            peer.cwnd = min(self.cfg.cwnd_max, peer.cwnd + freed / peer.cwnd)
        if msg.acked >= msg.seg_count:
            msg.done.set_result(None)
            return
        # holes below a selectively acknowledged segment were lost: resend them once per RTT
        if highest_sacked > 0:
            horizon = now - max(peer.rtt.srtt, self._rto_floor(msg))
            self._resend_sent_before(msg, range(cum, highest_sacked), horizon)
        if hdr.flags & Flag.RESEND:  # the receiver is waiting for it: no timeout to wait out
            # sent a round trip ago and still not there: lost, not in flight (a request that
            # crossed the data costs one duplicate)
            horizon = now - (peer.rtt.srtt or self._rto_floor(msg))
            self._resend_sent_before(msg, sorted(msg.sent_at)[:4], horizon)
        if msg.timer is not None:
            msg.timer.cancel()
            msg.timer = None
        self._arm_timer(msg, peer)
        self._pump_peer(msg.dst)

    def _rto_floor(self, msg: OutgoingMessage) -> float:
        return self.cfg.rto_min * self.cfg.frame_scale(msg.source.size)

    def _resend_sent_before(
        self, msg: OutgoingMessage, segments: Iterable[int], horizon: float
    ) -> None:
        """Resend those of ``segments`` still in flight that were last sent before
        ``horizon``: at most once per round trip however often the receiver asks."""
        for seg in segments:
            sent = msg.sent_at.get(seg)
            if sent is not None and sent < horizon:
                self._transmit(msg, seg, retransmit=True)

    def _spurious(self, peer: PeerState, hdr: wire.Header) -> None:
        """The receiver had segment ``hdr.seg_idx`` when our retransmission of it came, for
        ``hdr.msg_len`` us. The earlier copy's round trip is the time since the transmission
        before that retransmission less the hold time (Eifel's response, RFC 4015, with the
        hold time in place of a timestamp echo): large when that copy was slow (a loaded
        host: it arrived just before the resend), small when only its ACK was lost (it
        arrived long before), so under random loss the RTO does not grow from it. Without
        it a loaded emulator resent half its unicast frames for nothing (every rank rooting
        a 1 B binomial broadcast: 16,829 retransmissions for 32,378 data frames, 14,732 of
        them duplicates): Karn's rule keeps a resent segment from ever correcting the RTO."""
        before = peer.resent.pop((hdr.comm_id, hdr.epoch, hdr.tag, hdr.seg_idx), None)
        if before is None:
            return  # not one we resent, or already learnt from
        self.endpoint.stats.spurious_retransmissions += 1
        held = wire.held_seconds(hdr.msg_len)
        if self.cfg.dsack_learning and held is not None:
            rtt = self.loop.time() - before - held
            if rtt > 0:
                peer.rtt.sample(min(rtt, self.cfg.rto_max), self.cfg)

    # -- receiving --------------------------------------------------------------------------

    def incoming(self, key: UnicastKey, size: int) -> Incoming:
        """The message ``key`` (its peer is the sender), created if it has not started
        arriving."""
        return self.inbox.expect(key, size, key.peer, f"message tag {key.tag}")

    def on_data(self, hdr: wire.Header, payload: memoryview) -> None:
        """A data segment from an entitled sender."""
        key = UnicastKey(hdr.src_node, hdr.comm_id, hdr.epoch, hdr.tag)
        completed = self.inbox.completed.get(key)
        if completed is not None:
            self.endpoint.stats.duplicates += 1
            self._send_ack(hdr.src_node, hdr, completed, 0, duplicate=True)
            return
        admitted = self.inbox.admit(key, hdr, payload)
        if admitted is None:
            return
        msg, new = admitted
        msg.unacked += 1
        if msg.done.done():
            self._send_ack(hdr.src_node, hdr, msg.seg_count, 0, duplicate=not new)
            if msg.consumed:
                self.inbox.retire(msg)
            else:
                msg.cancel_timers()
        elif not new or hdr.seg_idx + 1 != msg.contiguous or hdr.flags & Flag.REPLY_NOW:
            self._ack_now(msg, hdr, duplicate=not new)  # out of order or duplicate: at once
        elif msg.unacked >= self.cfg.ack_every:
            self._ack_now(msg, hdr)
        elif msg.ack_timer is None:
            msg.ack_timer = self.loop.call_later(self.cfg.ack_delay, self._ack_now, msg, hdr)

    def ask_resend(self, msg: Incoming) -> None:
        """Ask the sender of ``msg`` to resend now what it has not had acknowledged: the
        caller knows the message is due. The sender resends a segment at most once per
        round trip, and ignores a message it is not sending."""
        key = msg.key
        assert isinstance(key, UnicastKey)
        self._ack_to(key.peer, key, msg.contiguous, 0, flags=Flag.RESEND)
        self.endpoint.stats.resend_requests += 1

    def _ack_now(self, msg: Incoming, hdr: wire.Header, *, duplicate: bool = False) -> None:
        if msg.ack_timer is not None:
            msg.ack_timer.cancel()
            msg.ack_timer = None
        msg.unacked = 0
        self._send_ack(hdr.src_node, hdr, msg.contiguous, msg.sack_bitmap(), duplicate=duplicate)

    def _send_ack(
        self, dst: int, hdr: wire.Header, cum: int, sack: int, *, duplicate: bool = False
    ) -> None:
        """``duplicate``: ``hdr`` was a segment already here (a D-SACK: seg_idx names it,
        msg_len says how long it had been here)."""
        key = UnicastKey(hdr.src_node, hdr.comm_id, hdr.epoch, hdr.tag)
        held = wire.held_us(self.inbox.held_for(key, hdr.seg_idx)) if duplicate else 0
        self._ack_to(
            dst,
            key,
            cum,
            sack,
            flags=Flag.DUPLICATE if duplicate else Flag.NONE,
            seg_idx=hdr.seg_idx if duplicate else 0,
            msg_len=held,
        )
        self.endpoint.stats.acks_sent += 1

    def _ack_to(
        self,
        dst: int,
        key: UnicastKey,
        cum: int,
        sack: int,
        *,
        flags: int,
        seg_idx: int = 0,
        msg_len: int = 0,
    ) -> None:
        """An ACK frame for message ``key`` (its comm, epoch and tag) to ``dst``."""
        ack = wire.Header(
            op=Op.ACK,
            comm_id=key.comm,
            epoch=key.epoch,
            tag=key.tag,
            flags=flags,
            src_node=self.endpoint.node,
            dst_node=dst,
            seq=cum,
            seg_idx=seg_idx,
            msg_len=msg_len,
        )
        self.endpoint.send_frame(self.endpoint.directory.mac(dst), ack, pack_sack(sack))
