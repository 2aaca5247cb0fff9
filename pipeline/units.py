"""One work unit of the pipeline: files of whole queues, read with pyarrow, checked, replayed.

This is what a Spark task runs (pipeline/stages.py schedules the units). It imports no
pyspark: rows never travel from Spark's JVM into Python; the task reads its own files (local
paths or any ``pyarrow.fs`` URI: a bucket's parts of an Arrow layout, one Parquet file of
a trace laid out by ``sweepq trace``, or the whole trace, of which a direct replay keeps its
bucket's queues, pipeline/direct.py), runs the one checker of sweeper/traces.py and the
numba kernel, writes its per-interval metrics as Parquet beside the others, and returns only
a small summary (events, queues, seconds, or its first fault) to the driver.
"""

from __future__ import annotations

import os
import time

import numpy as np

from sweepq.sweeper import SweepPolicy, arrow
from sweepq.sweeper.replay import METRICS, SUMMARY, replay
from sweepq.sweeper.traces import TraceError, _filesystem, read_unit

from .direct import read_bucket
from .layout import PART, read_parts

GRID_AXES = ("interval", "factor", "extra", "blob_bytes")


def _write(table, directory: str, name: str) -> None:
    """Write a part under a temporary name and rename it into place: a retried task (its
    executor lost) replaces the part whole, and no reader sees half of one."""
    import uuid

    import pyarrow.parquet as pq

    fs, d = _filesystem(directory)
    d = d.rstrip("/")
    fs.create_dir(d, recursive=True)
    tmp = f"{d}/.tmp-{uuid.uuid4().hex}-{name}"
    with fs.open_output_stream(tmp) as f:
        pq.write_table(table, f)
    fs.move(tmp, f"{d}/{name}")


def read(unit: dict):
    """A unit's trace, and the whole trace's span when the unit read it all (else None): a
    bucket's queues of the whole trace (a direct replay), a bucket's parts of an Arrow layout,
    or one Parquet file."""
    if "direct" in unit:
        return read_bucket(unit["direct"])
    parts = unit["parts"]
    return (read_parts(parts) if parts[0].endswith(PART) else read_unit(parts[0])), None


