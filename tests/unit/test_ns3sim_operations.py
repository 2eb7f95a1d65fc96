"""What each simulated rank runs (one root, or every rank a root at once) and which ranks the
simulation counts wrong; pure Python, no ns-3."""

from __future__ import annotations

import random

import pytest

from host_agents.collectives import collective
from mininet_topos.ns3sim.operations import EveryRoot, OneRoot, rank_work

pytestmark = pytest.mark.unit
BCAST = collective("bcast")


def owned(rank: int, n: int) -> bytes:
    return random.Random(rank).randbytes(n)


def test_a_rank_with_one_roots_bytes_wrong_is_counted_once() -> None:
    ranks, size = 4, 100
    right = [[owned(root, size) for root in range(ranks)] for _ in range(ranks)]
    assert EveryRoot().wrong(BCAST, owned, size, right, False) == 0
    one_wrong = [list(out) for out in right]
    one_wrong[2][3] = bytes(size)
    one_wrong[1][0], one_wrong[1][1] = bytes(size), bytes(size)
    assert EveryRoot().wrong(BCAST, owned, size, one_wrong, False) == 2
    assert EveryRoot().wrong(BCAST, owned, size, [*right[:3], None], False) == 1
    # hollow: lengths only
    assert EveryRoot().wrong(BCAST, owned, size, one_wrong, True) == 0


def test_one_root_checks_every_rank_against_that_roots_bytes() -> None:
    outputs = [owned(2, 50)] * 3
    assert OneRoot(2).wrong(BCAST, owned, 50, outputs, False) == 0
    assert OneRoot(1).wrong(BCAST, owned, 50, outputs, False) == 3


def test_the_modes_are_the_workloads() -> None:
    assert rank_work("single", 3, BCAST) == OneRoot(3)
    assert isinstance(rank_work("all_roots", 0, BCAST), EveryRoot)
    with pytest.raises(ValueError, match="rooted collective, not barrier"):
        rank_work("all_roots", 0, collective("barrier"))
    with pytest.raises(ValueError, match="mode 'overlap'"):
        rank_work("overlap", 0, BCAST)
