"""Issue 32, High 3: a host cannot become the operator, another host, or kill the controller.

Really tried: a process is started the way the launcher starts an agent (its argv up to the
agent module: ``Launcher._argv``) in a network namespace of its own that shares this
machine's PID and mount namespaces, as a Mininet host does (``ip netns exec``), and it tries
to ``setns()`` into the control plane's network namespace and into another host's, to signal
and read the controller, and then asks the communicator service something only the operator
may do. Before the fix the agent ran as root and every one of these succeeded.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from controller.callers import NetnsCallers, netns_inode
from controller.service import CommService
from controller.topology_build import dragonfly
from host_agents.launcher import Launcher
from tests.fabric_control import ControlledFabric

pytestmark = [
    pytest.mark.unit,
    pytest.mark.security,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make network namespaces"),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2's ip"),
]

TOPO = dragonfly(2, 2, 1)
HOSTS = [h.node_id for h in TOPO.hosts]
NODE, OTHER = HOSTS[2], HOSTS[7]
NS, OTHER_NS = "netcoll-priv-a", "netcoll-priv-b"

PROBE = r"""
import ctypes, json, os, socket, sys
service_pid, other_ns, sock_path, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
other_node = int(sys.argv[5])
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
tried = {"uid": os.geteuid()}
def attempt(name, action):
    try:
        action()
        tried[name] = "succeeded"
    except OSError as exc:
        tried[name] = f"refused: {exc.strerror}"
def enter(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
    finally:
        os.close(fd)
attempt("raw socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close())
attempt("signal the controller", lambda: os.kill(service_pid, 0))
attempt("read the controller", lambda: open(f"/proc/{service_pid}/environ", "rb").read(1))
attempt("enter another host", lambda: enter(other_ns))
attempt("enter the control plane", lambda: enter(f"/proc/{service_pid}/ns/net"))
s = socket.socket(socket.AF_UNIX)
s.connect(sock_path)
# only the operator may create a communicator this node is not in
s.sendall(json.dumps({"id": 1, "op": "create", "members": [other_node]}).encode() + b"\n")
tried["service"] = json.loads(s.makefile().readline())
open(out, "w").write(json.dumps(tried))
"""


def test_an_agent_cannot_setns_signal_or_pass_for_the_operator() -> None:
    for ns in (NS, OTHER_NS):
        subprocess.run(["ip", "netns", "add", ns], check=True, timeout=10)
    # pytest's own temporary directories are private to root: the agent could not reach the
    # service's socket there, as it can in a real run's state directory
    tmp_path = Path(tempfile.mkdtemp(prefix="netcoll-priv-"))
    try:
        sock = tmp_path / "service.sock"
        run = tmp_path / "run"
        run.mkdir()
        tmp_path.chmod(0o755)
        launcher = Launcher(
            lambda node, argv: subprocess.Popen(argv),
            topology_file=tmp_path / "topology.json",
            service=sock,
            run_dir=tmp_path,
            interfaces={NODE: "eth0"},
        )
        argv = launcher._argv(NODE, run)
        agent_at = argv.index("host_agents.agent") - 2  # [..., python, -m, host_agents.agent]
        out = run / "results" / str(NODE) / "probe.json"
        out.parent.mkdir(parents=True, exist_ok=True)  # the launcher gave it to the agent
        probe = [
            *argv[:agent_at],
            sys.executable,
            "-c",
            PROBE,
            str(os.getpid()),
            f"/run/netns/{OTHER_NS}",
            str(sock),
            str(out),
            str(OTHER),
        ]

        async def main() -> None:
            net = ControlledFabric(TOPO, asyncio.get_running_loop())
            await net.control.start(10)
            host_ns = os.stat(f"/run/netns/{NS}").st_ino
            service = CommService(net.control, sock, callers=NetnsCallers({host_ns: NODE}))
            await service.start()
            try:
                proc = await asyncio.create_subprocess_exec(
                    "ip", "netns", "exec", NS, *probe, cwd=str(Path(__file__).parents[2])
                )
                assert await asyncio.wait_for(proc.wait(), 60) == 0
                assert not net.control.comms, "the host created a communicator it is not in"
            finally:
                await service.stop()
                await net.control.stop()

        asyncio.run(main())
        tried = json.loads(out.read_text())
        assert netns_inode("self") != os.stat(f"/run/netns/{NS}").st_ino
        assert tried["raw socket"] == "succeeded", tried  # what an agent needs still works
        for attack in (
            "enter the control plane",
            "enter another host",
            "signal the controller",
            "read the controller",
        ):
            assert tried[attack].startswith("refused"), (attack, tried)
        assert tried["uid"] != 0, tried
        reply = tried["service"]
        assert not reply["ok"] and "only create communicators it is a member of" in reply["error"]
    finally:
        for ns in (NS, OTHER_NS):
            subprocess.run(["ip", "netns", "delete", ns], check=False, timeout=10)
        shutil.rmtree(tmp_path, ignore_errors=True)
