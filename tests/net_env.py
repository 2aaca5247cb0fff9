"""Helpers for the client-connection tests: a served queue manager in this process, and
``sweepq serve`` in a process of its own (for kill -9 and restarts)."""

from __future__ import annotations

import contextlib
import os
import re
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


_LISTENING = re.compile(r"sweepq serve: listening on (.*)\n")


class ServeProcess:
    """``sweepq serve --data-dir DIR`` in a subprocess (its stderr kept in DIR.log)."""

    def __init__(self, data_dir: str, *extra: str):
        self.data_dir = data_dir
        self.extra = extra
        self.url = "unix://" + os.path.join(data_dir, "sweepq.sock")
        self.log_path = data_dir.rstrip("/") + ".log"
        self.proc: subprocess.Popen | None = None
        self.urls: list[str] = []  # where this run listens: its "listening on" line

    def start(self, timeout: float = 60.0) -> ServeProcess:
        """Start the server and return once it answers and its "listening on" line is whole in
        the log: its threads answer a connection before the main thread prints where it
        listens, so a client's answer alone does not mean the line (and a TCP port in it) is
        there yet. A restart's line is the one after the log's end at its start."""
        with open(self.log_path, "ab") as log:
            begin = log.tell()
            cmd = [sys.executable, "-m", "sweepq", "serve", "--data-dir", self.data_dir, *self.extra]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        answered = False
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"sweepq serve exited {self.proc.returncode}: {self.log()}")
            if not answered:
                try:
                    net_client.connect(self.url, timeout=1.0).disconnect()
                    answered = True
                except MQError:
                    pass
            line = _LISTENING.search(self._log_from(begin)) if answered else None
            if line is not None:
                self.urls = line.group(1).split(" and ")
                return self
            time.sleep(0.05)  # a poll of the process's state, bounded by ``timeout``
        raise AssertionError(f"sweepq serve did not answer and say where it listens in {timeout} s: {self.log()}")

    def url_of(self, scheme: str) -> str:
        """The URL this run listens on with ``scheme`` (``tcp``, ``tls``; ``--tcp HOST:0`` picks
        a free port, which only the log tells)."""
        return next(u for u in self.urls if u.startswith(scheme + "://"))

    def log(self) -> str:
        return self._log_from(0)

    def _log_from(self, offset: int) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

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
