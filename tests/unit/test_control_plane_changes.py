"""Changes computed off the event loop and committed in batches (controller/changes.py).

The real control plane on the in-process fabric; one change's computation of the desired
state is held (:class:`HeldRecompute`) so that others queue behind it deterministically.
"""

from __future__ import annotations

import asyncio

import pytest

from controller import runtime
from controller.runtime import CommunicatorError, InstallReport
from controller.trees import barrier_tree
from tests.fabric_control import ControlledFabric, HeldRecompute
from tests.unit.test_control_plane_fabric import HOSTS, MEMBERS, barriers, run

pytestmark = pytest.mark.unit

HELD = (HOSTS[6], HOSTS[7])  # the communicator whose computation is held
QUEUED = [(HOSTS[1], HOSTS[2]), (HOSTS[9],), (HOSTS[10], HOSTS[11])]


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> HeldRecompute:
    gate = HeldRecompute(HELD)
    monkeypatch.setattr(runtime, "desired_state", gate)
    return gate


async def holding(net: ControlledFabric, held: HeldRecompute) -> asyncio.Future[InstallReport]:
    """A create whose computation is under way, and held."""
    first = asyncio.ensure_future(net.control.create(HELD))
    assert await asyncio.to_thread(held.entered.wait, 5), "the computation never started"
    return first


def trees_of(net: ControlledFabric, comm_id: int) -> int:
    return sum(
        key.comm_id == comm_id for model in net.fabric.models.values() for key in model.state.trees
    )


def test_changes_asked_for_during_a_computation_are_committed_in_one(held: HeldRecompute) -> None:
    async def body(net: ControlledFabric) -> None:
        first = await holding(net, held)
        later = [asyncio.ensure_future(net.control.create(m)) for m in QUEUED]
        await asyncio.sleep(0.05)
        assert not any(t.done() for t in (first, *later)), "answered before it was installed"
        calls = held.calls
        held.let_go()
        reports = await asyncio.gather(first, *later)
        assert held.calls == calls + 1, "the creates queued meanwhile were computed one by one"
        assert net.control.changes.batches == 2
        ids = [r.comm_id for r in reports]
        assert len(set(ids)) == 4 and set(net.control.comms) == set(ids)
        assert all(trees_of(net, i) for i in ids)
        await asyncio.wait_for(barriers(net.comms(ids[-1], QUEUED[-1]), 2), 10)

    run(body)


def test_a_change_that_does_not_compute_fails_alone_in_its_batch(held: HeldRecompute) -> None:
    async def body(net: ControlledFabric) -> None:
        first = await holding(net, held)
        bad = (HOSTS[9], 0x3FFF)
        later = [asyncio.ensure_future(net.control.create(m)) for m in (QUEUED[0], bad, QUEUED[2])]
        await asyncio.sleep(0.05)
        held.let_go()
        good_a, failed, good_b = await asyncio.gather(*later, return_exceptions=True)
        assert isinstance(failed, CommunicatorError) and "not a host" in str(failed), failed
        assert isinstance(good_a, InstallReport) and isinstance(good_b, InstallReport)
        ids = {(await first).comm_id, good_a.comm_id, good_b.comm_id}
        assert set(net.control.comms) == ids

    run(body)


def test_a_refused_push_fails_and_undoes_its_whole_batch(held: HeldRecompute) -> None:
    async def body(net: ControlledFabric) -> None:
        first = await holding(net, held)
        later = [asyncio.ensure_future(net.control.create(m)) for m in QUEUED[:2]]
        await asyncio.sleep(0.05)
        refusing = next(iter(net.sessions.values()))
        refusing.refuse = "INVALID_ARGUMENT: table full"
        held.let_go()
        errors = await asyncio.gather(first, *later, return_exceptions=True)
        assert all(isinstance(e, CommunicatorError) for e in errors), errors
        assert "refused the change" in str(errors[1]) and str(errors[1]) == str(errors[2])
        assert not net.control.comms
        assert not any(m.state.trees for m in net.fabric.models.values()), "kept part of it"
        refusing.refuse = None
        report = await net.control.create(QUEUED[0])
        assert trees_of(net, report.comm_id)

    run(body)


