"""One work unit of the pipeline: a file of whole queues, read with pyarrow, checked, replayed.

This is what a Spark task runs (pipeline/stages.py schedules the units). It imports no
pyspark: rows never travel from Spark's JVM into Python; the task reads its own file (local
path or any ``pyarrow.fs`` URI), runs the one checker of sweeper/traces.py and the numba
kernel, writes its per-interval metrics as Parquet beside the others, and returns only a
small summary (events, queues, seconds, or the first fault) to the driver.
"""

from __future__ import annotations

import os
import time

import numpy as np

from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import METRICS, SUMMARY, replay
from sweepq.sweeper.traces import TraceError, _filesystem, read_unit

GRID_AXES = ("interval", "factor", "extra", "blob_bytes")


def _write(table, directory: str, name: str) -> None:
    import pyarrow.parquet as pq

    fs, d = _filesystem(directory)
    fs.create_dir(d, recursive=True)
    with fs.open_output_stream(d.rstrip("/") + "/" + name) as f:
        pq.write_table(table, f)


def _metrics_table(r, queues: list[str]):
    """Per (queue, interval) rows, queue as a dictionary column: no Python object per row."""
    import pyarrow as pa

    nq, n_int = r.intervals.shape[0], r.intervals.shape[1]
    cols = {
        "queue": pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(nq, dtype=np.int32), n_int)), pa.array(queues, pa.string())
        ).cast(pa.string()),
        "interval": pa.array(np.tile(np.arange(n_int, dtype=np.int32), nq)),
    }
    flat = r.intervals.reshape(nq * n_int, len(METRICS))
    for k, m in enumerate(METRICS):
        cols[m] = pa.array(flat[:, k])
    return pa.table(cols)


def replay_unit(unit: dict, job: dict) -> dict:
    """Replay one unit. ``unit``: {"index", "path"}; ``job``: t0, t_end, n_intervals, policy
    parameters, blob bounds, output directory, and the what-if grid (a list of combinations).

    Returns {"unit", "events", "queues", "seconds", "error"}: ``error`` is None, or
    (column, row, why) of the first fault in the unit (the driver reports the lowest row)."""
    import pyarrow as pa

    t_start = time.perf_counter()
    name = f"part-{unit['index']:05d}.parquet"
    try:
        trace = read_unit(unit["path"])
    except TraceError as e:
        return {"unit": unit["index"], "events": 0, "queues": 0, "seconds": 0.0, "error": (e.column, e.row, e.why)}
    t_read = time.perf_counter()
    policy = SweepPolicy(factor=job["factor"], extra=job["extra"], interval=job["interval"])
    r = replay(
        trace,
        policy,
        t0=job["t0"],
        n_intervals=job["n_intervals"],
        max_blob_bytes=job["blob_bytes"],
        max_blob_records=job["blob_records"],
    )
    if len(trace.queues):
        _write(_metrics_table(r, trace.queues), os.path.join(job["out"], "metrics"), name)
    for g, (interval, factor, extra, blob_bytes) in enumerate(job.get("grid") or []):
        p = SweepPolicy(factor=factor, extra=extra, interval=interval)
        n_int = int((job["t_end"] - job["t0"]) // round(interval * 1e6) + 1)
        rg = replay(
            trace,
            p,
            t0=job["t0"],
            n_intervals=n_int,
            max_blob_bytes=blob_bytes,
            max_blob_records=job["blob_records"],
            per_interval=False,
        )
        if not len(trace.queues):
            continue
        nq = len(trace.queues)
        per_queue = {"combo": pa.array(np.full(nq, g, np.int32)), "queue": pa.array(trace.queues, pa.string())}
        per_queue.update({s: pa.array(rg.summary[:, k]) for k, s in enumerate(SUMMARY)})
        part = f"part-{unit['index']:05d}-{g:03d}.parquet"
        _write(pa.table(per_queue), os.path.join(job["out"], "grid_queues"), part)
        tot = {"combo": pa.array(np.full(n_int, g, np.int32)), "interval": pa.array(np.arange(n_int, dtype=np.int32))}
        tot.update({m: pa.array(rg.totals[:, k]) for k, m in enumerate(METRICS) if m != "decision"})
        _write(pa.table(tot), os.path.join(job["out"], "grid_totals"), part)
    t_end = time.perf_counter()
    return {
        "unit": unit["index"],
        "events": len(trace),
        "queues": len(trace.queues),
        "seconds": {"read": t_read - t_start, "replay": t_end - t_read},
        "error": None,
    }
