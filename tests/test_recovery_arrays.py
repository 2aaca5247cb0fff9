"""The array helpers of recovery and the checkpoint (engine/durable/packed.py) against numpy's own answers:
they stand in for np.unique and np.isin where those cost a reopen most of its time."""

from __future__ import annotations

import numpy as np
import pytest

from sweepq.engine.durable.packed import ascending_unique, in_ascending


@pytest.mark.parametrize(
    "values",
    [
        [],
        [7],
        [1, 2, 3, 10, 11],  # ascending already: given back as it is
        [5, 5, 6],  # a repeat in ascending order
        [9, 3, 3, 1, 12, 9],  # any order
        list(range(1000, 0, -1)),
    ],
)
def test_ascending_unique_is_np_unique(values):
    a = np.array(values, np.uint64)
    assert ascending_unique(a).tolist() == np.unique(a).tolist()


def test_ascending_unique_of_random_numbers():
    rng = np.random.default_rng(7)
    for _ in range(20):
        a = rng.integers(0, 50, rng.integers(0, 40)).astype(np.uint64)
        assert ascending_unique(a).tolist() == np.unique(a).tolist()


def test_in_ascending_is_np_isin():
    rng = np.random.default_rng(8)
    for _ in range(20):
        values = rng.integers(0, 60, 30).astype(np.uint64)
        ascending = np.unique(rng.integers(0, 60, rng.integers(0, 30))).astype(np.uint64)
        assert in_ascending(values, ascending).tolist() == np.isin(values, ascending).tolist()
