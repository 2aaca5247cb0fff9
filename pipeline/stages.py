"""The pipeline's Spark stages: lay out by queue (once, kept) -> replay map -> small reduces.

The work is a *map*, not a shuffle of events: a trace laid out by queue is a list of work
units, each of whole queues; Spark schedules one task per unit, and each task reads its own
files with pyarrow, checks them with the one checker of sweeper/traces.py, runs the numba
kernel and writes its per-interval metrics as Parquet (pipeline/units.py). Any other trace is
laid out first by the map side of a shuffle done in Arrow (pipeline/layout.py: one task per
range of the input, writing per-bucket files), or, with ``shuffle="jvm"``, by Spark's own
shuffle (repartition by queue in the JVM), kept for comparison. Events never travel from the
JVM into Python. Spark does what it is for: scheduling and retries, the cluster, and the
reduce of the tasks' small results.
"""

from __future__ import annotations

import csv
import os
import threading
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sweepq.sweeper.traces import COLUMNS, TraceError, _require, parquet_files, read_layout

from . import direct
from . import layout as lay
from .interrupt import on_thread
from .units import combine, replay_unit


def check_input(path: str) -> None:
    """What can be known of a trace before Spark starts, by the local reader's own rules: the
    path exists; a CSV is not empty and starts with the header; Parquet has every column."""
    import pyarrow.parquet as pq

    if path.endswith(".csv"):
        if "://" in path:
            return
        with open(path) as f:
            first = f.readline()
        if not first.strip():
            raise TraceError(None, None, f"{path}: the file is empty (a CSV trace starts with the header)")
        _require([c.strip() for c in next(csv.reader([first]))], path)  # names may be quoted
        return
    if read_layout(path) is not None:
        return
    fs, files = parquet_files(path)
    _require(pq.read_schema(fs.open_input_file(files[0])).names, files[0])


def partition(spark: SparkSession, path: str, out: str, buckets: int) -> dict:
    """Lay an arbitrary trace out by queue with Spark's own shuffle, JVM only: read, number the rows
    (``row``: their order in the input, which the order rule and the error messages use),
    repartition by a hash of the queue into ``buckets`` files of whole queues, each in input
    order, write Parquet. Values are not cast or checked here: the tasks check them, by the
    same code as ``sweepq replay``."""
    df = _read_input(spark, path)
    _require(df.columns, path)
    df = df.select(*COLUMNS).withColumn("row", F.monotonically_increasing_id())
    df = df.withColumn("bucket", F.pmod(F.xxhash64("queue"), F.lit(buckets)))
    # Hash partitioning of the bucket number may put two buckets in one task; writing by
    # bucket keeps one directory, one unit of work, per bucket all the same.
    (
        df.repartition(buckets, "bucket")
        .sortWithinPartitions("bucket", "row")  # the writer sorts by bucket: keep the rows' order inside it
        .write.mode("overwrite")
        .partitionBy("bucket")
        .parquet(out)
    )
    return layout_of_files(out)


def _read_input(spark: SparkSession, path: str):
    reader = spark.read
    return reader.csv(path, header=True, inferSchema=True) if path.endswith(".csv") else reader.parquet(path)


def row_of_id(spark: SparkSession, path: str, row_id: int) -> int:
    """The row number, in the input, of a ``row`` id the partition job gave it.

    monotonically_increasing_id is the input split's index times 2**33 plus the row's place
    in its split: exact row numbers for a one-split input, not beyond. Only for a fault's
    message, so only then: the rows of each split are counted (a JVM job over the same read,
    which splits the input the same way) and the id is turned into a row number."""
    split, place = row_id >> 33, row_id & ((1 << 33) - 1)
    if split == 0:
        return row_id
    counts = dict(
        _read_input(spark, path)
        .groupBy(F.spark_partition_id().alias("split"))
        .count()
        .select("split", "count")
        .collect()
    )
    return sum(counts.get(k, 0) for k in range(split)) + place


