"""The direct replay (``--shuffle direct``, and what ``auto`` picks on a local master): no
layout; each task reads the whole trace and replays the queues of its bucket. Its results
equal ``sweepq replay``'s row for row; a bad value or an order-rule violation names the same
row of the input as ``sweepq replay`` does; ``auto`` picks it only where it should.

One Spark session (local[2]) serves the module, as in tests/test_pipeline.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import METRICS, replay
from sweepq.sweeper.traces import TraceError, bucket_of, generate, read, write


@pytest.fixture(scope="module")
def spark():
    from sweepq.pipeline.session import spark_session

    s = spark_session("local[2]", app="sweepq-tests-direct", shuffle_partitions=4)
    yield s
    s.stop()


def _args(traces, out, *more):
    from sweepq.pipeline.job import build_parser

    argv = ["--traces", str(traces), "--out", str(out), "--master", "local[2]"]
    return build_parser().parse_args([*argv, "--blob-bytes", "65536", "--blob-records", "256", *more])


def _run(spark, traces, out, *more, log=lambda s: None):
    from sweepq.pipeline.job import run

    return run(_args(traces, out, *more), spark=spark, log=log)


def _metrics(out) -> pd.DataFrame:
    return pd.read_parquet(out / "metrics").sort_values(["queue", "interval"]).reset_index(drop=True)


def _local(t):
    return replay(t, SweepPolicy(), record_header=HEAD_LEN, max_blob_bytes=64 * 1024, max_blob_records=256)


def test_a_bucket_holds_its_queues_rows_in_input_order_with_their_lanes():
    """The selection a direct task makes: every queue in exactly one bucket, its rows as in
    the whole trace (the order rule), its lanes as the whole trace's read counted them."""
    from sweepq.pipeline import direct

    t = generate("many-queues", seconds=30, rate=20, queues=9, size=150, priorities=True, seed=3)
    whole = read_whole(t)
    of = bucket_of(whole.queues, 3)
    seen = []
    for k in range(3):
        part = direct.bucket(read_whole(t), 3, k)  # takes the columns over: a fresh read each
        assert part.queues == [q for q, b in zip(whole.queues, of, strict=True) if b == k]
        assert len(part) == int(np.isin(whole.queue, np.flatnonzero(of == k)).sum())
        for j, q in enumerate(part.queues):
            mine, theirs = part.select(q), whole.select(q)
            np.testing.assert_array_equal(mine.time_us, theirs.time_us)
            np.testing.assert_array_equal(mine.op, theirs.op)
            np.testing.assert_array_equal(mine.nbytes, theirs.nbytes)
            np.testing.assert_array_equal(mine.priority, theirs.priority)
            code = whole.queues.index(q)
            lanes = whole.lane_counts[code * 10 : code * 10 + 10]
            np.testing.assert_array_equal(part.lane_counts[j * 10 : j * 10 + 10], lanes)
        seen += part.queues
    assert sorted(seen) == whole.queues


def read_whole(t):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        write(t, f"{d}/t.parquet", row_group=500)
        from sweepq.sweeper.traces import read

        return read(f"{d}/t.parquet", persistent=False, threads=1)


@pytest.mark.parametrize("more", [(), ("--shuffle", "direct"), ("--shuffle", "direct", "--buckets", "5")])
def test_direct_equals_the_local_replay_row_for_row_and_keeps_no_layout(spark, tmp_path, more):
    """On local[2] ``auto`` replays directly (one task on two threads); forced, and with more
    buckets than cores (a worker then runs two tasks, each on one thread), the same metrics,
    summary and figures as the local kernel's."""
    t = generate("many-queues", seconds=60, rate=20, queues=9, size=150, priorities=True, seed=8)
    write(t, tmp_path / "t.parquet", row_group=1000)
    said: list[str] = []
    overall = _run(spark, tmp_path / "t.parquet", tmp_path / "out", "--grid", "factor=2,3", *more, log=said.append)
    local = _local(t)
    np.testing.assert_array_equal(
        _metrics(tmp_path / "out")[list(METRICS)].to_numpy(), local.intervals.reshape(-1, len(METRICS))
    )
    assert list(_metrics(tmp_path / "out")["queue"].unique()) == local.queues
    for k, v in local.overall().items():
        if k in overall and not isinstance(v, float):
            assert overall[k] == v, k
    assert overall["events"] == len(t) and overall["t0_us"] == int(t.time_us[0])
    assert overall["layout"]["how"] == "direct" and overall["layout"]["directory"] is None
    assert overall["path"] == "read whole by each task" and "warm_up" not in overall["stage_seconds"]
    assert not (tmp_path / "out" / "layout").exists()
    assert any(line.startswith("layout: none (direct)") for line in said)
    assert "each replay task read the whole trace" in (tmp_path / "out" / "report.html").read_text()
    assert len(pd.read_parquet(tmp_path / "out" / "grid_queues")) == 2 * len(t.queues)


