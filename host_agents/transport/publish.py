"""Published multicast (allgather ``innet``): multicast without ACKs, repaired on request.

When every rank multicasts, per-segment ACKs would be O(P^2); instead the root multicasts once
and keeps the data (:class:`Publisher`) until the caller withdraws it (after a barrier that
says everyone has everything). Receivers ask the root for what is missing when arrivals pause
(:class:`RepairRequests`); the pause adapts, growing when a repair turns out to be a duplicate,
and an unanswered request is repeated after the measured repair round trip.
A receiver waiting for many roots at once paces its requests (:class:`RepairPacer`): asking
every root on every silence is a NACK storm that starves the data it asks for. Receivers that
lost the same frame (a drop high in the tree) would all ask at once; instead they ask in
:func:`ask_slot` order, one repair round trip apart, so that the root's multicast repair, sent
once the first slot's asks show the drop was high, reaches the later slots before they ask.

The root answers a request with at most :data:`REPAIR_BURST` segments, by unicast to the asker,
or by one multicast once receivers on two routers of one group asked for the same segment, or
:data:`MULTICAST_REPAIR_ASKERS` receivers in all (a drop above a router: on a global link or the
root's own link). The askers of one drop ask as their silences end, which on BMv2 under load
spreads over hundreds of milliseconds, so they are counted over ``repair_quiet_min``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from controller.wire import Flag, Op
from host_agents.directory import Place
from host_agents.transport.config import EngineError
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.feedback import MAX_NACK_RANGES, pack_ranges
from host_agents.transport.keys import McastKey
from host_agents.transport.mcast_segment import send_mcast_segment
from host_agents.transport.messages import Incoming, Source, missing_runs, segment_count
from host_agents.transport.rtt import RttEstimate

REPAIR_BURST = 16  # segments one NACK of a published multicast gets resent at most
# receivers asking for one segment at once: repair by multicast, wherever they are. With 8
# (a multicast crosses all 106 links of a Df(2,4,2) tree, a unicast a handful) there were a
# third fewer multicasts and duplicates, but more asks and unicasts: 1.54 retransmissions and
# 2.1 NACKs per frame lost at 1% loss on BMv2 against 1.40 and 1.9 with 4
MULTICAST_REPAIR_ASKERS = 4
# withdrawn multicasts a root remembers (a few operations' worth) to count late NACKs apart
WITHDRAWN_REMEMBERED = 64
# roots a receiver asks for repairs after one silence: the first silences under load are mostly
# data still queued, and asking every root at once makes repairs that queue behind it too
ASK_AT_ONCE = 8
# a root asked again and again (its repairs lost too) waits at most this many pauses between
# asks: the slowest of a thousand missing blocks sets the collective's time, and with a
# backoff doubling to rto_max one allgather at 5% loss took 12 s against 1.5 s for a host one
BACKOFF_PAUSES = 2


def ask_slot(node: int, members: tuple[int, ...], places: Mapping[int, Place]) -> int:
    """When ``node`` asks after a silence, in repair round trips (0, 1 or 2): the first member
    of its dragonfly group at once, the first member on each other router one round trip
    later, the rest after two. A drop on a root's own link is then asked for by one receiver
    per group (enough for the root to multicast), a drop on a group's global link by one per
    router, and the others hear the repair first; a drop on a host link costs its one asker
    at most two round trips."""
    here = places.get(node)
    if here is None:
        return 0  # no placement known (a bare test port): ask at once
    peers = sorted(m for m in members if m in places and places[m].group == here.group)
    if peers and peers[0] == node:
        return 0
    on_router = [m for m in peers if places[m].switch == here.switch]
    return 1 if on_router and on_router[0] == node else 2


@dataclass
class Published:
    """A published multicast kept for repairs, and when each segment was last resent."""

    source: Source
    unicast_at: dict[tuple[int, int], float] = field(default_factory=dict)
    multicast_at: dict[int, float] = field(default_factory=dict)
    askers: dict[int, Askers] = field(default_factory=dict)

    def ask(self, seg: int, requester: int, place: Place, now: float, window: float) -> bool:
        """Count a request for ``seg`` from ``requester`` at ``place``; whether the requests
        within ``window`` say the drop was above a router: two routers of one group asked
        (the drop was on the group's global link), or many receivers did (on the root's own
        link). Drops on two routers' host links in different groups, which are common at 1%
        loss per link, are not taken for one: a multicast to all would repair two."""
        askers = self.askers.get(seg)
        if askers is None or now - askers.since >= window:
            askers = self.askers[seg] = Askers(now, place)
        askers.nodes.add(requester)  # a receiver asking again is still one receiver
        first = askers.first
        one_group = place.group == first.group and place.switch != first.switch
        return one_group or len(askers.nodes) >= MULTICAST_REPAIR_ASKERS


@dataclass
class Askers:
    """The receivers that asked for one segment since ``since``, and where the first sits."""

    since: float
    first: Place
    nodes: set[int] = field(default_factory=set)


class Publisher:
    """The root's side: what this node published, and repairs from it."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self._published: dict[McastKey, Published] = {}
        # the newest confirmed withdrawals, oldest first (a dict keeps insertion order), to
        # tell a NACK that came too late from one too early
        self._withdrawn: dict[McastKey, None] = {}

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

    def withdraw(self, key: McastKey, *, confirmed: bool = False) -> None:
        """Stop repairing ``key``; ``confirmed``: a switch barrier said every rank has it
        (not an error path or a barrier that timed out, after which some may still lack it)."""
        if self._published.pop(key, None) is not None and confirmed:
            if len(self._withdrawn) == WITHDRAWN_REMEMBERED:
                del self._withdrawn[next(iter(self._withdrawn))]
            self._withdrawn[key] = None

    def unanswerable(self, key: McastKey) -> None:
        """Count a member's NACK to this root for ``key``, which it does not hold: after its
        confirmed withdrawal (the barrier said every rank had it: a NACK sent before the
        release and still in flight, or a receiver that can no longer be repaired, a bug),
        or otherwise (not published yet, the asker an operation ahead: normal under load;
        or an acknowledged multicast this root finished)."""
        stats = self.endpoint.stats
        if key in self._withdrawn:
            stats.published_nacks_withdrawn += 1
        else:
            stats.nacks_unheld += 1

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
                    self.endpoint.stats.published_repeats_skipped += 1
                    continue  # multicast again a moment ago: on its way to this requester too
                if now - published.unicast_at.get((requester, seg), -1e9) < interval:
                    self.endpoint.stats.published_repeats_skipped += 1
                    continue
                published.unicast_at[(requester, seg)] = now
                place = self.endpoint.directory.places[requester]
                if published.ask(seg, requester, place, now, self.cfg.repair_quiet_min):
                    # many receivers lost it (a drop high in the tree): one multicast serves all
                    published.multicast_at[seg] = now
                    published.askers.pop(seg)
                    self.endpoint.stats.published_multicast_repairs += 1
                    send_mcast_segment(self.endpoint, key, source, seg, Flag.NO_ACK | Flag.REPAIR)
                else:
                    self.endpoint.stats.published_unicast_repairs += 1
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
    for repairs (``quiet``), how long a repair takes to come once asked for (``answer``, from
    round trips), and the requests themselves."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        # grows on false alarms (the repair was a duplicate), shrinks on real ones
        self.quiet = max(self.cfg.rto_initial, self.cfg.repair_quiet_min)
        # NACK to repair, measured on requests answered at the first ask (Karn's rule)
        self.answer = RttEstimate(self.quiet)
        self._answered = False

    def repaired(self, msg: Incoming, new: bool) -> None:
        """A repair of ``msg`` arrived; ``new`` when it brought a segment this node lacked.
        On shaped links the pause starts stretched by a full frame's hop and may shrink to the
        floor of ``msg``'s own frames (EngineConfig.frame_scale): stretched by a jumbo frame's
        7.2 ms at 10 Mb/s, a floor of 2.2 s held every allgather of 1 KiB blocks that lost a
        frame (8.9 s per operation at 1% loss on Df(2,4,2), 1.2 s without loss). Starting
        there keeps a network that loses nothing from asking early."""
        factor = 0.8 if new else 1.5
        floor = self.cfg.repair_quiet_min * self.cfg.frame_scale(msg.size)
        self.quiet = min(self.cfg.rto_max, max(floor, self.quiet * factor))
        if new and msg.repair_asks:
            # timed from the first ask, whichever ask it answered: Karn's rule (first asks
            # answered before a second only) keeps the fast answers and censors every answer
            # slower than the retry, so the retry stays short; on BMv2 at 1% loss answers
            # took 0.1-0.4 s, and receivers asked again for 1.8 frames per frame lost. An
            # answer to a later ask (its first NACK or repair lost) overstates the round
            # trip: a longer wait, where the other error is a flood of duplicate repairs
            self.answer.sample(self.endpoint.loop.time() - msg.first_nack, self.cfg)
            self._answered = True

    @property
    def retry_wait(self) -> float:
        """How long an asked root has to answer before it is asked again: the repair round
        trip's timeout once one was measured (a lost NACK or repair costs a round trip, not
        a pause), never more than the longest wait between asks."""
        longest = BACKOFF_PAUSES * self.quiet
        return min(self.answer.rto, longest) if self._answered else self.quiet

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
        msg.last_nack = self.endpoint.loop.time()
        if msg.repair_asks == 0:
            msg.first_nack = msg.last_nack
        msg.repair_asks += 1

    @property
    def slot_wait(self) -> float:
        """One ask slot: the measured repair round trip (NACK to repair), at most half a
        pause, so the last slot asks at most one pause late."""
        rtt = self.answer.srtt if self._answered else self.cfg.rto_min
        return min(rtt, self.quiet / 2)

    def pacer(
        self, window: int, members: tuple[int, ...], *, ask_at_once: int = ASK_AT_ONCE
    ) -> RepairPacer:
        """A pacer for one wait on the roots among ``members`` (their places set this node's
        ask slot and the roots' groups)."""
        node, places = self.endpoint.node, self.endpoint.directory.places
        groups = {m: places[m].group for m in members if m != node and m in places}
        slot = ask_slot(node, members, places)
        return RepairPacer(self, window, ask_at_once=ask_at_once, slot=slot, groups=groups)


