"""The engine's knobs, its counters, and the errors a collective sees from it."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from controller import wire
from host_agents.transport.stamps import STAMP_UNIT


class EngineError(Exception):
    """Base of the errors a collective sees from the engine."""


class PeerTimeout(EngineError):
    def __init__(self, peer: int, what: str, seconds: float, behind: tuple[int, ...] = ()) -> None:
        more = f" (receivers that may be behind it: nodes {list(behind)})" if behind else ""
        super().__init__(f"no progress from node {peer} for {seconds:.1f} s while {what}{more}")
        self.peer = peer
        self.behind = behind  # the receivers a co-root or switch reports for


class SizeMismatch(EngineError):
    def __init__(self, peer: int, what: str, expected: int, got: int) -> None:
        super().__init__(f"{what}: node {peer} sends {got} bytes where {expected} are expected")
        self.peer = peer


RESEND_ASK_DELAY = 0.02  # EngineConfig.resend_ask_delay's default


@dataclass(slots=True)
class EngineConfig:
    segment_size: int = wire.MAX_PAYLOAD
    # In-flight limits stay below what BMv2 can absorb at once: it reads each port through a
    # packet socket whose default buffer (net.core.rmem_default, 208 KiB) holds about 90
    # full frames; a multicast root 128 segments ahead lost a third of them (measured).
    message_window: int = 64  # unacknowledged segments per unicast message
    mcast_window: int = 32  # segments the multicast root runs ahead of its slowest receiver
    # unacknowledged segments a root keeps on one tree across its multicasts (a root returns
    # once its data went out; transport/multicast_root.py _tree_full)
    mcast_tree_window: int = 32
    cwnd_initial: float = 16.0
    cwnd_max: float = 64.0
    # Timers are generous because dozens of agents and BMv2 switches share two cores in
    # Mininet: a spurious retransmission costs more than a late one.
    rto_initial: float = 0.2
    rto_min: float = 0.05
    rto_max: float = 2.0
    # a switch-merged root's cap: its round trips come from echoed send stamps (never
    # ambiguous, transport/stamps.py), and with every rank rooting at once a merged ACK takes
    # seconds: capped at rto_max, every such multicast was resent down the whole tree. Below
    # the stamps' 6.5 s span, so a sample is never ambiguous
    merged_rto_max: float = 6.0
    # seconds per tick of a root's send stamps: stretched with every other timer on slow
    # links, so the stamps' span (65,536 ticks) stays past merged_rto_max
    stamp_unit: float = STAMP_UNIT
    ack_every: int = 16
    ack_delay: float = 0.002
    nack_delay: float = 0.005
    # a receiver missing the end of a message asks for it after this much silence (the root
    # sends a window at once, so a silent gap at the tail is a loss, not a slow sender)
    tail_delay: float = 0.01
    # a receiver of published multicasts (allgather) waits at least this long for arrivals
    # to resume before it asks for repairs: on the loaded emulator 72 ranks' blocks pause
    # longer than the RTO floor with nothing lost, and asking after 50 ms brought 11x the
    # NACKs and 6x the repairs of asking after 0.3 s (Df(2,4,2), no loss, measured)
    repair_quiet_min: float = 0.3
    # a co-root holding a whole message repairs a member that has not ACKed it this long
    # after the co-root's own copy completed (that member may have lost every segment)
    coroot_probe_delay: float = 0.03
    peer_timeout: float = 15.0
    # a receiver that holds some messages of a step and knows the others are due (the packed
    # allgather's leader) asks their senders to resend them once arrivals pause this long,
    # instead of waiting out the senders' retransmission timeouts (Flag.RESEND)
    resend_ask_delay: float = RESEND_ASK_DELAY
    # senders learn round trips from D-SACKs (a resend the receiver already had: the path was
    # slow, not lossy; docs/protocol.md). Off by default: with it, every rank rooting a 16 KiB
    # binomial broadcast (make reproduce, --only ragasa:binomial/16384) failed twice in two
    # runs, a message between two ranks going unanswered for 15 s, which is not understood
    # yet; without it that cell has always completed. Duplicates are flagged and counted
    # either way (make bench ... --engine dsack_learning=true to compare)
    dsack_learning: bool = False
    # in repair mode (transport/barrier.py) a rank whose ARRIVE its switch has not echoed yet
    # resends after this (doubling): its ARRIVE may be lost; the echo takes 13-16 ms (median
    # at 1% loss on Df(2,4,2)) otherwise
    barrier_echo_rto: float = 0.05
    # the first member resends its ARRIVE after barrier_rto, each next one barrier_stagger
    # later (doubling from there; in repair mode once its ARRIVE was echoed): every resend
    # asks the switches for what is missing, so the first usually repairs for all
    barrier_rto: float = 0.1
    barrier_stagger: float = 0.05
    # a rank that entered a barrier early retransmits at least this often, so a RELEASE lost
    # on its way to it costs it no more than this. 0.2 s made allgather under loss quicker,
    # but 72 ranks waiting out a slow reduction then resent ARRIVEs 5 times a second, each
    # passed up by its switch, and the full e2e allreduce innet ran past its deadline
    barrier_rto_max: float = 1.0
    # a barrier nobody waits on (the allgather's confirmation) resends this long after its
    # ARRIVE, echoed or not (transport/arrive_resends.py)
    barrier_patient_rto: float = 4.0
    # the longest a reduction waits between resends of its outstanding chunks (its timer
    # backs off to this); with per-chunk timers capped at 0.2 s a 72-rank allreduce resent
    # 2,300 chunks per rank and starved the switches
    reduce_rto_max: float = 1.0
    # a reduction's ranks resend a late chunk in turns (transport/switch_reduce.py), one
    # round trip of a chunk apart, at least this and at most 4 times this (its timer and fast
    # retransmit alike): one resend repairs any loss (the switches ask the host that must
    # resend), and when every rank resent at once one lost REDUCE cost 72 resends
    reduce_stagger: float = 0.02
    # Early data (a message that arrives before its receiver asks for it) is accepted for
    # epochs this far from the newest the rank started: nonblocking and persistent
    # collectives overlap a few instances, not hundreds; senders beyond it retransmit later.
    # A communicator whose every member roots one at once opens more (transport/epochs.py)
    epochs_ahead: int = 64
    max_message: int = 1 << 30
    # memory that messages nobody has asked for yet may take, counted by what arrived (never
    # by what a header claims): a flood of plausible-looking frames must not make an agent
    # allocate without bound, nor one sender crowd out the others (senders retransmit later)
    early_bytes: int = 256 << 20
    early_bytes_per_sender: int = 64 << 20
    # messages, not bytes, so many tiny frames cannot allocate without bound either; with every
    # rank rooting a collective at once ([Ragasa]'s all-roots experiment) a ring neighbour
    # runs up to 72 x 71 messages ahead: at 256 (and 4096) its data was refused until it
    # gave up. Each parked message costs a few hundred bytes besides its data
    early_messages_per_sender: int = 16384
    # an unfinished early message that gets no segment for this long is dropped: its sender
    # has given up by then (peer_timeout), so only a stale or forged one is lost
    early_idle_timeout: float = 30.0
    # a complete early message nobody claims for this long is dropped too: otherwise a member
    # could pin the early budget for good with messages nobody will ask for
    early_complete_timeout: float = 300.0
    # a freed communicator keeps re-acknowledging what it completed this long (a peer whose
    # last ACK from us was lost is still retransmitting), then everything kept for it goes
    comm_linger: float = 15.0
    # in-network reduction: 32-bit lanes per REDUCE and slots per communicator of the compiled
    # program (NETCOLL_AGG_LANES, NETCOLL_AGG_WINDOW; the launcher passes P4Info's)
    agg_lanes: int = wire.AGG_LANES
    agg_window: int = wire.AGG_WINDOW
    # open barrier epochs per communicator at a switch (NETCOLL_BARRIER_WINDOW; P4Info's):
    # an ARRIVE further ahead of the last release is held back, as the switches drop it
    barrier_window: int = 4
    completed_memory: int = 8192  # completed messages remembered to re-ACK their duplicates
    # On shaped links the data timers above come stretched by a full frame's hop
    # (mininet_topos/links/timing.py); byte_scale (per byte of a frame) and delay_scale give
    # that factor for frames of any size, so a flow of small frames waits for its own frames
    byte_scale: float = 0.0
    delay_scale: float = 1.0

    def frame_scale(self, payload_bytes: int) -> float:
        """What the data timers become for a flow of frames carrying ``payload_bytes`` each
        (at most a segment), as a share of their stretched values (1 unshaped or for full
        frames)."""

        def stretch(payload: int) -> float:
            frame = payload + wire.HEADER_LEN + wire.ETH_HEADER_LEN
            return max(1.0, frame * self.byte_scale, self.delay_scale)

        return stretch(min(payload_bytes, self.segment_size)) / stretch(self.segment_size)


@dataclass(slots=True)
class EngineStats:
    frames_sent: int = 0
    frames_received: int = 0
    data_sent: int = 0
    retransmissions: int = 0
    # unicast retransmissions the receiver already had (its D-SACK said so): the original
    # was slow, not lost
    spurious_retransmissions: int = 0
    mcast_retransmissions: int = 0
    acks_sent: int = 0
    resend_requests: int = 0  # ACKs asking a unicast sender to resend a message due here
    # multicasts whose root returned (data sent) but whose receivers never all acknowledged
    unacknowledged_multicasts: int = 0
    mcast_acks_at_root: int = 0  # multicast ACK frames reaching this node as a multicast root
    nacks_sent: int = 0
    tail_nacks: int = 0  # of nacks_sent: for a tail that stopped (no later segment shows a gap)
    due_asks: int = 0  # of nacks_sent: for a multicast the caller knew was due (ask_resend)
    # segments a NACK asked for whose original arrived after it (transport/nack_timing.py)
    premature_nacks: int = 0
    nacks_received: int = 0
    nacks_forwarded: int = 0
    coroot_repairs: int = 0  # segments a co-root resent to a member from its own copy
    # of the probes a co-root sent: to a member that completed a later multicast of the same
    # operation first (transport/outrun.py)
    coroot_outrun_repairs: int = 0
    duplicates: int = 0
    arrives_sent: int = 0
    arrive_retransmissions: int = 0
    reduce_sent: int = 0
    reduce_retransmissions: int = 0
    # of reduce_retransmissions: on the reduction's timer, after later results overtook the
    # chunk, asked by the switch, and for a gap in the root's numbers (transport/switch_reduce.py)
    reduce_timer_resends: int = 0
    reduce_overtaken_resends: int = 0
    reduce_asked_resends: int = 0
    reduce_gap_resends: int = 0
    # published multicasts (allgather innet): asks after a silence, asks whose answer was
    # overdue, and the root's repairs by unicast, by multicast, and skipped as just resent
    published_silence_asks: int = 0
    published_overdue_asks: int = 0
    published_unicast_repairs: int = 0
    published_multicast_repairs: int = 0
    published_repeats_skipped: int = 0
    # NACKs to this root for what it does not hold (not published yet: the asker is an
    # operation ahead; or finished), and of a publication withdrawn after the barrier said
    # every rank had it: a NACK sent before the release and still in flight, or a receiver
    # that can no longer be repaired (a bug)
    nacks_unheld: int = 0
    published_nacks_withdrawn: int = 0
    receive_drops: int = 0  # dropped by the kernel before the agent read them (buffer full)
    dropped: collections.Counter[str] = field(default_factory=collections.Counter)

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "dropped"}
        out["dropped"] = dict(self.dropped)
        return out
