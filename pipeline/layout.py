"""Lay a trace out by queue the way the replay map reads it: the map side of a shuffle, in Arrow.

A user's trace is one file (Parquet or CSV), or a directory of files with queues in any
order. The replay needs whole queues per task. So the trace is cut into *ranges* (a file's
row groups, or a CSV's byte ranges cut at line ends), and a Spark task per range
(pipeline/stages.py schedules them; this module imports no pyspark) reads its range with
pyarrow, converts and checks the values by the one reader of sweeper/traces.py, and writes
its rows to one Arrow IPC file per bucket of queues (``b<bucket>/r<range>.arrow``), queues
hashed to buckets by :func:`sweepq.sweeper.traces.bucket_of`. A replay task then reads a
bucket's files in range order: each queue's rows in the order they were written, which is
what the order rule is about. The rows never pass through the JVM; Spark schedules.

The files hold converted columns (int64 times, int8 op, int32 sizes, int8 priorities, queue
as a dictionary of the bucket's names), uncompressed, so a replay task maps them and reads no
value twice. ``persistent`` is checked and not kept (the replay does not model it).

Writes are idempotent: a task writes each file under a temporary name and renames it into
place, so a retried task (an executor lost mid-job) replaces its files whole and a reader
never sees half of one. The manifest (``_sweepq_layout.json``) is written last, by the
driver, and names the source's files with their sizes and modification times: a later run
on the same trace finds it and reuses the layout (:func:`reusable`); a layout without a
manifest was never finished and is made again.

Faults: a value that cannot be read names its row in the input (a range knows its first
row; a CSV range counts the lines before it only when it has a fault). A fault the replay
task finds (the order rule, the checks of values) is at an index of its bucket;
:func:`input_row` turns it into the row of the input.
"""

from __future__ import annotations

import datetime
import json
import os
import time
import uuid

import numba
import numpy as np

from sweepq.sweeper import arrow
from sweepq.sweeper.traces import (
    COLUMNS,
    LAYOUT_FILE,
    Trace,
    TraceError,
    _Columns,
    _filesystem,
    _require,
    all_booleans,
    bucket_of,
    parquet_files,
    row_groups,
)

FORMAT = "sweepq-trace-by-queue"
VERSION = 2
PART = ".arrow"


# -- the source: its files and their fingerprint ------------------------------------------------


def source_files(path: str) -> tuple[object, list[str]]:
    """(pyarrow filesystem, files) of a trace: a CSV file, or Parquet files in name order."""
    if path.endswith(".csv"):
        fs, p = _filesystem(path)
        return fs, [p]
    return parquet_files(path)


def fingerprint(path: str) -> dict:
    """What identifies the source of a layout: its path, and each file's size and mtime."""
    fs, files = source_files(path)
    infos = fs.get_file_info(files)
    return {
        "path": path,
        "files": [{"path": i.path, "size": i.size, "mtime_ns": i.mtime_ns} for i in infos],
    }


# -- planning: ranges ----------------------------------------------------------------------------


# How much work a task is given by default: enough that Spark's cost per task (a round trip to
# a Python worker: 0.1 to 0.2 s on this 2-core machine under load) is small beside it, not so
# much that a task's memory grows. On the 10.8 M-event trace of docs/pipeline.md, alternating
# in one Spark session at load 5: the replay of its layout took 1.26 to 2.33 s in 8 tasks (4 per
# core) and 0.50 to 1.33 s in 2, for the same 0.3 s of CPU; the layout took 1.91 to 2.55 s in
# 11 ranges (8 per core, cut at row groups), 0.98 to 1.99 s in 4 and 2.08 to 3.44 s in 2 (whose
# larger batches cost 3 to 4 times the CPU).
RANGE_ROWS = 4_000_000
"""Rows of input per layout task (a Parquet range), at most about."""
UNIT_EVENTS = 8_000_000
"""Events per replay task (a bucket of queues), at most about."""


