"""``sweepq demo --clients``: the demo's producers and its consumer as processes of their own.

A run's process (bench/demo.py ``run_child``) owns the queue manager, as a server would:
it serves it on a Unix socket (``qm.serve``) and samples its memory, while every producer
and the consumer run in a process of their own, connected as clients
(``sweepq.client.connect``). They run the very workload of the threads form
(``demo.Workload``), through a client connection instead of an in-process one, so the two
forms differ only in where the producers and the consumer live.

Each client process (``python -m sweepq.bench.demo_clients ROLE URL CONFIG T0 PARENT_PID
[PRODUCER COUNT]``) is tethered to the run's process (bench/children.py: it ends with it, or
on SIGTERM) and reports on stdout in JSON lines: ``{"put": n}`` / ``{"got": n}`` per batch,
``{"ready": true}`` (the consumer, once it listens for SIGUSR1), ``{"phase": ...}``, and
finally ``{"result": ...}`` (a producer: what it put per stream; the consumer: its delivery
checker's state and counts) or ``{"error": text}``. When every producer has ended, the run's
process tells the consumer to catch up with SIGUSR1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict

from .children import Children, tether
from .demo import DeliveryChecker, DemoConfig, Workload, _Shared

CLIENT_KIND = "client process"


class _Client:
    """One client process of a run, and a thread that reads its reports."""

    def __init__(self, children: Children, argv: list[str], label: str, on_line) -> None:
        self.label = label
        self.result: dict | None = None
        self.error = ""
        self.ready = threading.Event()
        self.proc = children.start(argv, CLIENT_KIND, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._err: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(on_line,), daemon=True),
            threading.Thread(target=lambda: self._err.extend(self.proc.stderr), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self, on_line) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "result" in msg:
                self.result = msg["result"]
            elif "error" in msg:
                self.error = msg["error"]
            elif "ready" in msg:
                self.ready.set()
            else:
                on_line(msg)
        self.ready.set()  # the process ended: nobody waits for it any more

    def wait(self) -> str:
        """Wait for the process to end; what went wrong ("" when it gave its result)."""
        rc = self.proc.wait()
        for t in self._threads:
            t.join()
        if rc == 0 and self.result is not None:
            return ""
        why = self.error or "".join(self._err[-5:]).strip() or "no result"
        return f"{self.label}: exit {rc}: {why}"


def in_processes(
    qm, cfg: DemoConfig, shared: _Shared, t0: float, checker: DeliveryChecker, stats: dict[str, int]
) -> tuple[dict, float]:
    """The producers and the consumer as client processes of ``qm`` (served here on a Unix
    socket for the run): (what was put per stream, the producers' time). Problems of a client
    go to ``shared.errors``; ``checker`` and ``stats`` take over the consumer's."""
    sock = os.path.join(tempfile.mkdtemp(prefix="clients-"), "demo.sock")  # in the run's store directory
    server = qm.serve(sock)
    children = Children()
    lock = threading.Lock()

    def count(msg: dict) -> None:
        with lock:
            shared.put += msg.get("put", 0)
            shared.got += msg.get("got", 0)
            shared.phase = msg.get("phase", shared.phase)

    common = [server.url, json.dumps(asdict(cfg)), repr(t0), str(os.getpid())]
    module = [sys.executable, "-m", "sweepq.bench.demo_clients"]
    try:
        producers = [
            _Client(children, [*module, "producer", *common, str(p), str(n)], f"producer {p}", count)
            for p, n in enumerate(cfg.per_producer())
        ]
        consumer = _Client(children, [*module, "consumer", *common], "consumer", count)
        shared.client_pids = [c.proc.pid for c in (*producers, consumer)]
        expected: dict[tuple[int, int, int], int] = {}
        for pr in producers:
            problem = pr.wait()
            if problem:
                shared.errors.append(problem)
                continue
            for p, q, prio, v in pr.result["put"]:
                expected[(p, q, prio)] = expected.get((p, q, prio), 0) + v
        fill_seconds = time.monotonic() - t0
        consumer.ready.wait()
        if consumer.proc.poll() is None:
            consumer.proc.send_signal(signal.SIGUSR1)  # every producer has ended: catch up
        problem = consumer.wait()
        if problem:
            shared.errors.append(problem)
        else:
            checker.absorb(consumer.result["checker"])
            for k, v in consumer.result["stats"].items():
                stats[k] += v
    finally:
        children.end()
        server.close()
    return expected, fill_seconds


# -- the client processes ---------------------------------------------------------------------


def _say(**msg: object) -> None:
    print(json.dumps(msg), flush=True)


def _producer(work: Workload, p: int, n: int) -> dict:
    mine = work.produce(p, n, lambda k: _say(put=k))
    return {"put": [[*k, v] for k, v in mine.items()]}


def _consumer(work: Workload) -> dict:
    done = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: done.set())
    _say(ready=True)
    checker = DeliveryChecker()
    stats = {"audit_put": 0, "get_backouts": 0}
    work.consume(done, checker, stats, lambda k: _say(got=k), lambda: _say(phase="catching up"))
    return {"checker": checker.state(), "stats": stats}


def main(argv: list[str]) -> int:
    role, url, config, t0, parent = argv[:5]
    tether(int(parent))
    from sweepq import client

    work = Workload(DemoConfig(**json.loads(config)), lambda: client.connect(url, client=f"demo {role}"), float(t0))
    try:
        result = _producer(work, int(argv[5]), int(argv[6])) if role == "producer" else _consumer(work)
    except Exception as e:
        _say(error=f"{type(e).__name__}: {e}")
        return 1
    _say(result=result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
