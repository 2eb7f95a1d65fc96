"""The communicator service against callers that are not entitled to what they ask.

The control plane behind it is the real one, programming the in-process fabric. Each test
asserts that the request is refused with a reason, counted, and that no communicator and no
switch changed; the last one checks that identity really comes from the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from controller.callers import OPERATOR, Caller, NetnsCallers, netns_inode
from controller.service import CommService, Refused
from controller.topology import Topology
from controller.topology_build import dragonfly
from tests.fabric_control import ControlledFabric

pytestmark = [pytest.mark.unit, pytest.mark.security]

TOPO: Topology = dragonfly(2, 2, 1)
HOSTS = [h.node_id for h in TOPO.hosts]
MEMBERS = (HOSTS[0], HOSTS[3], HOSTS[5])
OUTSIDER = Caller(HOSTS[11])
MEMBER = Caller(MEMBERS[1])


def run(body: Callable[[ControlledFabric, CommService], Awaitable[None]]) -> None:
    async def main() -> None:
        net = ControlledFabric(TOPO, asyncio.get_running_loop())
        await net.control.start(10)
        service = CommService(net.control, Path("/nonexistent"), comms_per_caller=2)
        try:
            await asyncio.wait_for(body(net, service), 60)
        finally:
            await net.control.stop()

    asyncio.run(main())


def writes(net: ControlledFabric) -> dict[int, int]:
    return {i: s.writes for i, s in net.sessions.items()}


async def refused(service: CommService, request: dict[str, Any], caller: Caller) -> str:
    with pytest.raises(Refused) as info:
        await service.handle(request, caller)
    return str(info.value)


def test_only_members_free_split_or_install_trees_and_only_for_themselves() -> None:
    async def body(net: ControlledFabric, service: CommService) -> None:
        created = await service.handle({"op": "create", "members": list(MEMBERS)}, OPERATOR)
        comm_id = created["comm_id"]
        before = writes(net)
        for request in (
            {"op": "free", "comm_id": comm_id},
            {"op": "free", "comm_id": comm_id, "node": MEMBERS[0]},
            {"op": "split", "comm_id": comm_id, "color": 0, "key": 0},
            {"op": "ensure_trees", "comm_id": comm_id, "root": MEMBERS[0]},
            {"op": "rendezvous", "name": "x", "expected": 2, "comm_id": comm_id},
        ):
            assert "not a member" in await refused(service, request, OUTSIDER)
        # a member naming another member's node
        message = await refused(
            service, {"op": "free", "comm_id": comm_id, "node": MEMBERS[0]}, MEMBER
        )
        assert "cannot act for node" in message
        assert writes(net) == before, "a refused request wrote to a switch"
        assert set(net.control.comms) == {comm_id}
        # the member's own free counts (one of three votes), and changes no switch yet
        answer = await service.handle({"op": "free", "comm_id": comm_id}, MEMBER)
        assert answer == {"removed": False}
        assert writes(net) == before

    run(body)


def test_hosts_create_only_their_own_communicators_and_a_bounded_number() -> None:
    async def body(net: ControlledFabric, service: CommService) -> None:
        message = await refused(service, {"op": "create", "members": list(MEMBERS)}, OUTSIDER)
        assert "only create communicators it is a member of" in message
        own = [MEMBERS[1], MEMBERS[2]]
        for _ in range(2):  # both members ask (consent): each is charged for it
            await asyncio.gather(
                *(service.handle({"op": "create", "members": own}, Caller(n)) for n in own)
            )
        before = writes(net)
        message = await refused(service, {"op": "create", "members": own}, MEMBER)
        assert "at most 2 at once" in message
        assert writes(net) == before
        assert len(net.control.comms) == 2
        assert service.refused == 0  # handle() raises; counting is the connection's job

    run(body)


def test_trees_for_a_non_member_root_change_nothing_and_later_creates_work() -> None:
    async def body(net: ControlledFabric, service: CommService) -> None:
        created = await service.handle(
            {"op": "create", "members": list(MEMBERS), "roots": [MEMBERS[0]]}, OPERATOR
        )
        before = writes(net)
        with pytest.raises(Exception, match="not a member"):
            await service.handle(
                {"op": "ensure_trees", "comm_id": created["comm_id"], "root": HOSTS[11]}, MEMBER
            )
        assert writes(net) == before
        again = await service.handle({"op": "create", "members": list(MEMBERS)}, OPERATOR)
        assert again["comm_id"] != created["comm_id"]

    run(body)


NS = "netcoll-sec-test"
CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(json.dumps({"id": 1, "op": sys.argv[2], **json.loads(sys.argv[3])}).encode() + b"\\n")
print(s.makefile().readline(), end="")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a network namespace")
@pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2's ip")
def test_the_caller_is_the_namespace_of_the_connection_not_the_request(tmp_path: Path) -> None:
    subprocess.run(["ip", "netns", "add", NS], check=True, timeout=10)
    try:
        host_ns = os.stat(f"/run/netns/{NS}").st_ino
        node = MEMBERS[2]

        def from_host(op: str, **params: Any) -> dict[str, Any]:
            out = subprocess.run(
                ["ip", "netns", "exec", NS, sys.executable, "-c", CLIENT, str(path), op,
                 json.dumps(params)],
                check=True, capture_output=True, text=True, timeout=20,
            )  # fmt: skip
            return dict(json.loads(out.stdout))

        path = tmp_path / "service.sock"

        async def main() -> None:
            net = ControlledFabric(TOPO, asyncio.get_running_loop())
            await net.control.start(10)
            service = CommService(net.control, path, callers=NetnsCallers({host_ns: node}))
            await service.start()
            try:
                loop = asyncio.get_running_loop()
                created = await service.handle({"op": "create", "members": list(MEMBERS)})
                comm_id = created["comm_id"]
                # the body claims another member: refused, the connection says who calls
                reply = await loop.run_in_executor(
                    None, lambda: from_host("free", comm_id=comm_id, node=MEMBERS[0])
                )
                assert not reply["ok"] and "cannot act for node" in reply["error"]
                reply = await loop.run_in_executor(None, lambda: from_host("status"))
                assert reply["ok"]
                assert service.refused == 1
                assert set(net.control.comms) == {comm_id}
                assert netns_inode("self") != host_ns
            finally:
                await service.stop()
                await net.control.stop()

        asyncio.run(main())
    finally:
        subprocess.run(["ip", "netns", "delete", NS], check=False, timeout=10)


def test_a_connection_from_an_unknown_namespace_is_refused(tmp_path: Path) -> None:
    """No namespace maps to a host here, and this process is not the operator."""
    path = tmp_path / "service.sock"

    async def main() -> None:
        net = ControlledFabric(TOPO, asyncio.get_running_loop())
        await net.control.start(10)
        service = CommService(net.control, path, callers=lambda pid: None)
        await service.start()
        try:
            reader, writer = await asyncio.open_unix_connection(str(path))
            writer.write(b'{"id": 1, "op": "status"}\n')
            reply = json.loads(await asyncio.wait_for(reader.readline(), 10))
            assert not reply["ok"] and "unknown caller" in reply["error"]
            with contextlib.suppress(ConnectionResetError):  # closed, maybe with our line unread
                assert await asyncio.wait_for(reader.readline(), 10) == b""
            writer.close()
            assert service.refused == 1
        finally:
            await service.stop()
            await net.control.stop()

    asyncio.run(main())
