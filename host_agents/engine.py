"""The host protocol engine: one per host, on an asyncio loop, driven only by frames arriving
and timers firing, never by polling. Collectives above it (``host_agents.algorithms``) send
and receive *messages* named by (peer, communicator, epoch, tag) or (root, communicator,
epoch, tree); the engine segments them to the MTU and makes them reliable. Each protocol lives
in its own module under ``host_agents/transport/``: ``unicast`` (per-message window,
per-peer AIMD, SACK, RTO with backoff); ``multicast_root`` (the switch replicates, the root
keeps a window over its slowest group); ``multicast_receiver`` (delayed ACKs, randomly
delayed NACKs); ``aggregation`` (a co-root per dragonfly group merges its group's ACKs and
NACKs, [IB-mcast]); ``publish`` (multicast without ACKs, for allgather); ``barrier`` (ARRIVE
resent until a RELEASE covers its epoch); ``queue_wait`` (silences that queues explain);
``inbox`` and ``early`` (messages being received, and those nobody asked for yet).

This module keeps what they share: the port, frame dispatch, the sender checks
(:mod:`host_agents.entitlement`), counters, drops, and communicators' lifecycle. A message
whose peer makes no progress for ``peer_timeout`` fails with :class:`PeerTimeout`.
"""

from __future__ import annotations

import asyncio
import random

from controller import wire
from controller.wire import Flag, Op
from host_agents.directory import Directory
from host_agents.entitlement import Entitlement
from host_agents.plans import PlanFunc
from host_agents.port import Port
from host_agents.transport.aggregation import CoRoots
from host_agents.transport.barrier import Barrier
from host_agents.transport.config import (
    EngineConfig,
    EngineError,
    EngineStats,
    PeerTimeout,
    SizeMismatch,
)
from host_agents.transport.drops import DropLog
from host_agents.transport.epochs import Epochs
from host_agents.transport.feedback import unpack_ranges
from host_agents.transport.inbox import Inbox
from host_agents.transport.keys import McastKey, UnicastKey
from host_agents.transport.mcast_root_state import McastRoot
from host_agents.transport.messages import Incoming, Source
from host_agents.transport.multicast_receiver import MulticastReceiver
from host_agents.transport.multicast_root import MulticastRoots
from host_agents.transport.probes import Probes
from host_agents.transport.publish import Publisher, RepairPacer, RepairRequests
from host_agents.transport.queue_delay import QUEUED_OPS, QueueDelay
from host_agents.transport.switch_reduce import SwitchReduce
from host_agents.transport.unicast import Unicast

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineError",
    "EngineStats",
    "Incoming",
    "McastKey",
    "PeerTimeout",
    "SizeMismatch",
    "Source",
]


