"""Scatter algorithms ([DF-scatter]).

``tree``: binomial scatter (MPICH). ``lin``: the root sends each rank its block directly, a few
at a time, so no large aggregate ever fills a buffer. Topology-aware, for dragonflies:
``glf`` (global links first: binomial scatter to one representative per group, then to one
per router inside each group, then to the hosts of each router: global links carry data only
in the first phase) and ``llf`` (local links first: the root first spreads the data over the
routers of its own group, each of which then sends every remote group it has a global link
to its share directly over that link, then routers, then hosts: each group's data crosses
exactly one global link).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING

from host_agents.algorithms.binomial import children, parent, subtree_end

if TYPE_CHECKING:
    from host_agents.context import CollectiveContext as Ctx

LIN_OUTSTANDING = 4  # messages the lin root keeps in flight


async def scatter_items(
    ctx: Ctx, order: list[int], sizes: list[int], data: memoryview | None, tag: int
) -> memoryview:
    """Binomial scatter of variable-size items: ``order[i]`` gets item i; ``order[0]`` is the
    root and holds every item, concatenated in ``order``. Returns this rank's item."""
    index = order.index(ctx.rank)
    count = len(order)
    offsets = [0]
    for s in sizes:
        offsets.append(offsets[-1] + s)

    def span_bytes(first: int, last: int) -> int:
        return offsets[min(last, count)] - offsets[first]

    up = parent(index)
    if up is None:
        assert data is not None
        held = data
    else:
        ctx.step = f"tag {tag}: receive"
        received = await ctx.recv(order[up], tag, span_bytes(index, subtree_end(index, count)))
        held = memoryview(received)
    base = offsets[index]
    sends = []
    for child in children(index, count):
        start = offsets[child] - base
        length = span_bytes(child, subtree_end(child, count))
        sends.append(ctx.isend(order[child], tag, held[start : start + length]))
    ctx.step = f"tag {tag}: send"
    await ctx.wait_all(sends, f"tag {tag}: sending to subtrees")
    return held[: sizes[index]]


def _rank_blocks(sendbuf: memoryview, ranks: list[int], block: int) -> bytes:
    return b"".join(sendbuf[r * block : (r + 1) * block] for r in ranks)


async def tree(
    ctx: Ctx, sendbuf: memoryview | None, recvbuf: bytearray, root: int, block: int
) -> None:
    order = [(root + v) % ctx.size for v in range(ctx.size)]
    data = memoryview(_rank_blocks(sendbuf, order, block)) if sendbuf is not None else None
    recvbuf[:] = await scatter_items(ctx, order, [block] * ctx.size, data, 0)


async def lin(
    ctx: Ctx, sendbuf: memoryview | None, recvbuf: bytearray, root: int, block: int
) -> None:
    if ctx.rank != root:
        ctx.step = "receive from root"
        recvbuf[:] = await ctx.recv(root, 0, block)
        return
    assert sendbuf is not None
    recvbuf[:] = sendbuf[root * block : (root + 1) * block]
    in_flight: list[asyncio.Future[None]] = []
    for offset in range(1, ctx.size):
        dst = (root + offset) % ctx.size
        if len(in_flight) >= LIN_OUTSTANDING:
            ctx.step = f"send to rank {dst}"
            await ctx.wait(in_flight.pop(0), "sending blocks one by one")
        in_flight.append(ctx.isend(dst, 0, sendbuf[dst * block : (dst + 1) * block]))
    await ctx.wait_all(in_flight, "sending the last blocks")


class Hierarchy:
    """The communicator's ranks by dragonfly group and router, with each level's
    representatives chosen the same way on every rank."""

    def __init__(self, ctx: Ctx, root: int) -> None:
        self.ctx = ctx
        self.root = root
        routers: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        for rank in range(ctx.size):
            routers[ctx.group_of(rank)][ctx.switch_of(rank)].append(rank)
        self.routers = routers
        self.root_group = ctx.group_of(root)
        topo = ctx.topology
        self.topo = topo

    def entry_switch(self, group: int) -> int | None:
        """The router of ``group`` holding the global link from the root's group."""
        topo = self.topo
        if topo is None or group == self.root_group or not topo.has_gateway(group, self.root_group):
            return None
        return topo.gateway(group, self.root_group)

    def gateway_switch(self, group: int) -> int | None:
        """The router of the root's group holding the global link to ``group``."""
        topo = self.topo
        if topo is None or not topo.has_gateway(self.root_group, group):
            return None
        return topo.gateway(self.root_group, group)

    def group_rep(self, group: int) -> int:
        if group == self.root_group:
            return self.root
        entry = self.entry_switch(group)
        if entry is not None and entry in self.routers[group]:
            return min(self.routers[group][entry])
        return min(r for ranks in self.routers[group].values() for r in ranks)

    def group_order(self) -> list[int]:
        others = sorted(g for g in self.routers if g != self.root_group)
        return [self.root_group, *others]

    def router_order(self, group: int, rep: int) -> list[int]:
        rep_switch = self.ctx.switch_of(rep)
        others = sorted(s for s in self.routers[group] if s != rep_switch)
        return [rep_switch, *others]

    def router_rep(self, group: int, switch: int, group_rep: int) -> int:
        ranks = self.routers[group][switch]
        return group_rep if group_rep in ranks else min(ranks)

    def host_order(self, group: int, switch: int, rep: int) -> list[int]:
        return [rep, *sorted(r for r in self.routers[group][switch] if r != rep)]

    def group_ranks(self, group: int, rep: int) -> list[int]:
        """Every rank of ``group`` in the order the group's data travels in."""
        out: list[int] = []
        for switch in self.router_order(group, rep):
            out.extend(self.host_order(group, switch, self.router_rep(group, switch, rep)))
        return out