class RepairPacer:
    """One receiver waiting for the published multicasts of many roots at once: when to ask
    whom for repairs.

    After a silence (no arrival for ``quiet``, doubling while nothing arrives, up to
    :data:`BACKOFF_PAUSES` pauses) it asks roots that can have published (those whose data
    is partly here first, then the lowest ``window`` of the rest: roots publish in order, a
    later one once an earlier one's data arrived), at most ``ask_at_once`` of them. An asked
    root that sends nothing is asked again once its answer is overdue (the repair round
    trip's timeout, doubling while it stays silent, up to the same cap), whether or not other
    data arrives meanwhile: a lost NACK or repair then costs a round trip, not a silence.
    A receiver's silences end ``slot`` repair round trips late (:func:`ask_slot`), and a group
    none of whose roots it has heard from gets one ask per silence (:meth:`_unheard_groups`).
    """

    def __init__(
        self,
        requests: RepairRequests,
        window: int,
        *,
        ask_at_once: int,
        slot: int = 0,
        groups: Mapping[int, int] | None = None,
    ) -> None:
        self._requests = requests
        self.window = window
        self.ask_at_once = ask_at_once
        self.slot = slot  # ask_slot: how many repair round trips after a silence this asks
        self._groups = groups or {}  # root node -> dragonfly group, for every root
        self.quiet = requests.quiet
        now = requests.endpoint.loop.time()
        self.silent_since = now
        self._next_silence = now + self._first_pause
        self._asked: dict[int, tuple[int, float, float]] = {}  # (progress, next ask, backoff)

    @property
    def _longest(self) -> float:
        """The longest wait between asks (for arrivals, and for one root)."""
        return BACKOFF_PAUSES * self._requests.quiet

    def timeout(self, now: float) -> float:
        """How long to wait for arrivals before the next :meth:`tick`."""
        due = min((next_at for _, next_at, _ in self._asked.values()), default=self._next_silence)
        return max(0.0, min(due, self._next_silence) - now)

    @property
    def _first_pause(self) -> float:
        """The silence after an arrival before this receiver asks: the pause, then its slot."""
        return self._requests.quiet + self.slot * self._requests.slot_wait

    def arrived(self, now: float) -> None:
        """Something arrived: the silence starts again, at the receiver's current pause."""
        self.quiet, self.silent_since = self._requests.quiet, now
        self._next_silence = now + self._first_pause

    def tick(
        self, pending: Mapping[int, Incoming], root_of: Callable[[int], int], now: float
    ) -> None:
        """Ask what is due: after a silence, some roots of ``pending`` (keyed in publication
        order, e.g. by rank; ``root_of`` names the root node of a key) for what is missing;
        otherwise the asked roots whose answer is overdue."""
        for rank in [r for r in self._asked if r not in pending]:
            del self._asked[rank]
        if now >= self._next_silence:
            self._silence(pending, root_of, now)
            return
        asked_now = 0
        for rank, (progress, next_at, backoff) in sorted(self._asked.items()):
            if asked_now == self.ask_at_once:
                break
            msg = pending[rank]
            if progress != msg.n_received:  # its repair is arriving: the next silence asks
                if now >= next_at:  # for the rest; a due time left behind made timeout() 0
                    del self._asked[rank]  # until that silence: a spin
                continue
            if now < next_at:
                continue
            self._ask(rank, msg, root_of, now, backoff)
            self._requests.endpoint.stats.published_overdue_asks += 1
            asked_now += 1

    def _silence(
        self, pending: Mapping[int, Incoming], root_of: Callable[[int], int], now: float
    ) -> None:
        unseen_asked = asked_now = 0
        order = sorted(pending.items(), key=lambda kv: (kv[1].n_received == 0, kv[0]))
        unheard = self._unheard_groups(pending, root_of)
        probed: set[int] = set()
        for rank, msg in order:
            if asked_now == self.ask_at_once:
                break
            if msg.n_received == 0:
                group = self._groups.get(root_of(rank))
                if group in unheard:
                    if group in probed:
                        continue  # one probe per silent group: its roots are late, not lost
                    probed.add(group)
                if unseen_asked == self.window:
                    continue
                unseen_asked += 1
            progress, next_at, backoff = self._asked.get(rank, (-1, 0.0, 0.0))
            if progress != msg.n_received:
                backoff = 0.0  # new, or progressed since: its answer starts from scratch
            elif now < next_at:
                continue
            self._ask(rank, msg, root_of, now, backoff)
            self._requests.endpoint.stats.published_silence_asks += 1
            asked_now += 1
        self.quiet = min(self.quiet * 2, self._longest)
        self._next_silence = now + self.quiet

    def _unheard_groups(
        self, pending: Mapping[int, Incoming], root_of: Callable[[int], int]
    ) -> set[int]:
        """Groups none of whose roots has sent this receiver anything: they started late
        (or their link is down), since independent losses do not take a whole group's blocks.
        Asking each of their roots on every silence was a NACK storm at start-up on BMv2
        (5,682 NACKs to roots that had not published yet in one 10-operation run)."""
        heard: set[int] = set()
        unseen: set[int] = set()
        pending_nodes = {root_of(rank): msg for rank, msg in pending.items()}
        for node, group in self._groups.items():
            msg = pending_nodes.get(node)
            (unseen if msg is not None and msg.n_received == 0 else heard).add(group)
        return unseen - heard

    def _ask(
        self, rank: int, msg: Incoming, root_of: Callable[[int], int], now: float, backoff: float
    ) -> None:
        self._requests.request_missing(msg, root_of(rank))
        wait = self._requests.retry_wait if backoff == 0.0 else min(backoff * 2, self._longest)
        self._asked[rank] = (msg.n_received, now + wait, wait)
