"""Co-roots: one node per dragonfly group merges its group's multicast ACKs into one for the
root ([IB-mcast]'s co-root scheme), so the root waits for one ACK stream per group.

A co-root is also a receiver, one or two hops from its members, so it is the nearest node
that holds the data: it repairs what a member NACKs from its own copy, and a member that has
not acknowledged a while after the co-root's copy completed (it may have lost every segment,
so it cannot NACK) gets the missing segments unasked. What the co-root lacks itself it
forwards to the root, each range once per interval, so one loss high in the tree brings one
NACK per co-root to the root rather than one per receiver.

Who aggregates whom comes from the multicast plan (:mod:`host_agents.plans`). The root of a
multicast merges its own group with the same :class:`Aggregator`
(:mod:`host_agents.transport.multicast_root`).
"""

from __future__ import annotations

import asyncio
import collections

from controller import wire
from controller.wire import Flag, Op
from host_agents.transport.coroot_copies import HeldCopies
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.feedback import NO_SACK, pack_ranges
from host_agents.transport.inbox import Inbox
from host_agents.transport.keys import McastKey
from host_agents.transport.mcast_segment import send_mcast_segment
from host_agents.transport.messages import Incoming, Source, segment_count
from host_agents.transport.nack_bounds import lacking as nack_lacking
from host_agents.transport.outrun import outran
from host_agents.transport.queue_wait import queue_allowance

# CoRoots.patience: a D-SACK doubles it up to PATIENCE_MAX; it halves every half-life
# without one (seconds: longer than a loaded emulator's bursts, short against a run)
PATIENCE_MAX = 32.0
PATIENCE_HALF_LIFE = 2.0


class Aggregator:
    """A co-root merging its group's multicast ACKs (and its own) into one for the root."""

    def __init__(self, members: tuple[int, ...], upstream: int) -> None:
        self.cum = dict.fromkeys(members, 0)
        self.upstream = upstream
        self.reported = 0  # what the root has from us: nothing worth a report before
        self.reported_at = -1e9
        self.timer: asyncio.TimerHandle | None = None
        # (member asked for, or 0 for the co-root itself; first segment of a range) -> when
        self.forwarded: dict[tuple[int, int], float] = {}
        self.probe: asyncio.TimerHandle | None = None  # repairs unasked: see CoRoots
        self.probe_wait = 0.0  # the wait before the next probe (doubles: CoRoots._probe)
        self.complete_at: float | None = None  # when this co-root's own copy completed
        self.seg_count = 0  # the multicast's segments, known once the copy completed
        self.outrun: set[int] = set()  # members repaired for an outrun copy (transport/outrun)
        self.repaired: dict[tuple[int, int], float] = {}  # (member, segment) -> when
        self.relayed: dict[int, float] = {}  # member -> when a relay last went to it
        # segment -> members that asked for it while this co-root lacked it too
        self.awaited: dict[int, set[int]] = {}

    def cancel_timers(self) -> None:
        for timer in (self.timer, self.probe):
            if timer is not None:
                timer.cancel()
        self.timer = self.probe = None

    def merge(self, member: int, cum: int) -> bool:
        """Record a member's progress; whether it moved."""
        if member in self.cum and cum > self.cum[member]:
            self.cum[member] = cum
            return True
        return False


