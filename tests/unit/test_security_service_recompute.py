"""Issue 32, Medium 9 (second half): one host's create must not stall every other host.

Computing every switch's desired state takes seconds with several world-sized communicators
(3.6 s for seven on Df(2,4,2), 86 s on a loaded machine). Before the fix it ran in the
service's event loop, so while one host's create was computed the service answered nobody: a
legitimate-looking caller denied service to every other host. Here the computation is held
(``desired_state`` waits on an event: what is under test is the loop, not how fast the
computation is); the service, its socket, its loop and the control plane behind it are the
real ones, and the other host is another process, as an agent is.

The same hold makes one host's creates concurrent: the per-host bound on communicators must
count the ones still being computed (it was checked before a create was installed and charged
only after, so they all passed it), and a create its caller left must still be charged.
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


def serve(
    body: Body, *, comms_per_caller: int = 16, services: list[CommService] | None = None
) -> None:
    """The real service on a unix socket; this process is the host CREATOR, and another
    process is whoever ``who`` maps its pid to. ``services`` gets the service, for a body
    that looks inside it."""
    with tempfile.TemporaryDirectory(prefix="nc-") as tmp:  # short: a socket path's limit
        path = Path(tmp) / "service.sock"
        who = {os.getpid(): Caller(CREATOR)}

        async def main() -> None:
            net = ControlledFabric(TOPO, asyncio.get_running_loop())
            await net.control.start(10)
            service = CommService(
                net.control, path, callers=who.get, comms_per_caller=comms_per_caller
            )
            if services is not None:
                services.append(service)
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


BOUND = 2  # communicators a host may hold at once, here
CONCURRENT = 8  # requests one host sends at once (fewer than the service's in_flight, 32)
CREATE_SELF = {"op": "create", "members": [CREATOR]}


def pipelined(path: Path, requests: list[dict[str, Any]], replies: list[Answer]) -> None:
    """Every request at once on one connection, then the replies as they come (appended to
    ``replies`` with when each came, so another thread sees them arrive). In a thread."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        started = time.monotonic()
        sock.sendall(
            b"".join(json.dumps({"id": i, **r}).encode() + b"\n" for i, r in enumerate(requests))
        )
        lines = sock.makefile()
        for _ in requests:
            reply = json.loads(lines.readline())
            replies.append((time.monotonic() - started, reply, time.monotonic()))


async def held_meanwhile(
    held: HeldRecompute, path: Path, requests: list[dict[str, Any]], refusals: int
) -> list[dict[str, Any]]:
    """``requests`` at once, while the first one's computation is held; the hold ends once
    ``refusals`` replies came (they need no computation) or after PROMPT. The replies, in the
    order they came; each refusal must have come before the hold ended."""
    replies: list[Answer] = []
    sent = asyncio.ensure_future(asyncio.to_thread(pipelined, path, requests, replies))
    assert await asyncio.to_thread(held.entered.wait, 10), "no request reached its computation"
    deadline = time.monotonic() + PROMPT
    while len(replies) < refusals and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    held.let_go()
    await asyncio.wait_for(sent, 20)
    for _, reply, came in replies:
        if not reply["ok"]:
            assert came < held.released_at, f"a refusal waited for another's state: {reply}"
    return [reply for _, reply, _ in replies]


async def one(path: Path, request: dict[str, Any]) -> dict[str, Any]:
    [(_, reply, _)] = await asyncio.to_thread(ask, path, [request])
    return reply


