"""The sweep rule of seed 003 at its edges: sweep when y > 2x, keep x + 5."""

from __future__ import annotations

import pytest

from sweepq.sweeper import SweepPolicy, buffer_size, should_sweep, to_sweep
from sweepq.sweeper.policy import decide


@pytest.mark.parametrize(
    "y,x,sweeps",
    [
        (20, 10, False),  # y = 2x: not greater
        (21, 10, True),  # y = 2x + 1
        (0, 0, False),  # empty queue
        (1, 0, True),  # unserviced: any message is more than twice nothing
        (19, 10, False),
        (1_000_000, 499_999, True),
    ],
)
def test_should_sweep_edges(y, x, sweeps):
    assert should_sweep(y, x, 2) is sweeps


def test_buffer_is_service_rate_plus_five():
    assert buffer_size(0, 5) == 5
    assert buffer_size(10, 5) == 15


@pytest.mark.parametrize(
    "y,x,moved",
    [
        (21, 10, 6),  # sweeps; keeps 15 of 21
        (20, 10, 0),  # does not sweep
        (3, 0, 0),  # sweeps, but 3 <= 5 stay as the buffer: a small queue moves nothing
        (5, 0, 0),
        (6, 0, 1),
        (100, 0, 95),
    ],
)
def test_to_sweep(y, x, moved):
    assert to_sweep(y, x, 2, 5) == moved


def test_policy_is_configurable_and_validated():
    p = SweepPolicy(factor=3, extra=0)
    assert p.keep(30, 10) is None
    assert p.keep(31, 10) == 10
    assert SweepPolicy().keep(21, 10) == 15
    with pytest.raises(ValueError):
        SweepPolicy(interval=0)
    with pytest.raises(ValueError):
        SweepPolicy(factor=-1)


def test_rule_compiles_with_numba():
    """The replay kernel compiles this very function: it must stay numba-clean."""
    import numba

    f = numba.njit(decide)
    for y, x in [(21, 10), (20, 10), (0, 0), (1, 0), (7, 1)]:
        assert f(y, x, 2, 5) == decide(y, x, 2, 5)
    assert f(21, 10, 2, 5) == 15 and f(20, 10, 2, 5) == -1
