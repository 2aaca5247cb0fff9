"""The direct replay: no layout. Each replay task reads the whole trace and replays the queues
of its bucket.

Laying a trace out by queue (pipeline/layout.py) is a shuffle: every event is read, scattered
and written once, and read again by the replay. Where the tasks are few, on the cores of one
machine (a local master), reading the whole trace once per task costs less than that: on the
10.8 M-event trace of docs/pipeline.md a task reads and checks it in about 0.4 s of one core,
the layout's job took about 1 s on two. So a direct task (:func:`read_bucket`) reads the trace
with the reader of ``sweepq replay`` (sweeper/traces.py ``read``, on the task's share of the
cores), which converts and checks every row and puts the rows in time
order as that command does; then keeps the rows of the queues its bucket holds
(:func:`sweepq.sweeper.traces.bucket_of`, as the layout hashes them), in their order, with their
lanes counted by the read. Each queue's events are replayed in input order (the order rule),
and a bad value or a queue going backwards is the same TraceError, naming the same row of the
input, as ``sweepq replay`` raises: every task checks every row.

The price is memory and repeated work: each task holds the whole trace (about 18 bytes an
event) and every task decodes it. :func:`chosen` picks this mode only where that is small:
a local master and at most ``MAX_READS`` events read by all the tasks together. A task reads
on as many threads as it has cores (:func:`tasks_for`: one task per two cores by default).
"""

from __future__ import annotations

import numba
import numpy as np

from sweepq.pipeline import arena
from sweepq.sweeper.traces import Trace, bucket_of, read

# Events read by all the direct tasks together (the trace's events times the tasks) up to which
# ``--shuffle auto`` replays directly: on 2 cores (one task), traces of up to 32 M events, whose
# columns take about 600 MB in the worker; on 16 (8 tasks), 4 M. Above it a layout is made,
# read once.
MAX_READS = 32_000_000
# Bytes of a CSV trace per row, at least: its rows are unknown before it is read, so the bound
# above takes its size divided by this ("1,Q,put,1,0,false" and a line end).
CSV_MIN_ROW_BYTES = 18


def is_local(master: str) -> bool:
    """Whether Spark's master is one machine's cores (``local``, ``local[N]``, ``local[*]``)."""
    return master == "local" or master.startswith("local[")


def chosen(master: str, tasks: int, rows: int | None, csv_bytes: int | None = None) -> bool:
    """Whether ``--shuffle auto`` replays directly: on a local master, when ``tasks`` reads of
    the trace (``rows`` events, or a CSV's ``csv_bytes``) stay within ``MAX_READS`` events."""
    if not is_local(master):
        return False
    events = rows if rows is not None else (csv_bytes or 0) // CSV_MIN_ROW_BYTES
    return max(1, tasks) * events <= MAX_READS


def tasks_for(cores: int) -> int:
    """Direct tasks on ``cores`` unless told (``--buckets``): one per two cores, each reading on
    two threads. The read is most of a task's work and parallel on threads; a task per core
    reads the trace twice as often for the same cores. On the 10.8 M-event trace of
    docs/pipeline.md, alternating on 2 cores at load 7 to 8: one task took 0.75 to 1.24 s of
    CPU, two 1.20 to 1.84 s, and the replay stage was the shorter with one in three pairs of
    four."""
    return max(1, cores // 2)


def units(path: str, tasks: int, threads: int = 1) -> list[dict]:
    """The work units of a direct replay: bucket ``b`` of ``tasks`` for each task, each reading
    the whole trace at ``path`` on ``threads`` threads."""
    spec = {"path": path, "buckets": tasks, "threads": threads}
    return [{"index": b, "unit": b, "direct": {**spec, "bucket": b}} for b in range(tasks)]


@numba.njit(cache=True, nogil=True)
def _compact(mine, local, cols) -> int:
    """Move the rows whose queue is ``mine`` to the front of ``cols``, in place and in their
    order, their queue renumbered by ``local``; returns how many. Row i goes to j <= i, so
    no row is overwritten before it is read; no memory of its own (fresh pages cost their
    faults in a task's new worker). Branch-free: every row is written, and the place moves
    on only past a row kept (half the rows, in no pattern a branch could predict)."""
    t, q, o, b, p = cols
    j = 0
    for i in range(len(q)):
        code = q[i]
        t[j] = t[i]
        q[j] = local[code]
        o[j] = o[i]
        b[j] = b[i]
        p[j] = p[i]
        j += mine[code]
    return j


def bucket(whole: Trace, buckets: int, k: int) -> Trace:
    """The rows of ``whole`` (a checked trace, its lanes counted) whose queue falls in bucket
    ``k`` of ``buckets``, in their order, as a checked trace of those queues alone. Takes the
    columns of ``whole`` over (compacted in place): ``whole`` is not to be used after."""
    mine = bucket_of(whole.queues, buckets) == k
    codes = np.flatnonzero(mine)
    local = np.zeros(len(whole.queues), np.int32)
    local[codes] = np.arange(len(codes), dtype=np.int32)
    lanes = whole.lane_counts.reshape(-1, 10)[codes].reshape(-1).copy()
    cols = (whole.time_us, whole.queue, whole.op, whole.nbytes, whole.priority)
    n = _compact(mine.view(np.uint8), local, cols)
    t, q, o, b, p = (c[:n] for c in cols)
    names = [whole.queues[c] for c in codes.tolist()]  # sorted, as the whole's are
    return Trace(t, q, o, b, p, np.broadcast_to(np.False_, (n,)), names, lanes)


def read_bucket(spec: dict) -> tuple[Trace, dict]:
    """A direct unit's trace: the queues of bucket ``spec["bucket"]`` of ``spec["buckets"]``
    of the trace at ``spec["path"]``, read and checked whole as ``sweepq replay`` reads it
    (:raises TraceError: the first row at fault, in the input's numbering); and the whole trace's
    span (its events, first and last time), which fixes the replay's intervals."""
    # Its columns, and the kernel's work arrays after them, in the memory the daemon made
    # ready while the JVM started (pipeline/arena.py).
    empty = arena.claimed()
    whole = read(spec["path"], persistent=False, threads=spec.get("threads", 1), empty=empty)
    n = len(whole)
    span = {"events": n, "t0": int(whole.time_us[0]) if n else 0, "t_end": int(whole.time_us[-1]) if n else 0}
    mine = bucket(whole, spec["buckets"], spec["bucket"])
    if empty is not None:
        from sweepq.sweeper.replay import work_slots  # loaded in the worker already (the daemon's)

        arena.lend_work(empty, work_slots(mine.lane_counts))
    return mine, span


def warm_up() -> None:
    """Load the compiled selection (numba's cache) in this process: Spark's Python daemon does,
    before it forks the workers (pipeline/daemon.py)."""
    one = np.zeros(1, np.int64)
    cols = (one, one.astype(np.int32), one.astype(np.int8), one.astype(np.int32), one.astype(np.int8))
    _compact(np.ones(1, np.uint8), np.zeros(1, np.int32), cols)
