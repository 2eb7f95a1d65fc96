"""Rejected frames: counted by reason, logged rate-limited (the first few, then every 1000th)."""

from __future__ import annotations

import collections
import logging

from controller import wire
from host_agents.transport.config import EngineStats

LOG = logging.getLogger("host_agents.engine")  # where the engine logged them before
# distinct reasons counted; any further one counts under OTHER. A reason's key is its text
# before the first colon, so what follows (sizes, ids) never makes a key of its own, and no
# sender can make the counters grow without bound
MAX_REASONS = 64
OTHER = "other reasons"


class DropLog:
    def __init__(self, node: int, stats: EngineStats) -> None:
        self.node = node
        self.stats = stats
        self._seen: collections.Counter[str] = collections.Counter()

    def __call__(self, reason: str, hdr: wire.Header | None) -> None:
        key = reason.split(":")[0]
        if key not in self.stats.dropped and len(self.stats.dropped) >= MAX_REASONS:
            key = OTHER
        self.stats.dropped[key] += 1
        seen = self._seen[key]
        self._seen[key] += 1
        if seen < 5 or seen % 1000 == 0:
            where = (
                f" (op {hdr.op} comm {hdr.comm_id} epoch {hdr.epoch} from node {hdr.src_node})"
                if hdr is not None
                else ""
            )
            LOG.warning(
                "node %d rejected a frame: %s%s [%d so far]", self.node, reason, where, seen + 1
            )
