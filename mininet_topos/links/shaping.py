"""Shaped links: a rate, a delay and a queue on both ends of every link, as Mininet's TCLink
gives them.

A rate is the kernel's HTB on the egress of each end (one class at the rate, a packet FIFO
of ``queue`` packets under it), so each direction of a link sends at most ``rate`` Mb/s of
frames (Ethernet header included, as Linux counts) and a frame that finds the queue full is
dropped, or, from a host, held by the agent until the queue has room (a host's own NIC never
drops what its stack sends). A delay is netem under the class where the kernel has netem;
where it does not (this project's CI kernel), the seeded link emulator adds it in the relay
between the two ends (linkemu.py), after the rate, so a frame is serialised, then propagates.

The management link (mini packets from the control plane) stays unshaped: it is not part of
the network the collectives are measured on.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import topology as model
from mininet_topos.links.units import (
    LinkParameterError,
    check_queue,
    check_rate,
    format_delay,
    format_rate,
    parse_delay,
)

HANDLE_ROOT = "5:"
CLASS = "5:1"
HANDLE_LEAF = "10:"
ETHERNET_HEADER = 14
DEFAULT_QUEUE = 1000  # packets per port: Linux's txqueuelen, and TCLink's default limit
GLOBAL = "global"


@dataclass(frozen=True)
class LinkModel:
    """Rates in Mb/s, delays in seconds (one way, per link), queues in packets per port.

    ``rate`` and ``delay`` apply to host and local links; ``global_rate`` and
    ``global_delay`` to global links, and default to them. Nothing given: unshaped links, as
    the functional tests run."""

    rate: float | None = None
    global_rate: float | None = None
    delay: float = 0.0
    global_delay: float | None = None
    queue: int = DEFAULT_QUEUE

    def __post_init__(self) -> None:
        if self.rate is not None:
            check_rate(self.rate, "--rate")
        if self.global_rate is not None:
            check_rate(self.global_rate, "--global-rate")
        parse_delay(self.delay, "--delay")
        if self.global_delay is not None:
            parse_delay(self.global_delay, "--global-delay")
        check_queue(self.queue, "--queue")
        if (self.rate is None) != (self.global_rate is None) and self.rate is None:
            raise LinkParameterError(
                "--global-rate without --rate: give every link a rate (host and local links "
                "with --rate), or none"
            )

    @property
    def shaped(self) -> bool:
        return self.rate is not None

    @property
    def delayed(self) -> bool:
        return self.delay > 0 or bool(self.global_delay)

    def rate_of(self, kind: str) -> float | None:
        """Mb/s of a link of ``kind`` (host, local, global, line), None when unshaped."""
        if kind == GLOBAL and self.global_rate is not None:
            return self.global_rate
        return self.rate

    def delay_of(self, kind: str) -> float:
        if kind == GLOBAL and self.global_delay is not None:
            return self.global_delay
        return self.delay

    def describe(self) -> str:
        """One line for tables and reports: rates, delays and queue of both link classes."""
        if not self.shaped and not self.delayed:
            return "links unshaped"
        local = f"{format_rate(self.rate_of('local'))} {format_delay(self.delay_of('local'))}"
        global_ = f"{format_rate(self.rate_of(GLOBAL))} {format_delay(self.delay_of(GLOBAL))}"
        return f"host/local links {local}, global links {global_}, queue {self.queue} packets"

    def as_dict(self) -> dict[str, Any]:
        return {
            "rate_mbit": self.rate,
            "global_rate_mbit": self.rate_of(GLOBAL),
            "delay_s": self.delay,
            "global_delay_s": self.delay_of(GLOBAL),
            "queue_packets": self.queue,
        }


def transmission_time(frame_bytes: int, mbit: float) -> float:
    """Seconds one frame of ``frame_bytes`` (header included) takes at ``mbit`` Mb/s."""
    return frame_bytes * 8 / (mbit * 1e6)


def tc_commands(
    intf: str, rate: float | None, delay: float, queue: int, mtu: int, netem: bool
) -> list[str]:
    """``tc -batch`` lines that give ``intf``'s egress a rate, a queue and (with ``netem``)
    a delay. Without a rate and without a netem delay: none."""
    frame = mtu + ETHERNET_HEADER
    leaf = f"pfifo limit {queue}"
    if netem and (delay > 0 or rate is not None):
        # netem serialises each frame at the rate too (HTB alone lets a burst through at once)
        serialise = f" rate {rate * 1000:.0f}kbit" if rate is not None else ""
        leaf = f"netem delay {delay * 1e6:.0f}us{serialise} limit {queue}"
    if rate is None:
        return (
            [f"qdisc replace dev {intf} root handle {HANDLE_LEAF} {leaf}"]
            if netem and delay
            else []
        )
    # burst: one frame (HTB still lets about two through at once after an idle spell: the
    # link emulator, or netem, holds each for its serialisation time); quantum: one frame,
    # so HTB serves a class a whole frame at a time at any rate
    return [
        f"qdisc replace dev {intf} root handle {HANDLE_ROOT} htb default 1",
        f"class replace dev {intf} parent {HANDLE_ROOT} classid {CLASS} htb "
        f"rate {rate * 1000:.0f}kbit burst {frame} cburst {frame} quantum {frame}",
        f"qdisc replace dev {intf} parent {CLASS} handle {HANDLE_LEAF} {leaf}",
    ]


@dataclass(frozen=True)
class LinkEnd:
    """One end of a link: the interface whose egress sends one direction of it."""

    node: str  # Mininet node name (nchN, ncsI)
    intf: str
    kind: str  # host, local, global, line
    in_namespace: bool  # a host in its own network namespace; switches are in the root one


def link_ends(topo: model.Topology) -> list[LinkEnd]:
    """Both ends of every host and switch link of ``topo`` (the management link left out)."""
    ends: list[LinkEnd] = []
    for host in topo.hosts:
        switch = topo.switch(host.switch).name
        ends.append(LinkEnd(host.name, f"{host.name}-eth0", "host", True))
        ends.append(LinkEnd(switch, f"{switch}-eth{host.port}", "host", False))
    for link in topo.links:
        a, b = topo.switch(link.a).name, topo.switch(link.b).name
        ends.append(LinkEnd(a, f"{a}-eth{link.a_port}", link.kind, False))
        ends.append(LinkEnd(b, f"{b}-eth{link.b_port}", link.kind, False))
    return ends


class ShapingError(RuntimeError):
    pass


def netem_available() -> bool:
    """Whether this kernel has netem: tried on a throw-away veth pair in the root namespace."""
    name = "ncnetemprobe"
    try:
        subprocess.run(
            ["ip", "link", "add", name, "type", "veth", "peer", "name", name + "1"],
            check=True,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    try:
        probe = subprocess.run(
            ["tc", "qdisc", "add", "dev", name, "root", "netem", "delay", "1ms"],
            capture_output=True,
            timeout=10,
        )
        return probe.returncode == 0
    finally:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["ip", "link", "del", name], capture_output=True, timeout=10)


def batch_by_node(
    ends: Iterable[LinkEnd], links: LinkModel, mtu: int, netem: bool
) -> dict[str | None, list[str]]:
    """``tc -batch`` lines per network namespace: None for the root one (every switch), the
    host's name for each host."""
    out: dict[str | None, list[str]] = {}
    for end in ends:
        lines = tc_commands(
            end.intf, links.rate_of(end.kind), links.delay_of(end.kind), links.queue, mtu, netem
        )
        if lines:
            out.setdefault(end.node if end.in_namespace else None, []).extend(lines)
    return out


