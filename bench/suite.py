"""``sweepq bench``: every benchmark scenario, reported as ratios to baselines in the same run.

Each scenario is a function ``(opts, step) -> dict`` that returns its figures and adds rows
to the Markdown table through :class:`Report`; ``step`` advances the scenario's progress
bar. Machines are shared and noisy, so contenders run in interleaved rounds and each keeps
its best round (``timing.interleaved``); what is comparable is the ratio, not the rate.

Scenarios:

* ``throughput``: in-memory put+get pairs and fill-then-drain against ``queue.Queue`` and
  ``collections.deque``.
* ``batch``: ``put_many`` / ``get_many`` against single puts and gets.
* ``persistent``: the embedded persistent queues a Python user would pick (persist-queue's
  SQLiteQueue and file Queue, diskcache.Deque, queuelib's FifoDiskQueue), each skipped with a
  notice when absent, beside sweepq's non-persistent queue.
* ``durable``: sweepq's persistent messages at the peers' guarantee (bench/durable.py):
  process-crash-safe put+get against persist-queue and diskcache, power-safe put+get
  against the machine's fsync floor, 8 producers against 1 under group commit, and the
  recovery time of 1,000,000 persistent messages, half of them swept (issue 10 §7).
* ``sweep``: sweep and unsweep bandwidth against the store alone, time under the queue lock,
  get latency across blob boundaries, a swept queue's drain against the same from memory
  (with read-ahead hits), pairs while another queue is swept.
* ``backlog``: after RabbitMQ's published scenario, consumers paused until a backlog waits,
  then drained while publishing goes on; with and without sweeping, each in a subprocess.
* ``memory``: resident bytes per in-memory message, bytes per swept message, and the memory
  budget's bound in a fill and its drain: peak resident memory against budget + baseline,
  through a ``QueueManager`` and ``sweepq.Queue``, gets of 1, 100 and 5,000, with and
  without ``MALLOC_ARENA_MAX=1`` (bench/memory.py).
* ``gc``: the longest garbage-collector pause while a backlog builds.
* ``replay``: the numba replay kernel (and, on request, the Spark pipeline).
* ``clients``: client connections against redis-py on a local redis-server (bench/clients.py).
* ``channel``: a channel between two processes against one served queue manager
  (bench/channels.py).
* ``queue``: ``sweepq.Queue`` / ``sweepq.AsyncQueue`` against ``queue.Queue``,
  ``asyncio.Queue`` and the persistent queues a Python user picks instead, and a backlog of ten
  times a memory budget (bench/queues.py).
* ``celery``: Celery's tasks per second through sweepq against Redis, the broker's peak
  resident memory under a backlog with no worker, and that backlog's drain by a worker
  (bench/celery_bench.py).
* ``instructions``: instructions per put+get pair and per message of ``put_many`` /
  ``get_many``, counted by valgrind's callgrind (bench/instructions.py), beside ``queue.Queue``;
  skipped with a notice where valgrind is absent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

SCENARIOS = (
    "throughput",
    "batch",
    "persistent",
    "durable",
    "retrieval",
    "sweep",
    "backlog",
    "memory",
    "gc",
    "replay",
    "clients",
    "channel",
    "queue",
    "celery",
    "instructions",
)

# What each scenario measures, one line each: `sweepq bench --help` lists them.
ABOUT = {
    "throughput": "in-memory put+get pairs and fill-then-drain against queue.Queue and collections.deque",
    "batch": "put_many / get_many against single puts and gets",
    "persistent": "the embedded persistent queues a Python user picks, beside sweepq's non-persistent queue",
    "durable": "persistent messages at the peers' guarantee, group commit, recovery time",
    "retrieval": "gets by CorrelId on a deep queue; browse and drain of a swept queue",
    "sweep": "sweep and unsweep bandwidth, lock holds, a swept queue's drain",
    "backlog": "consumers paused until a backlog waits, then drained while publishing goes on",
    "memory": "resident bytes per message in memory and swept; the memory budget's bound: peak resident memory "
    "against budget + baseline in a fill of --queue-backlog budgets of --queue-budget by two producers and its "
    "drain by gets of 1, 100 and 5,000, through QueueManager and sweepq.Queue with objects, with and without "
    "MALLOC_ARENA_MAX=1, each in a fresh process",
    "gc": "the longest garbage-collector pause while a backlog builds",
    "replay": "the numba replay kernel and `sweepq replay FILE`",
    "clients": "client connections against redis-py",
    "channel": "a channel between two processes against one served queue manager",
    "queue": "sweepq.Queue / AsyncQueue against queue.Queue, asyncio.Queue and persistent queues",
    "celery": "Celery's tasks through sweepq against Redis",
    "instructions": "instructions per operation under callgrind, beside queue.Queue",
}


@dataclass
class BenchOptions:
    messages: int = 30_000  # put+get pairs per round
    size: int = 1024
    rounds: int = 15
    batch: int = 100
    persistent_messages: int = 2_000
    memory_messages: int = 1_000_000
    memory_payload: int = 100
    sweep_messages: int = 100_000
    sweep_memory_messages: int = 1_000_000
    lock_runs: tuple[int, ...] = (1_000, 10_000, 100_000)
    concurrent_pairs: int = 200_000
    concurrent_backlog: int = 400_000
    concurrent_rounds: int = 3
    backlog: int = 500_000
    # 20 MB/s of 1 KiB messages: within what the background sweeper moves at its default 10 %
    # duty on 2 cores; a faster publisher outruns it (see in_memory_at_drain_start).
    backlog_rate: float = 20_000.0
    backlog_size: int = 1024
    backlog_interval: float = 1.0
    gc_messages: int = 1_000_000
    replay_events_m: float = 10.0
    replay_file_events_m: float = 20.0  # `sweepq replay FILE` end to end, in a subprocess
    pipeline_events_m: float = 0.0
    durable_messages: int = 2_000  # process-crash-safe put+get, per round
    durable_sync_messages: int = 300  # per producer round, and per 6 power-safe rounds (an fsync each)
    durable_producers: int = 8
    durable_rounds: int = 7
    recovery_messages: int = 1_000_000
    durable_dir: str | None = None  # where the stores and the fsync floor's file go (the same disk)
    retrieval_depth: int = 100_000  # messages on the queue a get by CorrelId searches
    browse_messages: int = 1_000_000  # messages browsed in memory and swept
    clients_concurrent: int = 64  # client connections at once (clients)
    clients_held: int = 1_000  # idle connections held open at once (clients)
    channel_messages: int = 20_000  # messages per transfer, QM1 to QM2 (channel)
    channel_light_rate: float = 200.0  # msgs/s of the latency run (channel)
    channel_down_seconds: float = 60.0  # how long QM2 is down (channel)
    channel_down_rate: float = 10_000.0  # msgs/s QM1 puts meanwhile (channel)
    queue_messages: int = 30_000  # put+get pairs per round, in memory and asyncio (queue)
    queue_persistent_messages: int = 1_000  # items put then got per round, path= and its peers (queue)
    queue_budget: int = 50_000_000  # the memory budget of the backlog, bytes (queue)
    queue_backlog_factor: float = 10.0  # the backlog, in budgets (queue)
    celery_tasks: int = 20_000  # tasks through a worker, per broker (celery)
    celery_backlog: int = 1_000_000  # tasks waiting with no worker, then drained by one (celery)
    celery_budget: int = 100_000_000  # sweepq serve's memory budget under that backlog, bytes (celery)
    instructions_n: int = 50_000  # operations per measured child under callgrind (instructions)
    instructions_rows: tuple[str, ...] = ()  # the rows counted (instructions); () for every one
    quick: bool = False


# CI-sized: every scenario runs in seconds, and the figures keep their shape.
QUICK = {
    "messages": 3_000,
    "rounds": 3,
    "persistent_messages": 200,
    "memory_messages": 50_000,
    "sweep_messages": 5_000,
    "sweep_memory_messages": 5_000,
    "lock_runs": (1_000, 5_000),
    "concurrent_pairs": 5_000,
    "concurrent_backlog": 10_000,
    "concurrent_rounds": 1,
    "backlog": 20_000,
    "backlog_rate": 10_000.0,
    "backlog_interval": 0.5,
    "gc_messages": 50_000,
    "replay_events_m": 0.2,
    "replay_file_events_m": 0.2,
    "durable_messages": 200,
    "durable_sync_messages": 40,
    "durable_rounds": 2,
    "recovery_messages": 20_000,
    "retrieval_depth": 3_000,
    "browse_messages": 20_000,
    "clients_concurrent": 16,
    "clients_held": 200,
    "channel_messages": 2_000,
    "channel_down_seconds": 4.0,
    "channel_down_rate": 5_000.0,
    "queue_messages": 3_000,
    "queue_persistent_messages": 200,
    "queue_budget": 2_000_000,
    "celery_tasks": 1_000,
    "celery_backlog": 20_000,
    "instructions_n": 20_000,  # below this, the warm-up's one-off allocations show in the difference
}


@dataclass
class Report:
    """The figures (for JSON) and the table rows (for Markdown) that the scenarios add."""

    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    say: Callable[[str], None] = print

    def row(self, scenario: str, what: str, figure: str, ratio: str = "") -> None:
        self.rows.append((scenario, what, figure, ratio))

    def notice(self, text: str) -> None:
        self.notices.append(text)
        self.say(f"notice: {text}")

    def markdown(self) -> str:
        out = ["| scenario | what | figure | ratio, same run |", "|---|---|---|---|"]
        out += [f"| {s} | {w} | {f} | {r} |" for s, w, f, r in self.rows]
        if self.notices:
            out.append("")
            out += [f"- {n}" for n in self.notices]
        return "\n".join(out)


def run_info() -> dict:
    """What a figure depends on besides the code: when, on what machine, under what load and
    at which commit it was measured. Written into ``bench.json`` and above every table
    ``--out`` writes, so that a doc quoting a table says which run it is."""
    import datetime
    import platform

    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=os.path.dirname(os.path.abspath(__file__)),
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores{', ' + model if model else ''}; {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "commit": commit,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def heading(doc: dict) -> str:
    """What a run's tables stand under: the command that wrote them, and the run's date,
    commit, machine and load (at its start and its end)."""
    info = doc.get("run", {})
    return (
        f"One run, `{doc['command']}`: {info.get('date', '?')}, commit {info.get('commit') or '?'}; "
        f"{info.get('machine', '?')}; load average {info.get('load', '?')} at the start, "
        f"{info.get('load_after', '?')} at the end."
    )


# The rows of a run the README quotes (docs/figures/headline.md): a scenario, and a pattern
# its row's "what" matches. Each says what a user weighs sweepq by first, beside its baseline.
HEADLINE = (
    ("queue", r"^in memory, put\+get pairs, a small dict: sweepq\.Queue$"),
    ("queue", r"^asyncio, put\+get pairs through await: sweepq\.AsyncQueue$"),
    ("instructions", r"^sweepq\.Queue\(\) put\+get pair"),
    ("instructions", r"^put_many/get_many"),
    ("queue", r"^backlog of .*: sweepq\.Queue\(memory_budget=\)$"),
    ("queue", r"^goal: path= >= 5 x SQLiteQueue"),
    ("durable", r'process-crash-safe: sweepq sync="os"$'),
    ("clients", r"concurrent clients .*: sweepq$"),
    ("celery", r"^tasks/s, [\d,]+ tasks, .*\(sweepq\)$"),
)


def headline(rows: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    """The rows of ``HEADLINE``, in its order: for each pattern, the rows it matches."""
    return [r for scenario, what in HEADLINE for r in rows if r[0] == scenario and re.search(what, r[1])]


def tables(doc: dict) -> dict[str, str]:
    """The Markdown files ``--out`` writes for a run (``doc``, as in ``bench.json``): ``bench.md``
    (the heading, then every row), ``run.md`` (the heading alone), ``headline.md`` (the heading
    and the rows of ``HEADLINE``, which the README quotes; in a run of every scenario it
    names) and one ``<scenario>.md`` a
    scenario, with its own rows and the notices that name it. The docs quote these files as
    they are, under ``run.md`` (tests/test_doc_figures.py), never a figure typed by hand."""
    rows = [tuple(r) for r in doc["rows"]]
    notices = list(doc.get("notices", []))
    out = {
        "bench.md": heading(doc) + "\n\n" + Report(rows=rows, notices=notices).markdown() + "\n",
        "run.md": heading(doc) + "\n",
    }
    if {name for name, _ in HEADLINE} <= set(doc["figures"]):  # a whole run, as the README quotes
        top = headline(rows)
        out["headline.md"] = heading(doc) + "\n\n" + Report(rows=top).markdown() + "\n"
    for name in doc["figures"]:
        mine = [r for r in rows if r[0] == name]
        said = [n for n in notices if n.startswith(name + ":")]
        if mine or said:
            out[f"{name}.md"] = Report(rows=mine, notices=said).markdown() + "\n"
    return out


def write_out(doc: dict, directory: str) -> list[str]:
    """Write a run to ``directory``: ``bench.json`` (the figures, the options, the rows, the
    notices and ``run``: date, machine, load, commit) and the Markdown of ``tables``. Returns
    the paths written."""
    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, "bench.json")]
    with open(paths[0], "w") as f:
        json.dump(doc, f, indent=2, default=str)
        f.write("\n")
    for name, text in tables(doc).items():
        paths.append(os.path.join(directory, name))
        with open(paths[-1], "w") as f:
            f.write(text)
    return paths


def _rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M/s"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k/s"
    return f"{x:.0f} /s"


# -- in memory -------------------------------------------------------------------------------


def throughput(o: BenchOptions, report: Report, step) -> dict:
    from .timing import interleaved
    from .workloads import SweepqPairs, drain_deque, drain_queue_queue, pairs_deque, pairs_queue_queue

    n, payload = o.messages, b"x" * o.size
    sq = SweepqPairs()
    out: dict = {}
    try:
        for kind, contenders in (
            (
                "put+get pairs",
                {
                    "queue.Queue": lambda: pairs_queue_queue(n, payload),
                    "deque+lock": lambda: pairs_deque(n, payload),
                    "sweepq": lambda: sq(n, payload),
                },
            ),
            (
                f"put {n:,} then get them",
                {
                    "queue.Queue": lambda: drain_queue_queue(n, payload),
                    "deque+lock": lambda: drain_deque(n, payload),
                    "sweepq": lambda: sq.fill_drain(n, payload),
                },
            ),
        ):
            res = interleaved(contenders, ops=n, rounds=o.rounds, progress=lambda s: step())
            base = res["queue.Queue"].rate
            out[kind] = {k: {"per_s": r.rate, "ratio_vs_queue_Queue": r.rate / base} for k, r in res.items()}
            for k, r in out[kind].items():
                report.row(
                    "throughput",
                    f"{kind}, {o.size} B, non-persistent: {k}",
                    _rate(r["per_s"]),
                    f"{r['ratio_vs_queue_Queue']:.2f} x queue.Queue",
                )
    finally:
        sq.close()
    return out


def batch(o: BenchOptions, report: Report, step) -> dict:
    from sweepq.engine import Handle

    if not hasattr(Handle, "put_many"):
        report.notice("batch: skipped, this sweepq has no Handle.put_many / get_many yet (the core batch issue)")
        return {"skipped": "Handle.put_many / get_many are not in this build"}
    from .timing import interleaved
    from .workloads import SweepqPairs, drain_deque, drain_queue_queue

    n, payload, b = o.messages, b"x" * o.size, o.batch
    sq = SweepqPairs()
    try:
        res = interleaved(
            {
                "queue.Queue": lambda: drain_queue_queue(n, payload),
                "deque+lock": lambda: drain_deque(n, payload),
                "sweepq put/get": lambda: sq.fill_drain(n, payload),
                f"sweepq put_many/get_many x{b}": lambda: sq.fill_drain_many(n, payload, b),
            },
            ops=n,
            rounds=o.rounds,
            progress=lambda s: step(),
        )
    finally:
        sq.close()
    single, base = res["sweepq put/get"].rate, res["queue.Queue"].rate
    out = {
        k: {"per_s": r.rate, "ratio_vs_single": r.rate / single, "ratio_vs_queue_Queue": r.rate / base}
        for k, r in res.items()
    }
    for k, r in out.items():
        report.row(
            "batch",
            f"put {n:,} then get them, {o.size} B: {k}",
            _rate(r["per_s"]),
            f"{r['ratio_vs_single']:.2f} x sweepq put/get, {r['ratio_vs_queue_Queue']:.2f} x queue.Queue",
        )
    return out


def _peers(size: int) -> dict[str, Callable[[str], tuple]]:
    """Each persistent peer as a factory: directory -> (put, get, close). Absent ones are left out."""
    peers: dict[str, Callable[[str], tuple]] = {}
    try:
        import persistqueue

        def sqlite(d):
            q = persistqueue.SQLiteQueue(d, auto_commit=True)
            return q.put, lambda: q.get(block=False), lambda: None

        def fileq(d):
            q = persistqueue.Queue(d, autosave=True)
            return q.put, lambda: q.get(block=False), lambda: None

        peers["persist-queue SQLiteQueue"] = sqlite
        peers["persist-queue Queue (file)"] = fileq
    except ImportError:
        pass
    try:
        import diskcache

        def dq(d):
            q = diskcache.Deque(directory=d)
            return q.append, q.popleft, lambda: q.directory and None

        peers["diskcache.Deque"] = dq
    except ImportError:
        pass
    try:
        from queuelib import FifoDiskQueue

        def ql(d):
            q = FifoDiskQueue(d)
            return q.push, q.pop, q.close

        peers["queuelib FifoDiskQueue"] = ql
    except ImportError:
        pass
    return peers


def persistent(o: BenchOptions, report: Report, step) -> dict:
    import queue as stdqueue

    from .workloads import SweepqPairs

    peers = _peers(o.size)
    for name in ("persist-queue SQLiteQueue", "diskcache.Deque", "queuelib FifoDiskQueue"):
        if name not in peers:
            report.notice(f"persistent: {name} is not installed, skipped (pip install 'sweepq[bench]')")
    n, payload = o.persistent_messages, b"x" * o.size
    sq = SweepqPairs()

    def in_memory(d):
        q = stdqueue.Queue()
        return q.put, q.get_nowait, lambda: None

    def sweepq_nonpersistent(d):
        return sq.h.put, sq.h.get, lambda: None

    contenders = {"queue.Queue (in memory)": in_memory, "sweepq (non-persistent)": sweepq_nonpersistent, **peers}
    best = dict.fromkeys(contenders, float("inf"))
    try:
        for _ in range(o.rounds):
            for name, make in contenders.items():
                with tempfile.TemporaryDirectory() as d:
                    put, get, close = make(os.path.join(d, "q"))
                    t0 = time.perf_counter()
                    for _ in range(n):
                        put(payload)
                    for _ in range(n):
                        get()
                    best[name] = min(best[name], time.perf_counter() - t0)
                    close()
            step()
    finally:
        sq.close()
    base = n / best["queue.Queue (in memory)"]
    out = {k: {"per_s": n / s, "ratio_vs_queue_Queue": n / s / base} for k, s in best.items()}
    for k, r in out.items():
        report.row(
            "persistent",
            f"put {n:,} then get them, {o.size} B: {k}",
            _rate(r["per_s"]),
            f"{r['ratio_vs_queue_Queue']:.3f} x queue.Queue",
        )
    report.notice(
        "persistent: sweepq's row here is non-persistent, beside the in-memory queue.Queue, not at the peers' "
        "guarantee; sweepq's persistent mode at their guarantee is the `durable` scenario"
    )
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _filesystem(path: str) -> str:
    """The type of the filesystem ``path`` is on (from /proc/mounts; "" when unknown)."""
    path, best, kind = os.path.realpath(path), "", ""
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                mnt = parts[1]
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, kind = mnt, parts[2]
    except OSError:
        pass
    return kind


def durable(o: BenchOptions, report: Report, step) -> dict:
    from . import durable as d

    base = o.durable_dir or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    fs = _filesystem(base)
    report.notice(
        f"durable: stores and the fsync floor's file in {base} ({fs or 'filesystem unknown'}); "
        "pass --durable-dir to measure another disk"
    )
    if fs in ("tmpfs", "ramfs"):
        report.notice(f"durable: {base} is in memory ({fs}): fsync is free there, the power-safe rows are moot")
    out: dict = {"dir": base, "filesystem": fs}

    # 1. Process-crash-safe.
    cs = d.crash_safe(o.durable_messages, o.size, o.durable_rounds, base, step)
    out["crash_safe"] = cs
    for name in cs["missing"]:
        report.notice(f"durable: {name} is not installed, its rows are skipped (pip install 'sweepq[bench]')")
    what = f"put {o.durable_messages:,} then get them, {o.size} B, process-crash-safe"
    for name, r in cs["contenders"].items():
        ratio = ""
        if "ratio_vs_persist_queue" in r:
            ratio = (
                f"{r['ratio_vs_persist_queue']:.2f} x {cs['persist_queue_baseline'].removeprefix('persist-queue ')} "
                f"(paired median; best rounds {r['best_ratio_vs_persist_queue']:.2f} x)"
            )
        if name.startswith("sweepq") and ratio:
            goal = d.GOAL_CRASH_SAFE_VS_PERSIST_QUEUE
            ratio += f" (goal >= {goal:g} x: {_met(r['ratio_vs_persist_queue'] >= goal)})"
        report.row(
            "durable",
            f"{what}: {name}",
            f"{_rate(r['pairs_per_s'])} ({_rate(r['put_per_s'])} put, {_rate(r['get_per_s'])} get)",
            ratio,
        )
    if cs.get("sweepq_vs_persist_queue", d.GOAL_CRASH_SAFE_VS_PERSIST_QUEUE) < d.GOAL_CRASH_SAFE_VS_PERSIST_QUEUE:
        prof = d.profile_put_get(o.durable_messages, o.size, "os", base)
        out["crash_safe_profile"] = prof
        top = ", ".join(f"{r['function']} {r['share']:.0%}" for r in prof["top"][:5])
        writes = (
            "the store's writes run compiled, inside the calls below (cProfile sees none of them; "
            '`python -m sweepq.bench.instructions "durable os"` counts them)'
            if prof["compiled"]
            else f"the store's writes {prof['store_write_share']:.0%} of the time (of which the RocksDB write call "
            f"{prof['rocksdb_write_share']:.0%})"
        )
        report.notice(
            f'durable: sweepq sync="os" under its goal; cProfile of its put+get: {writes}; costliest by own time: {top}'
        )
    if "persist-queue" not in cs["missing"]:
        with tempfile.TemporaryDirectory(dir=base) as t:
            got = {s: d.sqlite_synchronous(os.path.join(t, s or "default"), s) for s in ("NORMAL", "OFF", None)}
        out["sqlite_synchronous"] = got
        report.notice(
            "durable: persist-queue SQLiteQueue (auto_commit=True, journal_mode=WAL) read back PRAGMA synchronous "
            f"{got['NORMAL']} and {got['OFF']} where set to NORMAL and OFF (process-crash-safe: each commit's WAL "
            f"frames reach the OS), {got[None]} by default (2 = FULL: an fsync per commit, power-safe)"
        )

    # 2. Power-safe, one producer, against the fsync floor.
    # The same messages in POWER_SAFE_SPLIT x more, shorter rounds (see bench/durable.py).
    n_ps, rounds_ps = max(5, o.durable_sync_messages // d.POWER_SAFE_SPLIT), o.durable_rounds * d.POWER_SAFE_SPLIT
    ps = d.power_safe(n_ps, o.size, rounds_ps, base, step)
    out["power_safe"] = ps
    what = f"put {n_ps:,} then get them, {o.size} B, power-safe (a put and a get: one fsync each)"
    for name, r in ps["contenders"].items():
        ratio = (
            f"{r['ratio_vs_floor']:.2f} x floor (paired median of {rounds_ps} rounds; "
            f"all rounds {r['all_rounds_ratio_vs_floor']:.2f} x)"
        )
        fig = f"{_rate(r['ops_per_s'])} synced ops"
        if "syncs_per_op" in r:
            fig += f", {r['syncs_per_op']:.2f} syncs per op"
        if name.startswith("sweepq"):
            goal = d.GOAL_POWER_SAFE_VS_FLOOR
            ratio += f" (goal >= {goal:g} x: {_met(r['ratio_vs_floor'] >= goal)})"
        report.row("durable", f"{what}: {name}", fig, ratio)

    # 3. Producers under group commit.
    k = o.durable_producers
    pr = d.producers(o.durable_sync_messages, o.size, k, o.durable_rounds, base, step)
    out["producers"] = pr
    ceiling = pr["ceiling"]
    hows = {
        "put": 'sync="commit", persistent put outside syncpoint',
        "put+commit": 'sync="commit", persistent put under syncpoint, commit each',
        d.BARE: "floor: a bare group commit (a pwrite in place, then an fdatasync shared by every waiter; "
        "no queue manager)",
        d.BARE_OWN: "floor: a bare fdatasync per write (a pwrite in place, then the thread's own fdatasync, "
        "shared by the kernel; no queue manager)",
    }
    for kind in ("put", "put+commit", *d.BARES):
        for p in (1, k):
            r = pr[f"{kind}, {p} producer{'s' if p > 1 else ''}"]
            ratio = ""
            if p > 1 and kind in d.BARES:
                ratio = f"{r['ratio_vs_one']:.2f} x 1 thread, paired median"
            elif p > 1:
                ratio = f"{r['ratio_vs_one']:.2f} x 1 producer, paired median"
                ratio += f" (ceiling, the better bare floor below: {ceiling:.2f} x)"
                goal = d.GOAL_PRODUCERS_VS_ONE
                ratio += f" (goal >= {goal:g} x: {_met(r['ratio_vs_one'] >= goal)})"
            threads = f"{p} {'producer ' if kind not in d.BARES else ''}thread{'s' if p > 1 else ''}"
            report.row(
                "durable",
                f"{pr['messages']:,} x {o.size} B, {hows[kind]}: {threads}",
                f"{_rate(r['per_s'])}, {r['syncs_per_msg']:.2f} syncs per message",
                ratio,
            )

    # 4. Recovery.
    rc = d.recovery(o.recovery_messages, base, progress=step)
    out["recovery"] = rc
    rec, b, opens = rc["recovery"], rc["build"], rc["opens"]
    walls = " / ".join(f"{t['open_seconds']:.2f}" for t in opens)
    cpus = " / ".join(f"{t['open_cpu_seconds']:.2f}" for t in opens)
    worst = max(t["open_seconds"] for t in opens)
    report.row(
        "durable",
        f"QueueManager.open(path) with the sweeper off of {o.recovery_messages:,} persistent 100-200 B messages, "
        f"{b['swept']:,} swept in {b['blobs']:,} blobs ({len(opens)} fresh processes, one after the other)",
        f"{walls} s ({cpus} s of CPU; the last one's qm.recovery: {rec['seconds']:.2f} s, "
        f"{rec['messages']:,} messages, "
        f"{rec['swept']:,} swept, {len(rec['damaged'])} damaged)",
        f"goal <= {d.GOAL_RECOVERY_SECONDS:g} s in every one: {_met(worst <= d.GOAL_RECOVERY_SECONDS)}",
    )
    c = rc.get("check")
    if c:
        report.row(
            "durable",
            "drain after the last open, every message checked against its put order",
            f"{c['drained']:,} of {o.recovery_messages:,} back"
            + (", in put order" if c["in_put_order"] else f", first out of order: {c['first_out_of_order']}"),
            "",
        )
    if "profile" in rc:
        prof = rc["profile"]
        phases = "; ".join(f"{k} {v['share']:.0%}" for k, v in prof["phases"].items() if v["seconds"] > 0)
        top = ", ".join(f"{r['function']} {r['share']:.0%}" for r in prof["top"][:6])
        report.notice(
            f"durable: recovery over its goal; cProfile of the open ({prof['seconds']:.1f} s under the profiler), "
            f"by phase: {phases}. Costliest functions by own time: {top}"
        )
    return out


# -- the sweeper -----------------------------------------------------------------------------


def sweep(o: BenchOptions, report: Report, step) -> dict:
    from . import sweeping

    out: dict = {}
    for size, n in ((100, o.sweep_messages), (1024, max(1_000, o.sweep_messages // 4))):
        for freeze in (False, True):
            r = sweeping.rates(n, size, freeze=freeze)
            out[f"rates_{size}B{'_frozen' if freeze else ''}"] = r
            tag = f"{n:,} x {size} B{', gc.freeze()' if freeze else ''}"
            for way in ("sweep", "unsweep"):
                report.row(
                    "sweep",
                    f"{way} MB/s, {tag}",
                    f"{r[f'{way}_MBps']:.1f} MB/s",
                    f"{r[f'{way}_ratio']:.2f} x store alone",
                )
            step()
    holds = sweeping.lock_holds(o.lock_runs)
    out["lock_holds"] = holds
    for n, h in holds.items():
        report.row(
            "sweep",
            f"queue lock held per sweep, run of {n:,}",
            f"p99 {h['p99_ms']:.2f} ms (its own CPU: p99 {h['cpu_p99_ms']:.2f} ms)",
            "",
        )
    step()
    d = sweeping.drain_latency(o.sweep_messages)
    out["drain"] = d
    report.row(
        "sweep",
        f"get p99 draining across {d['blob_boundaries']} blob boundaries",
        f"{d['drain_p99_us']:.1f} us",
        f"{d['p99_ratio']:.2f} x never swept",
    )
    step()
    from .drain import drain_rates

    dr = drain_rates(2 * o.sweep_messages, 100, rounds=max(1, min(3, o.rounds)))
    out["drain_rate"] = dr
    report.row(
        "sweep",
        f"drain {dr['messages']:,} x 100 B by get, fully swept ({dr['blobs']} blobs)",
        _rate(dr["swept_msgs_per_s"]),
        f"{dr['ratio']:.2f} x the same from memory; read-ahead ready at "
        f"{dr['readahead_hits']} of {dr['readahead_hits'] + dr['readahead_misses']} blobs",
    )
    step()
    c = sweeping.concurrent(o.concurrent_pairs, o.concurrent_backlog, rounds=o.concurrent_rounds)
    out["concurrent"] = c
    report.row(
        "sweep",
        "put+get pairs on a queue while another is swept",
        _rate(c["during_sweep_pairs_per_s"]),
        f"{c['ratio']:.2f} x no sweep",
    )
    step()
    return out


_BACKLOG_CHILD = r"""
import json, resource, sys, threading, time
from sweepq.engine import OO, MQError, QueueManager, SweeperSettings
from sweepq.sweeper import SweepPolicy
sweep, n, rate = sys.argv[1] == "1", int(sys.argv[2]), float(sys.argv[3])
size, interval = int(sys.argv[4]), float(sys.argv[5])
qm = QueueManager("BACKLOG", sweeping=SweeperSettings(run=sweep, policy=SweepPolicy(interval=interval)))
qm.define_queue("Q", max_depth=10 * n + 1_000_000)
c = qm.connect(); h = c.open("Q", OO.OUTPUT | OO.INPUT_SHARED)
payload = b"m" * size
stop = threading.Event(); published = [0]; waiting = threading.Event()
def publisher():            # one publisher at a fixed rate, before and during the drain
    pc = qm.connect(); ph = pc.open("Q", OO.OUTPUT); start = time.perf_counter(); k = 0
    while not stop.is_set():
        for _ in range(100):
            ph.put(payload)
        k += 100; published[0] = k
        if k >= n:
            waiting.set()
        ahead = start + k / rate - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)
