"""Helpers for the Celery tests (tests/test_celery.py): an app module written into a
directory, and real ``celery worker`` processes started on it, each in a session of its own,
bounded by ``timeout`` and killed with their children at the end."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import wait_until

APP = '''
import os
import sys
import time
from pathlib import Path

from celery import Celery
from celery.signals import worker_ready

app = Celery("tasks", broker=os.environ["SQ_BROKER"], backend="rpc://")
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
MARKS = Path(os.environ["SQ_MARKS"])


@worker_ready.connect
def _say_ready(sender, **_):
    """" ready." in the log at any level (Celery's own line is INFO's): the tests wait for it."""
    print(f"{sender.hostname} ready.", file=sys.stderr, flush=True)


@app.task
def add(x, y):
    return x + y


@app.task
def record(tag):
    with open(MARKS / "order.log", "a") as f:
        f.write(f"{tag}\\n")
    return tag


@app.task
def hold(name):
    """Say it started (by whom), then wait for the test's release (bounded)."""
    (MARKS / f"{name}.{os.getpid()}.started").touch()
    deadline = time.monotonic() + 120
    while not (MARKS / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return os.getpid()


@app.task(ignore_result=True)
def mark(i):
    """Append ``i`` (4 bytes) to marks/ran: every run counted, with no result backend."""
    fd = os.open(MARKS / "ran", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, i.to_bytes(4, "little"))
    finally:
        os.close(fd)
'''


class CeleryHome:
    """A directory holding tasks.py and the tasks' marks, with the environment to run it."""

    def __init__(self, root: Path, broker: str):
        self.root = root
        self.marks = root / "marks"
        self.marks.mkdir(parents=True, exist_ok=True)
        (root / "tasks.py").write_text(APP)
        self.env = {**os.environ, "SQ_BROKER": broker, "SQ_MARKS": str(self.marks), "PYTHONPATH": str(root)}
        self.workers: list[Worker] = []

    def app(self):
        """The app in this process (the test is the client)."""
        os.environ["SQ_BROKER"], os.environ["SQ_MARKS"] = self.env["SQ_BROKER"], self.env["SQ_MARKS"]
        sys.path.insert(0, str(self.root))
        sys.modules.pop("tasks", None)
        import tasks  # the module written above

        return tasks

    def celery(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """``celery -A tasks ARGS`` to its end."""
        cmd = [sys.executable, "-m", "celery", "-A", "tasks", *args]
        return subprocess.run(cmd, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout)

    def worker(self, name: str, *options: str, lifetime: int = 900) -> Worker:
        """``celery worker`` with ``options``, killed after ``lifetime`` seconds at most."""
        w = Worker(self, name, options, lifetime)
        self.workers.append(w)
        return w.start()

    def close(self) -> None:
        for w in self.workers:
            w.kill()


class Worker:
    """``celery worker`` in a session of its own (its pool's children too), at most
    ``lifetime`` seconds."""

    def __init__(self, home: CeleryHome, name: str, options: tuple[str, ...], lifetime: int = 900):
        self.home, self.name, self.options, self.lifetime = home, name, options, lifetime
        self.log = home.root / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> Worker:
        cmd = ["timeout", "-s", "KILL", str(self.lifetime), sys.executable, "-m", "celery", "-A", "tasks", "worker"]
        cmd += ["-n", f"{self.name}@%h", "-l", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"]
        cmd += list(self.options)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=self.home.root, env=self.home.env, stdout=log, stderr=log, start_new_session=True
            )
        wait_until(lambda: " ready." in self.text() or self.proc.poll() is not None, timeout=timeout)
        assert self.proc.poll() is None, f"celery worker {self.name} exited: {self.text()[-3000:]}"
        return self

    @property
    def pid(self) -> int:
        """The worker's own process (timeout's child)."""
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        return int(out.stdout.split()[0])

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, timeout: float = 60) -> None:
        """A warm shutdown (SIGTERM to the worker), then its end."""
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self.kill()
