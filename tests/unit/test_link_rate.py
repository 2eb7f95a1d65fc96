"""A shaped link sends at its rate: frames offered as fast as a raw socket takes them, on a
veth pair shaped as netcoll shapes every link, arrive at the rate within 10%; half the rate
takes twice the time (iperf-style, in the root namespace; needs root and tc)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from mininet_topos.links.shaping import ShapingError, run_batch, tc_commands

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for veth pairs and qdiscs"),
    pytest.mark.skipif(shutil.which("tc") is None, reason="tc (iproute2) is not installed"),
]

ETHERTYPE = 0x88B5  # local experimental
FRAME = 1514
WARMUP_S = 0.4
MEASURE_S = 1.6


@pytest.fixture
def veth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    a, b = f"ncrt{os.getpid() % 10000}a", f"ncrt{os.getpid() % 10000}b"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    try:
        for intf in (a, b):
            subprocess.run(["ip", "link", "set", intf, "up"], check=True)
        yield a, b
    finally:
        subprocess.run(["ip", "link", "del", a], check=False)


def measured_mbit(sender: str, receiver: str) -> float:
    """Mb/s of frames (header included) arriving while the sender offers all it can."""
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
    rx.bind((receiver, ETHERTYPE))
    rx.settimeout(0.5)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((sender, 0))
    frame = b"\xff" * 6 + b"\x02" + b"\x00" * 5 + ETHERTYPE.to_bytes(2, "big")
    frame += b"\x00" * (FRAME - len(frame))
    stop = threading.Event()

    def offer() -> None:
        while not stop.is_set():  # blocking: the socket's send buffer pushes back
            try:
                tx.send(frame)
            except OSError:  # the queue is full: the frame is dropped, offer the next
                time.sleep(0.0005)

    thread = threading.Thread(target=offer, daemon=True)
    thread.start()
    received = 0
    started = time.monotonic()
    window_start = started + WARMUP_S
    try:
        while (now := time.monotonic()) < window_start + MEASURE_S:
            try:
                n = len(rx.recv(65536))
            except TimeoutError:
                continue
            if now >= window_start:
                received += n
    finally:
        stop.set()
        thread.join(5)
        rx.close()
        tx.close()
    return received * 8 / MEASURE_S / 1e6


def shape(intf: str, mbit: float, tmp: pytest.TempPathFactory) -> None:
    run_batch(tc_commands(intf, mbit, 0.0, 100, 1500, netem=False), tmp.mktemp("tc") / "b")


@pytest.mark.parametrize("mbit", [20.0, 5.0])
def test_a_shaped_link_delivers_at_its_rate(
    veth: tuple[str, str], mbit: float, tmp_path_factory: pytest.TempPathFactory
) -> None:
    a, b = veth
    shape(a, mbit, tmp_path_factory)
    got = measured_mbit(a, b)
    assert got == pytest.approx(mbit, rel=0.10), f"{got:.2f} Mb/s on a {mbit} Mb/s link"


def test_without_shaping_the_same_offer_runs_far_faster(veth: tuple[str, str]) -> None:
    """The contrast: the rate above is the qdisc's doing, not the sender's or receiver's."""
    a, b = veth
    assert measured_mbit(a, b) > 2 * 20.0


def test_a_link_reshaped_to_half_its_rate_delivers_half(
    veth: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What reshaping a running network does to each port (links/bringup.py): HTB refuses to
    change its root in place, so the port's qdisc goes and comes back at the new rate."""
    a, b = veth
    shape(a, 20.0, tmp_path_factory)
    with pytest.raises(ShapingError, match="not supported"):
        shape(a, 10.0, tmp_path_factory)  # in place: what the rate check first tried
    run_batch([f"qdisc del dev {a} root"], tmp_path_factory.mktemp("tc") / "del")
    shape(a, 10.0, tmp_path_factory)
    got = measured_mbit(a, b)
    assert got == pytest.approx(10.0, rel=0.10), f"{got:.2f} Mb/s after reshaping to 10 Mb/s"
