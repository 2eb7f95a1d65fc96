"""Shared fixtures: one seed for every randomised test, printed so a failure can be replayed.

The default is fixed so CI is repeatable; set NETCOLL_TEST_SEED to explore other seeds.
"""

from __future__ import annotations

import os
import random

import pytest

DEFAULT_SEED = 20261121


@pytest.fixture
def test_seed(request: pytest.FixtureRequest) -> int:
    seed = int(os.environ.get("NETCOLL_TEST_SEED", DEFAULT_SEED))
    print(f"seed={seed} (replay with NETCOLL_TEST_SEED={seed})")
    return seed


@pytest.fixture
def test_rng(test_seed: int) -> random.Random:
    return random.Random(test_seed)
