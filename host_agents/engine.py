"""The host protocol engine: reliable unicast messages, reliable multicast, barrier arrivals.

One :class:`Engine` per host runs on an asyncio loop and is driven only by frames arriving and
timers firing, never by polling. Collectives above it (``host_agents.algorithms``) send and
receive *messages* named by (peer, communicator, epoch, tag); the engine segments them to the
MTU and makes them reliable:

* unicast: per-message sliding window, per-peer congestion window (AIMD), cumulative ACKs
  with a 64-segment selective-ACK bitmap, delayed ACKs, fast retransmit of SACK holes,
  timeout retransmission with exponential backoff, duplicate suppression;
* multicast (the switch replicates): the root keeps a window over the slowest receiver,
  receivers ACK cumulatively and with delay to a co-root per dragonfly group which merges them
  into one ACK for the root (seed 001's co-root scheme), gaps are reported by NACKs that are
  delayed at random and cancelled when the repair arrives, co-roots forward each missing range
  once per interval, and the root repairs by multicasting again;
* barrier: ARRIVE is retransmitted with backoff until a RELEASE covering its epoch arrives
  (the switch answers late ARRIVEs with RELEASE).

A message whose peer makes no progress for ``peer_timeout`` fails with :class:`PeerTimeout`;
nothing waits forever.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller import wire
from controller.wire import Flag, Op
from host_agents.directory import Directory
from host_agents.entitlement import Entitlement, Refusal
from host_agents.plans import PlanFunc
from host_agents.port import Port

LOG = logging.getLogger(__name__)

SACK_BITS = 64
_SACK = struct.Struct("!Q")
_NACK_RANGE = struct.Struct("!II")  # first segment, count
MAX_NACK_RANGES = (wire.MAX_PAYLOAD // _NACK_RANGE.size) - 1
BROADCAST_MAC = b"\xff" * 6
REPAIR_BURST = 16  # segments one NACK of a published multicast gets resent at most
MULTICAST_REPAIR_ASKERS = 4  # receivers asking for one segment at once: repair by multicast


class EngineError(Exception):
    """Base of the errors a collective sees from the engine."""


class PeerTimeout(EngineError):
    def __init__(self, peer: int, what: str, seconds: float) -> None:
        super().__init__(f"no progress from node {peer} for {seconds:.1f} s while {what}")
        self.peer = peer


class SizeMismatch(EngineError):
    def __init__(self, peer: int, what: str, expected: int, got: int) -> None:
        super().__init__(f"{what}: node {peer} sends {got} bytes where {expected} are expected")
        self.peer = peer


@dataclass(slots=True)
class EngineConfig:
    segment_size: int = wire.MAX_PAYLOAD
    # In-flight limits stay below what BMv2 can absorb at once: it reads each port through a
    # packet socket whose default buffer (net.core.rmem_default, 208 KiB) holds about 90
    # full frames; a multicast root 128 segments ahead lost a third of them (measured).
    message_window: int = 64  # unacknowledged segments per unicast message
    mcast_window: int = 32  # segments the multicast root runs ahead of its slowest receiver
    cwnd_initial: float = 16.0
    cwnd_max: float = 64.0
    # Timers are generous because dozens of agents and BMv2 switches share two cores in
    # Mininet: a spurious retransmission costs more than a late one.
    rto_initial: float = 0.2
    rto_min: float = 0.05
    rto_max: float = 2.0
    ack_every: int = 16
    ack_delay: float = 0.002
    nack_delay: float = 0.005
    peer_timeout: float = 15.0
    barrier_rto: float = 0.1
    barrier_rto_max: float = 1.0
    # Early data (a message that arrives before its receiver asks for it) is accepted for
    # epochs this far from the newest the rank started: nonblocking and persistent
    # collectives overlap a few instances, not hundreds; senders beyond it retransmit later.
    epochs_ahead: int = 64
    max_message: int = 1 << 30
    # memory that messages nobody has asked for yet may take, counted by what arrived (never
    # by what a header claims): a flood of plausible-looking frames must not make an agent
    # allocate without bound, nor one sender crowd out the others (senders retransmit later)
    early_bytes: int = 256 << 20
    early_bytes_per_sender: int = 64 << 20
    early_messages_per_sender: int = 256
    # an unfinished early message that gets no segment for this long is dropped: its sender
    # has given up by then (peer_timeout), so only a stale or forged one is lost
    early_idle_timeout: float = 30.0
    # a freed communicator keeps re-acknowledging what it completed this long (a peer whose
    # last ACK from us was lost is still retransmitting), then everything kept for it goes
    comm_linger: float = 15.0
    completed_memory: int = 8192  # completed messages remembered to re-ACK their duplicates


def missing_runs(received: bytearray, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Runs of segments not received in [start, end), as (first, count), at most ``limit``."""
    runs: list[tuple[int, int]] = []
    seg = start
    while seg < end and len(runs) < limit:
        if received[seg]:
            seg += 1
            continue
        first = seg
        while seg < end and not received[seg]:
            seg += 1
        runs.append((first, seg - first))
    return runs


@dataclass(slots=True)
class EngineStats:
    frames_sent: int = 0
    frames_received: int = 0
    data_sent: int = 0
    retransmissions: int = 0
    mcast_retransmissions: int = 0
    acks_sent: int = 0
    nacks_sent: int = 0
    nacks_received: int = 0
    nacks_forwarded: int = 0
    duplicates: int = 0
    arrives_sent: int = 0
    arrive_retransmissions: int = 0
    dropped: collections.Counter[str] = field(default_factory=collections.Counter)

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "dropped"}
        out["dropped"] = dict(self.dropped)
        return out


