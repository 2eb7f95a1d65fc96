"""One acknowledged multicast as its root keeps it: what went out when, who acknowledged what,
its timer and backoff (:mod:`host_agents.transport.multicast_root` runs the protocol)."""

from __future__ import annotations

import asyncio

from host_agents.plans import McastPlan
from host_agents.transport.aggregation import Aggregator
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.keys import McastKey
from host_agents.transport.merged_claims import SentStamps
from host_agents.transport.messages import Source, segment_count
from host_agents.transport.queue_wait import queue_allowance
from host_agents.transport.rtt import RttEstimate


class McastRoot:
    """The root's side of one acknowledged multicast."""

    def __init__(
        self,
        endpoint: Endpoint,
        key: McastKey,
        source: Source,
        plan: McastPlan,
        rtt: RttEstimate,
    ) -> None:
        cfg, loop = endpoint.cfg, endpoint.loop
        self.endpoint = endpoint
        self.key = key
        self.source = source
        self.receivers = plan.receivers
        self.seg_count = segment_count(source.size, cfg.segment_size)
        self.cum = dict.fromkeys(plan.ack_sources, 0)  # ACK source -> segments it has
        # the root merges the ACKs of its own dragonfly group
        members = plan.aggregates.get(endpoint.node)
        self.group = Aggregator(members, endpoint.node) if members is not None else None
        self.aggregates = plan.aggregates  # who reports whom: NACK askers (nack_bounds)
        self.rto_max = cfg.rto_max if rtt.cap is None else rtt.cap  # the tree's (below)
        self.next_new = 0
        self.last_repair: dict[int, float] = {}  # segment -> when it went down the tree again
        self.unicast_repair: dict[tuple[int, int], float] = {}  # (asker, segment) -> when
        self.askers: dict[int, dict[int, float]] = {}  # segment -> who asked for it, when
        self.done: asyncio.Future[None] = loop.create_future()  # every segment acknowledged
        # every segment transmitted once: a root holding its own copy of the data may return
        # then (MPI lets a broadcast's root return once its buffer may be reused)
        self.sent: asyncio.Future[None] = loop.create_future()
        # with switch-merged ACKs the root stays until they are in: its next multicast on
        # the tree must wait for them anyway (below), and returning early put that wait,
        # several timeouts under loss, into every rank's next broadcast
        self.returns_early = not plan.merged_by
        self.merged = bool(plan.merged_by)  # the switches merge its ACKs: it hears one stream
        # the multicast before this one on the same tree, until it is acknowledged
        self.behind: McastRoot | None = None
        self.created = self.last_progress = loop.time()
        self.timer: asyncio.TimerHandle | None = None
        self.sent_at: dict[int, float] = {}  # first transmission of each segment (Karn)
        self.last_sent: dict[int, float] = {}  # latest transmission of each, repairs included
        self.stamps = SentStamps()  # what a switch-merged ACK may echo
        self.rtt = rtt  # to the slowest ACK source, shared by the multicasts of this tree
        # doubles on each timeout of this multicast only, not the tree's: with 71 receivers
        # under loss almost every multicast has some segment repaired, so a clean sample
        # rarely comes, and a backoff kept until one left the RTO at its cap (1 B broadcasts
        # at 5% loss took 0.88 s instead of about 0.1 s)
        self.backoff = 1.0
        # ACK source or member of the root's group -> when it first had every segment, and
        # when the last new segment went out: what tells a lost copy from a queued one
        self.answered: dict[int, float] = {}
        self.all_sent_at: float | None = None

    @property
    def rto(self) -> float:
        """The tree's RTO, backed off, plus the queueing this host lately saw in the other
        roots' frames (queue_wait): with every rank rooting at once over 10 Mb/s links, the
        roots' timeouts came before ACKs still queued, and each sent co-roots a repair
        they relayed to their members (4,412 repairs and 6,742 relays for 16 KiB each)."""
        now = self.endpoint.loop.time()
        return min(self.base_rto * self.backoff, self.rto_max) + queue_allowance(self.endpoint, now)

    @property
    def base_rto(self) -> float:
        """The tree's RTO for this message's frames (small ones wait less on shaped links)."""
        return self.rtt.timeout_for(self.endpoint.cfg, self.source.size)

    @property
    def slowest(self) -> int:
        return min(self.cum.values()) if self.cum else self.seg_count


def outrun(root: McastRoot, behind: list[int], now: float, floor: float) -> bool:
    """Were the few nodes ``behind`` outrun by the rest: every other ACK source answered, and
    the last of them longer ago than they took (at least ``floor``)? Copies that went out
    together and came back but for one say that one was lost, not queued (RACK's rule, RFC
    8985). A queue explaining a silence (queue_wait) otherwise put off the repair of a copy a
    co-root lost until the RTO's cap, 2 s: its host hears the others' traffic all the time."""
    if root.merged or not behind or len(behind) > max(1, len(root.receivers) // 4):
        return False
    if root.all_sent_at is None or not root.answered:
        return False
    latest = max(root.answered.values())
    return now - latest > max(latest - root.all_sent_at, floor)


def receivers_behind(root: McastRoot, laggards: list[int]) -> tuple[int, ...]:
    """The receivers the silent ACK sources report for: a co-root's group, the root's own
    group members still behind, every receiver behind a merging switch."""
    behind: set[int] = set()
    for source in laggards:
        if root.group is not None and source == root.key.root:
            behind |= {m for m, c in root.group.cum.items() if c < root.seg_count}
        elif source in root.aggregates:
            behind |= set(root.aggregates[source])
        elif source in root.receivers:
            behind.add(source)
        else:
            behind |= set(root.receivers)  # a switch merges the ACKs: anyone may be behind
    behind.discard(root.key.root)
    return tuple(sorted(behind))
