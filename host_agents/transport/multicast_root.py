"""Acknowledged multicast, the root's side.

The switches replicate; the root keeps a window of ``mcast_window`` segments beyond its
slowest ACK source (a co-root per dragonfly group, or each receiver for direct plans), resends
the oldest unacknowledged segments on timeout, and multicasts again what a NACK reports
missing (at most once per half RTO per segment). It merges its own group's ACKs itself.

The timeout comes from round trips measured on earlier multicasts of the same tree, not from
a fixed initial value: most losses are repaired before it by NACKs (receivers and co-roots,
:mod:`host_agents.transport.aggregation`), so it only covers what nobody could report.
"""

from __future__ import annotations

import collections

from controller import wire
from controller.wire import Flag
from host_agents.plans import McastPlan
from host_agents.transport.config import PeerTimeout
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.keys import McastKey
from host_agents.transport.mcast_root_state import McastRoot, outrun, receivers_behind
from host_agents.transport.mcast_segment import send_mcast_segment
from host_agents.transport.merged_claims import claim_refusal
from host_agents.transport.messages import Source, segment_bounds
from host_agents.transport.nack_bounds import asker_unit, lacking
from host_agents.transport.queue_wait import link_busy, queue_allowance
from host_agents.transport.rtt import RttEstimate
from host_agents.transport.stamps import NO_STAMP, echoed_round_trip

# askers of one segment within half an RTO that make the root repair it down the whole tree
MULTICAST_REPAIR_ASKERS = 3
# repairs remembered per node for D-SACKs (the oldest are forgotten first)
RESENT_MEMORY = 1024


