"""The replay kernel: the sweep rule run over a message trace, compiled with numba.

It answers "how much memory would the sweeper save on this workload, and what would
unsweeping cost?" without running the engine: it keeps only the *shape* of each queue.

Why it is exact, not approximate: with only puts and plain gets (no selective gets, no
units of work), every lane's messages at any time are a contiguous stretch of that lane's
arrivals, and front list, chain and rear list are consecutive sub-stretches. So a lane is
four indices into its arrivals (head, front end, rear start, tail) plus a marker at each
blob start, and every engine operation is index arithmetic:

* put: the tail grows (into the front list while the chain is empty, else the rear);
* get: the highest non-empty lane gives its head; if its front is empty the first blob of
  the chain comes back first (an unsweep);
* at each interval's end, for every queue: y, x -> :func:`sweepq.sweeper.policy.decide`
  (the same function the live sweeper calls, compiled here); the buffer is the first
  ``keep`` front messages in get order across lanes; the rest of each front list and the
  whole of each rear list is cut into pieces of ``TARGET_MAX`` messages and each piece into
  blobs exactly as the blob store does (at most ``max_blob_records`` records and
  ``max_blob_bytes`` framed bytes, at least one record).

Record sizes count what the engine counts: payload plus the 21-byte descriptor header
(plus 4 bytes of framing inside a blob). tests/test_replay_fidelity.py runs the live engine
and this kernel over the same traces and requires the same decisions and counts at every
interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .policy import SweepPolicy, decide
from .traces import GET, PUT, Trace

REC_HEADER = 21  # engine/record.py HEAD_LEN
FRAME = 4  # blobstore/format.py: one u32 length per record
TARGET_MAX = 16_384  # engine/sweeping.py TARGET_MAX
DEFAULT_MAX_BLOB_BYTES = 256 * 1024  # blobstore/store.py
DEFAULT_MAX_BLOB_RECORDS = 1024

# Per-interval metrics, in column order of ReplayResult.intervals[..., k].
METRICS = (
    "decision",  # messages kept (the buffer) when swept, -1 when not
    "y",  # committed messages in memory at the interval's end (before the sweep)
    "x",  # messages got during the interval
    "depth",  # messages on the queue after the sweep
    "mem_msgs",  # in memory after the sweep
    "mem_bytes",
    "swept_msgs",  # in blobs after the sweep
    "swept_bytes",
    "blobs",  # in the chains after the sweep
    "blobs_written",  # during this interval's sweep
    "blobs_read",  # brought back by gets during the interval
    "bytes_read",
    "nosweep_bytes",  # what memory would hold with no sweeper at all
)
M = {name: i for i, name in enumerate(METRICS)}

_decide = numba.njit(cache=True)(decide)
# _TOP[m] = the highest set bit of a 10-bit lane mask m (the lane a get takes from).
_TOP = np.array([max((b for b in range(10) if m >> b & 1), default=-1) for m in range(1024)], np.int64)


@numba.njit(cache=True)
def _layout(queue, op, prio, nbytes, n_queues):
    """Give every (queue, lane) a contiguous stretch of a flat arrival array; return the
    stretches' bases and the prefix sums of record sizes (a size is prefix[j+1] - prefix[j])."""
    nl = n_queues * 10
    counts = np.zeros(nl, np.int64)
    for i in range(len(op)):
        if op[i] == PUT:
            counts[np.int64(queue[i]) * 10 + np.int64(prio[i])] += 1
    base = np.zeros(nl + 1, np.int64)
    for k in range(nl):
        base[k + 1] = base[k] + counts[k]
    prefix = np.zeros(base[nl] + 1, np.int64)
    fill = base[:nl].copy()
    for i in range(len(op)):
        if op[i] == PUT:
            k = np.int64(queue[i]) * 10 + np.int64(prio[i])
            prefix[fill[k] + 1] = np.int64(nbytes[i]) + REC_HEADER
            fill[k] += 1
    for j in range(base[nl]):
        prefix[j + 1] += prefix[j]
    return base, prefix


