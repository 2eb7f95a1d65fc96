"""Every message this host is receiving, unicast and multicast alike.

A message is created when its receiver asks for it (:meth:`Inbox.expect`) or when its first
segment arrives (:meth:`Inbox.admit`: early data, admitted only for a plausible communicator
and epoch and within :class:`EarlyBudget`). Completed messages are remembered so that their
duplicates are acknowledged again: a sender whose last ACK was lost keeps retransmitting.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

from controller import wire
from host_agents.transport.config import EngineError, SizeMismatch
from host_agents.transport.early import EarlyBudget, segment_charge, start_charge
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.keys import McastKey, MessageKey
from host_agents.transport.messages import Incoming, segment_count

# completed messages up to this many segments keep their arrival times for D-SACKs (larger
# ones answer duplicates without a hold time)
HELD_SEGMENTS = 64

EarlyFilter = Callable[[int, int], bool]  # (comm, epoch) -> may early data start there


class Inbox:
    def __init__(self, endpoint: Endpoint, accepts_early: EarlyFilter) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.accepts_early = accepts_early
        self.messages: dict[MessageKey, Incoming] = {}
        self.completed: collections.OrderedDict[MessageKey, int] = collections.OrderedDict()
        # completed messages of at most HELD_SEGMENTS segments: when each segment arrived
        self._arrived_at: dict[MessageKey, dict[int, float]] = {}
        self.early = EarlyBudget(self.cfg)
        self._sweep: asyncio.TimerHandle | None = None

    def expect(self, key: MessageKey, size: int, peer: int, what: str) -> Incoming:
        """The receiver's side of a message it is about to wait for: found if it started
        arriving (its size must then match), created otherwise."""
        msg = self.messages.get(key)
        if msg is None:
            if key in self.completed:
                raise EngineError(f"{what} from node {peer} was already received and consumed")
            msg = Incoming(
                self.endpoint.loop, key, size, segment_count(size, self.cfg.segment_size)
            )
            self.messages[key] = msg
        elif msg.size != size:
            raise SizeMismatch(peer, what, size, msg.size)
        if msg.early:
            msg.materialize(self.cfg.segment_size)
            self.early.release(msg)
        return msg

    def admit(
        self, key: MessageKey, hdr: wire.Header, payload: memoryview
    ) -> tuple[Incoming, bool] | None:
        """Place one data segment in its message, created if it is the first we see and its
        communicator and epoch are plausible; (message, whether the segment was new), or
        None when the frame was rejected (counted and logged)."""
        msg = self.messages.get(key)
        sender = hdr.src_node
        drop = self.endpoint.drop
        if msg is None:
            if not self.accepts_early(hdr.comm_id, hdr.epoch):
                drop("unknown communicator or epoch", hdr)
                return None
            if hdr.msg_len > self.cfg.max_message:
                drop("message larger than max_message", hdr)
                return None
            seg_count = segment_count(hdr.msg_len, self.cfg.segment_size)
            if hdr.seg_count != seg_count:
                drop("segment count does not match the message size", hdr)
                return None
            if not self.early.may_start(sender):
                drop("too many messages nobody has asked for yet from one sender", hdr)
                return None
            if not self.early.charge(sender, start_charge(seg_count)):
                drop("too much data nobody has asked for yet", hdr)
                return None
            msg = Incoming(self.endpoint.loop, key, hdr.msg_len, seg_count, early_sender=sender)
            msg.early_charged = start_charge(seg_count)
            self.early.started(sender)
            self.messages[key] = msg
            self._arm_sweep()
        if not self._fits(msg, hdr):
            return None
        if (
            msg.early
            and not msg.received[hdr.seg_idx]
            and not self.early.charge(sender, segment_charge(len(payload)), msg)
        ):
            drop("too much data nobody has asked for yet", hdr)
            return None
        if isinstance(key, McastKey):  # who vouches for the content (transport/digests.py)
            if hdr.src_node == hdr.root_node:
                msg.root_digest = hdr.seq or msg.root_digest
            elif not msg.received[hdr.seg_idx]:
                msg.coroot_copy = True
        new = msg.place(hdr.seg_idx, payload, self.cfg.segment_size)
        if not new:
            self.endpoint.stats.duplicates += 1
        return msg, new

    def _fits(self, msg: Incoming, hdr: wire.Header) -> bool:
        drop = self.endpoint.drop
        if hdr.msg_len != msg.size or hdr.seg_count != msg.seg_count:
            drop(f"message size not the expected one: {hdr.msg_len} bytes, not {msg.size}", hdr)
            if not msg.done.done():
                msg.done.set_exception(
                    SizeMismatch(hdr.src_node, f"message tag {hdr.tag}", msg.size, hdr.msg_len)
                )
            return False
        if hdr.seg_idx >= msg.seg_count:
            drop("segment index beyond the message", hdr)
            return False
        start, end = (
            hdr.seg_idx * self.cfg.segment_size,
            min(msg.size, (hdr.seg_idx + 1) * self.cfg.segment_size),
        )
        if hdr.payload_len != end - start:
            drop("segment length does not match its index", hdr)
            return False
        return True

    def consume(self, msg: Incoming) -> None:
        """The caller has the data: forget the message, remember it to re-ACK duplicates."""
        msg.consumed = True
        if msg.done.done():
            self.retire(msg)

    def retire(self, msg: Incoming) -> None:
        msg.cancel_timers()
        self.early.release(msg)
        if self.messages.get(msg.key) is msg:
            del self.messages[msg.key]
        self.completed[msg.key] = msg.seg_count
        if msg.seg_count <= HELD_SEGMENTS:
            self._arrived_at[msg.key] = msg.arrived_at
        while len(self.completed) > self.cfg.completed_memory:
            oldest, _ = self.completed.popitem(last=False)
            self._arrived_at.pop(oldest, None)

    def held_for(self, key: MessageKey, seg: int) -> float | None:
        """How long this node has had segment ``seg`` of ``key``; None when it no longer
        knows. A D-SACK carries it, so the sender can tell a slow original (just arrived)
        from a lost ACK (arrived long ago). A segment's own time, not its message's: the
        duplicate of a segment that came long ago often follows the segment that just
        completed the message."""
        msg = self.messages.get(key)
        times = msg.arrived_at if msg is not None else self._arrived_at.get(key)
        at = None if times is None else times.get(seg)
        return None if at is None else max(0.0, self.endpoint.loop.time() - at)

    def purge(self, comm: int) -> None:
        """Forget everything received or being received on ``comm``."""
        for key in [k for k in self.completed if k.comm == comm]:
            del self.completed[key]
            self._arrived_at.pop(key, None)
        for key in [k for k in self.messages if k.comm == comm]:
            msg = self.messages.pop(key)
            msg.cancel_timers()
            self.early.release(msg)

    def _arm_sweep(self) -> None:
        if self._sweep is None:
            self._sweep = self.endpoint.loop.call_later(
                min(self.cfg.early_idle_timeout, self.cfg.early_complete_timeout) / 2,
                self._sweep_early,
            )

    def _sweep_early(self) -> None:
        """Drop unfinished early messages that stopped arriving (their sender gave up)."""
        self._sweep = None
        now = self.endpoint.loop.time()
        for key, msg in list(self.messages.items()):
            idle = now - msg.last_arrival
            if msg.early and (
                idle > self.cfg.early_idle_timeout
                if not msg.done.done()
                else idle > self.cfg.early_complete_timeout
            ):
                del self.messages[key]
                msg.cancel_timers()
                self.early.release(msg)
                self.endpoint.stats.dropped["early message expired"] += 1
        if any(m.early for m in self.messages.values()):
            self._arm_sweep()
