"""Co-roots: one node per dragonfly group merges its group's multicast ACKs into one for the
root ([IB-mcast]'s co-root scheme), so the root waits for one ACK stream per group, and forwards
each range its members NACK once per interval, so one loss high in the tree brings one NACK
per co-root to the root rather than one per receiver.

Who aggregates whom comes from the multicast plan (:mod:`host_agents.plans`). The root of a
multicast merges its own group with the same :class:`Aggregator`
(:mod:`host_agents.transport.multicast_root`).
"""

from __future__ import annotations

import asyncio
import collections

from controller import wire
from controller.wire import Flag, Op
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.feedback import NO_SACK, pack_ranges
from host_agents.transport.keys import McastKey


class Aggregator:
    """A co-root merging its group's multicast ACKs (and its own) into one for the root."""

    def __init__(self, members: tuple[int, ...], upstream: int) -> None:
        self.cum = dict.fromkeys(members, 0)
        self.upstream = upstream
        self.reported = -1
        self.reported_at = -1e9
        self.timer: asyncio.TimerHandle | None = None
        self.forwarded: dict[int, float] = {}  # first segment of a NACKed range -> when

    def merge(self, member: int, cum: int) -> bool:
        """Record a member's progress; whether it moved."""
        if member in self.cum and cum > self.cum[member]:
            self.cum[member] = cum
            return True
        return False


class CoRoots:
    """This node's co-root duties for multicasts rooted elsewhere."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.loop = endpoint.loop
        self._aggregators: dict[McastKey, Aggregator] = {}
        # finished multicasts and what was reported for them, to answer late retransmissions
        self._aggregated: collections.OrderedDict[McastKey, int] = collections.OrderedDict()

    def purge(self, comm: int) -> None:
        for key in [k for k in self._aggregators if k.comm == comm]:
            agg = self._aggregators.pop(key)
            if agg.timer is not None:
                agg.timer.cancel()
        for key in [k for k in self._aggregated if k.comm == comm]:
            del self._aggregated[key]

    def _aggregator(self, key: McastKey) -> Aggregator | None:
        agg = self._aggregators.get(key)
        endpoint = self.endpoint
        if agg is None and endpoint.plan is not None and key.comm in endpoint.directory.comms:
            members = endpoint.plan(key.comm, key.root, key.tree).aggregates.get(endpoint.node)
            if members is not None:
                agg = Aggregator(members, key.root)
                self._aggregators[key] = agg
        return agg

    def on_ack(self, key: McastKey, ack: wire.Header) -> None:
        """A member's ACK (this node's own progress included) for a multicast rooted
        elsewhere."""
        member, cum = ack.src_node, ack.seq
        done = self._aggregated.get(key)
        if done is not None:
            # every member had it all: a late retransmission asks again, answer at once
            if ack.flags & Flag.LAST:
                self._report_upstream(key, done, ack.root_node)
            return
        agg = self._aggregator(key)
        if agg is None:
            self.endpoint.drop("multicast ACK for a tree this node does not aggregate", ack)
            return
        repeated = not agg.merge(member, cum)
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

    def _report_merged(self, key: McastKey) -> None:
        agg = self._aggregators.get(key)
        if agg is None:
            return
        agg.timer = None
        agg.reported = min(agg.cum.values())
        agg.reported_at = self.loop.time()
        self._report_upstream(key, agg.reported, agg.upstream)

    def _report_upstream(self, key: McastKey, cum: int, upstream: int) -> None:
        ack = key.feedback(Op.ACK, self.endpoint.node, upstream, seq=cum)
        self.endpoint.send_frame(self.endpoint.directory.mac(upstream), ack, NO_SACK)
        self.endpoint.stats.acks_sent += 1

    def forward_nack(self, key: McastKey, ranges: list[tuple[int, int]]) -> None:
        """Missing ranges a member (or this node) reports for a multicast rooted elsewhere."""
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
        self.endpoint.stats.nacks_forwarded += 1
        nack = key.feedback(Op.NACK, self.endpoint.node, agg.upstream)
        self.endpoint.send_frame(
            self.endpoint.directory.mac(agg.upstream), nack, pack_ranges(fresh)
        )
