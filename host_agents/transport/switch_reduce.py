"""In-network reduction, the host's side.

A vector is cut into chunks of ``agg_lanes`` 32-bit lanes (the last one padded with the
operation's identity). Each chunk's contribution (REDUCE) goes to the host's switch and is
resent until the RESULT of that chunk comes back down the communicator's barrier tree; the
switches never add a duplicate twice and answer a late one with the result, so retransmission
is always safe. At most half of the switch's ``agg_window`` slots per communicator are in
flight: a host sends chunk c + window/2 only once it holds the result of chunk c, so a switch
reuses a slot only when every host already has what the slot held (SwitchML's shadow copies).
Chunk numbers continue from one instance to the next (modulo the window, the same at every
rank, since every rank runs the same reductions in the same order): the first chunk of an
instance never lands in the slot whose result a slower rank may still be asking for.
Instances are numbered by the communicator's barrier epochs, which survive jobs and restarts
(the switches advance their released barrier epoch with the last chunk of each instance).

Retransmission is paced by progress, not per chunk: a chunk's result waits for the slowest
rank's contribution, so per-chunk timers fire all at once whenever one rank lags, and each
duplicate REDUCE reaching a switch whose slot is complete goes up the tree again (72 ranks
resent 2,300 chunks each in one 64 KiB allreduce that way). One timer per reduction restarts
whenever a result arrives; when it runs out, every outstanding chunk is resent once and the
timer backs off. Its base is learnt from results' round trips, and for an instance's first
chunks from how long those usually take (they also wait for the last rank to arrive). Other
results show most losses first (transport/reduce_evidence.py: fast retransmit, and the tail
of a burst of chunks sent at once).

One resend repairs whatever held a chunk (issue 33; common/reduce.p4 agg_repair): it climbs
the complete switches to the first incomplete one, which *asks* its missing children (the
REDUCE sent down), down to the host whose contribution was lost, which resends it at once; a
switch that holds the result answers. So the ranks resend in turns (the timer's and fast
retransmit's alike): the communicator's first member at once, the first members of each
dragonfly group two turns later, of each switch three, the others four (a turn is about a
chunk's round trip, at least ``reduce_stagger``); the first resend's repair usually reaches the
others before their turn; on the timer the others wait a timeout more, so the first member
tries again first when a frame of its repair was lost. When every rank resent, one REDUCE lost
on a host's link cost 72 resends. A RESULT lost below the root is another matter: the switches
above the loss hold it, and the host that lacks it, often alone, waited its turn (four for
half the ranks, a third of a second on the loaded emulator) for a repair nobody else would
send. The root's next RESULT names the one before it (transport/result_order.py), so such a
host asks its switch soon, in turns of ``reduce_stagger`` (the subtree's first member first),
without asking for contributions: the plain REDUCE again, answered where the result is, sent
up by a complete slot, dropped at an incomplete one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from controller import wire
from controller.wire import Flag, Op
from host_agents.reduction import IDENTITY, LANE_BYTES, WIRE, ReduceOp
from host_agents.transport.config import EngineError, PeerTimeout
from host_agents.transport.endpoint import BROADCAST_MAC, Endpoint
from host_agents.transport.reduce_evidence import Bursts, Evidence, Trails, new_trails, tail_wait
from host_agents.transport.result_order import named_before
from host_agents.transport.rtt import RttEstimate
from host_agents.transport.to_switch import own_switch

InstanceKey = tuple[int, int]  # (comm, epoch)

# a timeout learnt from round trips is at most this many times ``barrier_rto``
LEARNT_RTO_LIMIT = 4
# a resend turn learnt from round trips is at most this many times ``reduce_stagger``
STAGGER_LIMIT = 4


@dataclass(slots=True)
class _Instance:
    """One reduction in progress at this host."""

    base: int  # the switch chunk number of chunk 0
    results: list[bytes | None]
    first_sent: dict[int, float] = field(default_factory=dict)  # chunk -> first send time
    resent: set[int] = field(default_factory=set)
    bursts: Bursts = field(default_factory=Bursts)  # what shows a result lost
    last_resent: dict[int, float] = field(default_factory=dict)  # chunk -> its last resend
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    known: int = 0
    sent: int = 0  # chunks sent so far: an ask for a later one is answered by its first send
    stagger: float = 0.0  # one resend turn (SwitchReduce._stagger)
    lowest: int = 0  # the lowest chunk without a result
    resend: Callable[[int, bool], None] | None = None  # (chunk, asks): once running
    # chunks a later RESULT named and this host lacks: (when to ask for it, chunk)
    gaps: list[tuple[float, int]] = field(default_factory=list)
    gap_asked: set[int] = field(default_factory=set)  # chunks asked for that way
    failure: EngineError | None = None  # set when the communicator is freed under it


class SwitchReduce:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.loop = endpoint.loop
        self._active: dict[InstanceKey, _Instance] = {}
        self._next_chunk: dict[int, int] = {}  # comm -> where the next instance's chunks start
        self._rtt: dict[int, RttEstimate] = {}  # comm -> a chunk's send-to-result time
        # comm -> an instance's first send to its first result: the round trip plus the wait
        # for the last rank to arrive, which no resend shortens
        self._entry: dict[int, RttEstimate] = {}
        # comm -> how long after the first result of a send burst its last came (chunks sent
        # at once come back over a trail as long as it takes the fabric to pass them all)
        self._trails: dict[int, Trails] = {}

    def turns(self, comm: int) -> int:
        """This rank's place in the resend order: one for each of the communicator, its
        dragonfly group and its switch whose first member it is not. A chunk held for a
        whole subtree (a loss above it) is resent first by the subtree's first member, and
        the others of the subtree wait at least one turn more (the reduction's tree enters
        each group by one switch); a rank that alone lacks a result waits the longest."""
        directory, me = self.endpoint.directory, self.endpoint.node
        members = directory.comms.get(comm, ())
        if me not in members or me not in directory.places:
            return 0
        turns = 0
        for level in (lambda n: 0, directory.group_of, directory.switch_of):
            mine = level(me)
            first = next(m for m in members if m in directory.places and level(m) == mine)
            turns += first != me
        return turns

    def chunks(self, nbytes: int) -> int:
        return max(1, -(-nbytes // (self.cfg.agg_lanes * LANE_BYTES)))

    async def reduce(
        self, comm: int, epoch: int, data: bytes | bytearray, op: ReduceOp, timeout: float
    ) -> bytes:
        """Every rank's ``data`` combined by the switches; every rank gets the result.
        PeerTimeout when no result comes for ``timeout`` seconds."""
        lanes = self.cfg.agg_lanes
        count = self.chunks(len(data))
        # chunk numbers (16 bits in the switch's slot tag) start up to a window late
        most = wire.AGG_CHUNK_LIMIT - self.cfg.agg_window
        if count > most:
            raise EngineError(
                f"an in-network reduction takes at most {most * lanes * LANE_BYTES} bytes"
            )
        if (comm, epoch) in self._active:
            raise EngineError(f"reduction {epoch} on comm {comm} is already running")
        base = self._next_chunk.get(comm, 0)
        self._next_chunk[comm] = (base + count) % self.cfg.agg_window
        padded = np.full(count * lanes, IDENTITY[op], dtype=np.int64).astype(np.int32)
        padded[: len(data) // LANE_BYTES] = np.frombuffer(bytes(data), dtype=WIRE)
        payload = padded.astype(WIRE).tobytes()
        instance = _Instance(base, [None] * count)
        self._active[(comm, epoch)] = instance
        try:
            await self._run(comm, epoch, op, payload, instance, timeout)
        finally:
            self._active.pop((comm, epoch), None)
        return b"".join(r for r in instance.results if r is not None)[: len(data)]

    async def _run(
        self,
        comm: int,
        epoch: int,
        op: ReduceOp,
        payload: bytes,
        instance: _Instance,
        timeout: float,
    ) -> None:
        endpoint, loop = self.endpoint, self.loop
        results = instance.results
        count = len(results)
        chunk_bytes = self.cfg.agg_lanes * LANE_BYTES
        in_flight = max(1, self.cfg.agg_window // 2)
        rtt = self._rtt.setdefault(comm, RttEstimate(self.cfg.barrier_rto))
        entry = self._entry.setdefault(comm, RttEstimate(self.cfg.barrier_rto))
        trails = self._trails.setdefault(comm, new_trails())
        header = wire.Header(
            op=Op.REDUCE,
            comm_id=comm,
            epoch=epoch,
            tree=int(op),
            src_node=endpoint.node,
            seg_count=instance.base + count,
            msg_len=chunk_bytes,
        )

        def send(chunk: int, again: bool, asks: bool = True) -> None:
            """``again`` with ``asks``: a resend that asks the switches for what is missing
            (RETRANSMIT); without: the answer to an ask, which asks nothing in turn."""
            hdr = header.with_(seg_idx=instance.base + chunk)
            part = payload[chunk * chunk_bytes : (chunk + 1) * chunk_bytes]
            if again:
                flags = Flag.RETRANSMIT if asks else Flag.NONE
                endpoint.send_frame(BROADCAST_MAC, hdr.with_(flags=flags), part)
                endpoint.stats.reduce_retransmissions += 1
                instance.resent.add(chunk)
                instance.last_resent[chunk] = loop.time()
            else:
                endpoint.send_frame(BROADCAST_MAC, hdr, part)
                endpoint.stats.reduce_sent += 1
                instance.bursts.sent(chunk, bursts)
                # the first window waits for every rank to arrive: no round trip to learn from
                if chunk >= in_flight:
                    instance.first_sent[chunk] = loop.time()

        def ask_for_gap(chunk: int) -> None:
            """A later RESULT named this chunk (lost below the root): the plain REDUCE again,
            which the switch that holds the result answers (asking for no contribution)."""
            part = payload[chunk * chunk_bytes : (chunk + 1) * chunk_bytes]
            endpoint.send_frame(BROADCAST_MAC, header.with_(seg_idx=instance.base + chunk), part)
            endpoint.stats.reduce_retransmissions += 1
            endpoint.stats.reduce_gap_resends += 1
            instance.gap_asked.add(chunk)

        lowest = sent = known = 0  # lowest chunk without a result; chunks sent; results held
        bursts = 0  # sends so far that went out together (a window's worth, or a result's)
        # a chunk's result also waits for every other rank's send of it, so under loss the
        # round trips carry other ranks' recoveries; uncapped, they grew the timeout to
        # seconds and slowed every recovery in turn (a 200 KB allreduce at 3% loss ran past
        # 120 s). The first results' wait is capped only by reduce_rto_max: ranks may enter
        # much later than a round trip.
        round_trip_cap = min(LEARNT_RTO_LIMIT * self.cfg.barrier_rto, self.cfg.reduce_rto_max)
        backoff = self._base_rto(entry, self.cfg.reduce_rto_max)
        turns = self.turns(comm)
        overtaken: dict[int, float] = {}  # chunk -> when its fast retransmit is due
        probed: tuple[int, int] | None = None  # the chunk the timer resent, and chunks sent
        followed: dict[int, float] = {}  # chunk -> when the timer's probe scheduled it
        instance.resend = lambda chunk, asks: send(chunk, True, asks)
        started = last_event = last_result = loop.time()
        while lowest < count:
            bursts += 1  # a label: what the loop below sends goes out together
            while sent < count and sent < lowest + in_flight:  # its slot's last result is here
                send(sent, again=False)
                sent += 1
            instance.sent = sent
            instance.stagger = self._stagger(rtt if rtt.srtt > 0 else entry)
            # the first member's resend of a chunk held for everyone usually repairs it by
            # an ask, two round trips, so the next wait a turn more after it; and on the
            # timer a whole timeout more: a frame of the repair it set off may be lost, and
            # it tries again before them (when it did not, every group's first member resent)
            turn = (turns + 1 if turns else 0) * instance.stagger
            timer_turn = turn + (backoff if turns else 0.0)
            now = loop.time()
            if now - last_result >= timeout:
                what = f"waiting for the RESULT of chunk {instance.base + lowest} of reduction"
                raise PeerTimeout(own_switch(endpoint), f"{what} {epoch} on comm {comm}", timeout)
            gaps_due = (gap[0] for gap in instance.gaps)
            due = min([*overtaken.values(), *gaps_due], default=now + timeout)
            wait = min(last_event + backoff + timer_turn, last_result + timeout, due) - now
            if wait > 0 and instance.known == known:
                instance.arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(instance.arrived.wait(), wait)
            if instance.failure is not None:
                raise instance.failure
            now = loop.time()
            if instance.known > known:
                if known == 0:
                    # timed from the first send even if resent: an upper bound, which only
                    # makes the next entry wait longer before resending
                    entry.sample(now - started, self.cfg)
                known = instance.known
                last_event = last_result = now
                for chunk, sent_at in list(instance.first_sent.items()):
                    if results[chunk] is not None:
                        del instance.first_sent[chunk]
                        if chunk not in instance.resent and chunk not in instance.gap_asked:
                            rtt.sample(now - sent_at, self.cfg)  # else its time is unclear
                # progress ends the backoff: past the first results, chunks take a round trip
                if rtt.srtt > 0:
                    backoff = self._base_rto(rtt, round_trip_cap)
                else:
                    backoff = self._base_rto(entry, self.cfg.reduce_rto_max)
                asked = instance.resent | instance.gap_asked
                instance.bursts.learn_trails(results, asked, trails)
                while lowest < count and results[lowest] is not None:
                    lowest += 1
                instance.lowest = lowest
                tail_due = now + max(turn, tail_wait(self.cfg, trails))
                for chunk, evidence in instance.bursts.overtaken(
                    results, lowest, sent, instance.resent
                ):
                    if evidence == Evidence.BURST_TAIL:  # due a while after the latest result
                        overtaken[chunk] = tail_due
                        continue
                    # one later result may be a reordering: wait at least a turn's floor
                    at = now + turn
                    if evidence == Evidence.LATER_RESULT:
                        at = now + max(turn, self.cfg.reduce_stagger)
                    overtaken[chunk] = min(overtaken.get(chunk, at), at)
                if probed is not None and results[probed[0]] is not None:
                    for chunk in range(lowest, probed[1]):
                        if results[chunk] is None:
                            overtaken.setdefault(chunk, now + turn + instance.stagger)
                            followed[chunk] = now
                    probed = None
            elif now - last_event >= backoff + timer_turn:
                # after progress the lowest only: one cause (a rank behind) often holds every
                # chunk in flight, and one resend's asks reach it; the others sent before it
                # are resent a turn after its result if theirs is still missing. Again
                # without progress, every one: at 3% loss the lowest alone, round after
                # backed-off round, made a 64 KiB allreduce six times slower
                overtaken.clear()
                stuck = [c for c in range(lowest, sent) if results[c] is None]
                for chunk in stuck[:1] if probed is None else stuck:
                    send(chunk, again=True)
                    endpoint.stats.reduce_timer_resends += 1
                probed = (lowest, sent)
                last_event = now
                backoff = min(backoff * 2, self.cfg.reduce_rto_max)
            for gap in [g for g in instance.gaps if g[0] <= now]:
                instance.gaps.remove(gap)
                if results[gap[1]] is None and gap[1] not in instance.gap_asked:
                    ask_for_gap(gap[1])  # not reordered, nor repaired by a first member
            for chunk, at in list(overtaken.items()):
                # it came, or an ask had it resent meanwhile (since the probe scheduled it)
                since = followed.get(chunk, -1.0)
                if results[chunk] is not None or instance.last_resent.get(chunk, -1.0) > since:
                    del overtaken[chunk]
                    followed.pop(chunk, None)
                elif at <= now:
                    del overtaken[chunk]
                    followed.pop(chunk, None)
                    send(chunk, again=True)
                    endpoint.stats.reduce_overtaken_resends += 1

    def _stagger(self, rtt: RttEstimate) -> float:
        """One turn: about a chunk's round trip (learnt, as the time a repair takes to show;
        from the instances' first results while no later chunk was timed), between
        ``reduce_stagger`` and STAGGER_LIMIT times it."""
        floor = self.cfg.reduce_stagger
        return min(max(floor, rtt.srtt), STAGGER_LIMIT * floor)

    def _base_rto(self, rtt: RttEstimate, cap: float) -> float:
        return min(max(self.cfg.barrier_rto, rtt.rto), cap)

    def on_switch_frame(self, hdr: wire.Header, payload: memoryview) -> None:
        """A RESULT, or a REDUCE asking for this host's part, from this host's own switch."""
        if hdr.op == Op.RESULT:
            self.on_result(hdr, payload)
        else:
            self.on_ask(hdr)

    def on_ask(self, hdr: wire.Header) -> None:
        """The switch misses this host's contribution to a chunk: resend it now (asking
        nothing: the switch that asked is waiting for exactly this). A host that has not sent
        that chunk yet waits for the result of an earlier one (of this reduction or the one it
        is still in), which its own switch may hold already: it resends that one now, asking,
        instead of in its turn (the ranks before it would resend first, in vain). A copy of
        an ask, or a second within a resend turn, is answered by the resend already sent."""
        asked = self._active.get((hdr.comm_id, hdr.epoch))
        chunk = -1 if asked is None else hdr.seg_idx - asked.base
        if asked is not None and 0 <= chunk < asked.sent:
            self._resend_once(asked, chunk, asks=False)
            return
        for (comm, _), instance in self._active.items():
            if comm == hdr.comm_id and instance.lowest < len(instance.results):
                self._resend_once(instance, instance.lowest, asks=True)

    def _resend_once(self, instance: _Instance, chunk: int, asks: bool) -> None:
        if instance.resend is None or instance.results[chunk] is not None:
            return
        resent = instance.last_resent.get(chunk)
        if resent is None or self.loop.time() - resent >= instance.stagger:
            instance.resend(chunk, asks)
            self.endpoint.stats.reduce_asked_resends += 1

    def on_result(self, hdr: wire.Header, payload: memoryview) -> None:
        """A RESULT from this host's own switch."""
        if len(payload) != self.cfg.agg_lanes * LANE_BYTES:
            self.endpoint.drop("RESULT with the wrong number of lanes", hdr)
            return
        self._lacks_named(hdr)
        instance = self._active.get((hdr.comm_id, hdr.epoch))
        chunk = -1 if instance is None else hdr.seg_idx - instance.base
        if instance is None or not 0 <= chunk < len(instance.results):
            self.endpoint.stats.duplicates += 1  # not a reduction this host is running
            return
        if instance.results[chunk] is not None:
            self.endpoint.stats.duplicates += 1
            return
        instance.results[chunk] = bytes(payload)
        instance.bursts.arrived(chunk, self.loop.time())
        instance.known += 1
        instance.arrived.set()

    def _lacks_named(self, hdr: wire.Header) -> None:
        """The chunk a RESULT names as completed before it: lacking it, ask for it after a
        reordering's time, in turns (a subtree's first member's repair reaches the others)."""
        named = named_before(hdr.seq)
        instance = None if named is None else self._active.get((hdr.comm_id, named[0]))
        if named is None or instance is None:
            return
        chunk = named[1] - instance.base
        if 0 <= chunk < instance.sent and instance.results[chunk] is None:
            turns = self.turns(hdr.comm_id)
            instance.gaps.append((self.loop.time() + (1 + turns) * self.cfg.reduce_stagger, chunk))
            instance.arrived.set()

    def purge(self, comm: int) -> None:
        self._next_chunk.pop(comm, None)
        self._rtt.pop(comm, None)
        self._entry.pop(comm, None)
        self._trails.pop(comm, None)
        for key in [k for k in self._active if k[0] == comm]:
            instance = self._active.pop(key)
            instance.failure = EngineError(f"communicator {comm} was freed")
            instance.arrived.set()