class Source:
    """Bytes a sender may transmit; a relay's incoming message is a Source that grows."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.view = memoryview(data).cast("B")
        self.size = len(self.view)
        self.available = self.size
        self._listeners: list[Callable[[], None]] = []

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _grown(self) -> None:
        for listener in list(self._listeners):
            listener()


def segment_count(size: int, segment_size: int) -> int:
    return max(1, -(-size // segment_size))


class Incoming(Source):
    """A message being received: segments land in place; ``available`` is the in-order prefix.

    An *early* message (data arrived before the receiver asked for it) parks its segments
    instead of reserving the size its header claims: memory follows what really arrived, and
    the message buffer is made when the receiver claims it (:meth:`materialize`)."""

    def __init__(
        self,
        engine: Engine,
        key: tuple[Any, ...],
        size: int,
        seg_count: int,
        *,
        early_sender: int | None = None,
    ) -> None:
        self.data = bytearray() if early_sender is not None else bytearray(size)
        super().__init__(self.data)
        self.size = size
        self.available = 0
        self.parked: dict[int, bytes] | None = {} if early_sender is not None else None
        self.early_sender = early_sender
        self.parked_bytes = 0
        self.last_arrival = engine.loop.time()
        self.engine = engine
        self.key = key
        self.seg_count = seg_count
        self.received = bytearray(seg_count)
        self.n_received = 0
        self.contiguous = 0  # segments [0, contiguous) are here
        self.done: asyncio.Future[bytearray] = engine.loop.create_future()
        self.unacked = 0
        self.ack_timer: asyncio.TimerHandle | None = None
        self.nack_timer: asyncio.TimerHandle | None = None
        self.last_nack = -1e9
        self.highest = -1
        self.consumed = False
        # created by arriving data before the receiver asked for it; its parked bytes count
        # against the early budgets until the receiver claims it
        self.early = early_sender is not None

    def place(self, seg: int, payload: memoryview, segment_size: int) -> bool:
        """Store one segment; False when it is a duplicate."""
        if self.received[seg]:
            return False
        self.received[seg] = 1
        self.n_received += 1
        self.last_arrival = self.engine.loop.time()
        if self.parked is not None:
            self.parked[seg] = bytes(payload)
            self.parked_bytes += len(payload)
        else:
            start = seg * segment_size
            self.data[start : start + len(payload)] = payload
        self.highest = max(self.highest, seg)
        grown = False
        while self.contiguous < self.seg_count and self.received[self.contiguous]:
            self.contiguous += 1
            grown = True
        if grown and self.parked is None:
            self.available = min(self.size, self.contiguous * segment_size)
            self._grown()
        if self.n_received == self.seg_count and not self.done.done():
            self.materialize(segment_size)
            self.done.set_result(self.data)
        return True

    def materialize(self, segment_size: int) -> None:
        """Move parked segments into the message buffer (claimed, or complete)."""
        if self.parked is None:
            return
        self.data = bytearray(self.size)
        for seg, chunk in self.parked.items():
            start = seg * segment_size
            self.data[start : start + len(chunk)] = chunk
        self.parked = None
        self.view = memoryview(self.data).cast("B")
        self.available = min(self.size, self.contiguous * segment_size)

    def sack_bitmap(self) -> int:
        bitmap = 0
        base = self.contiguous + 1
        for i in range(SACK_BITS):
            seg = base + i
            if seg >= self.seg_count:
                break
            if self.received[seg]:
                bitmap |= 1 << i
        return bitmap

    def missing_ranges(self, limit: int) -> list[tuple[int, int]]:
        """Holes below the highest segment seen, as (first, count)."""
        return missing_runs(self.received, self.contiguous, self.highest, limit)

    def cancel_timers(self) -> None:
        for timer in (self.ack_timer, self.nack_timer):
            if timer is not None:
                timer.cancel()
        self.ack_timer = self.nack_timer = None


@dataclass(slots=True)
class _Peer:
    """Congestion and RTT state towards one destination node."""

    cwnd: float
    rto: float
    srtt: float = 0.0
    rttvar: float = 0.0
    in_flight: int = 0
    senders: list[_Outgoing] = field(default_factory=list)


class _Outgoing:
    """A unicast message being sent."""

    def __init__(
        self, engine: Engine, dst: int, comm: int, epoch: int, tag: int, source: Source
    ) -> None:
        self.engine = engine
        self.dst = dst
        self.comm = comm
        self.epoch = epoch
        self.tag = tag
        self.source = source
        self.seg_count = segment_count(source.size, engine.cfg.segment_size)
        self.acked = 0
        self.next_new = 0
        self.sent_at: dict[int, float] = {}  # in flight: segment -> last transmission time
        self.retransmitted: set[int] = set()
        self.sacked: set[int] = set()
        self.done: asyncio.Future[None] = engine.loop.create_future()
        self.last_progress = engine.loop.time()
        self.timer: asyncio.TimerHandle | None = None
        self.backoff = 1.0


@dataclass
class _Published:
    """A published multicast kept for repairs, and when each segment was last resent."""

    source: Source
    unicast_at: dict[tuple[int, int], float] = field(default_factory=dict)
    multicast_at: dict[int, float] = field(default_factory=dict)
    askers: dict[int, tuple[int, float]] = field(default_factory=dict)

    def ask(self, seg: int, now: float, interval: float) -> int:
        """Count one more request for ``seg``; how many came within ``interval``."""
        count, since = self.askers.get(seg, (0, now))
        count = count + 1 if now - since < interval else 1
        self.askers[seg] = (count, since if count > 1 else now)
        return count


class _McastRoot:
    """The root's side of one reliable multicast."""

    def __init__(
        self,
        engine: Engine,
        key: tuple[int, int, int, int],
        source: Source,
        ack_sources: tuple[int, ...],
    ) -> None:
        self.engine = engine
        self.key = key  # (root, comm, epoch, tree)
        self.source = source
        self.seg_count = segment_count(source.size, engine.cfg.segment_size)
        self.cum = dict.fromkeys(ack_sources, 0)
        self.next_new = 0
        self.last_repair: dict[int, float] = {}
        self.done: asyncio.Future[None] = engine.loop.create_future()
        self.last_progress = engine.loop.time()
        self.timer: asyncio.TimerHandle | None = None
        self.sent_at: dict[int, float] = {}  # first transmission of each segment
        self.rtt = _Peer(cwnd=0.0, rto=engine.cfg.rto_initial)  # RTT estimate to the slowest

    @property
    def rto(self) -> float:
        return self.rtt.rto

    @property
    def slowest(self) -> int:
        return min(self.cum.values()) if self.cum else self.seg_count


class _Aggregator:
    """A co-root merging its group's multicast ACKs (and its own) into one for the root."""

    def __init__(self, members: tuple[int, ...], upstream: int) -> None:
        self.cum = dict.fromkeys(members, 0)
        self.upstream = upstream
        self.reported = -1
        self.reported_at = -1e9
        self.timer: asyncio.TimerHandle | None = None
        self.forwarded: dict[int, float] = {}  # first segment of a NACKed range -> when


