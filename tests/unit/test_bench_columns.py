"""Bench and reproduce count the link bytes of every op that carries a collective's data."""

from __future__ import annotations

import pytest

from controller import wire
from mininet_topos.experiments import measure

pytestmark = pytest.mark.unit

NOT_DATA = {
    wire.Op.ARRIVE,  # counted in barrier rows
    wire.Op.RELEASE,
    wire.Op.MP,  # the control plane's, not a collective's
    wire.Op.MP_REPLY,
    wire.Op.PING,
    wire.Op.PONG,
}


def test_every_data_carrying_op_is_counted() -> None:
    missing = set(wire.Op) - NOT_DATA - set(measure.DATA_COLUMNS)
    assert not missing, f"link bytes of {sorted(op.name for op in missing)} are not counted"
