"""A host's network port: where frames leave and arrive.

Two implementations: :class:`RawSocketPort` (an AF_PACKET socket on the host's interface,
used on Mininet hosts) and the in-process fabric's port (:mod:`tests.fabric`, used by unit
tests). The protocol engine sees only :class:`Port`, so every algorithm runs unchanged on both.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import errno
import logging
import socket
import struct
from collections.abc import Callable

from controller import wire

LOG = logging.getLogger(__name__)

FrameHandler = Callable[[bytes], None]

SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # Linux 4.20+: do not hand our own transmissions back to us
PACKET_STATISTICS = 6  # struct tpacket_stats {packets, drops}; reading it resets both
SOCKET_BUFFER_BYTES = 8 * 1024 * 1024
RECV_BATCH = 256  # frames handled per readiness callback, so sends get their turn


class Port(abc.ABC):
    """Frames in and out of one host. Sending never blocks the event loop."""

    @abc.abstractmethod
    def start(self, loop: asyncio.AbstractEventLoop, on_frame: FrameHandler) -> None:
        """Begin delivering received frames to ``on_frame`` on ``loop``."""

    @abc.abstractmethod
    def send(self, frame: bytes) -> None:
        """Queue a frame for transmission."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @property
    def backlog(self) -> int:
        """Frames accepted by :meth:`send` but not yet handed to the network."""
        return 0

    def receive_drops(self) -> int:
        """Frames that reached this host but were dropped before the agent read them (its
        receive buffer was full), since the port opened."""
        return 0


class RawSocketPort(Port):
    """An AF_PACKET socket bound to one interface and the collective EtherType.

    The kernel filters by EtherType, so the agent never sees IPv4 or ARP traffic. Received
    frames are read in batches when the socket is readable (no polling); transmissions that
    find the socket buffer full wait in a local queue until it drains.
    """

    def __init__(self, ifname: str) -> None:
        self.ifname = ifname
        self._sock = socket.socket(
            socket.AF_PACKET, socket.SOCK_RAW, socket.htons(wire.ETHERTYPE_COLL)
        )
        try:
            self._sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError as exc:  # older kernels: our own frames come back and are ignored by src
            LOG.warning("%s: PACKET_IGNORE_OUTGOING unavailable (%s)", ifname, exc)
        for option, force in (
            (socket.SO_RCVBUF, 33),  # SO_RCVBUFFORCE: as root, above net.core.rmem_max
            (socket.SO_SNDBUF, 32),  # SO_SNDBUFFORCE
        ):
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, force, SOCKET_BUFFER_BYTES)
            except OSError:
                self._sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER_BYTES)
        self._sock.bind((ifname, wire.ETHERTYPE_COLL))
        self._sock.setblocking(False)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_frame: FrameHandler | None = None
        self._pending: collections.deque[bytes] = collections.deque()
        self._writer_armed = False
        self._retry: asyncio.TimerHandle | None = None
        self.send_errors = 0
        self._receive_drops = 0

    def start(self, loop: asyncio.AbstractEventLoop, on_frame: FrameHandler) -> None:
        self._loop = loop
        self._on_frame = on_frame
        loop.add_reader(self._sock.fileno(), self._readable)

    def _readable(self) -> None:
        assert self._on_frame is not None
        for _ in range(RECV_BATCH):
            try:
                frame = self._sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            self._on_frame(frame)

    def send(self, frame: bytes) -> None:
        self._pending.append(frame)
        if len(self._pending) == 1:
            self._flush()

    def _flush(self) -> None:
        """Send what is queued; when the kernel pushes back, wait for the socket to become
        writable, or (out of device buffers, which readiness does not signal) retry shortly."""
        self._retry = None
        while self._pending:
            try:
                self._sock.send(self._pending[0])
            except (BlockingIOError, InterruptedError):
                self._arm_writer()
                return
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    self._disarm_writer()
                    if self._loop is not None and self._retry is None:
                        self._retry = self._loop.call_later(0.002, self._flush)
                    return
                # A frame the kernel refuses outright is lost like a dropped packet; the
                # reliability layer retransmits it.
                self.send_errors += 1
                LOG.warning("%s: send failed: %s", self.ifname, exc)
            self._pending.popleft()
        self._disarm_writer()

    def _arm_writer(self) -> None:
        if not self._writer_armed and self._loop is not None:
            self._loop.add_writer(self._sock.fileno(), self._flush)
            self._writer_armed = True

    def _disarm_writer(self) -> None:
        if self._writer_armed and self._loop is not None:
            self._loop.remove_writer(self._sock.fileno())
            self._writer_armed = False

    @property
    def backlog(self) -> int:
        return len(self._pending)

    def receive_drops(self) -> int:
        if self._sock.fileno() >= 0:
            with contextlib.suppress(OSError):
                stats = self._sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
                self._receive_drops += struct.unpack("=II", stats)[1]
        return self._receive_drops

    def close(self) -> None:
        self.receive_drops()  # the kernel's count goes with the socket
        if self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._disarm_writer()
        if self._retry is not None:
            self._retry.cancel()
        self._sock.close()
