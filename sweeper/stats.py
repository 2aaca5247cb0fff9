"""Sweep statistics: what the sweeper and the unsweeps did, per queue and in total."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field, fields

ABORT_REASONS = ("removed", "gotten", "locked", "batch_changed", "moved", "store_error")

SWEPT = "swept"  # LastDecision.outcome: messages moved into blobs
NOT_SWEPT = "not swept"  # the rule did not pick the queue (y <= factor * x)
NOTHING_TO_SWEEP = "nothing to sweep"  # picked, but every message beyond the buffer was unsweepable
ABORTED = "aborted"  # picked, and every run it chose was aborted (LastDecision.aborts says why)


@dataclass
class SweepCounters:
    """Mutable counters a queue keeps under its own lock (see :class:`SweepStats`)."""

    sweeps: int = 0
    blobs_written: int = 0
    msgs_swept: int = 0
    msgs_reswept: int = 0  # of msgs_swept, messages that had come back from a blob before
    bytes_swept_raw: int = 0
    bytes_swept_compressed: int = 0
    unsweeps: int = 0
    msgs_unswept: int = 0
    bytes_unswept_raw: int = 0
    readahead_hits: int = 0
    readahead_misses: int = 0
    damaged_blobs: int = 0
    store_retries: int = 0  # store cleanups that failed and wait for another try
    aborts: dict = field(default_factory=lambda: dict.fromkeys(ABORT_REASONS, 0))
    lock_seconds: deque = field(default_factory=lambda: deque(maxlen=100_000))  # each hold by a sweep
    # the CPU time of each blob's hold (lock_seconds less what the scheduler took from it)
    lock_cpu_seconds: deque = field(default_factory=lambda: deque(maxlen=100_000))
    write_seconds: float = 0.0


@dataclass(frozen=True)
class SweepStats:
    """A snapshot of one queue (or of every queue, summed) for reports and ``sweepq inspect``."""

    queue: str
    msgs_in_memory: int
    bytes_in_memory: int
    msgs_swept: int  # currently in blobs
    bytes_swept_raw: int
    bytes_swept_compressed: int
    blobs: int
    sweeps: int
    aborts: dict
    unsweeps: int
    msgs_unswept: int
    total_msgs_swept: int  # since the queue was defined (msgs_swept: in blobs now)
    total_bytes_swept_raw: int
    total_bytes_swept_compressed: int
    bytes_unswept_raw: int
    msgs_reswept: int  # swept again after coming back from a blob (what the adaptive rule avoids)
    readahead_hits: int
    readahead_misses: int
    damaged_blobs: int
    store_retries: int
    lock_hold_p99_ms: float
    lock_hold_max_ms: float
    lock_hold_cpu_p99_ms: float  # the holds' own CPU time: the wall figure less preemption
    write_seconds: float

    @staticmethod
    def total(parts: list[SweepStats]) -> SweepStats:
        """Sum of several queues' snapshots (percentiles: the worst of them)."""
        kw: dict = {}
        for f in fields(SweepStats):
            vals = [getattr(p, f.name) for p in parts]
            if f.name == "queue":
                kw[f.name] = "*"
            elif f.name == "aborts":
                kw[f.name] = {r: sum(v.get(r, 0) for v in vals) for r in ABORT_REASONS}
            elif f.name.startswith("lock_hold"):
                kw[f.name] = max(vals, default=0.0)
            else:
                kw[f.name] = sum(vals)
        return SweepStats(**kw)


@dataclass(frozen=True)
class LastDecision:
    """The sweeper's most recent decision for one queue, as an operator reads the seed's rule:
    at clock time ``at`` the queue held ``y`` messages in memory and served ``x`` in the
    interval; it is swept when y > ``threshold`` (factor * x), keeping ``buffer`` (x + extra).
    ``outcome`` is one of SWEPT, NOT_SWEPT, NOTHING_TO_SWEEP, ABORTED; ``swept`` the messages
    moved; ``aborts`` the runs given up, by reason (ABORT_REASONS); ``budget``: swept (also)
    beyond the rule because memory was over the budget. The console and ``sweepq status``
    show it; the sweeper keeps one per queue (sweeper/cycle.py ``Sweeper.last``)."""

    at: float
    y: int
    x: int
    threshold: int
    buffer: int
    outcome: str
    swept: int = 0
    aborts: dict = field(default_factory=dict)
    budget: bool = False

    @staticmethod
    def of(
        at: float, y: int, x: int, keep: int | None, moved: int, aborts: dict, budget: bool, factor: int, extra: int
    ) -> LastDecision:
        """The record of one decision (``keep`` None: the rule did not pick the queue)."""
        if keep is None:
            outcome = NOT_SWEPT
        elif moved:
            outcome = SWEPT
        else:
            outcome = ABORTED if aborts else NOTHING_TO_SWEEP
        return LastDecision(at, y, x, factor * x, x + extra, outcome, moved, dict(aborts), budget)

    def says(self) -> str:
        """The decision in words: "swept 120", "not swept (y 8 <= 10)", "aborted (gotten 1)"."""
        why = ", ".join(f"{r} {n}" for r, n in self.aborts.items() if n)
        if self.outcome == SWEPT:
            extra = " for the memory budget" if self.budget else ""
            return f"swept {self.swept:,}{extra}" + (f" ({why} aborted)" if why else "")
        if self.outcome == NOT_SWEPT:
            return f"not swept (y {self.y:,} <= {self.threshold:,})"
        if self.outcome == ABORTED:
            return f"aborted ({why})"
        return "nothing to sweep beyond the buffer"


def percentile(values: Collection[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]
