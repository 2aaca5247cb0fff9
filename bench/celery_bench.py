"""``sweepq bench celery``: Celery through sweepq against Celery through Redis, in one run.

* **Tasks per second**: a real ``celery worker`` on each broker, in the configuration
  docs/celery.md gives for throughput (``WORKER``: ``-P threads -c 4 --prefetch-multiplier
  50 -l WARNING``), the bench process publishing ``celery_tasks`` tasks with one producer;
  the figure is from the first publish to the last task run (each task appends one byte to a
  file; the run is over when the file holds them all). Results are ignored (no result
  backend), so the broker alone is measured.
* **A backlog with no worker**: ``celery_backlog`` tasks published, then each broker's peak
  resident memory (the kernel's high-water mark, VmHWM): ``sweepq serve --memory-budget``
  (100 MB by default) against ``redis-server``, which holds the whole backlog in RAM. Then a
  worker (``WORKER``) started on the backlog drains it: tasks per second from its start to
  the last task run, and the broker's peak resident memory through the drain too.

The brokers: ``sweepq serve`` on a temporary data directory's Unix socket, and
``redis-server`` on a Unix socket with no persistence (bench/clients.py), skipped with a
notice when absent. Messages are transient (``task_default_delivery_mode="transient"``) on
both, as Redis without persistence keeps them: on sweepq they are non-persistent messages,
swept to disk under the budget. The same Celery, Kombu and task messages on both.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from .children import bound

#: The worker's options: docs/celery.md's configuration for throughput (no log line per task).
WORKER = ("-P", "threads", "-c", "4", "--prefetch-multiplier", "50", "-l", "WARNING")

APP = """
import os
import sys
from celery import Celery
from celery.signals import worker_ready

app = Celery("benchtasks", broker=os.environ["SQ_BROKER"])
app.conf.update(task_ignore_result=True, worker_hijack_root_logger=False)
DONE = os.environ["SQ_DONE"]


@worker_ready.connect
def _say_ready(sender, **_):
    print(f"{sender.hostname} ready.", file=sys.stderr, flush=True)  # at any log level


@app.task(ignore_result=True)
def tick(i):
    fd = os.open(DONE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)
