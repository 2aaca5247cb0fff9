"""sweeper/workspace.py and the replay's use of it: a work array is reused when one of its dtype
is large enough, lent to one caller at a time, kept within the limits; a replay on pooled
(dirty) work arrays gives the same answers as one on fresh arrays, compiled and interpreted;
and nothing a replay returns aliases the arrays a later replay overwrites."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from sweepq.sweeper import SweepPolicy
from sweepq.sweeper import replay as rp
from sweepq.sweeper.traces import generate
from sweepq.sweeper.workspace import Workspace


@pytest.fixture
def fresh_pool():
    rp.drop_work()
    yield rp.POOL
    rp.drop_work()


def test_an_array_given_back_is_taken_again_for_a_need_it_covers():
    w = Workspace()
    a = w.take(100, np.int64)
    assert len(a) >= 100 and a.dtype == np.int64
    w.give(a)
    assert w.take(50, np.int64) is a  # large enough: reused
    w.give(a)
    assert w.take(50, np.int32) is not a  # another dtype: fresh
    big = w.take(101, np.int64)
    assert big is not a and len(big) >= 101  # too small: fresh
    w.give(big)
    assert w.take(10, np.int64) is a  # the smallest that fits


def test_an_array_lent_is_not_lent_again_until_given_back():
    w = Workspace()
    w.give(np.empty(100, np.int8))
    a = w.take(10, np.int8)
    b = w.take(10, np.int8)
    assert a is not b and not np.shares_memory(a, b)
    w.give(a)
    w.give(a)  # given twice: kept once
    assert len(w.kept()) == 1


def test_at_most_four_of_a_dtype_and_the_byte_limit_are_kept_the_larger_first():
    w = Workspace(per_type=4, max_bytes=1000)
    for n in (10, 20, 30, 40, 50):
        w.give(np.empty(n, np.int8))
    assert sorted(len(a) for a in w.kept()) == [20, 30, 40, 50]
    w.give(np.empty(100, np.int64))  # 800 bytes: over 1000 in all, the smallest go
    assert w.nbytes <= 1000
    assert any(len(a) == 100 and a.dtype == np.int64 for a in w.kept())
    w.give(np.empty(200, np.int64))  # 1600 bytes alone: dropped
    assert w.nbytes <= 1000 and all(len(a) != 200 for a in w.kept())
    assert any(len(a) == 100 and a.dtype == np.int64 for a in w.kept())  # not dropped for it
    w.clear()
    assert w.kept() == [] and w.nbytes == 0


def test_threads_never_hold_the_same_array():
    w = Workspace()
    for _ in range(4):
        w.give(np.empty(64, np.int64))
    held: list[int] = []
    clash = []
    lock = threading.Lock()

    def worker():
        for _ in range(2000):
            a = w.take(64, np.int64)
            with lock:
                if id(a) in held:
                    clash.append(a)
                held.append(id(a))
            with lock:
                held.remove(id(a))
            w.give(a)

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert clash == [] and len(w.kept()) <= 4


@pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="no fork hooks")
def test_a_child_forked_while_the_pool_was_locked_takes_and_gives(fresh_pool):
    """The pool's fork hook (Workspace._reinit_after_fork): a child forked while another
    thread held the lock (here the parent itself) has a lock of its own, free."""
    import time

    fresh_pool.give(np.empty(16, np.int64))
    with fresh_pool._lock:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if it can take and give back
            try:
                a = fresh_pool.take(16, np.int64)
                fresh_pool.give(a)
                os._exit(0 if len(fresh_pool.kept()) == 1 else 1)
            finally:
                os._exit(2)
    end = time.monotonic() + 60  # a child stuck on the parent's lock never ends: bounded
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < end:
        time.sleep(0.01)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0


def _trace():
    return generate("many-queues", seconds=20, rate=300, queues=40, seed=5)


def _same(a, b):
    assert a.totals.tolist() == b.totals.tolist()
    assert a.summary.tolist() == b.summary.tolist()
    assert (a.intervals is None) == (b.intervals is None)
    if a.intervals is not None:
        assert np.array_equal(a.intervals, b.intervals)


@pytest.mark.parametrize("rule", ["seed", "adaptive"])
def test_a_replay_on_dirty_pooled_arrays_answers_as_on_fresh_ones(fresh_pool, rule):
    t = _trace()
    policy = SweepPolicy(rule=rule, memory_budget=200_000)
    fresh = rp.replay(t, policy, record_header=40)
    n = rp.work_slots(rp.lane_counts(t))
    # Work arrays full of garbage, larger than needed: what a previous, larger replay leaves.
    rp.drop_work()
    rp.keep_work(np.full(n + 999, -7, np.int64), np.full(n + 999, 3, np.int8), np.full(n + 999, -9, np.int32))
    pooled = rp.replay(t, policy, record_header=40)
    _same(pooled, fresh)
    assert all(len(a) == n + 999 for a in fresh_pool.kept())  # those were used, and kept again


def test_nothing_returned_aliases_the_work_arrays_a_later_replay_overwrites(fresh_pool):
    t = _trace()
    first = rp.replay(t, record_header=40)
    saved = (first.totals.copy(), first.summary.copy(), first.intervals.copy())
    kept = fresh_pool.kept()
    assert len(kept) == 3  # prefix, marker, swept_at, back in the pool
    for mine in (first.totals, first.summary, first.intervals):
        assert not any(np.shares_memory(mine, k) for k in kept)
    other = generate("slow-consumer", seconds=20, rate=300, queues=3, seed=2)
    rp.replay(other, SweepPolicy(factor=3), record_header=40)  # reuses (overwrites) them
    assert np.array_equal(first.totals, saved[0])
    assert np.array_equal(first.summary, saved[1])
    assert np.array_equal(first.intervals, saved[2])


def test_two_threads_replaying_at_once_answer_as_one_alone(fresh_pool):
    t = _trace()
    alone = rp.replay(t, record_header=40)
    out: list = [None, None]

    def run(i):
        for _ in range(3):
            out[i] = rp.replay(t, record_header=40)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    for r in out:
        _same(r, alone)


_CHILD = r"""
import json, numpy as np
from sweepq.sweeper import replay as rp
from sweepq.sweeper.traces import generate
t = generate("many-queues", seconds=8, rate=100, queues=6, seed=5)
fresh = rp.replay(t, record_header=40)
n = rp.work_slots(rp.lane_counts(t))
rp.drop_work()
rp.keep_work(np.full(n + 5, -7, np.int64), np.full(n + 5, 3, np.int8), np.full(n + 5, -9, np.int32))
pooled = rp.replay(t, record_header=40)
print(json.dumps({"same": fresh.totals.tolist() == pooled.totals.tolist()
                  and fresh.summary.tolist() == pooled.summary.tolist(), "totals": fresh.totals.tolist()}))
