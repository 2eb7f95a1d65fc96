"""Messages as the transport sees them: bytes to send, and segments landing as they arrive."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from host_agents.transport.digests import CorruptCopy, digest_of
from host_agents.transport.feedback import SACK_BITS
from host_agents.transport.keys import MessageKey


def segment_count(size: int, segment_size: int) -> int:
    return max(1, -(-size // segment_size))


def segment_bounds(size: int, seg: int, segment_size: int) -> tuple[int, int]:
    """Byte range [start, end) of segment ``seg`` of a ``size``-byte message."""
    start = seg * segment_size
    return start, min(size, start + segment_size)


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


class Source:
    """Bytes a sender may transmit; a relay's incoming message is a Source that grows."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.view = memoryview(data).cast("B")
        self.size = len(self.view)
        self.available = self.size
        self._listeners: list[Callable[[], None]] = []
        self.digest = 0  # digests.digest_of the content, once complete (0: not computed yet)

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _grown(self) -> None:
        for listener in list(self._listeners):
            listener()


class Incoming(Source):
    """A message being received: segments land in place; ``available`` is the in-order prefix.

    An *early* message (data arrived before the receiver asked for it) parks its segments
    instead of reserving the size its header claims: memory follows what really arrived, and
    the message buffer is made when the receiver claims it (:meth:`materialize`)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        key: MessageKey,
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
        self.early_charged = 0  # bytes charged to the early budgets (transport/early.py)
        # a multicast's content as its root says it is (transport/digests.py), and whether
        # any segment came from someone else (a co-root's repair)
        self.root_digest = 0
        self.coroot_copy = False
        self.loop = loop
        self.last_arrival = loop.time()
        # when each segment first arrived, for the hold time a D-SACK reports (only what
        # arrived takes memory, as for parked data)
        self.arrived_at: dict[int, float] = {}
        self.key = key
        self.seg_count = seg_count
        self.received = bytearray(seg_count)
        self.n_received = 0
        self.contiguous = 0  # segments [0, contiguous) are here
        self.done: asyncio.Future[bytearray] = loop.create_future()
        self.unacked = 0
        self.checkpoint = 0  # switch-merged ACKs: the last checkpoint sent (merged_acks.py)
        self.ack_timer: asyncio.TimerHandle | None = None
        self.nack_timer: asyncio.TimerHandle | None = None
        self.last_nack = -1e9
        self.repair_asks = 0  # NACKs for this published multicast
        self.first_nack = -1e9  # when the first of them was sent
        self.nack_retry = 0.0  # how long before NACKing again (0: not NACKed yet)
        self.highest = -1
        self.consumed = False
        self.published = False  # a multicast without ACKs (allgather): no co-root duties
        # created by arriving data before the receiver asked for it; its parked bytes count
        # against the early budgets until the receiver claims it
        self.early = early_sender is not None

    def place(self, seg: int, payload: memoryview, segment_size: int) -> bool:
        """Store one segment; False when it is a duplicate."""
        if self.received[seg]:
            return False
        self.received[seg] = 1
        self.n_received += 1
        self.last_arrival = self.arrived_at[seg] = self.loop.time()
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
            if self.coroot_copy and self.root_digest and digest_of(self.data) != self.root_digest:
                self.done.set_exception(
                    CorruptCopy(f"{self.key}: co-root repairs do not match the root's digest")
                )
                return True
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

    def missing_ranges(self, limit: int, *, through_tail: bool = False) -> list[tuple[int, int]]:
        """Holes below the highest segment seen, as (first, count); ``through_tail``: up to
        the end of the message (the sender has stopped, so what is missing there is lost)."""
        end = self.seg_count if through_tail else self.highest
        return missing_runs(self.received, self.contiguous, end, limit)

    def cancel_timers(self) -> None:
        for timer in (self.ack_timer, self.nack_timer):
            if timer is not None:
                timer.cancel()
        self.ack_timer = self.nack_timer = None
