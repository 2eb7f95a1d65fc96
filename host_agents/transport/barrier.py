"""Switch barrier, the host's side: ARRIVE is resent with backoff until a RELEASE covering its
epoch arrives (the switch answers a late ARRIVE with RELEASE, so a lost RELEASE is recovered).
Ranks resend in member order and every resend asks the switches for what is missing; a rank
that had to wait or resend lately is in repair mode: its switch echoes its ARRIVE once
recorded, and until then it resends soon (transport/arrive_resends.py).
"""

from __future__ import annotations

import asyncio

from controller import wire
from controller.wire import Flag, Op
from host_agents.transport.arrive_resends import ArriveResends
from host_agents.transport.config import EngineError
from host_agents.transport.endpoint import BROADCAST_MAC, Endpoint

# repair mode lasts this many barrier epochs after a rank resent or waited past barrier_rto:
# on a network that loses nothing the barrier stays one frame out and one in per rank. A
# rank's first barrier on a communicator does not count: it waits for every agent to start
# (a lossless run resent 28-33 ARRIVEs there, and 64 epochs of echoes cost it 31% more frames)
REPAIR_MODE_EPOCHS = 64


class Barrier:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.loop = endpoint.loop
        self._released: dict[int, int] = {}  # comm -> newest released barrier epoch
        self._arrived: dict[int, int] = {}  # comm -> newest barrier epoch this rank entered
        self._waiters: dict[int, list[tuple[int, asyncio.Future[None]]]] = {}
        self._resends: dict[tuple[int, int], ArriveResends] = {}  # (comm, epoch) -> its timers
        self._repair_through: dict[int, int] = {}  # comm -> last epoch in repair mode
        self._first_epoch: dict[int, int] = {}  # comm -> this rank's first barrier epoch
        self._positions: dict[int, int] = {}  # comm -> this rank's place among its members

    def register(self, comm: int) -> None:
        self._released.setdefault(comm, 0)  # resume moves it for a later job
        self._positions.pop(comm, None)  # its members may have changed

    def resume(self, comm: int, released: int) -> None:
        """The switches already released ``comm``'s barriers up to ``released``."""
        if comm not in self._released:
            raise EngineError(f"communicator {comm} is not registered on node {self.endpoint.node}")
        self._released[comm] = released
        self._arrived[comm] = released

    def purge(self, comm: int) -> None:
        self._released.pop(comm, None)
        self._arrived.pop(comm, None)
        self._repair_through.pop(comm, None)
        self._first_epoch.pop(comm, None)
        self._positions.pop(comm, None)
        for waiting in self._waiters.pop(comm, []):
            if not waiting[1].done():
                waiting[1].set_exception(EngineError(f"communicator {comm} was freed"))

    def arrive(
        self, comm: int, epoch: int, timeout: float, *, patient: bool = False
    ) -> asyncio.Future[None]:
        """Arrive at barrier ``epoch`` of ``comm``; the future completes at its release (or
        fails with a PeerTimeout after ``timeout`` seconds of resending). ``patient``: nobody
        waits on the release, so resends wait ``barrier_patient_rto`` (ArriveResends)."""
        endpoint = self.endpoint
        released = self._released.get(comm)
        if released is None:
            raise EngineError(f"communicator {comm} is not registered on node {endpoint.node}")
        waiter: asyncio.Future[None] = self.loop.create_future()
        if not wire.serial_lt(released, epoch):
            waiter.set_result(None)
            return waiter
        waiting = self._waiters.setdefault(comm, [])
        waiting.append((epoch, waiter))
        if wire.serial_lt(self._arrived.get(comm, released), epoch):
            self._arrived[comm] = epoch
        repair_through = self._repair_through.get(comm)
        asks_echo = repair_through is not None and not wire.serial_lt(repair_through, epoch)
        flags = Flag.REPLY_NOW if asks_echo else Flag.NONE
        hdr = wire.Header(
            op=Op.ARRIVE, comm_id=comm, epoch=epoch, flags=flags, src_node=endpoint.node
        )
        starting = self._first_epoch.setdefault(comm, epoch) == epoch

        def repair_mode() -> None:
            if not starting:
                self._repair_through[comm] = (epoch + REPAIR_MODE_EPOCHS) & 0xFFFF

        def send(again: bool) -> None:
            if again:
                resend = hdr.with_(flags=Flag.REPLY_NOW | Flag.RETRANSMIT)  # it asks (above)
                endpoint.send_frame(BROADCAST_MAC, resend)
                endpoint.stats.arrive_retransmissions += 1
                repair_mode()
            else:
                endpoint.send_frame(BROADCAST_MAC, hdr)
                endpoint.stats.arrives_sent += 1

        def forget(_done: asyncio.Future[None]) -> None:
            if (epoch, waiter) in waiting:
                waiting.remove((epoch, waiter))
            if self._resends.get((comm, epoch)) is resends:
                del self._resends[comm, epoch]
            if self.loop.time() - resends.started > self.cfg.barrier_rto:
                repair_mode()

        what = f"waiting for RELEASE of barrier epoch {epoch} on communicator {comm}"
        position = self._positions.get(comm)
        if position is None:
            members = endpoint.directory.comms.get(comm, ())
            position = members.index(endpoint.node) if endpoint.node in members else 0
            self._positions[comm] = position
        resends = ArriveResends(
            endpoint, waiter, send, timeout, what, position, asks_echo, patient=patient
        )
        self._resends[comm, epoch] = resends
        waiter.add_done_callback(forget)
        if self._in_window(comm, epoch):
            resends.start()
        else:
            resends.hold()
            self._hurry_oldest(comm)
        return waiter

    def released_by_reduction(self, comm: int, epoch: int) -> None:
        """An in-network reduction numbered ``epoch`` completed here: its last RESULT released
        that barrier epoch and every earlier one at the switches."""
        released = self._released.get(comm)
        if released is None:
            return  # freed meanwhile
        if wire.serial_lt(self._arrived.get(comm, released), epoch):
            self._arrived[comm] = epoch
        hdr = wire.Header(op=Op.RELEASE, comm_id=comm, epoch=epoch, src_node=self.endpoint.node)
        self.on_release(hdr)

    def released_epoch(self, comm: int) -> int:
        return self._released.get(comm, 0)

    def _in_window(self, comm: int, epoch: int) -> bool:
        """Would the switches record an ARRIVE of ``epoch`` (as far as this rank knows what
        they released)? They drop one more than ``barrier_window`` epochs ahead, and its
        rank would resend it only on an ask or its timer: with the allgather's confirmations
        in the background (two epochs per operation) and 1% loss on 10 Mb/s links, fast
        ranks ran that far ahead, 2,720 ARRIVEs were dropped in 40 operations, and every
        rank resent about one per operation (more than the data's repairs)."""
        ahead = (epoch - self._released.get(comm, epoch)) & 0xFFFF
        return ahead <= self.cfg.barrier_window

    def _hurry_oldest(self, comm: int) -> None:
        """A held ARRIVE waits on the oldest open epoch's release: somebody waits on it now."""
        oldest = (self._released.get(comm, 0) + 1) & 0xFFFF
        resends = self._resends.get((comm, oldest))
        if resends is not None:
            resends.hurry()

    def _start_held(self, comm: int) -> None:
        """Send the ARRIVEs held back that the switches' window now takes."""
        for (resends_comm, epoch), resends in list(self._resends.items()):
            if resends_comm == comm and not resends.sent and self._in_window(comm, epoch):
                resends.start()
        if any(c == comm and not r.sent for (c, _), r in self._resends.items()):
            self._hurry_oldest(comm)

    def hurry(self, comm: int) -> None:
        """Somebody waits on ``comm``'s patient barriers now: resend them as others."""
        for (resends_comm, _), resends in list(self._resends.items()):
            if resends_comm == comm:
                resends.hurry()

    def on_switch_frame(self, hdr: wire.Header) -> None:
        """A RELEASE or an ARRIVE from this host's own switch. An ARRIVE naming this rank in
        dst_node echoes its own; any other asks: the switch released the epoch before and
        has not recorded this rank at ``hdr.epoch``."""
        if hdr.op == Op.RELEASE:
            self.on_release(hdr)
            return
        resends = self._resends.get((hdr.comm_id, hdr.epoch))
        if hdr.dst_node == self.endpoint.node:
            if resends is not None:
                resends.recorded()
            return  # late: its barrier was released meanwhile
        previous = (hdr.epoch - 1) & 0xFFFF
        if wire.serial_lt(self._released.get(hdr.comm_id, previous), previous):
            self.on_release(hdr.with_(op=Op.RELEASE, epoch=previous))
        if resends is not None:
            resends.asked()

    def on_release(self, hdr: wire.Header) -> None:
        """A RELEASE from this host's own switch."""
        comm, epoch = hdr.comm_id, hdr.epoch
        released = self._released.get(comm)
        if released is None:
            self.endpoint.drop("RELEASE for an unknown communicator", hdr)
            return
        if wire.serial_lt(self._arrived.get(comm, released), epoch):
            # nothing releases an epoch this rank has not entered: a forged or corrupt frame
            self.endpoint.drop("RELEASE for a barrier epoch this rank has not entered", hdr)
            return
        if wire.serial_lt(released, epoch):
            self._released[comm] = epoch
        newest = self._released[comm]
        for waiting_epoch, waiter in list(self._waiters.get(comm, [])):
            if not wire.serial_lt(newest, waiting_epoch) and not waiter.done():
                waiter.set_result(None)
        self._start_held(comm)
