"""Hosts against other hosts' jobs at the communicator service (issue 32: High 1, High 2,
Medium 9, and the split-round Low item).

The control plane behind the service is the real one, programming the in-process fabric. Each
test states the attack, what it did before the fix, and what a user relies on now.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from controller.callers import OPERATOR, Caller
from controller.service import CommService, Refused
from controller.topology import Topology
from controller.topology_build import dragonfly
from tests.fabric_control import ControlledFabric

pytestmark = [pytest.mark.unit, pytest.mark.security]

TOPO: Topology = dragonfly(2, 2, 1)
HOSTS = [h.node_id for h in TOPO.hosts]
MEMBERS = (HOSTS[0], HOSTS[3], HOSTS[5])
OUTSIDER = Caller(HOSTS[11])


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


def meet(name: str, members: tuple[int, ...] | list[int]) -> dict[str, Any]:
    # ``expected`` too, so the same requests mean the same thing to the service before the fix
    return {"op": "rendezvous", "name": name, "members": list(members), "expected": len(members)}


async def outcome(service: CommService, request: dict[str, Any], caller: Caller) -> str:
    """What a request that should not complete anything got: 'refused', 'waiting' or the
    answer's text."""
    task = asyncio.ensure_future(service.handle(request, caller))
    done, _ = await asyncio.wait({task}, timeout=0.2)
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return "waiting"
    try:
        return repr(task.result())
    except Refused:
        return "refused"


def test_a_non_member_cannot_complete_answer_or_pin_a_jobs_rendezvous() -> None:
    """Before: a non-member joining the job's name with expected=3 (or 1) answered the two
    waiting members at once, without the third."""

    async def body(net: ControlledFabric, service: CommService) -> None:
        name = "job-20261201-1"
        waiting = [
            asyncio.ensure_future(service.handle(meet(name, MEMBERS), Caller(n)))
            for n in MEMBERS[:2]
        ]
        await asyncio.sleep(0.05)
        for attempt in (
            meet(name, MEMBERS),  # claims to be one of them
            meet(name, (*MEMBERS[:2], OUTSIDER.node)),  # a meeting with itself in it
            {**meet(name, [OUTSIDER.node]), "expected": 1},  # "one is enough"
        ):
            got = await outcome(service, attempt, OUTSIDER)
            assert not any(t.done() for t in waiting), (
                f"{attempt} answered the job's members without its third: {got}"
            )
        answers = await asyncio.gather(
            service.handle(meet(name, MEMBERS), Caller(MEMBERS[2])), *waiting
        )
        assert all(a["joined"] == 3 for a in answers)

    run(body)


def test_the_barrier_epoch_is_the_meetings_not_the_completers() -> None:
    """Before: the member who completed the meeting without naming the communicator left
    every member's answer without the barrier epoch."""

    async def body(net: ControlledFabric, service: CommService) -> None:
        comm_id = (await service.handle({"op": "create", "members": list(MEMBERS)}))["comm_id"]
        on_comm = [
            asyncio.ensure_future(
                service.handle({**meet("j", MEMBERS), "comm_id": comm_id}, Caller(n))
            )
            for n in MEMBERS[:2]
        ]
        await asyncio.sleep(0.05)
        got = await outcome(service, meet("j", MEMBERS), Caller(MEMBERS[2]))
        assert not any(t.done() for t in on_comm), f"answered without the epoch: {got}"
        last = await service.handle({**meet("j", MEMBERS), "comm_id": comm_id}, Caller(MEMBERS[2]))
        answers = [last, *await asyncio.gather(*on_comm)]
        assert all("barrier_epoch" in a for a in answers)

    run(body)


def test_one_host_cannot_fill_the_rendezvous_table_and_meetings_expire() -> None:
    """Before: 256 open meetings of one host refused every later job's rendezvous, and a
    meeting nobody completed stayed forever."""

    async def body(net: ControlledFabric, service: CommService) -> None:
        pinned = []
        refused = 0
        for i in range(260):
            request = meet(f"pin-{i}", [OUTSIDER.node, HOSTS[10]])
            task = asyncio.ensure_future(service.handle(request, OUTSIDER))
            await asyncio.sleep(0)
            if task.done():
                refused += isinstance(task.exception(), Refused)
            else:
                pinned.append(task)
        assert refused > 0, "one host opened 260 meetings"
        answers = await asyncio.wait_for(
            asyncio.gather(*(service.handle(meet("job", MEMBERS), Caller(n)) for n in MEMBERS)),
            5,
        )
        assert all(a["joined"] == 3 for a in answers)
        for task in pinned:
            task.cancel()
        await asyncio.gather(*pinned, return_exceptions=True)
        # a meeting nobody completes ends, naming who did not come
        with contextlib.suppress(AttributeError):
            service.meetings.ttl = 0.2
        with pytest.raises(TimeoutError, match="did not join"):
            await asyncio.wait_for(service.handle(meet("late", MEMBERS), Caller(MEMBERS[0])), 3)
        assert len(service.meetings) == 0

    run(body)


def test_split_is_charged_to_the_per_host_bound() -> None:
    """Before: a host created {itself} and split it again and again, taking every id."""

    async def body(net: ControlledFabric, service: CommService) -> None:
        me = Caller(HOSTS[4])
        parent = (await service.handle({"op": "create", "members": [me.node]}, me))["comm_id"]
        made = 0
        with pytest.raises(Refused, match="at most 2"):
            for _ in range(6):
                answer = await service.handle(
                    {"op": "split", "comm_id": parent, "color": 0, "key": 0}, me
                )
                made += 1
                parent = answer["comm_id"]
        assert made == 1 and len(net.control.comms) == 2
        created = await service.handle({"op": "create", "members": list(MEMBERS)}, OPERATOR)
        assert created["comm_id"] in net.control.comms

    run(body)


def test_a_host_cannot_install_a_communicator_of_others_without_their_consent() -> None:
    """Before: one host created world-sized communicators of other hosts at once, filling
    every switch's slots; now the others must ask for the same communicator."""

    async def body(net: ControlledFabric, service: CommService) -> None:
        with contextlib.suppress(AttributeError):
            service.consents.timeout = 0.2
        world = list(HOSTS)
        before = writes(net)
        with pytest.raises(Refused, match="did not consent"):
            await asyncio.wait_for(
                service.handle({"op": "create", "members": world}, Caller(HOSTS[0])), 3
            )
        assert writes(net) == before and not net.control.comms
        # with every member's request it is installed, once, for all of them
        service.consents.timeout = 10
        answers = await asyncio.gather(
            *(
                service.handle({"op": "create", "members": list(MEMBERS)}, Caller(n))
                for n in MEMBERS
            )
        )
        assert len({a["comm_id"] for a in answers}) == 1 and len(net.control.comms) == 1

    run(body)


def test_an_abandoned_split_call_does_not_desynchronise_later_splits() -> None:
    """Before: a member's split call that timed out used up a round, so its next split and
    everybody else's were in different rounds and waited for each other forever."""

    async def body(net: ControlledFabric, service: CommService) -> None:
        comm_id = (await service.handle({"op": "create", "members": list(MEMBERS)}))["comm_id"]
        with pytest.raises(Exception, match="never called it"):
            await service.communicators.split(comm_id, MEMBERS[0], 0, 0, timeout=0.1)
        answers = await asyncio.wait_for(
            asyncio.gather(
                *(service.communicators.split(comm_id, n, 0, 0, timeout=2.0) for n in MEMBERS)
            ),
            5,
        )
        assert len({a[0] for a in answers if a is not None}) == 1

    run(body)