def rows(path: str) -> int | None:
    """The rows of a Parquet trace, from its footers; None for a CSV (unknown before reading)."""
    if path.endswith(".csv"):
        return None
    fs, files = source_files(path)
    return sum(n for _, _, n in row_groups(fs, files))


def tasks_for(cores: int, work: int, per_task: int) -> int:
    """Tasks to cut ``work`` rows into on ``cores``: a multiple of the cores (so that no wave
    leaves a core idle), each of at most about ``per_task`` rows, at least one per core."""
    cores = max(1, cores)
    return cores * max(1, -(-work // (cores * per_task)))


def plan(path: str, tasks: int, csv_min_bytes: int = 1 << 20) -> list[dict]:
    """Cut a trace into about ``tasks`` ranges of similar rows (Parquet: whole row groups of one
    file; CSV: byte ranges of at least ``csv_min_bytes``), in input order; each knows its first
    row when that is known without reading (Parquet), else None (CSV).

    :raises TraceError: a file is not Parquet, or lacks a column."""
    fs, files = source_files(path)
    if path.endswith(".csv"):
        size = fs.get_file_info(files[0]).size
        n = max(1, min(tasks, size // csv_min_bytes))
        cuts = [size * k // n for k in range(n + 1)]
        return [
            {"index": k, "path": files[0], "kind": "csv", "start": cuts[k], "end": cuts[k + 1], "first_row": None}
            for k in range(n)
        ]
    groups = row_groups(fs, files)
    total = sum(g[2] for g in groups)
    target = max(1, -(-total // max(1, tasks)))
    ranges: list[dict] = []
    row = 0
    for f, g, n in groups:
        last = ranges[-1] if ranges else None
        if last is not None and last["path"] == f and last["rows"] < target and last["rows"] + n <= target * 1.5:
            last["row_groups"][1] = g + 1
            last["rows"] += n
        else:
            ranges.append({"index": len(ranges), "path": f, "kind": "parquet", "row_groups": [g, g + 1], "rows": n})
            ranges[-1]["first_row"] = row
        row += n
    return ranges


# -- reading a range -----------------------------------------------------------------------------


def _csv_bounds(fs, rng: dict) -> tuple[int, int, bytes]:
    """The byte range of whole lines that a CSV range owns: the lines that start in
    [start, end), the header line excluded; and the header line."""
    with fs.open_input_file(rng["path"]) as f:
        header = f.read_at(1 << 16, 0).split(b"\n", 1)[0] + b"\n"

        def line_start(at: int) -> int:  # the first line start >= at
            if at <= len(header):
                return len(header)
            pos = at - 1
            while True:
                chunk = f.read_at(1 << 16, pos)
                if not chunk:
                    return f.size()
                nl = chunk.find(b"\n")
                if nl >= 0:
                    return pos + nl + 1
                pos += len(chunk)

        return line_start(rng["start"]), line_start(rng["end"]) if rng["end"] < f.size() else f.size(), header


def read_range(rng: dict, columns=COLUMNS):
    """The rows of a range as a pyarrow Table (queue and op as dictionaries)."""
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    fs, _ = _filesystem(rng["path"])
    if rng["kind"] == "parquet":
        pf = pq.ParquetFile(fs.open_input_file(rng["path"]), read_dictionary=["queue", "op"])
        groups = list(range(*rng["row_groups"]))
        if "persistent" in columns and all_booleans(pf, groups):
            columns = [c for c in columns if c != "persistent"]  # nothing to check, and not kept
        return pf.read_row_groups(groups, columns=list(columns), use_threads=False)
    start, end, header = _csv_bounds(fs, rng)
    with fs.open_input_file(rng["path"]) as f:
        body = f.read_at(end - start, start) if end > start else b""
    text = pa.dictionary(pa.int32(), pa.string())
    try:
        table = pacsv.read_csv(
            io.BytesIO(header + body),
            read_options=pacsv.ReadOptions(use_threads=False, block_size=1 << 24),
            convert_options=pacsv.ConvertOptions(column_types={"queue": text, "op": text}),
        )
    except pa.ArrowInvalid as e:
        raise TraceError(None, None, f"{rng['path']}: {str(e).splitlines()[0]}") from None
    _require(table.schema.names, rng["path"])
    return table.select(list(columns))


def first_row(rng: dict) -> int:
    """The row number (0-based, the header not counted) of a range's first row."""
    if rng["first_row"] is not None:
        return rng["first_row"]
    fs, _ = _filesystem(rng["path"])
    start, _, header = _csv_bounds(fs, rng)
    lines = 0
    with fs.open_input_file(rng["path"]) as f:
        pos = len(header)
        while pos < start:
            chunk = f.read_at(min(1 << 24, start - pos), pos)
            lines += chunk.count(b"\n")
            pos += len(chunk)
    return lines


# -- the map task: a range split into buckets ----------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _scatter(bucket_of_code, local_of_code, cols_in, cols_out, counts):
    """Counting sort of the rows by bucket, stable: each row goes to the next place of its
    bucket in every output column, its queue renumbered among its bucket's queues
    (``local_of_code``). Fills ``counts``."""
    t_in, q_in, o_in, b_in, p_in = cols_in
    t_out, q_out, o_out, b_out, p_out = cols_out
    n = len(q_in)
    for i in range(n):
        counts[bucket_of_code[q_in[i]]] += 1
    starts = np.zeros(len(counts), np.int64)
    for k in range(1, len(counts)):
        starts[k] = starts[k - 1] + counts[k - 1]
    for i in range(n):
        k = bucket_of_code[q_in[i]]
        j = starts[k]
        starts[k] = j + 1
        t_out[j] = t_in[i]
        q_out[j] = local_of_code[q_in[i]]
        o_out[j] = o_in[i]
        b_out[j] = b_in[i]
        p_out[j] = p_in[i]


# Output columns of the scatter, kept from one task to the next in a worker (Spark reuses its
# Python workers): fresh arrays of a few tens of MB cost their page faults on first touch, on
# this virtual machine a third to half of the scatter's own time (12 to 38 ms of 30 to 70 ms
# on 3.1 M rows, at load 5). Nothing outlives a task that points into them: its Arrow files
# are written and closed before it returns.
_SCRATCH: dict[int, np.ndarray] = {}


def _scratch(key: int, n: int, dtype) -> np.ndarray:
    """An array of ``n`` items of ``dtype`` for the scatter's output column ``key``: the kept
    one when it is large enough (its first ``n``), else a new one, kept."""
    have = _SCRATCH.get(key)
    if have is None or have.dtype != dtype or len(have) < n:
        have = _SCRATCH[key] = np.empty(n, dtype)
    return have[:n]


def warm_up() -> None:
    """Load the compiled scatter (numba's cache) in this process: Spark's Python daemon does,
    before it forks the workers (pipeline/daemon.py)."""
    one = np.zeros(1, np.int64)
    cols = (one, one.astype(np.int32), one.astype(np.int8), one.astype(np.int32), one.astype(np.int8))
    zero = np.zeros(1, np.int32)
    _scatter(zero, zero, cols, tuple(c.copy() for c in cols), one.copy())


def _schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("time_us", pa.int64()),
            ("queue", pa.dictionary(pa.int32(), pa.string())),
            ("op", pa.int8()),
            ("bytes", pa.int32()),
            ("priority", pa.int8()),
        ]
    )


def part_path(bucket: int, index: int) -> str:
    """A part's path inside the layout directory."""
    return f"b{bucket:05d}/r{index:05d}{PART}"


def _write_atomically(fs, path: str, table) -> None:
    import pyarrow as pa

    directory = path.rsplit("/", 1)[0]
    fs.create_dir(directory, recursive=True)
    tmp = f"{directory}/.tmp-{uuid.uuid4().hex}{PART}"
    with fs.open_output_stream(tmp) as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    fs.move(tmp, path)


def split(rng: dict, out: str, buckets: int) -> dict:
    """The map task: read range ``rng``, convert and check its values, write its rows to one
    file per bucket under ``out``. Returns {"index", "parts": [[bucket, events, t_min, t_max,
    path]], "rows", "seconds", "cpu_seconds", "error"}; ``error`` is (column, row in the input, why) or None
    (no file is written then)."""
    import pyarrow as pa

    t_start, cpu_start = time.perf_counter(), time.process_time()
    result = {"index": rng["index"], "parts": [], "rows": 0, "seconds": 0.0, "cpu_seconds": 0.0, "error": None}
    try:
        table = read_range(rng)
        n = table.num_rows
        cols = _Columns(n, persistent=False)
        off = 0
        for batch in table.to_batches():
            cols.fill(batch, off)
            off += batch.num_rows
    except TraceError as e:
        row = None if e.row is None else first_row(rng) + e.row
        result["error"] = (e.column, row, e.why)
        return result
    del table
    names = sorted(cols.names, key=cols.names.__getitem__)  # in code order
    of_code = bucket_of(names, buckets)
    counts = np.zeros(buckets, np.int64)
    local_of_code = np.zeros(len(names), np.int32)
    queues_of = [np.flatnonzero(of_code == k) for k in range(buckets)]  # each bucket's queues (codes)
    for codes in queues_of:
        local_of_code[codes] = np.arange(len(codes), dtype=np.int32)
    cols_in = (cols.time_us, cols.queue, cols.op, cols.nbytes, cols.prio)
    out_cols = tuple(_scratch(k, n, c.dtype) for k, c in enumerate(cols_in))
    _scatter(of_code, local_of_code, cols_in, out_cols, counts)
    del cols
    t, q, o, b, p = out_cols
    fs, base = _filesystem(out)
    base = base.rstrip("/")
    schema = _schema()
    lo = 0
    for k in range(buckets):
        hi = lo + int(counts[k])
        if hi == lo:
            continue
        queue = arrow.coded(q[lo:hi], [names[c] for c in queues_of[k].tolist()])
        columns = [arrow.numbers(t[lo:hi]), queue, arrow.numbers(o[lo:hi]), arrow.numbers(b[lo:hi])]
        part = pa.Table.from_arrays([*columns, arrow.numbers(p[lo:hi])], schema=schema)
        path = part_path(k, rng["index"])
        _write_atomically(fs, f"{base}/{path}", part)
        result["parts"].append([k, hi - lo, int(t[lo:hi].min()), int(t[lo:hi].max()), path])
        lo = hi
    result["rows"] = n
    result["seconds"] = time.perf_counter() - t_start
    result["cpu_seconds"] = time.process_time() - cpu_start
    return result


# -- the manifest --------------------------------------------------------------------------------


def manifest(ranges: list[dict], results: list[dict], source: dict, buckets: int, made_by: str, seconds: float) -> dict:
    """The layout of a trace from its map tasks' results: per bucket (a unit of the replay),
    its parts in range order."""
    by_bucket: dict[int, list] = {}
    lo, hi, events = None, None, 0
    for res in sorted(results, key=lambda r: r["index"]):
        for k, n, t_min, t_max, path in res["parts"]:
            by_bucket.setdefault(k, []).append({"path": path, "events": n, "range": res["index"]})
            lo = t_min if lo is None else min(lo, t_min)
            hi = t_max if hi is None else max(hi, t_max)
            events += n
    units = [
        {"bucket": k, "parts": parts, "events": sum(p["events"] for p in parts)}
        for k, parts in sorted(by_bucket.items())
    ]
    return {
        "format": FORMAT,
        "version": VERSION,
        "made_by": made_by,
        "made_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 3),
        "task_cpu_seconds": round(sum(r.get("cpu_seconds", 0.0) for r in results), 3),
        "source": source,
        "buckets": buckets,
        "events": events,
        "t0": lo or 0,
        "t_end": hi or 0,
        "units": units,
        "ranges": ranges,
    }


def write_manifest(directory: str, layout: dict) -> None:
    """Write the manifest last and atomically: a layout with one is complete."""
    fs, d = _filesystem(directory)
    d = d.rstrip("/")
    fs.create_dir(d, recursive=True)
    tmp = f"{d}/.tmp-{uuid.uuid4().hex}.json"
    with fs.open_output_stream(tmp) as f:
        f.write(json.dumps(layout, indent=1).encode())
    fs.move(tmp, f"{d}/{LAYOUT_FILE}")


def units(layout: dict) -> list[dict]:
    """The replay's units of a layout, as [{"parts": [relative paths], "events"}]: a version 2
    manifest's buckets, or each file of a version 1 one (``trace generate --buckets``)."""
    if "units" in layout:
        return [{"parts": [p["path"] for p in u["parts"]], "events": u["events"]} for u in layout["units"]]
    return [{"parts": [f["path"]], "events": f["events"]} for f in layout["files"]]


def reusable(directory: str, source: dict, buckets: int | None) -> dict | None:
    """The manifest of a finished layout of the same source in ``directory`` (and of
    ``buckets`` buckets, when given), or None: then it is to be made (again)."""
    from sweepq.sweeper.traces import read_layout

    layout = read_layout(directory)
    if layout is None or layout.get("version") != VERSION or layout.get("source") != source:
        return None
    if buckets is not None and layout.get("buckets") != buckets:
        return None
    return layout


def clear(directory: str) -> None:
    """Remove a layout (finished or not) before making it again."""
    from pyarrow import fs as pafs

    fs, d = _filesystem(directory)
    if fs.get_file_info(d).type != pafs.FileType.NotFound:
        fs.delete_dir(d)


# -- the replay task's read ----------------------------------------------------------------------


def read_parts(paths: list[str]) -> Trace:
    """A bucket's parts, in the order given (range order), as one checked Trace (see
    Trace.validate). A fault's row is its index in the bucket (:func:`input_row` maps it).
    Local files are memory-mapped, and their columns (in the types the reader's compiled pass
    takes, sweeper/trace_columns.py) are read from the map without a copy of their own."""
    import pyarrow as pa

    tables = []
    for path in paths:
        fs, p = _filesystem(path)
        source = pa.memory_map(p) if "://" not in path or path.startswith("file://") else fs.open_input_file(p)
        tables.append(pa.ipc.open_file(source).read_all())
    cols = _Columns(sum(t.num_rows for t in tables), persistent=False)
    off = 0
    for t in tables:
        for batch in t.to_batches():
            cols.fill(batch, off)
            off += batch.num_rows
    return cols.trace()


def input_row(layout: dict, unit: int, index: int) -> int:
    """The row, in the input, of the row at ``index`` of unit ``unit`` (its bucket's rows in
    range order). Reads that one range's queue column again: only for a fault's message."""
    parts = layout["units"][unit]["parts"]
    k = layout["units"][unit]["bucket"]
    for part in parts:
        if index < part["events"]:
            break
        index -= part["events"]
    rng = layout["ranges"][part["range"]]
    q = read_range(rng, columns=["queue"]).column(0).combine_chunks()
    of_code = bucket_of([str(v) for v in q.dictionary.to_pylist()], layout["buckets"])
    rows = np.flatnonzero(of_code[q.indices.to_numpy(zero_copy_only=False)] == k)
    return first_row(rng) + int(rows[index])


def default_directory(out: str) -> str:
    """Where a run keeps the layout it makes: in its output directory, for the next run to reuse."""
    return os.path.join(out, "layout") if "://" not in out else out.rstrip("/") + "/layout"