"""


def _app(broker: str):
    from celery import Celery

    app = Celery("bench", broker=broker, set_as_current=False)
    app.conf.update(task_ignore_result=True, task_default_delivery_mode="transient")
    return app


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory so far, bytes (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class _Worker:
    """``celery worker`` on ``broker`` in a session of its own, ended with its children."""

    def __init__(self, where: str, broker: str):
        self.done = os.path.join(where, "done")
        open(self.done, "wb").close()
        with open(os.path.join(where, "benchtasks.py"), "w") as f:
            f.write(APP)
        env = {**os.environ, "SQ_BROKER": broker, "SQ_DONE": self.done, "PYTHONPATH": where}
        self.log = os.path.join(where, "worker.log")
        cmd = ["timeout", "-s", "KILL", "3600", sys.executable, "-m", "celery", "-A", "benchtasks", "worker"]
        cmd += [*WORKER, "--without-gossip", "--without-mingle", "--without-heartbeat"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(bound(cmd), cwd=where, env=env, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 180
        while " ready." not in self._text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"celery worker did not start: {self._text()[-2000:]}")
            time.sleep(0.05)

    def _text(self) -> str:
        with open(self.log, errors="replace") as f:
            return f.read()

    def ran(self) -> int:
        return os.path.getsize(self.done)

    def wait_for(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.ran() < n:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery worker ran {self.ran()} of {n} tasks: {self._text()[-2000:]}")
            time.sleep(0.005)

    def close(self) -> None:
        import signal

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(60)


def _publish(app, n: int, step=None) -> float:
    """Publish ``n`` tasks with one producer; the seconds it took."""
    t0 = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for i in range(n):
            app.send_task("benchtasks.tick", args=[i], producer=producer)
            if step is not None and i % 100_000 == 99_999:
                step()
    return time.perf_counter() - t0


def _tasks_per_second(broker: str, n: int) -> float:
    with tempfile.TemporaryDirectory(prefix="sqc") as where:
        worker = _Worker(where, broker)
        try:
            app = _app(broker)
            _publish(app, 200)  # warm: connections, declarations
            worker.wait_for(200, 300)
            t0 = time.perf_counter()
            _publish(app, n)
            worker.wait_for(200 + n, 3600)
            return n / (time.perf_counter() - t0)
        finally:
            worker.close()


class _Sweepq:
    """``sweepq serve --memory-budget B`` on a temporary data directory (its Unix socket)."""

    def __init__(self, where: str, budget: int):
        from sweepq.net import client

        os.makedirs(where, exist_ok=True)
        self.data = os.path.join(where, "q")
        sock = os.path.join(self.data, "sweepq.sock")
        self.broker = "sweepq+unix://" + sock
        cmd = [sys.executable, "-m", "sweepq", "serve", "--data-dir", self.data, "--memory-budget", f"{budget}B"]
        self.log = self.data.rstrip("/") + ".log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(bound(cmd), stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                client.connect("unix://" + sock, timeout=1.0).disconnect()
                return
            except Exception:
                time.sleep(0.05)
        self.close()
        with open(self.log, errors="replace") as f:
            raise RuntimeError(f"sweepq serve did not start: {f.read()[-2000:]}")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(120)


def celery(o, report, step) -> dict:
    """The scenario (see the module docstring)."""
    try:
        import celery as _celery  # noqa: F401
    except ImportError:
        report.notice("celery: skipped, Celery is not installed (pip install 'sweepq[celery]')")
        return {"skipped": "celery is not installed"}
    with tempfile.TemporaryDirectory(prefix="sqb") as where:
        rates = _measure(where, "rates", o, report, lambda brokers: _rates(o, brokers, step))
        backlog = _measure(where, "backlog", o, None, lambda brokers: _backlog(o, brokers, step))
    peaks, seconds, drains, drain_peaks = backlog
    worker = "a worker " + " ".join(WORKER)
    base = rates.get("redis")
    for name, rate in rates.items():
        ratio = "" if base is None else f"{rate / base:.2f} x Redis"
        report.row("celery", f"tasks/s, {o.celery_tasks:,} tasks, {worker} ({name})", f"{rate:,.0f}/s", ratio)
    for name, peak in peaks.items():
        budget = f" under --memory-budget {o.celery_budget / 1e6:.0f}MB" if name == "sweepq" else ""
        ratio = "" if "redis" not in peaks else f"{peak / peaks['redis']:.2f} x redis-server"
        what = f"peak RSS of the broker, {o.celery_backlog:,} tasks waiting{budget} ({name}; published at "
        report.row("celery", what + f"{o.celery_backlog / seconds[name]:,.0f}/s)", f"{peak / 2**20:,.0f} MiB", ratio)
    for name, rate in drains.items():
        ratio = "" if "redis" not in drains else f"{rate / drains['redis']:.2f} x Redis"
        what = f"tasks/s, the {o.celery_backlog:,} tasks' drain by {worker} ({name}; the broker's peak RSS "
        report.row("celery", what + f"through it {drain_peaks[name] / 2**20:,.0f} MiB)", f"{rate:,.0f}/s", ratio)
    return {
        "tasks_per_s": rates,
        "backlog_peak_rss": peaks,
        "backlog_publish_seconds": seconds,
        "backlog_drain_tasks_per_s": drains,
        "backlog_drain_peak_rss": drain_peaks,
    }


def _measure(where: str, what: str, o, report, run):
    """``run(brokers)`` on a fresh ``sweepq serve`` and, when there is one, a fresh
    ``redis-server`` (brokers: (name, broker URL, server pid)); both stopped however it ends."""
    from .clients import _Redis

    here = os.path.join(where, what)
    rd = _Redis(_mkdir(here))
    try:
        if report is not None:
            version = f"Redis {rd.version} (redis-server on a Unix socket, no persistence)"
            report.notice(f"celery: {rd.why or version}")
        sq = _Sweepq(os.path.join(here, "s"), o.celery_budget)
        try:
            brokers = [("sweepq", sq.broker, sq.proc.pid)]
            if rd.proc is not None:
                brokers.append(("redis", "redis+socket://" + rd.path, rd.proc.pid))
            return run(brokers)
        finally:
            sq.close()
    finally:
        rd.close()


def _mkdir(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    return path


def _rates(o, brokers, step) -> dict:
    rates = {}
    for name, broker, _ in brokers:
        rates[name] = _tasks_per_second(broker, o.celery_tasks)
        step()
    return rates


def _backlog(o, brokers, step) -> tuple[dict, dict, dict, dict]:
    """Each broker's peak resident memory once the backlog is published (a fresh broker each,
    so that its peak is the backlog's), the seconds the publishing took, the drain's tasks per
    second and the broker's peak resident memory through the drain."""
    peaks, seconds, drains, drain_peaks = {}, {}, {}, {}
    for name, broker, pid in brokers:
        seconds[name] = _publish(_app(broker), o.celery_backlog, step)
        peaks[name] = _peak_rss(pid)
        drains[name] = _drain(broker, o.celery_backlog)
        drain_peaks[name] = _peak_rss(pid)
        step()
    return peaks, seconds, drains, drain_peaks


def _drain(broker: str, n: int) -> float:
    """A worker started on ``n`` tasks waiting: tasks per second, from its start (the time it
    takes to start counts) to the last task run."""
    with tempfile.TemporaryDirectory(prefix="sqd") as where:
        t0 = time.perf_counter()
        worker = _Worker(where, broker)
        try:
            worker.wait_for(n, 3600)
            return n / (time.perf_counter() - t0)
        finally:
            worker.close()


def steps(o) -> int:
    return 4 + 2 * (o.celery_backlog // 100_000)
