"""The kill -9 harness in server mode (issue 19 §6): SIGKILL of a *server* under load.

The pieces are bench/crash/'s — the worker's workload and event log, the final drain and
the verdict — put together another way: a **server** process (``python -m
sweepq.bench.crash_server serve``) opens the harness's data directory (the sweeper at a short
interval, small blobs: :func:`crash_worker.open_manager`) and serves it on a Unix socket; a **client
worker** process runs :class:`crash_worker.Worker` through a client connection and logs every call
as a worker does. The driver SIGKILLs the server at a moment chosen from the seed (at random,
or right after the worker logs its k-th commit), the worker's next call meets
MQRC_CONNECTION_BROKEN (2009) and the worker exits at once without logging that call's
return (its outcome is unknown to it, exactly as when a worker is killed), the driver
restarts the server on the same directory (recovery), starts the next worker, and so on.
Finally the directory is drained in process and judged from the logs: every put the client
saw committed is consumed exactly once, nothing backed out comes back, order per producer
and priority holds.

``sweepq crashtest-server --kills N [--quick] [--seed S]`` (cli/harness.py); the CI form is
tests/test_net_crash.py.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from .crash import driver as crash_driver
from .crash import verdict as crash_verdict
from .crash import worker as crash_worker
from .harness_sizes import SERVER_QUICK_KILLS as QUICK_KILLS  # noqa: F401  (the name it always had)

SOCKET = "server.sock"


# -- the server and the client worker ---------------------------------------------------------


def serve_main(args: argparse.Namespace) -> int:
    """The server process: open the store, define the harness queues, serve until killed."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # for sigwait, in every thread
    qm = crash_worker.open_manager(args.data_dir, args.sync, args.interval)
    crash_worker.define_queues(qm)
    qm.serve(os.path.join(args.data_dir, SOCKET))
    signal.sigwait([signal.SIGTERM, signal.SIGINT])
    qm.close()
    return 0


class _DieOnBroken:
    """Wraps a client object (connection, handle, remote queue manager): when a call meets
    MQRC_CONNECTION_BROKEN the process ends at once, so the call is logged as started and
    never as returned, which is what it is (the server died during it or before it)."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name: str):
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def call(*args, **kwargs):
            from sweepq.engine import MQError, Reason

            try:
                out = value(*args, **kwargs)
            except MQError as e:
                if e.reason in (Reason.CONNECTION_BROKEN, Reason.HOST_NOT_AVAILABLE):
                    os._exit(3)
                raise
            return _DieOnBroken(out) if hasattr(out, "_call") or hasattr(out, "_hid") else out

        return call


def client_main(args: argparse.Namespace) -> int:
    """The client worker: crash_worker.Worker's workload through a client connection."""
    from sweepq.net import RemoteQueueManager

    log = crash_worker.EventLog(args.log)
    rng = random.Random(f"{args.seed}:{args.run}")
    log.emit("S", args.run, os.getpid(), args.seed)
    try:
        remote = RemoteQueueManager("unix://" + os.path.join(args.data_dir, SOCKET), client=f"crash run {args.run}")
    except Exception:
        os._exit(3)
    w = crash_worker.Worker(_DieOnBroken(remote), log, args.run, rng, None)
    log.emit("R", f"sync={args.sync}", "hooks=off")
    w.run_forever(args.max_ops)
    return 0


# -- the driver ---------------------------------------------------------------------------------


def choose_plan(rng: random.Random, quick: bool) -> crash_driver.KillPlan:
    """When the server dies: at random while the worker runs, or right after its k-th commit."""
    if rng.random() < 0.5:
        return crash_driver.KillPlan("delay", delay=rng.uniform(0.0, 0.5 if quick else 1.5))
    return crash_driver.KillPlan("marker", marker="C+", k=rng.randint(1, 30), delay=rng.choice((0, 0.0005, 0.002)))


def _wait_for_socket(path: str, proc: subprocess.Popen, timeout: float) -> str:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"the server exited with status {proc.returncode} before it listened"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return ""
        except OSError:
            time.sleep(0.01)
        finally:
            s.close()
    return f"the server did not listen within {timeout:.0f} s"


