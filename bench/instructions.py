"""Instructions per operation of the hot paths, counted by valgrind's callgrind.

A wall-clock figure moves with whatever else the machine runs; an instruction count does not
(the same binary, inputs and environment give the same total, whatever the load). Each
figure here is the difference between a child process doing ``2 n`` operations and one doing
``n`` (both after the same warm-up), divided by ``n``: start-up, imports and the warm-up
cancel out. The children run with address randomisation off (``setarch -R``) and a fixed
hash seed, so that their start-ups are alike to about a thousandth; at the default
``n`` = 50,000 what is left moves a figure by a few dozen instructions. Run it with
``python -m sweepq.bench.instructions`` (or ``sweepq bench instructions``); it needs
``valgrind`` on the PATH.

Scenarios, each beside its baseline in the same run:

* ``pair``: a put and a get of 100 bytes on one queue, one thread: sweepq, and
  ``queue.Queue`` holding the same bytes object;
* ``pair interpreted``: the same pair with ``SWEEPQ_PURE=1``, the engine's interpreted form (what
  a user installed without a C compiler runs), beside the same baseline;
* ``batch``: ``put_many`` then ``get_many`` of 100 messages of 100 bytes, per message, and
  ``queue.Queue`` doing the same one by one;
* ``Queue``: ``sweepq.Queue()`` (in memory, the default serializer) put and get of a small
  dict, ``{"order": 1, "item": "widget"}``, beside ``queue.Queue`` doing the same;
* ``Queue bytes``: ``sweepq.Queue(serializer="bytes")`` put and get of 100 bytes, beside
  ``queue.Queue``;
* ``AsyncQueue``: ``await q.put(item)`` and ``await q.get()`` of the small dict in one
  coroutine, ``sweepq.AsyncQueue()`` beside ``asyncio.Queue``;
* ``durable os``: a put and a get of a persistent 1 KiB message, ``sync="os"`` (a queue
  manager on a data directory, bench/durable.py's ``open_sweepq``), beside the floor of what
  each of its calls writes, deferred (blobstore/redolog.py): a redo-log and a change-log
  append (``_logs_alone``, no store layers), so the ratio is the share of the pair the two
  appends alone cost;
* ``durable os kv``: the same pair beside what each call wrote before deferred writes, one
  RocksDB write and one change-log append (``_kv_alone``);
* ``durable store``: the store's write path alone for the same message
  (``BlobStore.write_messages`` of its record, then of its delete: ``_store_alone``), beside
  the floor of ``durable os``;
* ``durable os sqlite``: the ``durable os`` pair beside persist-queue's ``SQLiteQueue`` with
  ``PRAGMA synchronous=OFF`` (the peer of docs/durable-bench.md's crash-safe goal). Only the
  main thread counts: RocksDB's own threads (flushes, compactions) do not;
* ``durable Queue``: ``sweepq.Queue(path=, sync="os")`` put and get of 1 KiB bytes (the
  default serializer), beside the ``durable os`` pair of the queue manager under it, so the
  ratio is the share of the pair the ``queue.Queue``-style layer leaves to the engine;
* ``durable Queue sqlite``: the same ``Queue(path=)`` pair beside SQLiteQueue OFF (issue 31's
  5 x for ``Queue(path=)``).

``--cache-sim`` also counts level-1 instruction cache misses per operation (callgrind's
``--cache-sim=yes``, its simulated I1 cache, the machine's size when valgrind can read it): a
path of few instructions can still run slower than its count says when its code and the
interpreter's eval loop do not fit in the I1 cache together, and evict each other on
every operation. Those misses are as repeatable as the instructions (a simulation of the
same instruction stream), and cost about as many cycles each as a dozen instructions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

_CHILD = r"""
import os, sys
which, n = sys.argv[1], int(sys.argv[2])
data = b"x" * 100
if which.endswith("dict"):
    data = {"order": 1, "item": "widget"}
if which.startswith("durable "):  # persistent 1 KiB messages on a data directory in the working one
    from sweepq.bench import durable
    data = b"x" * 1024
    opened = {
        "durable sweepq os put+get": lambda p: durable.open_sweepq(p, "os"),
        "durable store write+remove": durable._store_alone,
        "durable kv floor put+delete": durable._kv_alone,
        "durable logs floor put+delete": durable._logs_alone,
        "durable SQLiteQueue OFF put+get": lambda p: durable._sqlite_queue(p, "OFF"),
        "durable sweepq.Queue path os put+get": durable.open_queue_path,
    }[which](os.path.join(os.getcwd(), "data"))
    put, get = opened.put, opened.get
