"""Issue 32, Medium 9 (second half): one host's create must not stall every other host.

Computing every switch's desired state takes seconds with several world-sized communicators
(3.6 s for seven on Df(2,4,2), 86 s on a loaded machine). Before the fix it ran in the
service's event loop, so while one host's create was computed the service answered nobody: a
legitimate-looking caller denied service to every other host. Here the computation is held
(``desired_state`` waits on an event: what is under test is the loop, not how fast the
computation is); the service, its socket, its loop and the control plane behind it are the
real ones, and the other host is another process, as an agent is.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller import runtime
from controller.callers import Caller
from controller.service import CommService
from controller.topology import Topology
from controller.topology_build import dragonfly
from tests.fabric_control import ControlledFabric, HeldRecompute

pytestmark = [pytest.mark.unit, pytest.mark.security]

TOPO: Topology = dragonfly(2, 2, 1)
HOSTS = [h.node_id for h in TOPO.hosts]
CREATOR, OTHER = HOSTS[4], HOSTS[9]
PROMPT = 1.5  # seconds: an answer within this was not held up by the computation
STATUS = {"op": "status"}
MEET = {"op": "rendezvous", "name": "job", "members": [OTHER], "expected": 1}


@pytest.fixture
def held_create(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldRecompute]:
    held = HeldRecompute([CREATOR])
    monkeypatch.setattr(runtime, "desired_state", held)
    yield held
    held.release.set()


Body = Callable[[ControlledFabric, Path, dict[int, Caller]], Awaitable[None]]


def serve(body: Body) -> None:
    """The real service on a unix socket; this process is the host CREATOR, and another
    process is whoever ``who`` maps its pid to."""
    with tempfile.TemporaryDirectory(prefix="nc-") as tmp:  # short: a socket path's limit
        path = Path(tmp) / "service.sock"
        who = {os.getpid(): Caller(CREATOR)}

        async def main() -> None:
            net = ControlledFabric(TOPO, asyncio.get_running_loop())
            await net.control.start(10)
            service = CommService(net.control, path, callers=who.get)
            await service.start()
            try:
                await asyncio.wait_for(body(net, path, who), 60)
            finally:
                await service.stop()
                await net.control.stop()

        asyncio.run(main())


Answer = tuple[float, dict[str, Any], float]  # seconds it took, the reply, when it came


def ask(
    path: Path, requests: list[dict[str, Any]], then: Callable[[dict[str, Any]], Any] = dict
) -> list[Answer]:
    """Blocking requests from this process, for a thread: ``then`` runs on each reply as it
    arrives (what the switches hold at that moment)."""
    answers = []
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        lines = sock.makefile()
        for i, request in enumerate(requests):
            started = time.monotonic()
            sock.sendall(json.dumps({"id": i, **request}).encode() + b"\n")
            reply = json.loads(lines.readline())
            then(reply)
            answers.append((time.monotonic() - started, reply, time.monotonic()))
    return answers


CLIENT = """
import json, socket, sys, time
sys.stdin.readline()  # connect once the service knows this process
sock = socket.socket(socket.AF_UNIX)
sock.settimeout(20)
sock.connect(sys.argv[1])
lines = sock.makefile()
out = []
for i, request in enumerate(json.loads(sys.argv[2])):
    started = time.monotonic()
    sock.sendall(json.dumps({"id": i, **request}).encode() + b"\\n")
    reply = json.loads(lines.readline())
    out.append([time.monotonic() - started, reply])