Data = Source | bytes | bytearray | memoryview


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
        self.last_heard = self.loop.time()  # the newest queued frame (Endpoint.last_heard)
        self.queue_delay = QueueDelay(self.cfg.stamp_unit, self.cfg.rto_max / 2)
        self.mac = directory.macs.get(node_id, b"\x02" + b"\x00" * 5)
        self.entitled = Entitlement(node_id, directory, plan)
        self._epochs = Epochs(self.cfg)  # started and unfinished: what early data may join
        self._closing: dict[int, asyncio.TimerHandle] = {}  # freed comm -> its purge
        self.drop = DropLog(node_id, self.stats)  # count and log a rejected frame
        self._inbox = Inbox(self, self._accepts_early)
        self._unicast = Unicast(self, self._inbox)
        self._roots = MulticastRoots(self)
        self._coroots = CoRoots(self, self._inbox)
        self._publisher = Publisher(self)
        self._repairs = RepairRequests(self)
        self._mcast_rx = MulticastReceiver(
            self,
            self._inbox,
            self._repairs,
            ack_self=self._route_mcast_ack,
            nack_self=self._route_nack,
            relay=self._coroots.relay,
            filled=self._coroots.filled,
        )
        self.barriers = Barrier(self)  # barrier epochs: ARRIVE resends, RELEASEs
        self._switch_reduce = SwitchReduce(self)
        self._probes = Probes(self)
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

    def register_comm(
        self, comm: int, members: tuple[int, ...], *, switch_acks: bool = False
    ) -> None:
        """``switch_acks``: the switches merge this communicator's multicast ACKs."""
        if comm in self._closing:  # the id was freed and handed out again: a new communicator
            self._purge_comm(comm)
        self.directory.comms[comm] = members
        if switch_acks != (comm in self.directory.switch_acks):
            self.directory.switch_acks ^= {comm}
            self._forget_plans(comm)
        self.barriers.register(comm)

    def resume_barrier(self, comm: int, released: int) -> None:
        """The switches already released ``comm``'s barriers up to ``released`` (an earlier
        job on this communicator): the next ARRIVE is for the epoch after it."""
        self.barriers.resume(comm, released)

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
        self._epochs.forget(comm)
        self.barriers.purge(comm)
        self._switch_reduce.purge(comm)
        self._inbox.purge(comm)
        self._coroots.purge(comm)
        self._publisher.purge(comm)
        self._roots.purge(comm)
        self._unicast.purge(comm)
        self.directory.switch_acks.discard(comm)
        self._forget_plans(comm)

    def _forget_plans(self, comm: int) -> None:
        forget = getattr(self.plan, "forget", None)
        if forget is not None:
            forget(comm)

    def is_closing(self, comm: int) -> bool:
        return comm in self._closing

    def note_epoch(self, comm: int, epoch: int) -> None:
        """The local rank started collective ``epoch`` on ``comm``: its early frames, and
        those up to ``epochs_ahead`` beyond the newest started, are buffered."""
        self._epochs.started(comm, epoch)

    def epoch_finished(self, comm: int, epoch: int) -> None:
        """The local rank's collective ``epoch`` on ``comm`` ended (done or failed)."""
        self._epochs.finished(comm, epoch)

    def _accepts_early(self, comm: int, epoch: int) -> bool:
        if comm not in self.directory.comms or comm in self._closing:
            return False
        return self._epochs.accepts_early(comm, epoch, len(self.directory.comms[comm]))

    @property
    def early_bytes_held(self) -> int:
        """Bytes of messages that arrived before anyone asked for them."""
        return self._inbox.early.held

    # -- unicast ----------------------------------------------------------------------------

    def send_message(
        self, dst: int, comm: int, epoch: int, tag: int, source: Data
    ) -> asyncio.Future[None]:
        """Start sending; the future completes when the receiver has every segment."""
        if not isinstance(source, Source):
            source = Source(source)
        return self._unicast.send(UnicastKey(dst, comm, epoch, tag), source)

    def incoming(self, src: int, comm: int, epoch: int, tag: int, size: int) -> Incoming:
        """The message (src, comm, epoch, tag), created if it has not started arriving."""
        return self._unicast.incoming(UnicastKey(src, comm, epoch, tag), size)

    def consume(self, msg: Incoming) -> None:
        """The caller has the data: forget the message, remember it to re-ACK duplicates."""
        self._coroots.keep(msg)
        self._inbox.consume(msg)

    # -- multicast --------------------------------------------------------------------------

    def mcast_send(self, comm: int, epoch: int, tree: int, source: Data) -> McastRoot:
        """Multicast ``source`` along (comm, this node, tree): the result's ``sent`` completes
        when every segment went out once, its ``done`` when every receiver has them all.
        Bytes are copied (their owner may reuse them once ``sent``); a :class:`Source`, such
        as a relay's incoming message, is the engine's own and is not."""
        assert self.plan is not None, "multicast needs a plan function"
        source = source if isinstance(source, Source) else Source(bytes(source))
        key = McastKey(self.node, comm, epoch, tree)
        return self._roots.send(key, source, self.plan(comm, self.node, tree))

    def mcast_publish(
        self, comm: int, epoch: int, tree: int, data: bytes | bytearray | memoryview
    ) -> McastKey:
        """Multicast without acknowledgements. Receivers NACK what they miss (repaired by
        unicast, or by one multicast once several receivers ask for the same segment) and
        the data stays here for repairs until :meth:`mcast_withdraw`; the caller
        learns completion another way, a barrier. When every rank multicasts (allgather) this
        keeps control traffic O(P) instead of O(P^2) ACKs."""
        return self._publisher.publish(McastKey(self.node, comm, epoch, tree), Source(data))

    def mcast_withdraw(self, key: McastKey, *, confirmed: bool = False) -> None:
        self._publisher.withdraw(key, confirmed=confirmed)

    def mcast_incoming(self, root: int, comm: int, epoch: int, tree: int, size: int) -> Incoming:
        """The multicast of ``root`` (acknowledged, or published: see :meth:`request_missing`)."""
        return self._mcast_rx.incoming(McastKey(root, comm, epoch, tree), size)

    def ask_resend(self, msg: Incoming) -> None:
        """Ask for ``msg`` now, it is due (context.CollectiveContext.ask_resend)."""
        (self._mcast_rx.ask if isinstance(msg.key, McastKey) else self._unicast.ask_resend)(msg)

    def request_missing(self, msg: Incoming, root: int) -> None:
        """Ask the root of a published multicast for what ``msg`` lacks (the caller: when)."""
        self._repairs.request_missing(msg, root)

    def repair_pacer(self, window: int, members: tuple[int, ...]) -> RepairPacer:
        """publish.RepairPacer, for the roots among ``members``."""
        return self._repairs.pacer(window, members)

    @property
    def repair_quiet(self) -> float:
        """How long arrivals of published multicasts may pause before the receiver asks for
        repairs: grows on false alarms (the repair was a duplicate), shrinks on real ones."""
        return self._repairs.quiet

    def _route_mcast_ack(self, ack: wire.Header) -> None:
        """An ACK for a multicast this node roots or aggregates (its own progress included)."""
        key = McastKey.of(ack)
        if ack.flags & Flag.DUPLICATE and ack.root_node == self.node:
            self._roots.on_duplicate(key, ack.seg_idx, wire.held_seconds(ack.msg_len))
        # only a switch-merged ACK echoes a send stamp (the receivers' own, passed on unchanged)
        merged = (ack.seg_idx, ack.seg_count, ack.stamp) if ack.flags & Flag.MERGE else None
        held = 0 if ack.flags & (Flag.DUPLICATE | Flag.MERGE) else ack.msg_len  # a co-root's
        if self._roots.on_ack(key, ack.src_node, ack.seq, merged, held_us=held):
            return
        if ack.root_node == self.node:
            return  # a late ACK for a multicast this node finished rooting
        self._coroots.on_ack(key, ack)

    def _route_nack(
        self, key: McastKey, ranges: list[tuple[int, int]], requester: int | None = None
    ) -> None:
        """Missing ranges of ``requester`` (None: this node itself) for a multicast this node
        roots or aggregates."""
        if self._roots.on_nack(key, ranges, requester):
            return
        if key.root == self.node:
            return  # ours, not yet published or already withdrawn: nothing to repair from
        self._coroots.forward_nack(key, ranges, requester)

    # -- barrier ----------------------------------------------------------------------------

    def barrier_arrive(self, comm: int, epoch: int, timeout: float) -> asyncio.Future[None]:
        """Arrive at barrier ``epoch`` of ``comm``; the future completes at its release."""
        return self.barriers.arrive(comm, epoch, timeout)

    async def reduce_in_switches(
        self, comm: int, epoch: int, data: bytes | bytearray, op: wire.AggOp, timeout: float
    ) -> bytes:
        """Every rank's ``data`` combined by the switches (instance ``epoch``, a barrier epoch)."""
        result = await self._switch_reduce.reduce(comm, epoch, data, op, timeout)
        self.barriers.released_by_reduction(comm, epoch)  # its last RESULT released the epoch
        return result

    # -- frames -----------------------------------------------------------------------------

    def send_frame(
        self, dst_mac: bytes, hdr: wire.Header, payload: bytes | memoryview = b""
    ) -> None:
        self.port.send(wire.build_frame(hdr, payload, dst_mac=dst_mac, src_mac=self.mac))
        self.stats.frames_sent += 1

    def _on_frame(self, frame: bytes) -> None:
        self.stats.frames_received += 1
        try:
            parsed = wire.parse_frame(frame)
        except wire.WireError as exc:
            self.drop(f"malformed frame: {exc}", None)
            return
        hdr, payload = parsed.hdr, parsed.payload
        if hdr.op in QUEUED_OPS:
            self.last_heard = self.loop.time()
        if hdr.src_node == self.node:
            return  # our own frame reflected back (kernels without PACKET_IGNORE_OUTGOING)
        op = hdr.op
        if op == Op.UNICAST and hdr.flags & Flag.REPAIR:
            if hdr.dst_node == self.node:
                self._on_mcast_data(hdr, payload)
        elif op == Op.UNICAST:
            if hdr.dst_node == self.node:
                self._on_unicast_data(hdr, payload)
            else:
                self.drop("unicast for another node", hdr)
        elif op == Op.MCAST:
            self._on_mcast_data(hdr, payload)
        elif op == Op.ACK:
            if hdr.dst_node != self.node:
                self.drop("ACK for another node", hdr)
            elif hdr.root_node == wire.NODE_NONE:
                self._unicast.on_ack(hdr, payload)  # the lookup by sender is the check
            else:
                self._on_mcast_ack(hdr)
        elif op == Op.NACK:
            if hdr.dst_node == self.node:
                self._on_nack(hdr, payload)
        elif op in (Op.RELEASE, Op.RESULT, Op.ARRIVE, Op.REDUCE):  # ARRIVE, REDUCE: echo, ask
            refusal = self.entitled.from_my_switch(hdr)
            if refusal is not None:
                self.drop(refusal, hdr)
            elif op in (Op.RESULT, Op.REDUCE):
                self._switch_reduce.on_switch_frame(hdr, payload)
            else:
                self.barriers.on_switch_frame(hdr)
        elif op == Op.PING:
            self._probes.on_ping(hdr, payload)
        elif op == Op.PONG:
            self._probes.on_pong(hdr)
        else:
            self.drop(f"unexpected op {wire.Op(op).name}", hdr)

    def _on_unicast_data(self, hdr: wire.Header, payload: memoryview) -> None:
        refusal = self.entitled.unicast_data(hdr)
        if refusal is not None:
            self.drop(refusal, hdr)
            return
        self._unicast.on_data(hdr, payload)

    def _on_mcast_data(self, hdr: wire.Header, payload: memoryview) -> None:
        refusal = self.entitled.multicast_data(hdr)
        if refusal is not None:
            self.drop(refusal, hdr)
            return
        self.queue_delay.observe(hdr, self.last_heard)
        self._mcast_rx.on_data(hdr, payload)

    def _on_mcast_ack(self, hdr: wire.Header) -> None:
        if hdr.root_node == self.node:
            self.stats.mcast_acks_at_root += 1
        if hdr.root_node == self.node and not self._roots.is_rooting(McastKey.of(hdr)):
            return  # a late ACK for a multicast this node finished rooting
        if hdr.flags & Flag.MERGE:
            refusal = self.entitled.merged_ack(hdr)
        else:
            refusal = self.entitled.feedback(hdr)
        if refusal is not None:
            self.drop(refusal, hdr)
            return
        self._route_mcast_ack(hdr)

    def _on_nack(self, hdr: wire.Header, payload: memoryview) -> None:
        self.stats.nacks_received += 1
        ranges = unpack_ranges(payload)
        key = McastKey.of(hdr)
        published = self._publisher.holds(key)
        unheld = not published and hdr.root_node == self.node and not self._roots.is_rooting(key)
        refusal = self.entitled.feedback(hdr, published=published or unheld)
        if refusal is not None:
            self.drop(refusal, hdr)
            return
        if unheld:  # ours, not published yet or withdrawn: nothing to repair from, counted
            self._publisher.unanswerable(key)
            return
        if published:
            self._publisher.repair(key, hdr.src_node, ranges)
            return
        refusal = self.entitled.on_behalf(hdr)
        if refusal is not None:
            self.drop(refusal, hdr)
            return
        self._route_nack(key, ranges, hdr.tag or hdr.src_node)

    # -- reachability probes ----------------------------------------------------------------

    def ping(self, dst: int, seq: int, dst_mac: bytes | None = None) -> asyncio.Future[float]:
        """Send a PING; the future gives the round-trip time when the PONG arrives."""
        return self._probes.ping(dst, seq, dst_mac)
