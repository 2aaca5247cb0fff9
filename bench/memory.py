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

:func:`fill_and_drain`: the same bound in a fill and in the drain that follows it: two
producers fill a backlog of ten budgets, then one consumer gets every item back with gets of
one batch size, through a ``QueueManager`` or through ``sweepq.Queue`` with object items,
with or without ``MALLOC_ARENA_MAX=1``; each phase's peak resident memory against budget +
baseline, what was counted, and whether every item came back once, in order. ``sweepq bench
memory`` runs it for every kind, batch size and arena setting (bench/suite.py).
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


# -- a fill, then a drain ---------------------------------------------------------------------

# What the fill and the drain children share: the kernel's high-water mark, reset between the
# two phases (writing 5 to /proc/self/clear_refs, Linux 4.0 and later) so that each phase has
# its own peak, and a sampler of what the budget counts.
_PHASES = r"""
import json, os, sys, threading
from sweepq.engine.budget import give_back, peak_resident_bytes, resident_bytes

def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False

class Sampler:
    # What the budget counts, sampled every millisecond in a thread of its own.
    def __init__(self, count, budget):
        self.count, self.budget, self.seen = count, budget, []
        self.done = threading.Event()
        self.start()
    def start(self):
        self.done.clear()
        self.thread = threading.Thread(target=self.run, daemon=True)  # never keeps a failed child alive
        self.thread.start()
    def run(self):
        while not self.done.is_set():
            self.seen.append(self.count())
            self.done.wait(0.001)
    def stop(self):
        self.done.set(); self.thread.join()
        seen, self.seen = self.seen, []
        return {"peak_counted": max(seen, default=0), "samples": len(seen),
                "samples_over": sum(c > self.budget for c in seen)}
"""

_DRAIN_CHILD = (
    _PHASES
    + r"""
kind, budget, backlog, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
size = 1024
per_producer = backlog // 2
if kind == "manager":
    from sweepq.engine import GMO, OO, QueueManager
    from sweepq.engine.settings import MemorySettings
    pad = (os.urandom(size // 2).hex().encode() * 2)[: size - 8]  # compresses about 2:1
    # The sweeper on its wall clock, as a user runs it: it sweeps by its rule every interval,
    # through the drain too, besides when the budget's high mark wakes it.
    qm = QueueManager(memory=MemorySettings(budget=budget, counts="resident"))
    baseline = qm.budget.baseline
    names = ("A", "B")
    for name in names:
        qm.define_queue(name, max_depth=100_000_000)
    count = lambda: qm.memory_use().total
    def producer(name):
        put = qm.connect().open(name, OO.OUTPUT).put
        def run():
            for i in range(per_producer // size):
                put(i.to_bytes(8, "big") + pad)
        return run
    def drain(name):
        h = qm.connect().open(name, OO.INPUT_SHARED)
        if batch == 1:
            def take():
                try:
                    return [h.get(options=GMO.NO_SYNCPOINT).data]
                except Exception as e:
                    if getattr(e, "reason", None) == 2033:
                        return []
                    raise
        else:
            def take():
                return [m.data for m in h.get_many(batch, GMO.NO_SYNCPOINT)]
        return take
    key = lambda item: int.from_bytes(item[:8], "big")
    close = qm.close
else:
    import queue
    from sweepq import Queue
    q = Queue(memory_budget=budget)
    give_back()
    baseline = resident_bytes()  # the Queue's budget is not public: its count is read as the OS sees it
    names = ("A", "B")
    count = lambda: max(0, resident_bytes() - baseline)
    blob = os.urandom(size // 2).hex().encode()
    def producer(name):
        def run():
            for i in range(per_producer // size):
                if kind == "queue-dict":  # a small dict: about a KiB in memory with its strings
                    q.put({"producer": name, "order": i, "item": "widget", "note": blob[: size // 2].decode()})
                else:
                    q.put((name, i, blob[: size - 64] + bytes(64)))
        return run
    def drain(name):
        if name == "B":
            return lambda: []  # one queue holds both producers' items
        if batch == 1:
            def take():
                try:
                    return [q.get_nowait()]
                except queue.Empty:
                    return []
        else:
            def take():
                try:
                    return q.get_many(batch, block=False)
                except queue.Empty:
                    return []
        return take
    close = q.close
sampler = Sampler(count, budget)
threads = [threading.Thread(target=producer(n)) for n in names]
for t in threads:
    t.start()
for t in threads:
    t.join()
fill = {**sampler.stop(), "peak_rss": peak_resident_bytes()}
reset = reset_peak()
sampler.start()
got, in_order, last = 0, True, {}
for name in names:
    take = drain(name)
    while True:
        items = take()
        if not items:
            break
        for item in items:
            if kind == "manager":
                who, i = name, int.from_bytes(item[:8], "big")
            elif kind == "queue-dict":
                who, i = item["producer"], item["order"]
            else:
                who, i = item[0], item[1]
            in_order = in_order and i == last.get(who, -1) + 1
            last[who] = i
            got += 1
        del items
drain_fig = {**sampler.stop(), "peak_rss": peak_resident_bytes() if reset else 0}
expected = 2 * (per_producer // size)
print(json.dumps({"baseline": baseline, "fill": fill, "drain": drain_fig, "items": expected, "got": got,
                  "every_item_once_in_order": in_order and got == expected}))
close()
"""
)