t0 = time.perf_counter()
t = threading.Thread(target=publisher, daemon=True); t.start()
waiting.wait()              # consumers paused until the backlog waits
fill = time.perf_counter() - t0
in_memory = qm.stats()["*"].msgs_in_memory  # did the sweeper keep up with the publisher?
t1 = time.perf_counter(); got = 0; deadline = t1 + 600; target = published[0]
while time.perf_counter() < deadline:
    try:
        h.get(); got += 1
    except MQError:         # caught up: the queue is empty, only new publishes arrive
        if got >= target:
            break
        time.sleep(0.001)
drain = time.perf_counter() - t1
stop.set(); t.join()
st = qm.stats()["*"]
print(json.dumps({"sweeping": sweep, "backlog": target, "fill_seconds": fill, "drain_seconds": drain, "got": got,
                  "published_during_drain": published[0],
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "unswept": st.msgs_unswept, "in_memory_at_drain_start": in_memory}))
qm.close()
"""


def backlog(o: BenchOptions, report: Report, step) -> dict:
    out = {}
    for sweep in (True, False):
        r = subprocess.run(
            [
                *(sys.executable, "-c", _BACKLOG_CHILD, "1" if sweep else "0"),
                *map(str, (o.backlog, o.backlog_rate, o.backlog_size, o.backlog_interval)),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        out["with_sweeper" if sweep else "without_sweeping"] = json.loads(r.stdout.strip().splitlines()[-1])
        step()
    w, wo = out["with_sweeper"], out["without_sweeping"]
    out["rss_ratio"] = w["peak_rss"] / wo["peak_rss"]
    out["drain_ratio"] = w["drain_seconds"] / wo["drain_seconds"] if wo["drain_seconds"] else None
    what = f"backlog of {o.backlog:,} x {o.backlog_size} B at {o.backlog_rate:,.0f}/s, drained as publishing goes on"
    report.row(
        "backlog",
        f"{what}: peak RSS (sweep every {o.backlog_interval:g} s)",
        f"{w['peak_rss'] / 1e6:.0f} MB vs {wo['peak_rss'] / 1e6:.0f} MB "
        f"({w['in_memory_at_drain_start']:,} vs {wo['in_memory_at_drain_start']:,} messages in memory)",
        f"{out['rss_ratio']:.2f} x without sweeping",
    )
    report.row(
        "backlog",
        f"{what}: drain time",
        f"{w['drain_seconds']:.2f} s vs {wo['drain_seconds']:.2f} s",
        f"{out['drain_ratio']:.2f} x without sweeping" if out["drain_ratio"] else "",
    )
    return out


# -- memory and the garbage collector -----------------------------------------------------------


def memory(o: BenchOptions, report: Report, step) -> dict:
    from .memory import resident_bytes_per_message
    from .sweeping import swept_memory

    fig = resident_bytes_per_message(o.memory_messages, o.memory_payload)
    step()
    report.row(
        "memory",
        f"resident bytes per in-memory message beyond its {o.memory_payload} B payload ({o.memory_messages:,})",
        f"{fig['overhead_per_message']:.0f} B",
        "",
    )
    out = {"in_memory": fig}
    for correl in (False, True):
        m = swept_memory(o.sweep_memory_messages, correl=correl)
        out[f"swept{'_correl' if correl else ''}"] = m
        report.row(
            "memory",
            f"bytes per swept message{' with a CorrelId' if correl else ''} ({m['measured']:,})",
            f"{m['bytes_per_swept_msg']:.1f} B",
            "",
        )
        step()
    out["fill_and_drain"] = fill_and_drain_rows(o, report, step)
    return out


def fill_and_drain_rows(o: BenchOptions, report: Report, step) -> list[dict]:
    """The resident bound in a fill and in its drain (bench/memory.py ``fill_and_drain``):
    a backlog of ``queue_backlog_factor`` times ``queue_budget`` by two producers, then got
    back in gets of each of ``DRAIN_BATCHES``, through a ``QueueManager`` and through
    ``sweepq.Queue`` with object items, each with and without ``MALLOC_ARENA_MAX=1``, each
    in a fresh subprocess run one at a time (``--quick``: the cases of ``drain_cases``)."""
    from sweepq.engine.sizes import format_size

    from .memory import DRAIN_KINDS, GOAL_BOUND, drain_cases, fill_and_drain

    backlog = int(o.queue_budget * o.queue_backlog_factor)
    figs = []
    for kind, batch, arena in drain_cases(o.quick):
        label = DRAIN_KINDS[kind]
        f = fill_and_drain(kind, o.queue_budget, backlog, batch, arena)
        figs.append(f)
        step()
        fill, drain = f["fill"], f["drain"]
        bound = f["budget"] + f["baseline"]
        worst = max(fill["ratio"], drain["ratio"])
        over = fill["samples_over"] + drain["samples_over"]
        gets = "get" if batch == 1 else f"get_many({batch:,})"
        report.row(
            "memory",
            f"{label}: {format_size(backlog)} ({o.queue_backlog_factor:g} x a {format_size(o.queue_budget)} "
            f"budget) by 2 producers, then {gets}; MALLOC_ARENA_MAX={'1' if arena else 'unset'}",
            f"peak RSS fill {fill['peak_rss'] / 1e6:.1f} MB, drain {drain['peak_rss'] / 1e6:.1f} MB; "
            f"budget + baseline {bound / 1e6:.1f} MB",
            f"fill {fill['ratio']:.2f} x, drain {drain['ratio']:.2f} x (goal <= {GOAL_BOUND:g} x: "
            f"{_met(worst <= GOAL_BOUND)}); count over the budget in {over} of "
            f"{fill['samples'] + drain['samples']} samples; "
            f"{'every item once, in order' if f['every_item_once_in_order'] else '**not every item once**'}",
        )
    return figs


_GC_CHILD = r"""
import collections, gc, json, sys, time
from sweepq.engine import OO, QueueManager, SweeperSettings
kind, n = sys.argv[1], int(sys.argv[2])
payloads = [b"%08d" % i + b"p" * 92 for i in range(1000)]
pauses = []; start = [0.0]
def cb(phase, info):
    if phase == "start":
        start[0] = time.perf_counter()
    else:
        pauses.append(time.perf_counter() - start[0])