def test_a_caller_that_leaves_before_its_change_is_taken_withdraws_it(
    held: HeldRecompute,
) -> None:
    async def body(net: ControlledFabric) -> None:
        first = await holding(net, held)
        leaving = asyncio.ensure_future(net.control.create(QUEUED[0]))
        await asyncio.sleep(0.05)
        leaving.cancel()
        held.let_go()
        report = await first
        await asyncio.sleep(0.05)
        assert set(net.control.comms) == {report.comm_id}
        assert net.control.changes.batches == 1

    run(body)


def test_a_computation_past_its_bound_fails_and_changes_nothing(held: HeldRecompute) -> None:
    async def body(net: ControlledFabric) -> None:
        control = net.control
        control.worker.timeout = 0.3
        before = {i: s.writes for i, s in net.sessions.items()}
        with pytest.raises(CommunicatorError, match=r"took more than 0\.3 s: nothing changed"):
            await control.create(HELD)
        assert not control.comms
        assert {i: s.writes for i, s in net.sessions.items()} == before
        held.let_go()  # the abandoned computation ends; the next one runs after it
        report = await control.create(HELD)
        assert set(control.comms) == {report.comm_id} and trees_of(net, report.comm_id)

    run(body)


def test_a_restart_during_a_held_computation_resumes_after_the_change(
    held: HeldRecompute,
) -> None:
    """The change holds the control plane's lock while its state is computed on the worker:
    the restarted switch's resume waits for it, then keeps the released barrier epochs."""

    async def body(net: ControlledFabric) -> None:
        control = net.control
        report = await control.create(MEMBERS)
        comms = net.comms(report.comm_id, MEMBERS)
        await barriers(comms, 3)
        restarted = barrier_tree(net.topo, MEMBERS).root_switch
        session = net.sessions[restarted]
        connections = session.connections
        change = await holding(net, held)
        session.restart()
        await asyncio.sleep(0.05)
        assert control.restarts == 0, "the resume ran while a change held the lock"
        held.let_go()
        await change
        await control.wait_reprogrammed(restarted, connections, 10)
        assert control.restarts == 1
        assert net.fabric.models[restarted].barrier_released[report.comm_id] == 3
        await asyncio.wait_for(barriers(comms, 2), 10)

    run(body)


def test_a_creates_settled_hook_hears_its_outcome_once_whether_its_caller_waits_or_not(
    held: HeldRecompute,
) -> None:
    """What the service charges hosts by: the ids once installed, even for a caller that left
    while its change was computed; None for a change withdrawn or that failed."""

    async def body(net: ControlledFabric) -> None:
        told: dict[str, list[list[int] | None]] = {}

        def hook(name: str) -> runtime.Installed:
            return lambda ids: told.setdefault(name, []).append(ids)

        left = asyncio.ensure_future(net.control.create(HELD, settled=hook("left")))
        assert await asyncio.to_thread(held.entered.wait, 5), "the computation never started"
        withdrawn = asyncio.ensure_future(net.control.create(QUEUED[0], settled=hook("withdrawn")))
        failing = asyncio.ensure_future(
            net.control.create((HOSTS[9], 0x3FFF), settled=hook("failed"))
        )
        good = asyncio.ensure_future(net.control.create(QUEUED[2], settled=hook("installed")))
        await asyncio.sleep(0.05)
        left.cancel()
        withdrawn.cancel()
        await asyncio.sleep(0.05)
        assert told == {"withdrawn": [None]}, told
        held.let_go()
        report = await good
        with pytest.raises(CommunicatorError, match="not a host"):
            await failing
        ids = set(net.control.comms) - {report.comm_id}
        assert len(ids) == 1, "the change its caller left was not carried out"
        assert told == {
            "withdrawn": [None],
            "left": [list(ids)],
            "failed": [None],
            "installed": [[report.comm_id]],
        }, told

    run(body)