class MulticastRoots:
    """Every acknowledged multicast this node is rooting."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.loop = endpoint.loop
        self._roots: dict[McastKey, McastRoot] = {}
        # round trips per (comm, root, tree): each multicast starts from what the last measured
        self._rtt: dict[tuple[int, int], RttEstimate] = {}
        # (comm, tree) -> its newest switch-merged multicast: one at a time per tree, because
        # the switches merge one multicast's ACKs per tree (a cell holds one epoch's)
        self._newest: dict[tuple[int, int], McastRoot] = {}
        # (comm, tree) -> multicasts waiting for the tree's window (_tree_full), in order
        self._waiting: dict[tuple[int, int], collections.deque[McastRoot]] = {}
        # repaired segments -> the transmission before the last, kept after the multicast
        # completes: a D-SACK (the receiver had it) usually comes after the last ACK
        self._resent: dict[tuple[McastKey, int], float] = {}

    def is_rooting(self, key: McastKey) -> bool:
        return key in self._roots

    def purge(self, comm: int) -> None:
        """Fail every multicast still being sent on ``comm`` (it was freed)."""
        for key in [k for k in self._roots if k.comm == comm]:
            self._roots[key].done.cancel()
        for tree in [t for t in self._rtt if t[0] == comm]:
            del self._rtt[tree]
        for tree in [t for t in self._newest if t[0] == comm]:
            del self._newest[tree]
        for tree in [t for t in self._waiting if t[0] == comm]:
            del self._waiting[tree]

    def send(self, key: McastKey, source: Source, plan: McastPlan) -> McastRoot:
        """Multicast ``source`` to the receivers of ``plan``: the result's ``done`` completes
        when every receiver has acknowledged every segment, its ``sent`` when every segment
        went out once (with switch-merged ACKs, or on a failure: with ``done``)."""
        rtt = self._rtt.get((key.comm, key.tree))
        if rtt is None:
            # a switch-merged root's samples come from echoed stamps, never ambiguous: its
            # RTO may follow them further (EngineConfig.merged_rto_max)
            cap = self.cfg.merged_rto_max if plan.merged_by else None
            rtt = self._rtt[(key.comm, key.tree)] = RttEstimate(self.cfg.rto_initial, cap=cap)
        root = McastRoot(self.endpoint, key, source, plan, rtt)
        self._roots[key] = root
        source.subscribe(lambda: self._pump(root))
        root.done.add_done_callback(lambda _f: self._finish(root))
        tree = (key.comm, key.tree)
        previous = self._newest.get(tree)
        if plan.merged_by:
            self._newest[(key.comm, key.tree)] = root
        if not plan.receivers:
            root.done.set_result(None)
        elif plan.merged_by and previous is not None and not previous.done.done():
            # a nonblocking multicast on the tree while the last one's ACKs are being merged:
            # it starts when they are in (sharing the cells, each delayed the other's ACKs)
            root.behind = previous
            previous.done.add_done_callback(lambda _f: self._start_behind(root))
        elif not plan.merged_by and (self._waiting.get(tree) or self._tree_full(tree, root)):
            root.behind = root  # started by _finish once the tree has room
            self._waiting.setdefault(tree, collections.deque()).append(root)
        else:
            self._pump(root)
        return root

    def _tree_full(self, tree: tuple[int, int], new: McastRoot) -> bool:
        """Would ``new`` put more than ``mcast_tree_window`` segments in flight on the tree?
        A root returns once its data went out, so its caller's next broadcast starts at once:
        without this window across multicasts, a root of back-to-back 16 KiB broadcasts ran
        up to 64 of them ahead of its slowest receiver, and the switches' queues dropped what
        no link had lost (at 1% loss on Df(2,4,2) a member lacked the second segment of 25
        broadcasts at once and NACKed each every few tens of milliseconds; the root sent 65
        unicast repairs per broadcast). A multicast counts the segments its ACK sources still
        lack, on average: one whose last ACK was lost (the root's timeout will tell) holds
        the window by a source's share, not by all its segments (counted whole, a window of
        14 such broadcasts halved the rate). One message larger than the window still goes."""
        outstanding = 0.0
        for r in self._roots.values():
            if (r.key.comm, r.key.tree) != tree or r is new or r.behind is not None:
                continue
            if not r.done.done() and r.cum:
                lacking = sum(r.seg_count - min(c, r.seg_count) for c in r.cum.values())
                outstanding += lacking / len(r.cum)
        return outstanding > 0 and outstanding + new.seg_count > self.cfg.mcast_tree_window

    def _start_behind(self, root: McastRoot) -> None:
        root.behind = None
        root.last_progress = self.loop.time()  # its peers' silence counts from now
        self._pump(root)

    def _finish(self, root: McastRoot) -> None:
        self._roots.pop(root.key, None)
        tree = (root.key.comm, root.key.tree)
        if self._newest.get(tree) is root:
            del self._newest[tree]
        waiting = self._waiting.get(tree)
        if waiting is not None and root in waiting:
            waiting.remove(root)  # failed or cancelled while it waited
        while waiting and not self._tree_full(tree, waiting[0]):
            self._start_behind(waiting.popleft())
        if waiting is not None and not waiting:
            del self._waiting[tree]
        if root.timer is not None:
            root.timer.cancel()
        if not root.sent.done():
            if root.done.cancelled():
                root.sent.cancel()
            elif root.done.exception() is not None:
                root.sent.set_exception(root.done.exception())  # type: ignore[arg-type]
            else:
                root.sent.set_result(None)

    def _pump(self, root: McastRoot) -> None:
        if root.done.done() or root.behind is not None:
            return
        while (
            root.next_new < root.seg_count and root.next_new - root.slowest < self.cfg.mcast_window
        ):
            _, end = segment_bounds(root.source.size, root.next_new, self.cfg.segment_size)
            if root.source.available < end:
                break
            self._transmit(root, root.next_new, retransmit=False)
            root.next_new += 1
        if root.next_new == root.seg_count and root.all_sent_at is None:
            root.all_sent_at = self.loop.time()
        if root.next_new == root.seg_count and root.returns_early and not root.sent.done():
            root.sent.set_result(None)
        if root.timer is None and root.next_new > root.slowest:
            root.timer = self.loop.call_later(root.rto, self._on_timeout, root)

    def _transmit(self, root: McastRoot, seg: int, *, retransmit: bool) -> None:
        stamp = send_mcast_segment(
            self.endpoint, root.key, root.source, seg, Flag.RETRANSMIT if retransmit else Flag.NONE
        )
        root.stamps.record(seg, stamp)
        if retransmit:
            self._remember_resend(root, seg)
            root.last_repair[seg] = root.last_sent[seg] = self.loop.time()
            self.endpoint.stats.mcast_retransmissions += 1
        else:
            root.sent_at[seg] = root.last_sent[seg] = self.loop.time()

    def _repair_one(self, root: McastRoot, seg: int, node: int) -> None:
        """Segment ``seg`` by unicast to ``node`` alone (a repair, not down the tree)."""
        stamp = send_mcast_segment(
            self.endpoint, root.key, root.source, seg, Flag.REPAIR, repair_to=node
        )
        root.stamps.record(seg, stamp)
        root.sent_at.pop(seg, None)  # Karn: no round-trip sample from it
        self.endpoint.stats.retransmissions += 1
        self._remember_resend(root, seg)
        root.last_sent[seg] = self.loop.time()

    def _remember_resend(self, root: McastRoot, seg: int) -> None:
        """Before a resend of ``seg``: the transmission before it, the copy a D-SACK of the
        resend says arrived (an earlier one only makes the sample shorter)."""
        before = root.last_sent.get(seg)
        if before is not None:
            self._resent[(root.key, seg)] = before
            if len(self._resent) > RESENT_MEMORY:
                del self._resent[next(iter(self._resent))]

    def on_duplicate(self, key: McastKey, seg: int, held: float | None) -> None:
        """A receiver (or a co-root for itself) had segment ``seg`` for ``held`` seconds when
        our repair of it came. The time since the transmission before that repair, less the
        hold time, is that copy's round trip (as for unicast D-SACKs): a sample for the
        tree, so a loaded path makes later multicasts wait longer before repairing, and a
        lost ACK (held long) does not."""
        before = self._resent.pop((key, seg), None)
        rtt = self._rtt.get((key.comm, key.tree))
        if before is None or rtt is None:
            return
        self.endpoint.stats.spurious_retransmissions += 1
        if held is None or not self.cfg.dsack_learning:
            return
        sample = self.loop.time() - before - held
        if sample > 0:
            rtt.sample(min(sample, self.cfg.rto_max), self.cfg)

    def _on_timeout(self, root: McastRoot) -> None:
        root.timer = None
        if root.done.done():
            return
        waited = self.loop.time() - root.last_progress
        if waited > self.cfg.peer_timeout:
            laggards = [n for n, c in root.cum.items() if c < root.seg_count]
            root.done.set_exception(
                PeerTimeout(
                    laggards[0],
                    f"multicasting to {len(laggards)} receivers",
                    waited,
                    receivers_behind(root, laggards),
                )
            )
            return
        behind = self._behind(root, root.slowest)
        if self._queue_explains(root, waited) and not outrun(
            root,
            behind,
            self.loop.time(),
            self.cfg.rto_min * self.cfg.frame_scale(root.source.size),
        ):
            root.backoff *= 2  # look again later: the tree is still delivering
            root.timer = self.loop.call_later(root.rto, self._on_timeout, root)
            return
        first = root.slowest
        segments = range(first, min(first + 4, root.next_new))
        if root.merged:
            # the switches say nothing until every receiver has a checkpoint: resend the
            # newest segment only (a tail-loss probe). A receiver that lacks it takes it, one
            # that lacks an earlier one sees the gap and NACKs it, and one that has it
            # repeats its checkpoint (a merged ACK lost on the way up is sent again)
            segments = range(root.next_new - 1, root.next_new)
        if len(behind) > max(1, len(root.receivers) // 4):
            for seg in segments:  # many behind: one copy down the whole tree serves them all
                self._transmit(root, seg, retransmit=True)
        else:
            # a few behind (a co-root then repairs its group): a copy each, not 71, of the
            # first missing segment only: it makes them report, and what else they lack they
            # then ask for (a timeout on a loaded host is often spurious)
            for node in behind:
                self._repair_one(root, first, node)
        root.backoff *= 2
        root.timer = self.loop.call_later(root.rto, self._on_timeout, root)

    def _queue_explains(self, root: McastRoot, waited: float) -> bool:
        """Does a queue explain a root's silence? Its host heard frames within one of the
        tree's RTOs, not backed off (it is a receiver of the others' traffic too: a queue
        still draining), and the wait is under the tree's RTO cap
        (:mod:`host_agents.transport.queue_wait`). Within the backed-off RTO, every frame
        of minutes past counted: on the dilated links a rank's periodic barrier resends kept
        a root whose 1 B broadcast went unacknowledged silent until its cap, 356 s."""
        now = self.loop.time()
        recent = root.base_rto + queue_allowance(self.endpoint, now)
        return waited < root.rto_max and link_busy(self.endpoint, now, recent)

    def _behind(self, root: McastRoot, first: int) -> list[int]:
        """The nodes whose reports hold the root at ``first``: co-roots, direct receivers, or
        members of the root's own group (it merges their ACKs itself)."""
        behind: list[int] = []
        for source, cum in root.cum.items():
            if cum > first:
                continue
            if source == self.endpoint.node and root.group is not None:
                behind += [m for m, c in root.group.cum.items() if c <= first]
            elif source in root.receivers:
                behind.append(source)
            elif source != self.endpoint.node:
                return list(root.receivers)  # the switches merge the ACKs: anyone may be behind
        return behind

    def on_ack(
        self,
        key: McastKey,
        member: int,
        cum: int,
        merged: tuple[int, int, int] | None = None,
        held_us: int = 0,
    ) -> bool:
        """An ACK (merged by a co-root or the switches, or from a member of the root's own
        group; a switch-merged one has ``merged`` = its (checkpoint, seg_count, echo of the
        stamp of the copy that prompted it); a co-root's says in ``held_us`` how long it
        waited for its members after its own copy was complete); False when this node roots
        no multicast ``key``."""
        root = self._roots.get(key)
        if root is None:
            return False
        echo = NO_STAMP
        if merged is not None:
            # a switch-merged ACK: its claim is checked against what this root sent
            checkpoint, seg_count, echo = merged
            every = max(1, self.cfg.ack_every)
            refusal = claim_refusal(
                checkpoint,
                cum,
                seg_count,
                root_seg_count=root.seg_count,
                every=every,
                sent=root.next_new,
            )
            if refusal is not None:
                self.endpoint.drop(refusal, None)
                return True
            echo = root.stamps.echo_for(echo, checkpoint, root.seg_count, every)
        if cum >= root.seg_count:
            root.answered.setdefault(member, self.loop.time())
        if member in root.cum:
            held = wire.held_seconds(held_us) or 0.0
            self._ack(root, member, cum, echo, held)
        elif root.group is not None:  # a member of the root's own group
            root.group.merge(member, cum)
            self._ack(root, self.endpoint.node, min(root.group.cum.values()))
        return True

    def _ack(
        self, root: McastRoot, source: int, cum: int, echo: int = NO_STAMP, held: float = 0.0
    ) -> None:
        # an ended multicast (failed, or its communicator freed) is forgotten only once its
        # done callbacks run: ACKs arriving before then change nothing
        if root.done.done() or source not in root.cum or cum <= root.cum[source]:
            return
        before = root.slowest
        root.cum[source] = min(cum, root.seg_count)
        if root.slowest > before:
            now = self.loop.time()
            root.last_progress = now
            sample = self._round_trip(root, now, echo, held)
            if sample is not None:
                root.rtt.sample(sample, self.cfg)
            root.backoff = 1.0
            if root.timer is not None:
                root.timer.cancel()
                root.timer = None
        if root.slowest >= root.seg_count:
            root.done.set_result(None)
        else:
            self._pump(root)

    def _round_trip(
        self, root: McastRoot, now: float, echo: int, held: float = 0.0
    ) -> float | None:
        """The round trip an ACK that advanced ``root`` measures: from the echoed stamp of
        the copy that prompted it, whichever transmission that was; without an echo, from the
        newest acknowledged segment's transmission if it went out only once (Karn's rule),
        less the time a co-root ``held`` its report for its members. Members recovering
        from losses are no round trip: counted in, a report that waited 100 s for a lost
        member ACK made the tree's RTO its cap (356 s on the dilated links), and the next
        loss on the tree waited that long."""
        echoed = echoed_round_trip(now, echo, root.created, self.cfg.stamp_unit)
        if echoed is not None:
            return echoed
        newest = root.slowest - 1
        sent = root.sent_at.get(newest)
        if sent is None or newest in root.last_repair or now - sent <= held:
            return None
        return now - sent - held

    def on_nack(
        self, key: McastKey, ranges: list[tuple[int, int]], requester: int | None = None
    ) -> bool:
        """Missing ranges reported to the root (by a member of its group, or a co-root for
        its own); False when this node roots no multicast ``key``. One asker is repaired by
        unicast (a co-root then repairs its group from that copy); a segment that
        :data:`MULTICAST_REPAIR_ASKERS` ask for at once goes down the whole tree again."""
        root = self._roots.get(key)
        if root is None:
            return False
        now = self.loop.time()
        interval = root.rto / 2
        # a segment sent a moment ago is on its way, not lost: a receiver that waited for the
        # window to open NACKs a tail the root sends just then. A moment, not a round trip: on
        # a loaded host the round trip grows to seconds, and real losses must not wait that long
        in_flight = min(root.rtt.srtt or self.cfg.tail_delay, 2 * self.cfg.tail_delay)
        # what the asker acknowledged, and what everybody did, is not lacking
        unit = 0 if requester is None else asker_unit(requester, root.aggregates, root.key.root)
        floor = max(root.slowest, root.cum.get(unit, 0))  # a co-root's report covers its group
        if requester is not None and root.group is not None:
            floor = max(floor, root.group.cum.get(requester, 0))
        for seg in lacking(ranges, floor=floor, end=root.next_new, cap=self.cfg.mcast_window):
            if now - root.last_repair.get(seg, -1e9) < interval:
                continue  # the whole tree got it again just now
            if now - root.sent_at.get(seg, -1e9) < in_flight:
                continue
            askers = root.askers.setdefault(seg, {})
            askers[unit] = now
            recent = sum(1 for at in askers.values() if now - at < interval)
            if requester is None or recent >= MULTICAST_REPAIR_ASKERS:
                self._transmit(root, seg, retransmit=True)
                askers.clear()
            elif now - root.unicast_repair.get((requester, seg), -1e9) >= interval:
                root.unicast_repair[(requester, seg)] = now
                self._repair_one(root, seg, requester)
        return True
