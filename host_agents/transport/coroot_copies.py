"""Copies a co-root keeps of multicasts its caller has taken, for its members' repairs
(:mod:`host_agents.transport.aggregation`)."""

from __future__ import annotations

import collections

from host_agents.transport.keys import McastKey
from host_agents.transport.messages import Source

# bytes of complete copies kept for members still missing data; beyond this the oldest goes
# (the co-root then asks the root to repair its members). A count of 64 copies was too few
# with every rank of Df(2,4,2) rooting a broadcast at once: 72 in flight per co-root
HELD_BYTES = 64 << 20


class HeldCopies:
    """Copies of multicasts a co-root's caller has taken, oldest first, within HELD_BYTES."""

    def __init__(self) -> None:
        self._copies: collections.OrderedDict[McastKey, Source] = collections.OrderedDict()
        self._bytes = 0

    def __contains__(self, key: McastKey) -> bool:
        return key in self._copies

    def __len__(self) -> int:
        return len(self._copies)

    def get(self, key: McastKey) -> Source | None:
        return self._copies.get(key)

    def add(self, key: McastKey, data: bytes) -> None:
        self.pop(key)
        self._copies[key] = Source(data)
        self._bytes += len(data)
        while self._bytes > HELD_BYTES and self._copies:
            self.pop(next(iter(self._copies)))

    def pop(self, key: McastKey) -> None:
        copy = self._copies.pop(key, None)
        if copy is not None:
            self._bytes -= copy.size

    def purge(self, comm: int) -> None:
        for key in [k for k in self._copies if k.comm == comm]:
            self.pop(key)
