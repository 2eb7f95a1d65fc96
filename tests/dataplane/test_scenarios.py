"""The single-switch scenarios of tests/dataplane_scenarios.py on BMv2, in both replication
modes: exact frames out on every port, and nothing else."""

from __future__ import annotations

import pytest

from mininet_topos.network.single_switch import SingleSwitchLab
from tests.ackmerge_scenarios import ACKMERGE_SCENARIOS
from tests.dataplane_scenarios import SCENARIOS
from tests.reduce_scenarios import REDUCE_SCENARIOS


@pytest.mark.parametrize(
    "scenario",
    SCENARIOS + REDUCE_SCENARIOS + ACKMERGE_SCENARIOS,
    ids=lambda f: f.__name__.removeprefix("scenario_"),
)
def test_scenario_on_bmv2(lab: SingleSwitchLab, scenario) -> None:  # type: ignore[no-untyped-def]
    scenario(lab)
    assert lab.alive()
