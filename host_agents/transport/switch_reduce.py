"""In-network reduction, the host's side.

A vector is cut into chunks of ``agg_lanes`` 32-bit lanes (the last one padded with the
operation's identity). Each chunk's contribution (REDUCE) goes to the host's switch and is
resent with backoff until the RESULT of that chunk comes back down the communicator's barrier
tree; the switches never add a duplicate twice and answer a late one with the result, so
retransmission is always safe. At most half of the switch's ``agg_window`` slots per
communicator are in flight: a host sends chunk c + window/2 only once it holds the result of
chunk c, so a switch reuses a slot only when every host already has what the slot held
(SwitchML's shadow copies). Chunk numbers continue from one instance to the next (modulo the
window, the same at every rank, since every rank runs the same reductions in the same order):
the first chunk of an instance never lands in the slot whose result a slower rank may still be
asking for. Instances are numbered by the communicator's barrier epochs, which
survive jobs and restarts (the switches advance their released barrier epoch with the last
chunk of each instance).
"""

from __future__ import annotations

import asyncio

import numpy as np

from controller import wire
from controller.wire import Flag, Op
from host_agents.reduction import IDENTITY, LANE_BYTES, WIRE, ReduceOp
from host_agents.transport.config import EngineError
from host_agents.transport.endpoint import BROADCAST_MAC, Endpoint
from host_agents.transport.to_switch import until_answered

ChunkKey = tuple[int, int, int]  # (comm, epoch, chunk)


class SwitchReduce:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.cfg = endpoint.cfg
        self.loop = endpoint.loop
        self._waiting: dict[ChunkKey, asyncio.Future[bytes]] = {}
        self._next_chunk: dict[int, int] = {}  # comm -> where the next instance's chunks start

    def chunks(self, nbytes: int) -> int:
        return max(1, -(-nbytes // (self.cfg.agg_lanes * LANE_BYTES)))

    async def reduce(
        self, comm: int, epoch: int, data: bytes | bytearray, op: ReduceOp, timeout: float
    ) -> bytes:
        """Every rank's ``data`` combined by the switches; every rank gets the result."""
        lanes = self.cfg.agg_lanes
        count = self.chunks(len(data))
        # chunk numbers (16 bits in the switch's slot tag) start up to a window late
        most = wire.AGG_CHUNK_LIMIT - self.cfg.agg_window
        if count > most:
            raise EngineError(
                f"an in-network reduction takes at most {most * lanes * LANE_BYTES} bytes"
            )
        base = self._next_chunk.get(comm, 0)
        self._next_chunk[comm] = (base + count) % self.cfg.agg_window
        padded = np.full(count * lanes, IDENTITY[op], dtype=np.int64).astype(np.int32)
        padded[: len(data) // LANE_BYTES] = np.frombuffer(bytes(data), dtype=WIRE)
        payload = padded.astype(WIRE).tobytes()
        chunk_bytes = lanes * LANE_BYTES
        in_flight = max(1, self.cfg.agg_window // 2)
        deadline = self.loop.time() + timeout
        tasks: list[asyncio.Task[bytes]] = []
        try:
            for chunk in range(count):
                if chunk >= in_flight:
                    await tasks[chunk - in_flight]  # its slot's previous result is here
                part = payload[chunk * chunk_bytes : (chunk + 1) * chunk_bytes]
                tasks.append(
                    self.loop.create_task(
                        self._chunk(comm, epoch, base + chunk, base + count, op, part, deadline)
                    )
                )
            results = await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
        return b"".join(results)[: len(data)]

    async def _chunk(
        self,
        comm: int,
        epoch: int,
        chunk: int,
        count: int,
        op: ReduceOp,
        part: bytes,
        deadline: float,
    ) -> bytes:
        endpoint = self.endpoint
        key = (comm, epoch, chunk)
        waiter: asyncio.Future[bytes] = self.loop.create_future()
        self._waiting[key] = waiter
        hdr = wire.Header(
            op=Op.REDUCE,
            comm_id=comm,
            epoch=epoch,
            tree=int(op),
            src_node=endpoint.node,
            seg_idx=chunk,
            seg_count=count,
            msg_len=len(part),
        )

        def send(again: bool) -> None:
            if again:
                endpoint.send_frame(BROADCAST_MAC, hdr.with_(flags=Flag.RETRANSMIT), part)
                endpoint.stats.reduce_retransmissions += 1
            else:
                endpoint.send_frame(BROADCAST_MAC, hdr, part)
                endpoint.stats.reduce_sent += 1

        what = f"waiting for the RESULT of chunk {chunk} of reduction {epoch} on comm {comm}"
        try:
            remaining = deadline - self.loop.time()
            return await until_answered(
                endpoint, waiter, send, remaining, what, self.cfg.reduce_rto_max
            )
        finally:
            self._waiting.pop(key, None)

    def on_result(self, hdr: wire.Header, payload: memoryview) -> None:
        """A RESULT from this host's own switch."""
        waiter = self._waiting.get((hdr.comm_id, hdr.epoch, hdr.seg_idx))
        if waiter is None or waiter.done():
            self.endpoint.stats.duplicates += 1
            return
        if len(payload) != self.cfg.agg_lanes * LANE_BYTES:
            self.endpoint.drop("RESULT with the wrong number of lanes", hdr)
            return
        waiter.set_result(bytes(payload))

    def purge(self, comm: int) -> None:
        self._next_chunk.pop(comm, None)
        for key in [k for k in self._waiting if k[0] == comm]:
            waiter = self._waiting.pop(key)
            if not waiter.done():
                waiter.set_exception(EngineError(f"communicator {comm} was freed"))
