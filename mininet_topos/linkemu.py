"""Seeded link faults in user space: loss, duplication, reordering and delay on emulated links.

netem is the usual tool, but it is not in every kernel (this project's CI kernel lacks it)
and before Linux 6.5 it cannot be seeded. With faults enabled, every emulated link a--b is
built as a--relay--b: a root-namespace node with one interface per link end, and this process
forwards frames between the two ends of each link, deciding each frame's fate from a random
generator seeded with (seed, link, direction), so the sequence of decisions is reproducible.

The process listens on a unix socket for JSON commands, one per line:
    {"op": "set", "faults": {"loss": 0.02, ...}, "links": ["ncs0:3-ncs1:3", ...]}   (links optional)
    {"op": "stats"}
and answers one JSON line.

    python -m mininet_topos.linkemu --config links.json --control emu.sock
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import select
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23


@dataclass(frozen=True, slots=True)
class Impairment:
    loss: float = 0.0  # probability a frame is lost
    duplicate: float = 0.0  # probability a frame is sent twice
    reorder: float = 0.0  # probability a frame is held back so later ones overtake it
    reorder_delay: float = 0.005  # how long a reordered frame is held, seconds
    delay: float = 0.0  # added to every frame, seconds

    def active(self) -> bool:
        return any((self.loss, self.duplicate, self.reorder, self.delay))

    def describe(self) -> str:
        parts = [f"loss {self.loss:.0%}"]
        if self.duplicate:
            parts.append(f"duplicate {self.duplicate:.0%}")
        if self.reorder:
            parts.append(f"reorder {self.reorder:.0%}")
        if self.delay:
            parts.append(f"delay {self.delay * 1e3:.1f} ms")
        return ", ".join(parts)


@dataclass(slots=True)
class LinkSpec:
    name: str  # "ncs0:3-ncs1:3" or "nch1-ncs0:1"
    end_a: str  # relay-side interface facing the first node
    end_b: str  # relay-side interface facing the second node
    kind: str = "local"  # host, local, global, line


@dataclass(slots=True)
class Direction:
    link: str
    out_sock: socket.socket
    rng: random.Random
    impairment: Impairment = field(default_factory=Impairment)
    forwarded: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0


class LinkEmulator:
    def __init__(self, links: list[LinkSpec], seed: int, control: Path | None = None) -> None:
        self.seed = seed
        self.links = {spec.name: spec for spec in links}
        self.socks: dict[int, socket.socket] = {}
        self.route: dict[int, Direction] = {}  # receiving socket fd -> direction to forward
        self.by_link: dict[str, list[Direction]] = {}
        for spec in links:
            sock_a, sock_b = self._socket(spec.end_a), self._socket(spec.end_b)
            a_to_b = Direction(spec.name, sock_b, random.Random(f"{seed}:{spec.name}:ab"))
            b_to_a = Direction(spec.name, sock_a, random.Random(f"{seed}:{spec.name}:ba"))
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

    def _socket(self, ifname: str) -> socket.socket:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
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
        for name in names:
            for direction in self.by_link[name]:
                direction.impairment = impairment
        return len(names)

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"links": {}}
        totals = {"forwarded": 0, "lost": 0, "duplicated": 0, "reordered": 0}
        for name, directions in self.by_link.items():
            entry = {k: sum(getattr(d, k) for d in directions) for k in totals}
            entry["impairment"] = asdict(directions[0].impairment)
            out["links"][name] = entry
            for k in totals:
                totals[k] += entry[k]
        out["totals"] = totals
        return out

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

    def _forward(self, direction: Direction, frame: bytes, now: float) -> None:
        impairment = direction.impairment
        rng = direction.rng
        if impairment.loss and rng.random() < impairment.loss:
            direction.lost += 1
            return
        copies = 1
        if impairment.duplicate and rng.random() < impairment.duplicate:
            copies = 2
            direction.duplicated += 1
        for _ in range(copies):
            delay = impairment.delay
            if impairment.reorder and rng.random() < impairment.reorder:
                delay += rng.uniform(0.2, 1.0) * impairment.reorder_delay
                direction.reordered += 1
            if delay > 0:
                self._order += 1
                heapq.heappush(self.pending, (now + delay, self._order, direction, frame))
            else:
                self._send(direction, frame)

    def _send(self, direction: Direction, frame: bytes) -> None:
        try:
            direction.out_sock.send(frame)
            direction.forwarded += 1
        except OSError:
            direction.lost += 1  # the far end's queue is full: a loss like any other

    def run(self) -> None:
        poller = select.epoll()
        for fd in self.socks:
            poller.register(fd, select.EPOLLIN)
        if self.control is not None:
            poller.register(self.control.fileno(), select.EPOLLIN)
        while not self.stopping:
            now = time.monotonic()
            while self.pending and self.pending[0][0] <= now:
                _, _, direction, frame = heapq.heappop(self.pending)
                self._send(direction, frame)
            timeout = max(0.0, self.pending[0][0] - now) if self.pending else 1.0
            for fd, _ in poller.poll(timeout):
                if self.control is not None and fd == self.control.fileno():
                    client, _ = self.control.accept()
                    self.clients[client.fileno()] = client
                    poller.register(client.fileno(), select.EPOLLIN)
                elif fd in self.clients:
                    self._serve(poller, fd)
                else:
                    self._drain(fd)

    def _drain(self, fd: int) -> None:
        sock, direction = self.socks[fd], self.route[fd]
        now = time.monotonic()
        for _ in range(256):
            try:
                frame = sock.recv(65536)
            except BlockingIOError:
                return
            self._forward(direction, frame, now)

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--config",
        type=Path,
        required=True,
        help="JSON: {seed, links: [{name, end_a, end_b, kind}]}",
    )
    parser.add_argument("--control", type=Path, required=True, help="unix socket for commands")
    args = parser.parse_args(argv)
    config = json.loads(args.config.read_text())
    links = [LinkSpec(**link) for link in config["links"]]
    emulator = LinkEmulator(links, int(config.get("seed", 1)), args.control)
    if config.get("faults"):
        emulator.set_faults(Impairment(**config["faults"]))
    if os.geteuid() == 0:
        os.nice(-5)  # keep up with the switches it stands between
    emulator.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
