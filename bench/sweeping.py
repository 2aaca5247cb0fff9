"""Sweeper benchmarks (issue 3), each a ratio against a baseline measured in the same run.

* ``rates``: sweep and unsweep MB/s against the raw limit on the same bytes: the blob
  store alone compressing and writing them (sweep), reading and decompressing them
  (unsweep).
* ``lock``: how long one sweep holds the queue lock, for runs of 1k, 10k and 100k messages.
* ``drain``: p99 get latency while draining across many blob boundaries, against gets on
  a queue that was never swept.
* ``concurrent``: put+get pairs on one queue while another queue is being swept, against
  the same pairs with no sweep running.
* ``swept_memory``: bytes a swept message costs the process.

Every function returns a dict of figures; ``sweepq bench sweep`` prints them.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import tracemalloc
from collections.abc import Callable

from sweepq.engine import OO, DurabilitySettings, QueueManager, SweeperSettings
from sweepq.engine.matching import Match
from sweepq.sweeper import ManualClock
from sweepq.sweeper.runs import record_ends
from sweepq.sweeper.stats import percentile

IO = OO.OUTPUT | OO.INPUT_SHARED


def _payload(size: int, i: int) -> bytes:
    """JSON-like text with some entropy: compressible the way real messages are."""
    head = b'{"order":%d,"customer":"c%05d","status":"%s","note":"' % (i, (i * 7919) % 100_000, b"paid")
    body = (os.urandom(max(0, size // 8)).hex().encode() + b"x" * size)[: max(0, size - len(head) - 2)]
    return head + body + b'"}'


def _manager(**store) -> QueueManager:
    return QueueManager(
        "BENCH",
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options=store or None),
    )


def _fill(qm: QueueManager, name: str, n: int, size: int) -> None:
    payloads = [_payload(size, i) for i in range(min(n, 4096))]
    with qm.connect() as c:
        h = c.open(name, IO)
        for i in range(n):
            h.put(payloads[i % len(payloads)])


def rates(messages: int = 100_000, size: int = 100, freeze: bool = False) -> dict:
    """Sweep and unsweep throughput (MB/s of records) against the store alone, same bytes.

    ``freeze`` runs ``gc.freeze()`` after set-up, as a long-running service does after its
    start-up: CPython's full collections then stop rescanning every module object each
    time the engine creates nodes, which is most of what an unsweep costs beyond I/O."""
    qm = _manager()
    try:
        qm.define_queue("R")
        _fill(qm, "R", messages, size)
        q = qm.internal.queue("R")
        raw = q.mem_bytes
        with q.mutex:  # every message of lane 0, in memory: none is swept yet
            records = [rec for _, rec in q.lanes.hits(q.lanes[0], Match(q.ident), {})]
        ids = [r[5:13] * 3 for r in records]
        qm.blob_store()  # opened before timing: the baseline's store is open too
        if freeze:
            gc.collect()
            gc.freeze()
        t0 = time.perf_counter()
        qm.sweeper.run_once()
        sweep_s = time.perf_counter() - t0
        swept = q.tier.counters.bytes_swept_raw
        blobs = [b.blob_id for b in q.lanes[0].chain]
        # Unsweep: bring every blob back, under the lock, as gets do.
        t0 = time.perf_counter()
        q.sweep.unsweep_all()
        unsweep_s = time.perf_counter() - t0
        # The raw limit on the same bytes: the store alone, same blob bounds, same records.
        store = qm.blob_store()
        t0 = time.perf_counter()
        infos = store.write_pending(
            b"RAW/0", records, ids, record_ends(records, store.max_blob_bytes, store.max_blob_records), b"RAW"
        )
        raw_write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for info in infos:
            store.read(info.blob_id)
        raw_read_s = time.perf_counter() - t0
        assert len(blobs) > 0
        return {
            "messages": messages,
            "size": size,
            "bytes": raw,
            "blobs": len(blobs),
            "sweep_MBps": swept / sweep_s / 1e6,
            "raw_write_MBps": raw / raw_write_s / 1e6,
            "sweep_ratio": (swept / sweep_s) / (raw / raw_write_s),
            "unsweep_MBps": swept / unsweep_s / 1e6,
            "raw_read_MBps": raw / raw_read_s / 1e6,
            "unsweep_ratio": (swept / unsweep_s) / (raw / raw_read_s),
            "compression_ratio": q.tier.counters.bytes_swept_raw / max(1, q.tier.counters.bytes_swept_compressed),
            "gc_frozen": freeze,
        }
    finally:
        if freeze:
            gc.unfreeze()
        qm.close()


def lock_holds(run_sizes: tuple[int, ...] = (1_000, 10_000, 100_000), size: int = 100) -> dict:
    """p99 and longest hold of the queue lock by one sweep, per run size, and the p99 of the
    blob holds' own CPU time (the wall figure less what the scheduler took from the sweeper)."""
    out = {}
    for n in run_sizes:
        qm = _manager()
        try:
            qm.define_queue("L")
            _fill(qm, "L", n + 5, size)
            q = qm.internal.queue("L")
            c = q.tier.counters
            c.lock_seconds.clear()
            c.lock_cpu_seconds.clear()
            qm.sweeper.run_once()
            holds = sorted(c.lock_seconds)
            out[n] = {
                "holds": len(holds),
                "p99_ms": percentile(holds, 0.99) * 1e3,
                "max_ms": holds[-1] * 1e3,
                "total_ms": sum(holds) * 1e3,
                "cpu_p99_ms": percentile(c.lock_cpu_seconds, 0.99) * 1e3,  # without preemption
            }
        finally:
            qm.close()
    return out


