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
  whole of each rear list move (:func:`sweepq.sweeper.runs.choose_runs`, the engine's own run
  selection), cut by :func:`sweepq.sweeper.runs.cut_run` (compiled in here), the very
  function that cuts the live engine's runs into bounded blobs (the engine cuts a run into
  pieces of whole blobs of about 1 MiB first, :func:`sweepq.sweeper.runs.pieces`, each
  piece's blobs cut_run's from its start; here a piece is TARGET_MAX records).

Record sizes count what the engine counts: payload plus the record header (``record_header``,
the engine's HEAD_LEN, passed by the caller; plus the blob store's framing inside a blob,
which cut_run adds). tests/test_replay_fidelity.py runs the live engine
and this kernel over the same traces and requires the same decisions and counts at every
interval.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numba
import numpy as np

from . import arrow
from .policy import ADAPTIVE, ADAPTIVE_STATE, RULES, SweepPolicy, budget_order, decide, decide_adaptive, over_budget
from .runs import DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_BLOB_RECORDS, choose_runs, cut_run
from .traces import GET, PUT, Trace, TraceError, check_events, fault
from .workspace import POOL

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
    "msgs_written",  # messages moved into blobs by this interval's sweep
    "msgs_reswept",  # of those, messages that had been swept before (and came back)
    "budget_msgs",  # of those, messages swept beyond the rule to meet the memory budget
)
M = {name: i for i, name in enumerate(METRICS)}

_decide = numba.njit(cache=True)(decide)
_decide_adaptive = numba.njit(cache=True)(decide_adaptive)
_over_budget = numba.njit(cache=True)(over_budget)
_budget_order = numba.njit(cache=True)(budget_order)
_cut_run = numba.njit(cache=True, nogil=True)(cut_run)  # the engine runs the same functions interpreted
_choose_runs = numba.njit(cache=True, nogil=True)(choose_runs)
# _TOP[m] = the highest set bit of a 10-bit lane mask m (the lane a get takes from).
_TOP = np.array([max((b for b in range(10) if m >> b & 1), default=-1) for m in range(1024)], np.int64)

# The kernel's work arrays, one slot per put and one per lane: prefix (the lane's bytes so far),
# marker (the bits below) and swept_at (the interval that wrote a blob, at its first slot).
WORK_DTYPES = (np.dtype(np.int64), np.dtype(np.int8), np.dtype(np.int32))
WORK_BYTES_PER_SLOT = sum(dt.itemsize for dt in WORK_DTYPES)  # 13: what a caller sizes memory by

# marker bits per arrival slot
_BLOB_START = 1  # the first record of a blob in a chain
_WAS_SWEPT = 2  # the record has been swept at least once


@numba.njit(cache=True, nogil=True)
def _sweep_run(lo, hi, prefix, marker, ends, max_bytes, max_records, swept_at, when):
    """Move slots [lo, hi) of one lane into blobs cut by runs.cut_run (the engine's cut); mark
    each blob's start, and note there the interval ``when`` whose end wrote it (an unsweep
    measures how long its blob was stored from that). Returns (blobs, re-swept records)."""
    again = 0
    for j in range(lo, hi):
        if marker[j] & _WAS_SWEPT:
            again += 1
        marker[j] = _WAS_SWEPT
    nb = _cut_run(prefix, lo, hi, max_bytes, max_records, ends)
    s = lo
    for b in range(nb):
        marker[s] |= _BLOB_START
        swept_at[s] = when
        s = ends[b]
    return nb, again


@numba.njit(cache=True, nogil=True)
def _choose(q, keep, ln, sel):
    """runs.choose_runs for queue q of the kernel's lanes. Every message of the replay is
    sweepable (no units of work), and no put lands during a sweep, so the rear limit is the
    whole rear. ``sel`` holds five rows of ten: front, rear, limit, kept, moved."""
    for lane in range(10):
        k = q * 10 + lane
        sel[0, lane] = ln[k, 1] - ln[k, 0]
        sel[1, lane] = ln[k, 3] - ln[k, 2]
        sel[2, lane] = sel[1, lane]
    _choose_runs(sel[0], sel[1], sel[2], keep, sel[3], sel[4])


