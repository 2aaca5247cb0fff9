"""The driver of the kill -9 harness: starts a worker (bench/crash/worker.py), kills it
with SIGKILL at a moment chosen from ``random.Random(seed)`` (after a delay, during start-up
and recovery, right after the worker logs a commit, a sweep or an unsweep, or at an exact
point inside the worker), restarts it on the same directory, repeats, and finally opens the
directory itself and drains every queue, then judges (bench/crash/verdict.py).

Everything random comes from ``random.Random`` seeded from the run's seed, so a seed replays
the same plan (the same workload and kill choices; the instants of timed kills vary with the
machine). The verdict prints the seed.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from sweepq.bench.children import interrupts_held

from ..harness_sizes import CRASH_KILLS as DEFAULT_KILLS
from ..harness_sizes import CRASH_QUICK_KILLS as QUICK_KILLS  # noqa: F401  (driver.QUICK_KILLS, as before)
from .verdict import Verdict, judge, parse_logs, read_run_logs
from .worker import DEFAULT_INTERVAL, SELF_POINTS, drain

# Log lines the driver can kill right after (the worker logs them as the thing begins).
MARKERS = {"commit": "C+", "sweep": "Wwrite", "unsweep": "U<"}


@dataclass
class KillPlan:
    """How one worker run ends: ``kind`` is ``delay`` (SIGKILL ``delay`` s after the worker is
    ready), ``open`` (``delay`` s after it was started: lands in start-up or recovery),
    ``marker`` (right after its ``k``-th log line ``marker``, ``delay`` s later), ``self``
    (the worker kills itself at the ``k``-th pass of ``point``) or ``clean`` (no kill: the
    worker runs its units of work and closes, as the corruption trial needs)."""

    kind: str
    delay: float = 0.0
    marker: str = ""
    point: str = ""
    k: int = 1

    def describe(self) -> str:
        if self.kind == "self":
            return f"self at {self.point} #{self.k}"
        if self.kind == "marker":
            return f"after {self.marker} #{self.k} +{self.delay * 1000:.1f} ms"
        return f"{self.kind} {self.delay:.3f} s"


def choose_plan(rng: random.Random, quick: bool) -> KillPlan:
    """One kill plan: a third timed at random, the rest aimed at commits, sweeps and unsweeps."""
    r = rng.random()
    span = 0.6 if quick else 2.0
    if r < 0.3:
        return KillPlan("delay", delay=rng.uniform(0.0, span))
    if r < 0.4:
        return KillPlan("open", delay=rng.uniform(0.05, 0.6))
    if r < 0.65:
        what = rng.choice(sorted(MARKERS))
        return KillPlan("marker", marker=MARKERS[what], k=rng.randint(1, 30), delay=rng.choice((0, 0, 0.0005, 0.002)))
    return KillPlan("self", point=rng.choice(SELF_POINTS), k=rng.randint(1, 20))


class Tail:
    """Follows a log file as the worker appends to it: ready or not, and counts of each event."""

    def __init__(self, path: str):
        self.path = path
        self.offset = 0
        self.partial = b""
        self.ready = False
        self.counts: Counter[str] = Counter()

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            op = line.split(b" ", 1)[0].decode()
            if op == "R":
                self.ready = True
            elif self.ready:
                self.counts[op] += 1


def run_worker_once(
    store_dir: str,
    log_path: str,
    seed: int,
    run: int,
    plan: KillPlan,
    sync: str = "commit",
    interval: float = DEFAULT_INTERVAL,
    fallback: float = 1.5,
    ready_timeout: float = 60.0,
    max_ops: int = 0,
    fill_only: bool = False,
) -> tuple[int, str]:
    """Start one worker, end it as ``plan`` says (SIGKILL at the latest ``fallback`` s after it
    is ready), and return (its exit status, a harness problem or ""). A plan of kind ``clean``
    lets it run ``max_ops`` units of work and close."""
    cmd = [sys.executable, "-m", "sweepq.bench.crash", "worker", "--data-dir", store_dir, "--log", log_path]
    cmd += ["--seed", str(seed), "--run", str(run), "--sync", sync, "--interval", str(interval)]
    if plan.kind == "self":
        cmd += ["--kill-at", f"{plan.point}:{plan.k}"]
    if max_ops:
        cmd += ["--max-ops", str(max_ops)]
    if fill_only:
        cmd.append("--fill-only")
    expected = 0 if plan.kind == "clean" else -signal.SIGKILL
    err_path = log_path[:-4] + ".err"
    started: list[subprocess.Popen] = []
    problem = ""
    ready_at = None
    try:
        proc = start_child(cmd, err_path, started)
        tail = Tail(log_path)
        t0 = time.monotonic()
        while proc.poll() is None:
            now = time.monotonic()
            tail.poll()
            if tail.ready and ready_at is None:
                ready_at = now
            if plan.kind == "open" and now - t0 >= plan.delay:
                break
            if ready_at is None:
                if now - t0 > ready_timeout:
                    problem = f"not ready {ready_timeout:.0f} s after start"
                    break
                time.sleep(0.002)
                continue
            if plan.kind == "clean":
                if now - ready_at > ready_timeout:
                    problem = f"still running {ready_timeout:.0f} s after it was ready"
                    break
                time.sleep(0.01)
                continue
            if now - ready_at >= fallback and plan.kind in ("self", "marker"):
                break  # the point was not reached in time: a timed kill instead
            if plan.kind == "delay" and now - ready_at >= plan.delay:
                break
            if plan.kind == "marker" and tail.counts[plan.marker] >= plan.k:
                if plan.delay:
                    time.sleep(plan.delay)
                break
            time.sleep(0.0005 if plan.kind == "marker" else 0.002)
    finally:  # the planned kill, or an interrupted driver: never leave a worker behind
        kill_children(started)
    code = proc.returncode
    if code != expected and not problem:
        with open(err_path, "rb") as f:
            text = f.read().decode(errors="replace").strip().splitlines()
        problem = f"exited with status {code}: " + (text[-1] if text else "no error output")
    return code, problem


def start_child(cmd: list[str], err_path: str, started: list[subprocess.Popen]) -> subprocess.Popen:
    """Start a harness child (a worker or a server) in its own session, so that Ctrl-C in the
    terminal reaches only the driver, with its stderr appended to ``err_path``. The child is
    in ``started`` before an interrupt can arrive (interrupts are held while it starts), so
    the caller's ``finally: kill_children(started)`` never leaves one running."""
    with open(err_path, "ab") as err, interrupts_held():
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        started.append(proc)
    return proc


