"""``sweepq plan`` as a user runs it (each case a subprocess): the table, plan.json and plan.png,
progress on stderr, a goal met or not, the traces a user has, and every mistake as one line on
stderr with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper.plan import Setting
from sweepq.sweeper.plan_run import run_one
from sweepq.sweeper.traces import generate, write
from sweepq.sweeper.user_traces import read_any

GRID = "interval=1,5;factor=1,2,4"


def sweepq(*argv, cwd):
    return subprocess.run(
        [sys.executable, "-m", "sweepq.cli", *map(str, argv)], capture_output=True, text=True, cwd=cwd, timeout=600
    )


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    write(generate("slow-drain", seconds=120, rate=200, queues=2, seed=5), d / "t.parquet")
    return d


def test_table_json_plot_and_progress(where):
    p = sweepq("plan", "t.parquet", "--grid", GRID, "--out", "out", "--workers", "2", cwd=where)
    assert p.returncode == 0, p.stderr
    assert "[6/6]" in p.stderr  # each setting reported as it ends (the seed's default is one)
    assert "seed default" in p.stdout and " d " in p.stdout and "on the frontier" in p.stdout
    doc = json.loads((where / "out" / "plan.json").read_text())
    assert len(doc["settings"]) == 6 and doc["frontier"] and doc["chosen"] is None
    assert doc["settings"][doc["default"]]["label"] == "seed default"
    png = (where / "out" / "plan.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_a_goal_names_the_cheapest_or_says_none(where):
    p = sweepq("plan", "t.parquet", "--grid", GRID, "--out", "g", "--max-memory", "1GB", "--json", "--quiet", cwd=where)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    doc = json.loads(p.stdout)
    # everything meets a 1 GB goal: the cheapest is the least disk traffic of all
    least = min(doc["settings"], key=lambda s: (s["disk_bytes"], s["peak_memory_bytes"]))
    assert doc["settings"][doc["chosen"]]["disk_bytes"] == least["disk_bytes"]
    p = sweepq("plan", "t.parquet", "--grid", GRID, "--out", "g", "--max-read-back", "0%", "--quiet", cwd=where)
    assert p.returncode == 0 and "cheapest meeting the goal" in p.stdout, p.stderr
    p = sweepq("plan", "t.parquet", "--grid", GRID, "--out", "g", "--max-memory", "10B", "--quiet", cwd=where)
    assert p.returncode == 1 and p.stderr.strip().startswith("no setting of the grid meets the goal"), p.stderr


def test_grid_file(where):
    (where / "grid.json").write_text('{"factor": [1, 2], "extra": "0:10:5"}')
    p = sweepq("plan", "t.parquet", "--grid-file", "grid.json", "--out", "f", "--json", "--quiet", cwd=where)
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)["settings"]) == 6  # the default is one of the six


@pytest.mark.parametrize(
    "argv,words",
    [
        (["missing.parquet"], ["TRACE", "does not exist"]),
        (["t.parquet", "--grid", "speed=1"], ["--grid", "unknown grid axis 'speed'"]),
        (["t.parquet", "--grid", "factor=4:1"], ["--grid", "lo <= hi"]),
        (["t.parquet", "--grid-file", "nope.txt"], ["--grid-file", "nope.txt"]),
        (["t.parquet", "--max-memory", "lots"], ["--max-memory", "not a size"]),
        (["t.parquet", "--max-read-back", "x%"], ["--max-read-back", "percentage"]),
        (["t.parquet", "--workers", "0"], ["--workers", ">= 1"]),
        (["t.parquet", "--out", "/nonexistent/dir/out"], ["--out", "does not exist"]),
        (["bad.csv"], ["TRACE", "time"]),
    ],
)
def test_mistakes_are_one_line(where, argv, words):
    (where / "bad.csv").write_text("when,queue,op\n0,A,put\n")
    p = sweepq("plan", *argv, cwd=where)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


# -- traces a user has --------------------------------------------------------------------------


def test_a_log_of_time_queue_size_op_plans_as_the_same_trace(tmp_path):
    t = generate("bursty", seconds=30, rate=50, queues=2, seed=2)
    write(t, tmp_path / "native.parquet")
    cols = t.columns()
    lines = ["time,queue,size,op"] + [
        f"{us / 1e6:.6f},{q},{b},{o.upper()}"
        for us, q, b, o in zip(cols["time_us"], cols["queue"], cols["bytes"], cols["op"], strict=True)
    ]
    (tmp_path / "log.csv").write_text("\n".join(lines) + "\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table(
            {
                "time": pa.array(cols["time_us"].astype("datetime64[us]")),  # a timestamp column
                "queue": pa.array(list(cols["queue"])),
                "bytes": pa.array(cols["bytes"]),
                "event": pa.array(list(cols["op"])),
            }
        ),
        tmp_path / "log.parquet",
    )
    want = run_one(read_any(tmp_path / "native.parquet"), Setting(interval=1.0), HEAD_LEN)
    assert want.msgs_swept > 0
    for name in ("log.csv", "log.parquet"):
        got = run_one(read_any(tmp_path / name), Setting(interval=1.0), HEAD_LEN)
        assert got == want, name


def test_a_log_missing_a_column_is_named(tmp_path):
    from sweepq.sweeper.traces import TraceError

    (tmp_path / "log.csv").write_text("time,queue,op\n0,A,put\n")
    with pytest.raises(TraceError, match="size column"):
        read_any(tmp_path / "log.csv")


def test_the_engines_recording_plans_offline(tmp_path):
    from sweepq.engine import GMO, MD, OO, QueueManager, SweeperSettings
    from sweepq.sweeper import ManualClock

    clock = ManualClock()
    with QueueManager(clock=clock, sweeping=SweeperSettings(run=False, trace_path=str(tmp_path / "run.parquet"))) as qm:
        qm.define_queue("ORDERS")
        h = qm.connect().open("ORDERS", OO.OUTPUT | OO.INPUT_SHARED)
        for i in range(300):
            h.put(b"x" * 200, MD(priority=i % 3))
            clock.advance(0.01)
            if i % 3 == 0:
                h.get(GMO.NO_WAIT)
    p = sweepq("plan", "run.parquet", "--grid", "interval=0.5,1", "--out", "rec", "--json", "--quiet", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["events"] == 400 and doc["queues"] == 1
    assert max(s["msgs_swept"] for s in doc["settings"]) > 0
