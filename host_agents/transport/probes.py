"""Reachability probes: every host answers a PING with a PONG; the sender's future gives the
round-trip time."""

from __future__ import annotations

import asyncio

from controller import wire
from controller.wire import Op
from host_agents.transport.endpoint import BROADCAST_MAC, Endpoint


class Probes:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._pings: dict[tuple[int, int], tuple[float, asyncio.Future[float]]] = {}

    def ping(self, dst: int, seq: int, dst_mac: bytes | None) -> asyncio.Future[float]:
        endpoint = self.endpoint
        fut: asyncio.Future[float] = endpoint.loop.create_future()
        self._pings[(dst, seq)] = (endpoint.loop.time(), fut)
        hdr = wire.Header(op=Op.PING, src_node=endpoint.node, dst_node=dst, seq=seq)
        endpoint.send_frame(dst_mac or endpoint.directory.macs.get(dst, BROADCAST_MAC), hdr)
        return fut

    def on_ping(self, hdr: wire.Header, payload: memoryview) -> None:
        endpoint = self.endpoint
        if hdr.dst_node != endpoint.node:
            return
        pong = hdr.with_(op=Op.PONG, src_node=endpoint.node, dst_node=hdr.src_node)
        endpoint.send_frame(endpoint.directory.macs.get(hdr.src_node, BROADCAST_MAC), pong, payload)

    def on_pong(self, hdr: wire.Header) -> None:
        entry = self._pings.pop((hdr.src_node, hdr.seq), None)
        if entry is not None and not entry[1].done():
            entry[1].set_result(self.endpoint.loop.time() - entry[0])
