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
import time

import pytest

from sweepq.sweeper.traces import generate, write

WAIT_S = 600  # bounds each run of a fresh JVM on a busy machine; nothing waits on time
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


def _sweepq(*args: str) -> list[str]:
    return [sys.executable, "-m", "sweepq", *args]


def _session(sid: int) -> dict[int, tuple[str, int, int]]:
    """The living processes of session ``sid`` (a process started with ``start_new_session``
    and all it started: Spark's JVM, the Python daemon, which makes a process group of its own
    but stays in the session, and its workers): pid -> (name, parent, process group)."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # not a process, or ended meanwhile
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if int(rest[3]) == sid and rest[0] != "Z":  # fields 6 (session) and 3 (state)
            found[int(entry)] = (name, int(rest[1]), int(rest[2]))
    return found


def _gone(sid: int) -> list[str]:
    """Wait (bounded) until session ``sid`` has no process left; what is left at the bound."""
    end = time.monotonic() + WAIT_S
    while (left := _session(sid)) and time.monotonic() < end:
        time.sleep(0.1)
    return [f"{pid} {name}" for pid, (name, _, _) in left.items()]


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
    local = subprocess.run(_sweepq("replay", path, "--json"), capture_output=True, text=True, timeout=WAIT_S)
    assert local.returncode == 0, local.stderr[-3000:]
    want = json.loads(local.stdout[local.stdout.index("{") :])
    proc = subprocess.Popen(
        _sweepq("pipeline", "--master", "local[2]", "--traces", path, "--out", str(tmp_path / "out")),
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
    assert _gone(proc.pid) == []


def _worker(sid: int) -> int | None:
    """A Python worker of Spark's daemon in session ``sid``, if one is running: the daemon makes
    itself a process group of its own (pyspark's daemon.py), and forks a worker for a task."""
    procs = _session(sid)
    daemons = {pid for pid, (_, _, group) in procs.items() if group == pid and pid != sid}
    return next((pid for pid, (_, parent, _) in procs.items() if parent in daemons), None)


def test_ctrl_c_in_the_replay_stage_ends_the_run_cleanly(spark_available, tmp_path):
    t = generate("many-queues", seconds=60, rate=15, queues=8, size=150, priorities=True, seed=5)
    path = str(tmp_path / "t.parquet")
    write(t, path)
    proc = subprocess.Popen(
        _sweepq("pipeline", "--master", "local[2]", "--traces", path, "--out", str(tmp_path / "out")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session and process group, as a terminal's foreground job
    )
    try:
        # The replay job is the run's first: its task is the first worker the daemon forks.
        end = time.monotonic() + WAIT_S
        while (worker := _worker(proc.pid)) is None and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.01)
        assert worker is not None, "no replay task started"
        # Held where it is (the task cannot end first), interrupted as a terminal does, let go.
        os.kill(worker, signal.SIGSTOP)
        os.killpg(proc.pid, signal.SIGINT)
        os.kill(worker, signal.SIGCONT)
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "replay: 1 work unit," in err, err[-3000:]
    assert proc.returncode == 130, err[-3000:]
    assert "sweepq pipeline: interrupted" in err.splitlines(), err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert out == ""
    assert _gone(proc.pid) == []
    assert not (tmp_path / "out" / "overall.json").exists()
