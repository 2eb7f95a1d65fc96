"""Seeded link faults in user space: loss (independent or bursty), duplication, reordering,
delay and link flaps on emulated links.

netem is the usual tool, but it is not in every kernel (this project's CI kernel lacks it)
and before Linux 6.5 it cannot be seeded. With faults enabled, every emulated link a--b is
built as a--relay--b: a root-namespace node with one interface per link end, and this process
forwards frames between the two ends of each link, deciding each frame's fate from a random
generator seeded with (seed, link, direction), so the sequence of decisions is reproducible.
The fault models are in linkfaults.py.

It stays out of the way of what it emulates: frames are read in place from a memory-mapped
receive ring per interface (no receive system call, no allocation per frame), unimpaired
links skip the fault models, the process sleeps in epoll between bursts, and it runs at a
real-time priority (as root) so a frame does not wait for a busy core.
``python -m mininet_topos.links.linkemu_rate`` measures its rate and CPU cost.

The process listens on a unix socket for JSON commands, one per line:
    {"op": "set", "faults": {"loss": 0.02, ...}, "links": ["ncs0:3-ncs1:3", ...]}   (links optional)
    {"op": "stats"}
and answers one JSON line. Settings take effect at once; a flap's ``down_after`` counts from
the moment of the "set".

    python -m mininet_topos.links.linkemu --config links.json --control emu.sock
"""

from __future__ import annotations

import argparse
import heapq
import json
import mmap
import os
import select
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mininet_topos.links.linkfaults import Impairment, LinkFaults

__all__ = ["EmulatorClient", "Impairment", "LinkEmulator", "LinkSpec"]

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
PACKET_QDISC_BYPASS = 20
PACKET_IGNORE_OUTGOING = 23
TPACKET_V2 = 1
TP_STATUS_USER = 1
# struct tpacket2_hdr: tp_status, tp_len, tp_snaplen, tp_mac (then fields we do not read)
RING_HEADER = struct.Struct("=IIIH")
RING_STATUS = struct.Struct("=I")
PAGE = mmap.PAGESIZE
REALTIME_PRIORITY = 10  # SCHED_FIFO, low among real-time tasks: above every normal process


@dataclass(slots=True)
class LinkSpec:
    name: str  # "ncs0:3-ncs1:3" or "nch1-ncs0:1"
    end_a: str  # relay-side interface facing the first node
    end_b: str  # relay-side interface facing the second node
    kind: str = "local"  # host, local, global, line


class Direction:
    """Frames received on one end of a link, sent out of the other."""

    __slots__ = ("busy_until", "faults", "impaired", "link", "out_sock", "queue_drops", "send")

    def __init__(self, link: str, out_sock: socket.socket, faults: LinkFaults) -> None:
        self.link = link
        self.out_sock = out_sock
        self.send = out_sock.send
        self.faults = faults
        self.impaired = faults.impairment.active()
        self.queue_drops = 0  # frames the kernel dropped before we saw them (ring full)
        self.busy_until = 0.0  # when the last frame serialised on this direction is all out

    def departure(self, now: float, length: int) -> float:
        """When a frame of ``length`` bytes arriving at ``now`` has been serialised onto the
        link: after the frames before it, at the link's rate (``now`` without a rate)."""
        rate = self.faults.impairment.rate_mbit
        if not rate:
            return now
        self.busy_until = max(now, self.busy_until) + length * 8 / (rate * 1e6)
        return self.busy_until


