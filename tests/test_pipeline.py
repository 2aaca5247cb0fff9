"""The Spark pipeline on small traces in local[2]: its output equals the local kernel's, row
for row; bad traces fail naming the column and row; the grid and the report are written.

One Spark session serves the whole test run (session-scoped fixture): starting Spark is
the slow part."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import METRICS, replay
from sweepq.sweeper.traces import TraceError, generate, write


@pytest.fixture(scope="session")
def spark():
    from sweepq.pipeline.session import spark_session

    s = spark_session("local[2]", app="sweepq-tests", shuffle_partitions=4)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    t = generate("many-queues", seconds=90, rate=15, queues=6, size=150, priorities=True, seed=5)
    path = tmp_path_factory.mktemp("traces") / "t.parquet"
    write(t, path)
    return t, str(path)


def _args(traces, out, grid=None):
    """The job's own options, parsed by its own parser (so defaults cannot drift)."""
    from sweepq.pipeline.job import build_parser

    argv = [
        "--traces",
        traces,
        "--out",
        str(out),
        "--master",
        "local[2]",
        "--blob-bytes",
        "65536",
        "--blob-records",
        "256",
    ]
    return build_parser().parse_args(argv + (["--grid", grid] if grid else []))


def test_pipeline_equals_the_local_kernel_row_for_row(spark, trace_file, tmp_path):
    from sweepq.pipeline.job import run

    trace, path = trace_file
    overall = run(_args(path, tmp_path, grid="interval=1,5;factor=2,3"), spark=spark, log=lambda s: None)
    got = pd.read_parquet(tmp_path / "metrics").sort_values(["queue", "interval"]).reset_index(drop=True)
    local = replay(trace, SweepPolicy(), max_blob_bytes=64 * 1024, max_blob_records=256)
    rows = []
    for qi, q in enumerate(local.queues):
        for i in range(local.intervals.shape[1]):
            rows.append([q, i, *local.intervals[qi, i]])
    want = pd.DataFrame(rows, columns=["queue", "interval", *METRICS])
    assert len(got) == len(want) == len(trace.queues) * local.intervals.shape[1]
    np.testing.assert_array_equal(got[list(METRICS)].to_numpy(), want[list(METRICS)].to_numpy())
    assert list(got["queue"]) == list(want["queue"])
    assert local.totals[:, METRICS.index("blobs_written")].sum() > 0  # the traces did sweep
    # Summaries, report and grid.
    assert overall["events"] == len(trace)
    assert overall["peak_memory_saved_bytes"] > 0
    summary = pd.read_parquet(tmp_path / "summary")
    assert set(summary["queue"]) == set(trace.queues)
    grid = pd.read_parquet(tmp_path / "grid")
    assert len(grid) == 4 * len(trace.queues)
    html = (tmp_path / "report.html").read_text()
    assert "<svg" in html and "What-if grid" in html
    assert json.loads((tmp_path / "overall.json").read_text())["queues"] == len(trace.queues)


def _bad(tmp_path, rows, name="bad.csv"):
    p = tmp_path / name
    pd.DataFrame(rows).to_csv(p, index=False)
    return str(p)


GOOD = {"time_us": 1, "queue": "Q", "op": "put", "bytes": 10, "priority": 1, "persistent": False}


@pytest.mark.parametrize(
    "rows,column,row",
    [
        ([GOOD, {**GOOD, "time_us": -5}], "time_us", 1),
        ([GOOD, {**GOOD, "op": "peek"}], "op", 1),
        ([GOOD, {**GOOD, "priority": 12}], "priority", 1),
        ([GOOD, {**GOOD, "bytes": -3}], "bytes", 1),
        ([{**GOOD, "time_us": 10}, {**GOOD, "queue": "R", "time_us": 12}, {**GOOD, "time_us": 3}], "time_us", 2),
    ],
)
def test_bad_traces_name_the_column_and_row(spark, tmp_path, rows, column, row):
    """Through the whole job: static rules fail in validation, a queue's times going
    backwards fail in the replay pass; both name the column and the row."""
    from sweepq.pipeline.job import run

    with pytest.raises(TraceError) as ei:
        run(_args(_bad(tmp_path, rows), tmp_path / "out"), spark=spark, log=lambda s: None)
    assert ei.value.column == column and ei.value.row == row
    assert column in str(ei.value) and f"row {row}" in str(ei.value)


def test_missing_column(spark, tmp_path):
    from sweepq.pipeline import stages

    rows = [{k: v for k, v in GOOD.items() if k != "priority"}]
    with pytest.raises(TraceError, match="priority"):
        stages.read_traces(spark, _bad(tmp_path, rows))


def test_grid_parsing():
    from sweepq.pipeline.stages import parse_grid

    g = parse_grid("interval=1,5;factor=2,3")
    assert len(g) == 4 and (1.0, 3, 5, 256 * 1024) in g
    with pytest.raises(ValueError, match="unknown grid axis"):
        parse_grid("speed=3")
