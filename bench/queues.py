"""``sweepq bench queue``: ``sweepq.Queue`` and ``sweepq.AsyncQueue`` beside what a Python user
would use instead, side by side in one run (issue 25).

* **in memory**: put+get pairs, and put n then get them, of a small Python object (kept as
  the object itself by both: docs/queue.md "Items"), ``sweepq.Queue()`` against
  ``queue.Queue``.
* **persistent**: put n items of 1 KiB then get them, ``sweepq.Queue(path=...)`` (its default
  ``sync="os"``: a returned call survives a kill -9 of the process) against persist-queue's
  ``SQLiteQueue`` (``auto_commit=True``, at its default ``synchronous=FULL`` and at the same
  guarantee as sweepq's, ``NORMAL``), its file ``Queue``, ``diskcache.Deque`` and queuelib's
  ``FifoDiskQueue``; each absent one is skipped with a notice.
* **backlog**: a backlog of ``backlog_factor`` times a memory budget of 1 KiB items, put and
  then got, each contender in a fresh process: its resident memory before the first put, its
  peak (``ru_maxrss``), its throughput, and whether every item came back once and in order:
  ``sweepq.Queue(memory_budget=...)`` in memory and on a data directory, ``queue.Queue``,
  filequeue's ``FileQueue`` (a queue.Queue whose overflow beyond ``maxsize`` items goes to a
  file: given the budget's worth of items), queuelib and diskcache.
* **asyncio**: put+get pairs through ``await``, ``sweepq.AsyncQueue()`` against
  ``asyncio.Queue``.

Contenders run in interleaved rounds, each keeping its best (bench/timing.py), but for
asyncio's, whose ratio is the median of paired rounds (``asyncio_pairs``): the ratios in the
same run are the figures. The goals the issue sets are checked and said met or missed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

GOAL_PATH_VS_SQLITE = 5.0  # sweepq.Queue(path=) at least 5 x SQLiteQueue (auto-commit)
GOAL_PATH_VS_SQLITE_OFF = 5.0  # issue 31: and at least 5 x SQLiteQueue, synchronous=OFF (its guarantee)
GOAL_PATH_VS_DISKCACHE = 1.0  # and at least diskcache.Deque
GOAL_BACKLOG_RSS = 1.15  # peak RSS <= 1.15 x (budget + RSS before the first put)
ITEM = 1024
# Rounds of the persistent contenders: those that fsync every call (SQLiteQueue's default,
# sweepq's sync="commit", persist-queue's file Queue) take ~10 s a round at 1,000 items.
PERSISTENT_ROUNDS = 5


def _rate(x: float) -> str:
    return f"{x / 1e3:.1f} k/s" if x >= 1e3 else f"{x:.0f} /s"


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


# -- in memory ----------------------------------------------------------------------------------


def in_memory(o: Any, report: Any, step: Callable[[], None]) -> dict:
    import queue as stdqueue

    from sweepq import Queue

    from .timing import interleaved

    n = o.queue_messages
    item = {"order": 12345, "lines": ["a", "b"], "note": "x" * 64}
    sq, std = Queue(), stdqueue.Queue()

    def pairs(q: Any) -> Callable[[], None]:
        put, get = q.put, q.get

        def run() -> None:
            for _ in range(n):
                put(item)
                get()

        return run

    def fill_drain(q: Any) -> Callable[[], None]:
        put, get = q.put, q.get

        def run() -> None:
            for _ in range(n):
                put(item)
            for _ in range(n):
                get()

        return run

    out: dict[str, Any] = {}
    for what, make in (("put+get pairs", pairs), (f"put {n:,} then get them", fill_drain)):
        res = interleaved({"queue.Queue": make(std), "sweepq.Queue": make(sq)}, n, o.rounds, progress=lambda _: step())
        base = res["queue.Queue"].rate
        for name, r in res.items():
            report.row(
                "queue", f"in memory, {what}, a small dict: {name}", _rate(r.rate), f"{r.rate / base:.2f} x queue.Queue"
            )
        out[what] = {name: r.rate for name, r in res.items()}
        out[what]["ratio"] = res["sweepq.Queue"].rate / base
    sq.close()
    return out


# -- persistent ---------------------------------------------------------------------------------


SQLITE_DEFAULT = "persist-queue SQLiteQueue (default synchronous=FULL)"  # bench/durable.py's labels
DISKCACHE = "diskcache.Deque (defaults: synchronous=NORMAL)"
SWEEPQ_OS = 'sweepq.Queue(path=), sync="os" (survives kill -9)'


def _persistent_contenders(report: Any) -> dict[str, Callable[[str], Any]]:
    """sweepq.Queue on a data directory, and bench/durable.py's peers: those at sweepq's
    guarantee (crash-safe), SQLiteQueue at its default (power-safe), and queuelib."""
    from sweepq import Queue

    from .durable import Opened, crash_safe_contenders, power_safe_contenders

    def sweepq_path(sync: str) -> Callable[[str], Opened]:
        def make(d: str) -> Opened:
            q: Queue[bytes] = Queue(path=d, sync=sync)
            return Opened(q.put, q.get_nowait, q.close)

        return make

    crash_safe, missing = crash_safe_contenders()
    out: dict[str, Callable[[str], Any]] = {
        SWEEPQ_OS: sweepq_path("os"),
        'sweepq.Queue(path=), sync="commit" (survives power loss)': sweepq_path("commit"),
        **{k: v for k, v in crash_safe.items() if not k.startswith("sweepq")},
        **{k: v for k, v in power_safe_contenders().items() if k == SQLITE_DEFAULT},
    }
    try:
        from queuelib import FifoDiskQueue

        def queuelib_fifo(d: str) -> Opened:
            q = FifoDiskQueue(d)
            return Opened(q.push, q.pop, q.close)

        out["queuelib FifoDiskQueue (no fsync, no crash safety of its index)"] = queuelib_fifo
    except ImportError:
        missing.append("queuelib")
    for name in missing:
        report.notice(f"queue: {name} is not installed, skipped (pip install 'sweepq[bench]')")
    return out


def persistent(o: Any, report: Any, step: Callable[[], None]) -> dict:
    from .durable import SQLITE_OFF

    n, payload = o.queue_persistent_messages, b"x" * ITEM
    contenders = _persistent_contenders(report)
    best = dict.fromkeys(contenders, float("inf"))
    base_dir = tempfile.mkdtemp(prefix="sweepq-bench-queue-")
    try:
        for r in range(min(o.rounds, PERSISTENT_ROUNDS)):
            for name, make in contenders.items():
                d = os.path.join(base_dir, f"{r}-{len(name)}-{abs(hash(name))}")
                opened = make(d)
                t0 = time.perf_counter()
                for _ in range(n):
                    opened.put(payload)
                for _ in range(n):
                    opened.get()
                best[name] = min(best[name], time.perf_counter() - t0)
                opened.close()
            step()
        for _ in range(o.rounds - min(o.rounds, PERSISTENT_ROUNDS)):
            step()
    finally:
        import shutil

        shutil.rmtree(base_dir, ignore_errors=True)
    rates = {k: n / s for k, s in best.items()}
    ours = rates[SWEEPQ_OS]
    out: dict[str, Any] = {"per_s": rates}
    for k, r in rates.items():
        report.row(
            "queue", f"put {n:,} items of {ITEM} B, then get them: {k}", _rate(r), f"sweepq os: {ours / r:.2f} x this"
        )
    goals = (  # (the figure's key, the peer, what the goal says, its bound): a row each, when the peer ran
        ("vs_sqlite", SQLITE_DEFAULT, f"{GOAL_PATH_VS_SQLITE:g} x SQLiteQueue (auto-commit)", GOAL_PATH_VS_SQLITE),
        (
            "vs_sqlite_off",
            SQLITE_OFF,
            f"{GOAL_PATH_VS_SQLITE_OFF:g} x SQLiteQueue, synchronous=OFF (issue 31)",
            GOAL_PATH_VS_SQLITE_OFF,
        ),
        ("vs_diskcache", DISKCACHE, "diskcache.Deque", GOAL_PATH_VS_DISKCACHE),
    )
    for key, peer, goal, bound in goals:
        if rates.get(peer):
            out[key] = ours / rates[peer]
            report.row("queue", f"goal: path= >= {goal}", f"{out[key]:.1f} x", _met(out[key] >= bound))
    return out


# -- a backlog of ten times the budget ----------------------------------------------------------

_BACKLOG_CHILD = r"""
import json, os, sys, time
kind, n, budget, size, where = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
import psutil
if kind.startswith("sweepq"):
    from sweepq import Queue
    opts = {"memory_budget": budget}
    if kind == "sweepq-path":
        opts["path"] = where
    if kind == "sweepq-held":
        opts["budget_counts"] = "held"
    q = Queue(**opts); put, get = q.put, q.get_nowait