if kind == "deque":
    d = collections.deque(); put = d.append; run_sweep = None
else:
    qm = QueueManager("GC", sweeping=SweeperSettings(run=False)); qm.define_queue("Q", max_depth=n + 10)
    put = qm.connect().open("Q", OO.OUTPUT).put
    run_sweep = qm.sweeper.run_once if kind == "sweepq-sweeping" else None
gc.collect(); gc.callbacks.append(cb)
t0 = time.perf_counter()
for i in range(n):
    put(payloads[i % 1000])
    if run_sweep is not None and i % 50_000 == 49_999:
        run_sweep()
secs = time.perf_counter() - t0
gc.callbacks.remove(cb)
print(json.dumps({"kind": kind, "messages": n, "collections": len(pauses), "max_pause_ms": max(pauses, default=0) * 1e3,
                  "total_gc_ms": sum(pauses) * 1e3, "seconds": secs}))
"""


def gc_pauses(o: BenchOptions, report: Report, step) -> dict:
    out = {}
    for kind in ("deque", "sweepq", "sweepq-sweeping"):
        r = subprocess.run(
            [sys.executable, "-c", _GC_CHILD, kind, str(o.gc_messages)], capture_output=True, text=True, check=True
        )
        out[kind] = json.loads(r.stdout.strip().splitlines()[-1])
        step()
    base = out["deque"]["max_pause_ms"]
    for kind, r in out.items():
        label = {"deque": "collections.deque", "sweepq": "sweepq, no sweep", "sweepq-sweeping": "sweepq, swept"}[kind]
        report.row(
            "gc",
            f"longest GC pause while {o.gc_messages:,} x 100 B build up: {label}",
            f"{r['max_pause_ms']:.2f} ms ({r['collections']} collections, {r['total_gc_ms']:.0f} ms in all)",
            f"{r['max_pause_ms'] / base:.1f} x deque" if base > 0 else "",
        )
    return out


def replay(o: BenchOptions, report: Report, step) -> dict:
    from . import replay_bench

    k = replay_bench.kernel(o.replay_events_m)
    step()
    report.row(
        "replay",
        f"replay kernel, {k['numba']['events']:,} events on 100 queues",
        f"{k['numba']['events_per_s'] / 1e6:.1f} M events/s",
        f"{k['ratio']:.0f} x interpreted",
    )
    out = {"kernel": k}
    e = replay_bench.end_to_end(o.replay_file_events_m)
    out["end_to_end"] = e
    rss = e["rss_bytes_per_event"]
    report.row(
        "replay",
        f"sweepq replay FILE end to end (Parquet read to metrics written), {e['events']:,} events",
        f"{e['events_per_s'] / 1e6:.1f} M events/s",
        f"{rss:.1f} B peak RSS per event" if rss else "",
    )
    step()
    if o.pipeline_events_m:
        p = replay_bench.pipeline(o.pipeline_events_m)
        out["pipeline"] = p
        report.row(
            "replay", f"Spark pipeline end to end, {p['events']:,} events", f"{p['events_per_s'] / 1e6:.2f} M events/s"
        )
    step()
    return out


def retrieval(o: BenchOptions, report: Report, step: Callable[[], None]) -> dict:
    """Get by CorrelId with an index, without, and swept, against a linear scan of a Python
    list; browse of a swept queue against browsing it in memory and draining it (issue 9 §6)."""
    from . import browse
    from . import retrieval as r

    g = r.get_by_correl_id(o.retrieval_depth, gets=20 if o.quick else 100, rounds=o.rounds if o.quick else 3)
    step()
    what = f"get by CorrelId, {o.retrieval_depth:,} messages deep"
    names = {
        "list_scan": "linear scan of a Python list (baseline)",
        "indexed": "sweepq, index_type=CORREL_ID",
        "indexed_1k_deep": "sweepq, index_type=CORREL_ID, 1,000 deep",
        "unindexed": "sweepq, no index",
        "swept": "sweepq, no index, every message swept (per-blob summaries)",
    }
    for key, label in names.items():
        us = g["us_per_get"][key]
        ratio = (
            "1.00 x" if key == "list_scan" else f"{g['speedup_over_list_scan'][key]:.1f} x faster than the list scan"
        )
        if key.startswith("indexed"):
            ratio += f" (goal <= {g['goal_indexed_us']:g} us: {_met(us <= g['goal_indexed_us'])})"
        report.row("retrieval", f"{what}: {label}", f"{us:.1f} us a get", ratio)
    b = browse.run(o.browse_messages)
    step()
    mem, swept, drain = b["browse in memory"], b["browse swept"], b["drain swept (get_many)"]
    report.row("retrieval", f"browse {o.browse_messages:,} x 100 B in memory", _rate(mem), "1.00 x")
    report.row(
        "retrieval",
        "browse them swept (no blob comes back)",
        _rate(swept),
        f"{swept / mem:.2f} x in memory (goal >= 0.5 x: {_met(swept / mem >= 0.5)})",
    )
    report.row("retrieval", "drain them swept with get_many", _rate(drain), f"{drain / mem:.2f} x")
    return {"get_by_correl_id": g, "browse": b}


def clients(o: BenchOptions, report: Report, step) -> dict:
    from .clients import clients as run_clients

    return run_clients(o, report, step)


def channel(o: BenchOptions, report: Report, step) -> dict:
    from .channels import channel as run_channel

    return run_channel(o, report, step)


def queue(o: BenchOptions, report: Report, step) -> dict:
    from .queues import run as run_queue

    return run_queue(o, report, step)


def celery(o: BenchOptions, report: Report, step) -> dict:
    from .celery_bench import celery as run_celery

    return run_celery(o, report, step)


INSTRUCTION_SCENARIOS = ("pair", "pair interpreted", "batch", "Queue", "Queue bytes")
_INSTRUCTION_ROWS = {  # what each scenario's row says it counted (bench/instructions.py)
    "pair": "put+get pair, 100 B, one thread",
    "pair interpreted": "put+get pair, 100 B, one thread, the interpreted engine (SWEEPQ_PURE=1: no C compiler)",
    "batch": "put_many/get_many x100, per message, 100 B, one thread",
    "Queue": "sweepq.Queue() put+get pair, a small dict kept as the object, one thread",
    "Queue bytes": 'sweepq.Queue(serializer="bytes") put+get pair, 100 B, one thread',
}


_INSTRUCTION_BOUNDS = {"pair interpreted": 41_000}  # instructions per op at most (issue 30's goal)


def instructions(o: BenchOptions, report: Report, step) -> dict:
    """Instructions per operation under callgrind (bench/instructions.py): the hot path's
    figure that the machine's load does not move, beside ``queue.Queue`` in the same run."""
    from . import instructions as ins

    if shutil.which("valgrind") is None:
        report.notice("instructions: skipped, valgrind is not on the PATH (Debian: apt-get install valgrind)")
        return {"skipped": "valgrind is not on the PATH"}
    out = {}
    counted: dict[str, float] = {}  # a baseline two rows share is counted once

    def per_op(which: str) -> float:
        if which not in counted:
            counted[which] = ins.per_op(which, o.instructions_n, progress=step)
        else:
            step(), step()  # the two children it did not run
        return counted[which]

    for name in o.instructions_rows or INSTRUCTION_SCENARIOS:
        mine, base = ins.SCENARIOS[name]
        a = per_op(mine)
        b = per_op(base)
        out[name] = {"sweepq": a, "queue_Queue": b, "ratio": b / a}
        bound = _INSTRUCTION_BOUNDS.get(name)
        goal = "" if bound is None else f"; goal <= {bound:,}: {'met' if a <= bound else '**missed**'}"
        report.row(
            "instructions",
            f"{_INSTRUCTION_ROWS[name]} (callgrind, n={o.instructions_n:,})",
            f"{a:,.0f} instr/op",
            f"{b / a:.2f} x queue.Queue ({b:,.0f} instr/op){goal}",
        )
    return out