@numba.njit(cache=True, nogil=True)
def _sweep_queue(q, keep, ln, prefix, marker, ends, max_bytes, max_records, sel, swept_at, when):
    """Sweep queue q keeping ``keep`` messages (the runs of :func:`_choose`): each front run
    to the chain's head, each rear run to its tail. Returns (blobs written, messages moved,
    of them swept before)."""
    _choose(q, keep, ln, sel)
    written = 0
    moved = 0
    again = 0
    for lane in range(9, -1, -1):
        k = q * 10 + lane
        lo = ln[k, 0] + sel[3, lane]
        if ln[k, 1] > lo:
            b, a = _sweep_run(lo, ln[k, 1], prefix, marker, ends, max_bytes, max_records, swept_at, when)
            ln[k, 5] += b
            written += b
            moved += ln[k, 1] - lo
            again += a
            ln[k, 1] = lo
        hi = ln[k, 2] + sel[4, lane]
        if hi > ln[k, 2]:  # a rear list exists only behind a chain
            b, a = _sweep_run(ln[k, 2], hi, prefix, marker, ends, max_bytes, max_records, swept_at, when)
            ln[k, 5] += b
            written += b
            moved += hi - ln[k, 2]
            again += a
            ln[k, 2] = hi
    return written, moved, again


@numba.njit(cache=True, nogil=True)
def _beyond(q, keep, ln, prefix, sel):
    """The bytes a sweep keeping ``keep`` messages would move from queue q (the same runs)."""
    _choose(q, keep, ln, sel)
    total = 0
    for lane in range(10):
        k = q * 10 + lane
        total += prefix[ln[k, 1]] - prefix[ln[k, 0] + sel[3, lane]]
        total += prefix[ln[k, 2] + sel[4, lane]] - prefix[ln[k, 2]]
    return total


@numba.njit(cache=True, nogil=True)
def _budget(budget, n_queues, extra, max_bytes, max_records, lanes, cycle, scratch, when):
    """The memory budget, modelled (the one place of its logic here): when the messages in
    memory exceed ``budget`` bytes after the rule's sweeps, sweep beyond the rule, the queues
    with the most sweepable bytes first (policy.budget_order), each keeping its x + extra
    buffer, until they are back under it. ``lanes``: (ln, qs, prefix, marker, ends, swept_at);
    ``cycle``: this cycle's per-queue decision, blobs written, moved, re-swept, moved by the
    budget; ``scratch``: (sel, sweepable, chosen)."""
    ln, qs, prefix, marker, ends, swept_at = lanes
    dec, wr, mv, ag, bm = cycle
    sel, sweepable, chosen = scratch
    total = 0
    for q in range(n_queues):
        sweepable[q] = _beyond(q, qs[q, 1] + extra, ln, prefix, sel)
        for lane in range(10):
            k = q * 10 + lane
            total += (prefix[ln[k, 1]] - prefix[ln[k, 0]]) + (prefix[ln[k, 3]] - prefix[ln[k, 2]])
    need = _over_budget(total, budget)
    if need <= 0:
        return
    n = _budget_order(sweepable, need, chosen)
    for j in range(n):
        q = chosen[j]
        w, m, a = _sweep_queue(
            q, qs[q, 1] + extra, ln, prefix, marker, ends, max_bytes, max_records, sel, swept_at, when
        )
        if dec[q] < 0:
            dec[q] = qs[q, 1] + extra
        wr[q] += w
        mv[q] += m
        ag[q] += a
        bm[q] += m
        qs[q, 5] -= a