async def _within_group(
    ctx: Ctx,
    h: Hierarchy,
    group: int,
    rep: int,
    group_data: memoryview | None,
    block: int,
    tag: int,
) -> memoryview:
    """Routers, then hosts, of one group; returns this rank's block."""
    switches = h.router_order(group, rep)
    router_reps = [h.router_rep(group, s, rep) for s in switches]
    my_switch = ctx.switch_of(ctx.rank)
    router_data: memoryview | None = None
    if ctx.rank in router_reps:
        sizes = [len(h.routers[group][s]) * block for s in switches]
        router_data = await scatter_items(ctx, router_reps, sizes, group_data, tag)
    my_rep = h.router_rep(group, my_switch, rep)
    hosts = h.host_order(group, my_switch, my_rep)
    return await scatter_items(ctx, hosts, [block] * len(hosts), router_data, tag + 1)


async def glf(
    ctx: Ctx, sendbuf: memoryview | None, recvbuf: bytearray, root: int, block: int
) -> None:
    h = Hierarchy(ctx, root)
    groups = h.group_order()
    reps = [h.group_rep(g) for g in groups]
    my_group = ctx.group_of(ctx.rank)
    my_rep = h.group_rep(my_group)
    group_data: memoryview | None = None
    if ctx.rank in reps:
        data = None
        if ctx.rank == root:
            assert sendbuf is not None
            data = memoryview(
                b"".join(
                    _rank_blocks(sendbuf, h.group_ranks(g, h.group_rep(g)), block) for g in groups
                )
            )
        sizes = [sum(len(v) for v in h.routers[g].values()) * block for g in groups]
        ctx.step = "phase 1: groups"
        group_data = await scatter_items(ctx, reps, sizes, data, 1)
    ctx.step = "phase 2-3: routers and hosts"
    recvbuf[:] = await _within_group(ctx, h, my_group, my_rep, group_data, block, 2)


async def llf(
    ctx: Ctx, sendbuf: memoryview | None, recvbuf: bytearray, root: int, block: int
) -> None:
    h = Hierarchy(ctx, root)
    root_group = h.root_group
    root_switches = h.router_order(root_group, root)
    local_reps = [h.router_rep(root_group, s, root) for s in root_switches]
    # each remote group's data goes through the root-group router holding its global link,
    # or through the root when that router has no member to carry it
    carrier: dict[int, int] = {}
    for g in h.group_order()[1:]:
        gateway = h.gateway_switch(g)
        carrier[g] = (
            h.router_rep(root_group, gateway, root) if gateway in h.routers[root_group] else root
        )
    carried: dict[int, list[int]] = defaultdict(list)
    for g, rep in carrier.items():
        carried[rep].append(g)

    def payload_ranks(local_rep: int) -> list[int]:
        switch = ctx.switch_of(local_rep)
        ranks = h.host_order(root_group, switch, local_rep)
        for g in carried[local_rep]:
            ranks.extend(h.group_ranks(g, h.group_rep(g)))
        return ranks

    my_group = ctx.group_of(ctx.rank)
    share: memoryview | None = None
    if ctx.rank in local_reps:
        data = None
        if ctx.rank == root:
            assert sendbuf is not None
            data = memoryview(
                b"".join(_rank_blocks(sendbuf, payload_ranks(r), block) for r in local_reps)
            )
        sizes = [len(payload_ranks(r)) * block for r in local_reps]
        ctx.step = "phase 1: routers of the root's group"
        share = await scatter_items(ctx, local_reps, sizes, data, 1)
        # phase 2: each remote group this router carries, straight over its global link
        own = len(h.routers[root_group][ctx.switch_of(ctx.rank)]) * block
        offset = own
        sends = []
        for g in carried[ctx.rank]:
            size = sum(len(v) for v in h.routers[g].values()) * block
            sends.append(ctx.isend(h.group_rep(g), 2, share[offset : offset + size]))
            offset += size
        ctx.step = "phase 2: remote groups"
        await ctx.wait_all(sends, "sending to remote groups")
        share = share[:own]
    if my_group == root_group:
        my_switch = ctx.switch_of(ctx.rank)
        my_rep = h.router_rep(root_group, my_switch, root)
        hosts = h.host_order(root_group, my_switch, my_rep)
        ctx.step = "phase 4: hosts"
        recvbuf[:] = await scatter_items(ctx, hosts, [block] * len(hosts), share, 4)
        return
    rep = h.group_rep(my_group)
    group_data = None
    if ctx.rank == rep:
        size = sum(len(v) for v in h.routers[my_group].values()) * block
        ctx.step = "phase 2: receive the group's data"
        group_data = memoryview(await ctx.recv(carrier[my_group], 2, size))
    ctx.step = "phase 3-4: routers and hosts"
    recvbuf[:] = await _within_group(ctx, h, my_group, rep, group_data, block, 3)
