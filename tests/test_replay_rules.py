"""The adaptive rule and the memory budget in the replay kernel (sweeper/policy.py): pure
functions with their state passed in and out, compiled into the kernel; the adaptive rule
stops re-sweeps at no higher peak memory on every generated kind; the budget holds memory
under it by sweeping beyond the rule."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.policy import ADAPTIVE_STATE, budget_order, decide, decide_adaptive, over_budget
from sweepq.sweeper.replay import M, replay
from sweepq.sweeper.traces import KINDS, generate


def test_adaptive_rule_keeps_what_came_back_and_sweeps_a_swept_queue_every_interval():
    st = np.zeros(ADAPTIVE_STATE, np.int64)
    assert decide_adaptive(10, 5, 0, False, st, 2, 5) == -1  # y <= 2x, not swept: as the seed
    assert decide_adaptive(300, 100, 0, False, st, 2, 5) == 105  # y > 2x: the seed's buffer
    assert decide_adaptive(300, 100, 250, False, st, 2, 5) == 250  # what came back stays
    assert decide_adaptive(150, 100, 0, True, st, 2, 5) == 105  # swept: the rear goes every interval
    assert decide_adaptive(100, 100, 0, True, st, 2, 5) == -1  # nothing beyond the buffer
    st2 = np.zeros(ADAPTIVE_STATE, np.int64)
    for _ in range(20):
        decide_adaptive(0, 100, 0, False, st2, 2, 5)
    assert 90 <= st2[0] >> 4 <= 100  # the smoothed service rate converges on x


def test_rules_compile_with_numba_to_the_same_answers():
    jd, ja = numba.njit(decide), numba.njit(decide_adaptive)
    rng = np.random.default_rng(1)
    s1, s2 = np.zeros(ADAPTIVE_STATE, np.int64), np.zeros(ADAPTIVE_STATE, np.int64)
    for y, x, back, swept in rng.integers(0, 500, (200, 4)):
        assert jd(y, x, 2, 5) == decide(y, x, 2, 5)
        assert ja(y, x, back, bool(swept % 2), s1, 2, 5) == decide_adaptive(y, x, back, bool(swept % 2), s2, 2, 5)
    chosen = np.zeros(4, np.int64)
    assert over_budget(100, 0) == 0 and over_budget(100, 150) == 0 and over_budget(200, 150) == 50
    n = budget_order(np.array([10, 40, 0, 30]), 60, chosen)
    assert list(chosen[:n]) == [1, 3]  # most sweepable first, until the need is covered


@pytest.mark.parametrize("kind", KINDS)
def test_adaptive_rule_does_not_thrash_at_no_higher_peak(kind):
    t = generate(kind, seconds=600, rate=50, queues=12 if kind == "many-queues" else 2, priorities=True, seed=7)
    seed = replay(t, SweepPolicy(), record_header=HEAD_LEN, per_interval=False).overall()
    adaptive = replay(t, SweepPolicy(rule="adaptive"), record_header=HEAD_LEN, per_interval=False).overall()
    assert adaptive["reswept_share"] <= 0.10
    assert adaptive["peak_memory_with_sweeper_bytes"] <= seed["peak_memory_with_sweeper_bytes"]
    if kind == "slow-drain":  # the case the seed's rule thrashes on, so the test shows a difference
        assert seed["reswept_share"] > 0.2 and adaptive["reswept_share"] < 0.02


def test_memory_budget_sweeps_beyond_the_rule_until_under_it():
    t = generate("slow-consumer", seconds=120, rate=300, queues=4, size=400, seed=3)
    lax = SweepPolicy(factor=1000)  # a rule that never sweeps here: only the budget can
    free = replay(t, lax, record_header=HEAD_LEN)
    assert free.overall()["msgs_swept"] == 0
    budget = free.overall()["peak_memory_with_sweeper_bytes"] // 3
    r = replay(t, SweepPolicy(factor=1000, memory_budget=budget), record_header=HEAD_LEN)
    o = r.overall()
    assert o["budget_msgs"] > 0 and o["budget_intervals"] > 0
    acted = r.totals[:, M["budget_msgs"]] > 0
    assert np.all(r.totals[acted, M["mem_bytes"]] <= budget)  # back under it whenever it acted
    assert o["peak_memory_with_sweeper_bytes"] < free.overall()["peak_memory_with_sweeper_bytes"]
    # It keeps each queue's buffer of x + extra: never more swept than a rule sweep could.
    x = r.intervals[:, :, M["x"]]
    assert np.all(r.intervals[:, :, M["mem_msgs"]][r.intervals[:, :, M["budget_msgs"]] > 0] >= 0)
    assert np.all((r.intervals[:, :, M["decision"]] == -1) | (r.intervals[:, :, M["decision"]] >= x + 5))
