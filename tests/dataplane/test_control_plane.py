"""The control plane driving a real BMv2 switch: the communicator service creates, splits and
frees communicators; P4Runtime writes only differences and logs every request; mini packets
from the management port write and read back the barrier slots."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import routing
from controller.drivers.p4runtime import SwitchEndpoint
from controller.runtime import ControlPlane
from controller.service import CommService
from controller.switch_state import ports_bitmap
from controller.topology_build import single_switch
from host_agents.port import RawSocketPort
from host_agents.service_client import ServiceClient, ServiceError
from mininet_topos.network import netns
from mininet_topos.network.single_switch import SingleSwitchLab
from tests.requirements import BUILD_DIR

TOPO = single_switch(4)  # hosts on ports 1-4, management node on port 5


@pytest.fixture(scope="module")
def controlled(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SingleSwitchLab, ControlPlane, Path]]:
    from tests.dataplane.conftest import REASON

    if REASON is not None:
        pytest.skip(REASON)
    tmp = tmp_path_factory.mktemp("control")
    with SingleSwitchLab(BUILD_DIR, (1, 2, 3, 4, 5)) as lab:
        lab.restart()  # an empty switch: the control plane programs it from nothing
        mgmt = netns.call_in(lab.ns, lambda: RawSocketPort("tp5"))
        endpoint = SwitchEndpoint("lab", f"unix:{lab.run_dir}/p4runtime.sock", 1)
        control = ControlPlane(TOPO, BUILD_DIR, {0: endpoint}, mgmt, log_dir=tmp)
        lab._call(control.start(30), 40)
        service = CommService(control, tmp / "service.sock")
        lab._call(service.start(), 10)
        try:
            yield lab, control, tmp
        finally:
            lab._call(service.stop(), 10)
            lab._call(control.stop(), 20)


def call(path: Path, *requests: dict[str, object]) -> list[dict[str, object]]:
    """Send requests concurrently, each on its own connection (as separate agents would)."""

    async def one(request: dict[str, object]) -> dict[str, object]:
        client = ServiceClient(path, timeout=30)
        try:
            op = str(request.pop("op"))
            return await client.call(op, **request)
        finally:
            await client.close()

    async def all_of() -> list[dict[str, object]]:
        return list(await asyncio.gather(*(one(dict(r)) for r in requests)))

    return asyncio.run(all_of())


def test_programmed_from_nothing(controlled: tuple[SingleSwitchLab, ControlPlane, Path]) -> None:
    lab, control, tmp = controlled
    counts = lab._call(control.switches[0].read_tables(), 10)
    assert counts["port_info"] == 5
    assert counts["node_route"] == len(routing.forwarding_table(TOPO, 0))
    assert counts["multicast_groups"] == 2**5 - 1  # one per subset of the 5 ports
    assert "WriteRequest" in (tmp / "lab-p4runtime-requests.txt").read_text()


def test_service_creates_and_pushing_twice_changes_nothing(
    controlled: tuple[SingleSwitchLab, ControlPlane, Path],
) -> None:
    lab, control, tmp = controlled
    (reply,) = call(tmp / "service.sock", {"op": "create", "members": [1, 2, 3, 4]})
    comm = int(reply["comm_id"])  # type: ignore[call-overload]
    assert float(reply["install_seconds"]) < 10  # type: ignore[arg-type]
    slot = lab._call(control.barrier_state(0, comm), 10)
    assert (slot.parent_port, slot.children) == (0, ports_bitmap((1, 2, 3, 4)))
    again = lab._call(control.switches[0].sync(), 20)
    assert again.changes == 0, "the same state pushed twice must write nothing"
    bindings = lab._call(control.switches[0].read_tables(), 10)["bcast_tree"]
    assert bindings >= 4  # one innet tree per root, plus Ragasa's


def test_split_and_free(controlled: tuple[SingleSwitchLab, ControlPlane, Path]) -> None:
    lab, control, tmp = controlled
    path = tmp / "service.sock"
    (created,) = call(path, {"op": "create", "members": [1, 2, 3, 4]})
    parent = created["comm_id"]
    answers = call(
        path,
        *(
            {"op": "split", "comm_id": parent, "node": n, "color": n % 2, "key": -n}
            for n in (1, 2, 3, 4)
        ),
    )
    by_node = dict(zip((1, 2, 3, 4), answers, strict=True))
    assert by_node[1]["members"] == [3, 1] and by_node[3]["comm_id"] == by_node[1]["comm_id"]
    assert by_node[2]["members"] == [4, 2]
    before = lab._call(control.switches[0].read_tables(), 10)["bcast_tree"]
    frees = call(path, *({"op": "free", "comm_id": parent, "node": n} for n in (1, 2, 3, 4)))
    assert sum(bool(f["removed"]) for f in frees) == 1  # removed once the last member freed it
    assert lab._call(control.switches[0].read_tables(), 10)["bcast_tree"] < before


def test_errors_name_the_problem(controlled: tuple[SingleSwitchLab, ControlPlane, Path]) -> None:
    _, _, tmp = controlled
    with pytest.raises(ServiceError, match="node 99, which is not a host"):
        call(tmp / "service.sock", {"op": "create", "members": [1, 99]})
    with pytest.raises(ServiceError, match="unknown communicator 200"):
        call(tmp / "service.sock", {"op": "free", "comm_id": 200, "node": 1})
    with pytest.raises(ServiceError, match="unknown op"):
        call(tmp / "service.sock", {"op": "launch_missiles"})


def test_rendezvous_tells_a_new_job_where_the_barriers_are(
    controlled: tuple[SingleSwitchLab, ControlPlane, Path],
) -> None:
    """A second job on an existing communicator must not restart its barrier epochs at 0:
    the switch would answer those ARRIVEs at once as late arrivals and the barrier would
    not wait for anybody."""
    from controller.wire import Op
    from tests.dataplane_scenarios import frame

    lab, control, tmp = controlled
    path = tmp / "service.sock"
    (created,) = call(path, {"op": "create", "members": [1, 2, 3, 4]})
    comm = int(created["comm_id"])  # type: ignore[call-overload]
    for epoch in (1, 2, 3):  # the first job: three barriers, every member arrives
        for port in (1, 2, 3, 4):
            lab.sockets[port].send(frame(Op.ARRIVE, src=port, comm_id=comm, epoch=epoch, port=port))
    deadline = time.monotonic() + 10
    while lab._call(control.barrier_state(0, comm), 10).epoch != 3:
        assert time.monotonic() < deadline, "the switch did not release epoch 3 within 10 s"
        time.sleep(0.05)
    answers = call(
        path,
        *(
            {"op": "rendezvous", "name": "job2", "node": n, "expected": 4, "comm_id": comm}
            for n in (1, 2, 3, 4)
        ),
    )
    assert [a["barrier_epoch"] for a in answers] == [3, 3, 3, 3]
    (plain,) = call(path, {"op": "rendezvous", "name": "job3", "node": 1, "members": [1]})
    assert "barrier_epoch" not in plain
    with pytest.raises(ServiceError, match="unknown communicator 200"):
        call(path, {"op": "rendezvous", "name": "job4", "node": 1, "expected": 1, "comm_id": 200})
    call(path, *({"op": "free", "comm_id": comm, "node": n} for n in (1, 2, 3, 4)))