RUNNERS = {
    "throughput": throughput,
    "batch": batch,
    "persistent": persistent,
    "durable": durable,
    "retrieval": retrieval,
    "sweep": sweep,
    "backlog": backlog,
    "memory": memory,
    "gc": gc_pauses,
    "replay": replay,
    "clients": clients,
    "channel": channel,
    "queue": queue,
    "celery": celery,
    "instructions": instructions,
}


def steps(name: str, o: BenchOptions) -> int:
    """How many times a scenario calls ``step``: the length of its progress bar."""
    from .celery_bench import steps as celery_steps
    from .durable import POWER_SAFE_SPLIT, RECOVERY_OPENS
    from .memory import drain_cases

    return {
        "throughput": 2 * o.rounds,
        "batch": o.rounds,
        "persistent": o.rounds,
        # crash-safe and producers: a step a round; power-safe: POWER_SAFE_SPLIT x the rounds;
        # recovery: the build and each open
        "durable": (2 + POWER_SAFE_SPLIT) * o.durable_rounds + 1 + RECOVERY_OPENS,
        "retrieval": 2,
        "sweep": 8,
        "backlog": 2,
        "memory": 3 + len(drain_cases(o.quick)),
        "gc": 3,
        "replay": 3,
        "clients": 2 * o.rounds + 3,
        "channel": 2 * o.rounds + 3,
        "queue": 4 * o.rounds + 7,
        "celery": celery_steps(o),
        "instructions": 4 * len(o.instructions_rows or INSTRUCTION_SCENARIOS),
    }[name]


def run(names: list[str], o: BenchOptions, console=None) -> tuple[dict, Report]:
    """Run the scenarios with a progress bar each (on ``console``, stderr by default)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    report = Report(say=lambda s: console.print(s, markup=False))
    figures: dict = {}
    with Progress(
        TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        for name in names:
            task = progress.add_task(name, total=steps(name, o))
            figures[name] = RUNNERS[name](o, report, lambda task=task: progress.advance(task))
            progress.update(task, completed=steps(name, o))
    return figures, report
