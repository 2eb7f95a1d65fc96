"""How fast the link emulator forwards, and what each frame costs it in CPU.

Builds ``--links`` emulated links out of veth pairs in the root namespace (no switches, no
Mininet), starts the emulator between their ends, offers frames at each ``--rates`` value
spread round-robin over the links for ``--seconds``, and prints per rate: frames offered and
forwarded per second, the emulator's CPU (seconds per second, so 1.0 is a whole core) and its
CPU microseconds per forwarded frame. Needs root; everything it creates is recorded, so
``make stop`` removes what an interrupted run left.

    sudo python -m mininet_topos.links.linkemu_rate --links 162 --rates 5000,20000,80000
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mininet_topos.links.linkemu import EmulatorClient, LinkSpec
from mininet_topos.tooling.cleanup import stop_run
from mininet_topos.tooling.registry import RunRegistry

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


PROBE_ETHERTYPE = 0x88B6  # latency probes: the sink's socket receives only these
SO_TIMESTAMPNS = 35


@dataclass
class RateSample:
    offered_per_s: float
    forwarded_per_s: float
    cpu_cores: float  # emulator CPU seconds per wall second
    cpu_us_per_frame: float
    latency_us: tuple[float, float, float]  # one-way through the emulator: median, p99, max

    def __str__(self) -> str:
        median, p99, worst = self.latency_us
        return (
            f"offered {self.offered_per_s:9.0f} frames/s, forwarded {self.forwarded_per_s:9.0f} "
            f"frames/s, emulator CPU {self.cpu_cores:5.2f} cores, "
            f"{self.cpu_us_per_frame:6.1f} us per frame, latency median {median:.0f} us, "
            f"p99 {p99:.0f} us, max {worst:.0f} us"
        )


def process_tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and every live descendant."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
        pending += [int(c) for c in children]
    return total


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def make_links(registry: RunRegistry, count: int) -> list[LinkSpec]:
    """``count`` links a--b, each as two veth pairs: ncqaI--ncqxI and ncqyI--ncqbI; the
    emulator forwards between ncqxI and ncqyI, the generator sends on ncqaI."""
    links = []
    for i in range(count):
        for outer, inner in ((f"ncqa{i}", f"ncqx{i}"), (f"ncqb{i}", f"ncqy{i}")):
            registry.record_link(outer)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            for name in (outer, inner):
                Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6").write_text("1")
                _ip("link", "set", name, "up")
        links.append(LinkSpec(f"q{i}", f"ncqx{i}", f"ncqy{i}", "local"))
    return links


def _receive_probes(sink: socket.socket, delays: list[float]) -> None:
    """One-way delays of the probes waiting at ``sink``, from the kernel's receive stamps."""
    while True:
        try:
            data, ancillary, _, _ = sink.recvmsg(64, 64)
        except BlockingIOError:
            return
        sent_ns = int.from_bytes(data[14:22], "little")
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", value[:16])
                delays.append((sec * 1_000_000_000 + nsec - sent_ns) / 1e3)


