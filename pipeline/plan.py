"""``sweepq pipeline plan``: the plan's grid (sweeper/plan.py) replayed with Spark, settings x
queues as the unit of parallelism.

A unit is one setting over one bucket of queues (:func:`sweepq.sweeper.traces.bucket_of`), or
over every queue when the setting has a memory budget (the budget ties the queues together).
Each task replays its unit with the whole trace's first time and interval count, so the parts'
per-interval totals line up, and returns them with its summary sums; the driver adds the
parts of a setting up (:func:`sweepq.sweeper.plan_run.combine`), which gives what the local
``sweepq plan`` gives for the same grid. Each Spark Python worker reads the trace once and
keeps it for the units it runs (workers are reused).
"""

from __future__ import annotations

import numpy as np

from sweepq.sweeper.plan import Outcome, Setting
from sweepq.sweeper.plan_run import bytes_put, combine, run_part, splittable
from sweepq.sweeper.traces import Trace, bucket_of
from sweepq.sweeper.user_traces import read_any

_TRACES: dict[tuple[str, int, int], Trace] = {}  # per Python worker: (path, buckets, bucket) -> its queues


def _part_of(path: str, buckets: int, bucket: int) -> Trace:
    """The trace's events of one bucket's queues (every queue for bucket -1), read once per worker."""
    key = (path, buckets, bucket)
    if key not in _TRACES:
        whole = _TRACES.get((path, 0, -1))
        if whole is None:
            whole = _TRACES[(path, 0, -1)] = read_any(path)
        if bucket < 0:
            return whole
        mine = bucket_of(whole.queues, buckets)[whole.queue] == bucket
        _TRACES[key] = whole.take(mine)
    return _TRACES[key]


def _unit(path: str, setting: Setting, buckets: int, bucket: int, t0: int, n_int: int, record_header: int):
    trace = _part_of(path, buckets, bucket)
    return run_part(trace, setting, record_header, t0=t0, n_intervals=n_int)


def units(settings: list[Setting], buckets: int) -> list[tuple[int, int]]:
    """(setting index, bucket) for every task: a bucket of queues per task, or all (-1) under a budget."""
    return [(i, b) for i, s in enumerate(settings) for b in (range(buckets) if splittable(s) else [-1])]


def plan_on_spark(
    spark, path: str, settings: list[Setting], record_header: int, buckets: int, trace: Trace | None = None
) -> list[Outcome]:
    """Every setting's outcome, in the order of ``settings``, from Spark tasks of settings x
    buckets of queues. ``trace``: the trace already read by the driver (its first time, length,
    queues and bytes put fix the intervals and the totals), else read here."""
    trace = trace if trace is not None else read_any(path)
    t0 = int(trace.time_us[0]) if len(trace) else 0
    t_end = int(trace.time_us[-1]) if len(trace) else 0
    put = bytes_put(trace, record_header)
    todo = units(settings, buckets)
    n_ints = [int((t_end - t0) // round(s.interval * 1e6) + 1) for s in settings]

    def run(u: tuple[int, int]):
        i, b = u
        totals, summary = _unit(path, settings[i], buckets, b, t0, n_ints[i], record_header)
        return i, np.asarray(totals), summary

    results = spark.sparkContext.parallelize(todo, len(todo)).map(run).collect()
    parts: dict[int, list] = {i: [] for i in range(len(settings))}
    for i, totals, summary in results:
        parts[i].append((totals, summary))
    return [combine(s, parts[i], len(trace.queues), put) for i, s in enumerate(settings)]


__all__ = ["plan_on_spark", "units"]
