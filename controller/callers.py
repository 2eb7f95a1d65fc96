"""Who is calling the communicator service: an identity taken from the connection itself.

Agents reach the service over a unix socket from their hosts' network namespaces. The kernel
tells the service the connecting process (``SO_PEERCRED``), and the process's network namespace
tells which Mininet host it runs on: that host's node id is the caller, whatever a request's
body says. Processes in the service's own namespace (the launcher, the Mininet CLI, tests) are
the operator, who may do anything, if they run as root or as the service's own user. A process
from any other namespace, or of another user in the service's, is refused.

This holds because no agent can change its network namespace: agents run unprivileged
(``host_agents/privileges.py``: setns needs CAP_SYS_ADMIN, which they do not have).
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_PEERCRED = struct.Struct("3i")  # pid, uid, gid


@dataclass(frozen=True, slots=True)
class Caller:
    node: int | None  # None: the operator

    @property
    def is_operator(self) -> bool:
        return self.node is None

    def __str__(self) -> str:
        return "the operator" if self.node is None else f"node {self.node}"


OPERATOR = Caller(None)
CallerOf = Callable[[int], "Caller | None"]  # pid -> caller, None when not allowed


def peer_pid(sock: socket.socket) -> int:
    """The process at the other end of a connected unix socket."""
    pid, _, _ = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    )
    return int(pid)


def netns_inode(pid: int | str) -> int:
    """The inode naming the network namespace of process ``pid`` ("self" for this one)."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def process_uid(pid: int | str) -> int | None:
    """The effective uid of process ``pid`` (the owner of its /proc entry); None if gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


class NetnsCallers:
    """Callers by network namespace: ``hosts`` maps a namespace inode to a host's node id."""

    def __init__(self, hosts: Mapping[int, int] | None = None) -> None:
        self.hosts = dict(hosts or {})
        self.operator_ns = netns_inode("self")
        self.operator_uids = {0, os.geteuid()}

    @classmethod
    def from_host_pids(cls, pids: Mapping[int, int]) -> NetnsCallers:
        """From node id -> the pid of any process in that host's namespace (Mininet's shell)."""
        return cls({netns_inode(pid): node for node, pid in pids.items()})

    def __call__(self, pid: int) -> Caller | None:
        try:
            ns = netns_inode(pid)
        except OSError:
            return None  # the process is gone already
        if ns == self.operator_ns:
            return OPERATOR if process_uid(pid) in self.operator_uids else None
        node = self.hosts.get(ns)
        return None if node is None else Caller(node)