@numba.njit(cache=True)
def _cut(lo, hi, prefix, marker, max_bytes, max_records):
    """Cut [lo, hi) into pieces of TARGET_MAX, each into blobs; mark blob starts. -> blobs."""
    for j in range(lo, hi):
        marker[j] = 0
    blobs = 0
    p0 = lo
    while p0 < hi:
        p1 = min(p0 + TARGET_MAX, hi)
        s = p0
        while s < p1:
            marker[s] = 1
            blobs += 1
            e = s
            used = 0
            while e < p1 and e - s < max_records:
                size = prefix[e + 1] - prefix[e] + FRAME
                if e > s and used + size > max_bytes:
                    break
                used += size
                e += 1
            s = e
        p0 = p1
    return blobs


@numba.njit(cache=True)
def _replay(
    time_us,
    queue,
    op,
    prio,
    nbytes,
    n_queues,
    t0,
    interval_us,
    n_intervals,
    factor,
    extra,
    max_bytes,
    max_records,
    per_interval,
):
    base, prefix = _layout(queue, op, prio, nbytes, n_queues)
    nl = n_queues * 10
    mask = np.zeros(n_queues, np.int64)  # bit l: lane l of the queue holds messages
    top = _TOP
    head = base[:nl].copy()
    fend = base[:nl].copy()
    rstart = base[:nl].copy()
    tail = base[:nl].copy()
    nblobs = np.zeros(nl, np.int64)
    marker = np.zeros(len(prefix), np.int8)
    x = np.zeros(n_queues, np.int64)
    nempty = np.zeros(n_queues, np.int64)
    nput = np.zeros(n_queues, np.int64)
    nget = np.zeros(n_queues, np.int64)
    blobs_read = np.zeros(n_queues, np.int64)
    bytes_read = np.zeros(n_queues, np.int64)
    nq_out = n_queues if per_interval else 1
    out = np.zeros((nq_out, n_intervals, len(METRICS)), np.int64)
    totals = np.zeros((n_intervals, len(METRICS)), np.int64)
    summary = np.zeros((n_queues, 8), np.int64)  # see SUMMARY
    # Each interval's events, found once by binary search rather than by a time test per event.
    ends = np.searchsorted(time_us, t0 + (np.arange(n_intervals) + 1) * interval_us)
    cur = 0
    i = 0
    while cur < n_intervals:
        stop = ends[cur]
        while i < stop:
            q = np.int64(queue[i])
            if op[i] == PUT:
                p = np.int64(prio[i])  # widened: an int8 shift would overflow when interpreted
                k = q * 10 + p
                tail[k] += 1
                if fend[k] == rstart[k]:  # no chain: the front list takes it
                    fend[k] = tail[k]
                    rstart[k] = tail[k]
                mask[q] |= np.int64(1) << p
                nput[q] += 1
            elif mask[q] == 0:
                nempty[q] += 1  # a get on an empty queue (MQRC 2033)
            else:
                lane = top[mask[q]]  # the highest non-empty lane, in one lookup
                k = q * 10 + lane
                if head[k] == fend[k]:  # front empty, chain not: unsweep one blob
                    nxt = fend[k] + 1
                    while nxt < rstart[k] and marker[nxt] == 0:
                        nxt += 1
                    blobs_read[q] += 1
                    bytes_read[q] += prefix[nxt] - prefix[fend[k]]
                    nblobs[k] -= 1
                    fend[k] = nxt
                    if fend[k] == rstart[k]:  # the last blob: the rear joins the front
                        fend[k] = tail[k]
                        rstart[k] = tail[k]
                head[k] += 1
                if head[k] == tail[k]:
                    mask[q] &= ~(np.int64(1) << lane)
                x[q] += 1
                nget[q] += 1
            i += 1
        # The interval ends: one sweep cycle over every queue.
        for q in range(n_queues):
            y = 0
            for lane in range(10):
                k = q * 10 + lane
                y += (fend[k] - head[k]) + (tail[k] - rstart[k])
            keep = _decide(y, x[q], factor, extra)
            written = 0
            if keep >= 0:
                remaining = keep
                for lane in range(9, -1, -1):
                    k = q * 10 + lane
                    front = fend[k] - head[k]
                    take = front if front < remaining else remaining
                    remaining -= take
                    lo = head[k] + take
                    if fend[k] > lo:
                        b = _cut(lo, fend[k], prefix, marker, max_bytes, max_records)
                        nblobs[k] += b
                        written += b
                        fend[k] = lo
                    if tail[k] > rstart[k]:  # a rear list exists only behind a chain
                        b = _cut(rstart[k], tail[k], prefix, marker, max_bytes, max_records)
                        nblobs[k] += b
                        written += b
                        rstart[k] = tail[k]
            row = np.zeros(len(METRICS), np.int64)
            row[0] = keep
            row[1] = y
            row[2] = x[q]
            for lane in range(10):
                k = q * 10 + lane
                row[3] += tail[k] - head[k]
                row[4] += (fend[k] - head[k]) + (tail[k] - rstart[k])
                row[5] += (prefix[fend[k]] - prefix[head[k]]) + (prefix[tail[k]] - prefix[rstart[k]])
                row[6] += rstart[k] - fend[k]
                row[7] += prefix[rstart[k]] - prefix[fend[k]]
                row[8] += nblobs[k]
                row[12] += prefix[tail[k]] - prefix[head[k]]
            row[9] = written
            row[10] = blobs_read[q]
            row[11] = bytes_read[q]
            blobs_read[q] = 0
            bytes_read[q] = 0
            x[q] = 0
            if per_interval:
                out[q, cur, :] = row
            for m in range(len(METRICS)):
                totals[cur, m] += row[m]
            summary[q, 0] = max(summary[q, 0], row[5])
            summary[q, 1] = max(summary[q, 1], row[12])
            summary[q, 2] += row[10]
            summary[q, 3] += row[11]
            summary[q, 4] += 1 if keep >= 0 else 0
        cur += 1
    summary[:, 5] = nput
    summary[:, 6] = nget
    summary[:, 7] = nempty
    return out, totals, summary