class Engine:
    def __init__(
        self,
        node_id: int,
        port: Port,
        directory: Directory,
        config: EngineConfig | None = None,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        plan: PlanFunc | None = None,
        seed: int | None = None,
    ) -> None:
        self.node = node_id
        self.port = port
        self.directory = directory
        self.cfg = config or EngineConfig()
        self.loop = loop or asyncio.get_event_loop()
        self.plan = plan
        self.rng = random.Random(seed if seed is not None else node_id)
        self.stats = EngineStats()
        self.mac = directory.macs.get(node_id, b"\x02" + b"\x00" * 5)
        self._peers: dict[int, _Peer] = {}
        self._outgoing: dict[tuple[int, int, int, int], _Outgoing] = {}
        self._incoming: dict[tuple[Any, ...], Incoming] = {}
        self._completed: collections.OrderedDict[tuple[Any, ...], int] = collections.OrderedDict()
        # early messages (created by arriving data, not yet asked for): parked bytes in
        # total and per sender, and how many per sender
        self._early_held = 0
        self._early_bytes: collections.Counter[int] = collections.Counter()
        self._early_count: collections.Counter[int] = collections.Counter()
        self._early_sweep: asyncio.TimerHandle | None = None
        self._closing: dict[int, asyncio.TimerHandle] = {}  # freed comm -> its purge
        self.entitled = Entitlement(node_id, directory, plan)
        self._roots: dict[tuple[int, int, int, int], _McastRoot] = {}
        self._published: dict[tuple[int, int, int, int], _Published] = {}
        self._aggregators: dict[tuple[int, int, int, int], _Aggregator] = {}
        self._aggregated: collections.OrderedDict[tuple[int, int, int, int], int] = (
            collections.OrderedDict()
        )
        self._newest_epoch: dict[int, int] = {}
        self._released: dict[int, int] = {}  # comm -> newest released barrier epoch
        self._arrived: dict[int, int] = {}  # comm -> newest barrier epoch this rank entered
        self._barrier_waiters: dict[int, list[tuple[int, asyncio.Future[None]]]] = {}
        self._log_budget: collections.Counter[str] = collections.Counter()
        self._pings: dict[tuple[int, int], tuple[float, asyncio.Future[float]]] = {}
        # how long arrivals of published multicasts may pause before the receiver asks for
        # repairs: grows on false alarms (the repair was a duplicate), shrinks on real ones
        self.repair_quiet = self.cfg.rto_initial
        port.start(self.loop, self._on_frame)

    async def linger(self, quiet: float, limit: float) -> None:
        """Keep answering after this node's last collective until no duplicate data arrived
        for ``quiet`` seconds (at most ``limit``): a peer whose last ACK from us was lost is
        still retransmitting, and only a live engine re-ACKs it (TCP's TIME_WAIT, in short).
        Every message is complete by now, so anything a peer still sends is a duplicate."""
        deadline = self.loop.time() + limit
        while (remaining := deadline - self.loop.time()) > 0:
            seen = self.stats.duplicates
            await asyncio.sleep(min(quiet, remaining))
            if self.stats.duplicates == seen:
                return

    # -- communicators ----------------------------------------------------------------------

    def register_comm(self, comm: int, members: tuple[int, ...]) -> None:
        if comm in self._closing:  # the id was freed and handed out again: a new communicator
            self._purge_comm(comm)
        self.directory.comms[comm] = members
        self._released.setdefault(comm, 0)  # resume_barrier moves it for a later job
        self._newest_epoch.setdefault(comm, 0)

    def resume_barrier(self, comm: int, released: int) -> None:
        """The switches already released ``comm``'s barriers up to ``released`` (an earlier
        job on this communicator): the next ARRIVE is for the epoch after it."""
        if comm not in self._released:
            raise EngineError(f"communicator {comm} is not registered on node {self.node}")
        self._released[comm] = released
        self._arrived[comm] = released

    def forget_comm(self, comm: int, linger: float | None = None) -> None:
        """This rank freed ``comm``: no new message is taken on it, but what it completed is
        still re-acknowledged (and published data repaired) for ``linger`` seconds, since a
        peer whose last ACK from us was lost is still retransmitting. Then everything kept
        for ``comm`` is dropped, so its id can name a new communicator."""
        if comm not in self.directory.comms or comm in self._closing:
            return
        wait = self.cfg.comm_linger if linger is None else linger
        if wait <= 0:
            self._purge_comm(comm)
        else:
            self._closing[comm] = self.loop.call_later(wait, self._purge_comm, comm)

    def _purge_comm(self, comm: int) -> None:
        timer = self._closing.pop(comm, None)
        if timer is not None:
            timer.cancel()
        self.directory.comms.pop(comm, None)
        for table in (self._released, self._arrived, self._newest_epoch):
            table.pop(comm, None)
        for waiting in self._barrier_waiters.pop(comm, []):
            if not waiting[1].done():
                waiting[1].set_exception(EngineError(f"communicator {comm} was freed"))
        for key in [k for k in self._completed if k[2] == comm]:
            del self._completed[key]
        for key in [k for k, m in self._incoming.items() if k[2] == comm]:
            msg = self._incoming.pop(key)
            msg.cancel_timers()
            self._unclaim(msg)
        for mkey in [k for k in self._aggregators if k[1] == comm]:
            agg = self._aggregators.pop(mkey)
            if agg.timer is not None:
                agg.timer.cancel()
        for mkey in [k for k in self._aggregated if k[1] == comm]:
            del self._aggregated[mkey]
        for mkey in [k for k in self._published if k[1] == comm]:
            del self._published[mkey]
        for rkey in [k for k in self._roots if k[1] == comm]:
            self._roots[rkey].done.cancel()
        for okey in [k for k in self._outgoing if k[1] == comm]:
            self._outgoing[okey].done.cancel()
        forget = getattr(self.plan, "forget", None)
        if forget is not None:
            forget(comm)

    @property
    def early_bytes_held(self) -> int:
        """Bytes of messages that arrived before anyone asked for them."""
        return self._early_held

    def is_closing(self, comm: int) -> bool:
        return comm in self._closing

    def note_epoch(self, comm: int, epoch: int) -> None:
        """The local rank started collective ``epoch`` on ``comm``: early frames up to
        ``epochs_ahead`` beyond it are buffered, older unknown ones are refused."""
        newest = self._newest_epoch.get(comm, 0)
        if wire.serial_lt(newest, epoch):
            self._newest_epoch[comm] = epoch

    # -- frames out -------------------------------------------------------------------------

    def _send(self, dst_mac: bytes, hdr: wire.Header, payload: bytes | memoryview = b"") -> None:
        self.port.send(wire.build_frame(hdr, payload, dst_mac=dst_mac, src_mac=self.mac))
        self.stats.frames_sent += 1

    def _peer(self, node: int) -> _Peer:
        peer = self._peers.get(node)
        if peer is None:
            peer = _Peer(cwnd=self.cfg.cwnd_initial, rto=self.cfg.rto_initial)
            self._peers[node] = peer
        return peer

    # -- unicast: sending -------------------------------------------------------------------

    def send_message(
        self,
        dst: int,
        comm: int,
        epoch: int,
        tag: int,
        source: Source | bytes | bytearray | memoryview,
    ) -> asyncio.Future[None]:
        """Start sending; the future completes when the receiver has every segment."""
        if not isinstance(source, Source):
            source = Source(source)
        key = (dst, comm, epoch, tag)
        if key in self._outgoing:
            raise EngineError(
                f"message to node {dst} (comm {comm}, epoch {epoch}, tag {tag}) is already "
                "being sent: each (peer, epoch, tag) names one message"
            )
        msg = _Outgoing(self, dst, comm, epoch, tag, source)
        self._outgoing[key] = msg
        peer = self._peer(dst)
        peer.senders.append(msg)
        source.subscribe(lambda: self._pump_peer(dst))
        msg.done.add_done_callback(lambda _f: self._finish_outgoing(msg))
        self._pump_peer(dst)
        return msg.done

    def _finish_outgoing(self, msg: _Outgoing) -> None:
        key = (msg.dst, msg.comm, msg.epoch, msg.tag)
        self._outgoing.pop(key, None)
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

    def _segment_bounds(self, source: Source, seg: int) -> tuple[int, int]:
        start = seg * self.cfg.segment_size
        return start, min(source.size, start + self.cfg.segment_size)

    def _send_next_segment(self, msg: _Outgoing, peer: _Peer) -> bool:
        if msg.done.done() or msg.next_new >= msg.seg_count:
            return False
        if msg.next_new - msg.acked >= self.cfg.message_window:
            return False
        seg = msg.next_new
        _, end = self._segment_bounds(msg.source, seg)
        if msg.source.available < end:
            return False  # a relay waiting for upstream data
        self._transmit_segment(msg, seg, retransmit=False)
        msg.next_new += 1
        peer.in_flight += 1
        self._arm_timer(msg, peer)
        return True

    def _transmit_segment(self, msg: _Outgoing, seg: int, *, retransmit: bool) -> None:
        start, end = self._segment_bounds(msg.source, seg)
        flags = Flag.RETRANSMIT if retransmit else Flag.NONE
        if seg == msg.seg_count - 1:
            flags |= Flag.LAST | Flag.REPLY_NOW
        hdr = wire.Header(
            op=Op.UNICAST,
            comm_id=msg.comm,
            epoch=msg.epoch,
            tag=msg.tag,
            flags=flags,
            src_node=self.node,
            dst_node=msg.dst,
            seg_idx=seg,
            seg_count=msg.seg_count,
            msg_len=msg.source.size,
        )
        self._send(self.directory.mac(msg.dst), hdr, msg.source.view[start:end])
        msg.sent_at[seg] = self.loop.time()
        self.stats.data_sent += 1
        if retransmit:
            msg.retransmitted.add(seg)
            self.stats.retransmissions += 1

    def _arm_timer(self, msg: _Outgoing, peer: _Peer) -> None:
        if msg.timer is None and msg.sent_at:
            msg.timer = self.loop.call_later(peer.rto * msg.backoff, self._on_timeout, msg)

    def _on_timeout(self, msg: _Outgoing) -> None:
        msg.timer = None
        if msg.done.done() or not msg.sent_at:
            return
        peer = self._peer(msg.dst)
        waited = self.loop.time() - msg.last_progress
        if waited > self.cfg.peer_timeout:
            msg.done.set_exception(
                PeerTimeout(msg.dst, f"sending a message (tag {msg.tag})", waited)
            )
            return
        peer.cwnd = max(2.0, peer.cwnd / 2)
        msg.backoff = min(msg.backoff * 2, self.cfg.rto_max / max(peer.rto, 1e-6))
        for seg in sorted(msg.sent_at)[:4]:
            self._transmit_segment(msg, seg, retransmit=True)
        self._arm_timer(msg, peer)

    def _on_unicast_ack(self, hdr: wire.Header, payload: memoryview) -> None:
        msg = self._outgoing.get((hdr.src_node, hdr.comm_id, hdr.epoch, hdr.tag))
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
                        self._rtt_sample(peer, now - sent)
            msg.acked = cum
            msg.last_progress = now
            msg.backoff = 1.0
        sack = _SACK.unpack_from(payload)[0] if len(payload) >= _SACK.size else 0
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
            horizon = now - max(peer.srtt, self.cfg.rto_min)
            for seg in range(cum, highest_sacked):
                sent = msg.sent_at.get(seg)
                if sent is not None and sent < horizon:
                    self._transmit_segment(msg, seg, retransmit=True)
        if msg.timer is not None:
            msg.timer.cancel()
            msg.timer = None
        self._arm_timer(msg, peer)
        self._pump_peer(msg.dst)

    def _rtt_sample(self, peer: _Peer, rtt: float) -> None:
        if peer.srtt == 0.0:
            peer.srtt, peer.rttvar = rtt, rtt / 2
        else:
            peer.rttvar = 0.75 * peer.rttvar + 0.25 * abs(peer.srtt - rtt)
            peer.srtt = 0.875 * peer.srtt + 0.125 * rtt
        peer.rto = min(self.cfg.rto_max, max(self.cfg.rto_min, peer.srtt + 4 * peer.rttvar))

    # -- unicast: receiving -----------------------------------------------------------------

    def incoming(self, src: int, comm: int, epoch: int, tag: int, size: int) -> Incoming:
        """The message (src, comm, epoch, tag), created if it has not started arriving."""
        return self._expect(("u", src, comm, epoch, tag), size, src, f"message tag {tag}")

    def _expect(self, key: tuple[Any, ...], size: int, peer: int, what: str) -> Incoming:
        """The receiver's side of a message it is about to wait for: found if it started
        arriving (its size must then match), created otherwise."""
        msg = self._incoming.get(key)
        if msg is None:
            if key in self._completed:
                raise EngineError(f"{what} from node {peer} was already received and consumed")
            msg = Incoming(self, key, size, segment_count(size, self.cfg.segment_size))
            self._incoming[key] = msg
        elif msg.size != size:
            raise SizeMismatch(peer, what, size, msg.size)
        if msg.early:
            msg.materialize(self.cfg.segment_size)
            self._unclaim(msg)
        return msg

    def _unclaim(self, msg: Incoming) -> None:
        """``msg`` stops counting against the early budgets (claimed, retired or dropped)."""
        if not msg.early or msg.early_sender is None:
            return
        msg.early = False
        sender = msg.early_sender
        self._early_held -= msg.parked_bytes
        self._early_bytes[sender] -= msg.parked_bytes
        self._early_count[sender] -= 1
        if self._early_count[sender] <= 0:
            del self._early_count[sender]
            del self._early_bytes[sender]

    def consume(self, msg: Incoming) -> None:
        """The caller has the data: forget the message, remember it to re-ACK duplicates."""
        msg.consumed = True
        if msg.done.done():
            self._retire(msg)

    def _retire(self, msg: Incoming) -> None:
        msg.cancel_timers()
        self._unclaim(msg)
        if self._incoming.get(msg.key) is msg:
            del self._incoming[msg.key]
        self._completed[msg.key] = msg.seg_count
        while len(self._completed) > self.cfg.completed_memory:
            self._completed.popitem(last=False)

    def _accepts_early(self, comm: int, epoch: int) -> bool:
        if comm not in self.directory.comms or comm in self._closing:
            return False
        newest = self._newest_epoch.get(comm, 0)
        ahead = wire.serial_diff(epoch, newest)
        return -self.cfg.epochs_ahead <= ahead <= self.cfg.epochs_ahead

    def _on_unicast_data(self, hdr: wire.Header, payload: memoryview) -> None:
        refusal = self.entitled.unicast_data(hdr)
        if refusal is not None:
            self._drop(refusal, hdr)
            return
        key = ("u", hdr.src_node, hdr.comm_id, hdr.epoch, hdr.tag)
        if key in self._completed:
            self.stats.duplicates += 1
            self._send_unicast_ack(hdr.src_node, hdr, self._completed[key], 0)
            return
        admitted = self._admit(key, hdr, payload)
        if admitted is None:
            return
        msg, new = admitted
        msg.unacked += 1
        if msg.done.done():
            self._send_unicast_ack(hdr.src_node, hdr, msg.seg_count, 0)
            if msg.consumed:
                self._retire(msg)
            else:
                msg.cancel_timers()
        elif not new or hdr.seg_idx + 1 != msg.contiguous or hdr.flags & Flag.REPLY_NOW:
            self._ack_now(msg, hdr)  # out of order or duplicate: tell the sender at once
        elif msg.unacked >= self.cfg.ack_every:
            self._ack_now(msg, hdr)
        elif msg.ack_timer is None:
            msg.ack_timer = self.loop.call_later(self.cfg.ack_delay, self._ack_now, msg, hdr)

    def _admit(
        self, key: tuple[Any, ...], hdr: wire.Header, payload: memoryview
    ) -> tuple[Incoming, bool] | None:
        """Place one data segment in its message, created if it is the first we see and its
        communicator and epoch are plausible; (message, whether the segment was new), or
        None when the frame was rejected (counted and logged)."""
        msg = self._incoming.get(key)
        sender = hdr.src_node
        if msg is None:
            if not self._accepts_early(hdr.comm_id, hdr.epoch):
                self._drop("unknown communicator or epoch", hdr)
                return None
            if hdr.msg_len > self.cfg.max_message:
                self._drop("message larger than max_message", hdr)
                return None
            seg_count = segment_count(hdr.msg_len, self.cfg.segment_size)
            if hdr.seg_count != seg_count:
                self._drop("segment count does not match the message size", hdr)
                return None
            if self._early_count[sender] >= self.cfg.early_messages_per_sender:
                self._drop("too many messages nobody has asked for yet from one sender", hdr)
                return None
            msg = Incoming(self, key, hdr.msg_len, seg_count, early_sender=sender)
            self._early_count[sender] += 1
            self._incoming[key] = msg
            self._arm_early_sweep()
        if not self._fits(msg, hdr):
            return None
        if msg.early and not msg.received[hdr.seg_idx]:
            size = len(payload)
            if (
                self._early_held + size > self.cfg.early_bytes
                or self._early_bytes[sender] + size > self.cfg.early_bytes_per_sender
            ):
                self._drop("too much data nobody has asked for yet", hdr)
                return None
            self._early_held += size
            self._early_bytes[sender] += size
        new = msg.place(hdr.seg_idx, payload, self.cfg.segment_size)
        if not new:
            self.stats.duplicates += 1
        return msg, new

    def _arm_early_sweep(self) -> None:
        if self._early_sweep is None:
            self._early_sweep = self.loop.call_later(
                self.cfg.early_idle_timeout / 2, self._sweep_early
            )

    def _sweep_early(self) -> None:
        """Drop unfinished early messages that stopped arriving (their sender gave up)."""
        self._early_sweep = None
        now = self.loop.time()
        for key, msg in list(self._incoming.items()):
            if (
                msg.early
                and not msg.done.done()
                and now - msg.last_arrival > self.cfg.early_idle_timeout
            ):
                del self._incoming[key]
                msg.cancel_timers()
                self._unclaim(msg)
                self.stats.dropped["early message expired"] += 1
        if any(m.early for m in self._incoming.values()):
            self._arm_early_sweep()

    def _fits(self, msg: Incoming, hdr: wire.Header) -> bool:
        if hdr.msg_len != msg.size or hdr.seg_count != msg.seg_count:
            self._drop(f"message of {hdr.msg_len} bytes where {msg.size} are expected", hdr)
            if not msg.done.done():
                msg.done.set_exception(
                    SizeMismatch(hdr.src_node, f"message tag {hdr.tag}", msg.size, hdr.msg_len)
                )
            return False
        if hdr.seg_idx >= msg.seg_count:
            self._drop("segment index beyond the message", hdr)
            return False
        start, end = (
            hdr.seg_idx * self.cfg.segment_size,
            min(msg.size, (hdr.seg_idx + 1) * self.cfg.segment_size),
        )
        if hdr.payload_len != end - start:
            self._drop("segment length does not match its index", hdr)
            return False
        return True

    def _ack_now(self, msg: Incoming, hdr: wire.Header) -> None:
        if msg.ack_timer is not None:
            msg.ack_timer.cancel()
            msg.ack_timer = None
        msg.unacked = 0
        self._send_unicast_ack(hdr.src_node, hdr, msg.contiguous, msg.sack_bitmap())

    def _send_unicast_ack(self, dst: int, hdr: wire.Header, cum: int, sack: int) -> None:
        ack = wire.Header(
            op=Op.ACK,
            comm_id=hdr.comm_id,
            epoch=hdr.epoch,
            tag=hdr.tag,
            src_node=self.node,
            dst_node=dst,
            seq=cum,
        )
        self._send(self.directory.mac(dst), ack, _SACK.pack(sack))
        self.stats.acks_sent += 1

    # -- multicast: root ----------------------------------------------------------------------

    def mcast_send(
        self, comm: int, epoch: int, tree: int, source: Source | bytes | bytearray | memoryview
    ) -> asyncio.Future[None]:
        """Multicast ``source`` along (comm, this node, tree); completes when every receiver
        of the plan has acknowledged every segment."""
        if not isinstance(source, Source):
            source = Source(source)
        assert self.plan is not None, "multicast needs a plan function"
        plan = self.plan(comm, self.node, tree)
        key = (self.node, comm, epoch, tree)
        root = _McastRoot(self, key, source, plan.root_sources)
        self._roots[key] = root
        if self.node in plan.aggregates:  # the root merges ACKs of its own group
            self._aggregators[key] = _Aggregator(plan.aggregates[self.node], self.node)
        source.subscribe(lambda: self._pump_mcast(root))
        root.done.add_done_callback(lambda _f: self._finish_root(root))
        if not plan.receivers:
            root.done.set_result(None)
        else:
            self._pump_mcast(root)
        return root.done

    def mcast_publish(
        self, comm: int, epoch: int, tree: int, data: bytes | bytearray | memoryview
    ) -> tuple[int, int, int, int]:
        """Multicast without acknowledgements. Receivers NACK what they miss (repaired by
        unicast) and the data stays here for repairs until :meth:`mcast_withdraw`; the caller
        learns completion another way, a barrier. When every rank multicasts (allgather) this
        keeps control traffic O(P) instead of O(P^2) ACKs."""
        source = Source(data)
        key = (self.node, comm, epoch, tree)
        self._published[key] = _Published(source)
        for seg in range(segment_count(source.size, self.cfg.segment_size)):
            self._send_mcast_segment(key, source, seg, Flag.NO_ACK)
        return key

    def mcast_withdraw(self, key: tuple[int, int, int, int]) -> None:
        self._published.pop(key, None)

    def _repair(
        self, key: tuple[int, int, int, int], requester: int, ranges: list[tuple[int, int]]
    ) -> None:
        published = self._published[key]
        source = published.source
        now = self.loop.time()
        interval = self.cfg.nack_delay * 4
        seg_count = segment_count(source.size, self.cfg.segment_size)
        budget = REPAIR_BURST  # the requester asks again for the rest: no repair floods
        for first, count in ranges:
            for seg in range(first, min(first + count, seg_count)):
                if budget == 0:
                    return
                budget -= 1
                if now - published.multicast_at.get(seg, -1e9) < interval:
                    continue  # multicast again a moment ago: on its way to this requester too
                if now - published.unicast_at.get((requester, seg), -1e9) < interval:
                    continue
                published.unicast_at[(requester, seg)] = now
                if published.ask(seg, now, interval) >= MULTICAST_REPAIR_ASKERS:
                    # many receivers lost it (a drop high in the tree): one multicast serves all
                    published.multicast_at[seg] = now
                    published.askers.pop(seg)
                    self._send_mcast_segment(key, source, seg, Flag.NO_ACK | Flag.REPAIR)
                else:
                    self._send_mcast_segment(
                        key, source, seg, Flag.NO_ACK | Flag.REPAIR, repair_to=requester
                    )
                self.stats.mcast_retransmissions += 1

    def _finish_root(self, root: _McastRoot) -> None:
        self._roots.pop(root.key, None)
        self._aggregators.pop(root.key, None)
        if root.timer is not None:
            root.timer.cancel()

    def _pump_mcast(self, root: _McastRoot) -> None:
        if root.done.done():
            return
        while (
            root.next_new < root.seg_count and root.next_new - root.slowest < self.cfg.mcast_window
        ):
            _, end = self._segment_bounds(root.source, root.next_new)
            if root.source.available < end:
                break
            self._mcast_segment(root, root.next_new, retransmit=False)
            root.next_new += 1
        if root.timer is None and root.next_new > root.slowest:
            root.timer = self.loop.call_later(root.rto, self._on_mcast_timeout, root)

    def _send_mcast_segment(
        self,
        key: tuple[int, int, int, int],
        source: Source,
        seg: int,
        flags: int,
        repair_to: int | None = None,
    ) -> None:
        """One segment of the multicast ``key``: along the tree, or (a repair) by unicast."""
        start, end = self._segment_bounds(source, seg)
        _, comm, epoch, tree = key
        seg_count = segment_count(source.size, self.cfg.segment_size)
        if seg == seg_count - 1:
            flags |= Flag.LAST
        hdr = wire.Header(
            op=Op.MCAST if repair_to is None else Op.UNICAST,
            comm_id=comm,
            epoch=epoch,
            tree=tree,
            flags=flags,
            src_node=self.node,
            dst_node=repair_to or 0,
            root_node=self.node,
            seg_idx=seg,
            seg_count=seg_count,
            msg_len=source.size,
        )
        dst_mac = BROADCAST_MAC if repair_to is None else self.directory.mac(repair_to)
        self._send(dst_mac, hdr, source.view[start:end])
        self.stats.data_sent += 1

    def _mcast_segment(self, root: _McastRoot, seg: int, *, retransmit: bool) -> None:
        self._send_mcast_segment(
            root.key, root.source, seg, Flag.RETRANSMIT if retransmit else Flag.NONE
        )
        if retransmit:
            root.last_repair[seg] = self.loop.time()
            self.stats.mcast_retransmissions += 1
        else:
            root.sent_at[seg] = self.loop.time()

    def _on_mcast_timeout(self, root: _McastRoot) -> None:
        root.timer = None
        if root.done.done():
            return
        waited = self.loop.time() - root.last_progress
        if waited > self.cfg.peer_timeout:
            laggards = [n for n, c in root.cum.items() if c < root.seg_count]
            root.done.set_exception(
                PeerTimeout(laggards[0], f"multicasting to {len(laggards)} receivers", waited)
            )
            return
        first = root.slowest
        for seg in range(first, min(first + 4, root.next_new)):
            self._mcast_segment(root, seg, retransmit=True)
        root.rtt.rto = min(root.rto * 2, self.cfg.rto_max)
        root.timer = self.loop.call_later(root.rto, self._on_mcast_timeout, root)

    def _root_ack(self, root: _McastRoot, source: int, cum: int) -> None:
        if source not in root.cum or cum <= root.cum[source]:
            return
        before = root.slowest
        root.cum[source] = min(cum, root.seg_count)
        if root.slowest > before:
            now = self.loop.time()
            root.last_progress = now
            newest = root.slowest - 1
            sent = root.sent_at.get(newest)
            if sent is not None and newest not in root.last_repair:  # Karn: clean samples only
                self._rtt_sample(root.rtt, now - sent)
            if root.timer is not None:
                root.timer.cancel()
                root.timer = None
        if root.slowest >= root.seg_count:
            root.done.set_result(None)
        else:
            self._pump_mcast(root)

    def _root_nack(self, root: _McastRoot, ranges: list[tuple[int, int]]) -> None:
        now = self.loop.time()
        interval = root.rto / 2
        for first, count in ranges:
            for seg in range(first, min(first + count, root.next_new)):
                if now - root.last_repair.get(seg, -1e9) >= interval:
                    self._mcast_segment(root, seg, retransmit=True)

    # -- multicast: receivers and co-roots ---------------------------------------------------

    def mcast_incoming(self, root: int, comm: int, epoch: int, tree: int, size: int) -> Incoming:
        """The multicast of ``root`` (acknowledged, or published: see :meth:`request_missing`)."""
        return self._expect(("m", root, comm, epoch, tree), size, root, "broadcast")

    def _ack_target(self, comm: int, root: int, tree: int) -> int | None:
        if self.plan is None or comm not in self.directory.comms:
            return None
        return self.plan(comm, root, tree).ack_target.get(self.node)

    def _on_mcast_data(self, hdr: wire.Header, payload: memoryview) -> None:
        refusal = self.entitled.multicast_data(hdr)
        if refusal is not None:
            self._drop(refusal, hdr)
            return
        key = ("m", hdr.root_node, hdr.comm_id, hdr.epoch, hdr.tree)
        no_ack = bool(hdr.flags & Flag.NO_ACK)
        target = hdr.root_node if no_ack else self._ack_target(hdr.comm_id, hdr.root_node, hdr.tree)
        if target is None:
            self._drop(Refusal.NOT_RECEIVER, hdr)
            return
        if key in self._completed:
            self.stats.duplicates += 1
            if not no_ack:
                self._mcast_report(hdr, target, self._completed[key], final=True)
            return
        admitted = self._admit(key, hdr, payload)
        if admitted is None:
            return
        msg, new = admitted
        if hdr.flags & Flag.REPAIR:
            factor = 0.8 if new else 1.5
            self.repair_quiet = min(
                self.cfg.rto_max, max(self.cfg.rto_min, self.repair_quiet * factor)
            )
        msg.unacked += 1
        if msg.done.done():
            msg.cancel_timers()
            if not no_ack:
                self._mcast_report(hdr, target, msg.seg_count, final=True)
            if msg.consumed:
                self._retire(msg)
            return
        if no_ack:
            return  # the receiver asks for what is missing when things fall silent
        if msg.highest >= msg.contiguous and msg.nack_timer is None:
            # a gap: wait a random moment, the repair another receiver asked for may come
            delay = self.rng.uniform(0.2, 1.0) * self.cfg.nack_delay
            msg.nack_timer = self.loop.call_later(delay, self._mcast_nack, msg, hdr, target)
        if not new or msg.unacked >= self.cfg.ack_every:
            self._mcast_ack_now(msg, hdr, target)
        elif msg.ack_timer is None:
            msg.ack_timer = self.loop.call_later(
                self.cfg.ack_delay, self._mcast_ack_now, msg, hdr, target
            )

    def _mcast_ack_now(self, msg: Incoming, hdr: wire.Header, target: int) -> None:
        if msg.ack_timer is not None:
            msg.ack_timer.cancel()
            msg.ack_timer = None
        msg.unacked = 0
        self._mcast_report(hdr, target, msg.contiguous, final=False)

    def _mcast_report(self, hdr: wire.Header, target: int, cum: int, *, final: bool) -> None:
        """Our own progress goes to our ACK target, which may be ourselves as co-root.
        ``final`` marks the report of a complete receiver answering a retransmission."""
        ack = wire.Header(
            op=Op.ACK,
            comm_id=hdr.comm_id,
            epoch=hdr.epoch,
            tree=hdr.tree,
            root_node=hdr.root_node,
            src_node=self.node,
            dst_node=target,
            seq=cum,
            seg_count=hdr.seg_count,
            flags=Flag.LAST if final else Flag.NONE,
        )
        if target == self.node:
            self._aggregate_ack(ack)
            return
        self._send(self.directory.mac(target), ack, _SACK.pack(0))
        self.stats.acks_sent += 1

    def _mcast_nack(self, msg: Incoming, hdr: wire.Header, target: int) -> None:
        msg.nack_timer = None
        if msg.done.done():
            return
        ranges = msg.missing_ranges(MAX_NACK_RANGES)
        now = self.loop.time()
        if not ranges or now - msg.last_nack < self.cfg.nack_delay * 4:
            if ranges:  # still missing: look again later
                msg.nack_timer = self.loop.call_later(
                    self.cfg.nack_delay * 4, self._mcast_nack, msg, hdr, target
                )
            return
        msg.last_nack = now
        self.stats.nacks_sent += 1
        self._send_nack(hdr, target, ranges)
        msg.nack_timer = self.loop.call_later(
            self.cfg.rto_initial, self._mcast_nack, msg, hdr, target
        )

    def _send_nack(self, hdr: wire.Header, target: int, ranges: list[tuple[int, int]]) -> None:
        if target == self.node:
            self._on_nack_ranges(hdr.root_node, hdr.comm_id, hdr.epoch, hdr.tree, ranges)
            return
        body = b"".join(_NACK_RANGE.pack(first, count) for first, count in ranges)
        nack = wire.Header(
            op=Op.NACK,
            comm_id=hdr.comm_id,
            epoch=hdr.epoch,
            tree=hdr.tree,
            root_node=hdr.root_node,
            src_node=self.node,
            dst_node=target,
        )
        self._send(self.directory.mac(target), nack, body)

    def request_missing(self, msg: Incoming, root: int) -> None:
        """Ask the root of a published multicast for every segment ``msg`` still lacks; the
        caller decides when (after a silence: under load, slow is not lost)."""
        if msg.done.done():
            return
        ranges = missing_runs(msg.received, 0, msg.seg_count, MAX_NACK_RANGES)
        _, _, comm, epoch, tree = msg.key
        nack = wire.Header(
            op=Op.NACK,
            comm_id=comm,
            epoch=epoch,
            tree=tree,
            root_node=root,
            src_node=self.node,
            dst_node=root,
        )
        body = b"".join(_NACK_RANGE.pack(f, c) for f, c in ranges)
        self._send(self.directory.mac(root), nack, body)
        self.stats.nacks_sent += 1

    def _aggregator(self, key: tuple[int, int, int, int]) -> _Aggregator | None:
        agg = self._aggregators.get(key)
        root, comm, _, tree = key
        if agg is None and self.plan is not None and comm in self.directory.comms:
            members = self.plan(comm, root, tree).aggregates.get(self.node)
            if members is not None:
                agg = _Aggregator(members, root)
                self._aggregators[key] = agg
        return agg

    def _aggregate_ack(self, ack: wire.Header) -> None:
        """An ACK for a multicast this node roots or aggregates (its own progress included)."""
        key = (ack.root_node, ack.comm_id, ack.epoch, ack.tree)
        member, cum = ack.src_node, ack.seq
        root = self._roots.get(key)
        if root is not None:
            if member in root.cum:
                self._root_ack(root, member, cum)
                return
            # a member of the root's own group: the root is that group's co-root
            agg = self._aggregators.get(key)
            if agg is not None:
                self._merge(agg, member, cum)
                self._root_ack(root, self.node, min(agg.cum.values()))
            return
        if ack.root_node == self.node:
            return  # a late ACK for a multicast this node finished rooting
        done = self._aggregated.get(key)
        if done is not None:
            # every member had it all: a late retransmission asks again, answer at once
            if ack.flags & Flag.LAST:
                self._report_upstream(key, done, ack.root_node)
            return
        agg = self._aggregator(key)
        if agg is None:
            self._drop("multicast ACK for a tree this node does not aggregate", ack)
            return
        repeated = not self._merge(agg, member, cum)
        merged = min(agg.cum.values())
        if merged >= ack.seg_count:
            if agg.timer is not None:
                agg.timer.cancel()
            del self._aggregators[key]
            self._aggregated[key] = merged
            while len(self._aggregated) > self.cfg.completed_memory:
                self._aggregated.popitem(last=False)
            self._report_upstream(key, merged, agg.upstream)
        elif merged > agg.reported:
            if agg.timer is None:
                agg.timer = self.loop.call_later(self.cfg.ack_delay, self._report_merged, key)
        elif repeated and self.loop.time() - agg.reported_at >= self.cfg.nack_delay * 4:
            # a member repeating itself answers a retransmission: the root has not heard our
            # last report (lost on the way). Say it again, or a lost tail segment would be
            # retransmitted from the wrong place forever.
            self._report_merged(key)

    def _merge(self, agg: _Aggregator, member: int, cum: int) -> bool:
        """Record a member's progress; whether it moved."""
        if member in agg.cum and cum > agg.cum[member]:
            agg.cum[member] = cum
            return True
        return False

    def _report_merged(self, key: tuple[int, int, int, int]) -> None:
        agg = self._aggregators.get(key)
        if agg is None:
            return
        agg.timer = None
        agg.reported = min(agg.cum.values())
        agg.reported_at = self.loop.time()
        self._report_upstream(key, agg.reported, agg.upstream)

    def _report_upstream(self, key: tuple[int, int, int, int], cum: int, upstream: int) -> None:
        root_node, comm, epoch, tree = key
        ack = wire.Header(
            op=Op.ACK,
            comm_id=comm,
            epoch=epoch,
            tree=tree,
            root_node=root_node,
            src_node=self.node,
            dst_node=upstream,
            seq=cum,
        )
        self._send(self.directory.mac(upstream), ack, _SACK.pack(0))
        self.stats.acks_sent += 1

    def _on_mcast_ack(self, hdr: wire.Header) -> None:
        key = (hdr.root_node, hdr.comm_id, hdr.epoch, hdr.tree)
        if hdr.root_node == self.node and key not in self._roots:
            return  # a late ACK for a multicast this node finished rooting
        refusal = self.entitled.feedback(hdr)
        if refusal is not None:
            self._drop(refusal, hdr)
            return
        self._aggregate_ack(hdr)

    def _on_nack(self, hdr: wire.Header, payload: memoryview) -> None:
        self.stats.nacks_received += 1
        ranges = [
            _NACK_RANGE.unpack_from(payload, i * _NACK_RANGE.size)
            for i in range(min(len(payload) // _NACK_RANGE.size, MAX_NACK_RANGES))
        ]
        key = (hdr.root_node, hdr.comm_id, hdr.epoch, hdr.tree)
        published = key in self._published
        if not published and hdr.root_node == self.node and key not in self._roots:
            return  # ours, not yet published or already withdrawn: nothing to repair from
        refusal = self.entitled.feedback(hdr, published=published)
        if refusal is not None:
            self._drop(refusal, hdr)
            return
        if published:
            self._repair(key, hdr.src_node, ranges)
            return
        self._on_nack_ranges(hdr.root_node, hdr.comm_id, hdr.epoch, hdr.tree, ranges)

    def _on_nack_ranges(
        self, root_node: int, comm: int, epoch: int, tree: int, ranges: list[tuple[int, int]]
    ) -> None:
        key = (root_node, comm, epoch, tree)
        root = self._roots.get(key)
        if root is not None:
            self._root_nack(root, ranges)
            return
        if root_node == self.node:
            return  # ours, not yet published or already withdrawn: nothing to repair from
        agg = self._aggregator(key)
        if agg is None:
            return
        # forward each missing range once per interval: one loss high in the tree brings one
        # NACK per co-root to the root, not one per receiver
        now = self.loop.time()
        fresh = [r for r in ranges if now - agg.forwarded.get(r[0], -1e9) >= self.cfg.rto_initial]
        if not fresh:
            return
        for first, _ in fresh:
            agg.forwarded[first] = now
        self.stats.nacks_forwarded += 1
        body = b"".join(_NACK_RANGE.pack(first, count) for first, count in fresh)
        nack = wire.Header(
            op=Op.NACK,
            comm_id=comm,
            epoch=epoch,
            tree=tree,
            root_node=root_node,
            src_node=self.node,
            dst_node=agg.upstream,
        )
        self._send(self.directory.mac(agg.upstream), nack, body)

    # -- barrier ------------------------------------------------------------------------------

    async def barrier_arrive(self, comm: int, epoch: int, timeout: float) -> None:
        """Arrive at barrier ``epoch`` of ``comm`` and wait for its release."""
        released = self._released.get(comm)
        if released is None:
            raise EngineError(f"communicator {comm} is not registered on node {self.node}")
        if not wire.serial_lt(released, epoch):
            return
        waiter: asyncio.Future[None] = self.loop.create_future()
        self._barrier_waiters.setdefault(comm, []).append((epoch, waiter))
        if wire.serial_lt(self._arrived.get(comm, released), epoch):
            self._arrived[comm] = epoch
        hdr = wire.Header(op=Op.ARRIVE, comm_id=comm, epoch=epoch, src_node=self.node)
        delay = self.cfg.barrier_rto
        deadline = self.loop.time() + timeout
        self._send(BROADCAST_MAC, hdr)
        self.stats.arrives_sent += 1
        try:
            while True:
                remaining = deadline - self.loop.time()
                if remaining <= 0:
                    raise PeerTimeout(
                        self.directory.switch_of(self.node)
                        if self.node in self.directory.places
                        else 0,
                        f"waiting for RELEASE of barrier epoch {epoch} on communicator {comm}",
                        timeout,
                    )
                try:
                    await asyncio.wait_for(asyncio.shield(waiter), min(delay, remaining))
                    return
                except TimeoutError:
                    self._send(BROADCAST_MAC, hdr.with_(flags=Flag.RETRANSMIT))
                    self.stats.arrive_retransmissions += 1
                    delay = min(delay * 2, self.cfg.barrier_rto_max)
        finally:
            waiters = self._barrier_waiters.get(comm, [])
            if (epoch, waiter) in waiters:
                waiters.remove((epoch, waiter))

    def _on_release(self, hdr: wire.Header) -> None:
        refusal = self.entitled.release(hdr)
        if refusal is not None:
            self._drop(refusal, hdr)
            return
        comm, epoch = hdr.comm_id, hdr.epoch
        released = self._released.get(comm)
        if released is None:
            self._drop("RELEASE for an unknown communicator", hdr)
            return
        if wire.serial_lt(self._arrived.get(comm, released), epoch):
            # nothing releases an epoch this rank has not entered: a forged or corrupt frame
            self._drop("RELEASE for a barrier epoch this rank has not entered", hdr)
            return
        if wire.serial_lt(released, epoch):
            self._released[comm] = epoch
        newest = self._released[comm]
        for waiting_epoch, waiter in list(self._barrier_waiters.get(comm, [])):
            if not wire.serial_lt(newest, waiting_epoch) and not waiter.done():
                waiter.set_result(None)

    def released_epoch(self, comm: int) -> int:
        return self._released.get(comm, 0)

    # -- dispatch -----------------------------------------------------------------------------

    def _on_frame(self, frame: bytes) -> None:
        self.stats.frames_received += 1
        try:
            parsed = wire.parse_frame(frame)
        except wire.WireError as exc:
            self._drop(f"malformed frame: {exc}", None)
            return
        hdr = parsed.hdr
        if hdr.src_node == self.node:
            return  # our own frame reflected back (kernels without PACKET_IGNORE_OUTGOING)
        op = hdr.op
        if op == Op.UNICAST and hdr.flags & Flag.REPAIR:
            if hdr.dst_node == self.node:
                self._on_mcast_data(hdr, parsed.payload)
        elif op == Op.UNICAST:
            if hdr.dst_node == self.node:
                self._on_unicast_data(hdr, parsed.payload)
            else:
                self._drop("unicast for another node", hdr)
        elif op == Op.MCAST:
            self._on_mcast_data(hdr, parsed.payload)
        elif op == Op.ACK:
            if hdr.dst_node != self.node:
                self._drop("ACK for another node", hdr)
            elif hdr.root_node == wire.NODE_NONE:
                self._on_unicast_ack(hdr, parsed.payload)
            else:
                self._on_mcast_ack(hdr)
        elif op == Op.NACK:
            if hdr.dst_node == self.node:
                self._on_nack(hdr, parsed.payload)
        elif op == Op.RELEASE:
            self._on_release(hdr)
        elif op == Op.PING:
            if hdr.dst_node == self.node:
                pong = hdr.with_(op=Op.PONG, src_node=self.node, dst_node=hdr.src_node)
                self._send(
                    self.directory.macs.get(hdr.src_node, BROADCAST_MAC), pong, parsed.payload
                )
        elif op == Op.PONG:
            self._on_pong(hdr)
        else:
            self._drop(f"unexpected op {wire.Op(op).name}", hdr)

    # reachability probes -----------------------------------------------------------------

    def ping(self, dst: int, seq: int, dst_mac: bytes | None = None) -> asyncio.Future[float]:
        """Send a PING; the future gives the round-trip time when the PONG arrives."""
        fut: asyncio.Future[float] = self.loop.create_future()
        self._pings[(dst, seq)] = (self.loop.time(), fut)
        hdr = wire.Header(op=Op.PING, src_node=self.node, dst_node=dst, seq=seq)
        self._send(dst_mac or self.directory.macs.get(dst, BROADCAST_MAC), hdr)
        return fut

    def _on_pong(self, hdr: wire.Header) -> None:
        entry = self._pings.pop((hdr.src_node, hdr.seq), None)
        if entry is not None and not entry[1].done():
            entry[1].set_result(self.loop.time() - entry[0])

    # bad input ----------------------------------------------------------------------------

    def _drop(self, reason: str, hdr: wire.Header | None) -> None:
        """Count and log (rate-limited: the first few, then every 1000th) a rejected frame."""
        key = reason.split(":")[0]
        self.stats.dropped[key] += 1
        seen = self._log_budget[key]
        self._log_budget[key] += 1
        if seen < 5 or seen % 1000 == 0:
            where = (
                f" (op {hdr.op} comm {hdr.comm_id} epoch {hdr.epoch} from node {hdr.src_node})"
                if hdr is not None
                else ""
            )
            LOG.warning(
                "node %d rejected a frame: %s%s [%d so far]", self.node, reason, where, seen + 1
            )