class CoRoots:
    """This node's co-root duties for multicasts rooted elsewhere."""

    def __init__(self, endpoint: Endpoint, inbox: Inbox) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.loop = endpoint.loop
        self.inbox = inbox
        # how long after this co-root's copy completes its members' final ACKs come (EWMA)
        self.member_lag = 0.0
        # multiplies the waits before unasked repairs (probe, relay): doubles whenever a
        # member answers one with a D-SACK (it had the segment: slow, not lost) and halves
        # every PATIENCE_HALF_LIFE without one. On a loaded emulator members lag in bursts far
        # beyond their usual measure, and every rank rooting a 1 B broadcast sent 15,386
        # co-root repairs, nearly all duplicates
        self._patience = 1.0
        self._patience_at = 0.0  # when it last doubled
        self._aggregators: dict[McastKey, Aggregator] = {}
        # copies of messages the caller has taken while members still miss parts of them
        self._held = HeldCopies()
        # finished multicasts: what was reported for them and when, to answer a late
        # retransmission once (every member answers each retransmitted segment)
        self._aggregated: collections.OrderedDict[McastKey, tuple[int, float]] = (
            collections.OrderedDict()
        )

    def purge(self, comm: int) -> None:
        for key in [k for k in self._aggregators if k.comm == comm]:
            self._aggregators.pop(key).cancel_timers()
        for key in [k for k in self._aggregated if k.comm == comm]:
            del self._aggregated[key]
        self._held.purge(comm)

    def _aggregator(self, key: McastKey) -> Aggregator | None:
        agg = self._aggregators.get(key)
        endpoint = self.endpoint
        if agg is None and endpoint.plan is not None and key.comm in endpoint.directory.comms:
            members = endpoint.plan(key.comm, key.root, key.tree).aggregates.get(endpoint.node)
            if members is not None:
                agg = Aggregator(members, key.root)
                self._aggregators[key] = agg
                # one that never completes (a member gone; with switch-merged ACKs no member
                # reports here, only NACKs) must not be kept forever: the oldest goes
                if len(self._aggregators) > self.cfg.completed_memory:
                    oldest = next(iter(self._aggregators))
                    self._aggregators.pop(oldest).cancel_timers()
                    self._held.pop(oldest)
        return agg

    def on_ack(self, key: McastKey, ack: wire.Header) -> None:
        """A member's ACK (this node's own progress included) for a multicast rooted
        elsewhere."""
        member, cum = ack.src_node, ack.seq
        if ack.flags & Flag.DUPLICATE:
            self._learn_from_duplicate(key, ack)
        done = self._aggregated.get(key)
        if done is not None:
            # every member had it all: a late retransmission asks again, answer at once, and
            # once for the whole burst of answers it brings
            merged, reported_at = done
            now = self.loop.time()
            if ack.flags & Flag.LAST and now - reported_at >= self.cfg.nack_delay:
                self._aggregated[key] = (merged, now)
                self._report_upstream(key, merged, ack.root_node)
            return
        agg = self._aggregator(key)
        if agg is None:
            self.endpoint.drop("multicast ACK for a tree this node does not aggregate", ack)
            return
        repeated = not agg.merge(member, cum)
        merged = min(agg.cum.values())
        now = self.loop.time()
        if member == self.endpoint.node and cum >= ack.seg_count and agg.probe is None:
            agg.complete_at, agg.seg_count = now, ack.seg_count
            agg.probe_wait = self._probe_delay()
            agg.probe = self.loop.call_later(agg.probe_wait, self._probe, key, ack.seg_count)
        elif cum >= ack.seg_count and not repeated and agg.complete_at is not None:
            # Karn's rule: a repaired member's lag is the repair's (counted, each loss made
            # the probe delay longer for the next)
            if not any(m == member for m, _ in agg.repaired):
                self.member_lag += (max(0.0, now - agg.complete_at) - self.member_lag) / 8
            self._repair_outrun(key, member, now)
        if merged >= ack.seg_count:
            agg.cancel_timers()
            del self._aggregators[key]
            self._held.pop(key)
            self._aggregated[key] = (merged, self.loop.time())
            while len(self._aggregated) > self.cfg.completed_memory:
                self._aggregated.popitem(last=False)
            # how long the members kept us waiting: the root's round trip leaves it out
            held = 0.0 if agg.complete_at is None else max(0.0, now - agg.complete_at)
            self._report_upstream(key, merged, agg.upstream, held)
        elif merged > agg.reported:
            if agg.timer is None:
                agg.timer = self.loop.call_later(self.cfg.ack_delay, self._report_merged, key)
        elif repeated and self.loop.time() - agg.reported_at >= self.cfg.nack_delay * 4:
            # a member repeating itself answers a retransmission: the root lacks our last
            # report (lost). Again, or a lost tail is resent from the wrong place forever
            self._report_merged(key)

    def _repair_outrun(self, key: McastKey, member: int, now: float) -> None:
        """``member`` completed ``key``: probe it for what transport/outrun.py says it lost."""
        reorder = self.cfg.nack_delay + queue_allowance(self.endpoint, now)
        for lost in outran(self._aggregators, key, member, reorder):
            agg = self._aggregators[lost]
            cum = agg.cum[member]
            agg.outrun.add(member)
            self.endpoint.stats.coroot_outrun_repairs += 1
            self._repair_or_ask_root(lost, agg, member, [(cum if cum else agg.seg_count - 1, 1)])

    def _learn_from_duplicate(self, key: McastKey, ack: wire.Header) -> None:
        """A member had the segment a repair brought it (for ``msg_len`` us). Our own (a
        repair from the root that this co-root had) goes up to the root, which learns its
        timeout was spurious; a member's answers one of this co-root's repairs (members get
        repairs only from their co-root), which waits longer from now on if the member got
        the segment while it waited."""
        if ack.src_node == self.endpoint.node:
            dsack = key.feedback(
                Op.ACK,
                self.endpoint.node,
                key.root,
                seq=0,
                flags=Flag.DUPLICATE,
                seg_idx=ack.seg_idx,
                msg_len=ack.msg_len,
            )
            self.endpoint.send_frame(self.endpoint.directory.mac(key.root), dsack, NO_SACK)
            self.endpoint.stats.acks_sent += 1
        elif (
            self.cfg.dsack_learning
            and (held := wire.held_seconds(ack.msg_len)) is not None
            and held < self._probe_delay()
        ):
            # it got the segment while we waited: slow, and a longer wait would have spared
            # the repair (one held longer lost its ACK instead, and the repair was needed)
            self._patience = min(PATIENCE_MAX, self.patience * 2)
            self._patience_at = self.loop.time()

    def _probe_delay(self) -> float:
        """How long after this co-root's copy completes it repairs members still silent:
        once they are late by their usual measure (on a busy host final ACKs lag, and
        repairs nobody needed only add to the load), times the patience D-SACKs taught."""
        usual = max(self.cfg.coroot_probe_delay, 4 * self.member_lag)
        # plus the queueing lately seen: a member's final ACK waits in the same queues
        # (every rank broadcasting 16 KiB over 10 Mb/s links: 7,588 repairs, most needless)
        queued = queue_allowance(self.endpoint, self.loop.time())
        return min(usual * self.patience, self.cfg.rto_max / 2) + queued

    @property
    def patience(self) -> float:
        idle = self.loop.time() - self._patience_at
        return max(1.0, self._patience * 0.5 ** (idle / PATIENCE_HALF_LIFE))

    def _report_merged(self, key: McastKey) -> None:
        agg = self._aggregators.get(key)
        if agg is None:
            return
        agg.timer = None
        agg.reported = min(agg.cum.values())
        agg.reported_at = self.loop.time()
        self._report_upstream(key, agg.reported, agg.upstream)

    def _report_upstream(self, key: McastKey, cum: int, upstream: int, held: float = 0.0) -> None:
        """``held``: seconds since this node's own copy completed (msg_len, microseconds)."""
        ack = key.feedback(
            Op.ACK, self.endpoint.node, upstream, seq=cum, msg_len=wire.held_us(held)
        )
        self.endpoint.send_frame(self.endpoint.directory.mac(upstream), ack, NO_SACK)
        self.endpoint.stats.acks_sent += 1

    # -- repairs from this node's copy ------------------------------------------------------

    def _switch_merged(self, key: McastKey) -> bool:
        """Do the switches merge this multicast's ACKs? Then no member reports here, and
        nothing tells this node who in its group is behind."""
        plan = self.endpoint.plan
        return plan is None or bool(plan(key.comm, key.root, key.tree).merged_by)

    def keep(self, msg: Incoming) -> None:
        """The caller takes a multicast this node received: keep a copy while members of the
        group still miss parts of it (the caller may change its buffer)."""
        if not isinstance(msg.key, McastKey) or msg.published or msg.key in self._aggregated:
            return
        if self._switch_merged(msg.key):
            return
        agg = self._aggregator(msg.key)
        if agg is None or not msg.done.done():
            return
        self._held.add(msg.key, bytes(msg.data))

    def _copy(self, key: McastKey) -> tuple[Source, bytearray | None] | None:
        """This node's data of ``key`` and which segments it has (None: all of them)."""
        held = self._held.get(key)
        if held is not None:
            return held, None
        msg = self.inbox.messages.get(key)
        if msg is None or msg.parked is not None:
            return None  # nothing here, or parked early segments: leave it to the root
        return msg, None if msg.done.done() else msg.received

    def _has_all(self, key: McastKey) -> bool:
        if key in self.inbox.completed:
            return True
        msg = self.inbox.messages.get(key)
        return msg is not None and msg.done.done()

    def _repair(
        self, key: McastKey, agg: Aggregator, member: int, ranges: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """Send ``member`` what this node holds of ``ranges`` (each segment once per
        interval); the ranges it does not hold."""
        copy = self._copy(key) if member != self.endpoint.node else None
        if copy is None:
            return ranges
        source, have = copy
        seg_count = segment_count(source.size, self.cfg.segment_size)
        now = self.loop.time()
        lacking: list[tuple[int, int]] = []
        # what the member acknowledged is not lacking; at most a window per NACK (nack_bounds)
        floor = agg.cum.get(member, 0)
        for seg in nack_lacking(ranges, floor=floor, end=seg_count, cap=self.cfg.mcast_window):
            if have is not None and not have[seg]:
                if member in agg.cum:
                    agg.awaited.setdefault(seg, set()).add(member)
                if lacking and sum(lacking[-1]) == seg:
                    lacking[-1] = (lacking[-1][0], lacking[-1][1] + 1)
                else:
                    lacking.append((seg, 1))
            elif now - agg.repaired.get((member, seg), -1e9) >= self.cfg.nack_delay * 2:
                agg.repaired[(member, seg)] = now
                send_mcast_segment(self.endpoint, key, source, seg, Flag.REPAIR, repair_to=member)
                self.endpoint.stats.coroot_repairs += 1
        return lacking

    def _probe(self, key: McastKey, seg_count: int) -> None:
        """Our copy has been complete a while: members still behind may have lost everything
        (no NACK can come from them), so send them the rest unasked."""
        agg = self._aggregators.get(key)
        if agg is None:
            return
        agg.probe = None
        behind = False
        for member, cum in agg.cum.items():
            if cum < seg_count:
                behind = True
                # one segment only: a member that lost everything then knows of the message
                # and asks for the rest; one that is merely slow (most, on a loaded host)
                # costs one duplicate, not the whole message again. Its first missing one if
                # it reported progress; else the last: a member of a message that fits the
                # root's window reports nothing before it completes, so what it may lack
                # alone is the tail, which no later segment showed it was missing
                seg = cum if cum else seg_count - 1
                self._repair_or_ask_root(key, agg, member, [(seg, 1)])
        if behind:
            # the probe or its answer may be lost too: look again, twice as patient. Probed
            # once, a member whose probe a loaded switch dropped waited for the root's
            # timeout (every rank rooting 1 B on the dilated links: minutes per operation)
            agg.probe_wait = min(2 * agg.probe_wait, self.cfg.rto_max)
            agg.probe = self.loop.call_later(agg.probe_wait, self._probe, key, seg_count)

    def filled(self, key: McastKey, seg: int) -> None:
        """Segment ``seg`` of ``key`` arrived here new: the members that asked for it while
        we lacked it too get it at once, not at their next NACK (at 1% loss on Df(2,4,2),
        41% of a 16 KiB broadcast's NACKs were asked again; in 50 operations 139 asks found
        the co-root lacking the segment too)."""
        agg = self._aggregators.get(key)
        if agg is None:
            return
        for member in sorted(agg.awaited.pop(seg, ())):
            if agg.cum[member] <= seg:
                self._repair(key, agg, member, [(seg, 1)])

    def relay(self, key: McastKey, seg: int) -> None:
        """The root repaired segment ``seg`` to this co-root. Had it already: the group's
        merged ACK holds the root back, so a member is behind, or its ACKs were lost and
        nothing makes it send another (a member waiting on the root's window has nothing new
        to acknowledge). Lacked it: the loss may have been above us, and members that lost
        every segment cannot ask. Members that have not acknowledged ``seg`` get it from this
        node's copy; each answers with its progress, whether it lacked it or not."""
        agg = self._aggregator(key)
        if agg is None or self._switch_merged(key):
            return
        # at most once per member in a while as slow as members' usual lag, and at least
        # once per half the longest RTO (a member whose ACKs are really lost must not wait
        # out the root's peer timeout): on a loaded host the root's timeouts come before slow
        # members' ACKs, and relaying each of them to every such member multiplied the
        # repairs of a spurious timeout by the group's size
        now = self.loop.time()
        interval = min(
            max(self.cfg.rto_min, 2 * self.member_lag) * self.patience, self.cfg.rto_max / 2
        ) + queue_allowance(self.endpoint, now)
        for member, cum in agg.cum.items():
            if cum > seg or member == self.endpoint.node:
                continue
            if now - agg.relayed.get(member, -1e9) < interval:
                continue
            agg.relayed[member] = now
            self._repair_or_ask_root(key, agg, member, [(seg, 1)])

    def forward_nack(
        self, key: McastKey, ranges: list[tuple[int, int]], requester: int | None = None
    ) -> None:
        """Missing ranges a member (or this node) reports for a multicast rooted elsewhere:
        repaired from this node's copy where it has them, asked of the root otherwise."""
        agg = self._aggregator(key)
        if agg is None:
            return
        if requester is not None and requester != self.endpoint.node:
            self._repair_or_ask_root(key, agg, requester, ranges)
        else:
            self._ask_root(key, agg, ranges, 0)

    def _repair_or_ask_root(
        self, key: McastKey, agg: Aggregator, member: int, ranges: list[tuple[int, int]]
    ) -> None:
        """Repair ``member`` from this node's copy; what the copy lacks, or all of it when no
        copy is kept (HeldCopies gave it up), the root is asked for."""
        lacking = self._repair(key, agg, member, ranges)
        if not lacking:
            return
        # had we it all but kept no copy, the root must repair the member itself (a repair
        # to us would be a duplicate here, never reaching the member); else we lack it too
        self._ask_root(key, agg, lacking, member if self._has_all(key) else 0)

    def _ask_root(
        self, key: McastKey, agg: Aggregator, ranges: list[tuple[int, int]], on_behalf: int
    ) -> None:
        """NACK ``ranges`` to the root for ``on_behalf`` (0: this co-root lacks them).
        Each range goes once per interval: one loss high in the tree brings one NACK per
        co-root to the root, not one per receiver."""
        now = self.loop.time()
        fresh = [
            r
            for r in ranges
            if now - agg.forwarded.get((on_behalf, r[0]), -1e9) >= self.cfg.rto_initial
        ]
        if not fresh:
            return
        for first, _ in fresh:
            agg.forwarded[(on_behalf, first)] = now
        self.endpoint.stats.nacks_forwarded += 1
        # ``tag`` names the member a NACK is forwarded for (0: this co-root lacks the data)
        nack = key.feedback(Op.NACK, self.endpoint.node, agg.upstream, tag=on_behalf)
        self.endpoint.send_frame(
            self.endpoint.directory.mac(agg.upstream), nack, pack_ranges(fresh)
        )
