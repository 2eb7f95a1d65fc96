"""When a rank resends its ARRIVE (issue 33: repairs in proportion to losses).

Measured at 1% loss on every link (Df(2,4,2), 72 ranks): every rank resent on one timer from
its own arrival, whatever was lost, so one lost frame cost about 15 resends: 63% were sent
while some rank had not even arrived (it was still recovering a RELEASE it had lost), 24%
after every rank had arrived and before any release (an ARRIVE lost on its way up held them
all), 13% after the first releases (a RELEASE lost on its way down held a subtree).

A rank in repair mode (it had to wait or resend lately) asks its switch to echo its ARRIVE
(flag REPLY_NOW; docs/protocol.md, Barrier repairs). Without the echo it resends after
``barrier_echo_rto``: its own ARRIVE may be lost and only it can repair that. With it, its
arrival is safe: what still holds the barrier is a frame lost between switches or a RELEASE
lost on its way down, and the switches repair both from any one resend (a resend asks the
children still missing). So the echoed ranks resend one after another, in member order
``barrier_stagger`` apart from ``barrier_rto``, and the first resend usually releases them all.
Outside repair mode every rank runs that ordered timer from the start and its resends ask
too: the first resend's asks reach a rank whose own ARRIVE was lost, which resends at once.

A patient barrier (the allgather's confirmation that every rank holds every block, which
only decides when a published copy may go) resends after ``barrier_patient_rto``: its ranks
arrive as their repairs finish, often more than a second apart at 1% loss, and on the ordered
timer the early ones resent 0.7 ARRIVEs per rank and operation (0.4 per frame lost), and
still 0.3 with a 1 s timer. A lost ARRIVE or RELEASE then holds a published copy longer, and
any rank's resend asks the switches for the rest. Once a rank waits on it after all (a
following in-network reduction, ``Comm.free``), it is hurried onto the ordered timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from host_agents.transport.config import PeerTimeout
from host_agents.transport.endpoint import Endpoint
from host_agents.transport.to_switch import own_switch


class ArriveResends:
    """``send(False)`` now, then ``send(True)`` on the timers above, each backing off to
    ``barrier_rto_max``, until ``waiter`` completes; after ``timeout`` seconds ``waiter``
    fails with a PeerTimeout. ``position``: this rank's place among the communicator's
    members, which orders the slow timers; ``asks_echo``: the ARRIVE asked for the echo (else
    the slow timer runs from the start). Timer callbacks on the waiter, not a coroutine: one
    looping over ``wait_for(shield(...))`` cost every rank a task and several event-loop passes
    per barrier (docs/performance.md)."""

    def __init__(
        self,
        endpoint: Endpoint,
        waiter: asyncio.Future[None],
        send: Callable[[bool], None],
        timeout: float,
        what: str,
        position: int,
        asks_echo: bool,
        *,
        patient: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self.waiter = waiter
        self.send = send
        self.timeout = timeout
        self.what = what
        cfg = endpoint.cfg
        self.started = endpoint.loop.time()
        self.deadline = self.started + timeout
        self.is_recorded = False
        self.turn = min(cfg.barrier_rto + position * cfg.barrier_stagger, cfg.barrier_rto_max)
        self.ordered_delay = cfg.barrier_patient_rto if patient else self.turn
        # a patient rank waits as long for its echo: nobody waits on it
        self.delay = cfg.barrier_echo_rto if asks_echo and not patient else self.ordered_delay
        self.last_sent = self.started
        self.sent = False  # the first ARRIVE went out (start, or an ask's resend)
        self.timer: asyncio.TimerHandle | None = None
        waiter.add_done_callback(self._stop)

    def start(self) -> None:
        if self.waiter.done() or self.sent:
            return
        self.sent = True
        self.started = self.last_sent = self.endpoint.loop.time()
        self.send(False)
        if not self.waiter.done():  # an in-process fabric may answer at once
            self._arm()

    def hold(self) -> None:
        """Send nothing until :meth:`start` (the switches would drop this ARRIVE: its epoch
        is past their window), but still fail at the deadline."""
        self.timer = self.endpoint.loop.call_at(self.deadline, self._expire)

    def recorded(self) -> None:
        """The switch echoed the ARRIVE: from now on only the ordered slow timer runs."""
        if self.is_recorded or self.waiter.done():
            return
        self.is_recorded = True
        self.delay = self.ordered_delay
        self._arm()

    def hurry(self) -> None:
        """Somebody waits on this barrier now: resend on the ordered timer from the last
        send, as an impatient rank would."""
        if self.waiter.done() or self.ordered_delay == self.turn:
            return
        self.ordered_delay = self.turn
        self.delay = min(self.delay, self.turn)
        if self.sent:  # a held ARRIVE keeps its new timers for when it goes out
            self._arm(since=self.last_sent)

    def asked(self) -> None:
        """The switch is at this epoch and has not recorded this rank: resend now, unless it
        just did (one resend may be asked several times over)."""
        cfg = self.endpoint.cfg
        if self.is_recorded or self.waiter.done():
            return
        if self.endpoint.loop.time() - self.last_sent >= cfg.barrier_echo_rto / 2:
            self._expire()

    def _arm(self, since: float | None = None) -> None:
        """Resend ``delay`` after ``since`` (default: now), never past the deadline."""
        loop = self.endpoint.loop
        if self.timer is not None:
            self.timer.cancel()
        now = loop.time()
        due = max(now, (now if since is None else since) + self.delay)
        self.timer = loop.call_at(min(due, self.deadline), self._expire)

    def _expire(self) -> None:
        if self.waiter.done():
            return
        loop = self.endpoint.loop
        if loop.time() >= self.deadline:
            switch = own_switch(self.endpoint)
            self.waiter.set_exception(PeerTimeout(switch, self.what, self.timeout))
            return
        self.sent = True
        self.send(True)
        self.last_sent = loop.time()
        # backing off (a patient rank's timer is already past barrier_rto_max)
        self.delay = min(self.delay * 2, max(self.endpoint.cfg.barrier_rto_max, self.ordered_delay))
        self._arm()

    def _stop(self, _done: asyncio.Future[None]) -> None:
        if self.timer is not None:
            self.timer.cancel()