def _latencies(get: Callable[[], object], n: int) -> list[int]:
    lat = []
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        get()
        lat.append(clock() - t0)
    lat.sort()
    return lat


def drain_latency(messages: int = 100_000, per_blob: int = 500, size: int = 100) -> dict:
    """p99 get latency draining a swept queue (read-ahead on) against a never-swept one."""
    qm = _manager(max_blob_records=per_blob)
    try:
        qm.define_queue("STEADY")
        qm.define_queue("SWEPT")
        _fill(qm, "STEADY", messages, size)
        _fill(qm, "SWEPT", messages, size)
        qm.sweeper.run_once()
        q = qm.internal.queue("SWEPT")
        blobs = sum(len(lane.chain) for lane in q.lanes)
        steady = qm.connect().open("STEADY", IO)
        swept = qm.connect().open("SWEPT", IO)
        gc.collect()
        a = _latencies(steady.get, messages)
        b = _latencies(swept.get, messages)

        def p(lat, q):
            return lat[min(len(lat) - 1, int(q * len(lat)))] / 1e3

        return {
            "messages": messages,
            "blob_boundaries": blobs,
            "steady_p50_us": p(a, 0.5),
            "steady_p99_us": p(a, 0.99),
            "drain_p50_us": p(b, 0.5),
            "drain_p99_us": p(b, 0.99),
            "drain_max_us": b[-1] / 1e3,
            "p99_ratio": p(b, 0.99) / p(a, 0.99),
            "readahead_hits": q.tier.counters.readahead_hits,
            "readahead_misses": q.tier.counters.readahead_misses,
        }
    finally:
        qm.close()


def concurrent(pairs: int = 200_000, backlog: int = 400_000, size: int = 100, rounds: int = 3) -> dict:
    """Put+get pairs on one queue while the sweeper sweeps a backlog on another, against the
    same pairs with the same backlog in memory and no sweep running (so both sides pay the
    same garbage-collection cost for the backlog's nodes)."""
    qm = _manager()
    try:
        qm.define_queue("APP")
        app = qm.connect().open("APP", IO)
        payload = _payload(size, 0)

        def run_pairs() -> float:
            put, get = app.put, app.get
            t0 = time.perf_counter()
            for _ in range(pairs):
                put(payload)
                get()
            return pairs / (time.perf_counter() - t0)

        quiet, busy, swept, sweep_seconds = [], [], 0, []
        for r in range(rounds):
            name = f"BIG{r}"
            qm.define_queue(name)
            _fill(qm, name, backlog, size)
            quiet.append(run_pairs())  # backlog in memory, no sweep
            done = threading.Event()
            result = {}

            def sweep(name=name, done=done, result=result):
                t0 = time.perf_counter()
                result["r"] = qm.sweeper.run_once(paced=True)  # as the background thread runs it
                result["seconds"] = time.perf_counter() - t0
                done.set()

            t = threading.Thread(target=sweep)
            t.start()
            rate = run_pairs()
            finished_during = done.is_set()
            t.join()
            swept += result["r"].decision(name).msgs_swept
            busy.append((rate, finished_during))
            sweep_seconds.append(result["seconds"])
            qm.delete_queue(name, purge=True)
        best_quiet = max(quiet)
        best_busy = max(r for r, _ in busy)
        return {
            "pairs": pairs,
            "backlog_swept_per_round": swept // rounds,
            "quiet_pairs_per_s": best_quiet,
            "during_sweep_pairs_per_s": best_busy,
            "ratio": best_busy / best_quiet,
            "sweep_outlasted_pairs": all(not f for _, f in busy),
            "paced_sweep_seconds": min(sweep_seconds),
            "duty": qm.sweeper.duty,
        }
    finally:
        qm.close()


def swept_memory(messages: int = 1_000_000, size: int = 100, chunk: int = 20_000, correl: bool = False) -> dict:
    """Bytes per swept message held by the Python process: tracemalloc counts the engine's
    index arrays and blob objects exactly (the resident set is no use here: the allocator
    keeps and reuses what the swept nodes freed). ``correl`` gives every message a CorrelId,
    so the blobs carry that index array too."""
    from sweepq.engine import MD

    # At least one measured chunk after the warm one, each well above the 5 the sweep keeps.
    chunk = max(50, min(chunk, messages // 2))
    messages = max(messages, 2 * chunk)
    qm = _manager()
    try:
        qm.define_queue("M")
        h = qm.connect().open("M", IO)
        payload = _payload(size, 1)
        md = MD(correl_id=b"reply-to-17") if correl else None
        qm.blob_store()  # open RocksDB before the baseline
        for _ in range(chunk):  # one chunk first, so the allocator's working set is warm
            h.put(payload, md)
        qm.sweeper.run_once()
        gc.collect()
        tracemalloc.start()
        base_py = tracemalloc.get_traced_memory()[0]
        base_swept = qm.stats()["M"].msgs_swept
        done = chunk
        while done < messages:
            for _ in range(chunk):
                h.put(payload, md)
            done += chunk
            qm.sweeper.run_once()  # sweeps all but the buffer of 5
        gc.collect()
        py = tracemalloc.get_traced_memory()[0] - base_py
        tracemalloc.stop()
        stats = qm.stats()["M"]
        measured = stats.msgs_swept - base_swept
        return {
            "messages": messages,
            "measured": measured,
            "swept": stats.msgs_swept,
            "in_memory": stats.msgs_in_memory,
            "bytes_per_swept_msg": py / measured if measured else float("nan"),
            "with_correl_ids": correl,
        }
    finally:
        qm.close()
