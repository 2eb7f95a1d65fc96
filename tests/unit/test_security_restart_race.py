"""Issue 32, Medium 10: a create or free while a switch restarts.

A host may ask for a create or free at any moment, including while a switch restarts; before
the fix the resume of the switch's barrier epochs ran outside the control plane's lock, so the
change's recomputation dropped the resumed epochs (the switch went back to released epoch 0,
the next barrier hung), and ``wait_reprogrammed`` returned before the registers were rewritten.
"""

from __future__ import annotations

import asyncio

import pytest

from controller.trees import barrier_tree
from tests.fabric_control import ControlledFabric
from tests.unit.test_control_plane_fabric import HOSTS, MEMBERS, barriers, run

pytestmark = [pytest.mark.unit, pytest.mark.security]


@pytest.mark.parametrize("change", ["create", "free"])
def test_a_change_during_a_restart_keeps_the_resumed_barrier_epochs(change: str) -> None:
    async def body(net: ControlledFabric) -> None:
        control = net.control
        report = await control.create(MEMBERS)
        other = await control.create((HOSTS[1], HOSTS[2]))
        comms = net.comms(report.comm_id, MEMBERS)
        await barriers(comms, 3)
        restarted = barrier_tree(net.topo, MEMBERS).root_switch
        session = net.sessions[restarted]
        connections = session.connections
        session.restart()
        # the change lands while the restarted switch is being reprogrammed
        await asyncio.sleep(0)
        if change == "create":
            await control.create((HOSTS[6], HOSTS[7]))
        else:
            await control.free(other.comm_id)
        await control.wait_reprogrammed(restarted, connections, 10)
        model = net.fabric.models[restarted]
        assert model.barrier_released[report.comm_id] == 3, (
            "the restarted switch went back to released epoch "
            f"{model.barrier_released[report.comm_id]}"
        )
        await asyncio.wait_for(barriers(comms, 2), 10)

    run(body)
