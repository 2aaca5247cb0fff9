"""Ctrl-C before the replay stage of ``sweepq pipeline``, in a process of its own: during the
JVM's start, during the start's own first job (pipeline/session.py ``warm_up``), and during the
layout job (the run's first job when a layout is made in Arrow).
Either ends the run with one line, exit code 130 and no traceback (Py4J logs one for a
KeyboardInterrupt inside its calls; the calls run on a thread of their own, pipeline/interrupt.py),
and leaves no process behind.

Each interrupt lands where it is meant to without waiting on time: the test waits until the
JVM's process exists, or until the daemon has forked a task's worker, stops that process
(SIGSTOP: it cannot get further), sends SIGINT to the run's process group as a terminal does,
and lets the process go on.
"""

from __future__ import annotations

import pytest
from pipeline_session import NO_START_JOB, interrupted, session, worker

from sweepq.sweeper.traces import generate, write


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    import sys

    pytest.importorskip("pyspark")
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc to find the processes left")
    t = generate("many-queues", seconds=60, rate=15, queues=8, size=150, priorities=True, seed=5)
    path = str(tmp_path_factory.mktemp("trace") / "t.parquet")
    write(t, path)
    return path


def _java(sid: int) -> int | None:
    """Spark's JVM in session ``sid``, once its process runs."""
    return next((pid for pid, (name, _, _) in session(sid).items() if name == "java"), None)


def _one_line(code: int, out: str, err: str) -> None:
    assert code == 130, err[-3000:]
    assert "sweepq pipeline: interrupted" in err.splitlines(), err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert out == ""


def test_ctrl_c_during_the_jvms_start_ends_the_run_cleanly(trace, tmp_path):
    code, out, err = interrupted(["--traces", trace, "--out", str(tmp_path / "out")], _java)
    _one_line(code, out, err)
    assert "spark: local[2] started" not in err  # the JVM, held, had not started


def test_ctrl_c_during_the_starts_first_job_ends_the_run_cleanly(trace, tmp_path):
    # The start's own job forks the daemon's first worker: held, the start cannot end.
    code, out, err = interrupted(["--traces", trace, "--out", str(tmp_path / "out")], worker)
    _one_line(code, out, err)
    assert "spark: local[2] started" not in err, err[-3000:]
    assert "Exception" not in err, err[-3000:]  # nor a Java stack the JVM logged


def test_ctrl_c_during_the_layout_job_ends_the_run_cleanly(trace, tmp_path):
    args = ["--traces", trace, "--out", str(tmp_path / "out"), "--shuffle", "arrow"]
    # Without the start's own job, the layout's tasks are the first the daemon's workers run.
    code, out, err = interrupted(args, worker, NO_START_JOB)
    _one_line(code, out, err)
    assert "warm-up: in the layout job" in err, err[-3000:]
    assert "replay:" not in err
    assert not (tmp_path / "out" / "overall.json").exists()
