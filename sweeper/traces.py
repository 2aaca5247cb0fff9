"""Message traces: what the replay of the sweep rule runs over.

A trace is one row per event, in time order:

==============  =======  =====================================================
column          type     meaning
==============  =======  =====================================================
``time_us``     int64    microseconds since any fixed origin; never decreasing
``queue``       string   queue name
``op``          string   ``put`` or ``get``
``bytes``       int32    payload bytes (a get's value is ignored)
``priority``    int8     0..9 (a get's value is ignored)
``persistent``  bool     the message's persistence (recorded, not modelled)
==============  =======  =====================================================

Traces are read from Parquet (the format for anything large) or CSV (for small
hand-made ones, with a header line). In memory a trace is columnar (:class:`Trace`):
numpy arrays, with queue names coded as integers, ready for the numba kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

COLUMNS = ("time_us", "queue", "op", "bytes", "priority", "persistent")
OPS = ("put", "get")
PUT = 0
GET = 1


class TraceError(ValueError):
    """A trace that cannot be replayed: names the column and the row (0-based) at fault."""

    def __init__(self, column: str, row: int | None, why: str):
        self.column = column
        self.row = row
        where = f"row {row}" if row is not None else "every row"
        super().__init__(f"trace column {column!r}, {where}: {why}")


@dataclass
class Trace:
    """A trace in columnar form. ``queue`` holds codes into ``queues``."""

    time_us: np.ndarray  # int64
    queue: np.ndarray  # int32
    op: np.ndarray  # int8: PUT or GET
    nbytes: np.ndarray  # int32
    priority: np.ndarray  # int8
    persistent: np.ndarray  # bool
    queues: list[str]

    def __len__(self) -> int:
        return len(self.time_us)

    def validate(self) -> Trace:
        """Raise TraceError on negative or unordered times, unknown ops, bad priorities or sizes."""
        n = len(self)
        for name in ("queue", "op", "nbytes", "priority", "persistent"):
            if len(getattr(self, name)) != n:
                raise TraceError(name, None, f"has {len(getattr(self, name))} values, time_us has {n}")
        bad = np.flatnonzero(self.time_us < 0)
        if len(bad):
            raise TraceError("time_us", int(bad[0]), f"negative time {int(self.time_us[bad[0]])}")
        bad = np.flatnonzero(np.diff(self.time_us) < 0)
        if len(bad):
            i = int(bad[0]) + 1
            raise TraceError("time_us", i, f"time {int(self.time_us[i])} is before the previous row's")
        bad = np.flatnonzero((self.op != PUT) & (self.op != GET))
        if len(bad):
            raise TraceError("op", int(bad[0]), "unknown operation (use put or get)")
        puts = self.op == PUT
        bad = np.flatnonzero(puts & ((self.priority < 0) | (self.priority > 9)))
        if len(bad):
            raise TraceError("priority", int(bad[0]), f"priority {int(self.priority[bad[0]])} is outside 0..9")
        bad = np.flatnonzero(puts & (self.nbytes < 0))
        if len(bad):
            raise TraceError("bytes", int(bad[0]), f"negative size {int(self.nbytes[bad[0]])}")
        return self

    # -- conversions --------------------------------------------------------------------------

    @classmethod
    def from_columns(cls, columns: dict) -> Trace:
        """From a dict of column name -> sequence (names as in COLUMNS); checks every column."""
        missing = [c for c in COLUMNS if c not in columns]
        if missing:
            raise TraceError(missing[0], None, f"is missing (a trace needs {', '.join(COLUMNS)})")
        names = np.asarray(columns["queue"]).astype(str)
        queues, codes = np.unique(names, return_inverse=True)
        ops_raw = np.asarray(columns["op"])
        if ops_raw.dtype.kind in "iu":
            op = ops_raw.astype(np.int8)
        else:
            text = np.char.lower(ops_raw.astype(str))
            op = np.full(len(text), -1, np.int8)
            op[text == "put"] = PUT
            op[text == "get"] = GET
            bad = np.flatnonzero(op < 0)
            if len(bad):
                raise TraceError("op", int(bad[0]), f"unknown operation {str(ops_raw[bad[0]])!r} (use put or get)")

        def num(col: str, dtype) -> np.ndarray:
            try:
                return np.asarray(columns[col]).astype(dtype)
            except (TypeError, ValueError) as e:
                raise TraceError(col, None, f"is not numeric: {e}") from None

        return cls(
            time_us=num("time_us", np.int64),
            queue=codes.astype(np.int32),
            op=op,
            nbytes=num("bytes", np.int32),
            priority=num("priority", np.int8),
            persistent=np.asarray(columns["persistent"]).astype(bool),
            queues=[str(q) for q in queues],
        ).validate()

    def columns(self) -> dict:
        q = np.asarray(self.queues, dtype=object)
        return {
            "time_us": self.time_us,
            "queue": q[self.queue] if len(self) else np.array([], dtype=object),
            "op": np.asarray(OPS, dtype=object)[self.op],
            "bytes": self.nbytes,
            "priority": self.priority,
            "persistent": self.persistent,
        }

    def select(self, queue: str) -> Trace:
        """The events of one queue."""
        code = self.queues.index(queue)
        m = self.queue == code
        return Trace(
            self.time_us[m],
            np.zeros(int(m.sum()), np.int32),
            self.op[m],
            self.nbytes[m],
            self.priority[m],
            self.persistent[m],
            [queue],
        )


def read(path: str | os.PathLike) -> Trace:
    """Read a trace from Parquet (a file or a directory of files) or from CSV."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    path = os.fspath(path)
    table = pacsv.read_csv(path) if path.endswith(".csv") else pq.read_table(path)
    return Trace.from_columns({c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names})


