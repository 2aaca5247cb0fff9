"""Fidelity, proven: the live engine and the replay kernel over the same traces agree on every
interval's decision and counts.

The engine runs for real: puts and gets through the public API, the sweeper's
``run_once()`` at the end of each interval of a manual clock. The kernel replays the same
trace. Small blobs make every trace cross many blob boundaries.
"""

from __future__ import annotations

import numpy as np
import pytest

from sweepq.blobstore import MemoryStore
from sweepq.engine import GMO, MD, OO, DurabilitySettings, MQError, Persistence, QueueManager, Reason, SweeperSettings
from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper import ManualClock, SweepPolicy
from sweepq.sweeper.replay import M, replay
from sweepq.sweeper.traces import PUT, generate

BLOB_RECORDS = 16
BLOB_BYTES = 4096


def run_engine(trace, policy, in_memory_store=False):
    """Drive the live engine over ``trace``; return per (queue, interval) engine figures.

    ``in_memory_store``: blobs in a MemoryStore, whose own memory the budget does not count
    (RocksDB's memtables would count, and the replay has no RocksDB to model)."""
    bounds = {"max_blob_records": BLOB_RECORDS, "max_blob_bytes": BLOB_BYTES, "dictionaries": False}
    interval_us = int(policy.interval * 1e6)
    t0 = int(trace.time_us[0])
    n_int = int((int(trace.time_us[-1]) - t0) // interval_us + 1)
    clock = ManualClock()
    out = {q: [] for q in trace.queues}
    with QueueManager(
        clock=clock,
        sweeping=SweeperSettings(run=False, policy=policy),
        durability=DurabilitySettings(store_options=None if in_memory_store else bounds),
        store=MemoryStore(**bounds) if in_memory_store else None,
    ) as qm:
        for q in trace.queues:
            qm.define_queue(q)
        conn = qm.connect()
        handles = [conn.open(q, OO.OUTPUT | OO.INPUT_SHARED) for q in trace.queues]
        qs = [qm._queue(q) for q in trace.queues]
        payloads = {}
        i, n = 0, len(trace)
        for cur in range(n_int):
            end = t0 + (cur + 1) * interval_us
            while i < n and trace.time_us[i] < end:
                h = handles[trace.queue[i]]
                if trace.op[i] == PUT:
                    size = int(trace.nbytes[i])
                    data = payloads.setdefault(size, b"x" * size)
                    pers = Persistence.PERSISTENT if trace.persistent[i] else Persistence.NOT_PERSISTENT
                    h.put(data, MD(priority=int(trace.priority[i]), persistence=pers))
                else:
                    try:
                        h.get(GMO.NO_WAIT)
                    except MQError as e:
                        assert e.reason == Reason.NO_MSG_AVAILABLE
                i += 1
            clock.advance(policy.interval)
            report = qm.sweeper.run_once()
            for q, queue in zip(trace.queues, qs, strict=True):
                d = report.decision(q)
                st = queue.sweep.stats()
                out[q].append(
                    {
                        "decision": -1 if d.keep is None else d.keep,
                        "y": d.y,
                        "x": d.x,
                        "depth": queue.depth,
                        "mem_msgs": st.msgs_in_memory,
                        "mem_bytes": st.bytes_in_memory,
                        "swept_msgs": st.msgs_swept,
                        "swept_bytes": st.bytes_swept_raw,
                        "blobs": st.blobs,
                        "unsweeps": st.unsweeps,
                        "bytes_unswept": queue.tier.counters.bytes_unswept_raw,
                        "reswept": st.msgs_reswept,
                    }
                )
    return out


def compare(trace, policy, in_memory_store=False):
    engine = run_engine(trace, policy, in_memory_store)
    r = replay(trace, policy, record_header=HEAD_LEN, max_blob_bytes=BLOB_BYTES, max_blob_records=BLOB_RECORDS)
    checked = 0
    for q in trace.queues:
        rows = engine[q]
        kern = r.intervals[r.queues.index(q)]
        assert len(rows) == len(kern)
        cum_read = np.cumsum(kern[:, M["blobs_read"]])
        cum_bytes = np.cumsum(kern[:, M["bytes_read"]])
        cum_again = np.cumsum(kern[:, M["msgs_reswept"]])
        for i, row in enumerate(rows):
            got = {
                name: int(kern[i, M[name]])
                for name in (
                    "decision",
                    "y",
                    "x",
                    "depth",
                    "mem_msgs",
                    "mem_bytes",
                    "swept_msgs",
                    "swept_bytes",
                    "blobs",
                )
            }
            got["unsweeps"] = int(cum_read[i])
            got["bytes_unswept"] = int(cum_bytes[i])
            got["reswept"] = int(cum_again[i])
            assert got == row, f"queue {q}, interval {i}: kernel {got} != engine {row}"
            checked += 1
    return checked, r


@pytest.mark.parametrize(
    "kind,priorities,rate,interval",
    [
        ("steady", False, 40.0, 5.0),
        # Within a 5 s interval consumers keep up with a 1 s burst (y <= 2x): no sweep. At 1 s
        # intervals the burst outruns them, so the rule sweeps and later gets unsweep.
        ("bursty", False, 40.0, 1.0),
        ("bursty", True, 40.0, 1.0),
        ("slow-consumer", True, 60.0, 5.0),
        ("diurnal", True, 50.0, 5.0),
    ],
)
def test_kernel_matches_engine(kind, priorities, rate, interval):
    trace = generate(kind, seconds=60, rate=rate, queues=2, size=120, priorities=priorities, seed=11)
    checked, r = compare(trace, SweepPolicy(interval=interval))
    assert checked >= 2 * 12
    if kind == "steady":  # serviced as fast as it grows: the rule keeps it all in memory
        assert r.totals[:, M["swept_msgs"]].max() < 20
    else:  # the trace did exercise sweeping and unsweeping (a trivial match proves nothing)
        assert r.totals[:, M["blobs_written"]].sum() > 5
        assert r.totals[:, M["blobs_read"]].sum() > 0


def test_kernel_matches_engine_with_other_rule_parameters():
    trace = generate("slow-consumer", seconds=40, rate=80, queues=3, size=200, priorities=True, seed=3)
    checked, r = compare(trace, SweepPolicy(factor=3, extra=0, interval=2.0))
    assert checked >= 3 * 20 and r.totals[:, M["blobs_read"]].sum() > 0


def test_recorded_run_replays_to_the_same_counts(tmp_path):
    """A queue manager records its own trace; the replay of that trace matches the run."""
    from sweepq.sweeper.traces import read

    path = tmp_path / "run.parquet"
    clock = ManualClock()
    policy = SweepPolicy(interval=1.0)
    with QueueManager(
        clock=clock,
        sweeping=SweeperSettings(run=False, policy=policy, trace_path=path),
        durability=DurabilitySettings(store_options={"max_blob_records": BLOB_RECORDS, "max_blob_bytes": BLOB_BYTES}),
    ) as qm:
        qm.define_queue("A")
        h = qm.connect().open("A", OO.OUTPUT | OO.INPUT_SHARED)
        swept = []
        for _sec in range(10):
            for k in range(50):
                clock.advance(0.01)
                h.put(b"x" * (100 + k), MD(priority=k % 3))
                if k % 4 == 0:
                    h.get()
            clock.advance(1.0 - 0.5)  # to the end of this one-second interval
            qm.sweeper.run_once()
            swept.append(qm._queue("A").sweep.stats().msgs_swept)
    trace = read(path)
    assert len(trace) == 10 * (50 + 13)
    r = replay(trace, policy, record_header=HEAD_LEN, t0=0, max_blob_bytes=BLOB_BYTES, max_blob_records=BLOB_RECORDS)
    assert list(r.metric("swept_msgs", "A")[:10]) == swept


@pytest.mark.parametrize("kind", ["slow-drain", "bursty", "slow-consumer"])
def test_kernel_matches_engine_with_the_adaptive_rule(kind):
    trace = generate(kind, seconds=60, rate=50.0, queues=2, size=120, priorities=True, seed=5)
    checked, r = compare(trace, SweepPolicy(interval=2.0, rule="adaptive"))
    assert checked >= 2 * 25
    assert r.totals[:, M["blobs_written"]].sum() > 5 and r.totals[:, M["blobs_read"]].sum() > 0


def test_kernel_matches_engine_with_a_memory_budget():
    """A budget well under what the rule keeps: the sweeper sweeps beyond the rule, in the
    engine exactly as in the replay."""
    # Bursts that consumers keep up with within 5 s (y <= 2x): the rule alone never sweeps.
    trace = generate("bursty", seconds=60, rate=60.0, queues=3, size=300, priorities=True, seed=7)
    free = replay(
        trace,
        SweepPolicy(interval=5.0),
        record_header=HEAD_LEN,
        max_blob_bytes=BLOB_BYTES,
        max_blob_records=BLOB_RECORDS,
    )
    peak = int(free.totals[:, M["mem_bytes"]].max())
    policy = SweepPolicy(interval=5.0, memory_budget=peak // 4)
    checked, r = compare(trace, policy, in_memory_store=True)
    assert checked >= 3 * 12
    assert r.totals[:, M["mem_bytes"]].max() < peak  # the budget acted
    assert r.totals[:, M["blobs_written"]].sum() > free.totals[:, M["blobs_written"]].sum()
