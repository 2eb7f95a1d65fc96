"""Host-side settings of a network's interfaces and ports: MTU, IPv6 off, whether a control port
is free, and the agents' windows for the links' frame size."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

from controller.topology import Topology
from host_agents.comm import CommOptions
from host_agents.engine import EngineConfig

# the engine's and the communicator's timers, all in seconds: stretched together on slow links
ENGINE_TIMERS = (
    "rto_initial",
    "rto_min",
    "rto_max",
    "merged_rto_max",
    "ack_delay",
    "nack_delay",
    "tail_delay",
    "repair_quiet_min",
    "coroot_probe_delay",
    "peer_timeout",
    "resend_ask_delay",
    # a barrier nobody waits on: its ranks arrive as their data's repairs end
    "barrier_patient_rto",
    "early_idle_timeout",
    "early_complete_timeout",
    "comm_linger",
    "stamp_unit",  # so the root's send stamps span its longer round trips (transport/stamps.py)
)
# timers that wait for control frames (ARRIVE, RELEASE, REDUCE, RESULT): the control scale
CONTROL_TIMERS = (
    "barrier_echo_rto",
    "barrier_rto",
    "barrier_stagger",
    "barrier_rto_max",
    "reduce_rto_max",
    "reduce_stagger",
)
COMM_TIMERS = ("progress_timeout", "first_data_timeout", "op_timeout")


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def disable_ipv6(intf: str) -> None:
    path = Path(f"/proc/sys/net/ipv6/conf/{intf}/disable_ipv6")
    if path.exists():
        path.write_text("1")


def windows_for(segment_size: int) -> dict[str, float | int]:
    """EngineConfig windows that keep as many bytes in flight as the defaults do at 1500-byte
    frames: BMv2 reads each port through a socket buffer that overflows under larger bursts
    (transport/config.py), and at 9000-byte frames the default 32-segment multicast window is
    six times the bytes (a 1 MiB broadcast on Df(2,4,2) stalled)."""
    base = EngineConfig()
    scale = min(1.0, base.segment_size / segment_size)
    return {
        "message_window": max(4, int(base.message_window * scale)),
        "mcast_window": max(4, int(base.mcast_window * scale)),
        "cwnd_initial": max(2.0, base.cwnd_initial * scale),
        "cwnd_max": max(4.0, base.cwnd_max * scale),
        # ACKs (and switch-merged checkpoints) at least twice per window, or the root stalls
        "ack_every": max(2, int(base.ack_every * scale)),
    }


def timers_for(
    scale: float, control_scale: float = 1.0
) -> tuple[dict[str, float], dict[str, float]]:
    """The engine's and the communicator's timers stretched by ``scale``, the barriers' and
    reductions' by ``control_scale`` (links/timing.py); nothing for the unshaped default."""
    if scale <= 1.0 and control_scale <= 1.0:
        return {}, {}
    engine, comm = EngineConfig(), CommOptions()
    return (
        {name: getattr(engine, name) * scale for name in ENGINE_TIMERS}
        | {name: getattr(engine, name) * control_scale for name in CONTROL_TIMERS},
        {name: getattr(comm, name) * scale for name in COMM_TIMERS},
    )


def set_mtu(intf: str, mtu: int) -> None:
    subprocess.run(["ip", "link", "set", "dev", intf, "mtu", str(mtu)], check=True)


def configure_interfaces(
    mininet: Any, topo: Topology, root_nodes: list[Any], run_dir: Path, mtu: int
) -> None:
    """IPv6 off everywhere we created interfaces; static ARP so IPv4 needs no broadcast; the
    links' MTU on every interface (hosts in their namespaces, ``root_nodes`` in the root one)."""
    arp_lines = [
        f"neigh replace {h.ip} lladdr {h.mac} dev {{intf}} nud permanent" for h in topo.hosts
    ]
    for host in topo.hosts:
        node = mininet.get(host.name)
        node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        batch = run_dir / f"arp-{host.name}"
        intf = f"{host.name}-eth0"
        batch.write_text("\n".join(line.format(intf=intf) for line in arp_lines) + "\n")
        node.cmd(f"ip -batch {batch}")
        node.cmd(f"ip link set dev {intf} mtu {mtu}")
    for node in root_nodes:
        for intf in node.intfList():
            if intf.name != "lo":
                disable_ipv6(intf.name)
                set_mtu(intf.name, mtu)


def raise_socket_buffer_limits(nbytes: int) -> None:
    """Let unprivileged agents have the socket buffers root ones force: without
    CAP_NET_ADMIN a buffer is capped at net.core.rmem_max / wmem_max (208 KiB by default,
    about 23 jumbo frames, which a 72-way burst overflows). Only ever raised."""
    for name in ("rmem_max", "wmem_max"):
        path = Path(f"/proc/sys/net/core/{name}")
        try:
            if int(path.read_text()) < nbytes:
                path.write_text(str(nbytes))
        except (OSError, ValueError):
            pass  # not root, or no such setting: agents keep what they can get