elif kind == "queue.Queue":
    import queue
    q = queue.Queue(); put, get = q.put, q.get_nowait
elif kind == "filequeue":
    import filequeue
    q = filequeue.FileQueue(maxsize=max(1, budget // size)); put, get = q.put, q.get_nowait
elif kind == "queuelib":
    from queuelib import FifoDiskQueue
    q = FifoDiskQueue(where); put, get = q.push, q.pop
elif kind == "diskcache":
    import diskcache
    q = diskcache.Deque(directory=where); put, get = q.append, q.popleft
pad = b"x" * (size - 8)
before = psutil.Process().memory_info().rss
t0 = time.perf_counter()
for i in range(n):
    put(i.to_bytes(8, "big") + pad)
t1 = time.perf_counter()
in_order = True; seen = 0; last = -1
for _ in range(n):
    item = get()
    i = int.from_bytes(item[:8], "big")
    in_order = in_order and i == last + 1
    last = i; seen += 1
t2 = time.perf_counter()
def hwm():  # this process's peak RSS: VmHWM is the address space's, new at exec (ru_maxrss is not)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
fig = {"before": before, "peak": hwm(), "put_s": t1 - t0, "get_s": t2 - t1, "items": seen}
print(json.dumps({**fig, "in_order": in_order and seen == n}))
"""


def backlog(o: Any, report: Any, step: Callable[[], None]) -> dict:
    budget = o.queue_budget
    n = int(budget * o.queue_backlog_factor) // ITEM
    kinds = {
        "sweepq.Queue(memory_budget=)": "sweepq",
        "sweepq.Queue(path=, memory_budget=)": "sweepq-path",
        'sweepq.Queue(memory_budget=, budget_counts="held")': "sweepq-held",
        "queue.Queue": "queue.Queue",
    }
    for name, module, label in (
        ("filequeue", "filequeue", f"filequeue FileQueue(maxsize={budget // ITEM:,}: the budget's worth)"),
        ("queuelib", "queuelib", "queuelib FifoDiskQueue"),
        ("diskcache", "diskcache", "diskcache.Deque"),
    ):
        try:
            __import__(module)
            kinds[label] = name
        except ImportError:
            report.notice(f"queue: {module} is not installed, skipped in the backlog (pip install 'sweepq[bench]')")
    out: dict[str, Any] = {"budget": budget, "items": n}
    from sweepq.engine.sizes import format_size

    what = f"backlog of {n:,} x {ITEM} B ({o.queue_backlog_factor:g} x a {format_size(budget)} budget), put then got"
    for label, kind in kinds.items():
        with tempfile.TemporaryDirectory(prefix="sweepq-bench-backlog-") as d:
            r = subprocess.run(
                [sys.executable, "-c", _BACKLOG_CHILD, kind, str(n), str(budget), str(ITEM), os.path.join(d, "q")],
                capture_output=True,
                text=True,
            )
        step()
        if r.returncode != 0:
            report.notice(f"queue: backlog {label} failed: {r.stderr.strip().splitlines()[-1:]}")
            continue
        fig = json.loads(r.stdout.strip().splitlines()[-1])
        fig["per_s"] = 2 * n / (fig["put_s"] + fig["get_s"])
        out[label] = fig
        bound = GOAL_BACKLOG_RSS * (budget + fig["before"])
        goal = f"; goal <= {bound / 1e6:.0f} MB: {_met(fig['peak'] <= bound)}" if kind.startswith("sweepq") else ""
        report.row(
            "queue",
            f"{what}: {label}",
            f"peak RSS {fig['peak'] / 1e6:.0f} MB (before the first put {fig['before'] / 1e6:.0f} MB), "
            f"{_rate(fig['per_s'])} put+get",
            f"{'every item once, in order' if fig['in_order'] else '**not every item back in order**'}{goal}",
        )
    return out


# -- asyncio ------------------------------------------------------------------------------------


# The asyncio pair is a few hundred nanoseconds and the two queues come within a few per cent of
# each other: rounds of 3,000 pairs (a few milliseconds) and the best of three could not tell
# them apart on a shared machine. So every run, even --quick, takes this many pairs a round and
# rounds, and the ratio is the median of the rounds' paired ratios.
ASYNCIO_MIN_PAIRS = 25_000
ASYNCIO_MIN_ROUNDS = 21


def _median(xs: list[float]) -> float:
    s, k = sorted(xs), len(xs)
    return s[k // 2] if k % 2 else (s[k // 2 - 1] + s[k // 2]) / 2


def asyncio_pairs(o: Any, report: Any, step: Callable[[], None]) -> dict:
    """put+get pairs through ``await`` in one coroutine, ``sweepq.AsyncQueue()`` against
    ``asyncio.Queue``: a warm-up round of each, then rounds of both, the one that goes first
    alternating round by round (neither always runs on the caches and clock the other left).
    ``ratio`` is the median over rounds of the round's paired ratio (sweepq's rate over
    asyncio's in the same round), ``best_ratio`` that of the best rounds; the rates are each
    queue's median round."""
    import asyncio

    from sweepq import AsyncQueue

    n = max(o.queue_messages, ASYNCIO_MIN_PAIRS)
    rounds = max(o.rounds, ASYNCIO_MIN_ROUNDS)
    item = {"order": 12345, "note": "x" * 64}
    names = ("asyncio.Queue", "sweepq.AsyncQueue")

    async def run(q: Any) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            await q.put(item)
            await q.get()
        return time.perf_counter() - t0

    async def main() -> dict[str, list[float]]:
        queues = {"asyncio.Queue": asyncio.Queue(), "sweepq.AsyncQueue": AsyncQueue()}
        for q in queues.values():  # warm-up: the code paths, the caches and the allocator's pools
            await run(q)
        times: dict[str, list[float]] = {name: [] for name in names}
        steps = 0
        for r in range(rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                times[name].append(await run(queues[name]))
            while steps < (r + 1) * o.rounds // rounds:  # the scenario's progress counts o.rounds steps
                step()
                steps += 1
        return times

    times = asyncio.run(main())
    ours, base = times["sweepq.AsyncQueue"], times["asyncio.Queue"]
    ratio = _median([b / m for m, b in zip(ours, base, strict=True)])
    best_ratio = min(base) / min(ours)
    out: dict[str, Any] = {name: n / _median(times[name]) for name in names}
    paired = f"{ratio:.2f} x asyncio.Queue (paired median of {rounds} rounds of {n:,}; best rounds {best_ratio:.2f} x)"
    for name in names:
        rel = "1.00 x asyncio.Queue" if name == "asyncio.Queue" else paired
        report.row("queue", f"asyncio, put+get pairs through await: {name}", _rate(out[name]), rel)
    out.update(ratio=ratio, best_ratio=best_ratio, pairs=n, rounds=rounds)
    return out


def run(o: Any, report: Any, step: Callable[[], None]) -> dict:
    """The whole scenario (see the module docstring)."""
    return {
        "in_memory": in_memory(o, report, step),
        "persistent": persistent(o, report, step),
        "backlog": backlog(o, report, step),
        "asyncio": asyncio_pairs(o, report, step),
    }