def run_batch(lines: list[str], batch_file: Path, runner: Any = None) -> None:
    """Run ``tc -batch`` on ``lines``, in the root namespace or (``runner``: a Mininet node)
    in the node's; a failing line raises :class:`ShapingError` with tc's words."""
    batch_file.write_text("\n".join(lines) + "\n")
    if runner is None:
        done = subprocess.run(
            ["tc", "-batch", str(batch_file)], capture_output=True, text=True, timeout=60
        )
        status, output = done.returncode, done.stdout + done.stderr
    else:
        output = runner.cmd(f"tc -batch {batch_file}; echo tc-status=$?")
        status = int(output.rsplit("tc-status=", 1)[-1].strip() or 1)
    if status != 0:
        raise ShapingError(f"tc -batch {batch_file} failed: {output.strip()[-400:]}")


def unshape(mininet: Any, topo: model.Topology, run_dir: Path) -> None:
    """Every link back to its unshaped default (no qdisc of ours on either end)."""
    by_node: dict[str | None, list[str]] = {}
    for end in link_ends(topo):
        node = end.node if end.in_namespace else None
        by_node.setdefault(node, []).append(f"qdisc del dev {end.intf} root")
    for node, lines in by_node.items():
        batch_file = run_dir / f"tc-{node or 'root'}-unshape.batch"
        run_batch(lines, batch_file, None if node is None else mininet.get(node))


def shape(
    mininet: Any, topo: model.Topology, links: LinkModel, mtu: int, run_dir: Path, netem: bool
) -> int:
    """Give both ends of every link of a built Mininet network its rate, queue and (with
    ``netem``) delay; returns the number of interfaces shaped."""
    batches = batch_by_node(link_ends(topo), links, mtu, netem)
    shaped = 0
    for node, lines in batches.items():
        batch_file = run_dir / f"tc-{node or 'root'}.batch"
        run_batch(lines, batch_file, None if node is None else mininet.get(node))
        shaped += sum(1 for line in lines if line.startswith("qdisc replace") and " root " in line)
    return shaped