def run_once(
    store: str, log_dir: str, seed: int, run: int, plan: crash_driver.KillPlan, sync: str, interval: float
) -> str:
    """One server life: start it, start a client worker, SIGKILL the server as ``plan`` says,
    let the worker end. Returns a harness problem or ""."""
    py = sys.executable
    common = ["--data-dir", store, "--sync", sync, "--interval", str(interval)]
    started: list[subprocess.Popen] = []
    try:
        server = crash_driver.start_child(
            [py, "-m", "sweepq.bench.crash_server", "serve", *common], os.path.join(log_dir, "server.err"), started
        )
        problem = _wait_for_socket(os.path.join(store, SOCKET), server, 60.0)
        if problem:
            return problem
        log = os.path.join(log_dir, f"run-{run:05d}.log")
        worker = crash_driver.start_child(
            [
                py,
                "-m",
                "sweepq.bench.crash_server",
                "client",
                *common,
                "--log",
                log,
                "--seed",
                str(seed),
                "--run",
                str(run),
            ],
            log[:-4] + ".err",
            started,
        )
        tail, ready_at = crash_driver.Tail(log), None
        while worker.poll() is None:
            tail.poll()
            now = time.monotonic()
            if tail.ready and ready_at is None:
                ready_at = now
            if ready_at is not None:
                if plan.kind == "delay" and now - ready_at >= plan.delay:
                    break
                if plan.kind == "marker" and (tail.counts[plan.marker] >= plan.k or now - ready_at > 1.5):
                    time.sleep(plan.delay)
                    break
            time.sleep(0.0005)
        crash_driver.kill_children(started[:1])  # the server: the worker meets 2009 and exits by itself
        worker.wait(30)
        return "" if worker.returncode in (3, -signal.SIGKILL) else f"the worker exited with {worker.returncode}"
    except subprocess.TimeoutExpired:
        return "the worker did not end after the server died"
    finally:
        crash_driver.kill_children(started)


def run_server_crashtest(
    work_dir: str,
    kills: int,
    seed: int = 1,
    sync: str = "commit",
    interval: float = crash_worker.DEFAULT_INTERVAL,
    quick: bool = False,
    progress: Callable[[int, crash_driver.KillPlan, str], None] | None = None,
) -> crash_verdict.Verdict:
    """``kills`` server lives ended by SIGKILL, then the final drain and bench/crash/verdict.py's verdict."""
    rng = random.Random(seed)
    store, log_dir = os.path.join(work_dir, "store"), os.path.join(work_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    t0 = time.monotonic()
    problems = []
    for i in range(1, kills + 1):
        plan = choose_plan(rng, quick)
        problem = run_once(store, log_dir, seed, i, plan, sync, interval)
        if problem:
            problems.append(f"run {i} ({plan.describe()}): {problem}")
        if progress is not None:
            progress(i, plan, problem)
    why = crash_worker.drain(store, os.path.join(log_dir, "drain.log"), sync)
    verdict = crash_verdict.judge(crash_verdict.parse_logs(crash_verdict.read_run_logs(log_dir)))
    verdict.seed, verdict.kills, verdict.seconds = seed, kills, time.monotonic() - t0
    if why:
        verdict.violations["final open failed"].append(why)
    verdict.violations["worker failed"].extend(problems)
    return verdict


def main(argv: Sequence[str] | None = None) -> int:
    from sweepq.pipeline.args import HelpFormatter, Parser, number

    p = Parser(prog="python -m sweepq.bench.crash_server", formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="what", required=True, parser_class=Parser)
    for name, func in (("serve", serve_main), ("client", client_main)):
        s = sub.add_parser(name)
        s.add_argument("--data-dir", required=True)
        s.add_argument("--sync", default="commit")
        s.add_argument("--interval", type=float, default=crash_worker.DEFAULT_INTERVAL)
        if name == "client":
            s.add_argument("--log", required=True)
            s.add_argument("--seed", type=number(int, 0), default=1)
            s.add_argument("--run", type=number(int, 1), default=1)
            s.add_argument("--max-ops", type=number(int, 0), default=0)
        s.set_defaults(func=func)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