def kill_children(started: list[subprocess.Popen]) -> None:
    """SIGKILL every child in ``started`` that still runs, and reap them all."""
    for proc in started:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def run_crashtest(
    work_dir: str,
    kills: int = DEFAULT_KILLS,
    seed: int = 1,
    sync: str = "commit",
    interval: float = DEFAULT_INTERVAL,
    quick: bool = False,
    progress: Callable[[int, KillPlan, str], None] | None = None,
) -> Verdict:
    """The harness: ``kills`` worker runs, each SIGKILLed as :func:`choose_plan` says, on the
    store ``work_dir/store`` (logs in ``work_dir/logs``), then the final drain, then the
    verdict. ``progress(i, plan, problem)`` is called after each kill."""
    rng = random.Random(seed)
    store_dir = os.path.join(work_dir, "store")
    log_dir = os.path.join(work_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    t0 = time.monotonic()
    problems = []
    for i in range(1, kills + 1):
        plan = choose_plan(rng, quick)
        log_path = os.path.join(log_dir, f"run-{i:05d}.log")
        _, problem = run_worker_once(store_dir, log_path, seed, i, plan, sync, interval, fallback=0.8 if quick else 1.5)
        if problem:
            problems.append(f"run {i} ({plan.describe()}): {problem}")
        if progress is not None:
            progress(i, plan, problem)
    why = drain(store_dir, os.path.join(log_dir, "drain.log"), sync)
    verdict = judge(parse_logs(read_run_logs(log_dir)))
    verdict.seed, verdict.kills, verdict.seconds = seed, kills, time.monotonic() - t0
    if why:
        verdict.violations["final open failed"].append(why)
    verdict.violations["worker failed"].extend(problems)
    return verdict
