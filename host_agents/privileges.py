"""Agents run unprivileged: one uid per host, with only the capability a raw socket needs.

Mininet hosts share the machine's PID and mount namespaces, so an agent running as root could
``setns()`` into the control plane's network namespace and be taken for the operator, enter
another host's and act as that host, read other agents' memory, or kill the controller (issue
32, High 3). The launcher therefore starts each agent through ``setpriv`` as uid/gid
``AGENT_UID_BASE + node``, no supplementary groups, and every capability dropped except
CAP_NET_RAW (inheritable, ambient and bounding: the raw socket on the host's interface), with
no_new_privs. Such a process cannot enter another namespace (CAP_SYS_ADMIN), signal or trace
processes of other uids (the controller, other agents), nor regain privileges; its only way
to the control plane is the communicator service's socket, where the kernel names its network
namespace and so its host (``controller/callers.py``).

What the agent writes is its per-node directory under the run (owned by its uid); everything
else it reads (code, topology, workload) is world-readable. Not root (a developer's own run),
the agents already run unprivileged and nothing is added.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

AGENT_UID_BASE = 200_000  # far above any account a distribution creates
CAPABILITY = "net_raw"


def agent_uid(node: int) -> int:
    return AGENT_UID_BASE + node


def dropping(node: int) -> list[str]:
    """The argv prefix that runs a command as ``node``'s unprivileged agent (empty when this
    process is not root: it has no privileges to drop)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise RuntimeError(
            "setpriv (util-linux) is needed to run agents unprivileged; refusing to run them "
            "as root (docs/protocol.md, threat model)"
        )
    uid = agent_uid(node)
    caps = f"-all,+{CAPABILITY}"
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        f"--inh-caps={caps}",
        f"--ambient-caps={caps}",
        f"--bounding-set={caps}",
        "--no-new-privs",
        "--",
    ]


def own_directory(path: Path, node: int) -> Path:
    """``path`` made, and owned by ``node``'s agent when this process may change owners."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, agent_uid(node), agent_uid(node))
        path.chmod(0o755)
    return path
