"""Named network namespaces with veth pairs, and packet sockets opened inside them.

The single-switch data-plane harness and the fuzzers run a switch in a namespace of its own
so nothing on the machine sees their traffic. Every namespace is recorded in the run
registry before it is created, so ``make stop`` removes it even after a crash.
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading
from collections.abc import Callable
from typing import TypeVar

from mininet_topos.tooling.registry import RunRegistry

CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def run(
    cmd: list[str], *, check: bool = True, timeout: float = 20.0
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed: {result.stderr.strip() or result.stdout.strip()}"
        )
    return result


def create(name: str, registry: RunRegistry) -> None:
    registry.record_netns(name)
    run(["ip", "netns", "add", name])
    in_ns(name, ["ip", "link", "set", "lo", "up"])
    # no IPv6 router solicitations or other kernel chatter on the test ports
    in_ns(name, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"])
    in_ns(name, ["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"])


def delete(name: str) -> None:
    run(["ip", "netns", "del", name], check=False)


def in_ns(name: str, cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(["ip", "netns", "exec", name, *cmd], check=check)


def add_veth(ns: str, a: str, b: str) -> None:
    """A veth pair with both ends inside ``ns``, up, IPv6 off."""
    in_ns(ns, ["ip", "link", "add", a, "type", "veth", "peer", "name", b])
    for intf in (a, b):
        in_ns(ns, ["sysctl", "-q", "-w", f"net.ipv6.conf.{intf}.disable_ipv6=1"], check=False)
        in_ns(ns, ["ip", "link", "set", intf, "up"])


def call_in(ns: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a thread that entered the named namespace ``ns``; sockets it creates
    stay bound to ``ns``."""
    return call_in_path(f"/var/run/netns/{ns}", fn)


def call_in_process_ns(pid: int, fn: Callable[[], T]) -> T:
    """The same, in the network namespace of process ``pid`` (a Mininet host's shell)."""
    return call_in_path(f"/proc/{pid}/ns/net", fn)


def call_in_path(ns_path: str, fn: Callable[[], T]) -> T:
    libc = ctypes.CDLL(None, use_errno=True)
    result: list[T] = []
    error: list[BaseException] = []
    ns = ns_path

    def worker() -> None:
        try:
            fd = os.open(ns_path, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into {ns}: {os.strerror(err)}")
            finally:
                os.close(fd)
            result.append(fn())
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=worker, name=f"netns-{ns}")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def packet_socket(ns: str | int, ifname: str, ethertype: int = 0x0003) -> socket.socket:
    """A raw AF_PACKET socket on ``ifname`` inside ``ns``: a namespace name, or the pid of a
    process in it (all EtherTypes by default)."""

    def make() -> socket.socket:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
        sock.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING: not our own transmissions
        sock.bind((ifname, ethertype))
        return sock

    if isinstance(ns, int):
        return call_in_process_ns(ns, make)
    return call_in(ns, make)