@numba.njit(cache=True, nogil=True)
def _replay(
    time_us,
    queue,
    op,
    prio,
    nbytes,
    lane_counts,
    n_queues,
    t0,
    interval_us,
    n_intervals,
    factor,
    extra,
    max_bytes,
    max_records,
    rec_header,
    per_interval,
    rule,
    budget,
    refuse,
    prefix,
    marker,
    swept_at,
):
    """The replay. Lane k's arrivals live in slots ``start[k] .. start[k] + lane_counts[k] - 1`` of
    one flat array, with one spare slot per lane so that ``prefix`` (record bytes summed from
    the lane's start; prefix[start[k]] = 0) is filled as puts arrive: no layout pass.

    ``prefix`` (int64), ``marker`` (int8) and ``swept_at`` (int32) are the work arrays, of at
    least ``work_slots(lane_counts)`` slots each and any contents (the caller's, from the
    workspace: sweeper/workspace.py): a slot of ``prefix`` is read only after a put wrote it
    or at a lane's start (zeroed here), one of ``swept_at`` only at a blob's start (written by
    its sweep); ``marker`` is zeroed here. Nothing returned is a view of them.

    With a ``budget``, a put that arrives when the messages in memory and it would pass the
    budget is counted (summary ``puts_over_budget``: what a BLOCK queue would hold back); with
    ``refuse`` it is also not made (a FAIL queue's MQRC 2071), else it is made and the budget's
    sweep at the interval's end models the rest."""
    nl = n_queues * 10
    start = np.zeros(nl + 1, np.int64)
    longest = 1
    for k in range(nl):
        start[k + 1] = start[k] + lane_counts[k] + 1
        longest = max(longest, lane_counts[k])
    for k in range(nl):
        prefix[start[k]] = 0
    marker[: start[nl]] = 0
    # swept_at: at a blob's first slot, the interval that wrote it
    ends = np.empty(longest + 1, np.int64)
    top = _TOP
    # Lane state, one row per lane so one cache line serves an event: head, front end, rear
    # start, tail (slots; front = [head, fend), chain = [fend, rstart), rear = [rstart, tail)).
    # Column 4 is the lane's bytes put so far (prefix at its tail), 5 its blobs; 8 columns make
    # a row one 64-byte cache line.
    ln = np.zeros((nl, 8), np.int64)
    for k in range(nl):
        ln[k, 0] = ln[k, 1] = ln[k, 2] = ln[k, 3] = start[k]
    # Queue state: lane mask (bit l: lane l holds messages), x, gets on empty, blobs and bytes read.
    # 5: messages in memory that came back from a blob (the adaptive rule's ``back``); 6 and 7:
    # the sum and the longest of the times unswept blobs had been stored (us); 8 columns make
    # a row one 64-byte cache line.
    qs = np.zeros((n_queues, 8), np.int64)
    astate = np.zeros((n_queues, ADAPTIVE_STATE), np.int64)
    ys = np.zeros(n_queues, np.int64)
    dec = np.zeros(n_queues, np.int64)
    wr = np.zeros(n_queues, np.int64)
    mv = np.zeros(n_queues, np.int64)
    ag = np.zeros(n_queues, np.int64)
    bm = np.zeros(n_queues, np.int64)
    sweepable = np.zeros(n_queues, np.int64)
    chosen = np.zeros(n_queues, np.int64)
    sel = np.zeros((5, 10), np.int64)  # _choose's scratch
    nq_out = n_queues if per_interval else 1
    nm = len(METRICS)
    out = np.zeros((nq_out, n_intervals if per_interval else 1, nm), np.int64)
    totals = np.zeros((n_intervals, nm), np.int64)
    summary = np.zeros((n_queues, len(SUMMARY)), np.int64)
    row = np.zeros(nm, np.int64)
    # Only the adaptive rule needs ``back``; the seed's rule skips its upkeep on every get.
    track_back = rule == ADAPTIVE
    # Only a budget needs the running count of bytes in memory (put-time checks).
    track_mem = budget > 0
    mem_now = np.int64(0)
    over = np.zeros(n_queues, np.int64)
    # Each interval's events, found once by binary search rather than by a time test per event.
    ends_t = np.searchsorted(time_us, t0 + (np.arange(n_intervals) + 1) * interval_us)
    i = 0
    for cur in range(n_intervals):
        stop = ends_t[cur]
        while i < stop:
            q = np.int64(queue[i])
            if op[i] == PUT:
                p = np.int64(prio[i])  # widened: an int8 shift would overflow when interpreted
                k = q * 10 + p
                s = ln[k, 3]
                rec = np.int64(nbytes[i]) + rec_header
                if track_mem:
                    if mem_now + rec > budget:
                        over[q] += 1
                        if refuse:
                            i += 1
                            continue
                    mem_now += rec
                c = ln[k, 4] + rec  # the lane's bytes so far, in its row
                ln[k, 4] = c
                prefix[s + 1] = c
                ln[k, 3] = s + 1
                # No chain: the front list takes it (written as selects: no branch to mispredict).
                f = ln[k, 1]
                r = ln[k, 2]
                ln[k, 1] = s + 1 if f == r else f
                ln[k, 2] = s + 1 if f == r else r
                qs[q, 0] |= np.int64(1) << p
            elif qs[q, 0] == 0:
                qs[q, 2] += 1  # a get on an empty queue (MQRC 2033)
            else:
                lane = top[qs[q, 0]]  # the highest non-empty lane, in one lookup
                k = q * 10 + lane
                if ln[k, 0] == ln[k, 1]:  # front empty, chain not: unsweep one blob
                    nxt = ln[k, 1] + 1
                    while nxt < ln[k, 2] and (marker[nxt] & _BLOB_START) == 0:
                        nxt += 1
                    qs[q, 3] += 1
                    back = prefix[nxt] - prefix[ln[k, 1]]
                    qs[q, 4] += back
                    if track_mem:
                        mem_now += back
                    stored = time_us[i] - (t0 + (np.int64(swept_at[ln[k, 1]]) + 1) * interval_us)
                    qs[q, 6] += stored
                    qs[q, 7] = max(qs[q, 7], stored)
                    if track_back:
                        qs[q, 5] += nxt - ln[k, 1]
                    ln[k, 5] -= 1
                    ln[k, 1] = nxt
                    if nxt == ln[k, 2]:  # the last blob: the rear joins the front
                        ln[k, 1] = ln[k, 3]
                        ln[k, 2] = ln[k, 3]
                h = ln[k, 0]
                if track_mem:
                    mem_now -= prefix[h + 1] - prefix[h]
                if track_back and qs[q, 5] > 0 and marker[h] & _WAS_SWEPT:  # it had come back from a blob
                    qs[q, 5] -= 1
                h += 1
                ln[k, 0] = h
                qs[q, 0] &= ~(np.int64(h == ln[k, 3]) << lane)  # the lane is empty now
                qs[q, 1] += 1
            i += 1
        # The interval ends: one sweep cycle over every queue.
        for q in range(n_queues):
            y = 0
            for lane in range(10):
                k = q * 10 + lane
                y += (ln[k, 1] - ln[k, 0]) + (ln[k, 3] - ln[k, 2])
            ys[q] = y
            if rule == ADAPTIVE:
                swept = False
                for lane in range(10):
                    if ln[q * 10 + lane, 5] > 0:
                        swept = True
                keep = _decide_adaptive(y, qs[q, 1], qs[q, 5], swept, astate[q], factor, extra)
            else:
                keep = _decide(y, qs[q, 1], factor, extra)
            dec[q] = keep
            wr[q] = 0
            mv[q] = 0
            ag[q] = 0
            bm[q] = 0
            if keep >= 0:
                wr[q], mv[q], ag[q] = _sweep_queue(
                    q, keep, ln, prefix, marker, ends, max_bytes, max_records, sel, swept_at, cur
                )
                qs[q, 5] -= ag[q]
        if budget > 0:
            lanes = (ln, qs, prefix, marker, ends, swept_at)
            cycle = (dec, wr, mv, ag, bm)
            _budget(budget, n_queues, extra, max_bytes, max_records, lanes, cycle, (sel, sweepable, chosen), cur)
        mem_now = 0
        for q in range(n_queues):
            keep = dec[q]
            row[:] = 0
            row[0] = keep
            row[1] = ys[q]
            row[2] = qs[q, 1]
            for lane in range(10):
                k = q * 10 + lane
                row[3] += ln[k, 3] - ln[k, 0]
                row[4] += (ln[k, 1] - ln[k, 0]) + (ln[k, 3] - ln[k, 2])
                row[5] += (prefix[ln[k, 1]] - prefix[ln[k, 0]]) + (prefix[ln[k, 3]] - prefix[ln[k, 2]])
                row[6] += ln[k, 2] - ln[k, 1]
                row[7] += prefix[ln[k, 2]] - prefix[ln[k, 1]]
                row[8] += ln[k, 5]
                row[12] += prefix[ln[k, 3]] - prefix[ln[k, 0]]
            row[9] = wr[q]
            row[10] = qs[q, 3]
            row[11] = qs[q, 4]
            row[13] = mv[q]
            row[14] = ag[q]
            row[15] = bm[q]
            qs[q, 3] = 0
            qs[q, 4] = 0
            qs[q, 1] = 0
            if per_interval:
                out[q, cur, :] = row
            for m in range(nm):
                totals[cur, m] += row[m]
            summary[q, 0] = max(summary[q, 0], row[5])
            summary[q, 1] = max(summary[q, 1], row[12])
            summary[q, 2] += row[10]
            summary[q, 3] += row[11]
            summary[q, 4] += 1 if keep >= 0 else 0
            summary[q, 6] += row[2]
            summary[q, 8] += row[13]
            summary[q, 9] += row[14]
            mem_now += row[5]
    for q in range(n_queues):
        summary[q, 5] = lane_counts[q * 10 : q * 10 + 10].sum()
        summary[q, 7] = qs[q, 2]
        summary[q, 10] = qs[q, 6]
        summary[q, 11] = qs[q, 7]
        summary[q, 12] = over[q]
    return out, totals, summary


