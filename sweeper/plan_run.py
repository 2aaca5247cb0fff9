"""The plan's grid, replayed: one run of the replay kernel per setting (sweeper/plan.py holds
the grid, the frontier and the choice; this module only runs the kernel).

The kernel releases the GIL, so settings run on ``workers`` threads at once over the one
trace in memory (its lanes' layout is counted once, before the threads start).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

import numpy as np

from .plan import Outcome, Setting, outcome
from .replay import SUMMARY, M, lane_counts, overall_figures, replay
from .traces import PUT, Trace


def bytes_put(trace: Trace, record_header: int) -> int:
    """Every put's record bytes (payload and the engine's record header)."""
    puts = trace.op == PUT
    return int(trace.nbytes[puts].sum(dtype=np.int64)) + int(np.count_nonzero(puts)) * record_header


def splittable(setting: Setting) -> bool:
    """Whether a setting's replay may be split by queue: queues are independent unless a
    memory budget ties them together (its sweep and its put checks count every queue)."""
    return setting.memory_budget == 0


def run_part(
    trace: Trace, setting: Setting, record_header: int, t0: int | None = None, n_intervals: int | None = None
) -> tuple[np.ndarray, dict[str, int]]:
    """One setting over ``trace`` (all its queues, or some of a larger trace's with that trace's
    ``t0`` and ``n_intervals``, so that every part's intervals line up): the per-interval totals
    (METRICS columns) and the SUMMARY columns summed over its queues (``stored_max_us``: the
    most). Parts of one trace add up to the whole: :func:`combine`."""
    r = replay(
        trace,
        setting.sweep_policy(),
        record_header=record_header,
        max_blob_bytes=setting.blob_bytes,
        max_blob_records=setting.blob_records,
        per_interval=False,
        refuse=setting.policy == "fail",
        t0=t0,
        n_intervals=n_intervals,
    )
    col = {name: r.summary[:, k] for k, name in enumerate(SUMMARY)}
    summary = {name: int(v.max() if name == "stored_max_us" else v.sum()) if len(v) else 0 for name, v in col.items()}
    return r.totals, summary


def combine(setting: Setting, parts: list[tuple[np.ndarray, dict[str, int]]], queues: int, put_bytes: int) -> Outcome:
    """A setting's outcome from the parts of its replay over disjoint sets of queues."""
    totals = parts[0][0].copy()
    summary = dict(parts[0][1])
    for t, s in parts[1:]:
        totals += t
        for name, v in s.items():
            summary[name] = max(summary[name], v) if name == "stored_max_us" else summary[name] + v
    overall = overall_figures(totals, queues, summary["sweeps"])
    overall["swept_bytes_at_end"] = int(totals[-1, M["swept_bytes"]]) if len(totals) else 0
    return outcome(setting, overall, summary, put_bytes)


def run_one(trace: Trace, setting: Setting, record_header: int, put_bytes: int | None = None) -> Outcome:
    """Replay ``trace`` under ``setting`` and measure its outcome."""
    if put_bytes is None:
        put_bytes = bytes_put(trace, record_header)
    return combine(setting, [run_part(trace, setting, record_header)], len(trace.queues), put_bytes)


def run_grid(
    trace: Trace,
    settings: list[Setting],
    record_header: int,
    workers: int = 1,
    progress: Callable[[int, int, Outcome], None] | None = None,
) -> list[Outcome]:
    """The outcome of every setting, in the order of ``settings``; ``progress(done, total,
    outcome)`` is called as each finishes (from the caller's thread)."""
    lane_counts(trace)  # checks the trace and lays out its lanes once, before any thread
    put_bytes = bytes_put(trace, record_header)
    out: list[Outcome | None] = [None] * len(settings)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(run_one, trace, s, record_header, put_bytes): i for i, s in enumerate(settings)}
        for done, fut in enumerate(as_completed(futures), 1):
            o = fut.result()
            out[futures[fut]] = o
            if progress is not None:
                progress(done, len(settings), o)
    return [o for o in out if o is not None]


__all__ = ["bytes_put", "combine", "run_grid", "run_one", "run_part", "splittable"]