def offer(
    count: int, rate: float, seconds: float, size: int, burst: int
) -> tuple[int, list[float]]:
    """Send ``rate`` frames/s of ``size`` bytes for ``seconds``, ``burst`` frames to a link
    at a time, round-robin over the links, and a timestamped probe through the first link
    every 5 ms; returns (frames sent, probe delays in us). Paced by waiting on the sink."""
    socks = []
    for i in range(count):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # receives nothing
        sock.bind((f"ncqa{i}", 0))
        socks.append(sock)
    sink = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(PROBE_ETHERTYPE))
    sink.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sink.bind(("ncqb0", PROBE_ETHERTYPE))
    sink.setblocking(False)
    header = bytes.fromhex("020000000002020000000001")
    frame = header + b"\x88\xb5" + bytes(max(0, size - 14))
    probe_header = header + PROBE_ETHERTYPE.to_bytes(2, "big")
    delays: list[float] = []
    sent = 0
    started = time.monotonic()
    next_probe = started
    link = 0
    try:
        while (now := time.monotonic()) - started < seconds:
            if now >= next_probe:
                socks[0].send(probe_header + time.time_ns().to_bytes(8, "little") + bytes(40))
                next_probe += 0.005
            due = int((now - started) * rate) - sent
            if due <= 0:
                wait = next_probe - now
                if rate:
                    wait = min(wait, (sent + 1) / rate - (now - started))
                select.select([sink], [], [], max(0.0, wait))
                _receive_probes(sink, delays)
                continue
            for _ in range(min(due, 8 * burst) // burst or 1):
                sock = socks[link]
                link = (link + 1) % count
                for _ in range(burst):
                    try:
                        sock.send(frame)
                        sent += 1
                    except OSError:
                        break  # the emulator's side is full: that frame is not offered
            _receive_probes(sink, delays)
        time.sleep(0.05)
        _receive_probes(sink, delays)
    finally:
        for sock in [*socks, sink]:
            sock.close()
    return sent, delays


def measure(
    client: EmulatorClient, pid: int, links: int, rate: float, seconds: float, size: int, burst: int
) -> RateSample:
    forwarded_before = client.call(op="stats")["totals"]["forwarded"]
    cpu_before = process_tree_cpu(pid)
    started = time.monotonic()
    sent, delays = offer(links, rate, seconds, size, burst)
    time.sleep(0.3)  # let the emulator drain what is queued
    wall = time.monotonic() - started
    cpu = process_tree_cpu(pid) - cpu_before
    forwarded = client.call(op="stats")["totals"]["forwarded"] - forwarded_before
    return RateSample(
        offered_per_s=sent / seconds,
        forwarded_per_s=forwarded / seconds,
        cpu_cores=cpu / wall,
        cpu_us_per_frame=cpu / forwarded * 1e6 if forwarded else float("nan"),
        latency_us=_spread(delays),
    )


def _spread(delays: list[float]) -> tuple[float, float, float]:
    if not delays:
        return (float("nan"),) * 3
    ordered = sorted(delays)
    return (
        statistics.median(ordered),
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        ordered[-1],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--links", type=int, default=162, help="162: every link of Df(2,4,2)")
    parser.add_argument("--rates", default="5000,20000,80000", help="offered frames/s, each")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--size", type=int, default=1054, help="frame bytes (a 1 KiB segment)")
    parser.add_argument("--burst", type=int, default=4, help="frames sent to a link in a row")
    parser.add_argument("--repeat", type=int, default=3, help="samples per rate (min/median/max)")
    parser.add_argument(
        "--emulator-args", default="", help="extra arguments for the emulator (e.g. --workers 2)"
    )
    parser.add_argument("--json", type=Path, help="also write the samples here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("error: needs root (veth pairs and raw sockets)", file=sys.stderr)
        return 1
    run_dir = Path(f"/tmp/netcoll-linkemu-rate-{os.getpid()}")
    run_dir.mkdir()
    registry = RunRegistry(f"linkemu-rate-{os.getpid()}")
    registry.record_file(run_dir)
    results: dict[str, list[dict[str, float]]] = {}
    emulator: subprocess.Popen[bytes] | None = None
    try:
        links = make_links(registry, args.links)
        config = run_dir / "links.json"
        config.write_text(json.dumps({"seed": 1, "links": [asdict(s) for s in links]}))
        control = run_dir / "emu.sock"
        emulator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mininet_topos.links.linkemu",
                "--config",
                str(config),
                "--control",
                str(control),
                *args.emulator_args.split(),
            ]
        )
        registry.record_process(emulator.pid, "link emulator")
        deadline = time.monotonic() + 20
        while not control.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        client = EmulatorClient(control)
        print(f"*** {args.links} links, {args.size} B frames, bursts of {args.burst}")
        for rate in (float(r) for r in args.rates.split(",")):
            samples = [
                measure(client, emulator.pid, args.links, rate, args.seconds, args.size, args.burst)
                for _ in range(args.repeat)
            ]
            for sample in samples:
                print(f"  {sample}", flush=True)
            per_frame = sorted(s.cpu_us_per_frame for s in samples)
            latency = sorted(s.latency_us[0] for s in samples)
            forwarded = sorted(s.forwarded_per_s for s in samples)
            print(
                f"  rate {rate:.0f}: forwarded {forwarded[0]:.0f}/"
                f"{statistics.median(forwarded):.0f}/{forwarded[-1]:.0f} frames/s, "
                f"{per_frame[0]:.1f}/{statistics.median(per_frame):.1f}/{per_frame[-1]:.1f} us "
                f"CPU per frame, median latency {latency[0]:.0f}/{statistics.median(latency):.0f}/"
                f"{latency[-1]:.0f} us (min/median/max of {args.repeat})"
            )
            results[str(int(rate))] = [asdict(s) for s in samples]
        client.close()
    finally:
        if emulator is not None:
            emulator.terminate()
            emulator.wait(10)
        registry.detach()
        stop_run(registry.path)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
