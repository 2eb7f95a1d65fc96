"""The single-switch scenarios on the reference model (the same ones run on BMv2 in
tests/dataplane), in both replication modes."""

from __future__ import annotations

from collections import Counter

import pytest

from controller.switch_model import SwitchModel
from controller.switch_state import SwitchState
from tests.ackmerge_scenarios import ACKMERGE_SCENARIOS
from tests.dataplane_scenarios import SCENARIOS, SwitchUnderTest
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