"""


def test_interpreted_the_pooled_replay_answers_as_the_fresh_one_and_as_compiled():
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    p = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    interpreted = json.loads(p.stdout.strip().splitlines()[-1])
    assert interpreted["same"]
    compiled = rp.replay(generate("many-queues", seconds=8, rate=100, queues=6, seed=5), record_header=40)
    assert interpreted["totals"] == compiled.totals.tolist()


def test_work_bytes_per_slot_is_what_work_of_takes():
    prefix, marker, swept_at = rp.work_of(1000)
    assert (prefix.itemsize + marker.itemsize + swept_at.itemsize) == rp.WORK_BYTES_PER_SLOT == 13
    assert min(len(prefix), len(marker), len(swept_at)) >= 1000
    rp.keep_work(prefix, marker, swept_at)


def test_the_bench_alternates_fresh_and_pooled_calls_and_tabulates_them(tmp_path, fresh_pool):
    from sweepq.bench.replay_bench import work, work_table
    from sweepq.sweeper.traces import write

    path = str(tmp_path / "t.parquet")
    write(generate("many-queues", seconds=4, rate=50, queues=5, seed=1), path)
    doc = work(path, rounds=2)
    assert [r["work"] for r in doc["rows"]] == ["fresh", "pooled", "fresh", "pooled"]
    assert doc["work_bytes"] % rp.WORK_BYTES_PER_SLOT == 0
    table = work_table(doc)
    assert table.count("| fresh |") == 2 and table.count("| pooled |") == 2