def interval_count(t0: int, t_end: int, interval_s: float, events: int = 1) -> int:
    """Intervals of ``interval_s`` from ``t0`` until the one holding ``t_end`` (none without events)."""
    return int((t_end - t0) // round(interval_s * 1e6) + 1) if events else 0


def _with_span(job: dict, span: dict | None) -> dict:
    """The job's intervals: as the driver knew them from a layout; or, in a direct replay (the
    driver read no trace), from the whole trace's span that this task read, the same in every
    task."""
    if span is None:
        return job
    n = interval_count(span["t0"], span["t_end"], job["interval"], span["events"])
    return {**job, "t0": span["t0"], "t_end": span["t_end"], "n_intervals": n}


def _metrics_table(r, queues: list[str]):
    """Per (queue, interval) rows; the queue column built from its names, no Python object per row."""
    nq, n_int = r.intervals.shape[0], r.intervals.shape[1]
    cols = {
        "queue": arrow.strings(queues, repeat=n_int),
        "interval": np.tile(np.arange(n_int, dtype=np.int32), nq),
    }
    flat = r.intervals.reshape(nq * n_int, len(METRICS))
    for k, m in enumerate(METRICS):
        cols[m] = flat[:, k]
    return arrow.table(cols)


TOP = 30  # queues the report lists: those that save the most memory at their peak


def _summary_rows(r, queues: list[str]) -> dict:
    """Per queue: the kernel's summary plus what the report lists, as columns."""
    sm = {name: r.summary[:, k] for k, name in enumerate(SUMMARY)}
    return {
        "queue": list(queues),
        "peak_mem_bytes": sm["peak_mem_bytes"],
        "peak_nosweep_bytes": sm["peak_nosweep_bytes"],
        "peak_saved_bytes": sm["peak_nosweep_bytes"] - sm["peak_mem_bytes"],
        "bytes_read": sm["bytes_read"],
        "blobs_read": sm["blobs_read"],
        "sweeps": sm["sweeps"],
        "msgs_swept": sm["msgs_swept"],
        "msgs_reswept": sm["msgs_reswept"],
        "puts": sm["puts"],
        "gets": sm["gets"],
    }


def _top(cols: dict, n: int = TOP) -> list[dict]:
    order = np.argsort(-np.asarray(cols["peak_saved_bytes"]), kind="stable")[:n]
    return [{k: (v[i] if k == "queue" else int(v[i])) for k, v in cols.items()} for i in order.tolist()]


def replay_unit(unit: dict, job: dict) -> dict:
    """Replay one unit. ``unit``: {"index", "unit", "parts"}; ``job``: t0, t_end, n_intervals,
    policy parameters, record header, blob bounds, output directory, and the what-if grid (a
    list of combinations).

    Writes ``metrics`` (per queue and interval), ``summary`` (per queue) and, for the grid,
    ``grid_queues`` as Parquet parts named by the unit (a retried task replaces the same
    parts whole). Returns a small result that :func:`combine` merges: events, queues, its
    fault as [(unit, column, row in the unit, why)] or [], seconds, per-interval totals over
    the unit's queues (for each grid combination too) and the unit's top queues."""

    t_start, cpu_start = time.perf_counter(), time.process_time()
    name = f"part-{unit['index']:05d}.parquet"
    result = {
        "units": 1,
        "events": 0,
        "queues": 0,
        "errors": [],
        "seconds": 0.0,
        "read_seconds": 0.0,
        "cpu_seconds": 0.0,
    }
    try:
        trace, span = read(unit)
    except TraceError as e:
        result["errors"] = [(unit["unit"], e.column, e.row, e.why)]
        return result
    job = _with_span(job, span)
    t_read = time.perf_counter()
    policy = SweepPolicy(
        factor=job["factor"],
        extra=job["extra"],
        interval=job["interval"],
        rule=job.get("rule", "seed"),
        memory_budget=job.get("memory_budget", 0),
    )
    r = replay(
        trace,
        policy,
        t0=job["t0"],
        n_intervals=job["n_intervals"],
        record_header=job["record_header"],
        max_blob_bytes=job["blob_bytes"],
        max_blob_records=job["blob_records"],
    )
    cols = _summary_rows(r, trace.queues)
    if len(trace.queues):
        _write(_metrics_table(r, trace.queues), os.path.join(job["out"], "metrics"), name)
        _write(arrow.table(cols), os.path.join(job["out"], "summary"), name)
    grid_totals = []
    for g, (interval, factor, extra, blob_bytes, rule) in enumerate(job.get("grid") or []):
        p = SweepPolicy(factor=factor, extra=extra, interval=interval, rule=rule)
        n_int = interval_count(job["t0"], job["t_end"], interval)
        rg = replay(
            trace,
            p,
            t0=job["t0"],
            n_intervals=n_int,
            record_header=job["record_header"],
            max_blob_bytes=blob_bytes,
            max_blob_records=job["blob_records"],
            per_interval=False,
        )
        totals = rg.totals.copy()
        totals[:, 0] = 0
        totals[0, 0] = int(rg.summary[:, SUMMARY.index("sweeps")].sum())  # sweeps, in the unused decision column
        grid_totals.append(totals)
        if len(trace.queues):
            nq = len(trace.queues)
            per_queue = {"combo": np.full(nq, g, np.int32), "queue": list(trace.queues)}
            per_queue.update({s: rg.summary[:, k] for k, s in enumerate(SUMMARY)})
            part = f"part-{unit['index']:05d}-{g:03d}.parquet"
            _write(arrow.table(per_queue), os.path.join(job["out"], "grid_queues"), part)
    totals = r.totals.copy()
    totals[:, 0] = np.sum(r.intervals[:, :, 0] >= 0, axis=0)  # queues swept in each interval
    result.update(
        events=len(trace),
        queues=len(trace.queues),
        seconds=time.perf_counter() - t_start,
        cpu_seconds=time.process_time() - cpu_start,
        read_seconds=t_read - t_start,
        totals=totals,
        grid=grid_totals,
        top=_top(cols),
        span=span,
    )
    return result


def combine(a: dict, b: dict) -> dict:
    """Merge two units' results (associative and commutative: Spark reduces them in any order)."""
    out = {k: a[k] + b[k] for k in ("units", "events", "queues", "seconds", "cpu_seconds", "read_seconds")}
    out["errors"] = a["errors"] + b["errors"]  # at most one a unit; the driver finds the first
    ta, tb = a.get("totals"), b.get("totals")
    out["totals"] = tb if ta is None else ta if tb is None else ta + tb
    ga, gb = a.get("grid"), b.get("grid")
    out["grid"] = gb if not ga else ga if not gb else [x + y for x, y in zip(ga, gb, strict=True)]
    out["span"] = a.get("span") or b.get("span")  # a direct replay's: every task read the same
    out["top"] = sorted(a.get("top", []) + b.get("top", []), key=lambda r: -r["peak_saved_bytes"])[:TOP]
    return out
