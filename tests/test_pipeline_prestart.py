"""The Python daemon pre-started by the driver (pipeline/prestart.py): the daemon process that
Spark's JVM starts hands itself over to it, which then answers as pyspark's daemon does (its
port on the JVM's pipe, its end when that pipe closes or on SIGTERM); a daemon it cannot be
is refused and the JVM's process runs the daemon itself; one not claimed ends when released;
nothing is left running. The JVM is played by the test (pipes to ``python -m
sweepq.pipeline.daemon``), and one test runs a real local session in a process of its own."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest

from sweepq.pipeline import prestart

WAIT_S = 120  # bounds every wait here (a busy machine); none is a synchronisation by time


@pytest.fixture
def started(monkeypatch):
    """A pre-started daemon for this test (released and gone at its end)."""
    monkeypatch.delenv(prestart.ENV, raising=False)
    monkeypatch.setattr(prestart, "_current", None)
    handle = prestart.start()
    assert handle is not None
    prestart.started()
    yield handle
    handle.release()
    handle.proc.wait(WAIT_S)


def _jvm_side_daemon(socket_path: str, python: str = sys.executable, **more: str) -> subprocess.Popen:
    """The daemon process as Spark's JVM starts it: ``python -m sweepq.pipeline.daemon`` (the
    workers' interpreter, or the launcher that stands for it) with pipes for stdin and stdout
    and the driver's environment (PYTHONHASHSEED as Spark sets it)."""
    env = {k: v for k, v in os.environ.items() if k != prestart.ENV}
    env.setdefault("PYTHONHASHSEED", "0")
    env.update({prestart.ENV: socket_path, **more})
    return subprocess.Popen(
        [python, "-m", "sweepq.pipeline.daemon"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _port(proc: subprocess.Popen) -> int:
    """The port the daemon writes first on its stdout (what the JVM reads)."""
    assert proc.stdout is not None
    data = proc.stdout.read(4)
    assert len(data) == 4, proc.stderr.read().decode() if proc.stderr else ""
    return struct.unpack("!i", data)[0]


def _listening_pid(port: int) -> int:
    import psutil

    for c in psutil.net_connections("tcp4"):
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN:
            return c.pid
    raise AssertionError(f"nothing listens on {port}")


def test_the_jvms_daemon_hands_over_to_the_prestarted_one_which_ends_with_the_jvms_pipe(started):
    jvm_side = _jvm_side_daemon(started.socket_path)
    port = _port(jvm_side)
    assert started.release() is True
    assert _listening_pid(port) == started.proc.pid  # the pre-started process is the daemon
    assert jvm_side.stdin is not None
    jvm_side.stdin.close()  # the JVM ends: pyspark's daemon ends on end of file (its code: 1)
    started.proc.wait(WAIT_S)
    assert jvm_side.wait(WAIT_S) == 0  # the stand-in ends with it
    assert not os.path.exists(started.directory)


def test_a_sigterm_to_the_jvms_daemon_reaches_the_prestarted_one(started):
    jvm_side = _jvm_side_daemon(started.socket_path)
    _port(jvm_side)
    assert started.release() is True
    jvm_side.terminate()  # what the JVM's stopDaemon does (Process.destroy)
    started.proc.wait(WAIT_S)
    jvm_side.wait(WAIT_S)
    assert started.proc.returncode is not None and jvm_side.returncode is not None


def test_a_daemon_started_otherwise_is_refused_and_runs_itself(started):
    jvm_side = _jvm_side_daemon(started.socket_path, PYTHONWARNINGS="ignore")
    port = _port(jvm_side)
    assert started.release() is False
    assert started.proc.wait(WAIT_S) == 0
    assert _listening_pid(port) == jvm_side.pid  # the JVM's own process is the daemon
    assert jvm_side.stdin is not None
    jvm_side.stdin.close()
    jvm_side.wait(WAIT_S)
    assert jvm_side.stderr is not None
    assert "start-up variables differ: PYTHONWARNINGS" in jvm_side.stderr.read().decode()


def test_without_a_prestarted_daemon_the_jvms_runs_itself(tmp_path):
    jvm_side = _jvm_side_daemon(str(tmp_path / "gone"))
    port = _port(jvm_side)
    assert _listening_pid(port) == jvm_side.pid
    assert jvm_side.stdin is not None
    jvm_side.stdin.close()
    jvm_side.wait(WAIT_S)


@pytest.fixture
def launcher(tmp_path):
    """The launcher script (pipeline/launcher.py) as a session writes it, in a directory of the test's."""
    path = prestart.launcher_script(str(tmp_path / "cache"))
    assert path is not None
    return path


def test_the_launcher_hands_over_and_stands_in_for_the_daemon(started, launcher):
    jvm_side = _jvm_side_daemon(started.socket_path, launcher)
    port = _port(jvm_side)
    assert started.release() is True
    assert _listening_pid(port) == started.proc.pid  # the pre-started process is the daemon
    assert jvm_side.stdin is not None
    jvm_side.stdin.close()
    started.proc.wait(WAIT_S)
    assert jvm_side.wait(WAIT_S) == 0  # the launcher, standing in, ends with it


def test_a_sigterm_to_the_launcher_reaches_the_prestarted_daemon(started, launcher):
    jvm_side = _jvm_side_daemon(started.socket_path, launcher)
    _port(jvm_side)
    assert started.release() is True
    jvm_side.terminate()
    started.proc.wait(WAIT_S)
    jvm_side.wait(WAIT_S)
    assert started.proc.returncode is not None and jvm_side.returncode is not None


def test_a_launcher_refused_runs_the_daemon_in_its_own_process(started, launcher):
    jvm_side = _jvm_side_daemon(started.socket_path, launcher, PYTHONWARNINGS="ignore")
    port = _port(jvm_side)
    assert started.release() is False
    assert _listening_pid(port) == jvm_side.pid  # the interpreter, run in the launcher's place
    assert jvm_side.stdin is not None
    jvm_side.stdin.close()
    jvm_side.wait(WAIT_S)
    assert jvm_side.stderr is not None
    assert "start-up variables differ: PYTHONWARNINGS" in jvm_side.stderr.read().decode()


def test_a_launcher_without_a_prestarted_daemon_runs_it_itself(tmp_path, launcher):
    jvm_side = _jvm_side_daemon(str(tmp_path / "gone"), launcher)
    port = _port(jvm_side)
    assert _listening_pid(port) == jvm_side.pid
    assert jvm_side.stdin is not None
    jvm_side.stdin.close()
    jvm_side.wait(WAIT_S)


def test_the_launchers_script_is_written_once_per_interpreter_and_text(tmp_path, launcher):
    with open(launcher) as f:
        first = f.readline()
    assert first == f"#!{sys.executable} -IS\n"
    assert os.access(launcher, os.X_OK)
    assert prestart.launcher_script(str(tmp_path / "cache")) == launcher
    assert os.listdir(tmp_path / "cache") == [os.path.basename(launcher)]


def test_a_launchers_request_gets_the_path_and_arguments_the_daemon_would_have(tmp_path):
    from sweepq.pipeline import daemon

    own = ["/driver/dir", "/driver/extra", "/usr/lib/python3.11", "/venv/site-packages"]
    request = {"executable": sys.executable, "path": None, "env": {"PYTHONPATH": "/spark/pyspark.zip::rel"}}
    request.update(args=["x"], cwd=str(tmp_path))
    got = prestart.as_started(request, own, "/driver/extra")
    cwd = str(tmp_path)
    assert got["path"] == [cwd, "/spark/pyspark.zip", cwd, f"{cwd}/rel", "/usr/lib/python3.11", "/venv/site-packages"]
    assert got["argv"] == [os.path.abspath(daemon.__file__), "x"]
    sent = {**request, "path": ["/a"], "argv": ["/b"]}
    assert prestart.as_started(sent, own, "") == sent  # the interpreter's own, as it sent it


def test_one_not_claimed_ends_when_released(started):
    assert started.release() is False
    assert started.proc.returncode == 0
    assert not os.path.exists(started.directory)
    assert started.release() is False  # again: nothing more


def test_off_with_the_variable_or_another_workers_interpreter(monkeypatch):
    monkeypatch.setattr(prestart, "_current", None)
    assert prestart.start({**os.environ, "SWEEPQ_PIPELINE_PRESTART": "0"}) is None
    assert prestart.start({**os.environ, "PYSPARK_PYTHON": "/usr/bin/other-python"}) is None
    assert prestart._current is None


def test_mismatch_names_what_differs():
    import numba  # noqa: F401  (the packages the daemon loads, loaded here too)
    import py4j  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401

    env = {k: v for k, v in os.environ.items()}
    same = {"executable": sys.executable, "path": sys.path, "env": env}
    assert prestart.mismatch(same) is None
    assert "interpreter" in (prestart.mismatch({**same, "executable": "/usr/bin/other"}) or "")
    no_pyspark = [p for p in sys.path if "site-packages" not in p]
    assert "on the daemon's path" in (prestart.mismatch({**same, "path": no_pyspark}) or "")
    assert "NUMBA_OPT" in (prestart.mismatch({**same, "env": {**env, "NUMBA_OPT": "0"}}) or "")
    assert prestart.mismatch({**same, "env": {**env, "SPARK_REUSE_WORKER": "1"}}) is None  # read later


SESSION = r"""
import json, os
import psutil
from sweepq.pipeline import prestart, stages
from sweepq.pipeline.session import spark_session
spark = spark_session("local[2]")
tracker = spark.sparkContext.statusTracker()
start_jobs = [str(tracker.getJobInfo(j).status) for j in tracker.getJobIdsForGroup(None)]
stages.warm_up_workers(spark)
pid = prestart._current.proc.pid
claimed = prestart.release()
parents = spark.sparkContext.parallelize(range(2), 2).map(lambda _: os.getppid()).collect()
spark.stop()
prestart._current.proc.wait(120)
# The stand-in (the JVM's child) ends once it sees the daemon end: wait for that, bounded.
python = [p for p in psutil.Process().children(recursive=True) if p.name().startswith("python")]
_, alive = psutil.wait_procs(python, timeout=120)
print(json.dumps({"pid": pid, "claimed": claimed, "parents": parents, "start_jobs": start_jobs,
                  "python_exec": spark.sparkContext.pythonExec, "pyspark_python": os.environ["PYSPARK_PYTHON"],
                  "env_left": prestart.ENV in os.environ, "alive": [p.pid for p in alive]}))
"""


def test_a_local_session_forks_its_workers_from_the_prestarted_daemon_and_stops_it():
    pytest.importorskip("pyspark")
    out = subprocess.run([sys.executable, "-c", SESSION], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["claimed"] is True
    assert set(doc["parents"]) == {doc["pid"]}
    assert doc["start_jobs"] == ["SUCCEEDED"]  # the start's own first job (session.py warm_up), done
    assert doc["env_left"] is False
    assert os.path.basename(doc["python_exec"]).startswith("python-daemon-")  # the launcher started it
    assert doc["pyspark_python"] == sys.executable  # later sessions of the driver: the interpreter
    assert doc["alive"] == []  # no Python process left once the session stopped


def test_the_reports_warm_up_draws_the_charts_and_leaves_no_figure_open():
    """pipeline/report.py warm_up runs on a driver thread while Spark starts: it draws the
    report's charts once (matplotlib's first-chart costs) and keeps nothing."""
    import matplotlib

    from sweepq.pipeline import report

    report.warm_up()
    import matplotlib.pyplot as plt

    assert matplotlib.get_backend().lower() == "agg"
    assert plt.get_fignums() == []


def test_only_a_driver_that_starts_a_local_jvm_prestarts_the_daemon():
    from sweepq.pipeline.session import prestarts

    assert prestarts("local[*]", submitted=False, jvm_up=False)
    assert not prestarts("local[*]", submitted=True, jvm_up=False)  # spark-submit's JVM is up
    assert not prestarts("local[2]", submitted=False, jvm_up=True)  # this process's JVM is up
    assert not prestarts("spark://127.0.0.1:7077", submitted=False, jvm_up=False)  # executors elsewhere
    assert not prestarts(None, submitted=True, jvm_up=False)


def test_the_start_runs_a_first_job_where_it_prestarts_unless_told_not_to(monkeypatch):
    from sweepq.pipeline.session import first_job_warms

    assert first_job_warms("local[*]", submitted=False, jvm_up=False)
    assert not first_job_warms("local[*]", submitted=True, jvm_up=False)
    assert not first_job_warms("spark://127.0.0.1:7077", submitted=False, jvm_up=False)
    monkeypatch.setenv("SWEEPQ_PIPELINE_FIRST_JOB", "0")
    assert not first_job_warms("local[*]", submitted=False, jvm_up=False)


def test_a_session_without_sql_makes_the_jvms_sparksession_only_when_asked():
    """pipeline/session.py ContextSession: its SparkContext at once; Spark SQL's session made
    once, by the builder, at the first use of anything else, and stopped in its place."""
    from sweepq.pipeline.session import ContextSession

    calls: list[str] = []

    class Stoppable:
        def __init__(self, name: str) -> None:
            self.name = name
            self.read = f"{name}.read"

        def stop(self) -> None:
            calls.append(f"stop {self.name}")

    class Builder:
        def getOrCreate(self):
            calls.append("getOrCreate")
            return Stoppable("session")

    sc = Stoppable("context")
    s = ContextSession(sc, Builder())
    assert s.sparkContext is sc and calls == []
    s.stop()
    assert calls == ["stop context"]  # no session was made: the context stops
    calls.clear()
    s = ContextSession(sc, Builder())
    assert s.read == "session.read" and s.read == "session.read"
    s.stop()
    assert calls == ["getOrCreate", "stop session"]  # made once; the session stops (its context with it)