print(json.dumps(out))
"""


def ask_as(
    caller: Caller, path: Path, who: dict[int, Caller], requests: list[dict[str, Any]]
) -> list[tuple[float, dict[str, Any]]]:
    """Blocking requests from another process, which the service takes for ``caller``."""
    child = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(path), json.dumps(requests)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    who[child.pid] = caller
    out, _ = child.communicate("go\n", timeout=30)
    assert child.returncode == 0, f"the other host's client failed: {out}"
    return [(float(s), dict(r)) for s, r in json.loads(out)]


def while_held(
    held: HeldRecompute, path: Path, who: dict[int, Caller]
) -> list[tuple[float, dict[str, Any]]]:
    """Host OTHER's status and rendezvous while CREATOR's computation is held; then let it
    go. In a thread: its clock is not the service loop's."""
    if not held.entered.wait(10):
        raise AssertionError("the create never reached the computation of the switch state")
    try:
        return ask_as(Caller(OTHER), path, who, [STATUS, MEET])
    finally:
        held.let_go()


def assert_prompt(answers: list[tuple[float, dict[str, Any]]]) -> None:
    for (seconds, reply), op in zip(answers, ("status", "rendezvous"), strict=True):
        assert reply["ok"], f"host {OTHER}'s {op}: {reply}"
        assert seconds < PROMPT, (
            f"host {OTHER}'s {op} was answered after {seconds:.2f} s, while host {CREATOR}'s "
            "create was computed: the service answered nobody meanwhile"
        )
    assert answers[1][1]["joined"] == 1


def trees_of(net: ControlledFabric, comm_id: int) -> int:
    """Tree bindings of ``comm_id`` on the fabric's switches."""
    return sum(
        key.comm_id == comm_id for model in net.fabric.models.values() for key in model.state.trees
    )


def test_a_slow_recompute_does_not_stall_other_hosts_requests(held_create: HeldRecompute) -> None:
    """Before: host OTHER's status took as long as host CREATOR's computation (HOLD)."""
    held = held_create

    async def body(net: ControlledFabric, path: Path, who: dict[int, Caller]) -> None:
        on_switches: list[int] = []  # tree bindings when the create's answer came

        def record(reply: dict[str, Any]) -> None:
            on_switches.append(trees_of(net, reply["comm_id"]) if reply.get("ok") else 0)

        create = asyncio.ensure_future(
            asyncio.to_thread(ask, path, [{"op": "create", "members": [CREATOR]}], record)
        )
        meanwhile = await asyncio.to_thread(while_held, held, path, who)
        [(_, created, answered)] = await asyncio.wait_for(create, 20)
        assert_prompt(meanwhile)
        # the creator's answer waited for its state: computed, then on the switches
        assert created["ok"], created
        assert answered > held.released_at
        assert created["comm_id"] in net.control.comms
        assert on_switches[0] > 0, "the create was answered before its trees were installed"

    serve(body)


def test_an_error_in_the_recompute_reaches_its_caller_and_the_service_keeps_serving(
    held_create: HeldRecompute,
) -> None:
    held = held_create
    held.fail = RuntimeError("the computation broke")

    async def body(net: ControlledFabric, path: Path, who: dict[int, Caller]) -> None:
        before = {i: s.writes for i, s in net.sessions.items()}
        create = asyncio.ensure_future(
            asyncio.to_thread(ask, path, [{"op": "create", "members": [CREATOR]}])
        )
        meanwhile = await asyncio.to_thread(while_held, held, path, who)
        [(_, failed, _)] = await asyncio.wait_for(create, 20)
        assert_prompt(meanwhile)
        assert not failed["ok"] and "the computation broke" in failed["error"], failed
        assert not net.control.comms
        assert {i: s.writes for i, s in net.sessions.items()} == before, "a switch was written"
        # and the service goes on: the same create again, and the other host
        [(_, created, _)] = await asyncio.to_thread(
            ask, path, [{"op": "create", "members": [CREATOR]}]
        )
        assert created["ok"] and created["comm_id"] in net.control.comms, created
        assert trees_of(net, created["comm_id"]) > 0
        [(_, status)] = await asyncio.to_thread(ask_as, Caller(OTHER), path, who, [STATUS])
        assert status["ok"] and str(created["comm_id"]) in status["communicators"]

    serve(body)
