"""Record what a queue manager does as a trace (sweeper/traces.py), so a real run can be
replayed: one row per successful put and destructive get, written to Parquet in batches.

Off by default. When on, put and get pay one attribute check and a list append each; the
Parquet write happens once per ``batch`` events, under the recorder's own lock.
"""

from __future__ import annotations

import os
import threading

import pyarrow as pa
import pyarrow.parquet as pq

from sweepq.sweeper.clock import Clock

_SCHEMA = pa.schema(
    [
        ("time_us", pa.int64()),
        ("queue", pa.string()),
        ("op", pa.string()),
        ("bytes", pa.int32()),
        ("priority", pa.int8()),
        ("persistent", pa.bool_()),
    ]
)


class TraceRecorder:
    def __init__(self, path: str | os.PathLike, clock: Clock, batch: int = 65_536):
        self.path = os.fspath(path)
        self._clock = clock
        self._batch = batch
        self._rows: list[tuple] = []
        self._lock = threading.Lock()
        self._writer = pq.ParquetWriter(self.path, _SCHEMA)
        self.events = 0

    def put(self, queue: str, nbytes: int, priority: int, persistent: bool) -> None:
        self._add((int(self._clock.now() * 1_000_000), queue, "put", nbytes, priority, persistent))

    def get(self, queue: str) -> None:
        self._add((int(self._clock.now() * 1_000_000), queue, "get", 0, 0, False))

    def _add(self, row: tuple) -> None:
        with self._lock:
            self._rows.append(row)
            self.events += 1
            if len(self._rows) >= self._batch:
                self._flush()

    def _flush(self) -> None:
        if not self._rows:
            return
        cols = list(zip(*self._rows, strict=True))
        self._writer.write_table(
            pa.Table.from_arrays([pa.array(c, t.type) for c, t in zip(cols, _SCHEMA, strict=True)], schema=_SCHEMA)
        )
        self._rows = []

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._flush()
                self._writer.close()
                self._writer = None
