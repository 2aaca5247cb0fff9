"""Durability benchmarks for pytest-benchmark (issue 10 §7), the loops of bench/durable.py:

    pytest bench/test_bench_durable.py --benchmark-only

Each group has a baseline measured in the same run and the summary prints ratios to it
(bench/conftest.py): persist-queue's fastest SQLiteQueue setting for the process-crash-safe
group, the fsync floor for the power-safe one, one producer for the group-commit one.
``sweepq bench durable`` measures the same with interleaved rounds and paired ratios, which
suit a noisy shared disk better; these are for tracking one machine over time.
"""

from __future__ import annotations

import os

import pytest

from sweepq.bench import durable as d

PAYLOAD = b"x" * 1024
CRASH_N = 1_000
POWER_N = 100
PRODUCERS_N = 400
RECOVERY_N = int(os.environ.get("SWEEPQ_BENCH_RECOVERY_MESSAGES", "100000"))

CRASH_BASELINE = d.SQLITE_OFF


def _fill_drain(o: d.Opened, n: int) -> None:
    put, get = o.put, o.get
    for _ in range(n):
        put(PAYLOAD)
    for _ in range(n):
        get()


def _bench_fill_drain(benchmark, tmp_path, make, n, group, baseline):
    o = make(str(tmp_path / "q"))
    try:
        benchmark.group = group
        benchmark.extra_info.update(ops=n, baseline=baseline)
        benchmark.pedantic(_fill_drain, args=(o, n), rounds=5, iterations=1, warmup_rounds=1)
    finally:
        o.close()


@pytest.mark.parametrize("name", list(d.crash_safe_contenders()[0]))
def test_crash_safe_put_then_get(benchmark, tmp_path, name):
    make = d.crash_safe_contenders()[0][name]
    group = f"put {CRASH_N:,} then get them, 1 KiB, process-crash-safe"
    _bench_fill_drain(benchmark, tmp_path, make, CRASH_N, group, name == CRASH_BASELINE)


@pytest.mark.parametrize("name", list(d.power_safe_contenders()))
def test_power_safe_put_then_get(benchmark, tmp_path, name):
    make = d.power_safe_contenders()[name]
    group = f"put {POWER_N:,} then get them, 1 KiB, power-safe"
    _bench_fill_drain(benchmark, tmp_path, make, POWER_N, group, name == d.FLOOR)


@pytest.mark.parametrize(("commit", "k"), [(False, 1), (False, 8), (True, 1), (True, 8)])
def test_producers_group_commit(benchmark, tmp_path, commit, k):
    runner = d._Producers(str(tmp_path / "q"), k, commit, PRODUCERS_N * 10 + 1000)
    try:
        kind = "put+commit" if commit else "put"
        benchmark.group = f'{PRODUCERS_N} persistent {kind}, 1 KiB, sync="commit"'
        benchmark.extra_info.update(ops=PRODUCERS_N, baseline=k == 1)
        benchmark.pedantic(runner.run, args=(PRODUCERS_N, PAYLOAD), rounds=5, iterations=1, warmup_rounds=1)
    finally:
        runner.close()


@pytest.fixture(scope="module")
def recovery_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("recovery") / "q")
    d._child(d._BUILD_CHILD, path, str(RECOVERY_N))
    return path


def test_recovery_open(benchmark, recovery_dir):
    """Open (and close) a data directory of RECOVERY_N persistent messages, half of them swept."""
    from sweepq.engine import QueueManager, SweeperSettings

    def open_close():
        qm = QueueManager.open(recovery_dir, sweeping=SweeperSettings(run=False))
        assert qm.recovery.messages == RECOVERY_N
        qm.close()

    benchmark.group = f"open {RECOVERY_N:,} persistent messages, half swept"
    benchmark.extra_info.update(ops=RECOVERY_N, baseline=True)
    benchmark.pedantic(open_close, rounds=3, iterations=1)
