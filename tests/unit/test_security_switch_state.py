"""Members wedging or misreporting through switch state (issue 32: High 4, Medium 7), on the
reference model; the same scenarios run against BMv2 in the data-plane tier
(tests/dataplane/test_scenarios.py)."""

from __future__ import annotations

import pytest

from tests.ackmerge_scenarios import scenario_ack_merge_sends_up_the_lowest_claim
from tests.dataplane_scenarios import SwitchUnderTest
from tests.reduce_scenarios import scenario_reduce_far_ahead_epoch_is_out_of_window
from tests.unit.test_switch_model import ModelSwitch

pytestmark = [pytest.mark.unit, pytest.mark.security]


@pytest.mark.parametrize(
    "scenario",
    [
        scenario_ack_merge_sends_up_the_lowest_claim,
        scenario_reduce_far_ahead_epoch_is_out_of_window,
    ],
    ids=lambda f: f.__name__.removeprefix("scenario_"),
)
def test_switch_state_attack_on_reference_model(scenario) -> None:  # type: ignore[no-untyped-def]
    sut: SwitchUnderTest = ModelSwitch("subset")
    scenario(sut)
