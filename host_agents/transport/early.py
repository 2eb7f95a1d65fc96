"""Budgets for early data: messages that started arriving before anyone asked for them.

Counted by the bytes that really arrived (never by the size a header claims), in all and per
sender, plus a number of such messages per sender: a flood of plausible-looking frames cannot
make an agent allocate without bound, nor one sender crowd out the others. Whatever does not
fit is dropped; its sender retransmits later.

Every byte an early message holds is charged, not only its data: when it starts, its
received-segment map (one byte per segment the header claims, up to 735 kB for 1 GiB) and the
message's own bookkeeping (:data:`MESSAGE_OVERHEAD`); per segment, its payload and the entries
that keep it (:data:`SEGMENT_OVERHEAD`). Before, 40 frames of 1,460 B pinned 29 MB.
"""

from __future__ import annotations

import collections

from host_agents.transport.config import EngineConfig
from host_agents.transport.messages import Incoming

MESSAGE_OVERHEAD = 1024  # bytes: the Incoming, its dicts, its future and timers
SEGMENT_OVERHEAD = 256  # bytes per parked segment: its bytes object and two dict entries


def start_charge(seg_count: int) -> int:
    """What an early message of ``seg_count`` segments holds before any data."""
    return MESSAGE_OVERHEAD + seg_count


def segment_charge(payload: int) -> int:
    """What one parked segment of ``payload`` bytes holds."""
    return payload + SEGMENT_OVERHEAD


class EarlyBudget:
    def __init__(self, cfg: EngineConfig) -> None:
        self.cfg = cfg
        self.held = 0  # parked bytes of every early message
        self._bytes: collections.Counter[int] = collections.Counter()  # per sender
        self._count: collections.Counter[int] = collections.Counter()  # messages per sender

    def may_start(self, sender: int) -> bool:
        """Whether ``sender`` may start one more early message."""
        return self._count[sender] < self.cfg.early_messages_per_sender

    def started(self, sender: int) -> None:
        self._count[sender] += 1

    def charge(self, sender: int, size: int, msg: Incoming | None = None) -> bool:
        """Take ``size`` more held bytes from ``sender`` (for ``msg``); False when they do
        not fit."""
        if (
            self.held + size > self.cfg.early_bytes
            or self._bytes[sender] + size > self.cfg.early_bytes_per_sender
        ):
            return False
        self.held += size
        self._bytes[sender] += size
        if msg is not None:
            msg.early_charged += size
        return True

    def release(self, msg: Incoming) -> None:
        """``msg`` stops counting against the budgets (claimed, retired or dropped)."""
        if not msg.early or msg.early_sender is None:
            return
        msg.early = False
        sender = msg.early_sender
        self.held -= msg.early_charged
        self._bytes[sender] -= msg.early_charged
        msg.early_charged = 0
        self._count[sender] -= 1
        if self._count[sender] <= 0:
            del self._count[sender]
            del self._bytes[sender]
