"""Traces: the format, reading and writing, validation errors, and the synthetic kinds."""

from __future__ import annotations

import numpy as np
import pytest

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import SUMMARY, M, replay
from sweepq.sweeper.traces import GET, KINDS, PUT, Trace, TraceError, generate, read, write


def test_csv_round_trip_and_hand_made_trace(tmp_path):
    p = tmp_path / "hand.csv"
    p.write_text(
        "time_us,queue,op,bytes,priority,persistent\n"
        "0,A,put,100,5,true\n"
        "10,B,put,50,0,false\n"
        "20,A,get,0,0,false\n"
        "30,A,GET,0,0,false\n"
    )
    t = read(p)
    assert t.queues == ["A", "B"] and list(t.op) == [PUT, PUT, GET, GET]
    assert list(t.priority) == [5, 0, 0, 0]
    write(t, tmp_path / "again.parquet")
    t2 = read(tmp_path / "again.parquet")
    assert np.array_equal(t2.time_us, t.time_us) and t2.queues == t.queues
    r = replay(t, record_header=HEAD_LEN)
    assert r.summary_of("A")["gets"] == 1 and r.summary_of("A")["gets_empty"] == 1


def _cols(**over):
    cols = {
        "time_us": [0, 5, 9],
        "queue": ["A"] * 3,
        "op": ["put"] * 3,
        "bytes": [1, 2, 3],
        "priority": [0, 0, 0],
        "persistent": [False] * 3,
    }
    cols.update(over)
    return cols


@pytest.mark.parametrize(
    "over,column,row",
    [
        ({"time_us": [0, -1, 9]}, "time_us", 1),
        ({"time_us": [0, 9, 5]}, "time_us", 2),
        ({"op": ["put", "peek", "get"]}, "op", 1),
        ({"priority": [0, 0, 10]}, "priority", 2),
        ({"bytes": [1, -2, 3]}, "bytes", 1),
    ],
)
def test_bad_traces_name_column_and_row(over, column, row):
    with pytest.raises(TraceError) as ei:
        Trace.from_columns(_cols(**over))
    assert (ei.value.column, ei.value.row) == (column, row)
    assert f"row {row}" in str(ei.value)


def test_missing_column_is_named():
    cols = _cols()
    del cols["priority"]
    with pytest.raises(TraceError, match="priority"):
        Trace.from_columns(cols)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_seeded_and_valid(kind):
    a = generate(kind, seconds=20, rate=50, queues=3, seed=9, priorities=True)
    b = generate(kind, seconds=20, rate=50, queues=3, seed=9, priorities=True)
    assert len(a) > 0 and np.array_equal(a.time_us, b.time_us) and np.array_equal(a.op, b.op)
    assert np.all(np.diff(a.time_us) >= 0)
    c = generate(kind, seconds=20, rate=50, queues=3, seed=10, priorities=True)
    assert not np.array_equal(a.time_us[:50], c.time_us[:50])


def test_slow_consumer_grows_and_is_swept_steady_is_not():
    slow = replay(generate("slow-consumer", seconds=60, rate=200, seed=1), record_header=HEAD_LEN)
    steady = replay(generate("steady", seconds=60, rate=200, seed=1), record_header=HEAD_LEN)
    assert slow.metric("swept_msgs").max() > 1000
    assert slow.metric("mem_bytes").max() < slow.metric("nosweep_bytes").max() / 5
    assert steady.metric("swept_msgs").max() < 100


def test_ten_thousand_queues():
    t = generate("many-queues", seconds=10, rate=0.5, queues=10_000, seed=4)
    assert len(t.queues) == 10_000
    r = replay(t, record_header=HEAD_LEN, per_interval=False)
    assert r.summary.shape == (10_000, len(SUMMARY))
    assert r.summary[:, 5].sum() == int((t.op == PUT).sum())  # every put accounted for


def test_replay_totals_equal_the_sum_of_queues():
    t = generate("many-queues", seconds=30, rate=20, queues=20, seed=2, priorities=True)
    r = replay(t, record_header=HEAD_LEN)
    assert np.array_equal(r.intervals.sum(axis=0)[:, M["mem_bytes"]], r.totals[:, M["mem_bytes"]])


def test_a_message_counts_its_payload_and_the_record_header_the_caller_passes():
    """The kernel copies no constant of the engine: the header is the caller's (the engine's
    HEAD_LEN from the CLI and the pipeline), and every byte figure counts it once per message."""
    t = Trace.from_columns(
        {
            "time_us": [0, 1],
            "queue": ["Q", "Q"],
            "op": ["put", "put"],
            "bytes": [100, 50],
            "priority": [0, 0],
            "persistent": [False, False],
        }
    )
    for header in (0, HEAD_LEN, 1000):
        r = replay(t, SweepPolicy(factor=1000), record_header=header)
        assert r.summary_of("Q")["peak_nosweep_bytes"] == 150 + 2 * header
    with pytest.raises(TypeError):
        replay(t)  # no silent default: a caller must say what a record costs


def test_interleaved_trace_in_order_per_queue_is_accepted_and_time_ordered():
    """The order rule is per queue; across queues any interleaving replays as if time-ordered."""
    cols = {
        "time_us": [10, 30, 20, 40],
        "queue": ["A", "A", "B", "B"],
        "op": ["put", "get", "put", "get"],
        "bytes": [5, 0, 7, 0],
        "priority": [0, 0, 0, 0],
        "persistent": [False] * 4,
    }
    t = Trace.from_columns(cols)
    assert list(t.time_us) == [10, 20, 30, 40] and t.queues == ["A", "B"]
    assert list(t.queue) == [0, 1, 0, 1]
