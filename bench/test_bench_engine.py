"""Engine benchmarks for pytest-benchmark: sweepq against what a user would pick instead.

    pytest bench/ --benchmark-only

Each group has a baseline measured in the same run; the summary prints ratios.
"""

from __future__ import annotations

import pytest

from sweepq.bench.workloads import SweepqPairs, pairs_deque, pairs_queue_queue

N = 20_000
PAYLOAD = b"x" * 1024


@pytest.fixture(scope="module")
def sweepq_pairs():
    sq = SweepqPairs()
    yield sq
    sq.close()


def _run(benchmark, fn, baseline=False):
    benchmark.group = "put+get pairs, 1 KiB, non-persistent"
    benchmark.extra_info["ops"] = N
    benchmark.extra_info["baseline"] = baseline
    benchmark.pedantic(fn, args=(N, PAYLOAD), rounds=15, iterations=1, warmup_rounds=1)


def test_pairs_queue_queue(benchmark):
    _run(benchmark, pairs_queue_queue, baseline=True)


def test_pairs_deque_with_lock(benchmark):
    _run(benchmark, pairs_deque)


def test_pairs_sweepq(benchmark, sweepq_pairs):
    _run(benchmark, sweepq_pairs)
