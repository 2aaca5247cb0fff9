"""What the pipeline overlaps to shorten a run (issue 35 item 5), and that it changes no figure:

- a layout to be made is made by the run's first job, whose tasks start the Python workers
  (no warm-up job of its own before it); a layout to reuse keeps the warm-up job. Both in a
  process of its own (its own JVM, so that the layout job is truly the first), with the same
  figures as the local replay;
- a layout that fails in that first job (a bad value; a task that raises) ends the run with
  its one line and exit code, within a bound: no hang on a daemon or a worker."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import replay
from sweepq.sweeper.traces import generate, write

WAIT_S = 600  # bounds each run of a fresh JVM on a busy machine; nothing waits on time
FIGURES = ("peak_memory_with_sweeper_bytes", "bytes_read_back", "msgs_swept", "msgs_reswept", "sweeps")


def _pipeline(*args: str) -> subprocess.CompletedProcess:
    """``sweepq pipeline ARGS`` on local[2] as a user runs it: its own driver, JVM and daemon."""
    cmd = [sys.executable, "-m", "sweepq", "pipeline", "--master", "local[2]", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=WAIT_S)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    pytest.importorskip("pyspark")
    t = generate("many-queues", seconds=60, rate=15, queues=8, size=150, priorities=True, seed=11)
    path = tmp_path_factory.mktemp("overlap") / "t.parquet"
    write(t, path)
    return t, str(path)


def test_a_layout_made_is_the_first_job_and_the_figures_equal_the_local_replay(trace, tmp_path):
    t, path = trace
    want = replay(t, SweepPolicy(), record_header=HEAD_LEN).overall()
    made = _pipeline("--traces", path, "--out", str(tmp_path), "--shuffle", "arrow")  # auto: direct here
    assert made.returncode == 0, made.stderr[-3000:]
    assert "warm-up: in the layout job" in made.stderr
    first = json.loads(made.stdout)
    assert first["layout"]["how"] == "made" and first["layout"]["made_by"] == "arrow"
    assert "warm_up" not in first["stage_seconds"] and first["stage_seconds"]["layout"] > 0
    metrics = pd.read_parquet(tmp_path / "metrics").sort_values(["queue", "interval"]).reset_index(drop=True)
    reused = _pipeline("--traces", path, "--out", str(tmp_path), "--shuffle", "arrow")
    assert reused.returncode == 0, reused.stderr[-3000:]
    again = json.loads(reused.stdout)
    assert again["layout"]["how"] == "reused" and "warm_up" in again["stage_seconds"]
    for k in FIGURES:
        assert first[k] == again[k] == want[k], k
    np.testing.assert_array_equal(
        pd.read_parquet(tmp_path / "metrics").sort_values(["queue", "interval"]).reset_index(drop=True), metrics
    )
    assert "<img" in (tmp_path / "report.html").read_text()


def test_a_direct_replay_is_the_first_job_and_the_figures_equal_the_local_replay(trace, tmp_path):
    """``auto`` on local[2]: no layout, no warm-up job; the replay's job starts the workers."""
    t, path = trace
    want = replay(t, SweepPolicy(), record_header=HEAD_LEN).overall()
    run = _pipeline("--traces", path, "--out", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    overall = json.loads(run.stdout)
    assert overall["layout"]["how"] == "direct" and "warm_up" not in overall["stage_seconds"]
    assert not (tmp_path / "layout").exists()
    for k in FIGURES:
        assert overall[k] == want[k], k


def test_a_bad_value_found_by_the_first_job_ends_the_run_naming_its_row(tmp_path):
    pytest.importorskip("pyspark")
    bad = tmp_path / "bad.csv"
    rows = [{"time_us": 1, "queue": "Q", "op": "put", "bytes": 10, "priority": 1, "persistent": False}] * 3
    rows[2] = {**rows[2], "bytes": -3}
    pd.DataFrame(rows).to_csv(bad, index=False)
    out = _pipeline("--traces", str(bad), "--out", str(tmp_path / "out"))
    assert out.returncode == 2, out.stderr[-3000:]
    assert "bytes" in out.stderr and "row 2" in out.stderr
    assert not (tmp_path / "out" / "report.html").exists()


def test_a_layout_task_that_fails_in_the_first_job_ends_the_run_with_one_line(trace, tmp_path):
    _, path = trace
    (tmp_path / "file").write_text("a file where the layout's directory would be")
    out = _pipeline("--traces", path, "--out", str(tmp_path / "out"), "--layout", str(tmp_path / "file" / "layout"))
    assert out.returncode == 1, out.stderr[-3000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("sweepq pipeline: error: the Spark job failed:") and "no report was written" in last
    assert not (tmp_path / "out" / "report.html").exists()
