"""The compiled read of a trace (sweeper/trace_columns.py): the same trace as the general reader
and checker, or the general reader's own error; compiled and interpreted passes agree."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweepq.sweeper import trace_columns as tc
from sweepq.sweeper import traces
from sweepq.sweeper.traces import Trace, TraceError, generate, read, write

FIELDS = ("time_us", "queue", "op", "nbytes", "priority", "persistent", "lane_counts")


def general(path, monkeypatch, **kw) -> Trace | TraceError:
    """What the general conversion and check_events make of ``path`` (the compiled pass off)."""
    with monkeypatch.context() as m:
        m.setattr(traces._Columns, "_fill_compiled", lambda *a: False)
        try:
            return read(path, **kw)
        except TraceError as e:
            return e


def compiled(path, **kw) -> tuple[Trace | TraceError, bool]:
    """The trace (or error) of ``path`` read as ``read`` does, and whether every batch went
    through the compiled pass clean."""
    seen = []
    orig = traces._Columns.trace

    def trace(self):
        seen.append(self.clean)
        return orig(self)

    traces._Columns.trace = trace
    try:
        return read(path, **kw), all(seen)
    except TraceError as e:
        return e, all(seen)
    finally:
        traces._Columns.trace = orig


def same(a, b) -> None:
    if isinstance(b, TraceError):
        assert isinstance(a, TraceError) and str(a) == str(b)
        return
    assert a.queues == b.queues
    for f in FIELDS:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


def table(rows: list[tuple]) -> pa.Table:
    """A trace as sweepq writes it, from (time, queue, op, bytes, priority) rows."""
    t, q, o, b, p = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [], [], [], [])
    return pa.table(
        {
            "time_us": pa.array(t, pa.int64()),
            "queue": pa.array(q, pa.string()).dictionary_encode(),
            "op": pa.array(o, pa.string()).dictionary_encode(),
            "bytes": pa.array(b, pa.int32()),
            "priority": pa.array(p, pa.int8()),
            "persistent": pa.array([False] * len(t), pa.bool_()),
        }
    )


@pytest.mark.parametrize("keep", [True, False])
def test_a_generated_trace_in_many_row_groups_reads_the_same_both_ways(tmp_path, monkeypatch, keep):
    t = generate("many-queues", seconds=20, rate=20, queues=50, priorities=True, seed=3)
    path = str(tmp_path / "t.parquet")
    write(t, path, row_group=1000)
    got, fast = compiled(path, persistent=keep)
    assert fast
    same(got, general(path, monkeypatch, persistent=keep))
    same(got, t if keep else general(path, monkeypatch, persistent=False))


CASES = {
    "empty": [],
    "one queue": [(1, "A", "put", 5, 0), (2, "A", "get", 0, 0), (2, "A", "PUT", 7, 9)],
    # in order per queue, not across queues: put in time order, as the general reader does
    "unsorted across queues": [(10, "B", "put", 5, 1), (30, "B", "get", 0, 0), (20, "A", "put", 7, 3)],
    "names not in sorted order": [(1, "Z", "put", 1, 0), (2, "A", "put", 2, 0), (3, "M", "get", 0, 0)],
    "backwards within a queue": [(10, "A", "put", 5, 0), (5, "A", "get", 0, 0)],
    "negative time": [(1, "A", "put", 5, 0), (-1, "A", "get", 0, 0)],
    "unknown op": [(1, "A", "put", 5, 0), (2, "A", "peek", 0, 0)],
    "priority out of range": [(1, "A", "put", 5, 0), (2, "A", "put", 5, 10)],
    "negative size": [(1, "A", "put", 5, 0), (2, "A", "put", -5, 0)],
    "a get's priority and size are not checked": [(1, "A", "get", -5, 12)],
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("row_group", [1, 2, 100])
def test_each_case_reads_as_the_general_reader_reads_it(tmp_path, monkeypatch, case, row_group):
    path = str(tmp_path / "t.parquet")
    pq.write_table(table(CASES[case]), path, row_group_size=row_group)
    got, _ = compiled(path)
    same(got, general(path, monkeypatch))


def test_the_order_rule_across_row_groups_names_the_row(tmp_path, monkeypatch):
    rows = [(5, "A", "put", 1, 0), (6, "B", "put", 1, 0), (7, "B", "get", 0, 0), (4, "A", "get", 0, 0)]
    path = str(tmp_path / "t.parquet")
    pq.write_table(table(rows), path, row_group_size=2)
    got, fast = compiled(path)
    assert fast  # each batch was clean alone: merge found the fault across them
    assert isinstance(got, TraceError) and got.row == 3 and got.column == "time_us"
    same(got, general(path, monkeypatch))


def test_other_column_types_go_to_the_general_reader(tmp_path, monkeypatch):
    rows = [(1, "A", "put", 5, 0), (2, "A", "get", 0, 0)]
    t = table(rows)
    t = t.set_column(3, "bytes", t.column("bytes").cast(pa.int64()))  # not the int32 sweepq writes
    path = str(tmp_path / "t.parquet")
    pq.write_table(t, path)
    got, fast = compiled(path)
    assert not fast
    same(got, general(path, monkeypatch))
    with_null = table(rows).set_column(4, "priority", pa.array([0, None], pa.int8()))
    pq.write_table(with_null, path)
    got, fast = compiled(path)
    assert not fast
    same(got, general(path, monkeypatch))


def test_a_dictionary_with_unused_or_repeated_names():
    names = pa.array(["A", "B", "A"])  # repeated: a code would not be one queue
    arr = pa.DictionaryArray.from_arrays(pa.array([0, 2], pa.int32()), names)
    assert tc.strings(arr) is None
    arr = pa.DictionaryArray.from_arrays(pa.array([2, 2], pa.int32()), pa.array(["A", "B", "C"]))
    codes, values = tc.strings(arr)
    assert values == ["A", "B", "C"] and list(tc.used(codes, 3)) == [False, False, True]
    t = Trace.from_columns(
        {
            "time_us": [1, 2],
            "queue": arr,
            "op": ["put", "get"],
            "bytes": [3, 0],
            "priority": [0, 0],
            "persistent": [True, False],
        }
    )
    assert t.queues == ["C"] and list(t.lane_counts) == [1] + [0] * 9


def test_views_are_of_arrow_buffers_at_their_offset():
    arr = pa.array(np.arange(10, dtype=np.int64)).slice(3, 4)
    v = tc.view(arr, np.int64)
    assert list(v) == [3, 4, 5, 6] and not v.flags.writeable
    assert tc.view(arr, np.int32) is None
    bools = pa.array([True, False, True, True, False, True, False, False, True, True]).slice(5, 5)
    assert list(tc.booleans(bools)) == [True, False, False, True, True]
    for empty in (pa.array([], pa.int64()), pa.array(np.zeros(0, np.int64)), arr.slice(4, 0)):
        v = tc.view(empty, np.int64)
        assert v is not None and len(v) == 0 and not v.flags.writeable
    assert len(tc.booleans(pa.array([], pa.bool_()))) == 0


def _convert_both(rows):
    """convert, compiled and interpreted, on one batch of (time, code, op code, bytes, prio)."""
    types = (np.int64, np.int32, np.int32, np.int32, np.int8)
    cols = [np.array(c, d) for c, d in zip(zip(*rows, strict=True), types, strict=True)]
    n, nq = len(rows), max(r[1] for r in rows) + 1
    qmap = np.arange(nq, dtype=np.int32)[::-1].copy()
    omap = np.array([0, 1, -1], np.int8)  # put, get, a word that is neither
    found = []
    for fn in (tc.convert, tc.convert.py_func):
        out = tuple(np.zeros(n + 2, d) for d in (np.int64, np.int32, np.int8, np.int32, np.int8))
        lanes, first, last = np.zeros(nq * 10, np.int64), np.full(nq, -1, np.int64), np.full(nq, -1, np.int64)
        t, q, o, b, p = cols
        verdict = fn(t, q, qmap, o, omap, b, p, out, 2, lanes, first, last)
        found.append((tuple(bool(x) for x in verdict), [list(c) for c in out], list(lanes), list(first), list(last)))
    return found


@pytest.mark.parametrize(
    "rows",
    [
        [(1, 0, 0, 5, 3), (2, 1, 0, 6, 9), (2, 0, 1, 0, 0), (1, 1, 1, 0, 0)],  # clean, not in time order
        [(1, 0, 0, 5, 3), (0, 0, 1, 0, 0)],  # backwards in queue 0
        [(1, 0, 2, 5, 3)],  # op word that is neither put nor get
        [(1, 0, 0, 5, 10)],  # priority
        [(3, 0, 0, 5, 0), (4, 0, 0, -1, 0)],  # size
        [(1, 3, 0, 1, 0)],  # a code beyond the dictionary
    ],
)
def test_convert_compiled_equals_interpreted(rows):
    jit, py = _convert_both(rows)
    assert jit == py


def test_used_and_merge():
    codes = np.array([3, 1, 3], np.int32)
    assert list(tc.used(codes, 5)) == list(tc.used.py_func(codes, 5)) == [False, True, False, True, False]
    assert tc.merge([], 0)[1] is True and len(tc.merge([], 3)[0]) == 30
    lanes = np.zeros(20, np.int64)
    a = (0, 2, np.array([0, 1], np.int32), lanes, np.array([5, 6]), np.array([6, 7]), True)
    b = (2, 1, np.array([1, -1], np.int32), lanes, np.array([7, -1]), np.array([7, -1]), True)
    assert tc.merge([b, a], 2)[1] is True  # parts in any order: merged in row order
    late = (2, 1, np.array([0, -1], np.int32), lanes, np.array([4, -1]), np.array([4, -1]), True)
    assert tc.merge([a, late], 2) is None  # queue 0 went back from 6 to 4
    other = (2, 1, np.array([0, -1], np.int32), lanes, np.array([6, -1]), np.array([6, -1]), True)
    assert tc.merge([a, other], 2)[1] is False  # queue 0 keeps its order, but 6 follows the row at 7
