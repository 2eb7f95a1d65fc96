"""host_agents/transport/result_order.py: the chunk a RESULT's seq names."""

from __future__ import annotations

import pytest

from host_agents.transport.result_order import named_before

pytestmark = pytest.mark.unit


def test_a_result_names_the_epoch_and_chunk_number_of_its_predecessor() -> None:
    assert named_before(0) is None  # an answer from a slot, or the root's first
    assert named_before(7 << 16 | 3) == (7, 3)
    assert named_before(0xFFFF << 16 | 0xFFFF) == (0xFFFF, 0xFFFF)
    assert named_before(1 << 16) == (1, 0)
