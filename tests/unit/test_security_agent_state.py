"""Members exhausting or misleading a host agent's own state (issue 32: Medium 6, Medium 8 and
the Low items on drop-reason keys and timeouts)."""

from __future__ import annotations

import pytest

from host_agents.transport.config import EngineStats
from host_agents.transport.drops import DropLog

pytestmark = [pytest.mark.unit, pytest.mark.security]


def test_drop_reasons_make_a_bounded_number_of_counter_keys() -> None:
    """Before: the size-mismatch reason carried both sizes in its key, so one member sending
    messages of many sizes made thousands of counter keys."""
    stats = EngineStats()
    drop = DropLog(1, stats)
    for size in range(5000):
        drop(f"message size not the expected one: {size} bytes, not 10", None)
        drop(f"message of {size} bytes where 10 are expected", None)  # the old text
        drop(f"unheard-of reason {size}", None)
    assert len(stats.dropped) <= 64 + 1, f"{len(stats.dropped)} keys"
    assert stats.dropped["message size not the expected one"] == 5000
    assert sum(stats.dropped.values()) == 15000  # every drop is still counted
