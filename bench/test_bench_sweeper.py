"""Sweeper benchmarks for pytest-benchmark: the engine's sweep against the blob store alone
writing the same records (the raw limit), measured in the same run.

    pytest bench/ --benchmark-only

Each round refills the queue in ``setup``, so only the sweep itself is timed.
"""

from __future__ import annotations

import pytest

from sweepq.bench.sweeping import IO, _manager, _payload
from sweepq.sweeper.runs import record_ends

N = 20_000


@pytest.fixture(scope="module")
def qm():
    m = _manager()
    m.define_queue("S")
    yield m
    m.close()


@pytest.mark.parametrize("size", [100, 1024])
def test_store_alone_writes_the_records(benchmark, qm, size):
    store = qm.blob_store()
    records = [b"\x15" + bytes(20) + _payload(size, i) for i in range(N)]
    ids = [i.to_bytes(24, "big") for i in range(N)]
    benchmark.group = f"sweep {N:,} x {size} B"
    benchmark.extra_info.update(ops=N, baseline=True)
    ends = record_ends(records, store.max_blob_bytes, store.max_blob_records)
    benchmark.pedantic(store.write_pending, args=(b"RAW/0", records, ids, ends), rounds=5, warmup_rounds=1)


@pytest.mark.parametrize("size", [100, 1024])
def test_engine_sweep(benchmark, qm, size):
    h = qm.connect().open("S", IO)
    payloads = [_payload(size, i) for i in range(N + 5)]

    def refill():
        q = qm.internal.queue("S")
        q.sweep.unsweep_all()  # bring anything swept back, so every round starts in memory
        while q.depth:
            h.get()
        for p in payloads:
            h.put(p)
        q.take_obtained()  # the drain above was set-up, not service: start a fresh interval
        return (), {}

    benchmark.group = f"sweep {N:,} x {size} B"
    benchmark.extra_info.update(ops=N)
    report = benchmark.pedantic(qm.sweeper.run_once, setup=refill, rounds=5)
    assert report.decision("S").msgs_swept == N  # a sweep that moved nothing would be no benchmark