async def until(condition: Callable[[], object], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


def assert_within_the_bound(replies: list[dict[str, Any]], allowed: int, what: str) -> None:
    ok = [reply for reply in replies if reply["ok"]]
    assert len(ok) == allowed, (
        f"{len(ok)} of {len(replies)} concurrent {what} of host {CREATOR} were installed, "
        f"{allowed} fit its bound of {BOUND}"
    )
    for reply in replies:
        if not reply["ok"]:
            assert_refused_at_the_bound(reply)


def assert_refused_at_the_bound(reply: dict[str, Any]) -> None:
    assert not reply["ok"], f"host {CREATOR} got past its bound of {BOUND}: {reply}"
    assert reply["error"].startswith("Refused:") and f"at most {BOUND}" in reply["error"], reply


def test_concurrent_creates_of_one_host_stay_within_its_bound(held_create: HeldRecompute) -> None:
    """Before: the bound was checked when a create was admitted and charged once it was
    installed, so CONCURRENT creates of {CREATOR} sent at once all passed the check and all
    were installed."""

    async def body(net: ControlledFabric, path: Path, who: dict[int, Caller]) -> None:
        replies = await held_meanwhile(
            held_create, path, [CREATE_SELF] * CONCURRENT, CONCURRENT - BOUND
        )
        assert_within_the_bound(replies, BOUND, "creates")
        created = [reply["comm_id"] for reply in replies if reply["ok"]]
        assert set(net.control.comms) == set(created)
        assert_refused_at_the_bound(await one(path, CREATE_SELF))

        # the places come back: the refused creates held none, the installed ones go with
        # their free, and a create that fails in its computation gives back its own
        for comm_id in created:
            freed = await one(path, {"op": "free", "comm_id": comm_id})
            assert freed["ok"] and freed["removed"], freed
        assert not net.control.comms
        failing = {**CREATE_SELF, "roots": [OTHER]}  # a root not a member: the worker raises
        failed, installed = [
            reply for _, reply, _ in await asyncio.to_thread(ask, path, [failing, CREATE_SELF])
        ]
        assert not failed["ok"] and "not a member" in failed["error"], failed
        assert installed["ok"], installed
        again = await one(path, CREATE_SELF)
        assert again["ok"], f"the failed create kept its place: {again}"
        assert len(net.control.comms) == BOUND
        assert_refused_at_the_bound(await one(path, CREATE_SELF))

    serve(body, comms_per_caller=BOUND)


def test_concurrent_splits_of_one_host_stay_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A split is charged to every member of its parts, so the same holds for splits: before,
    CONCURRENT splits of {CREATOR} sent at once all passed the check."""
    held = HeldRecompute([CREATOR])
    split = {"op": "split", "color": 0, "key": 0}

    async def body(net: ControlledFabric, path: Path, who: dict[int, Caller]) -> None:
        parent = await one(path, CREATE_SELF)  # one place of BOUND
        assert parent["ok"], parent
        monkeypatch.setattr(runtime, "desired_state", held)  # holds the next computation
        splits = [{**split, "comm_id": parent["comm_id"]}] * CONCURRENT
        replies = await held_meanwhile(held, path, splits, CONCURRENT - BOUND + 1)
        assert_within_the_bound(replies, BOUND - 1, "splits")
        [made] = [reply["comm_id"] for reply in replies if reply["ok"]]
        freed = await one(path, {"op": "free", "comm_id": made})
        assert freed["ok"] and freed["removed"], freed
        again = await one(path, {**split, "comm_id": parent["comm_id"]})
        assert again["ok"] and again["comm_id"] in net.control.comms, again

    try:
        serve(body, comms_per_caller=BOUND)
    finally:
        held.release.set()


def test_a_create_whose_caller_left_during_its_computation_is_still_charged(
    held_create: HeldRecompute,
) -> None:
    """The change goes on once it is being computed, whether its caller waits or not. Before:
    the charge came with the caller's answer, so a host that sent a create and closed its
    connection during the computation got a communicator it was never charged for, and could
    do so again and again."""
    held = held_create
    services: list[CommService] = []

    def leave_during_the_computation(path: Path) -> None:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(path))
            sock.sendall(json.dumps({"id": 0, **CREATE_SELF}).encode() + b"\n")
            if not held.entered.wait(10):
                raise AssertionError("the create never reached the computation")

    async def body(net: ControlledFabric, path: Path, who: dict[int, Caller]) -> None:
        [service] = services
        await asyncio.to_thread(leave_during_the_computation, path)
        waiting = service._open  # requests the service is answering, per caller
        await until(lambda: not waiting[Caller(CREATOR)], 5)
        assert not waiting[Caller(CREATOR)], "the service did not see the creator leave"
        held.let_go()
        await until(lambda: net.control.comms, 10)
        assert len(net.control.comms) == 1, "the create its caller left was not installed"
        replies = [await one(path, CREATE_SELF) for _ in range(BOUND)]
        more = sum(reply["ok"] for reply in replies)
        assert more == BOUND - 1, (
            f"host {CREATOR} created {more} more after one it left was installed, with a "
            f"bound of {BOUND}: the one it left was not charged"
        )
        assert_refused_at_the_bound(replies[-1])

    serve(body, comms_per_caller=BOUND, services=services)
