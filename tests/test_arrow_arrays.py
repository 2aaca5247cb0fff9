"""sweeper/arrow.py: the arrays it builds without pa.array equal pa.array's, and making them
imports no pandas (the cost they exist to avoid, in every Spark worker)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from sweepq.sweeper import arrow


@pytest.mark.parametrize(
    "values",
    [
        np.arange(5, dtype=np.int64),
        np.array([3, -1], np.int32),
        np.array([7], np.int8),
        np.zeros(0, np.int64),
        np.arange(12, dtype=np.int64).reshape(3, 4)[:, 1],  # not contiguous: a column of a 2-d array
        np.array([True, False, True, True, False, False, False, True, True]),
    ],
)
def test_numbers_equal_pa_array(values):
    got = arrow.numbers(values)
    got.validate(full=True)
    assert got.equals(pa.array(values))


@pytest.mark.parametrize("names,repeat", [([], 1), (["A"], 1), (["Q1", "", "Grüße"], 1), (["A", "BC"], 3), (["A"], 0)])
def test_strings_equal_pa_array(names, repeat):
    got = arrow.strings(names, repeat=repeat)
    got.validate(full=True)
    assert got.equals(pa.array([n for n in names for _ in range(repeat)], pa.string()))


def test_coded_and_table():
    col = arrow.coded(np.array([1, 0, 1], np.int32), ["A", "B"])
    assert col.to_pylist() == ["B", "A", "B"]
    t = arrow.table({"n": np.array([1, 2, 3]), "name": ["x", "y", "z"], "q": col})
    assert t.column_names == ["n", "name", "q"] and t.column("name").to_pylist() == ["x", "y", "z"]


def test_no_pandas_is_imported():
    code = (
        "import sys, numpy as np\n"
        "from sweepq.sweeper import arrow\n"
        "arrow.table({'n': np.arange(3), 's': ['a', 'b', 'c'], 'q': arrow.coded(np.zeros(3, np.int32), ['Q'])})\n"
        "assert 'pandas' not in sys.modules, 'pandas was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
