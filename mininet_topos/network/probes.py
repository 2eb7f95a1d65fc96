"""Reachability and broadcast probes on a running network, from one process.

A packet socket is opened inside every host's namespace; PINGs go from every host to every
other host through the switches' unicast forwarding and the probe answers them on the
destination host's socket, so each pair is checked both ways. The broadcast probe sends one
in-network multicast and counts, per host, how many copies arrived.
"""

from __future__ import annotations

import select
import socket
import time
from collections import Counter
from dataclasses import dataclass, field

from controller import wire
from controller.topology import Topology
from mininet_topos.network import netns


@dataclass
class ReachReport:
    pairs: int = 0
    answered: int = 0
    missing: list[tuple[int, int]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.missing

    def __str__(self) -> str:
        if self.ok:
            return f"reachability: all {self.pairs} host pairs answer ({self.seconds:.1f} s)"
        shown = ", ".join(f"{a}->{b}" for a, b in self.missing[:10])
        return f"reachability: {len(self.missing)} of {self.pairs} pairs unanswered: {shown}"


class HostSockets:
    """A packet socket per host, opened in the host's namespace (needs the host shell pid)."""

    def __init__(self, topo: Topology, pids: dict[int, int]) -> None:
        self.topo = topo
        self.sockets: dict[int, socket.socket] = {}
        for host in topo.hosts:
            sock = netns.packet_socket(pids[host.node_id], f"{host.name}-eth0", wire.ETHERTYPE_COLL)
            sock.setblocking(False)
            self.sockets[host.node_id] = sock
        self.by_fd = {s.fileno(): n for n, s in self.sockets.items()}

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()

    def send(
        self, node: int, hdr: wire.Header, payload: bytes = b"", dst_mac: bytes = b"\xff" * 6
    ) -> None:
        mac = wire.mac_bytes(wire.host_mac(node))
        self.sockets[node].send(wire.build_frame(hdr, payload, dst_mac=dst_mac, src_mac=mac))

    def receive(self, timeout: float) -> list[tuple[int, wire.Frame]]:
        """Every frame that arrives within ``timeout`` (returns early once something came)."""
        readable, _, _ = select.select(list(self.sockets.values()), [], [], timeout)
        out = []
        for sock in readable:
            node = self.by_fd[sock.fileno()]
            while True:
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    break
                try:
                    out.append((node, wire.parse_frame(data)))
                except wire.WireError:
                    continue
        return out


def reachability(
    sockets: HostSockets, *, rounds: int = 4, window: int = 64, timeout: float = 60.0
) -> ReachReport:
    """PING every ordered host pair; PONGs come back the same way through the switches."""
    topo = sockets.topo
    nodes = [h.node_id for h in topo.hosts]
    pending = {(a, b) for a in nodes for b in nodes if a != b}
    report = ReachReport(pairs=len(pending))
    started = time.monotonic()
    deadline = started + timeout
    for attempt in range(rounds):
        queue = sorted(pending)
        outstanding: set[tuple[int, int]] = set()
        round_end = time.monotonic() + max(2.0, timeout / rounds)
        while (queue or outstanding) and time.monotonic() < min(round_end, deadline):
            while queue and len(outstanding) < window:
                src, dst = queue.pop()
                outstanding.add((src, dst))
                hdr = wire.Header(op=wire.Op.PING, src_node=src, dst_node=dst, seq=attempt)
                sockets.send(src, hdr, dst_mac=wire.mac_bytes(wire.host_mac(dst)))
            for node, frame in sockets.receive(0.2):
                hdr = frame.hdr
                if hdr.op == wire.Op.PING and hdr.dst_node == node:
                    pong = hdr.with_(op=wire.Op.PONG, src_node=node, dst_node=hdr.src_node)
                    sockets.send(node, pong, dst_mac=wire.mac_bytes(wire.host_mac(hdr.src_node)))
                elif hdr.op == wire.Op.PONG and hdr.dst_node == node:
                    pair = (node, hdr.src_node)
                    outstanding.discard(pair)
                    if pair in pending:
                        pending.discard(pair)
                        report.answered += 1
            if not queue and outstanding and time.monotonic() > round_end - 1:
                break
        if not pending:
            break
    report.missing = sorted(pending)
    report.seconds = time.monotonic() - started
    return report


@dataclass
class BroadcastReport:
    root: int
    copies: Counter[int]
    expected: set[int]

    @property
    def ok(self) -> bool:
        return all(self.copies.get(n, 0) == 1 for n in self.expected) and all(
            n in self.expected for n in self.copies
        )

    def __str__(self) -> str:
        if self.ok:
            return (
                f"broadcast from node {self.root}: every one of {len(self.expected)} hosts "
                "got exactly one copy"
            )
        wrong = {
            n: self.copies.get(n, 0)
            for n in self.expected | set(self.copies)
            if self.copies.get(n, 0) != (1 if n in self.expected else 0)
        }
        return f"broadcast from node {self.root}: wrong copy counts {wrong}"


def one_broadcast(
    sockets: HostSockets,
    comm_id: int,
    root: int,
    members: tuple[int, ...],
    *,
    quiet: float = 1.0,
    timeout: float = 10.0,
) -> BroadcastReport:
    """One in-network multicast along the innet tree of (comm_id, root)."""
    hdr = wire.Header(
        op=wire.Op.MCAST,
        comm_id=comm_id,
        epoch=1,
        root_node=root,
        src_node=root,
        seg_count=1,
        msg_len=5,
    )
    sockets.send(root, hdr, b"smoke")
    expected = set(members) - {root}
    copies: Counter[int] = Counter()
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    while time.monotonic() < deadline:
        frames = sockets.receive(0.1)
        for node, frame in frames:
            if (
                frame.hdr.op == wire.Op.MCAST
                and frame.hdr.comm_id == comm_id
                and frame.hdr.root_node == root
            ):
                copies[node] += 1
                last = time.monotonic()
        if sum(copies.values()) >= len(expected) and time.monotonic() - last > quiet:
            break  # everyone has one; waited long enough to see duplicates
    return BroadcastReport(root, copies, expected)