DRAIN_KINDS = {
    "manager": "QueueManager, 1 KiB messages",
    "queue-dict": "sweepq.Queue, small dicts",
    "queue-bytes": "sweepq.Queue, 1 KiB bytes in a tuple",
}
DRAIN_BATCHES = (1, 100, 5000)  # gets of one, and get_many of these
DRAIN_RUNS = len(DRAIN_KINDS) * len(DRAIN_BATCHES) * 2  # each with and without MALLOC_ARENA_MAX=1


def drain_cases(quick: bool) -> list[tuple[str, int, bool]]:
    """(kind, batch, one arena) of each fill and drain a run makes: all :data:`DRAIN_RUNS`,
    or with ``quick`` the largest batch of each kind with glibc's arenas as they are (the
    worst case of the full run, in a CI-sized run: each case is a fresh subprocess)."""
    batches = DRAIN_BATCHES[-1:] if quick else DRAIN_BATCHES
    arenas = (False,) if quick else (False, True)
    return [(kind, batch, arena) for kind in DRAIN_KINDS for batch in batches for arena in arenas]


GOAL_BOUND = 1.15  # peak resident memory <= 1.15 x (budget + baseline): issue 32 item 5, issue 30


def fill_and_drain(kind: str, budget: int, backlog: int, batch: int, one_arena: bool) -> dict:
    """Two producer threads fill ``backlog`` bytes of 1 KiB items into a memory budget of
    ``budget`` bytes counting resident memory, then one thread drains every item with gets of
    ``batch`` (1: ``get``; more: ``get_many``), in a fresh subprocess, with
    ``MALLOC_ARENA_MAX=1`` or without it. ``kind``: a key of :data:`DRAIN_KINDS`. Returns each
    phase's peak resident memory (the kernel's high-water mark, reset between them) and its
    ratio to budget + baseline, what was counted at most and how many samples were over the
    budget, and whether every item came back once, in order."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if one_arena:
        env["MALLOC_ARENA_MAX"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", _DRAIN_CHILD, kind, str(budget), str(backlog), str(batch)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    fig = json.loads(out.stdout)
    fig.update(kind=kind, budget=budget, backlog=backlog, batch=batch, one_arena=one_arena)
    bound = budget + fig["baseline"]
    for phase in ("fill", "drain"):
        fig[phase]["ratio"] = fig[phase]["peak_rss"] / bound
    return fig


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
