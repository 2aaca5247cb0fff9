"""``sweepq bench queue``: sweepq.Queue and sweepq.AsyncQueue beside queue.Queue, asyncio.Queue,
the persistent queues and a backlog of ten times a memory budget, in one quick run, as
printed JSON and as the table (never a speed asserted: only that each figure is there, and
that every backlog came back whole and in order)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# The module's bench run (bounded at 600 s itself) is timed with the first test that uses it.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def figures():
    out = subprocess.run(
        [sys.executable, "-m", "sweepq", "bench", "queue", "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_queue_scenario_reports_every_part(figures):
    f = figures["figures"]["queue"]
    for what in f["in_memory"].values():
        assert what["queue.Queue"] > 0 and what["sweepq.Queue"] > 0 and what["ratio"] > 0
    rates = f["persistent"]["per_s"]
    assert any(name.startswith("sweepq.Queue(path=)") for name in rates)
    assert any(name.startswith("persist-queue SQLiteQueue") for name in rates)
    assert any(name.startswith("diskcache.Deque") for name in rates)
    assert all(f["persistent"][k] > 0 for k in ("vs_sqlite", "vs_diskcache", "vs_sqlite_off"))
    backlog = f["backlog"]
    assert backlog["items"] == int(2e6 * 10) // 1024  # --quick: ten times a 2 MB budget
    for name in ("sweepq.Queue(memory_budget=)", "sweepq.Queue(path=, memory_budget=)", "queue.Queue"):
        fig = backlog[name]
        assert fig["in_order"] and fig["items"] == backlog["items"], (name, fig)
        assert fig["peak"] >= fig["before"] > 0
    assert f["asyncio"]["ratio"] > 0


def test_the_table_says_each_goal_met_or_missed(figures):
    rows = [r for r in figures["rows"] if r[0] == "queue"]
    goals = [r for r in rows if r[1].startswith("goal:")]
    assert len(goals) == 3 and all(r[3] in ("met", "**missed**") for r in goals)
    off = [r[1] for r in goals if "synchronous=OFF" in r[1]]
    assert off == ["goal: path= >= 5 x SQLiteQueue, synchronous=OFF (issue 31)"]
    assert sum("goal <=" in r[3] for r in rows) == 3  # the backlog's RSS bound, for each sweepq form


def test_a_budget_without_its_unit_is_one_line_and_exit_2():
    out = subprocess.run(
        [sys.executable, "-m", "sweepq", "bench", "queue", "--queue-budget", "50"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "did you mean 50 MB" in out.stderr and len(out.stderr.splitlines()) == 1
