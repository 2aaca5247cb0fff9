"""Celery on sweepq with real ``celery worker`` processes (docs/celery.md): thousands of
tasks with results (Celery's ``rpc://`` result backend, over this same transport: no Redis);
``celery inspect ping``; a worker killed with SIGKILL mid-task and its task run again, once,
by another worker (``task_acks_late``); priorities; a backlog with no worker, then drained.

The broker is ``sweepq serve`` in a process of its own (a data directory, a Unix socket;
the transport reads the admin token from beside the socket). Workers run with
``--without-gossip --without-mingle --without-heartbeat`` (no events), each in a session of
its own under ``timeout``, killed with its children at the end of the test.
"""

from __future__ import annotations

import os
import random
import signal

import pytest

pytest.importorskip("kombu")  # at collection: before pytest imports the root's __init__.py (the root is a package)
pytest.importorskip("celery")

from celery_env import CeleryHome
from net_env import ServeProcess, short_dir

from sweepq.net import client

from helpers import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # real workers: minutes under load


@pytest.fixture
def home(tmp_path):
    data = os.path.join(short_dir(), "q")
    server = ServeProcess(data, "--memory-budget", "100MB").start()
    h = CeleryHome(tmp_path, "sweepq+" + server.url)
    h.server_url, h.server = server.url, server
    try:
        yield h
    finally:
        h.close()
        server.kill()


def _depth(home, queue: str = "celery") -> int:
    with client.connect(home.server_url) as conn:
        return conn.inquire_queue(queue).current_depth


def test_thousands_of_tasks_with_results_through_a_threaded_worker(home):
    tasks = home.app()
    home.worker("w1", "-P", "threads", "-c", "4")
    results = [tasks.add.delay(i, i) for i in range(2000)]
    assert [r.get(timeout=300) for r in results] == [2 * i for i in range(2000)]
    assert _depth(home) == 0


def test_celery_inspect_ping_answers_through_the_fanout_exchange(home):
    home.worker("w1", "-P", "solo")
    home.worker("w2", "-P", "solo")
    out = home.celery("inspect", "ping", "-t", "10")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("pong") == 2, out.stdout


def test_a_worker_killed_mid_task_has_its_task_run_again_once_by_another(home):
    tasks = home.app()
    first = home.worker("w1", "-P", "solo")
    result = tasks.hold.delay("job")
    wait_until(lambda: any(home.marks.glob("job.*.started")), timeout=120, what="the task's start")
    first_pid = first.pid
    assert [p.name for p in home.marks.glob("job.*.started")] == [f"job.{first_pid}.started"]
    os.killpg(first.proc.pid, signal.SIGKILL)  # mid-task: the ack (late) never comes
    first.proc.wait(30)
    second = home.worker("w2", "-P", "solo")
    second_pid = second.pid
    wait_until(lambda: (home.marks / f"job.{second_pid}.started").exists(), timeout=120, what="the rerun")
    (home.marks / "release").touch()
    assert result.get(timeout=120) == second_pid
    assert sorted(p.name for p in home.marks.glob("job.*.started")) == sorted(
        [f"job.{first_pid}.started", f"job.{second_pid}.started"]
    )
    wait_until(lambda: _depth(home) == 0, timeout=60, what="the ack")


def test_priorities_are_honoured_nine_first(home):
    tasks = home.app()
    priorities = [p for p in range(10) for _ in range(3)]
    random.Random(7).shuffle(priorities)
    results = [tasks.record.apply_async(args=[p], priority=p) for p in priorities]
    assert _depth(home) == len(priorities)
    home.worker("w1", "-P", "solo")
    for r in results:
        r.get(timeout=120)
    order = [int(line) for line in (home.marks / "order.log").read_text().split()]
    assert order == sorted(priorities, reverse=True)


def _peak_rss(pid: int, field: str = "VmHWM") -> int:
    """A process's resident memory, bytes: its peak so far (VmHWM) or now (VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def _publish(tasks, n: int, threads: int = 4) -> None:
    """``mark(0..n-1)`` published by ``threads`` producers at once (each its own connection),
    so that one's round trip to the broker overlaps another's work; transient messages, as
    docs/celery.md's backlog is (a persistent one waits for the disk at every put)."""
    import threading

    def part(lo: int, hi: int) -> None:
        with tasks.app.producer_or_acquire() as producer:
            for i in range(lo, hi):
                tasks.mark.apply_async(args=[i], producer=producer, delivery_mode=1)

    parts = [threading.Thread(target=part, args=(k * n // threads, (k + 1) * n // threads)) for k in range(threads)]
    for t in parts:
        t.start()
    for t in parts:
        t.join()


def _ran_once_each(home, n: int) -> bool:
    """Every task of ``mark(0..n-1)`` ran, and once: marks/ran holds each index once."""
    from array import array

    ran = array("I")
    ran.frombytes((home.marks / "ran").read_bytes())
    return len(ran) == n and sorted(ran) == list(range(n))


def _backlog_then_drain(home, n: int, drain_timeout: int) -> None:
    """``n`` tasks published with no worker, then drained by one worker in the configuration
    docs/celery.md gives for throughput; each ran exactly once (counted by the tasks, no
    results) and the broker's peak resident memory stayed within its budget's bound."""
    from sweepq.bench.demo import RESIDENT_TOLERANCE

    baseline = _peak_rss(home.server.proc.pid, "VmRSS")
    tasks = home.app()
    _publish(tasks, n)
    assert _depth(home) == n
    options = ("-P", "threads", "-c", "4", "--prefetch-multiplier", "50", "-l", "WARNING")
    worker = home.worker("w1", *options, lifetime=drain_timeout + 300)
    size = 4 * n
    ran = home.marks / "ran"
    wait_until(lambda: ran.exists() and ran.stat().st_size >= size, timeout=drain_timeout, what="the backlog's drain")
    wait_until(lambda: _depth(home) == 0, timeout=120, what="the last batch's commit")
    (stats,) = tasks.app.control.inspect(timeout=10).stats().values()
    assert stats["broker"]["transport"] == "sweepq"
    worker.stop()  # a warm shutdown: nothing after it runs again
    assert _ran_once_each(home, n)
    peak, budget = _peak_rss(home.server.proc.pid), 100_000_000
    assert peak <= RESIDENT_TOLERANCE * (budget + baseline), (peak / 2**20, baseline / 2**20)


def test_a_backlog_with_no_worker_then_drained(home):
    _backlog_then_drain(home, 5000, drain_timeout=600)


@pytest.mark.long
@pytest.mark.timeout(2400)
def test_a_backlog_of_a_million_tasks_then_drained(home):
    """Issue 33's backlog: 1,000,000 tasks waiting under a 100 MB budget, then drained by a
    real worker (docs/celery.md: minutes on the 2-core development machine)."""
    _backlog_then_drain(home, 1_000_000, drain_timeout=1800)
