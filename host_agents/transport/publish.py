"""Published multicast (allgather ``innet``): multicast without ACKs, repaired on request.

When every rank multicasts, per-segment ACKs would be O(P^2); instead the root multicasts once
and keeps the data (:class:`Publisher`) until the caller withdraws it (after a barrier that
says everyone has everything). Receivers ask the root for what is missing when arrivals pause
(:class:`RepairRequests`); the pause adapts, growing when a repair turns out to be a duplicate.
A receiver waiting for many roots at once paces its requests (:class:`RepairPacer`): asking
every root on every silence is a NACK storm that starves the data it asks for.

The root answers a request with at most :data:`REPAIR_BURST` segments, by unicast to the asker,
or by one multicast once :data:`MULTICAST_REPAIR_ASKERS` receivers asked for the same segment
(a drop high in the tree).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from controller.wire import Flag, Op
from host_agents.transport.config import EngineError
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.feedback import MAX_NACK_RANGES, pack_ranges
from host_agents.transport.keys import McastKey
from host_agents.transport.mcast_segment import send_mcast_segment
from host_agents.transport.messages import Incoming, Source, missing_runs, segment_count

REPAIR_BURST = 16  # segments one NACK of a published multicast gets resent at most
MULTICAST_REPAIR_ASKERS = 4  # receivers asking for one segment at once: repair by multicast
# roots a receiver asks for repairs after one silence: the first silences under load are mostly
# data still queued, and asking every root at once makes repairs that queue behind it too
ASK_AT_ONCE = 8
# a root asked again and again (its repairs lost too) waits at most this many pauses between
# asks: the slowest of a thousand missing blocks sets the collective's time, and with a
# backoff doubling to rto_max one allgather at 5% loss took 12 s against 1.5 s for a host one
BACKOFF_PAUSES = 2


@dataclass
class Published:
    """A published multicast kept for repairs, and when each segment was last resent."""

    source: Source
    unicast_at: dict[tuple[int, int], float] = field(default_factory=dict)
    multicast_at: dict[int, float] = field(default_factory=dict)
    askers: dict[int, tuple[int, float]] = field(default_factory=dict)

    def ask(self, seg: int, now: float, interval: float) -> int:
        """Count one more request for ``seg``; how many came within ``interval``."""
        count, since = self.askers.get(seg, (0, now))
        count = count + 1 if now - since < interval else 1
        self.askers[seg] = (count, since if count > 1 else now)
        return count


class Publisher:
    """The root's side: what this node published, and repairs from it."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self._published: dict[McastKey, Published] = {}

    def holds(self, key: McastKey) -> bool:
        return key in self._published

    def purge(self, comm: int) -> None:
        for key in [k for k in self._published if k.comm == comm]:
            del self._published[key]

    def publish(self, key: McastKey, source: Source) -> McastKey:
        self._published[key] = Published(source)
        for seg in range(segment_count(source.size, self.cfg.segment_size)):
            send_mcast_segment(self.endpoint, key, source, seg, Flag.NO_ACK)
        return key

    def withdraw(self, key: McastKey) -> None:
        self._published.pop(key, None)

    def repair(self, key: McastKey, requester: int, ranges: list[tuple[int, int]]) -> None:
        published = self._published[key]
        source = published.source
        now = self.endpoint.loop.time()
        interval = self.cfg.nack_delay * 4
        seg_count = segment_count(source.size, self.cfg.segment_size)
        budget = REPAIR_BURST  # the requester asks again for the rest: no repair floods
        for first, count in ranges:
            for seg in range(first, min(first + count, seg_count)):
                if budget == 0:
                    return
                budget -= 1
                if now - published.multicast_at.get(seg, -1e9) < interval:
                    continue  # multicast again a moment ago: on its way to this requester too
                if now - published.unicast_at.get((requester, seg), -1e9) < interval:
                    continue
                published.unicast_at[(requester, seg)] = now
                if published.ask(seg, now, interval) >= MULTICAST_REPAIR_ASKERS:
                    # many receivers lost it (a drop high in the tree): one multicast serves all
                    published.multicast_at[seg] = now
                    published.askers.pop(seg)
                    send_mcast_segment(self.endpoint, key, source, seg, Flag.NO_ACK | Flag.REPAIR)
                else:
                    send_mcast_segment(
                        self.endpoint,
                        key,
                        source,
                        seg,
                        Flag.NO_ACK | Flag.REPAIR,
                        repair_to=requester,
                    )
                self.endpoint.stats.mcast_retransmissions += 1