SUMMARY = (
    "peak_mem_bytes",
    "peak_nosweep_bytes",
    "blobs_read",
    "bytes_read",
    "sweeps",
    "puts",
    "gets",
    "gets_empty",
    "msgs_swept",
    "msgs_reswept",
    "stored_us",  # summed over unsweeps: how long each blob a get brought back had been stored
    "stored_max_us",  # the longest of those
    "puts_over_budget",  # puts that would have passed the memory budget (refused when the policy fails them)
)


def _drop_stale_cache() -> None:
    """numba's on-disk cache of a function is keyed by its own file only: the kernel compiled
    with an older ``decide`` (policy.py) or ``cut_run`` (runs.py) would still load after they
    change. So the kernel's cache is flushed whenever the source of those files changes (and
    the reader's compiled pass, whose PUT and GET come from traces.py)."""
    import hashlib

    from . import policy, runs, trace_columns, traces

    digest = hashlib.sha1()
    for mod in (policy, runs, traces):
        with open(mod.__file__, "rb") as f:
            digest.update(f.read())
    try:
        stamp = os.path.join(_replay._cache._cache_path, "replay-deps.sha1")
        with open(stamp) as f:
            if f.read() == digest.hexdigest():
                return
    except (OSError, AttributeError):
        pass
    try:
        for fn in (_replay, _sweep_queue, _sweep_run, _beyond, _choose, _budget, trace_columns.convert):
            fn._cache.flush()
        with open(stamp, "w") as f:
            f.write(digest.hexdigest())
    except (OSError, AttributeError, NameError):
        pass  # no writable cache: numba compiles in memory, nothing stale to drop