def layout_of_files(directory: str) -> dict:
    """The layout of a directory of Parquet files of whole queues, from their footers alone
    (row counts, and the min / max of ``time_us`` from the column statistics)."""
    import pyarrow.parquet as pq

    fs, files = parquet_files(directory)
    entries, lo, hi, events = [], None, None, 0
    for f in files:
        md = pq.read_metadata(fs.open_input_file(f))
        if md.num_rows == 0:
            continue
        col = md.schema.to_arrow_schema().names.index("time_us")
        for rg in range(md.num_row_groups):
            st = md.row_group(rg).column(col).statistics
            if st is None or not st.has_min_max:
                t = pq.read_table(fs.open_input_file(f), columns=["time_us"]).column(0)
                mn, mx = int(t.combine_chunks().to_numpy().min()), int(t.combine_chunks().to_numpy().max())
            else:
                mn, mx = int(st.min), int(st.max)
            lo = mn if lo is None else min(lo, mn)
            hi = mx if hi is None else max(hi, mx)
        entries.append({"path": os.path.relpath(f, directory) if "://" not in directory else f, "events": md.num_rows})
        events += md.num_rows
    return {"format": lay.FORMAT, "events": events, "t0": lo or 0, "t_end": hi or 0, "files": entries}


def arrow_layout(spark: SparkSession, path: str, out: str, buckets: int) -> dict:
    """Lay a trace out by queue with the map side of a shuffle in Arrow (pipeline/layout.py):
    one Spark task per range of the input. Returns the manifest, written last.

    :raises TraceError: a value that cannot be read (the first row at fault over all ranges)."""
    sc = spark.sparkContext
    t = time.perf_counter()
    # Ranges of a few million rows, a multiple of the cores (a CSV, whose rows are unknown before
    # it is read: 8 per core, a worker reusing its memory from one to the next).
    cores, n = sc.defaultParallelism, lay.rows(path)
    ranges = lay.plan(path, 8 * cores if n is None else lay.tasks_for(cores, n, lay.RANGE_ROWS))
    lay.clear(out)
    sc.setJobDescription("sweepq layout (Arrow)")
    results = interruptible(
        sc, lambda: sc.parallelize(ranges, len(ranges)).map(lambda r: lay.split(r, out, buckets)).collect()
    )
    faults = [TraceError(*r["error"]) for r in results if r["error"] is not None]
    if faults:
        raise min(faults, key=lambda e: -1 if e.row is None else e.row)
    return lay.manifest(ranges, results, lay.fingerprint(path), buckets, "arrow", time.perf_counter() - t)


def jvm_layout(spark: SparkSession, path: str, out: str, buckets: int) -> dict:
    """Lay a trace out by queue with Spark's shuffle (:func:`partition`); the same manifest,
    each unit one Parquet file whose ``row`` column numbers the input's rows."""
    t = time.perf_counter()
    spark.sparkContext.setJobDescription("sweepq layout (JVM shuffle)")
    files = interruptible(spark.sparkContext, lambda: partition(spark, path, out, buckets))
    units = [
        {"bucket": k, "parts": [{"path": f["path"], "events": f["events"], "range": None}], "events": f["events"]}
        for k, f in enumerate(files["files"])
    ]
    seconds = time.perf_counter() - t
    made = lay.manifest([], [], lay.fingerprint(path), buckets, "jvm", seconds)
    made.update(events=files["events"], t0=files["t0"], t_end=files["t_end"], units=units)
    return made


SHUFFLES = {"arrow": arrow_layout, "jvm": jvm_layout}


def existing_layout(path: str, directory: str, buckets: int | None) -> tuple[str, dict, str] | None:
    """The layout the replay reads when no Spark job is needed, as ``(directory, manifest,
    how)``: ``how`` is "given" (``path`` is laid out by queue already) or "reused" (a finished
    layout of the same source, and of ``buckets`` when given, in ``directory``); None when the
    layout is to be made (:func:`make_layout`). Reads files only."""
    given = read_layout(path)
    if given is not None:
        return path, given, "given"
    found = lay.reusable(directory, lay.fingerprint(path), buckets)
    return (directory, found, "reused") if found is not None else None


