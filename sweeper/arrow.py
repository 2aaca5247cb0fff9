"""Arrow arrays made from numpy columns and name lists without ``pyarrow.array``.

``sweepq replay`` writes its metrics, and the pipeline's tasks their results (and the
layout its parts), as Arrow tables. The first ``pa.array`` call in a process imports pandas
(pyarrow checks every input for a pandas object): 0.2 s of a 1.2 s ``sweepq replay`` of 10 M
events, 0.4 to 0.7 s of CPU in each Spark worker, more than a task's own work on a million
events. These build the same arrays from the values' buffers instead: the numeric ones
without a copy (the array keeps the numpy array alive through its buffer).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def numbers(values: np.ndarray) -> Any:
    """A numpy array of fixed-width numbers as the Arrow array of the same type (no nulls)."""
    import pyarrow as pa

    v = np.ascontiguousarray(values)
    data = np.packbits(v, bitorder="little") if v.dtype == np.bool_ else v  # Arrow's booleans are bits
    return pa.Array.from_buffers(pa.from_numpy_dtype(v.dtype), len(v), [None, pa.py_buffer(data)])


def strings(names: list[str], repeat: int = 1) -> Any:
    """A list of str as an Arrow string array (no nulls), each name ``repeat`` times in a row."""
    import pyarrow as pa

    data = [s.encode() for s in names]
    sizes = np.repeat(np.array([len(d) for d in data], np.int64), repeat)
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError(f"{offsets[-1]} bytes of names: more than an Arrow string array holds")
    body = b"".join(d * repeat for d in data)
    return pa.StringArray.from_buffers(len(sizes), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(body))


def coded(codes: np.ndarray, names: list[str]) -> Any:
    """int32 ``codes`` into ``names`` as an Arrow dictionary array (a queue column)."""
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(numbers(codes.astype(np.int32, copy=False)), strings(names))


def table(columns: dict[str, Any]) -> Any:
    """An Arrow table of named columns: numpy arrays, lists of str, or Arrow arrays."""
    import pyarrow as pa

    arrays = []
    for v in columns.values():
        if isinstance(v, np.ndarray):
            arrays.append(numbers(v))
        elif isinstance(v, list):
            arrays.append(strings(v))
        else:
            arrays.append(v)
    return pa.Table.from_arrays(arrays, names=list(columns))