def test_files_with_queues_in_any_order_replay_directly_as_in_replay(spark, tmp_path):
    """A directory of files by time window, each with its rows grouped by queue (any order of
    queues): not in time order across queues, in order per queue; the same as sweepq replay."""
    import pyarrow.parquet as pq

    t = generate("many-queues", seconds=60, rate=20, queues=9, size=150, priorities=True, seed=8)
    write(t, tmp_path / "one.parquet")
    table = pq.read_table(tmp_path / "one.parquet")
    (tmp_path / "dir").mkdir()
    cuts = [0, len(t) // 3, 2 * len(t) // 3, len(t)]
    for name, lo, hi in zip("abc", cuts, cuts[1:], strict=False):
        order = np.lexsort((np.arange(hi - lo), -t.queue[lo:hi]))
        pq.write_table(table.slice(lo, hi - lo).take(order), tmp_path / "dir" / f"{name}.parquet")
    overall = _run(spark, tmp_path / "dir", tmp_path / "out", "--shuffle", "direct")
    local = _local(read(tmp_path / "dir"))
    np.testing.assert_array_equal(
        _metrics(tmp_path / "out")[list(METRICS)].to_numpy(), local.intervals.reshape(-1, len(METRICS))
    )
    assert overall["peak_memory_with_sweeper_bytes"] == local.overall()["peak_memory_with_sweeper_bytes"]


def _csv(tmp_path, rows, name="bad.csv"):
    p = tmp_path / name
    pd.DataFrame(rows).to_csv(p, index=False)
    return p


GOOD = {"time_us": 1, "queue": "Q", "op": "put", "bytes": 10, "priority": 1, "persistent": False}


@pytest.mark.parametrize(
    "rows",
    [
        [GOOD, {**GOOD, "time_us": -5}],
        [GOOD, {**GOOD, "op": "peek"}],
        [GOOD, {**GOOD, "priority": 12}],
        [GOOD, {**GOOD, "bytes": -3}],
        [{**GOOD, "time_us": 10}, {**GOOD, "queue": "R", "time_us": 12}, {**GOOD, "time_us": 3}],
        [GOOD, {**GOOD, "queue": "R"}, {**GOOD, "persistent": "maybe"}],
        [GOOD, GOOD, {**GOOD, "time_us": "soon"}],
    ],
)
def test_a_bad_value_names_the_row_sweepq_replay_names(spark, tmp_path, rows):
    path = _csv(tmp_path, rows)
    with pytest.raises(TraceError) as local:
        read(path, persistent=False)
    with pytest.raises(TraceError) as ei:
        _run(spark, path, tmp_path / "out", "--shuffle", "direct")
    assert (ei.value.column, ei.value.row, ei.value.why) == (local.value.column, local.value.row, local.value.why)
    assert not (tmp_path / "out" / "overall.json").exists() and not (tmp_path / "out" / "report.html").exists()


@pytest.mark.parametrize("shuffle", ["direct", "auto"])
def test_an_order_rule_violation_in_a_later_row_group_names_its_input_row(spark, tmp_path, shuffle):
    """The order rule broken at row 1733 of a file of row groups of 50, and a value broken
    later in another queue: the first, as sweepq replay reports it, whichever task finds it."""
    t = generate("many-queues", seconds=60, rate=10, queues=7, seed=11)
    t.time_us[1733] = t.time_us[1733 - 20] - 1  # behind its queue's earlier rows
    t.priority[2500] = 11
    t.op[2500] = 0
    write(t, tmp_path / "t.parquet", row_group=50)
    with pytest.raises(TraceError) as local:
        read(tmp_path / "t.parquet", persistent=False)
    assert local.value.row == 1733
    with pytest.raises(TraceError) as ei:
        _run(spark, tmp_path / "t.parquet", tmp_path / "out", "--shuffle", shuffle)
    assert (ei.value.column, ei.value.row, ei.value.why) == (local.value.column, local.value.row, local.value.why)


def test_auto_picks_direct_only_on_one_machine_for_a_trace_that_is_not_large(spark, tmp_path, monkeypatch):
    from sweepq.pipeline import direct

    assert direct.chosen("local[*]", 2, 10_000_000) and direct.chosen("local", 1, 0)
    assert not direct.chosen("spark://host:7077", 2, 1000) and not direct.chosen("yarn", 2, 1000)
    assert not direct.chosen("local[16]", 16, 10_000_000)  # 16 reads of it: a layout reads it once
    assert direct.chosen("local[2]", 2, None, csv_bytes=1000) and not direct.chosen("local[2]", 2, None, 10**12)
    t = generate("many-queues", seconds=30, rate=10, queues=5, seed=2)
    write(t, tmp_path / "t.parquet")
    monkeypatch.setattr(direct, "MAX_READS", len(t))  # one task's read (local[2]'s default), not two
    assert _run(spark, tmp_path / "t.parquet", tmp_path / "out")["layout"]["how"] == "direct"
    overall = _run(spark, tmp_path / "t.parquet", tmp_path / "out", "--buckets", "2")
    assert overall["layout"]["how"] == "made" and overall["layout"]["made_by"] == "arrow"


def test_auto_reuses_a_kept_layout_and_keeps_one_where_told(spark, tmp_path):
    """A layout kept by an earlier run is reused (less to read than the whole trace); naming a
    --layout directory asks for one; --shuffle direct reads the trace whole all the same."""
    t = generate("many-queues", seconds=30, rate=10, queues=5, seed=2)
    write(t, tmp_path / "t.parquet")
    assert _run(spark, tmp_path / "t.parquet", tmp_path / "o", "--shuffle", "arrow")["layout"]["how"] == "made"
    assert _run(spark, tmp_path / "t.parquet", tmp_path / "o")["layout"]["how"] == "reused"
    assert _run(spark, tmp_path / "t.parquet", tmp_path / "o", "--shuffle", "direct")["layout"]["how"] == "direct"
    kept = _run(spark, tmp_path / "t.parquet", tmp_path / "p", "--layout", str(tmp_path / "kept"))
    assert kept["layout"]["how"] == "made" and (tmp_path / "kept" / "_sweepq_layout.json").exists()
