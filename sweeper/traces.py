"""Message traces: what the replay of the sweep rule runs over.

A trace is one row per event:

==============  =======  =====================================================
column          type     meaning
==============  =======  =====================================================
``time_us``     int64    microseconds since any fixed origin, >= 0
``queue``       string   queue name
``op``          string   ``put`` or ``get`` (any case)
``bytes``       int32    payload bytes (a get's value is ignored)
``priority``    int8     0..9 (a get's value is ignored)
``persistent``  bool     the message's persistence (recorded, not modelled)
==============  =======  =====================================================

**Order rule** (one rule, checked by :func:`check_events` for ``sweepq replay`` and for every
task of ``sweepq pipeline``): within a queue, times never go backwards in the order the rows
are written. Across queues any interleaving is accepted: queues are independent in the
replay (each has its own lanes and its own rule decision; intervals are fixed by time), so a
trace in order per queue is put in time order with a stable sort, which changes nothing any
queue sees.

Traces are read from Parquet (a file, or a directory of files) or CSV (small hand-made ones,
with a header line). Reading goes column by column, one Arrow record batch at a time, into
preallocated numpy arrays: queue names arrive as Arrow dictionary codes and never become a
Python object per row, so memory stays near the 19 bytes per event of the columns themselves.

A trace *laid out by queue* is a directory of Parquet files, each holding whole queues in
time order, with a ``_sweepq_layout.json`` beside them (:func:`write_by_queue`,
``sweepq trace partition``): one file is one unit of work for the pipeline.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from dataclasses import dataclass, field

import numba
import numpy as np

COLUMNS = ("time_us", "queue", "op", "bytes", "priority", "persistent")
OPS = ("put", "get")
PUT = 0
GET = 1
_OP_CODES = {"put": PUT, "get": GET}  # an op's word (any case) -> its code
LAYOUT_FILE = "_sweepq_layout.json"
BATCH_ROWS = 1 << 20


class TraceError(ValueError):
    """A trace that cannot be replayed: names the column and the row (0-based) at fault.

    ``column`` is None when the fault is the file itself (empty, unreadable)."""

    def __init__(self, column: str | None, row: int | None, why: str):
        self.column = column
        self.row = row
        self.why = why
        if column is None:
            super().__init__(f"trace: {why}")
        else:
            where = f"row {row}" if row is not None else "every row"
            super().__init__(f"trace column {column!r}, {where}: {why}")


# -- the one validation of a trace -------------------------------------------------------------

# Codes returned by check_events, and the column each one faults.
OK, BAD_TIME, BAD_OP, BAD_QUEUE, BACKWARDS, BAD_PRIORITY, BAD_BYTES = range(7)
_FAULT_COLUMN = {
    BAD_TIME: "time_us",
    BAD_OP: "op",
    BAD_QUEUE: "queue",
    BACKWARDS: "time_us",
    BAD_PRIORITY: "priority",
    BAD_BYTES: "bytes",
}


@numba.njit(cache=True, nogil=True)
def check_events(time_us, queue, op, prio, nbytes, n_queues, lane_counts, last):
    """Every rule of a replayable trace, in one pass in row order.

    Returns ``(row, code, in_time_order)``: the first offending row and its code (-1 and OK
    when none), and whether the rows are in time order across queues as well. As it goes it
    counts the puts of each (queue, priority) lane into ``lane_counts`` (``queue * 10 + p``),
    which is the replay kernel's layout, so the kernel needs no pass of its own. ``last``
    (per queue, initially -1) carries each queue's last time, so a trace checked in several
    parts keeps the order rule across them.
    """
    in_order = True
    prev = np.int64(-1)
    for i in range(len(time_us)):
        t = np.int64(time_us[i])
        if t < 0:
            return i, BAD_TIME, in_order
        o = op[i]
        if o != PUT and o != GET:
            return i, BAD_OP, in_order
        q = np.int64(queue[i])
        if q < 0 or q >= n_queues:
            return i, BAD_QUEUE, in_order
        if t < last[q]:
            return i, BACKWARDS, in_order
        last[q] = t
        if t < prev:
            in_order = False
        prev = t
        if o == PUT:
            p = np.int64(prio[i])
            if p < 0 or p > 9:
                return i, BAD_PRIORITY, in_order
            if nbytes[i] < 0:
                return i, BAD_BYTES, in_order
            lane_counts[q * 10 + p] += 1
    return -1, OK, in_order


def fault(trace: Trace, i: int, code: int, row: int | None = None) -> TraceError:
    """The TraceError for ``check_events``' verdict at index ``i`` (``row``: its row in the file)."""
    row = i if row is None else row
    col = _FAULT_COLUMN[code]
    if code == BAD_TIME:
        why = f"negative time {int(trace.time_us[i])}"
    elif code == BAD_OP:
        why = "unknown operation (use put or get)"
    elif code == BAD_QUEUE:
        why = "queue name is missing"
    elif code == BACKWARDS:
        q = int(trace.queue[i])
        earlier = trace.time_us[:i][trace.queue[:i] == q]
        why = (
            f"time {int(trace.time_us[i])} of queue {trace.queues[q]!r} is before that queue's previous row "
            f"({int(earlier.max())}); within a queue times must not go backwards"
        )
    elif code == BAD_PRIORITY:
        why = f"priority {int(trace.priority[i])} is outside 0..9"
    else:
        why = f"negative or missing size {int(trace.nbytes[i])}"
    return TraceError(col, row, why)


