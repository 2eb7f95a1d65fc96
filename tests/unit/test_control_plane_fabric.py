"""The control plane without BMv2: the real ControlPlane programming the in-process fabric.

Restarts, refused writes and bad requests, each followed by collectives on the same
communicator, so what is checked is what a user sees: the next barrier still works.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from controller.communicators import Communicators
from controller.runtime import CommunicatorError
from controller.topology import Topology
from controller.topology_build import dragonfly
from controller.trees import barrier_tree
from host_agents.comm import Comm, CommOptions
from host_agents.engine import EngineConfig
from tests.fabric_control import ControlledFabric

pytestmark = pytest.mark.unit

TOPO: Topology = dragonfly(2, 2, 1)
HOSTS = [h.node_id for h in TOPO.hosts]
MEMBERS = (HOSTS[0], HOSTS[3], HOSTS[5], HOSTS[8], HOSTS[10])
OUTSIDER = HOSTS[11]
CONFIG = EngineConfig(rto_initial=0.1, rto_min=0.02, barrier_rto=0.02, peer_timeout=5.0)
OPTIONS = CommOptions(progress_timeout=5.0, first_data_timeout=5.0, op_timeout=30.0)


def run(body: Callable[[ControlledFabric], Awaitable[None]], timeout: float = 90) -> None:
    async def main() -> None:
        net = ControlledFabric(TOPO, asyncio.get_running_loop(), config=CONFIG, options=OPTIONS)
        await net.control.start(10)
        try:
            await asyncio.wait_for(body(net), timeout)
        finally:
            await net.control.stop()

    asyncio.run(main())


async def barriers(comms: list[Comm], count: int) -> None:
    for _ in range(count):
        await asyncio.gather(*(c.barrier(algorithm="innet") for c in comms))


def test_barriers_keep_working_after_a_restart_and_later_changes() -> None:
    """A restarted switch resumes its barrier epochs; a later create and free (which
    recompute every switch's state) must not move them back."""

    async def body(net: ControlledFabric) -> None:
        control = net.control
        report = await control.create(MEMBERS)
        comms = net.comms(report.comm_id, MEMBERS)
        window = control.sizes.barrier_window
        await barriers(comms, window + 2)
        restarted = barrier_tree(TOPO, MEMBERS).root_switch
        connections = net.sessions[restarted].connections
        net.sessions[restarted].restart()
        await control.wait_reprogrammed(restarted, connections, 10)
        await barriers(comms, 2)
        other = await control.create((HOSTS[1], HOSTS[2]))
        await control.free(other.comm_id)
        await barriers(comms, window * 2 + 1)  # past the window on the same communicator

    run(body)


def test_a_switch_that_refuses_a_write_fails_the_create_and_changes_nothing() -> None:
    async def body(net: ControlledFabric) -> None:
        control = net.control
        refusing = barrier_tree(TOPO, MEMBERS).root_switch
        net.sessions[refusing].refuse = "INVALID_ARGUMENT: table full"
        with pytest.raises(CommunicatorError, match=f"s{refusing} refused the change"):
            await control.create(MEMBERS)
        assert net.sessions[refusing].writes >= control.write_attempts  # retried, bounded
        assert control.comms == {}
        for index, model in net.fabric.models.items():
            assert not model.state.trees, f"switch {index} kept part of the refused change"
        net.sessions[refusing].refuse = None
        report = await control.create(MEMBERS)
        await barriers(net.comms(report.comm_id, MEMBERS), 2)

    run(body)


def test_bad_requests_are_refused_before_anything_changes() -> None:
    async def body(net: ControlledFabric) -> None:
        control = net.control
        report = await control.create(MEMBERS, roots=(MEMBERS[0],))
        comm_id = report.comm_id
        before = {i: s.writes for i, s in net.sessions.items()}
        with pytest.raises(CommunicatorError, match="not a member"):
            await control.ensure_trees(comm_id, OUTSIDER)
        with pytest.raises(CommunicatorError, match="not a member"):
            await Communicators(control).free(comm_id, OUTSIDER)
        with pytest.raises(CommunicatorError, match="not a host"):
            await control.create((MEMBERS[0], 0x3FFF))
        assert {i: s.writes for i, s in net.sessions.items()} == before, "a switch was written"
        assert set(control.comms) == {comm_id}
        # and the control plane still works: the next create and the trees of a real root
        second = await control.create((HOSTS[1], HOSTS[2]))
        await control.ensure_trees(comm_id, MEMBERS[1])
        assert any(
            key.root_node == MEMBERS[1] for s in control.states.values() for key in s.trees
        ), "the trees of the new root were not installed"
        comms = net.comms(comm_id, MEMBERS)
        data = b"persistent root" * 100
        results = await asyncio.gather(
            *(c.bcast(data if c.rank == 1 else None, 1, size=len(data)) for c in comms)
        )
        assert all(r == data for r in results)
        await control.free(second.comm_id)

    run(body)


def test_a_freed_id_is_handed_out_again_as_late_as_possible() -> None:
    async def body(net: ControlledFabric) -> None:
        control = net.control
        first = await control.create(MEMBERS)
        votes = Communicators(control)
        for node in MEMBERS:
            assert await votes.free(first.comm_id, node) == (node == MEMBERS[-1])
        second = await control.create(MEMBERS)
        assert second.comm_id != first.comm_id

    run(body)
