"""The host side of the simulation: every host's endpoint over one shared ns-3 network.

A :class:`HostEndpoint` sends and receives *messages* named by keys (a unicast by its sender,
communicator, epoch and tag; a multicast by its root, communicator, epoch and tree) and arrives
at switch barriers, as the real agent's engine does; :class:`mininet_topos.ns3sim.context.
SimContext` puts the collective context on top. Sends complete as the engine's do: a unicast
when the receiver's ACK of its last segment is back at the sender, an acknowledged multicast
when its last segment went out (its receivers' ACKs pace the root's window meanwhile); the
ACKs are frames on the simulated links (``netcoll_sim.cc``). The network is lossless unless a
switch queue overflows (then the messages that lost a packet never complete and the run stops
naming the drops), so there are no retransmissions or repairs. Payload bytes travel beside
ns-3, which carries their size: a receiver gets a message's bytes when its last segment
arrives.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller import trees, wire
from host_agents.directory import Directory
from host_agents.engine import EngineError, SizeMismatch
from host_agents.plans import McastPlan, PlanBook
from host_agents.reduction import reduce_all
from mininet_topos.ns3sim.network import SimNetwork

RELEASE_FLAG = 1 << 47
REDUCE_FLAG = 1 << 46  # a reduction chunk's key, apart from every barrier key (32 bits)
SENT_FLAG = 1 << 45  # a completion of the sender's send, not of a receiver's message
HOST_SHIFT = 48
MESSAGE_MASK = (1 << HOST_SHIFT) - 1
TREE_KINDS = {
    wire.Tree.INNET: trees.TREE_INNET,
    wire.Tree.RAGASA_SPREAD: trees.TREE_RAGASA_SPREAD,
    wire.Tree.RAGASA_GROUP: trees.TREE_RAGASA_GROUP,
}
PLAN_COMM = 1  # the one communicator the ACK plans are drawn for
MessageKey = tuple[Any, ...]


class SimIncoming:
    """A message a host waits for: ``done`` resolves to its bytes when the last segment lands."""

    __slots__ = ("data", "done", "key", "n_received", "seg_count", "size")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, key: MessageKey, size: int, segment: int
    ) -> None:
        self.key = key
        self.size = size
        self.seg_count = max(1, -(-size // segment))
        self.n_received = 0
        self.data: bytes | memoryview = b""
        self.done: asyncio.Future[bytes | memoryview] = loop.create_future()

    def arrive(self, data: bytes | memoryview) -> None:
        # handed over as they are, without a copy: the algorithms only copy out of it
        self.data = data
        self.n_received = self.seg_count
        if not self.done.done():
            self.done.set_result(self.data)


@dataclass(slots=True)
class _Message:
    key: MessageKey
    data: bytes | None  # None in a hollow run: only the size travels
    size: int
    receivers: int  # completions still to come
    sent: asyncio.Future[None] | None
    sending: bool = True  # the sender's send has not completed


@dataclass(slots=True)
class Traffic:
    """What the algorithms asked the network to carry, for the link-byte prediction."""

    unicasts: Counter[tuple[int, int, int]] = field(default_factory=Counter)  # (src, dst, bytes)
    multicasts: Counter[tuple[str, int, int]] = field(default_factory=Counter)  # (kind, root, B)
    barriers: int = 0
    reductions: Counter[int] = field(default_factory=Counter)  # chunk bytes -> contributions

    def clear(self) -> None:
        self.unicasts.clear()
        self.multicasts.clear()
        self.barriers = 0
        self.reductions.clear()


@dataclass(slots=True)
class _SharedReduction:
    """Every rank's contribution to one in-network reduction. The routers merge only sizes,
    so the values are combined here, once, by the first rank whose last chunk's result came
    down (every rank's every chunk had reached the root router by then)."""

    parts: dict[int, bytes] = field(default_factory=dict)  # rank -> its vector
    result: bytes | None = None
    taken: int = 0


class Transport:
    """Every host's endpoint, the message registry and the hand-over of completions."""

    def __init__(self, net: SimNetwork, loop: asyncio.AbstractEventLoop) -> None:
        self.net = net
        self.sim = net.sim
        self.loop = loop
        self.endpoints: dict[int, HostEndpoint] = {}
        self.by_index: dict[int, HostEndpoint] = {}
        self.messages: dict[int, _Message] = {}
        self.next_id = 1
        self.members: tuple[int, ...] = ()
        self.traffic = Traffic()
        self.tree_cache: dict[tuple[str, int], trees.Tree] = {}
        self.hollow = False  # payloads not carried (see Simulation.hollow)
        self._zeros: dict[int, memoryview] = {}
        self._reductions: dict[tuple[int, int], _SharedReduction] = {}
        self._plans: PlanBook | None = None

    def endpoint(self, node: int) -> HostEndpoint:
        if node not in self.endpoints:
            endpoint = HostEndpoint(self, node)
            self.endpoints[node] = endpoint
            self.by_index[self.net.host_index[node]] = endpoint
        return self.endpoints[node]

    # -- sending ------------------------------------------------------------------------------

    def send(
        self,
        src: int,
        dst_address: int,
        key: MessageKey,
        data: bytes | None,
        size: int,
        receivers: int,
        sent: asyncio.Future[None] | None,
        acked: bool = True,
    ) -> None:
        """``acked``: a multicast its receivers acknowledge (not a published one)."""
        msg_id = self.next_id
        self.next_id += 1
        if receivers == 0:
            if sent is not None and not sent.done():
                sent.set_result(None)
            return
        self.messages[msg_id] = _Message(key, data, size, receivers, sent)
        self.sim.Send(self.net.host_index[src], dst_address, msg_id, size, acked)

    def zeros(self, size: int) -> memoryview:
        """What a hollow message delivers: one shared zero-filled view per size (a view, so
        that slicing it, as the algorithms do, copies nothing)."""
        out = self._zeros.get(size)
        if out is None:
            out = self._zeros[size] = memoryview(bytes(size))
        return out

    def tree(self, kind: str, root: int) -> trees.Tree:
        """The controller's tree of ``kind`` from ``root`` over the communicator, installed in
        the ns-3 routers on first use."""
        cached = self.tree_cache.get((kind, root))
        if cached is not None:
            return cached
        topo, members = self.net.topo, self.members
        if kind == trees.TREE_INNET:
            tree = trees.innet_tree(topo, members, root)
        elif kind == trees.TREE_RAGASA_GROUP:
            tree = trees.ragasa_group_tree(topo, members, root)
        else:
            tree = trees.ragasa_trees(topo, members, root).spread
        self.net.install_tree(tree)
        self.net.install_ack_plan(tree, self._plan(kind, root))
        self.tree_cache[(kind, root)] = tree
        return tree

    def _plan(self, kind: str, root: int) -> McastPlan:
        """The engine's ACK plan of ``root``'s multicasts on a ``kind`` tree (co-roots)."""
        if self._plans is None:
            directory = Directory.from_topology(self.net.topo)
            directory.comms[PLAN_COMM] = self.members
            self._plans = PlanBook(directory)
        tree = next(t for t, k in TREE_KINDS.items() if k == kind)
        return self._plans(PLAN_COMM, root, tree)

    # -- in-network reductions ----------------------------------------------------------------

    def contribute(self, comm: int, epoch: int, rank: int, data: bytes) -> None:
        """Rank ``rank``'s vector for reduction ``epoch`` of ``comm``."""
        shared = self._reductions.setdefault((comm, epoch), _SharedReduction())
        shared.parts[rank] = data

    def reduction_result(self, comm: int, epoch: int, op: wire.AggOp, ranks: int) -> bytes:
        """The combined vector, for a rank whose every chunk's result has come down."""
        shared = self._reductions[(comm, epoch)]
        if shared.result is None:
            if len(shared.parts) != ranks:  # the routers released what not all contributed
                missing = sorted(set(range(ranks)) - set(shared.parts))
                raise EngineError(f"reduction {epoch}: no contribution from ranks {missing[:8]}")
            shared.result = reduce_all([shared.parts[r] for r in range(ranks)], op)
        shared.taken += 1
        if shared.taken == ranks:
            del self._reductions[(comm, epoch)]
        return shared.result

    # -- completions --------------------------------------------------------------------------

    def deliver(self) -> None:
        """Hand every message completed since the last call to its receiver."""
        for value in self.sim.TakeDone():
            value = int(value)
            host, msg_id = value >> HOST_SHIFT, value & MESSAGE_MASK
            engine = self.by_index[host]
            if msg_id & RELEASE_FLAG:
                engine.released(msg_id & ~RELEASE_FLAG)
                continue
            if msg_id & SENT_FLAG:
                msg_id &= ~SENT_FLAG
                msg = self.messages[msg_id]
                msg.sending = False
                if msg.sent is not None and not msg.sent.done():
                    msg.sent.set_result(None)
            else:
                msg = self.messages[msg_id]
                engine.arrived(msg.key, msg.data if msg.data is not None else self.zeros(msg.size))
                msg.receivers -= 1
            if msg.receivers == 0 and not msg.sending:
                del self.messages[msg_id]

    def lost(self) -> str:
        """With the network idle: why messages still owed to receivers never arrive, or ''."""
        if not self.messages:
            return ""
        drops, unrouted = self.net.drops(), self.net.unrouted()
        if drops:
            why = (
                f"{drops} packets were dropped by full switch queues "
                f"(--switch-queue {self.net.params.switch_queue} packets; raise it)"
            )
        elif unrouted:
            why = f"{unrouted} packets found no route or tree entry, so a route or tree is wrong"
        else:
            why = "no packet was dropped, so a route or tree is wrong"
        return f"{len(self.messages)} messages can no longer arrive: {why}"

    def reset(self) -> None:
        """Forget everything in flight after a failed collective (the network is idle)."""
        self.messages.clear()
        self._reductions.clear()
        self.sim.ForgetTraffic()
        for engine in self.endpoints.values():
            engine.mailbox.clear()
            engine.barrier_waits.clear()

    def waiting(self) -> str:
        """Who waits for what, for a stall report."""
        parts = []
        for node, engine in self.endpoints.items():
            keys = [k for k, m in engine.mailbox.items() if not m.done.done()]
            if keys or engine.barrier_waits:
                parts.append(f"node {node} waits for {keys[:2] or list(engine.barrier_waits)[:2]}")
            if len(parts) == 4:
                break
        drops = self.net.drops()
        hint = (
            f"; {drops} packets were dropped by full switch queues (raise --switch-queue)"
            if drops
            else ""
        )
        return ", ".join(parts) + hint


def barrier_key(comm: int, epoch: int) -> int:
    return ((comm & 0xFFFF) << 16) | (epoch & 0xFFFF)


def reduce_key(comm: int, epoch: int, chunk: int) -> int:
    """One chunk of an in-network reduction, as the simulated routers merge it."""
    return REDUCE_FLAG | ((comm & 0xFFFF) << 32) | ((epoch & 0xFFFF) << 16) | (chunk & 0xFFFF)


class HostEndpoint:
    """One host's messages and barrier arrivals (what the real agent's engine does for it)."""

    def __init__(self, transport: Transport, node: int) -> None:
        self.transport = transport
        self.node = node
        self.index = transport.net.host_index[node]
        self.segment = transport.net.params.segment
        self.loop = transport.loop
        self.mailbox: dict[MessageKey, SimIncoming] = {}
        self.barrier_waits: dict[int, asyncio.Future[None]] = {}

    # -- sending --------------------------------------------------------------------------

    def send(self, dst: int, key: MessageKey, data: Any) -> asyncio.Future[None]:
        sent: asyncio.Future[None] = self.loop.create_future()
        if not isinstance(data, SimIncoming):  # the common case, without a closure per message
            self._unicast(dst, key, *self._payload(data), sent)
            return sent

        def go(payload: bytes | None, size: int) -> None:
            self._unicast(dst, key, payload, size, sent)

        self._when_ready(data, go, sent)
        return sent

    def _unicast(
        self,
        dst: int,
        key: MessageKey,
        payload: bytes | None,
        size: int,
        sent: asyncio.Future[None],
    ) -> None:
        transport = self.transport
        transport.traffic.unicasts[(self.node, dst, size)] += 1
        transport.send(self.node, transport.net.host_addr[dst], key, payload, size, 1, sent)

    def multicast(
        self, tree: int, key: MessageKey, data: Any, *, acked: bool = True
    ) -> asyncio.Future[None]:
        """``acked``: receivers ACK it (else it is published: no ACKs, no window)."""
        sent: asyncio.Future[None] = self.loop.create_future()
        kind = TREE_KINDS[wire.Tree(tree)]
        transport = self.transport

        def go(payload: bytes | None, size: int) -> None:
            routed = transport.tree(kind, self.node)
            receivers = len(routed.expected_hosts())
            transport.traffic.multicasts[(kind, self.node, size)] += 1
            address = transport.net.group_address(kind, self.node)
            transport.send(self.node, address, key, payload, size, receivers, sent, acked)

        self._when_ready(data, go, sent)
        return sent

    def arrive(self, key: int) -> asyncio.Future[None]:
        """One ARRIVE to this host's switch; done when the RELEASE comes back."""
        fut: asyncio.Future[None] = self.loop.create_future()
        self.barrier_waits[key] = fut
        self.transport.traffic.barriers += 1
        self.transport.sim.Arrive(self.index, key)
        return fut

    def contribute(self, key: int, nbytes: int) -> asyncio.Future[None]:
        """One reduction chunk of ``nbytes`` to this host's switch (``key`` from
        :func:`reduce_key`); done when the chunk's result comes back down."""
        fut: asyncio.Future[None] = self.loop.create_future()
        self.barrier_waits[key] = fut
        self.transport.traffic.reductions[nbytes] += 1
        self.transport.sim.Contribute(self.index, key, nbytes)
        return fut

    # -- receiving ------------------------------------------------------------------------

    def expect(self, key: MessageKey, size: int, peer: int) -> SimIncoming:
        msg = self.mailbox.get(key)
        if msg is None:
            msg = SimIncoming(self.loop, key, size, self.segment)
            self.mailbox[key] = msg
        elif msg.done.done() and msg.size != size:
            raise SizeMismatch(peer, f"message {key}", size, msg.size)
        return msg

    def consume(self, msg: SimIncoming) -> None:
        self.mailbox.pop(msg.key, None)

    def arrived(self, key: MessageKey, data: bytes | memoryview) -> None:
        msg = self.mailbox.get(key)
        if msg is None:  # before the receiver asked: keep it until it does
            msg = SimIncoming(self.loop, key, len(data), self.segment)
            self.mailbox[key] = msg
        elif msg.size != len(data):
            if not msg.done.done():
                msg.done.set_exception(SizeMismatch(key[1], f"message {key}", msg.size, len(data)))
            return
        msg.arrive(data)

    def released(self, key: int) -> None:
        fut = self.barrier_waits.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    # -- internals ------------------------------------------------------------------------

    def _when_ready(
        self, data: Any, go: Callable[[bytes | None, int], None], sent: asyncio.Future[None]
    ) -> None:
        """Send ``data`` now, or, when it is a message still arriving here (a relay), once it
        has arrived: store and forward, where the real engine forwards segment by segment."""
        hollow = self.transport.hollow
        if isinstance(data, SimIncoming):
            if data.done.done():
                go(None if hollow else bytes(data.data), data.size)
                return

            def later(done: asyncio.Future[bytes | memoryview]) -> None:
                if done.cancelled() or done.exception() is not None:
                    if not sent.done():
                        sent.set_exception(EngineError("the relayed message never arrived"))
                    return
                go(None if hollow else bytes(done.result()), data.size)

            data.done.add_done_callback(later)
            return
        go(*self._payload(data))

    def _payload(self, data: Any) -> tuple[bytes | None, int]:
        """What travels for ``data`` here (nothing in a hollow run) and its size."""
        if self.transport.hollow:
            return None, memoryview(data).nbytes
        payload = bytes(data)
        return payload, len(payload)