@dataclass
class Trace:
    """A trace in columnar form. ``queue`` holds codes into ``queues`` (sorted names).

    After :meth:`validate`, the rows are in time order and ``lane_counts`` holds the puts of
    every (queue, priority) lane, which the replay kernel uses as its layout."""

    time_us: np.ndarray  # int64
    queue: np.ndarray  # int32
    op: np.ndarray  # int8: PUT or GET
    nbytes: np.ndarray  # int32
    priority: np.ndarray  # int8
    persistent: np.ndarray  # bool
    queues: list[str]
    lane_counts: np.ndarray | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.time_us)

    def validate(self, rows: np.ndarray | None = None) -> Trace:
        """Raise TraceError on the first row that breaks a rule (see :func:`check_events`);
        then put the rows in time order if they are only in order per queue. ``rows`` maps an
        index to its row in the file, for the message."""
        n = len(self)
        for name in ("queue", "op", "nbytes", "priority", "persistent"):
            if len(getattr(self, name)) != n:
                raise TraceError(name, None, f"has {len(getattr(self, name))} values, time_us has {n}")
        nq = len(self.queues)
        counts = np.zeros(nq * 10, np.int64)
        i, code, in_order = check_events(
            self.time_us, self.queue, self.op, self.priority, self.nbytes, nq, counts, np.full(nq, -1, np.int64)
        )
        if code != OK:
            raise fault(self, int(i), int(code), None if rows is None else int(rows[i]))
        if not in_order:
            self._time_order()
        self.lane_counts = counts
        return self

    def _time_order(self) -> None:
        """Put rows that are in order per queue in time order: a stable sort, which changes
        nothing any queue sees (the order rule)."""
        order = np.argsort(self.time_us, kind="stable")
        for name in ("time_us", "queue", "op", "nbytes", "priority", "persistent"):
            setattr(self, name, getattr(self, name)[order])

    # -- conversions --------------------------------------------------------------------------

    @classmethod
    def from_columns(cls, columns: dict) -> Trace:
        """From a dict of column name -> sequence (names as in COLUMNS); checks every column."""
        import pyarrow as pa

        missing = [c for c in COLUMNS if c not in columns]
        if missing:
            raise TraceError(missing[0], None, f"is missing (a trace needs {', '.join(COLUMNS)})")
        arrays = {}
        for c in COLUMNS:
            v = columns[c]
            arrays[c] = v if isinstance(v, pa.Array | pa.ChunkedArray) else pa.array(np.asarray(v).tolist())
        return _from_batches([pa.record_batch(arrays)], len(arrays["time_us"]))

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

    def take(self, mask_or_index) -> Trace:
        """The rows selected (all queue names kept, so codes stay valid)."""
        return Trace(
            self.time_us[mask_or_index],
            self.queue[mask_or_index],
            self.op[mask_or_index],
            self.nbytes[mask_or_index],
            self.priority[mask_or_index],
            self.persistent[mask_or_index],
            list(self.queues),
        )


