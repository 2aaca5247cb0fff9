"""Helpers for the client-connection tests: a served queue manager in this process, and
``sweepq serve`` in a process of its own (for kill -9 and restarts)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

from sweepq.engine import MQError, QueueManager, SweeperSettings
from sweepq.net import client as net_client


def short_dir() -> str:
    """A directory with a short path: a Unix socket's path holds about 100 bytes."""
    return tempfile.mkdtemp(prefix="sqn")


@contextlib.contextmanager
def served(**options):
    """(queue manager with queue Q, its server on a Unix socket); ``options`` go to serve()."""
    where = short_dir()
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        server = qm.serve(os.path.join(where, "s.sock"), **options)
        yield qm, server


class ServeProcess:
    """``sweepq serve --data-dir DIR`` in a subprocess (its stderr kept in DIR.log)."""

    def __init__(self, data_dir: str, *extra: str):
        self.data_dir = data_dir
        self.extra = extra
        self.url = "unix://" + os.path.join(data_dir, "sweepq.sock")
        self.log_path = data_dir.rstrip("/") + ".log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> ServeProcess:
        with open(self.log_path, "ab") as log:
            cmd = [sys.executable, "-m", "sweepq", "serve", "--data-dir", self.data_dir, *self.extra]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"sweepq serve exited {self.proc.returncode}: {self.log()}")
            try:
                net_client.connect(self.url, timeout=1.0).disconnect()
                return self
            except MQError:
                time.sleep(0.05)
        raise AssertionError(f"sweepq serve did not answer in {timeout} s: {self.log()}")

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def terminate(self, timeout: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()
