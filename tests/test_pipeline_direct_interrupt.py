"""``sweepq pipeline`` in direct mode (pipeline/direct.py) as a user runs it, in a process of
its own (its own JVM, Python daemon and workers):

- beside a busy CPU (two spinning processes, one per core of a 2-core machine), it still
  finishes, with the figures of ``sweepq replay`` on the same trace;
- Ctrl-C (SIGINT to its process group, as a terminal sends it) during the replay stage ends it
  with one line, exit code 130 and no traceback, and leaves no process behind: not the JVM,
  not Spark's Python daemon or its workers.

The interrupt lands while the replay task runs, without waiting on time: the test waits
until the daemon has forked the task's worker (the replay's job is the run's first), stops
that worker (SIGSTOP: the task cannot end first), sends SIGINT and lets the worker go on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from pipeline_session import NO_START_JOB, WAIT_S, gone, interrupted, sweepq, worker

from sweepq.sweeper.traces import generate, write

FIGURES = (
    "events",
    "peak_memory_with_sweeper_bytes",
    "peak_memory_without_sweeping_bytes",
    "bytes_read_back",
    "msgs_swept",
    "msgs_reswept",
    "sweeps",
    "queues",
)


@pytest.fixture(scope="module")
def spark_available():
    pytest.importorskip("pyspark")
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc to find the processes left")


@pytest.fixture
def busy_cpu():
    """Two processes spinning on the CPU for the test's duration."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for p in spinners:
        p.kill()
        p.wait()


def test_a_direct_replay_beside_a_busy_cpu_equals_sweepq_replay(spark_available, busy_cpu, tmp_path):
    t = generate("many-queues", seconds=60, rate=15, queues=8, size=150, priorities=True, seed=5)
    path = str(tmp_path / "t.parquet")
    write(t, path)
    local = subprocess.run(sweepq("replay", path, "--json"), capture_output=True, text=True, timeout=WAIT_S)
    assert local.returncode == 0, local.stderr[-3000:]
    want = json.loads(local.stdout[local.stdout.index("{") :])
    proc = subprocess.Popen(
        sweepq("pipeline", "--master", "local[2]", "--traces", path, "--out", str(tmp_path / "out")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    got = json.loads(out)
    assert got["layout"]["how"] == "direct"
    for k in FIGURES:
        assert got[k] == want[k], k
    assert gone(proc.pid) == []


def test_ctrl_c_in_the_replay_stage_ends_the_run_cleanly(spark_available, tmp_path):
    t = generate("many-queues", seconds=60, rate=15, queues=8, size=150, priorities=True, seed=5)
    path = str(tmp_path / "t.parquet")
    write(t, path)
    # Without the start's own job (tests/test_pipeline_interrupt_start.py interrupts that one),
    # the replay job is the run's first: its task is the first worker the daemon forks.
    code, out, err = interrupted(["--traces", path, "--out", str(tmp_path / "out")], worker, NO_START_JOB)
    assert "replay: 1 work unit," in err, err[-3000:]
    assert code == 130, err[-3000:]
    assert "sweepq pipeline: interrupted" in err.splitlines(), err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert out == ""
    assert not (tmp_path / "out" / "overall.json").exists()