# -- reading -----------------------------------------------------------------------------------


def _filesystem(path: str):
    """(pyarrow filesystem, path inside it): local paths, or any URI pyarrow.fs knows (s3://, hdfs://)."""
    from pyarrow import fs as pafs

    if "://" in path and not path.startswith("file://"):
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), path.removeprefix("file://")


def parquet_files(path: str) -> tuple[object, list[str]]:
    """The Parquet files of a path (itself, or every ``*.parquet`` under a directory, in name order)."""
    from pyarrow import fs as pafs

    fs, p = _filesystem(os.fspath(path))
    info = fs.get_file_info(p)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"no such file or directory: {path}")
    if info.type == pafs.FileType.Directory:
        found = fs.get_file_info(pafs.FileSelector(p, recursive=True))
        files = sorted(
            f.path
            for f in found
            if f.type == pafs.FileType.File
            and f.path.endswith(".parquet")
            and not any(part.startswith(("_", ".")) for part in os.path.relpath(f.path, p).split(os.sep))
        )
        if not files:
            raise TraceError(None, None, f"{path} is a directory with no .parquet files")
        return fs, files
    return fs, [p]


def _batches(path: str, columns=COLUMNS):
    """(record batches, total rows) of a trace file or directory; Parquet read column by column
    with queue and op as dictionaries."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    path = os.fspath(path)
    if path.endswith(".csv"):
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such file: {path}")
        try:
            table = pacsv.read_csv(path)
        except pa.ArrowInvalid as e:
            why = "the file is empty" if "Empty CSV" in str(e) else str(e).splitlines()[0]
            hint = f"a CSV trace starts with the header {','.join(COLUMNS)}"
            raise TraceError(None, None, f"{path}: {why} ({hint})") from None
        _require(table.schema.names, path)
        return table.select(list(columns)).to_batches(), table.num_rows
    fs, files = parquet_files(path)
    handles = []
    total = 0
    for f in files:
        try:
            pf = pq.ParquetFile(fs.open_input_file(f), read_dictionary=["queue", "op"])
        except pa.ArrowInvalid as e:
            raise TraceError(None, None, f"{f} is not a Parquet file ({e})") from None
        _require(pf.schema_arrow.names, f)
        handles.append(pf)
        total += pf.metadata.num_rows

    def gen():
        for pf in handles:
            yield from pf.iter_batches(batch_size=BATCH_ROWS, columns=list(columns), use_threads=True)

    return gen(), total


def _require(names, where: str) -> None:
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise TraceError(
            missing[0],
            None,
            f"is missing from {where} (a trace needs the columns {', '.join(COLUMNS)}; "
            "a CSV trace starts with them as its header line)",
        )


def _ints(arr, col: str, off: int, dtype, fill: int) -> np.ndarray:
    """An integer column as numpy ``dtype``; nulls become ``fill`` (which the checker rejects
    for puts); a value that does not fit is named here."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_integer(arr.type) or pa.types.is_boolean(arr.type)):
        try:
            arr = pc.cast(arr, pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            bad = _first_non_integer(arr)
            raise TraceError(col, off + bad[0], f"{bad[1]!r} is not an integer") from None
    if arr.null_count:
        arr = pc.fill_null(arr, fill)
    v = arr.to_numpy(zero_copy_only=False)
    if v.dtype != dtype:
        info = np.iinfo(dtype)
        if len(v) and (v.min() < info.min or v.max() > info.max):
            i = int(np.flatnonzero((v < info.min) | (v > info.max))[0])
            raise TraceError(col, off + i, f"value {int(v[i])} is out of range")
        v = v.astype(dtype)
    return v


def _first_non_integer(arr) -> tuple[int, object]:
    for i, v in enumerate(arr.to_pylist()):
        try:
            int(v)
        except (TypeError, ValueError):
            return i, v
    return 0, None


def _codes(arr, col: str, off: int, index: dict, lower: bool = False):
    """A string or dictionary column as int32 codes into ``index`` (name -> code, grown as
    new names appear); only the dictionary's few values become Python objects."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    if arr.null_count:
        raise TraceError(col, off + int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0]), "missing")
    values = arr.dictionary.to_pylist()
    idx = arr.indices.to_numpy(zero_copy_only=False)
    remap = np.full(len(values), -1, np.int32)
    if lower:  # a fixed vocabulary (op): unknown words stay -1, which the checker reports
        for j, v in enumerate(values):
            remap[j] = index.get(str(v).lower(), -1)
    else:  # names: only those that occur get a code (a file's dictionary may list more)
        used = np.flatnonzero(np.bincount(idx, minlength=len(values)))
        for j in used.tolist():
            remap[j] = index.setdefault(str(values[j]), len(index))
    return remap[idx]


def _bools(arr, off: int) -> np.ndarray:
    import pyarrow as pa

    if pa.types.is_boolean(arr.type) and not arr.null_count:
        return arr.to_numpy(zero_copy_only=False)
    text = [None if v is None else str(v).strip().lower() for v in arr.to_pylist()]
    out = np.zeros(len(text), bool)
    for i, v in enumerate(text):
        if v in ("true", "1", "yes"):
            out[i] = True
        elif v not in ("false", "0", "no"):
            raise TraceError("persistent", off + i, f"{v!r} is not true or false")
    return out


class _Columns:
    """The preallocated numpy columns a trace is read into, batch by batch (from any thread).

    A batch in the types sweepq writes is converted and checked by one compiled pass
    (sweeper/trace_columns.py) and :meth:`trace` then needs no pass of the checker's own; any
    other batch by the general conversion here, and :meth:`trace` runs the checker."""

    def __init__(self, n: int, persistent: bool = True, rows: bool = False, empty=None):
        self.n = n
        self.persistent = persistent
        # Each row's number in the original trace (a Spark-partitioned trace carries it as ``row``),
        # so a fault is reported where the user wrote it.
        self.rows = np.empty(n, np.int64) if rows else None
        empty = empty or np.empty  # the caller's memory for the replayed columns (pipeline/arena.py)
        self.time_us = empty(n, np.int64)
        self.queue = empty(n, np.int32)
        self.op = empty(n, np.int8)
        self.nbytes = empty(n, np.int32)
        self.prio = empty(n, np.int8)
        # Not modelled by the replay: when not kept, it is still checked, and a read-only view of
        # False stands in for it at no memory cost.
        self.pers = np.empty(n, bool) if persistent else np.broadcast_to(np.False_, (n,))
        self.names: dict[str, int] = {}  # queue name -> code, in order of first sight
        self.lock = threading.Lock()
        # Each batch the compiled pass converted: (off, rows, its dictionary's codes, lanes,
        # first and last time per dictionary entry, in time order); ``clean`` while every
        # batch so far was one of them.
        self.parts: list[tuple] = []
        self.clean = True

    def fill(self, b, off: int) -> None:
        """Convert one record batch into rows [off, off + b.num_rows); a fault names the row
        in the original trace when the batch carries ``row``."""
        m = b.num_rows
        if m == 0:
            return
        cols = dict(zip(b.schema.names, b.columns, strict=True))
        if self.rows is not None:
            self.rows[off : off + m] = _ints(cols["row"], "row", off, np.int64, -1)
        if self._fill_compiled(cols, off, m):
            return
        self.clean = False
        try:
            self._fill(cols, off, m)
        except TraceError as e:
            if self.rows is None or e.row is None:
                raise
            raise TraceError(e.column, int(self.rows[e.row]), e.why) from None

    def _fill_compiled(self, cols: dict, off: int, m: int) -> bool:
        """Convert and check one batch by the compiled pass when its columns are in the types
        sweepq writes and it is clean; False (and the rows to be converted by :meth:`_fill`)
        otherwise."""
        import pyarrow as pa

        from . import trace_columns as tc

        if any(c not in cols for c in ("time_us", "queue", "op", "bytes", "priority")):
            return False
        o = cols["op"]
        if pa.types.is_integer(o.type):
            words, op = list(OPS), tc.view(o, np.int8)
        else:
            found = tc.strings(o)
            words, op = (found[1], found[0]) if found is not None else ([], None)
        queue = tc.strings(cols["queue"])
        t = tc.view(cols["time_us"], np.int64)
        nbytes = tc.view(cols["bytes"], np.int32)
        prio = tc.view(cols["priority"], np.int8)
        p = cols.get("persistent")
        pers = tc.booleans(p) if p is not None else None
        if queue is None or op is None or t is None or nbytes is None or prio is None:
            return False
        if (self.persistent and pers is None) or (p is not None and pers is None):
            return False
        codes, names = queue
        qmap = np.full(len(names), -1, np.int32)
        seen = np.flatnonzero(tc.used(codes, len(names))).tolist()
        with self.lock:
            for j in seen:
                qmap[j] = self.names.setdefault(names[j], len(self.names))
        omap = np.array([_OP_CODES.get(str(w).lower(), -1) for w in words], np.int8)
        lanes = np.zeros(len(names) * 10, np.int64)
        first = np.full(len(names), -1, np.int64)
        last = np.full(len(names), -1, np.int64)
        out = (self.time_us, self.queue, self.op, self.nbytes, self.prio)
        clean, in_order = tc.convert(t, codes, qmap, op, omap, nbytes, prio, out, off, lanes, first, last)
        if not clean:
            return False
        if self.persistent:
            self.pers[off : off + m] = pers
        with self.lock:
            self.parts.append((off, m, qmap, lanes, first, last, in_order))
        return True

    def _fill(self, cols: dict, off: int, m: int) -> None:
        import pyarrow as pa

        t = cols["time_us"]
        if t.null_count:
            i = int(np.flatnonzero(t.is_null().to_numpy(zero_copy_only=False))[0])
            raise TraceError("time_us", off + i, "time is missing")
        self.time_us[off : off + m] = _ints(t, "time_us", off, np.int64, -1)
        with self.lock:
            self.queue[off : off + m] = _codes(cols["queue"], "queue", off, self.names)
        o = cols["op"]
        if pa.types.is_integer(o.type):
            self.op[off : off + m] = _ints(o, "op", off, np.int8, -1)
        else:
            self.op[off : off + m] = _codes(o, "op", off, dict(_OP_CODES), lower=True)
        self.nbytes[off : off + m] = _ints(cols["bytes"], "bytes", off, np.int32, -1)
        self.prio[off : off + m] = _ints(cols["priority"], "priority", off, np.int8, -1)
        p = cols.get("persistent")  # absent: not kept, and the caller knows it holds only booleans
        if self.persistent:
            self.pers[off : off + m] = _bools(p, off)
        elif p is not None and not (pa.types.is_boolean(p.type) and not p.null_count):
            _bools(p, off)  # raises on a value that is not true or false

    def trace(self) -> Trace:
        """The checked trace, queue codes in sorted name order (remapped in place)."""
        if self.clean:
            checked = self._checked()
            if checked is not None:
                return checked
        names = sort_codes(self.queue, self.names)
        trace = Trace(self.time_us, self.queue, self.op, self.nbytes, self.prio, self.pers, names)
        return trace.validate(rows=self.rows)

    def _checked(self) -> Trace | None:
        """The trace when every batch passed the compiled check and the order rule holds across
        them (trace_columns.merge), with its lanes counted; else None (the checker decides)."""
        from .trace_columns import merge

        merged = merge(self.parts, len(self.names))
        if merged is None:
            return None
        counts, in_order = merged
        names, rank = _ranks(self.names)
        if rank is not None:
            _remap(self.queue, rank)
            by_rank = np.empty_like(counts.reshape(-1, 10))
            by_rank[rank] = counts.reshape(-1, 10)
            counts = by_rank.reshape(-1)
        trace = Trace(self.time_us, self.queue, self.op, self.nbytes, self.prio, self.pers, names, counts)
        if not in_order:
            trace._time_order()
        return trace


def _ranks(names: dict[str, int]) -> tuple[list[str], np.ndarray | None]:
    """The sorted names of ``names`` (name -> code, in order of first sight) and each code's
    place among them (None when the codes are in sorted order already)."""
    order = sorted(names, key=names.__getitem__)
    sorted_names = sorted(order)
    if order == sorted_names:
        return sorted_names, None
    rank = {q: i for i, q in enumerate(sorted_names)}
    return sorted_names, np.array([rank[q] for q in order], np.int32)


def sort_codes(queue: np.ndarray, names: dict[str, int]) -> list[str]:
    """Renumber queue codes (``names``: name -> code, in order of first sight) in place so that
    code i is the i-th name in sorted order, the order a Trace keeps; return the sorted names."""
    sorted_names, rank = _ranks(names)
    if rank is not None:
        _remap(queue, rank)
    return sorted_names


def _from_batches(batches, n: int) -> Trace:
    """Fill preallocated columns batch by batch, then check (and time-order) the trace."""
    cols = _Columns(n)
    off = 0
    for b in batches:
        cols.fill(b, off)
        off += b.num_rows
    if off != n:
        raise TraceError(None, None, f"expected {n} rows, read {off}")
    return cols.trace()


def row_groups(fs, files: list[str]) -> list[tuple[str, int, int]]:
    """(file, row group, rows) of every row group of Parquet ``files``, in order, from their
    footers. :raises TraceError: a file is not Parquet, or lacks a column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = []
    for f in files:
        try:
            md = pq.read_metadata(fs.open_input_file(f))
        except pa.ArrowInvalid as e:
            raise TraceError(None, None, f"{f} is not a Parquet file ({e})") from None
        _require(md.schema.to_arrow_schema().names, f)
        out += [(f, g, md.row_group(g).num_rows) for g in range(md.num_row_groups)]
    return out


def _from_parquet(
    fs, files: list[str], threads: int | None = None, persistent: bool = True, rows: bool = False, empty=None
) -> Trace:
    """Read Parquet files row group by row group on ``threads`` threads (default: the CPUs),
    each decoding and converting its own row groups into its slice of the columns (made by
    ``empty(n, dtype)``, default ``np.empty``)."""
    import pyarrow.parquet as pq

    units = []
    off = 0
    for f, rg, n in row_groups(fs, files):
        units.append((f, rg, off))
        off += n
    cols = _Columns(off, persistent, rows, empty)
    wanted = [*COLUMNS, "row"] if rows else list(COLUMNS)

    def work(unit) -> TraceError | None:
        f, rg, at = unit
        pf = pq.ParquetFile(fs.open_input_file(f), read_dictionary=["queue", "op"])
        columns = wanted
        if not persistent and all_booleans(pf, [rg]):
            columns = [c for c in wanted if c != "persistent"]  # nothing to check, and not kept
        table = pf.read_row_group(rg, columns=columns, use_threads=False)
        try:
            for b in table.to_batches():
                cols.fill(b, at)
                at += b.num_rows
        except TraceError as e:
            return e
        return None

    threads = threads or os.cpu_count() or 1
    if threads == 1 or len(units) == 1:
        errors = [work(u) for u in units]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as ex:
            errors = list(ex.map(work, units))
    found = [e for e in errors if e is not None]
    if found:  # the first row at fault, whichever thread found it
        raise min(found, key=lambda e: -1 if e.row is None else e.row)
    return cols.trace()


def all_booleans(pf, groups: list[int]) -> bool:
    """Whether the footer of Parquet file ``pf`` proves ``persistent`` holds only true and false
    in these row groups (a boolean column without nulls): then a reader that does not keep it
    need not decode it."""
    import pyarrow as pa

    schema = pf.schema_arrow
    if "persistent" not in schema.names or not pa.types.is_boolean(schema.field("persistent").type):
        return False
    col = schema.names.index("persistent")
    for g in groups:
        st = pf.metadata.row_group(g).column(col).statistics
        if st is None or not st.has_null_count or st.null_count:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _remap(codes, table):
    for i in range(len(codes)):
        codes[i] = table[codes[i]]


def read(path: str | os.PathLike, persistent: bool = True, threads: int | None = None, empty=None) -> Trace:
    """Read a trace from Parquet (a file or a directory of files) or from CSV, and check it.

    ``persistent=False`` checks that column but does not keep it (the replay does not model
    it): the trace's ``persistent`` is then all False at no memory cost. ``threads``: Parquet's
    row groups are decoded on that many (default: the CPUs). ``empty(n, dtype)`` makes a
    Parquet trace's columns (default ``np.empty``; a direct task's are in pipeline/arena.py's
    memory). Raises FileNotFoundError for a missing path and TraceError for anything else wrong."""
    path = os.fspath(path)
    if path.endswith(".csv"):
        batches, n = _batches(path)
        return _from_batches(batches, n)
    fs, files = parquet_files(path)
    return _from_parquet(fs, files, threads=threads, persistent=persistent, empty=empty)


def read_unit(path: str) -> Trace:
    """One work unit of a trace laid out by queue (a Parquet file, local or a pyarrow.fs URI),
    checked by the same rules as :func:`read`, on one thread. A ``row`` column, when the file has
    one (the Spark partition job adds it), names faults by their row in the original trace."""
    import pyarrow.parquet as pq

    fs, files = parquet_files(path)
    has_rows = "row" in pq.read_schema(fs.open_input_file(files[0])).names
    return _from_parquet(fs, files, threads=1, persistent=False, rows=has_rows)


# -- writing -----------------------------------------------------------------------------------


def _table(trace: Trace):
    import pyarrow as pa

    return pa.table(
        {
            "time_us": pa.array(trace.time_us, pa.int64()),
            "queue": pa.DictionaryArray.from_arrays(
                pa.array(trace.queue, pa.int32()), pa.array(trace.queues, pa.string())
            ),
            "op": pa.DictionaryArray.from_arrays(pa.array(trace.op.astype(np.int32)), pa.array(OPS, pa.string())),
            "bytes": pa.array(trace.nbytes, pa.int32()),
            "priority": pa.array(trace.priority, pa.int8()),
            "persistent": pa.array(trace.persistent, pa.bool_()),
        }
    )


def write(trace: Trace, path: str | os.PathLike, row_group: int = BATCH_ROWS) -> None:
    """Write a trace as Parquet (or CSV when the path ends in .csv). Queue and op are written
    as dictionaries, so reading them back makes no Python object per row."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = _table(trace)
    path = os.fspath(path)
    if path.endswith(".csv"):
        table = table.set_column(1, "queue", table.column("queue").cast(pa.string()))
        table = table.set_column(2, "op", table.column("op").cast(pa.string()))
        pacsv.write_csv(table, path)
    else:
        _write_parquet(table, path, row_group)


def _write_parquet(table, path: str, row_group: int = BATCH_ROWS) -> None:
    """Parquet tuned for reading back fast: queue and op as dictionaries, times delta-coded,
    lz4 (decodes faster than snappy or zstd at a similar size)."""
    import pyarrow.parquet as pq

    pq.write_table(
        table,
        path,
        row_group_size=row_group,
        compression="lz4",
        use_dictionary=["queue", "op"],
        column_encoding={
            "time_us": "DELTA_BINARY_PACKED",
            "bytes": "PLAIN",
            "priority": "PLAIN",
            "persistent": "PLAIN",
        },
    )


def bucket_of(names: list[str], buckets: int) -> np.ndarray:
    """Each queue's bucket: a stable hash (crc32) of its name, so a queue always lands in the same file."""
    return np.array([zlib.crc32(q.encode()) % buckets for q in names], np.int32)


def write_by_queue(trace: Trace, directory: str | os.PathLike, buckets: int) -> dict:
    """Write ``trace`` laid out by queue: ``buckets`` Parquet files, each holding whole queues in
    time order, and the layout file that describes them. Returns the layout."""

    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    of_queue = bucket_of(trace.queues, buckets)
    b = of_queue[trace.queue] if len(trace) else np.zeros(0, np.int32)
    order = np.argsort(b, kind="stable")  # time order kept inside each bucket
    bounds = np.searchsorted(b[order], np.arange(buckets + 1))
    files = []
    for k in range(buckets):
        idx = order[bounds[k] : bounds[k + 1]]
        if not len(idx):
            continue
        part = trace.take(idx)
        name = f"bucket-{k:05d}.parquet"
        _write_parquet(_table(part), os.path.join(directory, name))
        files.append({"path": name, "events": len(idx), "queues": int(np.sum(of_queue == k))})
    layout = {
        "format": "sweepq-trace-by-queue",
        "version": 1,
        "buckets": buckets,
        "events": len(trace),
        "queues": len(trace.queues),
        "t0": int(trace.time_us.min()) if len(trace) else 0,
        "t_end": int(trace.time_us.max()) if len(trace) else 0,
        "files": files,
    }
    with open(os.path.join(directory, LAYOUT_FILE), "w") as f:
        json.dump(layout, f, indent=1)
    return layout


def read_layout(path: str | os.PathLike) -> dict | None:
    """The layout of a trace laid out by queue, or None when ``path`` is not one."""
    path = os.fspath(path)
    fs, p = _filesystem(path)
    try:
        with fs.open_input_stream(p.rstrip("/") + "/" + LAYOUT_FILE) as f:
            layout = json.loads(f.read())
    except (FileNotFoundError, OSError):
        return None
    return layout if layout.get("format") == "sweepq-trace-by-queue" else None


# -- synthetic traces --------------------------------------------------------------------------

from .trace_kinds import KINDS  # noqa: E402  (kept beside generate, which uses it)


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
    gets at a third of the put rate. ``slow-drain``: gets at 0.9 to 0.99 of the put rate
    (drawn per queue), the case where the seed's rule re-sweeps. ``diurnal``: the put rate
    follows a sine over the trace (a compressed day), gets at the mean. ``many-queues``: ``queues`` queues (10,000
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
            k = ("steady", "bursty", "slow-consumer", "diurnal", "slow-drain")[rng.integers(5)]
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
    if kind == "slow-drain":
        d = rng.uniform(0.9, 0.99)
        return _poisson(lambda t: np.full_like(t, rate), seconds, rate, rng), _poisson(
            lambda t: np.full_like(t, rate * d), seconds, rate * d, rng
        )
    if kind == "slow-consumer":
        return _poisson(lambda t: np.full_like(t, rate), seconds, rate, rng), _poisson(
            lambda t: np.full_like(t, rate / 3), seconds, rate / 3, rng
        )
    # diurnal: one sine period over the trace, between 0 and twice the mean
    day = lambda t: rate * (1 - np.cos(2 * np.pi * t / seconds))  # noqa: E731
    return _poisson(day, seconds, 2 * rate, rng), _poisson(lambda t: np.full_like(t, rate), seconds, rate, rng)