_drop_stale_cache()


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

    def overall(self) -> dict:
        """The headline figures over all queues (the pipeline computes the same from its output)."""
        return overall_figures(self.totals, len(self.queues), int(self.summary[:, SUMMARY.index("sweeps")].sum()))

    def write(self, directory: str) -> None:
        """Totals per interval (``totals.parquet``) and the summary per queue (``queues.parquet``)."""
        import pyarrow.parquet as pq

        os.makedirs(directory, exist_ok=True)
        n = len(self.totals)
        cols: dict = {"interval": np.arange(n, dtype=np.int32)}
        cols["start_s"] = (self.t0 + np.arange(n) * self.interval_us) / 1e6
        cols.update({m: self.totals[:, M[m]] for m in METRICS if m != "decision"})
        pq.write_table(arrow.table(cols), os.path.join(directory, "totals.parquet"))
        q: dict = {"queue": list(self.queues)}
        q.update({s: self.summary[:, i] for i, s in enumerate(SUMMARY)})
        pq.write_table(arrow.table(q), os.path.join(directory, "queues.parquet"))


def overall_figures(totals: np.ndarray, queues: int, sweeps: int) -> dict:
    """Headline figures from per-interval totals (METRICS columns)."""
    col = {m: totals[:, M[m]] for m in METRICS}
    swept = int(col["msgs_written"].sum())
    again = int(col["msgs_reswept"].sum())
    peak = int(col["mem_bytes"].max()) if len(totals) else 0
    nosweep = int(col["nosweep_bytes"].max()) if len(totals) else 0
    return {
        "queues": queues,
        "intervals": len(totals),
        "peak_memory_with_sweeper_bytes": peak,
        "peak_memory_without_sweeping_bytes": nosweep,
        "peak_memory_saved_bytes": nosweep - peak,
        "bytes_read_back": int(col["bytes_read"].sum()),
        "blobs_read_back": int(col["blobs_read"].sum()),
        "blobs_written": int(col["blobs_written"].sum()),
        "sweeps": sweeps,
        "msgs_swept": swept,
        "msgs_reswept": again,
        "reswept_share": again / swept if swept else 0.0,
        "budget_msgs": int(col["budget_msgs"].sum()),
        "budget_intervals": int(np.count_nonzero(col["budget_msgs"])),
    }


def work_slots(counts: np.ndarray) -> int:
    """Slots of the kernel's work arrays for lanes of ``counts`` puts: every put's, and one
    spare per lane (the lane's start in ``prefix``)."""
    return int(counts.sum()) + len(counts)


