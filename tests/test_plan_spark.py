"""``sweepq pipeline plan``: the plan's grid on Spark, settings x buckets of queues as the unit
of parallelism, gives exactly what the local ``sweepq plan`` gives for the same grid: on a
local[2] session, and (a long test) on a standalone cluster of this machine as a user submits
it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper.plan import parse_grid
from sweepq.sweeper.plan_run import run_grid
from sweepq.sweeper.traces import generate, write

# the budget's settings run on every queue at once; the others per bucket of queues
GRID = "interval=1,5;factor=1,2;memory_budget=0,300KB;policy=page,fail;rule=seed,adaptive"


@pytest.fixture(scope="session")
def spark():
    from sweepq.pipeline.session import spark_session

    s = spark_session("local[2]", app="sweepq-tests", shuffle_partitions=4)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    t = generate("slow-drain", seconds=60, rate=120, queues=7, size=150, priorities=True, seed=8)
    path = tmp_path_factory.mktemp("plan-spark") / "t.parquet"
    write(t, path)
    return path, t


def test_the_grid_on_spark_equals_the_local_plan(spark, trace_file):
    from sweepq.pipeline.plan import plan_on_spark, units

    path, trace = trace_file
    settings = parse_grid(GRID)
    assert len(units(settings, 3)) > len(settings)  # queues split the settings without a budget
    local = run_grid(trace, settings, HEAD_LEN, workers=2)
    assert any(o.msgs_swept for o in local) and any(o.blocked_or_refused for o in local)
    assert plan_on_spark(spark, str(path), settings, HEAD_LEN, buckets=3) == local


def test_pipeline_plan_mistakes_are_one_line(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "sweepq", "pipeline", "plan", "missing.parquet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("sweepq pipeline plan: error: argument TRACE"), p.stderr


@pytest.mark.long  # a master, two workers and a job: a minute and more of both cores
@pytest.mark.timeout(1200)
def test_pipeline_plan_on_the_standalone_cluster_equals_sweepq_plan(trace_file, tmp_path):
    from sweepq.pipeline.cluster import LocalCluster

    path, _ = trace_file
    grid = "factor=1,2,4;memory_budget=0,300KB"
    local = subprocess.run(
        [sys.executable, "-m", "sweepq", "plan", str(path), "--grid", grid, "--out", "l", "--json", "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert local.returncode == 0, local.stderr
    c = LocalCluster(workers=2, cores=1, memory="1g")
    try:
        c.start()
        cmd = [sys.executable, "-m", "sweepq", "pipeline", "plan", str(path), "--grid", grid, "--out", "s"]
        cmd += ["--master", c.url, "--buckets", "4", "--json", "--quiet"]
        run = subprocess.run(cmd, env=c.env, capture_output=True, text=True, cwd=tmp_path, timeout=900)
    finally:
        c.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    a, b = json.loads(run.stdout), json.loads(local.stdout)
    assert a["settings"] == b["settings"] and a["frontier"] == b["frontier"] and a["default"] == b["default"]
