"""Switch barrier, the host's side: ARRIVE is resent with backoff until a RELEASE covering its
epoch arrives (the switch answers a late ARRIVE with RELEASE, so a lost RELEASE is recovered).
"""

from __future__ import annotations

import asyncio

from controller import wire
from controller.wire import Flag, Op
from host_agents.transport.config import EngineError
from host_agents.transport.endpoint import BROADCAST_MAC, Endpoint
from host_agents.transport.to_switch import resend_until_answered


class Barrier:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.loop = endpoint.loop
        self._released: dict[int, int] = {}  # comm -> newest released barrier epoch
        self._arrived: dict[int, int] = {}  # comm -> newest barrier epoch this rank entered
        self._waiters: dict[int, list[tuple[int, asyncio.Future[None]]]] = {}

    def register(self, comm: int) -> None:
        self._released.setdefault(comm, 0)  # resume moves it for a later job

    def resume(self, comm: int, released: int) -> None:
        """The switches already released ``comm``'s barriers up to ``released``."""
        if comm not in self._released:
            raise EngineError(f"communicator {comm} is not registered on node {self.endpoint.node}")
        self._released[comm] = released
        self._arrived[comm] = released

    def purge(self, comm: int) -> None:
        self._released.pop(comm, None)
        self._arrived.pop(comm, None)
        for waiting in self._waiters.pop(comm, []):
            if not waiting[1].done():
                waiting[1].set_exception(EngineError(f"communicator {comm} was freed"))

    def released_epoch(self, comm: int) -> int:
        return self._released.get(comm, 0)

    def arrive(self, comm: int, epoch: int, timeout: float) -> asyncio.Future[None]:
        """Arrive at barrier ``epoch`` of ``comm``; the future completes at its release (or
        fails with a PeerTimeout after ``timeout`` seconds of resending)."""
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
        hdr = wire.Header(op=Op.ARRIVE, comm_id=comm, epoch=epoch, src_node=endpoint.node)

        def send(again: bool) -> None:
            if again:
                endpoint.send_frame(BROADCAST_MAC, hdr.with_(flags=Flag.RETRANSMIT))
                endpoint.stats.arrive_retransmissions += 1
            else:
                endpoint.send_frame(BROADCAST_MAC, hdr)
                endpoint.stats.arrives_sent += 1

        def forget(_done: asyncio.Future[None]) -> None:
            if (epoch, waiter) in waiting:
                waiting.remove((epoch, waiter))

        waiter.add_done_callback(forget)
        what = f"waiting for RELEASE of barrier epoch {epoch} on communicator {comm}"
        resend_until_answered(endpoint, waiter, send, timeout, what, self.cfg.barrier_rto_max)
        return waiter

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