elif which.startswith(("asyncio.Queue", "sweepq.AsyncQueue")):
    import asyncio
    if which.startswith("asyncio"):
        q = asyncio.Queue()
    else:
        from sweepq import AsyncQueue
        q = AsyncQueue()
    put, get = q.put, q.get
elif which.startswith("queue.Queue"):
    import queue
    q = queue.Queue()
    put, get = q.put, q.get
elif which.startswith("sweepq.Queue"):
    from sweepq import Queue
    q = Queue(serializer="bytes") if which.startswith("sweepq.Queue bytes") else Queue()
    put, get = q.put, q.get
else:
    from sweepq.engine import OO, QueueManager, SweeperSettings
    qm = QueueManager(sweeping=SweeperSettings(run=False))
    qm.define_queue("Q")
    h = qm.connect().open("Q", OO.OUTPUT | OO.INPUT_SHARED)
    put, get, put_many, get_many = h.put, h.get, h.put_many, h.get_many
if which.endswith("batch"):
    block = [data] * 100
    if which.startswith("queue.Queue"):
        def run(k):
            for _ in range(k // 100):
                for d in block:
                    put(d)
                for _ in block:
                    get()
    else:
        def run(k):
            for _ in range(k // 100):
                put_many(block)
                get_many(100)
elif which.startswith(("asyncio.Queue", "sweepq.AsyncQueue")):
    async def pairs(k):
        for _ in range(k):
            await put(data)
            await get()
    loop = asyncio.new_event_loop()
    def run(k):
        loop.run_until_complete(pairs(k))
else:
    def run(k):
        for _ in range(k):
            put(data)
            get()
run(2000)
import gc
gc.collect()
gc.freeze()  # the start-up's objects out of every later collection (see count())
run(n)
"""

SCENARIOS = {
    "pair": ("sweepq put+get", "queue.Queue put+get"),
    "pair interpreted": ("sweepq put+get interpreted", "queue.Queue put+get"),
    "batch": ("sweepq batch", "queue.Queue batch"),
    "Queue": ("sweepq.Queue put+get dict", "queue.Queue put+get dict"),
    "Queue bytes": ("sweepq.Queue bytes put+get", "queue.Queue put+get"),
    "AsyncQueue": ("sweepq.AsyncQueue put+get dict", "asyncio.Queue put+get dict"),
    "durable os": ("durable sweepq os put+get", "durable logs floor put+delete"),
    "durable os kv": ("durable sweepq os put+get", "durable kv floor put+delete"),
    "durable store": ("durable store write+remove", "durable logs floor put+delete"),
    "durable os sqlite": ("durable sweepq os put+get", "durable SQLiteQueue OFF put+get"),
    "durable Queue": ("durable sweepq.Queue path os put+get", "durable sweepq os put+get"),
    "durable Queue sqlite": ("durable sweepq.Queue path os put+get", "durable SQLiteQueue OFF put+get"),
}


def count(which: str, n: int, cache_sim: bool = False) -> dict[str, int]:
    """Events of a child process doing ``n`` operations of ``which`` (callgrind): ``Ir``, its
    instructions, and with ``cache_sim`` the cache simulation's too (``I1mr``, level-1
    instruction cache misses, among them).

    Only the main thread's instructions count, where the operations run: a queue manager's
    own threads (its sweeper's cycle) run by the wall clock, and under valgrind, fifty times
    slower, how often they ran followed the machine's load. The child freezes its heap after
    the warm-up (``gc.freeze``): a collection of the oldest
    generation walks every object the imports made, several million instructions, and
    whether the ``n`` run or the ``2 n`` run happens to trigger one more of them moved a
    figure by up to a quarter; frozen, a collection walks only what the operations made.

    The child's start-up must cost the same in every run, since only the difference of two
    runs counts, divided by ``n``. Its dict layouts are fixed (``PYTHONHASHSEED``). Its
    working directory is not on ``sys.path`` (``-P``) and is an empty one of its own: with
    ``python -c`` run from a busy directory such as /tmp, every import of the start-up listed
    that directory again whenever another process had changed it since, a cost that followed
    the machine's other work (interpreted, the ``pair`` figure moved from 49,800 to 58,700 at
    ``n`` = 10,000). The lock checks (``SWEEPQ_CHECKS``, engine/core/lock.py), which a test
    environment turns on, are off: the figure is the library's as users run it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        steady = ["setarch", "-R"] if shutil.which("setarch") else []
        proc = subprocess.run(
            [
                *steady,
                "valgrind",
                "--tool=callgrind",
                "--separate-threads=yes",
                *(["--cache-sim=yes"] if cache_sim else []),
                f"--callgrind-out-file={out}",
                sys.executable,
                "-P",  # no working directory on sys.path (see below)
                "-c",
                _CHILD,
                which,
                str(n),
            ],
            capture_output=True,
            text=True,
            cwd=tmp,
            env={**os.environ, "PYTHONHASHSEED": "0", "SWEEPQ_CHECKS": "0", **_form(which)},
        )
        main = out + "-01"  # the main thread's file: the operations run there
        text = Path(main).read_text() if os.path.exists(main) else ""
        events = re.search(r"^events: (.+)$", text, re.M)
        totals = re.search(r"^totals: ([\d ]+)$", text, re.M)
        if proc.returncode or events is None or totals is None:
            raise RuntimeError(f"callgrind of {which!r} failed: {proc.stderr[-2000:]}")
        return dict(zip(events.group(1).split(), map(int, totals.group(1).split()), strict=False))


def _form(which: str) -> dict[str, str]:
    """The environment that chooses the engine's form for ``which``: interpreted for the
    scenarios named so (forms.py reads ``SWEEPQ_PURE``), else the installed one."""
    return {"SWEEPQ_PURE": "1"} if which.endswith(" interpreted") else {}


def per_op_events(
    which: str, n: int, cache_sim: bool = False, progress: Callable[[], object] = lambda: None
) -> dict[str, float]:
    """Each event per operation: (2n ops - n ops) / n; ``progress`` is called after each child."""
    twice = count(which, 2 * n, cache_sim)
    progress()
    once = count(which, n, cache_sim)
    progress()
    return {k: (twice[k] - once.get(k, 0)) / n for k in twice}


def per_op(which: str, n: int, progress: Callable[[], object] = lambda: None) -> float:
    """Instructions per operation: (2n ops - n ops) / n; ``progress`` is called after each child."""
    return per_op_events(which, n, False, progress)["Ir"]


def measure(scenarios: list[str], n: int = 50_000, cache_sim: bool = False) -> dict[str, dict[str, float]]:
    """For each scenario, sweepq's and its baseline's instructions per operation, and the ratio
    (baseline / sweepq: above 1, sweepq does it in fewer instructions); with ``cache_sim``
    also each one's level-1 instruction cache misses per operation (``sweepq I1 misses``,
    ``baseline I1 misses``)."""
    if shutil.which("valgrind") is None:
        raise RuntimeError("valgrind is not on the PATH (Debian: apt-get install valgrind)")
    out = {}
    for name in scenarios:
        mine, base = SCENARIOS[name]
        a, b = per_op_events(mine, n, cache_sim), per_op_events(base, n, cache_sim)
        out[name] = {"sweepq": a["Ir"], "baseline": b["Ir"], "ratio": b["Ir"] / a["Ir"]}
        if cache_sim:
            out[name] |= {"sweepq I1 misses": a["I1mr"], "baseline I1 misses": b["I1mr"]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sweepq.bench.instructions", description=__doc__.split("\n\n")[0])
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO", help=f"any of {', '.join(SCENARIOS)} (default: all)")
    p.add_argument("-n", type=int, default=50_000, help="operations per measured run (default 50,000)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--cache-sim",
        action="store_true",
        help="also count level-1 instruction cache misses per operation (callgrind --cache-sim=yes; slower)",
    )
    args = p.parse_args(argv)
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario {unknown[0]!r}: choose from {', '.join(SCENARIOS)}")
    try:
        res = measure(args.scenarios or list(SCENARIOS), args.n, args.cache_sim)
    except RuntimeError as e:
        print(f"sweepq bench instructions: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    misses = " sweepq I1 misses/op | baseline I1 misses/op |" if args.cache_sim else ""
    print("| scenario | sweepq instructions/op | baseline | ratio (baseline / sweepq) |" + misses)
    print("|---|--:|--:|--:|" + ("--:|--:|" if args.cache_sim else ""))
    for name, r in res.items():
        row = f"| {name} | {r['sweepq']:,.0f} | {r['baseline']:,.0f} ({SCENARIOS[name][1]}) | {r['ratio']:.2f} x |"
        if args.cache_sim:
            row += f" {r['sweepq I1 misses']:,.1f} | {r['baseline I1 misses']:,.1f} |"
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
