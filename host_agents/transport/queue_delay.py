"""Queueing delay seen in multicast roots' send stamps, from one host (see
:mod:`host_agents.transport.queue_wait` for what waits on it)."""

from __future__ import annotations

import collections

from controller import wire
from controller.wire import Op
from host_agents.transport.stamps import NO_STAMP

# roots whose least one-way offset is kept (the oldest forgotten first)
BASE_MEMORY = 4096
# frames that cross the network's queues: their arrival shows a host's link still delivering
# (Endpoint.last_heard). Not the barrier's and reductions' answers from its own switch: a
# rank's periodic ARRIVE resends, each echoed, kept roots "hearing" their links and silent
# until their RTO cap while a 1 B broadcast went unacknowledged (356 s on the dilated links)
QUEUED_OPS = frozenset((Op.MCAST, Op.UNICAST, Op.ACK, Op.NACK))


def _signed(ticks: int) -> int:
    """A 16-bit tick difference as a signed number."""
    ticks &= 0xFFFF
    return ticks - 0x10000 if ticks >= 0x8000 else ticks


class QueueDelay:
    """How long root-stamped frames have lately waited in queues on their way to this host:
    each frame's one-way offset (arrival less stamp, in stamp ticks) above the least seen
    from its root; the largest lately, halving every ``half_life`` seconds."""

    def __init__(self, unit: float, half_life: float) -> None:
        self.unit = unit
        self.half_life = half_life
        self._base: collections.OrderedDict[int, int] = collections.OrderedDict()
        self._level = 0.0
        self._at = 0.0

    def observe(self, hdr: wire.Header, now: float) -> None:
        """A data frame arrived at loop time ``now``: its root's send stamp, if it has one."""
        if hdr.stamp == NO_STAMP or hdr.src_node != hdr.root_node:
            return  # a co-root's copy carries none of the root's clock
        offset = (int(now / self.unit) - hdr.stamp) & 0xFFFF
        base = self._base.get(hdr.root_node)
        if base is None or _signed(offset - base) < 0:
            base = self._base[hdr.root_node] = offset
            self._base.move_to_end(hdr.root_node)
            while len(self._base) > BASE_MEMORY:
                self._base.popitem(last=False)
        waited = _signed(offset - base) * self.unit
        if waited > self.current(now):
            self._level, self._at = waited, now

    def current(self, now: float) -> float:
        """Seconds of queueing lately seen (0 on an idle network)."""
        if self._level <= 0.0:
            return 0.0
        return self._level * 0.5 ** (max(0.0, now - self._at) / self.half_life)