class RepairRequests:
    """A receiver's side: how long arrivals of published multicasts may pause before it asks
    for repairs (``quiet``), and the requests themselves."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        # grows on false alarms (the repair was a duplicate), shrinks on real ones
        self.quiet = max(self.cfg.rto_initial, self.cfg.repair_quiet_min)

    def repaired(self, new: bool) -> None:
        """A repair arrived; ``new`` when it brought a segment this node lacked."""
        factor = 0.8 if new else 1.5
        floor = self.cfg.repair_quiet_min
        self.quiet = min(self.cfg.rto_max, max(floor, self.quiet * factor))

    def request_missing(self, msg: Incoming, root: int) -> None:
        """Ask the root of a published multicast for every segment ``msg`` still lacks; the
        caller decides when (after a silence: under load, slow is not lost)."""
        if msg.done.done():
            return
        key = msg.key
        if not isinstance(key, McastKey):
            raise EngineError(f"{key} is not a multicast: only multicasts are repaired")
        ranges = missing_runs(msg.received, 0, msg.seg_count, MAX_NACK_RANGES)
        asked = McastKey(root, key.comm, key.epoch, key.tree)
        nack = asked.feedback(Op.NACK, self.endpoint.node, root)
        self.endpoint.send_frame(self.endpoint.directory.mac(root), nack, pack_ranges(ranges))
        self.endpoint.stats.nacks_sent += 1

    def pacer(self, window: int, *, ask_at_once: int = ASK_AT_ONCE) -> RepairPacer:
        return RepairPacer(self, window, ask_at_once=ask_at_once)


class RepairPacer:
    """One receiver waiting for the published multicasts of many roots at once: how long to
    wait for arrivals (``quiet``, doubling while nothing arrives) and, when they fall silent,
    whom to ask for repairs.

    Only roots that can have published are asked (those whose data is partly here first, then
    the lowest ``window`` of the rest: roots publish in order, a later one once an earlier
    one's data arrived), at most ``ask_at_once`` of them, and each root again only after its
    own backoff, doubling while its message makes no progress (the repair may be on its way)
    up to :data:`BACKOFF_PAUSES` pauses.
    """

    def __init__(self, requests: RepairRequests, window: int, *, ask_at_once: int) -> None:
        self._requests = requests
        self.window = window
        self.ask_at_once = ask_at_once
        self.quiet = requests.quiet
        self.silent_since = requests.endpoint.loop.time()
        self._asked: dict[int, tuple[int, float, float]] = {}  # (progress, next ask, backoff)

    @property
    def _longest(self) -> float:
        """The longest wait between asks (for arrivals, and for one root)."""
        return BACKOFF_PAUSES * self._requests.quiet

    def arrived(self, now: float) -> None:
        """Something arrived: the silence starts again, at the receiver's current pause."""
        self.quiet, self.silent_since = self._requests.quiet, now

    def silence(
        self, pending: Mapping[int, Incoming], root_of: Callable[[int], int], now: float
    ) -> None:
        """Nothing arrived for ``quiet``: ask some roots of ``pending`` (keyed in publication
        order, e.g. by rank; ``root_of`` names the root node of a key) for what is missing,
        and wait twice as long for the next silence."""
        unseen_asked = asked_now = 0
        order = sorted(pending.items(), key=lambda kv: (kv[1].n_received == 0, kv[0]))
        for rank, msg in order:
            if asked_now == self.ask_at_once:
                break
            if msg.n_received == 0:
                if unseen_asked == self.window:
                    continue
                unseen_asked += 1
            progress, next_at, backoff = self._asked.get(rank, (-1, 0.0, self._requests.quiet))
            if progress != msg.n_received:
                backoff = self._requests.quiet
            elif now < next_at:
                continue
            self._requests.request_missing(msg, root_of(rank))
            asked_now += 1
            self._asked[rank] = (msg.n_received, now + backoff, min(backoff * 2, self._longest))
        self.quiet = min(self.quiet * 2, self._longest)
