"""Memory as the OS sees it: what a queued message costs, and whether a memory budget holds.

:func:`resident_bytes_per_message`: resident bytes per in-memory message beyond its
payload. Measured in a fresh subprocess so nothing else in the process moves the resident
set: the payloads are created first (they are the application's), then the baseline RSS is
read, then every payload is put; the growth divided by the count, less the payload length,
is what the queue costs per message.

:func:`budget_bound`: two producer threads put as fast as they can into a queue manager
with a memory budget, in a fresh subprocess, under one ``memory_policy``; the figures are
the peak resident memory (the kernel's high-water mark) against budget + baseline, and
what the budget counted, sampled without pause. ``python -m sweepq.bench.memory`` prints
them for every policy (docs/sweeper.md, "The memory budget").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import gc, json, os, sys
import psutil
from sweepq.engine import OO, QueueManager, SweeperSettings
n, size = int(sys.argv[1]), int(sys.argv[2])
payloads = [os.urandom(size) for _ in range(n)]
# No sweeper: on a loaded machine the loop outlasts its 5 s interval, a sweep moves part of
# the queue out, and the store's memory and the freed records raised the figure to 121-135 B.
qm = QueueManager(sweeping=SweeperSettings(run=False)); qm.define_queue("M")
h = qm.connect().open("M", OO.OUTPUT)
h.put(b"warm-up"); gc.collect()
proc = psutil.Process()
before = proc.memory_info().rss
for p in payloads:
    h.put(p)
gc.collect()
after = proc.memory_info().rss
print(json.dumps({"messages": n, "payload": size, "rss_growth": after - before}))
"""


def resident_bytes_per_message(messages: int = 1_000_000, payload: int = 100) -> dict:
    """Run the measurement in a subprocess; return its figures and the per-message overhead."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(messages), str(payload)],
        check=True,
        capture_output=True,
        text=True,
    )
    fig = json.loads(out.stdout)
    fig["bytes_per_message"] = fig["rss_growth"] / messages
    fig["overhead_per_message"] = fig["bytes_per_message"] - payload
    return fig


_BOUND_CHILD = r"""
import json, os, sys, threading
from sweepq.engine import OO, MemoryPolicy, MemorySettings, MQError, QueueManager, Reason
from sweepq.engine.budget import peak_resident_bytes, resident_bytes
from sweepq.sweeper import ManualClock
policy, counts = sys.argv[1], sys.argv[3]
budget, per_producer, size = int(sys.argv[2]), int(sys.argv[4]), int(sys.argv[5])
body = (os.urandom(max(1, size // 2)).hex().encode() * 2)[:size]  # compresses about 2:1
# The clock stands still: the sweeper acts when the budget's high mark wakes it, and a BLOCK
# put waits for room as long as it takes (no wall-clock interval decides anything).
qm = QueueManager(clock=ManualClock(), memory=MemorySettings(budget=budget, counts=counts))
# Counting what is held, the budget has no baseline: the resident memory at open stands for it.
baseline = qm.budget.baseline if counts == "resident" else resident_bytes()
for name in ("A", "B"):
    qm.define_queue(name, memory_policy=MemoryPolicy[policy], max_depth=100_000_000)
outcome = {"puts": 0, "refused": 0}
done = threading.Event()
errors = []

def produce(name):
    h = qm.connect().open(name, OO.OUTPUT)
    put = refused = 0
    try:
        while put * size < per_producer:
            try:
                h.put(body)
                put += 1
            except MQError as e:
                if e.reason != Reason.STORAGE_NOT_AVAILABLE:
                    raise
                refused += 1
    except BaseException as e:
        errors.append(repr(e))
    outcome["puts"] += put
    outcome["refused"] += refused

counted = []

def sample():
    while not done.is_set():
        counted.append(qm.memory_use().total)
        done.wait(0.001)

threads = [threading.Thread(target=produce, args=(n,)) for n in ("A", "B")]
sampler = threading.Thread(target=sample)
sampler.start()
for t in threads:
    t.start()
for t in threads:
    t.join()
done.set()
sampler.join()
print(json.dumps({
    **outcome, "errors": errors, "baseline": baseline,
    "peak_rss": peak_resident_bytes(),
    "peak_counted": max(counted, default=0), "samples": len(counted),
    "samples_over": sum(c > budget for c in counted), "budget_counts": dict(qm.budget.counts),
}))
qm.close()
"""

POLICIES = ("PAGE", "BLOCK", "FAIL")


def budget_bound(policy: str, budget: int, per_producer: int, counts: str = "resident", size: int = 1024) -> dict:
    """Two producers put ``per_producer`` bytes each, as fast as they can, in messages of
    ``size`` bytes, into a queue manager with a ``budget`` counting ``counts``, under
    ``policy`` (a MemoryPolicy name), in a fresh subprocess. Returns the peak resident memory
    and its ratio to budget + baseline (the baseline: the budget's own when it counts resident
    memory, else the resident memory at open), what the budget counted at most and how many
    samples were over it, the puts made and refused."""
    # One glibc arena, as docs/sweeper.md tells a process whose resident budget must hold
    # (engine/budget.py, one_arena: set before the process starts, or glibc ignores it).
    env = {**os.environ, "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "1")}
    out = subprocess.run(
        [sys.executable, "-c", _BOUND_CHILD, policy, str(budget), counts, str(per_producer), str(size)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    fig = json.loads(out.stdout)
    fig.update(policy=policy, budget=budget, counts=counts, size=size)
    fig["ratio"] = fig["peak_rss"] / (budget + fig["baseline"])
    return fig


def main(argv: list[str] | None = None) -> int:
    """``python -m sweepq.bench.memory``: the budget's bound for every policy, as a table."""
    from sweepq.engine import MQError
    from sweepq.engine.sizes import parse_size

    ap = argparse.ArgumentParser(
        prog="python -m sweepq.bench.memory",
        description="Two producers at full speed into a memory budget, once per memory_policy: peak resident "
        "memory against budget + baseline (MB = 10^6 bytes).",
    )
    ap.add_argument("--budget", default="50MB", help="the memory budget, e.g. 50MB (default)")
    ap.add_argument("--per-producer", default="400MB", help="bytes each producer puts, e.g. 400MB (default)")
    ap.add_argument("--size", type=int, default=1024, help="message bytes (default 1024)")
    ap.add_argument(
        "--counts",
        choices=("resident", "held"),
        default="resident",
        help="what the budget counts (MemorySettings(counts=)); default resident",
    )
    args = ap.parse_args(argv)
    try:
        budget = parse_size(args.budget, "--budget", 16 * 1024)
        per_producer = parse_size(args.per_producer, "--per-producer")
    except MQError as e:
        print(f"python -m sweepq.bench.memory: error: {e}", file=sys.stderr)
        return 2
    print("| policy | peak RSS | budget + baseline | ratio | samples of the count over the budget | puts | refused |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for policy in POLICIES:
        f = budget_bound(policy, budget, per_producer, args.counts, args.size)
        bound = f["budget"] + f["baseline"]
        print(
            f"| {policy} | {f['peak_rss'] / 1e6:.1f} MB | {bound / 1e6:.1f} MB ({f['budget'] / 1e6:g} + "
            f"{f['baseline'] / 1e6:.1f}) | {f['ratio']:.2f} x | {f['samples_over']} of {f['samples']} | "
            f"{f['puts']:,} | {f['refused']:,} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
