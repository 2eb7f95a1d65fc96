"""The single-switch scenarios on the reference model (the same ones run on BMv2 in
tests/dataplane), in both replication modes."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from controller import wire
from controller.switch_model import SwitchModel
from controller.switch_state import SwitchState, TreeKey
from tests.ackmerge_scenarios import ACKMERGE_SCENARIOS, ack_frame, send_ack
from tests.dataplane_scenarios import (
    CHILD_PORT,
    COMM,
    SCENARIOS,
    SwitchUnderTest,
    base_state,
    with_trees,
)
from tests.reduce_scenarios import REDUCE_SCENARIOS

pytestmark = pytest.mark.unit


class ModelSwitch:
    def __init__(self, replication: str) -> None:
        self.replication = replication
        self.model: SwitchModel | None = None

    def configure(self, state: SwitchState) -> None:
        self.model = SwitchModel(state)

    def send(self, port: int, frame: bytes) -> dict[int, list[bytes]]:
        assert self.model is not None
        out: dict[int, list[bytes]] = {}
        for out_port, data in self.model.process(frame, port).outputs:
            out.setdefault(out_port, []).append(data)
        return out

    def drops(self) -> Counter[int]:
        assert self.model is not None
        return self.model.counters.drops + self.model.counters.egress_drops

    def alive(self) -> bool:
        return True


@pytest.mark.parametrize("replication", ["subset", "all_ports"])
@pytest.mark.parametrize(
    "scenario",
    SCENARIOS + REDUCE_SCENARIOS + ACKMERGE_SCENARIOS,
    ids=lambda f: f.__name__.removeprefix("scenario_"),
)
def test_scenario_on_reference_model(scenario, replication: str) -> None:  # type: ignore[no-untyped-def]
    sut: SwitchUnderTest = ModelSwitch(replication)
    scenario(sut)


def test_ack_merge_cells_of_an_old_generation_do_not_count() -> None:
    """A reconfigured tree (new generation in its ack_merge entry) starts from empty cells,
    without any register being cleared."""
    sut = ModelSwitch("subset")
    sut.configure(with_trees(base_state(sut)))
    assert sut.model is not None
    assert send_ack(sut, 2, 1) == {} and send_ack(sut, 3, 1) == {}
    key = TreeKey(COMM, 1, wire.Tree.INNET)
    state = sut.model.state
    state.ack_merges[key] = replace(state.ack_merges[key], generation=2)
    assert sut.send(CHILD_PORT, ack_frame(CHILD_PORT, 1)) == {}
    assert send_ack(sut, 2, 1) == {}
    assert send_ack(sut, 3, 1) == {1: 1}
