"""The management node: writes and reads switch registers with mini packets ([Ragasa]).

Each mini packet names its target switch and a slot and carries a generation; switches on
the way forward it, the target applies it if the generation is newer and answers MP_REPLY.
Requests are retransmitted until answered (bounded), and the driver caches what each switch
holds so a change sends only the slots that differ. After a switch restarts, its registers
are empty: :meth:`MiniPacketDriver.forget` drops the cache and the next push sends all.

The driver needs only a frame port (``start(loop, on_frame)``, ``send(frame)``): on Mininet an
AF_PACKET socket on the management interface, in tests the in-process fabric.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from controller import wire
from controller.switch_state import BarrierSlot, SwitchState, TreeSlot
from controller.wire import MpKind, MpStatus, Op

LOG = logging.getLogger(__name__)


class FramePort(Protocol):
    def start(self, loop: asyncio.AbstractEventLoop, on_frame: Callable[[bytes], None]) -> None: ...
    def send(self, frame: bytes) -> None: ...


class MiniPacketError(RuntimeError):
    pass


@dataclass(slots=True)
class MpStats:
    sent: int = 0
    retransmitted: int = 0
    applied: int = 0
    duplicates: int = 0
    rejected: int = 0
    replies_ignored: int = 0


@dataclass(slots=True)
class _Cache:
    """What one switch holds, as far as this driver knows."""

    tree: dict[int, TreeSlot] = field(default_factory=dict)
    barrier: dict[int, BarrierSlot] = field(default_factory=dict)


EMPTY_TREE = TreeSlot(parent_port=0, children=0)
EMPTY_BARRIER = BarrierSlot(parent_port=0, child_mask=0)


def same_barrier(held: BarrierSlot | None, wanted: BarrierSlot) -> bool:
    """Whether a switch holding ``held`` already has the barrier slot ``wanted``.

    The epoch a slot starts from matters only when it is written: after that the switch counts
    on by itself, and writing the slot again would move its released epoch back (every later
    barrier would then be out of window and hang). So a slot with the same tree is never
    rewritten for a new base epoch; only a restarted switch (``forget``) gets it again."""
    return (
        held is not None
        and held.parent_port == wanted.parent_port
        and held.child_mask == wanted.child_mask
    )


class MiniPacketDriver:
    def __init__(
        self,
        port: FramePort,
        *,
        loop: asyncio.AbstractEventLoop,
        timeout: float = 0.3,
        retries: int = 10,
        window: int = 64,
    ) -> None:
        self.port = port
        self.loop = loop
        self.timeout = timeout
        self.retries = retries
        self.stats = MpStats()
        self.mac = wire.mac_bytes(wire.host_mac(wire.MGMT_NODE_ID))
        self._seq = itertools.count(1)
        self._pending: dict[tuple[int, int], asyncio.Future[wire.MiniPacket]] = {}
        self._generation: dict[tuple[int, int, int], int] = {}  # (switch node, kind, slot)
        self._cache: dict[int, _Cache] = {}
        self._window = asyncio.Semaphore(window)  # requests in flight, so no queue overflows
        port.start(loop, self._on_frame)

    # -- single requests --------------------------------------------------------------------

    async def request(
        self, switch_node: int, mp: wire.MiniPacket, retries: int | None = None
    ) -> wire.MiniPacket:
        """Send ``mp`` to ``switch_node`` until it answers; return the reply body."""
        tries = retries or self.retries
        async with self._window:
            seq = next(self._seq) & 0xFFFFFFFF
            fut: asyncio.Future[wire.MiniPacket] = self.loop.create_future()
            self._pending[(switch_node, seq)] = fut
            hdr = wire.Header(op=Op.MP, src_node=wire.MGMT_NODE_ID, dst_node=switch_node, seq=seq)
            frame = wire.build_frame(hdr, mp=mp, src_mac=self.mac)
            delay = self.timeout
            try:
                for attempt in range(tries):
                    self.port.send(frame)
                    self.stats.sent += 1
                    if attempt:
                        self.stats.retransmitted += 1
                    try:
                        return await asyncio.wait_for(asyncio.shield(fut), delay)
                    except TimeoutError:
                        delay = min(delay * 2, 2.0)
                raise MiniPacketError(
                    f"switch node 0x{switch_node:04x} did not answer mini packet "
                    f"{MpKind(mp.kind).name} slot {mp.slot} after {tries} tries"
                )
            finally:
                self._pending.pop((switch_node, seq), None)

    def _next_generation(self, switch_node: int, kind: int, slot: int) -> int:
        key = (switch_node, kind, slot)
        generation = (self._generation.get(key, 0) + 1) & 0xFFFFFFFF or 1
        self._generation[key] = generation
        return generation

    async def write_tree(self, switch_node: int, slot: int, content: TreeSlot) -> MpStatus:
        mp = wire.MiniPacket(
            kind=MpKind.WRITE_TREE,
            slot=slot,
            generation=self._next_generation(switch_node, MpKind.WRITE_TREE, slot),
            parent_port=content.parent_port,
            children=content.children,
        )
        return self._count(await self.request(switch_node, mp), switch_node)

    async def write_barrier(self, switch_node: int, comm: int, content: BarrierSlot) -> MpStatus:
        mp = wire.MiniPacket(
            kind=MpKind.WRITE_BARRIER,
            slot=comm,
            generation=self._next_generation(switch_node, MpKind.WRITE_BARRIER, comm),
            parent_port=content.parent_port,
            epoch=content.base_epoch,
            children=content.child_mask,
        )
        return self._count(await self.request(switch_node, mp), switch_node)

    async def read_tree(self, switch_node: int, slot: int) -> wire.MiniPacket:
        return await self.request(switch_node, wire.MiniPacket(kind=MpKind.READ_TREE, slot=slot))

    async def read_barrier(
        self, switch_node: int, comm: int, retries: int | None = None
    ) -> wire.MiniPacket:
        return await self.request(
            switch_node, wire.MiniPacket(kind=MpKind.READ_BARRIER, slot=comm), retries
        )

    def _count(self, reply: wire.MiniPacket, switch_node: int) -> MpStatus:
        status = MpStatus(reply.status)
        if status == MpStatus.OK:
            self.stats.applied += 1
        elif status == MpStatus.DUPLICATE:
            self.stats.duplicates += 1  # our earlier copy got through; its reply was lost
        else:
            self.stats.rejected += 1
            raise MiniPacketError(
                f"switch node 0x{switch_node:04x} rejected {MpKind(reply.kind).name} slot "
                f"{reply.slot}: {status.name}"
            )
        return status

    # -- whole-switch pushes ------------------------------------------------------------------

    def forget(self, switch_node: int) -> None:
        """The switch lost its registers (restart): the next push rewrites every slot."""
        self._cache.pop(switch_node, None)

    def cached_barrier(self, switch_node: int) -> Mapping[int, BarrierSlot]:
        cache = self._cache.get(switch_node)
        return cache.barrier if cache is not None else {}

    async def push(self, state: SwitchState) -> int:
        """Write the slots of ``state`` that differ from what the switch holds; returns how
        many mini packets were applied. Slots no longer wanted are cleared."""
        node = state.node_id
        cache = self._cache.setdefault(node, _Cache())
        writes = []
        for slot, content in state.tree_slots.items():
            if cache.tree.get(slot) != content:
                writes.append(self._push_tree(cache, node, slot, content))
        for slot in set(cache.tree) - set(state.tree_slots):
            writes.append(self._push_tree(cache, node, slot, None))
        for comm, barrier in state.barrier_slots.items():
            if not same_barrier(cache.barrier.get(comm), barrier):
                writes.append(self._push_barrier(cache, node, comm, barrier))
        for comm in set(cache.barrier) - set(state.barrier_slots):
            writes.append(self._push_barrier(cache, node, comm, None))
        await asyncio.gather(*writes)
        return len(writes)

    async def _push_tree(
        self, cache: _Cache, node: int, slot: int, content: TreeSlot | None
    ) -> None:
        await self.write_tree(node, slot, content or EMPTY_TREE)
        if content is None:
            cache.tree.pop(slot, None)
        else:
            cache.tree[slot] = content

    async def _push_barrier(
        self, cache: _Cache, node: int, comm: int, content: BarrierSlot | None
    ) -> None:
        await self.write_barrier(node, comm, content or EMPTY_BARRIER)
        if content is None:
            cache.barrier.pop(comm, None)
        else:
            cache.barrier[comm] = content

    # -- replies ---------------------------------------------------------------------------

    def _on_frame(self, frame: bytes) -> None:
        try:
            parsed = wire.parse_frame(frame)
        except wire.WireError:
            self.stats.replies_ignored += 1
            return
        hdr = parsed.hdr
        if hdr.op != Op.MP_REPLY or hdr.dst_node != wire.MGMT_NODE_ID or parsed.mp is None:
            self.stats.replies_ignored += 1
            return
        fut = self._pending.get((hdr.src_node, hdr.seq))
        if fut is not None and not fut.done():
            fut.set_result(parsed.mp)
        else:
            self.stats.replies_ignored += 1