def write(trace: Trace, path: str | os.PathLike, row_group: int = 1_000_000) -> None:
    """Write a trace as Parquet (or CSV when the path ends in .csv)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "time_us": pa.array(trace.time_us, pa.int64()),
            "queue": pa.array(trace.columns()["queue"], pa.string()),
            "op": pa.array(trace.columns()["op"], pa.string()),
            "bytes": pa.array(trace.nbytes, pa.int32()),
            "priority": pa.array(trace.priority, pa.int8()),
            "persistent": pa.array(trace.persistent, pa.bool_()),
        }
    )
    path = os.fspath(path)
    if path.endswith(".csv"):
        pacsv.write_csv(table, path)
    else:
        pq.write_table(table, path, row_group_size=row_group)


# -- synthetic traces --------------------------------------------------------------------------

KINDS = ("steady", "bursty", "slow-consumer", "diurnal", "many-queues")


def generate(
    kind: str,
    *,
    seconds: float = 60.0,
    rate: float = 1000.0,
    queues: int = 1,
    size: int = 256,
    priorities: bool = False,
    seed: int = 0,
) -> Trace:
    """A seeded synthetic trace.

    ``steady``: puts and gets at ``rate`` per second each (Poisson). ``bursty``: puts come
    in bursts ten times the rate, one second in ten; gets at the mean rate. ``slow-consumer``:
    gets at a third of the put rate. ``diurnal``: the put rate follows a sine over the
    trace (a compressed day), gets at the mean. ``many-queues``: ``queues`` queues (10,000
    or more is fine) each drawing one of the other kinds and a rate spread around ``rate``.
    Sizes are log-normal around ``size``; priorities 0..9 when ``priorities``, else 0.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown trace kind {kind!r}; choose from {', '.join(KINDS)}")
    rng = np.random.default_rng(seed)
    parts = []
    names = [f"Q{i:05d}" for i in range(queues if kind == "many-queues" else max(1, queues))]
    for qi in range(len(names)):
        k = kind
        r = rate
        if kind == "many-queues":
            k = ("steady", "bursty", "slow-consumer", "diurnal")[rng.integers(4)]
            r = float(rate * rng.lognormal(0, 1))
        put_t, get_t = _times(k, seconds, r, rng)
        n_put, n_get = len(put_t), len(get_t)
        t = np.concatenate([put_t, get_t])
        op = np.concatenate([np.zeros(n_put, np.int8), np.ones(n_get, np.int8)])
        sizes = np.concatenate(
            [np.maximum(1, rng.lognormal(np.log(size), 0.5, n_put)).astype(np.int32), np.zeros(n_get, np.int32)]
        )
        prio = np.zeros(n_put + n_get, np.int8)
        if priorities:
            prio[:n_put] = rng.choice(10, n_put, p=_PRIO_WEIGHTS)
        parts.append((t, np.full(n_put + n_get, qi, np.int32), op, sizes, prio))
    t = np.concatenate([p[0] for p in parts])
    order = np.argsort(t, kind="stable")
    return Trace(
        time_us=t[order],
        queue=np.concatenate([p[1] for p in parts])[order],
        op=np.concatenate([p[2] for p in parts])[order],
        nbytes=np.concatenate([p[3] for p in parts])[order],
        priority=np.concatenate([p[4] for p in parts])[order],
        persistent=rng.random(len(t)) < 0.5,
        queues=names,
    ).validate()


_PRIO_WEIGHTS = np.array([0.3, 0.1, 0.1, 0.1, 0.15, 0.1, 0.05, 0.04, 0.03, 0.03])


def _poisson(rate_fn, seconds: float, peak: float, rng) -> np.ndarray:
    """Event times (µs) of a Poisson process with rate rate_fn(t) <= peak, by thinning."""
    n = rng.poisson(peak * seconds)
    t = np.sort(rng.random(n) * seconds)
    keep = rng.random(n) * peak < rate_fn(t)
    return (t[keep] * 1e6).astype(np.int64)


def _times(kind: str, seconds: float, rate: float, rng) -> tuple[np.ndarray, np.ndarray]:
    if kind == "steady":
        return _poisson(lambda t: np.full_like(t, rate), seconds, rate, rng), _poisson(
            lambda t: np.full_like(t, rate), seconds, rate, rng
        )
    if kind == "bursty":
        burst = lambda t: np.where((t % 10.0) < 1.0, 10 * rate, 0.0)  # noqa: E731
        return _poisson(burst, seconds, 10 * rate, rng), _poisson(lambda t: np.full_like(t, rate), seconds, rate, rng)
    if kind == "slow-consumer":
        return _poisson(lambda t: np.full_like(t, rate), seconds, rate, rng), _poisson(
            lambda t: np.full_like(t, rate / 3), seconds, rate / 3, rng
        )
    # diurnal: one sine period over the trace, between 0 and twice the mean
    day = lambda t: rate * (1 - np.cos(2 * np.pi * t / seconds))  # noqa: E731
    return _poisson(day, seconds, 2 * rate, rng), _poisson(lambda t: np.full_like(t, rate), seconds, rate, rng)
