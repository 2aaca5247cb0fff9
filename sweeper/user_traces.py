"""Traces a user has, read for the replay and the plan: beside sweepq's own trace format
(sweeper/traces.py, which the engine's recorder writes with ``SweeperSettings(trace_path=...)``), a CSV or Parquet
file of just **time, queue, size, put/get**, as a log of production gives it.

Column names accepted (first match wins; any case):

==========  =======================================================================
meaning     columns
==========  =======================================================================
time        ``time_us`` (integer microseconds) or ``time`` (seconds, a number, or a
            timestamp: microseconds since the epoch)
queue       ``queue``
size        ``bytes`` or ``size`` (payload bytes; a get's value is ignored)
put/get     ``op``, ``event``, ``kind`` or ``type`` (``put`` or ``get``, any case)
priority    ``priority`` (optional, 0 when absent)
persistent  ``persistent`` (optional, false when absent)
==========  =======================================================================

The result is checked by the one checker of traces.py, so a bad row fails as it would in
``sweepq replay``: one line naming the column and the row.
"""

from __future__ import annotations

import os

import numpy as np

from .traces import COLUMNS, Trace, TraceError, parquet_files, read

TIME = ("time_us", "time")
SIZE = ("bytes", "size")
OP = ("op", "event", "kind", "type")


def _table(path: str):
    """The whole file as an Arrow table (CSV or Parquet, a file or a directory)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if path.endswith(".csv"):
        try:
            return pacsv.read_csv(path)
        except pa.ArrowInvalid as e:
            raise TraceError(None, None, f"{path}: {str(e).splitlines()[0]}") from None
    fs, files = parquet_files(path)
    try:
        return pa.concat_tables([pq.read_table(fs.open_input_file(f)) for f in files])
    except pa.ArrowInvalid as e:
        raise TraceError(None, None, f"{path} is not a Parquet trace ({e})") from None


def _names(path: str) -> list[str]:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if path.endswith(".csv"):
        with open(path, "rb") as f:
            first = f.readline()
        if not first.strip():
            raise TraceError(None, None, f"{path}: the file is empty (a CSV trace starts with a header line)")
        return list(pacsv.read_csv(_Lines(first)).schema.names)
    fs, files = parquet_files(path)
    try:
        return list(pq.read_schema(fs.open_input_file(files[0])).names)
    except Exception as e:  # pyarrow raises several kinds for a file that is not Parquet
        raise TraceError(None, None, f"{files[0]} is not a Parquet file ({e})") from None


class _Lines:
    """A header line as a file, for pyarrow.csv to name its columns."""

    def __init__(self, data: bytes):
        import io

        self._f = io.BytesIO(data + b"\n")

    def read(self, n: int = -1) -> bytes:
        return self._f.read(n)

    def __getattr__(self, name: str):
        return getattr(self._f, name)


def _pick(names: dict[str, str], options: tuple[str, ...], what: str, path: str) -> str:
    for o in options:
        if o in names:
            return names[o]
    raise TraceError(
        options[0], None, f"is missing from {path}: a trace needs a {what} column ({' or '.join(options)})"
    )


def _time_us(col, name: str):
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(col.type):
        return pc.cast(col, pa.timestamp("us")).cast(pa.int64())
    if name == "time_us":
        return col
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise TraceError(name, None, f"holds {col.type}, not seconds (a number) or a timestamp")
    us = np.round(np.asarray(col.to_numpy(zero_copy_only=False), np.float64) * 1e6)
    return pa.array(us.astype(np.int64))


def read_any(path: str | os.PathLike) -> Trace:
    """A trace from ``path``: sweepq's own format (traces.read, the fast columnar path), else a
    CSV or Parquet of time, queue, size and put/get under the names above. Raises
    FileNotFoundError for a missing path and TraceError for anything else wrong."""
    import pyarrow as pa

    path = os.fspath(path)
    if not os.path.exists(path) and "://" not in path:
        raise FileNotFoundError(f"no such file or directory: {path}")
    names = {n.lower(): n for n in _names(path)}
    if all(c in names.values() for c in COLUMNS):
        return read(path, persistent=False)
    t_name = _pick(names, TIME, "time", path)
    q_name = _pick(names, ("queue",), "queue", path)
    s_name = _pick(names, SIZE, "size", path)
    o_name = _pick(names, OP, "put/get", path)
    table = _table(path)
    n = table.num_rows
    cols = {
        "time_us": _time_us(table.column(t_name).combine_chunks(), t_name.lower()),
        "queue": table.column(q_name).cast(pa.string()).combine_chunks(),
        "op": table.column(o_name).cast(pa.string()).combine_chunks(),
        "bytes": table.column(s_name).combine_chunks(),
        "priority": table.column(names["priority"]).combine_chunks()
        if "priority" in names
        else pa.array(np.zeros(n, np.int8)),
        "persistent": pa.array(np.zeros(n, bool)),
    }
    return Trace.from_columns(cols)


__all__ = ["read_any"]
