"""The restart harness (issue 32): ``Queue(url=)`` producers and consumers, each thread with
a queue object of its own, through kill -9s of ``sweepq serve`` on one data directory.

Each producer puts numbered items for as long as the run lasts and counts a put done when
it returns; nothing retries by hand (the objects reconnect on their own: queues/site.py,
net/once.py). Each consumer gets and marks done. After the last kill the producers stop and
the consumers drain. The verdict: items put and never got (lost), got twice (duplicated),
errors any object raised, and per kill how many seconds after the server answered again
every object had done a call again (``recovered_s``). At-least-once, an item a consumer
held (got, not yet done) when the server died was backed out by it and is delivered again,
as MQ does: those count as ``duplicated`` too, and the run passes with at most one per
consumer per kill (``redelivery_bound``); at-most-once, with none.

``python -m sweepq.bench.reconnect --kills 10 --delivery at-least-once`` prints it as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import queue as stdqueue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from sweepq import Queue
from sweepq.engine import MQError
from sweepq.net import client

from .children import bound


class Served:
    """``sweepq serve --data-dir DIR`` in a process of its own, killed and started again."""

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self.url = "unix://" + os.path.join(data_dir, "sweepq.sock")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> float:
        """Start it; the monotonic time it first answered."""
        cmd = [sys.executable, "-m", "sweepq", "serve", "--data-dir", self.data_dir]
        self.proc = subprocess.Popen(
            bound(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                client.connect(self.url, timeout=1.0).disconnect()
                return time.monotonic()
            except MQError:
                time.sleep(0.01)
        raise RuntimeError(f"sweepq serve did not answer within {timeout} s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@dataclass
class Worker:
    """One thread's queue object and what it did."""

    name: str
    last_call: float = 0.0  # monotonic time its last call returned
    done: list = field(default_factory=list)
    errors: list = field(default_factory=list)


def run(kills: int = 10, delivery: str = "at-most-once", producers: int = 2, consumers: int = 2, seed: int = 1) -> dict:
    """The harness (module docstring); returns its verdict."""
    rnd = random.Random(seed)
    served = Served(os.path.join(tempfile.mkdtemp(prefix="sqr"), "d"))
    served.start()
    stop_putting, stop_getting = threading.Event(), threading.Event()
    workers: list[Worker] = []

    def produce(w: Worker, q: Queue) -> None:
        i = 0
        while not stop_putting.is_set():
            try:
                q.put((w.name, i))
                w.done.append((w.name, i))
                i += 1
            except Exception as e:  # the verdict counts it: none is expected
                w.errors.append(repr(e))
            w.last_call = time.monotonic()

    def consume(w: Worker, q: Queue) -> None:
        while True:
            try:
                item = q.get(timeout=0.05)
            except stdqueue.Empty:
                w.last_call = time.monotonic()
                if stop_getting.is_set():
                    return
                continue
            except Exception as e:
                w.errors.append(repr(e))
                continue
            w.done.append(tuple(item))
            q.task_done()
            w.last_call = time.monotonic()

    threads = []
    queues = []
    for role, n, body in (("p", producers, produce), ("c", consumers, consume)):
        for k in range(n):
            w = Worker(f"{role}{k}")
            q: Queue = Queue(url=served.url, name="RESTART", delivery=delivery)
            workers.append(w)
            queues.append(q)
            threads.append(threading.Thread(target=body, args=(w, q), daemon=True))
    for t in threads:
        t.start()
    recovered = []
    try:
        for _ in range(kills):
            time.sleep(rnd.uniform(0.2, 0.6))
            served.kill()
            back = served.start()
            while min(w.last_call for w in workers) < back:
                time.sleep(0.005)
            recovered.append(round(max(w.last_call for w in workers) - back, 3))
        time.sleep(0.2)
        stop_putting.set()
        for t in threads[:producers]:
            t.join(120)
        put = [x for w in workers[:producers] for x in w.done]
        deadline = time.monotonic() + 120
        while sum(len(w.done) for w in workers[producers:]) < len(put) and time.monotonic() < deadline:
            time.sleep(0.01)
        stop_getting.set()
        for t in threads[producers:]:
            t.join(120)
    finally:
        for q in queues:
            q.close()
        served.kill()
    got = Counter(x for w in workers[producers:] for x in w.done)
    bound = kills * consumers if delivery == "at-least-once" else 0
    return {
        "delivery": delivery,
        "kills": kills,
        "put": len(put),
        "got": sum(got.values()),
        "lost": len(set(put) - set(got)),
        "duplicated": sum(n - 1 for n in got.values() if n > 1),
        "redelivery_bound": bound,
        "phantom": len(set(got) - set(put)),
        "errors": [e for w in workers for e in w.errors],
        "recovered_s": recovered,
        "recovered_max_s": max(recovered, default=0.0),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sweepq.bench.reconnect", description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--delivery", choices=("at-most-once", "at-least-once"), default="at-most-once")
    p.add_argument("--producers", type=int, default=2)
    p.add_argument("--consumers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    verdict = run(a.kills, a.delivery, a.producers, a.consumers, a.seed)
    print(json.dumps(verdict))
    too_many = verdict["duplicated"] > verdict["redelivery_bound"]
    bad = verdict["lost"] or too_many or verdict["phantom"] or verdict["errors"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