SUMMARY = ("peak_mem_bytes", "peak_nosweep_bytes", "blobs_read", "bytes_read", "sweeps", "puts", "gets", "gets_empty")


@dataclass(frozen=True)
class ReplayResult:
    """What the replay found. ``intervals[q, i, m]`` (when asked for) and ``totals[i, m]``
    use METRICS as the last axis; ``summary[q, s]`` uses SUMMARY."""

    queues: list[str]
    t0: int
    interval_us: int
    intervals: np.ndarray | None
    totals: np.ndarray
    summary: np.ndarray

    def metric(self, name: str, queue: str | None = None) -> np.ndarray:
        if queue is None:
            return self.totals[:, M[name]]
        if self.intervals is None:
            raise ValueError("replay(per_interval=True) keeps per-queue intervals")
        return self.intervals[self.queues.index(queue), :, M[name]]

    def summary_of(self, queue: str) -> dict:
        row = self.summary[self.queues.index(queue)]
        return {name: int(row[i]) for i, name in enumerate(SUMMARY)}


def replay(
    trace: Trace,
    policy: SweepPolicy | None = None,
    *,
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
    max_blob_records: int = DEFAULT_MAX_BLOB_RECORDS,
    per_interval: bool = True,
    t0: int | None = None,
    n_intervals: int | None = None,
) -> ReplayResult:
    """Replay the sweep rule over ``trace``; intervals start at ``t0`` (default: the first
    event's time) and the last one ends after the last event."""
    policy = policy or SweepPolicy()
    interval_us = round(policy.interval * 1e6)
    if len(trace) == 0:
        start = 0 if t0 is None else t0
        n_int = n_intervals or 0
    else:
        start = int(trace.time_us[0]) if t0 is None else int(t0)
        n_int = n_intervals or int((int(trace.time_us[-1]) - start) // interval_us + 1)
    out, totals, summary = _replay(
        trace.time_us,
        trace.queue,
        trace.op,
        trace.priority,
        trace.nbytes,
        len(trace.queues),
        start,
        interval_us,
        n_int,
        policy.factor,
        policy.extra,
        max_blob_bytes,
        max_blob_records,
        per_interval,
    )
    return ReplayResult(list(trace.queues), start, interval_us, out if per_interval else None, totals, summary)


__all__ = ["GET", "METRICS", "PUT", "SUMMARY", "ReplayResult", "replay"]
