"""A trace's Arrow record batches into the replay's numpy columns: one compiled pass a batch.

Reading, not the kernel, was most of ``sweepq replay``'s time (9.8 M events/s in the process
against the kernel's 71 M): per column of every batch a numpy copy (Arrow's ``to_numpy``,
whose first call also imports pandas, a third of a second), a gather for the dictionary
codes, casts, and then the checker's own pass over the whole trace on one thread. Here a
batch whose columns are in the types sweepq writes (int64 times, the queue as a dictionary
of strings with int32 codes, the op as such a dictionary or as int8 codes, int32 sizes, int8
priorities, no nulls) is read where Arrow holds it (its buffers viewed as numpy arrays, no
copy), and :func:`convert`, compiled and run outside the GIL on the reader's threads, writes
its slice of the five columns and checks every rule of ``traces.check_events`` that one batch
can see, counting the lanes' puts and each queue's first and last time. :func:`merge` joins
the batches in row order: the order rule across batches (a queue's first time in a batch
against its last time before it), the lanes, and whether the rows are in time order.

The fast path only ever *accepts*: a batch in any other form, or with any fault, is converted
by the general reader and the whole trace checked by ``check_events``, which names the row at
fault. So a trace either passes here and there alike, or its error is the general reader's.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from .traces import GET, PUT


def view(arr: Any, dtype: Any) -> np.ndarray | None:
    """An Arrow array of fixed-width values without nulls as a read-only numpy view of its data
    buffer (no copy, and none of ``to_numpy``'s imports), or None when it is of another type or
    has nulls."""
    import pyarrow as pa

    if arr.null_count or arr.type != pa.from_numpy_dtype(dtype):
        return None
    size = np.dtype(dtype).itemsize
    data = arr.buffers()[1]  # None in an empty array, at times
    v = np.empty(0, dtype) if data is None else np.frombuffer(data, dtype, count=len(arr), offset=arr.offset * size)
    v.flags.writeable = False  # whatever Arrow's buffer allows: one compiled form of convert, not two
    return v


def booleans(arr: Any) -> np.ndarray | None:
    """A boolean Arrow array without nulls as numpy booleans (its bits unpacked), else None."""
    import pyarrow as pa

    if arr.null_count or not pa.types.is_boolean(arr.type):
        return None
    if len(arr) == 0:
        return np.zeros(0, bool)
    bits = np.frombuffer(arr.buffers()[1], np.uint8)
    return np.unpackbits(bits, bitorder="little")[arr.offset : arr.offset + len(arr)].astype(bool)


def strings(arr: Any) -> tuple[np.ndarray, list[str]] | None:
    """(int32 codes, the dictionary's values) of a dictionary array of strings without nulls
    and whose values are distinct (so a code is one name); else None."""
    import pyarrow as pa

    if not pa.types.is_dictionary(arr.type) or arr.null_count or not pa.types.is_string(arr.type.value_type):
        return None
    codes = view(arr.indices, np.int32)
    values = arr.dictionary.to_pylist()
    if codes is None or None in values or len(set(values)) != len(values):
        return None
    return codes, values


@numba.njit(cache=True, nogil=True)
def used(codes: np.ndarray, n: int) -> np.ndarray:
    """Which of ``n`` dictionary entries occur in ``codes`` (a file's dictionary may list more
    names than its rows use: only those used become queues). An out-of-range code marks
    nothing; :func:`convert` rejects it."""
    seen = np.zeros(n, np.bool_)
    for i in range(len(codes)):
        c = codes[i]
        if 0 <= c < n:
            seen[c] = True
    return seen


@numba.njit(cache=True, nogil=True)
def convert(t_in, q_in, qmap, o_in, omap, b_in, p_in, out, off, lanes, first, last):
    """Write one batch into rows [off, off + len(t_in)) of ``out`` (time, queue, op, bytes,
    priority), the queue's code through ``qmap`` (dictionary entry -> the trace's code) and the
    op's through ``omap`` (entry -> PUT or GET; -1 for a word that is neither), checking as
    ``check_events`` does. Per dictionary entry j it counts the puts of each priority in
    ``lanes[j * 10 + p]`` and keeps the first and last time (-1 when j has no row).

    Returns (clean, in time order): clean is False at the first fault, the rest unwritten."""
    t_out, q_out, o_out, b_out, p_out = out
    nq = len(qmap)
    no = len(omap)
    in_order = True
    prev = np.int64(-1)
    for i in range(len(t_in)):
        t = np.int64(t_in[i])
        j = np.int64(q_in[i])
        oi = np.int64(o_in[i])
        if t < 0 or j < 0 or j >= nq or oi < 0 or oi >= no:
            return False, in_order
        o = omap[oi]
        if o != PUT and o != GET:
            return False, in_order
        if t < last[j]:
            return False, in_order
        if first[j] < 0:
            first[j] = t
        last[j] = t
        if t < prev:
            in_order = False
        prev = t
        if o == PUT:
            p = np.int64(p_in[i])
            if p < 0 or p > 9 or b_in[i] < 0:
                return False, in_order
            lanes[j * 10 + p] += 1
        k = off + i
        t_out[k] = t
        q_out[k] = qmap[j]
        o_out[k] = o
        b_out[k] = b_in[i]
        p_out[k] = p_in[i]
    return True, in_order


def merge(parts: list[tuple], n_queues: int) -> tuple[np.ndarray, bool] | None:
    """The lanes' puts over the whole trace (``queue * 10 + p``) and whether its rows are in time
    order, from the batches' results in row order: ``(off, rows, qmap, lanes, first, last,
    in_order)`` each. None when a queue's first time in a batch is before its last time in
    an earlier one (the order rule broken across batches: the general checker names the row).
    The same verdict as ``check_events`` over the whole trace, since a batch checked its own
    rows."""
    counts = np.zeros((n_queues, 10), np.int64)
    last_of = np.full(n_queues, -1, np.int64)
    in_order = True
    prev = -1
    for _off, rows, qmap, lanes, first, last, ordered in sorted(parts, key=lambda p: p[0]):
        if rows == 0:
            continue
        seen = first >= 0
        codes = qmap[seen]
        if np.any(first[seen] < last_of[codes]):
            return None
        last_of[codes] = last[seen]
        counts[codes] += lanes.reshape(-1, 10)[seen]
        batch_first = int(first[seen].min())
        in_order = in_order and ordered and batch_first >= prev
        prev = int(last[seen].max())
    return counts.reshape(-1), in_order


def _read_only(dtype: Any) -> np.ndarray:
    a = np.zeros(1, dtype)
    a.flags.writeable = False  # as Arrow's buffers are: numba compiles read-only arrays apart
    return a


def warm_up() -> None:
    """Load the compiled passes (numba's cache) for the column types sweepq writes: a Parquet
    trace's (op as dictionary codes) and a layout's Arrow files' (op as int8)."""
    q = _read_only(np.int32)
    used(q, 1)
    for op in (q, _read_only(np.int8)):
        out = tuple(np.zeros(1, d) for d in (np.int64, np.int32, np.int8, np.int32, np.int8))
        convert(
            _read_only(np.int64),
            q,
            np.zeros(1, np.int32),
            op,
            np.zeros(1, np.int8),
            q,
            _read_only(np.int8),
            out,
            0,
            np.zeros(10, np.int64),
            np.full(1, -1, np.int64),
            np.full(1, -1, np.int64),
        )
