"""The layout by queue in Arrow (pipeline/layout.py), without Spark: every range's rows land in
exactly one bucket, each queue's rows keep their order, a bucket read back is the local
reader's trace of those queues, faults name the input's row, and a layout is reused only for
the same source."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweepq.pipeline import layout as lay
from sweepq.sweeper.traces import TraceError, bucket_of, generate, read, write


def lay_out_here(path: str, out: str, buckets: int, tasks: int) -> dict:
    """What stages.arrow_layout does, with a loop in place of Spark (and CSV ranges of any size)."""
    ranges = lay.plan(path, tasks, csv_min_bytes=1)
    results = [lay.split(r, out, buckets) for r in ranges]
    faults = [TraceError(*r["error"]) for r in results if r["error"] is not None]
    if faults:
        raise min(faults, key=lambda e: e.row)
    made = lay.manifest(ranges, results, lay.fingerprint(path), buckets, "arrow", 0.0)
    lay.write_manifest(out, made)
    return made


def buckets_read_back(out: str, made: dict) -> list:
    return [lay.read_parts([os.path.join(out, p) for p in u["parts"]]) for u in lay.units(made)]


@pytest.fixture(scope="module")
def trace():
    return generate("many-queues", seconds=30, rate=30, queues=40, size=100, priorities=True, seed=4)


@pytest.mark.parametrize("suffix,tasks", [(".parquet", 1), (".parquet", 7), (".csv", 1), (".csv", 5)])
def test_each_bucket_is_the_local_readers_trace_of_its_queues(trace, tmp_path, suffix, tasks):
    path = str(tmp_path / f"t{suffix}")
    write(trace, path, row_group=500) if suffix == ".parquet" else write(trace, path)
    out = str(tmp_path / "layout")
    made = lay_out_here(path, out, 5, tasks)
    assert len(made["ranges"]) == tasks
    assert made["events"] == len(trace) and made["t0"] == int(trace.time_us.min())
    local = read(path)
    of = bucket_of(local.queues, 5)
    seen = []
    for unit, got in zip(lay.units(made), buckets_read_back(out, made), strict=True):
        k = int(unit["parts"][0].split("/")[0][1:])
        mine = [q for q, b in zip(local.queues, of, strict=True) if b == k]
        want = local.take(np.isin(local.queue, [local.queues.index(q) for q in mine]))
        assert got.queues == mine
        np.testing.assert_array_equal(got.time_us, want.time_us)
        np.testing.assert_array_equal(np.asarray(got.queues)[got.queue], np.asarray(want.queues)[want.queue])
        for a, b in ((got.op, want.op), (got.nbytes, want.nbytes), (got.priority, want.priority)):
            np.testing.assert_array_equal(a, b)
        seen += mine
    assert sorted(seen) == local.queues


def test_csv_ranges_cut_at_line_ends_cover_every_line_once(tmp_path):
    rng = np.random.default_rng(3)
    lines = [f"{i},Q{rng.integers(0, 9)},put,{'1' * int(rng.integers(1, 40))},0,false" for i in range(3000)]
    path = tmp_path / "t.csv"
    path.write_text("time_us,queue,op,bytes,priority,persistent\n" + "\n".join(lines) + "\n")
    size = os.path.getsize(path)
    for n in (1, 2, 3, 17, 64):
        cuts = [size * k // n for k in range(n + 1)]
        got = []
        for k in range(n):
            rng_k = {
                "index": k,
                "path": str(path),
                "kind": "csv",
                "start": cuts[k],
                "end": cuts[k + 1],
                "first_row": None,
            }
            table = lay.read_range(rng_k) if cuts[k + 1] > cuts[k] else None
            if table is not None and table.num_rows:
                assert lay.first_row(rng_k) == int(table.column("time_us")[0].as_py())
                got += table.column("time_us").to_pylist()
        assert got == list(range(3000)), n


def test_a_value_that_cannot_be_read_names_its_row_in_the_input(tmp_path):
    rows = 2000
    table = pa.table(
        {
            "time_us": pa.array(range(rows), pa.int64()),
            "queue": [f"Q{i % 7}" for i in range(rows)],
            "op": ["put"] * rows,
            "bytes": pa.array([10] * 1500 + [None] + [10] * 499, pa.int64()).cast(pa.string()).fill_null("ten"),
            "priority": pa.array([0] * rows, pa.int8()),
            "persistent": [False] * rows,
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=100)
    with pytest.raises(TraceError) as ei:
        lay_out_here(str(tmp_path / "t.parquet"), str(tmp_path / "l"), 3, 6)
    assert (ei.value.column, ei.value.row) == ("bytes", 1500)
    with pytest.raises(TraceError) as local:
        read(tmp_path / "t.parquet")
    assert (local.value.column, local.value.row) == ("bytes", 1500)  # as sweepq replay says


def test_a_fault_found_in_a_bucket_maps_to_its_input_row(tmp_path):
    """The order rule breaks at input row 1733 (queue Q2 goes back in time); the replay task
    finds it at an index of its bucket, and input_row says 1733, as sweepq replay does."""
    n = 3000
    t = np.arange(n, dtype=np.int64) * 10
    t[1733] = 5  # row 1733 is queue 1733 % 7 == 4's
    table = pa.table(
        {
            "time_us": t,
            "queue": [f"Q{i % 7}" for i in range(n)],
            "op": ["put"] * n,
            "bytes": np.full(n, 10, np.int32),
            "priority": np.zeros(n, np.int8),
            "persistent": np.zeros(n, bool),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=200)
    out = str(tmp_path / "l")
    made = lay_out_here(str(tmp_path / "t.parquet"), out, 3, 5)
    faults = []
    for k, u in enumerate(lay.units(made)):
        try:
            lay.read_parts([os.path.join(out, p) for p in u["parts"]])
        except TraceError as e:
            faults.append((e.column, lay.input_row(made, k, e.row)))
    assert faults == [("time_us", 1733)]
    with pytest.raises(TraceError) as local:
        read(tmp_path / "t.parquet")
    assert local.value.row == 1733


def test_a_layout_is_reused_only_for_the_same_source_and_buckets(trace, tmp_path):
    path = str(tmp_path / "t.parquet")
    write(trace, path)
    out = str(tmp_path / "l")
    lay_out_here(path, out, 4, 2)
    source = lay.fingerprint(path)
    assert lay.reusable(out, source, None)["buckets"] == 4
    assert lay.reusable(out, source, 4) is not None
    assert lay.reusable(out, source, 5) is None  # other buckets asked for
    os.utime(path, ns=(1, 1))  # the trace changed (its time, here)
    assert lay.reusable(out, lay.fingerprint(path), None) is None
    os.remove(os.path.join(out, "_sweepq_layout.json"))  # a layout never finished
    assert lay.reusable(out, source, None) is None


def test_a_retried_task_replaces_its_files_whole(trace, tmp_path):
    """Idempotent writes: the same range split twice (a task retried after its executor was
    lost) leaves the same files, and no temporary file behind."""
    path = str(tmp_path / "t.parquet")
    write(trace, path)
    out = str(tmp_path / "l")
    (r,) = lay.plan(path, 1)
    first = lay.split(r, out, 3)

    def files(res):
        return {p: Path(out, p).read_bytes() for *_, p in res["parts"]}

    before = files(first)
    again = lay.split(r, out, 3)
    assert first["parts"] == again["parts"] and files(again) == before
    assert not [f for _, _, files in os.walk(out) for f in files if f.startswith(".tmp-")]


def test_a_buckets_parts_are_read_by_the_compiled_pass_as_the_general_reader_reads_them(trace, tmp_path, monkeypatch):
    from sweepq.sweeper import traces

    path = str(tmp_path / "t.parquet")
    write(trace, path, row_group=500)
    out = str(tmp_path / "layout")
    made = lay_out_here(path, out, 3, 4)
    clean = []
    trace_of = traces._Columns.trace
    monkeypatch.setattr(traces._Columns, "trace", lambda self: (clean.append(self.clean), trace_of(self))[1])
    fast = buckets_read_back(out, made)
    assert len(clean) == 3 and all(clean)  # every part's batches took the compiled pass
    monkeypatch.setattr(traces._Columns, "_fill_compiled", lambda *a: False)
    for got, want in zip(fast, buckets_read_back(out, made), strict=True):
        assert got.queues == want.queues
        for f in ("time_us", "queue", "op", "nbytes", "priority", "lane_counts"):
            np.testing.assert_array_equal(getattr(got, f), getattr(want, f))


def test_tasks_are_a_multiple_of_the_cores_each_of_a_bounded_size(trace, tmp_path):
    """The default cut of work into tasks (pipeline/layout.py tasks_for): every wave fills the
    cores, no task holds much more than its share, and a trace's rows come from its footers."""
    assert lay.tasks_for(2, 10_841_371, 8_000_000) == 2
    assert lay.tasks_for(2, 10_841_371, 4_000_000) == 4
    assert lay.tasks_for(2, 49_631_342, 8_000_000) == 8
    assert lay.tasks_for(3, 1, 8_000_000) == 3
    assert lay.tasks_for(0, 0, 8_000_000) == 1
    for cores, work, per in ((2, 10**7, 10**6), (4, 123_457, 1000), (1, 5, 2)):
        n = lay.tasks_for(cores, work, per)
        assert n % cores == 0 and -(-work // n) <= per * 1.5 + 1
    path = str(tmp_path / "t.parquet")
    write(trace, path)
    assert lay.rows(path) == len(trace)
    assert lay.rows(str(tmp_path / "t.csv")) is None