def work_of(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's work arrays for ``n`` slots (``prefix``, ``marker``, ``swept_at``, in
    WORK_DTYPES), taken from this process's workspace (sweeper/workspace.py) when it keeps
    large enough ones, else fresh; lent to the caller alone until :func:`keep_work`."""
    return tuple(POOL.take(n, dt) for dt in WORK_DTYPES)  # type: ignore[return-value]


def keep_work(*arrays: np.ndarray) -> None:
    """Give work arrays (from :func:`work_of`, or memory lent for good such as the pipeline's
    arena: pipeline/arena.py) to the workspace for the next replay in this process. The
    caller must keep no view of them."""
    for a in arrays:
        POOL.give(a)


def drop_work() -> None:
    """Let the workspace's arrays go (their memory is the system's again once unreferenced)."""
    POOL.clear()


def lane_counts(trace: Trace) -> np.ndarray:
    """The puts of each (queue, priority) lane: the kernel's layout. Known once the trace is
    validated; otherwise counted here by the same check (which raises on a bad trace)."""
    if trace.lane_counts is not None:
        return trace.lane_counts
    nq = len(trace.queues)
    counts = np.zeros(nq * 10, np.int64)
    i, code, in_order = check_events(
        trace.time_us, trace.queue, trace.op, trace.priority, trace.nbytes, nq, counts, np.full(nq, -1, np.int64)
    )
    if code:
        raise fault(trace, int(i), int(code))
    if not in_order:
        trace.validate()  # puts it in time order
    trace.lane_counts = counts
    return counts


def replay(
    trace: Trace,
    policy: SweepPolicy | None = None,
    *,
    record_header: int,
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
    max_blob_records: int = DEFAULT_MAX_BLOB_RECORDS,
    per_interval: bool = True,
    t0: int | None = None,
    n_intervals: int | None = None,
    refuse: bool = False,
) -> ReplayResult:
    """Replay the sweep rule over ``trace``; intervals start at ``t0`` (default: the first
    event's time) and the last one ends after the last event.

    ``record_header`` is what the engine counts per message beyond its payload: its record
    header, ``sweepq.engine.record.HEAD_LEN``, which the callers above the engine pass (this
    layer cannot import it, and does not copy it). Blob bounds default to the blob store's.
    ``refuse``: with a memory budget, a put that would pass it is not made (a FAIL queue);
    else it is made and counted (summary ``puts_over_budget``)."""
    policy = policy or SweepPolicy()
    if max_blob_bytes < 1 or max_blob_records < 1:
        raise ValueError("max_blob_bytes and max_blob_records must be >= 1")
    interval_us = round(policy.interval * 1e6)
    counts = lane_counts(trace)
    if len(trace) == 0:
        start = 0 if t0 is None else t0
        n_int = n_intervals or 0
    else:
        start = int(trace.time_us[0]) if t0 is None else int(t0)
        if start > int(trace.time_us[0]):
            raise TraceError("time_us", 0, f"time {int(trace.time_us[0])} is before the replay's start {start}")
        n_int = n_intervals or int((int(trace.time_us[-1]) - start) // interval_us + 1)
    work = work_of(work_slots(counts))
    out, totals, summary = _replay(
        trace.time_us,
        trace.queue,
        trace.op,
        trace.priority,
        trace.nbytes,
        counts,
        len(trace.queues),
        start,
        interval_us,
        n_int,
        policy.factor,
        policy.extra,
        max_blob_bytes,
        max_blob_records,
        record_header,
        per_interval,
        RULES[policy.rule],
        policy.memory_budget,
        refuse,
        *work,
    )
    keep_work(*work)  # after the kernel only: on a fault they are dropped, not kept half-used
    return ReplayResult(list(trace.queues), start, interval_us, out if per_interval else None, totals, summary)


def warm_up() -> None:
    """Start numba and load the compiled checker and kernel from its cache, on a tiny trace.

    About half a second of fixed cost per process; ``sweepq replay`` runs it on a thread while
    Arrow decodes the trace (which releases the GIL), so the two overlap. The reader's compiled
    pass first (sweeper/trace_columns.py): the read needs it before the kernel."""
    from . import trace_columns

    trace_columns.warm_up()
    one = np.zeros(1, np.int64)
    t = Trace(
        one, one.astype(np.int32), one.astype(np.int8), one.astype(np.int32) + 1, one.astype(np.int8), one > 0, ["Q"]
    )
    replay(t, record_header=0, per_interval=False)


__all__ = [
    "GET",
    "METRICS",
    "PUT",
    "SUMMARY",
    "WORK_BYTES_PER_SLOT",
    "ReplayResult",
    "drop_work",
    "keep_work",
    "lane_counts",
    "replay",
    "warm_up",
    "work_of",
    "work_slots",
]