def auto_shuffle(spark: SparkSession, path: str, buckets: int | None, layout_dir: str | None) -> str:
    """What ``--shuffle auto`` does when no layout is given or kept: "direct" on a local master
    for a trace whose events times the tasks stay within direct.MAX_READS (the trace's rows from
    its Parquet footers, a CSV's bounded by its size), unless a directory to keep a layout in is
    named (``layout_dir``); else "arrow"."""
    if layout_dir:
        return "arrow"
    sc = spark.sparkContext
    rows = lay.rows(path)
    size = None
    if rows is None:  # a CSV
        fs, files = lay.source_files(path)
        size = fs.get_file_info(files[0]).size
    return (
        "direct"
        if direct.chosen(sc.master, buckets or direct.tasks_for(sc.defaultParallelism), rows, size)
        else "arrow"
    )


def make_layout(spark: SparkSession, path: str, directory: str, buckets: int | None, shuffle: str = "arrow"):
    """Lay ``path`` out by queue into ``directory`` by the ``shuffle`` (its manifest written
    last): ``(directory, manifest, "made")``, as :func:`existing_layout` returns the others."""
    made = SHUFFLES[shuffle](spark, path, directory, buckets or default_buckets(spark, path))
    lay.write_manifest(directory, made)
    return directory, made, "made"


def default_buckets(spark: SparkSession, path: str) -> int:
    """The buckets a trace is laid out in unless told: replay tasks of at most about
    ``UNIT_EVENTS`` events, a multiple of the cores (a CSV, whose rows are unknown: 4 per core)."""
    cores, n = spark.sparkContext.defaultParallelism, lay.rows(path)
    return 4 * cores if n is None else lay.tasks_for(cores, n, lay.UNIT_EVENTS)


def units_of(directory: str, layout: dict) -> list[dict]:
    """The work units of a trace laid out by queue, largest first (so the last task to start
    is short); ``unit`` is the unit's place in the manifest (for a fault's row)."""
    base = directory.rstrip("/")
    found = sorted(enumerate(lay.units(layout)), key=lambda u: -u[1]["events"])
    return [
        {
            "index": i,
            "unit": k,
            "parts": [p if "://" in p else base + "/" + p for p in u["parts"]],
            "events": u["events"],
        }
        for i, (k, u) in enumerate(found)
    ]


def _warm(_it):
    import pyarrow.parquet  # noqa: F401  (the workers are reused: the replay job finds these loaded)

    from sweepq.pipeline import layout, units  # noqa: F401
    from sweepq.sweeper.replay import warm_up

    warm_up()
    yield os.getpid()


def failed_tasks(spark: SparkSession, group: str) -> int:
    """Task attempts that failed in the jobs of ``group`` (and ran again: the jobs succeeded),
    such as those of an executor lost mid-job."""
    tracker = spark.sparkContext.statusTracker()
    stages: set[int] = set()
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        stages.update(info.stageIds if info else ())
    return sum(info.numFailedTasks for info in map(tracker.getStageInfo, stages) if info is not None)


def warm_up_workers(spark: SparkSession) -> int:
    """A no-op job with one task per core: it starts Spark's Python daemon and workers and
    loads pyarrow and the kernel in them (a daemon pre-started by the driver has them loaded:
    pipeline/prestart.py), a fixed cost (seconds on the first job) that the pipeline reports
    as a stage of its own, when the run's first job would not start them anyway (a layout
    made in Arrow is the first job then: pipeline/job.py). Returns the number of worker
    processes seen."""
    sc = spark.sparkContext
    n = sc.defaultParallelism
    return len(set(interruptible(sc, lambda: sc.parallelize(range(n), n).mapPartitions(_warm).collect())))