class RxRing:
    """A TPACKET_V2 receive ring: the kernel writes frames into shared memory and flips each
    slot's status; we read them in place and hand the slot back, without a system call."""

    def __init__(self, sock: socket.socket, slots: int, mtu: int) -> None:
        # data starts 66 bytes into a slot (header, sockaddr_ll, alignment); room for a
        # VLAN tag too, rounded up to a power of two so slots pack pages exactly
        self.slot_size = 1 << (mtu + 14 + 4 + 80 - 1).bit_length()
        block = max(PAGE, self.slot_size)
        per_block = block // self.slot_size
        blocks = max(1, -(-slots // per_block))
        self.count = blocks * per_block
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        request = struct.pack("IIII", block, blocks, self.slot_size, self.count)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, request)
        self.map = mmap.mmap(sock.fileno(), block * blocks)
        self.view = memoryview(self.map)
        self.head = 0

    def close(self) -> None:
        self.view.release()
        self.map.close()


def _mtu(ifname: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{ifname}/mtu").read_text())
    except (OSError, ValueError):
        return 1500


class LinkEmulator:
    def __init__(
        self,
        links: list[LinkSpec],
        seed: int,
        control: Path | None = None,
        ring_slots: int = 256,
    ) -> None:
        self.seed = seed
        self.links = {spec.name: spec for spec in links}
        self.ring_slots = ring_slots  # 0: plain recv(), one system call per frame
        self.socks: dict[int, socket.socket] = {}
        self.rings: dict[int, RxRing] = {}
        self.route: dict[int, Direction] = {}  # receiving socket fd -> direction to forward
        self.by_link: dict[str, list[Direction]] = {}
        now = time.monotonic()
        for spec in links:
            sock_a, sock_b = self._socket(spec.end_a), self._socket(spec.end_b)
            a_to_b = Direction(spec.name, sock_b, LinkFaults(f"{seed}:{spec.name}:ab", None, now))
            b_to_a = Direction(spec.name, sock_a, LinkFaults(f"{seed}:{spec.name}:ba", None, now))
            self.route[sock_a.fileno()] = a_to_b
            self.route[sock_b.fileno()] = b_to_a
            self.by_link[spec.name] = [a_to_b, b_to_a]
        self.pending: list[tuple[float, int, Direction, bytes]] = []  # release time heap
        self._order = 0
        self.control: socket.socket | None = None
        self.clients: dict[int, socket.socket] = {}
        if control is not None:
            control.unlink(missing_ok=True)
            self.control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.control.bind(str(control))
            self.control.listen(8)
        self.stopping = False
        self.started = now

    def _socket(self, ifname: str) -> socket.socket:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)  # straight to the veth
        if self.ring_slots:
            self.rings[sock.fileno()] = RxRing(sock, self.ring_slots, _mtu(ifname))
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((ifname, ETH_P_ALL))
        sock.setblocking(False)
        self.socks[sock.fileno()] = sock
        return sock

    # -- control ---------------------------------------------------------------------------

    def set_faults(self, impairment: Impairment, links: list[str] | None = None) -> int:
        names = links if links is not None else list(self.by_link)
        unknown = [n for n in names if n not in self.by_link]
        if unknown:
            raise KeyError(f"unknown links {unknown[:3]}")
        now = time.monotonic()
        for name in names:
            for direction in self.by_link[name]:
                direction.faults.apply(impairment, now)
                direction.impaired = impairment.active()
        return len(names)

    COUNTERS = ("forwarded", "lost", "down_lost", "overflow", "duplicated", "reordered")

    def stats(self) -> dict[str, Any]:
        self._collect_queue_drops()
        out: dict[str, Any] = {"links": {}}
        totals = dict.fromkeys((*self.COUNTERS, "queue_drops"), 0)
        for name, directions in self.by_link.items():
            entry: dict[str, Any] = {
                k: sum(getattr(d.faults, k) for d in directions) for k in self.COUNTERS
            }
            entry["queue_drops"] = sum(d.queue_drops for d in directions)
            entry["impairment"] = asdict(directions[0].faults.impairment)
            out["links"][name] = entry
            for k in totals:
                totals[k] += entry[k]
        out["totals"] = totals
        # what the emulator itself costs, so a run can report its load against its rate
        out["cpu_seconds"] = time.process_time()
        out["uptime_seconds"] = time.monotonic() - self.started
        return out

    def _collect_queue_drops(self) -> None:
        """Frames the kernel dropped at a full receive queue: not seeded, so a run that has
        any should say so. Reading the counters resets them, hence the running sums."""
        for fd, sock in self.socks.items():
            if sock.family != socket.AF_PACKET:
                continue
            _, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
            self.route[fd].queue_drops += drops

    def _command(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
            if request.get("op") == "set":
                count = self.set_faults(
                    Impairment(**request.get("faults", {})), request.get("links")
                )
                return {"ok": True, "links": count}
            if request.get("op") == "stats":
                return {"ok": True, **self.stats()}
            if request.get("op") == "stop":
                self.stopping = True
                return {"ok": True}
            return {"ok": False, "error": f"unknown op {request.get('op')!r}"}
        except Exception as exc:
            return {"ok": False, "error": str(exc)}

    # -- forwarding --------------------------------------------------------------------------

    def _impaired(self, direction: Direction, frame: bytes | memoryview, now: float) -> None:
        for delay in direction.faults.fate(now):
            release = direction.departure(now, len(frame)) + delay
            if release > now:
                self._order += 1
                held = bytes(frame)  # the ring slot is handed back before it is sent
                heapq.heappush(self.pending, (release, self._order, direction, held))
            else:
                self._send(direction, frame)

    @staticmethod
    def _send(direction: Direction, frame: bytes | memoryview) -> None:
        try:
            direction.send(frame)
            direction.faults.forwarded += 1
        except OSError:
            direction.faults.lost += 1  # the far end's queue is full: a loss like any other
            direction.faults.overflow += 1

    def run(self) -> None:
        poller = select.epoll()
        for fd in self.socks:
            poller.register(fd, select.EPOLLIN)
        if self.control is not None:
            poller.register(self.control.fileno(), select.EPOLLIN)
        drain = self._drain_ring if self.ring_slots else self._drain_socket
        while not self.stopping:
            if self.pending:
                now = time.monotonic()
                while self.pending and self.pending[0][0] <= now:
                    _, _, direction, frame = heapq.heappop(self.pending)
                    self._send(direction, frame)
            timeout = max(0.0, self.pending[0][0] - time.monotonic()) if self.pending else 1.0
            for fd, _ in poller.poll(timeout):
                if fd in self.route:
                    drain(fd)
                elif self.control is not None and fd == self.control.fileno():
                    client, _ = self.control.accept()
                    self.clients[client.fileno()] = client
                    poller.register(client.fileno(), select.EPOLLIN)
                elif fd in self.clients:
                    self._serve(poller, fd)

    def _drain_ring(self, fd: int) -> None:
        """Forward every frame waiting in ``fd``'s ring, at most one ring's worth."""
        ring, direction = self.rings[fd], self.route[fd]
        view, size, count, head = ring.view, ring.slot_size, ring.count, ring.head
        faults = direction.faults
        now = time.monotonic() if direction.impaired else 0.0
        for _ in range(count):
            offset = head * size
            status, length, snaplen, mac = RING_HEADER.unpack_from(view, offset)
            if not status & TP_STATUS_USER:
                break
            frame = view[offset + mac : offset + mac + snaplen]
            if snaplen < length:  # larger than the interface's MTU allows: cannot pass whole
                faults.lost += 1
                faults.overflow += 1
            elif direction.impaired:
                self._impaired(direction, frame, now)
            else:
                try:
                    direction.send(frame)
                    faults.forwarded += 1
                except OSError:
                    faults.lost += 1
                    faults.overflow += 1
            frame.release()
            RING_STATUS.pack_into(view, offset, 0)  # the slot back to the kernel
            head = head + 1 if head + 1 < count else 0
        ring.head = head

    def _drain_socket(self, fd: int) -> None:
        sock, direction = self.socks[fd], self.route[fd]
        now = time.monotonic()
        for _ in range(256):
            try:
                frame = sock.recv(65536)
            except BlockingIOError:
                return
            if direction.impaired:
                self._impaired(direction, frame, now)
            else:
                self._send(direction, frame)

    def _serve(self, poller: select.epoll, fd: int) -> None:
        client = self.clients[fd]
        data = client.recv(65536)
        if not data:
            poller.unregister(fd)
            client.close()
            del self.clients[fd]
            return
        for line in data.splitlines():
            if line.strip():
                client.sendall(json.dumps(self._command(line)).encode() + b"\n")

    def close(self) -> None:
        for ring in self.rings.values():
            ring.close()
        for sock in self.socks.values():
            sock.close()


class EmulatorClient:
    """Talk to a running emulator over its control socket."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buffer = b""

    def call(self, **request: Any) -> dict[str, Any]:
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("link emulator closed the control connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise RuntimeError(f"link emulator: {reply.get('error')}")
        return reply

    def close(self) -> None:
        self.sock.close()


def raise_priority(realtime: bool) -> str:
    """Keep up with the switches the emulator stands between: a real-time priority, so a
    frame is forwarded as soon as it arrives rather than when a busy core frees up; else, or
    where that is refused, a higher nice value."""
    if os.geteuid() != 0:
        return "normal priority (not root)"
    if realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
            return f"SCHED_FIFO {REALTIME_PRIORITY}"
        except OSError:
            pass
    os.nice(-5)
    return "nice -5"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--config",
        type=Path,
        required=True,
        help="JSON: {seed, faults, links: [{name, end_a, end_b, kind}]}",
    )
    parser.add_argument("--control", type=Path, required=True, help="unix socket for commands")
    parser.add_argument(
        "--ring-slots",
        type=int,
        default=256,
        help="frames each interface's receive ring holds; 0 reads with recv() instead",
    )
    parser.add_argument(
        "--no-realtime", action="store_true", help="nice -5 instead of a real-time priority"
    )
    args = parser.parse_args(argv)
    config = json.loads(args.config.read_text())
    links = [LinkSpec(**link) for link in config["links"]]
    emulator = LinkEmulator(links, int(config.get("seed", 1)), args.control, args.ring_slots)
    if config.get("faults"):
        emulator.set_faults(Impairment(**config["faults"]))
    print(f"link emulator: {len(links)} links, {raise_priority(not args.no_realtime)}", flush=True)
    try:
        emulator.run()
    finally:
        emulator.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
