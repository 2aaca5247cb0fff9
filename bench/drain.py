"""Draining a fully swept queue against draining the same queue from memory, and how often
the read-ahead had the next blob decoded in time. The baseline is measured in the same run
(interleaved rounds, best of each): the machines are shared and noisy.
"""

from __future__ import annotations

import gc
import time

from sweepq.engine import OO, QueueManager, SweeperSettings

IO = OO.OUTPUT | OO.INPUT_SHARED


def drain_rates(messages: int = 200_000, size: int = 100, rounds: int = 3) -> dict:
    """Drain a fully swept queue with gets, against draining the same messages from memory
    (interleaved rounds, best of each); read-ahead hits over the blob boundaries crossed."""
    payloads = [bytes([i & 0xFF]) * size for i in range(1024)]
    best = {"memory": float("inf"), "swept": float("inf")}
    hits = misses = blobs = 0
    for _ in range(rounds):
        for kind in ("memory", "swept"):
            with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
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