def replay_map(spark: SparkSession, units: list[dict], job: dict, progress=None) -> dict:
    """One Spark task per unit (pipeline/units.py replay_unit), and Spark's reduce of their
    small results (units.combine): the per-interval totals over all queues, the top queues,
    the first fault. No SQL stage and no shuffle: one job.

    While it runs, ``progress(events_done, units_done)`` is called every two seconds from a
    driver thread (accumulators that each task adds its events and units to when it finishes)."""
    if not units:
        return {
            "units": 0,
            "events": 0,
            "queues": 0,
            "errors": [],
            "seconds": 0.0,
            "cpu_seconds": 0.0,
            "read_seconds": 0.0,
        }
    sc = spark.sparkContext
    done = sc.accumulator(0)
    units_done = sc.accumulator(0)

    def run(it):
        acc = None
        for unit in it:
            res = replay_unit(unit, job)
            done.add(res["events"])
            units_done.add(1)
            acc = res if acc is None else combine(acc, res)
        if acc is not None:
            yield acc

    stop = threading.Event()

    def report():
        while not stop.wait(2.0):
            progress(done.value, units_done.value)

    watcher = threading.Thread(target=report, daemon=True) if progress else None
    if watcher:
        watcher.start()
    try:
        sc.setJobDescription("sweepq replay")
        return interruptible(sc, lambda: sc.parallelize(units, max(1, len(units))).mapPartitions(run).reduce(combine))
    finally:
        stop.set()
        if watcher:
            watcher.join()


def interruptible(sc, action):
    """``action()`` (Spark actions) run on a thread of its own, with this thread's Spark local
    properties (job group, description), while this one waits outside Py4J
    (pipeline/interrupt.py). On KeyboardInterrupt: every job is cancelled, the action's thread
    waited for (bounded) so that the JVM is done with its tasks' results while this process
    still takes them, and the KeyboardInterrupt raised again."""
    from pyspark import InheritableThread

    return on_thread(action, sc.cancelAllJobs, InheritableThread, "sweepq-spark-action")


def first_fault(spark: SparkSession, result: dict, layout: dict) -> TraceError | None:
    """The fault at the lowest row of the input over all units (None when every unit was
    clean). A unit reports a row of its own; it becomes the input's row here: through the
    layout's ranges (made in Arrow), the ``row`` ids (made by the JVM shuffle), or as it is
    (a trace laid out by ``sweepq trace``, which is the input)."""
    faults = []
    made_by = layout.get("made_by")
    for unit, column, row, why in result["errors"]:
        if row is not None and made_by == "arrow":
            row = lay.input_row(layout, unit, row)
        elif row is not None and made_by == "jvm":
            row = row_of_id(spark, layout["source"]["path"], row)
        faults.append(TraceError(column, row, why))
    return min(faults, key=lambda e: -1 if e.row is None else e.row) if faults else None


def grid_figures(result: dict, grid: list[tuple]) -> list[dict]:
    """Per combination of the what-if grid: the overall figures from the per-interval totals
    summed over all units (so a peak is the peak of the sum, not a sum of peaks)."""
    from sweepq.sweeper.replay import overall_figures

    figures = []
    for totals, (interval, factor, extra, blob_bytes, rule) in zip(result["grid"], grid, strict=True):
        o = overall_figures(totals, result["queues"], int(totals[0, 0]) if len(totals) else 0)
        figures.append(
            {
                "interval_s": interval,
                "factor": factor,
                "extra": extra,
                "blob_bytes": blob_bytes,
                "rule": rule,
                "peak_mem_bytes": o["peak_memory_with_sweeper_bytes"],
                "peak_nosweep_bytes": o["peak_memory_without_sweeping_bytes"],
                "bytes_read": o["bytes_read_back"],
                "blobs_read": o["blobs_read_back"],
                "sweeps": o["sweeps"],
                "msgs_swept": o["msgs_swept"],
                "msgs_reswept": o["msgs_reswept"],
            }
        )
    return figures


def timed(stages: dict, name: str):
    """A context manager that records the wall time of a stage in ``stages[name]``."""

    class _T:
        def __enter__(self):
            self.t = time.perf_counter()

        def __exit__(self, *exc):
            stages[name] = round(time.perf_counter() - self.t, 3)

    return _T()
