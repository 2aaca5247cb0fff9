"""Benchmarks of the core: collection pauses while a backlog builds, and draining a swept
queue against draining the same queue from memory. Each figure comes with its baseline,
measured in the same run (the machines are shared and noisy).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time

from sweepq.engine import OO, QueueManager

IO = OO.OUTPUT | OO.INPUT_SHARED

_GC_CHILD = r"""
import gc, json, os, queue, sys, time
kind, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
payloads = [os.urandom(size) for _ in range(1024)]
pauses = []
start = {}
def cb(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        start["t"] = time.perf_counter()
    else:
        pauses.append(time.perf_counter() - start.pop("t"))
if kind == "sweepq":
    from sweepq.engine import OO, QueueManager
    qm = QueueManager(sweeper=False); qm.define_queue("G")
    put = qm.connect().open("G", OO.OUTPUT).put
else:
    put = queue.Queue().put
gc.collect()
gc.callbacks.append(cb)
t0 = time.perf_counter()
for i in range(n):
    put(payloads[i & 1023])
elapsed = time.perf_counter() - t0
gc.callbacks.remove(cb)
print(json.dumps({"full_collections": len(pauses), "max_pause_s": max(pauses, default=0.0), "put_s": elapsed}))
"""


def gc_pauses(messages: int = 2_000_000, size: int = 100) -> dict:
    """Largest full-collection pause while ``messages`` are put on one queue, for sweepq and
    for ``queue.Queue`` (the baseline), each in a fresh subprocess."""
    import json

    out = {"messages": messages, "size": size}
    for kind in ("queue.Queue", "sweepq"):
        run = subprocess.run(
            [sys.executable, "-c", _GC_CHILD, kind, str(messages), str(size)],
            check=True,
            capture_output=True,
            text=True,
        )
        out[kind] = json.loads(run.stdout)
    return out


def drain_rates(messages: int = 200_000, size: int = 100, rounds: int = 3) -> dict:
    """Drain a fully swept queue with gets, against draining the same messages from memory
    (interleaved rounds, best of each); read-ahead hits over the blob boundaries crossed."""
    payloads = [bytes([i & 0xFF]) * size for i in range(1024)]
    best = {"memory": float("inf"), "swept": float("inf")}
    hits = misses = blobs = 0
    for _ in range(rounds):
        for kind in ("memory", "swept"):
            with QueueManager(sweeper=False) as qm:
                qm.define_queue("D")
                h = qm.connect().open("D", IO)
                h.put_many([payloads[i & 1023] for i in range(messages)])
                if kind == "swept":
                    qm.sweeper.run_once()
                    qm.sweeper.run_once()  # x = 0: all but the 5-message buffer
                    blobs = qm.stats()["D"].blobs
                get = h.get
                gc.collect()
                t0 = time.perf_counter()
                for _ in range(messages):
                    get()
                best[kind] = min(best[kind], time.perf_counter() - t0)
                if kind == "swept":
                    s = qm.stats()["D"]
                    hits, misses = s.readahead_hits, s.readahead_misses
    return {
        "messages": messages,
        "size": size,
        "blobs": blobs,
        "memory_msgs_per_s": messages / best["memory"],
        "swept_msgs_per_s": messages / best["swept"],
        "ratio": best["memory"] / best["swept"],
        "readahead_hits": hits,
        "readahead_misses": misses,
        "readahead_hit_share": hits / max(1, hits + misses),
    }


def batch_pairs(messages: int = 200_000, size: int = 1024, batch: int = 100, rounds: int = 5) -> dict:
    """put_many + get_many per message against queue.Queue put+get pairs (same run)."""
    from .timing import interleaved
    from .workloads import pairs_queue_queue

    payload = bytes(size)
    qm = QueueManager(sweeper=False)
    try:
        qm.define_queue("B")
        h = qm.connect().open("B", IO)
        chunk = [payload] * batch

        def run_batches() -> None:
            put_many, get_many = h.put_many, h.get_many
            for _ in range(messages // batch):
                put_many(chunk)
                get_many(batch)

        r = interleaved(
            {"queue.Queue": lambda: pairs_queue_queue(messages, payload), "sweepq batch": run_batches},
            messages,
            rounds=rounds,
        )
    finally:
        qm.close()
    return {
        "messages": messages,
        "batch": batch,
        "queue_queue_per_s": r["queue.Queue"].rate,
        "batch_per_s": r["sweepq batch"].rate,
        "ratio": r["sweepq batch"].rate / r["queue.Queue"].rate,
    }
