"""``sweepq demo``: the memory-pressure demo, the README's first command.

Producers outpace a slow consumer on several queues, at several priorities, one of them
putting in units of work (and backing one out); the consumer gets under syncpoint and
writes an audit record per unit of work (and backs one out too). The slow queue sweeper
keeps what is in memory bounded by moving the surplus into zstd-compressed blobs in
RocksDB, under a memory budget; then the producers stop, the consumer catches up, and
every message comes back.

The same workload (same seed, same pacing) runs twice at once, each in its own subprocess
so the two resident-set figures do not mix: once with the sweeper and the budget, once
without sweeping. ``busy`` spinning processes (bench/busy.py) run beside the pair; several
busy loads run one pair after another. The parent shows live progress, then a table,
writes a PNG and a JSON of the figures, and verifies that every message arrived exactly
once and in order per producer, queue and priority; any violation makes it exit non-zero.
With ``clients`` (``--clients``) the producers and the consumer are client processes of the
run's queue manager instead of its threads (bench/demo_clients.py).

Every process it starts is tethered to it (bench/children.py): Ctrl-C (to the process
group or to the parent alone), SIGTERM or an error ends them all within a second and the
demo says what it left where; if the parent is killed outright, they end by themselves.
MB is 10^6 bytes throughout.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .busy import Busy, BusyLoad
from .children import Children, ignoring_interrupts, interrupts_as_ctrl_c, tether

DEFAULT_INTERVAL = 5.0  # the sweeper's own default (seed 003)
MB = 1_000_000  # the demo's unit: 10^6 bytes (not MiB)
DEFAULT_BUDGET = 100 * MB  # the sweeping run's memory budget
# The sweeping run's resident memory "held" within its budget when its peak is at most this
# times budget + baseline: a resident budget (engine/budget.py) counts resident memory as puts
# come, every budget/256 bytes, not at every allocation, so the peak between two counts and
# the allocator's slack are seen late (issue 24's goal: 1.15).
RESIDENT_TOLERANCE = 1.15
DEMO_FILES = ("demo.png", "demo.md", "demo.json", "peak.md")  # what a run writes in --out, in that order
PRIORITIES = (0, 4, 9)  # most messages are routine, a few urgent
PRIORITY_WEIGHTS = (70, 25, 5)
PUT_BATCH = 50  # the unit-of-work producer commits every PUT_BATCH puts
GET_BATCH = 10  # the consumer commits every GET_BATCH gets while slow
DRAIN_BATCH = 100  # ... and every DRAIN_BATCH gets while it catches up
RUN_KIND = "run process"  # what bench/children.py calls the runs' processes in a report


@dataclass
class DemoConfig:
    """One run of the workload. Every field reaches the run's subprocess (as JSON) and the
    figures' JSON, so a new knob is one field here (and its use in :func:`queue_manager`)."""

    queues: int = 3
    producers: int = 4
    messages: int = 600_000  # in all, over every producer
    size: int = 1024  # payload bytes
    seconds: float = 40.0  # how long the producers take to put them
    consumer_share: float = 0.1  # the slow consumer's rate, as a share of the producers'
    interval: float = DEFAULT_INTERVAL
    sample_every: float = 0.25
    seed: int = 1
    budget: int = DEFAULT_BUDGET  # bytes (0: none): MemorySettings(budget=) of the sweeping run
    counts: str = "resident"  # what the budget counts: MemorySettings(counts=), "resident" or "held"
    busy: int = 0  # spinning processes beside this run (bench/busy.py)
    policy: str = "page"  # the queues' memory_policy once the budget is reached (page, block, fail)
    sweep: bool = True
    clients: bool = False  # producers and consumer as client processes (bench/demo_clients.py)

    def per_producer(self) -> list[int]:
        if self.producers <= 0:
            return []
        base, rest = divmod(self.messages, self.producers)
        return [base + (1 if p < rest else 0) for p in range(self.producers)]


# -- exactly-once and order ---------------------------------------------------------------


class DeliveryChecker:
    """Checks, as messages are delivered, that each (producer, queue, priority) stream arrives
    exactly once and in order: sequence numbers 0, 1, 2, ... with no repeat, gap or swap.
    It keeps one counter per stream, so checking costs no memory per message."""

    def __init__(self) -> None:
        self.next: dict[tuple[int, int, int], int] = {}
        self.delivered = 0
        self.problems: list[str] = []

    def see(self, producer: int, queue: int, priority: int, seq: int) -> None:
        key = (producer, queue, priority)
        want = self.next.get(key, 0)
        self.delivered += 1
        if seq == want:
            self.next[key] = want + 1
            return
        what = "a duplicate" if seq < want else "out of order (or after a lost message)"
        if len(self.problems) < 20:
            self.problems.append(
                f"producer {producer}, queue {queue}, priority {priority}: got #{seq} when #{want} was due: {what}"
            )
        self.next[key] = max(want, seq + 1)

    def finish(self, expected: dict[tuple[int, int, int], int]) -> list[str]:
        """Every problem seen, plus every stream that did not deliver exactly what was put."""
        problems = list(self.problems)
        for key in sorted(set(expected) | set(self.next)):
            put, got = expected.get(key, 0), self.next.get(key, 0)
            if got != put:
                p, q, prio = key
                problems.append(f"producer {p}, queue {q}, priority {prio}: {put} put, {got} delivered")
        total = sum(expected.values())
        if self.delivered != total:
            problems.append(f"{self.delivered} deliveries for {total} messages put")
        return problems

    def state(self) -> dict:
        """What it has seen, as JSON (a consumer process reports it: bench/demo_clients.py)."""
        return {"next": [[*k, v] for k, v in self.next.items()], "delivered": self.delivered, "problems": self.problems}

    def absorb(self, state: dict) -> None:
        """Take over what another checker saw (:meth:`state`), as if it had seen it here."""
        for p, q, prio, v in state["next"]:
            self.next[(p, q, prio)] = max(self.next.get((p, q, prio), 0), v)
        self.delivered += state["delivered"]
        self.problems += state["problems"]


def header(producer: int, queue: int, priority: int, seq: int) -> bytes:
    return b"%d,%d,%d,%d;" % (producer, queue, priority, seq)


def parse(data: bytes) -> tuple[int, int, int, int]:
    p, q, prio, seq = data[: data.index(b";")].split(b",")
    return int(p), int(q), int(prio), int(seq)


def _bodies(size: int, n: int = 2048) -> list[bytes]:
    """JSON-like order records with some entropy: they compress the way real messages do."""
    rng = random.Random(7)
    out = []
    for i in range(n):
        head = b'{"order":%d,"customer":"c%05d","status":"paid","note":"' % (i, rng.randrange(100_000))
        noise = rng.randbytes(max(0, size // 5)).hex().encode()
        text = b" shipped to warehouse %d, aisle %d;" % (rng.randrange(40), rng.randrange(400))
        out.append((head + noise + text * (size // len(text) + 1))[: max(0, size - 2)] + b'"}')
    return out


# -- one run, in a child process -------------------------------------------------------------


def _rss() -> int:
    from sweepq.engine.budget import resident_bytes

    return resident_bytes()


def _rocksdb_memory(qm) -> int:
    """Memtables, table readers and block cache of the blob store (0 until it is opened)."""
    mem = qm.store_memory()
    return sum(mem.get(k, 0) for k in ("memtable_bytes", "block_cache_bytes", "table_readers_bytes"))


def queue_manager(cfg: DemoConfig):
    """The run's queue manager: the sweeper and the budget in the sweeping run, neither in
    the other (a run without sweeping has no budget to keep)."""
    from sweepq.engine import MemorySettings, QueueManager, SweeperSettings
    from sweepq.sweeper import SweepPolicy

    budget = cfg.budget if cfg.sweep else 0
    return QueueManager(
        "DEMO",
        sweeping=SweeperSettings(run=cfg.sweep, policy=SweepPolicy(interval=cfg.interval)),
        memory=MemorySettings(budget=budget, counts=cfg.counts if budget else "held"),
    )


@dataclass
class _Shared:
    put: int = 0
    got: int = 0
    phase: str = "filling"
    errors: list = field(default_factory=list)
    client_pids: list = field(default_factory=list)  # --clients: the producers' and the consumer's processes


def _put(h, data: bytes, md, opts) -> None:
    """A put of the demo's producers and of its consumer's audit records: under --policy
    block or fail, a put the full budget refuses (MQRC_STORAGE_NOT_AVAILABLE, 2071) is made
    again a moment later, as an application would; nothing else is retried. The consumer's
    unit of work stays open meanwhile: the sweeper, not its commit, makes the room."""
    from sweepq.engine import MQError, Reason

    while True:
        try:
            h.put(data, md, opts)
            return
        except MQError as e:
            if e.reason != Reason.STORAGE_NOT_AVAILABLE:
                raise
            time.sleep(0.005)


class Workload:
    """The demo's producers and consumer, written once for both forms of a run: threads of the
    run's process (an in-process connection each) and, with ``--clients``, processes of their
    own that connect to the run's queue manager as clients (bench/demo_clients.py).

    ``connect`` makes a connection (``qm.connect`` or ``sweepq.client.connect(url)``, the same
    API); ``t0`` is the run's start on ``time.monotonic()`` (one clock for every process of
    the machine), which paces everyone alike. ``progress(n)`` is told of every batch put or
    delivered."""

    def __init__(self, cfg: DemoConfig, connect: Callable, t0: float):
        self.cfg = cfg
        self.connect = connect
        self.t0 = t0
        self.names = queue_names(cfg)
        self.bodies = _bodies(cfg.size)
        self.total_rate = cfg.messages / cfg.seconds

    def produce(self, p: int, n: int, progress: Callable[[int], None]) -> dict[tuple[int, int, int], int]:
        """Producer ``p`` puts its ``n`` messages at its share of the rate (the first in units
        of work, backing its first one out); returns how many it put per stream."""
        from sweepq.engine import MD, OO, PMO

        cfg, names, bodies = self.cfg, self.names, self.bodies
        rng = random.Random(cfg.seed * 1_000 + p)
        seqs: dict[tuple[int, int], int] = {}
        rate = self.total_rate * n / max(1, cfg.messages)
        uow = p == 0  # the first producer puts in units of work and backs its first one out
        backed_out = False
        mine: dict[tuple[int, int, int], int] = {}
        with self.connect() as c:
            hs = [c.open(name, OO.OUTPUT) for name in names]
            opts = PMO.SYNCPOINT if uow else PMO.NO_SYNCPOINT
            i = 0
            while i < n:
                batch = []
                for j in range(i, min(n, i + PUT_BATCH)):
                    q = (p + j) % len(names)
                    prio = rng.choices(PRIORITIES, PRIORITY_WEIGHTS)[0]
                    seq = seqs.get((q, prio), 0)
                    seqs[(q, prio)] = seq + 1
                    batch.append((q, prio, seq))
                for q, prio, seq in batch:
                    _put(hs[q], header(p, q, prio, seq) + bodies[seq % len(bodies)], MD(priority=prio), opts)
                if uow and not backed_out:
                    c.backout()  # the puts vanish as if never made; put them again
                    backed_out = True
                    for q, prio, seq in batch:
                        _put(hs[q], header(p, q, prio, seq) + bodies[seq % len(bodies)], MD(priority=prio), opts)
                if uow:
                    c.commit()
                for q, prio, _ in batch:
                    mine[(p, q, prio)] = mine.get((p, q, prio), 0) + 1
                i += len(batch)
                progress(len(batch))
                ahead = self.t0 + i / rate - time.monotonic() if rate > 0 else 0
                if ahead > 0:
                    time.sleep(ahead)
        return mine

    def consume(
        self,
        done: threading.Event,
        checker: DeliveryChecker,
        stats: dict[str, int],
        progress: Callable[[int], None],
        catching_up: Callable[[], None],
    ) -> None:
        """The slow consumer: gets under syncpoint at a share of the producers' rate, writes an
        audit record per unit of work (backing one out), and catches up once ``done`` is set
        (``catching_up`` is told once). ``checker`` sees every message delivered; ``stats``
        counts audit records put and gets backed out."""
        from sweepq.engine import GMO, OO, PMO, MQError, Reason

        names = self.names
        got = 0
        with self.connect() as c:
            hs = [c.open(name, OO.INPUT_SHARED) for name in names]
            audit = c.open("AUDIT", OO.OUTPUT)
            slow_rate = self.total_rate * self.cfg.consumer_share
            k = 0
            backed_out = False
            empty = [False] * len(hs)
            told = False
            while True:
                up = done.is_set()
                if up and not told:
                    told = True
                    catching_up()
                    empty = [False] * len(hs)
                if up and all(empty):
                    break
                k = (k + 1) % len(hs)
                if up and empty[k]:
                    continue
                batch = []
                for _ in range(DRAIN_BATCH if up else GET_BATCH):
                    try:
                        batch.append(hs[k].get(GMO.SYNCPOINT))
                    except MQError as e:
                        if e.reason != Reason.NO_MSG_AVAILABLE:
                            raise
                        empty[k] = True
                        break
                if not batch:
                    if not up:
                        time.sleep(0.005)
                    continue
                # Under --policy fail the full budget refuses this put as it refuses a producer's.
                _put(audit, b"processed %d orders from %s" % (len(batch), names[k].encode()), None, PMO.SYNCPOINT)
                if not backed_out and got > 0:
                    c.backout()  # the gets come back in place, with their backout counts raised
                    backed_out = True
                    empty[k] = False
                    stats["get_backouts"] += len(batch)
                    continue
                c.commit()
                stats["audit_put"] += 1
                for m in batch:
                    checker.see(*parse(m.data))
                got += len(batch)
                progress(len(batch))
                if not up and slow_rate > 0:
                    ahead = self.t0 + got / slow_rate - time.monotonic()
                    if ahead > 0:
                        time.sleep(min(ahead, 0.5))


def queue_names(cfg: DemoConfig) -> list[str]:
    return [f"ORDERS.{i}" for i in range(max(1, cfg.queues))]


def _in_threads(
    qm, cfg: DemoConfig, shared: _Shared, t0: float, checker: DeliveryChecker, stats: dict[str, int]
) -> tuple[dict, float]:
    """The producers and the consumer as threads of this process: (what was put per stream,
    the producers' time)."""
    work = Workload(cfg, qm.connect, t0)
    expected: dict[tuple[int, int, int], int] = {}
    lock = threading.Lock()
    done = threading.Event()

    def producer(p: int, n: int) -> None:
        try:
            mine = work.produce(p, n, lambda k: setattr(shared, "put", shared.put + k))
        except BaseException as e:
            shared.errors.append(f"producer {p}: {type(e).__name__}: {e}")
            return
        with lock:
            for k, v in mine.items():
                expected[k] = expected.get(k, 0) + v

    def consumer() -> None:
        try:
            work.consume(
                done,
                checker,
                stats,
                lambda k: setattr(shared, "got", shared.got + k),
                lambda: setattr(shared, "phase", "catching up"),
            )
        except BaseException as e:
            shared.errors.append(f"consumer: {type(e).__name__}: {e}")

    threads = [
        threading.Thread(target=producer, args=(p, n), name=f"producer-{p}") for p, n in enumerate(cfg.per_producer())
    ]
    cons = threading.Thread(target=consumer, name="consumer")
    for t in threads:
        t.start()
    cons.start()
    for t in threads:
        t.join()
    fill_seconds = time.monotonic() - t0
    done.set()
    cons.join()
    return expected, fill_seconds


def run_child(cfg: DemoConfig, emit) -> dict[str, Any]:
    """Run the workload once (with or without the sweeper); ``emit`` receives each sample.
    With ``cfg.clients`` the producers and the consumer are processes of their own, clients of
    this process's queue manager (bench/demo_clients.py); otherwise threads of this one."""
    from sweepq.engine import OO, MemoryPolicy, MQError
    from sweepq.engine.budget import peak_resident_bytes

    rss_start = _rss()
    qm = queue_manager(cfg)
    # The resident memory the budget does not count: the budget's own baseline when it counts
    # resident memory, else the same figure taken here (the process before the first put).
    baseline = qm.budget.baseline if qm.budget is not None and qm.budget.counts_resident else _rss()
    names = queue_names(cfg)
    policy = MemoryPolicy[cfg.policy.upper()]
    for n in names:
        qm.define_queue(n, max_depth=max(1_000_000, 2 * cfg.messages + 10), memory_policy=policy)
    qm.define_queue("AUDIT", max_depth=max(1_000_000, cfg.messages + 10), memory_policy=policy)
    shared = _Shared()
    counts = cfg.per_producer()
    checker = DeliveryChecker()
    consumer_stats = {"audit_put": 0, "get_backouts": 0}
    t0 = time.monotonic()

    samples: list[dict] = []

    def sample() -> dict:
        st = qm.stats()["*"]
        use = qm.memory_use()
        s = {
            "t": round(time.monotonic() - t0, 3),
            "phase": shared.phase,
            "rss": _rss(),
            "depth": sum(qm.inquire_queue(n).current_depth for n in names),
            "in_memory": st.msgs_in_memory,
            "budgeted": use.total,  # what the budget counts (engine/budget.py)
            "held": use.held,  # the messages in memory and RocksDB's memtables and cache
            "swept_msgs": st.msgs_swept,
            "swept_bytes": st.bytes_swept_compressed,
            "swept_raw_bytes": st.bytes_swept_raw,
            "put": shared.put,
            "got": shared.got,
            "rocksdb_memory": _rocksdb_memory(qm),
        }
        samples.append(s)
        emit(s)
        return s

    stop_sampling = threading.Event()

    def sampler() -> None:
        while not stop_sampling.wait(cfg.sample_every):
            sample()

    sampler_thread = threading.Thread(target=sampler, name="demo-sampler", daemon=True)
    sampler_thread.start()
    if cfg.clients:
        from .demo_clients import in_processes

        expected, fill_seconds = in_processes(qm, cfg, shared, t0, checker, consumer_stats)
    else:
        expected, fill_seconds = _in_threads(qm, cfg, shared, t0, checker, consumer_stats)
    drain_seconds = time.monotonic() - t0 - fill_seconds
    shared.phase = "done"
    stop_sampling.set()
    sampler_thread.join()
    last = sample()

    # The audit trail: one record per committed unit of work, none for the one backed out.
    audit_records = 0
    with qm.connect() as c:
        h = c.open("AUDIT", OO.INPUT_SHARED)
        while True:
            try:
                h.get()
            except MQError:
                break
            audit_records += 1
    problems = [] if shared.errors else checker.finish(expected)
    if audit_records != consumer_stats["audit_put"]:
        problems.append(f"{audit_records} audit records for {consumer_stats['audit_put']} committed units of work")
    total = {"msgs": 0, "raw": 0, "comp": 0, "unswept_msgs": 0, "unswept_bytes": 0, "unsweeps": 0, "sweeps": 0}
    aborts: dict[str, int] = {}
    stats = qm.stats()
    for name in [*names, "AUDIT"]:
        c = stats[name]  # the total_* figures are cumulative; msgs_swept is what is swept now
        total["msgs"] += c.total_msgs_swept
        total["raw"] += c.total_bytes_swept_raw
        total["comp"] += c.total_bytes_swept_compressed
        total["unswept_msgs"] += c.msgs_unswept
        total["unswept_bytes"] += c.bytes_unswept_raw
        total["unsweeps"] += c.unsweeps
        total["sweeps"] += c.sweeps
        for r, n in c.aborts.items():
            aborts[r] = aborts.get(r, 0) + n
    remaining = sum(qm.inquire_queue(n).current_depth for n in names)
    qm.close()
    gc.collect()  # what the run leaves after close: the allocator's, not the queues'
    everything = [*samples, last]
    return {
        "sweeping": cfg.sweep,
        "config": asdict(cfg),
        "messages": sum(counts),
        "delivered": checker.delivered,
        "remaining": remaining,
        "streams": len(expected),
        "problems": problems,
        "errors": shared.errors,
        "rss_start": rss_start,
        "baseline": baseline,
        "peak_rss": peak_resident_bytes(),  # the kernel's high-water mark of this process
        "peak_sampled_rss": max(s["rss"] for s in everything),
        "rss_drained": last["rss"],
        "rss_closed": _rss(),
        "peak_in_memory": max(s["in_memory"] for s in everything),
        "peak_budgeted": max(s["budgeted"] for s in everything),
        "peak_held": max(s["held"] for s in everything),
        "peak_depth": max(s["depth"] for s in everything),
        "fill_seconds": fill_seconds,
        "drain_seconds": drain_seconds,
        "msgs_swept": total["msgs"],
        "bytes_swept_raw": total["raw"],
        "bytes_swept_compressed": total["comp"],
        "msgs_unswept": total["unswept_msgs"],
        "bytes_unswept_raw": total["unswept_bytes"],
        "unsweeps": total["unsweeps"],
        "sweeps": total["sweeps"],
        "aborts": aborts,
        "rocksdb_memory_peak": max(s["rocksdb_memory"] for s in everything),
        "audit_records": audit_records,
        "put_backouts": min(PUT_BATCH, counts[0]) if counts else 0,
        "get_backouts": consumer_stats["get_backouts"],
        "client_pids": shared.client_pids,
        "samples": samples,
    }


def _child_main(argv: list[str]) -> int:
    """``python -m sweepq.bench.demo CONFIG_JSON STORE_DIR PARENT_PID``: one run, its samples
    and result as JSON lines on stdout. The run's temporary blob store goes under STORE_DIR,
    which it removes itself if it is ended early (SIGTERM, or its parent gone)."""
    cfg = DemoConfig(**json.loads(argv[0]))
    store_dir = argv[1]

    def on_end() -> None:  # the parent may be gone: leave nothing behind
        shutil.rmtree(store_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(store_dir))  # the parent's directory, once the last run has left it

    tether(int(argv[2]), on_end)
    os.makedirs(store_dir, exist_ok=True)
    tempfile.tempdir = store_dir  # BlobStore.temporary() makes its directory here

    def emit(s: dict) -> None:
        print(json.dumps({"sample": s}), flush=True)

    result = run_child(cfg, emit)
    print(json.dumps({"result": result}), flush=True)
    return 0


# -- the parent: the runs, live display, table, files ------------------------------------------


class _Child:
    """One run in a subprocess of its own, tethered to this process; a reader thread passes
    its samples to ``on_sample``."""

    def __init__(self, cfg: DemoConfig, on_sample, children: Children, store_dir: str) -> None:
        self.cfg = cfg
        self.result: dict | None = None
        argv = [sys.executable, "-m", "sweepq.bench.demo", json.dumps(asdict(cfg)), store_dir, str(os.getpid())]
        # One glibc arena for the run (engine/budget.py, one_arena): set before the child starts,
        # since numpy's threads take arenas at import and glibc then ignores a later mallopt.
        env = {**os.environ, "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "1")}
        self.proc = children.start(argv, RUN_KIND, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.err: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(on_sample,), daemon=True),
            threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self, on_sample) -> None:
        with contextlib.suppress(ValueError, OSError):  # the pipe closed under us: the run was ended
            for line in self.proc.stdout:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if "sample" in msg:
                    on_sample(msg["sample"])
                elif "result" in msg:
                    self.result = msg["result"]

    def wait(self) -> dict:
        rc = self.proc.wait()
        for t in self._threads:
            t.join()
        if rc != 0 or self.result is None:
            tail = "".join(self.err[-15:]).rstrip()
            raise RuntimeError(f"the {_run_label(self.cfg.sweep)} run failed (exit {rc}):\n{tail}")
        return self.result


def _run_label(sweep: bool) -> str:
    return "sweeping" if sweep else "non-sweeping"


@dataclass
class Level:
    """One busy load and the runs made beside it: ``runs["with"]`` (sweeping) and, unless
    the comparison was skipped, ``runs["without"]``."""

    busy: int
    runs: dict[str, dict]
    load: BusyLoad
    load_average: float  # the 1-minute load average when the runs ended

    def name(self) -> str:
        return f"{self.busy} busy"  # not "quiet": other work may load the machine (see load_average)


def _mb(n: float) -> str:
    return f"{n / MB:,.1f} MB"


def _budget(run: dict) -> int:
    """The run's memory budget in bytes (0: none; a run without sweeping has none)."""
    return run["config"]["budget"] if run["sweeping"] else 0


def _resident(run: dict) -> bool:
    """Whether the run's budget counts resident memory (budget_counts="resident")."""
    return run["config"].get("counts") == "resident"


def rss_bound(run: dict) -> int:
    """Resident memory the run's budget allows: its budget plus the baseline it does not count
    (the resident memory at open); 0 without a budget."""
    budget = _budget(run)
    return budget + run["baseline"] if budget else 0


def budget_held(run: dict) -> bool | None:
    """Whether the run kept its budget (None: no budget). Counting resident memory: its peak
    resident memory (the kernel's high-water mark, not a sample) is at most RESIDENT_TOLERANCE
    times budget + baseline; counting what is held: the largest sample of it is at most the
    budget."""
    budget = _budget(run)
    if not budget:
        return None
    if _resident(run):
        return run["peak_rss"] <= RESIDENT_TOLERANCE * rss_bound(run)
    return run["peak_budgeted"] <= budget


def summary(runs: dict[str, dict]) -> dict[str, Any]:
    """The figures of one level's runs that the table, the JSON and the README show."""
    w, wo = runs["with"], runs.get("without")
    out: dict[str, Any] = {
        "messages": w["messages"],
        "delivered_with_sweeper": w["delivered"],
        "peak_rss_with_sweeper": w["peak_rss"],
        "peak_rss_without_sweeping": wo["peak_rss"] if wo else None,
        "rss_drained_with_sweeper": w["rss_drained"],
        "rss_closed_with_sweeper": w["rss_closed"],
        "peak_in_memory_with_sweeper": w["peak_in_memory"],
        "peak_in_memory_without_sweeping": wo["peak_in_memory"] if wo else None,
        "budget": w["config"]["budget"],
        "budget_counts": w["config"].get("counts"),
        "baseline_with_sweeper": w["baseline"],
        "rss_bound_with_sweeper": rss_bound(w) or None,  # budget + baseline
        "peak_rss_to_bound": w["peak_rss"] / rss_bound(w) if rss_bound(w) else None,
        "peak_budgeted_with_sweeper": w["peak_budgeted"],
        "peak_held_with_sweeper": w["peak_held"],
        "budget_held": budget_held(w),
        "msgs_swept": w["msgs_swept"],
        "bytes_swept_raw": w["bytes_swept_raw"],
        "bytes_swept_compressed": w["bytes_swept_compressed"],
        "compression_ratio": (w["bytes_swept_raw"] / w["bytes_swept_compressed"]) if w["bytes_swept_compressed"] else 0,
        "msgs_unswept": w["msgs_unswept"],
        "bytes_unswept_raw": w["bytes_unswept_raw"],
        "sweeps": w["sweeps"],
        "unsweeps": w["unsweeps"],
        "aborts": sum(w["aborts"].values()),
        "rocksdb_memory_peak": w["rocksdb_memory_peak"],
    }
    if wo and wo["peak_rss"]:
        out["rss_ratio"] = w["peak_rss"] / wo["peak_rss"]
    return out


TITLE = "sweepq demo: the same workload with and without the slow queue sweeper (MB = 10^6 bytes)"
_MODES = {"with": "with sweeper", "without": "without sweeping"}


def _columns(levels: Sequence[Level]) -> list[tuple[Level, str, str]]:
    """(level, run key, column heading) for every run, in table order."""
    named = len(levels) > 1 or any(lv.busy for lv in levels)
    return [
        (lv, key, _MODES[key] + (f", {lv.name()}" if named else ""))
        for lv in levels
        for key in _MODES
        if key in lv.runs
    ]


def _budget_text(run: dict) -> str:
    held = budget_held(run)
    if held is None:
        return "-"
    # Says what it measured, so that it reads the same under any row (resident or held).
    verdict = "held" if held else "exceeded"
    if _resident(run):
        return f"{verdict}: peak resident memory {run['peak_rss'] / rss_bound(run):.2f} x budget + baseline"
    return f"{verdict}: peak of messages + RocksDB {run['peak_budgeted'] / run['config']['budget']:.2f} x budget"


def _budget_label(run: dict) -> str:
    if budget_held(run) is None:
        return "-"
    what = "resident memory above the baseline" if _resident(run) else "messages + RocksDB"
    return f"{_mb(run['config']['budget'])} ({what})"


def _against_bound(run: dict) -> str:
    bound = rss_bound(run)
    return f"{_mb(run['peak_rss'])} of {_mb(bound)}: {run['peak_rss'] / bound:.2f} x" if bound else "-"


def _where(c: dict) -> str:
    """Where the run's producers and consumer ran: threads, or client processes (--clients)."""
    if c.get("clients"):
        return f"{c['producers']} + 1 client processes"
    return f"{c['producers']} + 1 threads"


# (label, figure of one run); a figure of None shows "-"
_ROWS: list[tuple[str, Callable[[dict, Level], str | None]]] = [
    ("busy processes beside the run", lambda r, lv: f"{lv.busy}"),
    ("... CPU they used", lambda r, lv: f"{lv.load.cpu_seconds:.1f} s in {lv.load.seconds:.1f} s" if lv.busy else "-"),
    ("load average (1 min) at the end", lambda r, lv: f"{lv.load_average:.1f}"),
    ("producers and consumer", lambda r, lv: _where(r["config"])),
    ("messages put", lambda r, lv: f"{r['messages']:,}"),
    ("delivered (exactly once, in order)", lambda r, lv: f"{r['delivered']:,}"),
    ("peak resident memory", lambda r, lv: _mb(r["peak_rss"])),
    ("resident memory at start", lambda r, lv: _mb(r["rss_start"])),
    ("resident memory when drained", lambda r, lv: _mb(r["rss_drained"])),
    ("... after close", lambda r, lv: _mb(r["rss_closed"])),
    ("memory budget (what it counts)", lambda r, lv: _budget_label(r)),
    ("baseline (resident at open, not counted)", lambda r, lv: _mb(r["baseline"]) if rss_bound(r) else "-"),
    ("peak resident memory against budget + baseline", lambda r, lv: _against_bound(r)),
    ("the budget", lambda r, lv: _budget_text(r)),
    ("peak of messages + RocksDB (held)", lambda r, lv: _mb(r["peak_held"])),
    ("peak messages in memory", lambda r, lv: f"{r['peak_in_memory']:,}"),
    ("peak queue depth", lambda r, lv: f"{r['peak_depth']:,}"),
    ("messages swept", lambda r, lv: f"{r['msgs_swept']:,}"),
    ("bytes swept (raw)", lambda r, lv: _mb(r["bytes_swept_raw"])),
    ("... compressed with zstd to", lambda r, lv: _mb(r["bytes_swept_compressed"]) if r["sweeping"] else "-"),
    (
        "compression ratio",
        lambda r, lv: (
            f"{r['bytes_swept_raw'] / r['bytes_swept_compressed']:.1f} x" if r["bytes_swept_compressed"] else "-"
        ),
    ),
    ("messages unswept (brought back)", lambda r, lv: f"{r['msgs_unswept']:,}"),
    ("bytes unswept", lambda r, lv: _mb(r["bytes_unswept_raw"])),
    ("sweeps", lambda r, lv: f"{r['sweeps']:,}"),
    ("unsweeps (blobs brought back)", lambda r, lv: f"{r['unsweeps']:,}"),
    ("sweep aborts", lambda r, lv: f"{sum(r['aborts'].values()):,}"),
    ("RocksDB memory, peak (memtables, readers, cache)", lambda r, lv: _mb(r["rocksdb_memory_peak"])),
    ("producers' time", lambda r, lv: f"{r['fill_seconds']:.1f} s"),
    ("catch-up (drain) time", lambda r, lv: f"{r['drain_seconds']:.1f} s"),
]


def table_rows(levels: Sequence[Level]) -> tuple[list[str], list[list[str]]]:
    """The headings and rows of the terminal and Markdown tables: a column per run."""
    cols = _columns(levels)
    rows = [[label, *(fig(lv.runs[key], lv) or "-" for lv, key, _ in cols)] for label, fig in _ROWS]
    return ["figure", *(h for _, _, h in cols)], rows


def _table(levels: Sequence[Level], title: str = TITLE):
    from rich.table import Table

    heads, rows = table_rows(levels)
    t = Table(title=title)
    t.add_column(heads[0])
    for h in heads[1:]:
        t.add_column(h, justify="right")
    for r in rows:
        t.add_row(*r)
    return t


def levels_of(doc: dict) -> list[Level]:
    """The levels a run's ``demo.json`` holds, as the run had them: its tables are made again
    from them (``markdown``, ``peak_rss_table``), so a page that quotes them can be checked."""
    return [Level(lv["busy"], lv["runs"], BusyLoad(**lv["busy_load"]), lv["load_average"]) for lv in doc["levels"]]


def markdown(levels: Sequence[Level]) -> str:
    heads, rows = table_rows(levels)
    out = ["| " + " | ".join(heads) + " |", "|---|" + "--:|" * (len(heads) - 1)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def peak_rss_table(levels: Sequence[Level]) -> str:
    """The issue's table: peak resident memory with and without sweeping, per busy load."""
    out = [
        "| busy processes | peak RSS with sweeper | budget + baseline | peak RSS without sweeping | ratio | budget |",
        "|--:|--:|--:|--:|--:|---|",
    ]
    for lv in levels:
        w, wo = lv.runs["with"], lv.runs.get("without")
        ratio = f"{w['peak_rss'] / wo['peak_rss']:.2f} x" if wo else "-"
        without = _mb(wo["peak_rss"]) if wo else "-"
        bound = f"{_mb(rss_bound(w))} ({w['peak_rss'] / rss_bound(w):.2f} x)" if rss_bound(w) else "-"
        budget = f"{_budget_label(w)}: {_budget_text(w)}" if budget_held(w) is not None else "none"
        out.append(f"| {lv.busy} | {_mb(w['peak_rss'])} | {bound} | {without} | {ratio} | {budget} |")
    return "\n".join(out) + "\n"


def _plot_level(axes, lv: Level) -> None:
    """One column of the figure: resident memory, messages, swept bytes for one busy load.
    Every line has a legend entry."""
    colours = {"with": "tab:blue", "without": "tab:red"}
    for key, run in lv.runs.items():
        colour, label = colours[key], _MODES[key]
        s = run["samples"]
        t = [x["t"] for x in s]
        axes[0].plot(t, [x["rss"] / MB for x in s], color=colour, label=f"resident memory, {label}")
        axes[1].plot(t, [x["depth"] for x in s], color=colour, label=f"queue depth, {label}")
        if key == "with":
            held = [x["held"] / MB for x in s]
            axes[0].plot(t, held, color=colour, ls="--", label="messages in memory + RocksDB, with sweeper")
            axes[1].plot(
                t, [x["in_memory"] for x in s], color=colour, ls="--", label="messages in memory, with sweeper"
            )
            axes[2].plot(t, [x["swept_raw_bytes"] / MB for x in s], color=colour, label="swept, raw")
            axes[2].plot(t, [x["swept_bytes"] / MB for x in s], color="tab:green", label="swept, zstd in RocksDB")
    w = lv.runs["with"]
    if _budget(w) and _resident(w):
        bound = rss_bound(w)
        axes[0].axhline(bound / MB, color="black", ls="-.", lw=1, label=f"budget + baseline ({_mb(bound)})")
    elif _budget(w):
        budget = _budget(w)
        axes[0].axhline(budget / MB, color="black", ls="-.", lw=1, label=f"memory budget ({_mb(budget)})")
    for ax in axes:
        # Each run's producers stop at their own time: a line each, in the run's colour.
        for key, run in lv.runs.items():
            ax.axvline(run["fill_seconds"], color=colours[key], ls=":", lw=1, label=f"producers done, {_MODES[key]}")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=7)
    beside = f"{lv.busy} spinning process{'es' if lv.busy != 1 else ''}" if lv.busy else "no spinning process"
    title = f"{lv.name()}: {beside} beside the runs; load average {lv.load_average:.1f} at the end"
    axes[0].set_title(title, fontsize=10)


def plot(levels: Sequence[Level], path: str) -> None:
    """Resident memory (with the budget), depth and swept bytes over time: a column of
    panels per busy load. MB = 10^6 bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(3, len(levels), figsize=(9 * len(levels), 10), sharex="col", squeeze=False)
    for col, lv in enumerate(levels):
        _plot_level(grid[:, col], lv)
    grid[0, 0].set_ylabel("MB (10^6 bytes)")
    grid[1, 0].set_ylabel("messages")
    grid[2, 0].set_ylabel("in blobs now, MB (10^6 bytes)")
    for ax in grid[2, :]:
        ax.set_xlabel("seconds")
    c = levels[0].runs["with"]["config"]
    fig.suptitle(
        f"sweepq demo: {levels[0].runs['with']['messages']:,} messages of {c['size']} B on {c['queues']} queues, "
        f"sweep interval {c['interval']:g} s"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _introduce(say, cfg: DemoConfig, busy_levels: Sequence[int]) -> None:
    say(
        f"[bold]sweepq demo[/]: {cfg.producers} producer(s) put {cfg.messages:,} messages of {cfg.size} B "
        f"over {cfg.seconds:g} s on {cfg.queues} queue(s), priorities {', '.join(map(str, PRIORITIES))}; "
        f"a slow consumer gets {cfg.consumer_share:.0%} of that rate under syncpoint, then catches up."
    )
    if cfg.clients:
        say(
            "Producers and consumer are processes of their own (--clients), client connections over a Unix "
            "socket to the run's queue manager; the memory figures are the queue manager's process."
        )
    if cfg.interval != DEFAULT_INTERVAL:
        say(
            f"[yellow]note[/]: the sweep interval is shortened to {cfg.interval:g} s "
            f"(the sweeper's default is {DEFAULT_INTERVAL:g} s) so this run sees several sweep cycles."
        )
    else:
        say(f"The slow queue sweeper runs every {cfg.interval:g} s (its default).")
    what = (
        "resident memory above the process's baseline at open"
        if cfg.counts == "resident"
        else "messages in memory + RocksDB"
    )
    budget = f"a memory budget of {_mb(cfg.budget)} ({what}; MB = 10^6 bytes)" if cfg.budget else "no memory budget"
    say(
        f"The same workload runs with the sweeper and {budget} and without sweeping side by side, each in a "
        "subprocess of its own, so the resident-memory figures do not mix."
    )
    loads = [
        f"{n} spinning process{'es' if n != 1 else ''} beside them" if n else "nothing beside them" for n in busy_levels
    ]
    if busy_levels != [0]:
        say("Busy load: " + "; then ".join(loads) + ".")


def _run_level(cfg: DemoConfig, compare: bool, console, children: Children, work: str) -> Level:
    """Both runs beside ``cfg.busy`` burners, with live progress. :raises RuntimeError: a
    run failed (its exit code and the end of its stderr)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    modes = [("with", True)] + ([("without", False)] if compare else [])
    suffix = f", {cfg.busy} busy" if cfg.busy else ""
    columns = (
        TextColumn("{task.description:<16}"),
        BarColumn(bar_width=10),
        TextColumn("put {task.fields[put]:>7} got {task.fields[got]:>7} {task.fields[phase]:<11}"),
        TextColumn("rss {task.fields[rss]:>8} in mem {task.fields[mem]:>7} swept {task.fields[swept]:>7}"),
        TimeElapsedColumn(),
    )
    with Busy(cfg.busy, children) as busy, Progress(*columns, console=console, transient=False) as progress:
        fields = {"phase": "starting", "put": "0", "got": "0", "rss": "-", "mem": "-", "swept": "-"}
        tasks = {key: progress.add_task(_MODES[key] + suffix, total=max(1, cfg.messages), **fields) for key, _ in modes}
        running = {}
        for key, sweep in modes:

            def on_sample(s: dict, task=tasks[key]) -> None:
                progress.update(
                    task,
                    completed=s["got"],
                    put=f"{s['put']:,}",
                    got=f"{s['got']:,}",
                    phase=s["phase"],
                    rss=_mb(s["rss"]),
                    mem=f"{s['in_memory']:,}",
                    swept=f"{s['swept_msgs']:,}",
                )

            store_dir = os.path.join(work, f"busy{cfg.busy}-{key}")
            running[key] = _Child(replace(cfg, sweep=sweep), on_sample, children, store_dir)
        runs = {}
        for key, child in running.items():
            runs[key] = child.wait()
            progress.update(tasks[key], completed=max(1, cfg.messages), phase="done")
    return Level(cfg.busy, runs, busy.load, os.getloadavg()[0])


def _write_atomically(path: str, write: Callable[[str], None], written: list[str]) -> None:
    """Write ``path`` through a temporary file beside it, so that an interrupt never leaves
    half a file; ``written`` gets ``path`` once it is complete."""
    tmp = f"{path}.partial{os.path.splitext(path)[1]}"
    try:
        write(tmp)
        os.replace(tmp, path)
        written.append(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def _write_files(levels: list[Level], cfg: DemoConfig, out_dir: str, written: list[str]) -> dict[str, str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"demo.{k}") for k in ("png", "md", "json")}
    paths["peak"] = os.path.join(out_dir, "peak.md")
    from .suite import run_info  # when, where, at which commit and under what load (as bench --out says)

    doc = {
        "run": run_info(),
        "config": asdict(cfg),
        "mb": MB,
        "peak_rss": [
            {
                "busy": lv.busy,
                "with_sweeper": lv.runs["with"]["peak_rss"],
                "without_sweeping": lv.runs.get("without", {}).get("peak_rss"),
            }
            for lv in levels
        ],
        "levels": [
            {
                "busy": lv.busy,
                "busy_load": asdict(lv.load),
                "load_average": lv.load_average,
                "summary": summary(lv.runs),
                "runs": lv.runs,
            }
            for lv in levels
        ],
    }

    def text(content: str) -> Callable[[str], None]:
        def write(p: str) -> None:
            with open(p, "w") as f:
                f.write(content)

        return write

    _write_atomically(paths["png"], lambda p: plot(levels, p), written)
    _write_atomically(paths["md"], text(markdown(levels) + "\n" + peak_rss_table(levels)), written)
    _write_atomically(paths["json"], text(json.dumps(doc, indent=1)), written)
    _write_atomically(paths["peak"], text(peak_rss_table(levels)), written)  # the headline alone, for the README
    return paths


def _verify(say, levels: Sequence[Level]) -> bool:
    """Say, run by run, whether every message arrived exactly once and in order."""
    ok = True
    for lv in levels:
        for key, r in lv.runs.items():
            label = _MODES[key] + (f", {lv.name()}" if lv.busy or len(levels) > 1 else "")
            bad = r["errors"] + r["problems"]
            if r["remaining"]:
                bad.append(f"{r['remaining']:,} messages still on the queues")
            if bad:
                ok = False
                say(f"[red]FAILED[/] ({label}): " + "; ".join(bad[:10]))
            elif not r["messages"]:
                say(f"[green]verified[/] ({label}): no messages were put, none arrived, the queues are empty")
            else:
                say(
                    f"[green]verified[/] ({label}): all {r['delivered']:,} messages arrived exactly once and in "
                    f"order per producer, queue and priority ({r['streams']} streams); {r['audit_records']:,} audit "
                    f"records for as many committed units of work; {r['put_backouts']} backed-out put(s) and "
                    f"{r['get_backouts']} backed-out get(s) came out right"
                )
    return ok


def _say_memory(say, levels: Sequence[Level]) -> bool:
    """Say peak resident memory with and without sweeping, and whether each budget held;
    False when one did not."""
    ok = True
    for lv in levels:
        w, wo = lv.runs["with"], lv.runs.get("without")
        where = f" ({lv.name()})" if lv.busy or len(levels) > 1 else ""
        if wo:
            say(
                f"peak resident memory{where}: [bold]{_mb(w['peak_rss'])}[/] with the sweeper, "
                f"[bold]{_mb(wo['peak_rss'])}[/] without sweeping ({w['peak_rss'] / wo['peak_rss']:.2f} x)"
            )
        held = budget_held(w)
        if held is None:
            continue
        ok = ok and held
        verdict = "[green]held[/]" if held else "[red]FAILED: exceeded[/]"
        bound, peak = rss_bound(w), w["peak_rss"]
        against = (
            f"peak resident memory {_mb(peak)} against budget + baseline {_mb(w['config']['budget'])} + "
            f"{_mb(w['baseline'])} = {_mb(bound)} ({peak / bound:.2f} x"
        )
        if _resident(w):
            say(
                f"memory budget{where} {verdict}: {against}; within {RESIDENT_TOLERANCE:g} x is held); messages in "
                f"memory and RocksDB memory at most {_mb(w['peak_held'])}"
            )
        else:
            say(
                f"memory budget{where} {verdict}: at most {_mb(w['peak_budgeted'])} of messages in memory and "
                f"RocksDB memory, for a budget of {_mb(w['config']['budget'])} (as sampled every "
                f"{w['config']['sample_every']:g} s); {against}, not bounded: --budget-counts resident bounds it)"
            )
    return ok


def _say_interrupted(ended: dict[str, int], work: str, out_dir: str, written: list[str], why: str) -> None:
    """What an interrupted demo left where, on stderr."""
    kinds = sorted(ended, key=lambda k: k != RUN_KIND)  # the runs first; every kind is "... process"
    counts = [f"{ended[k]} {k}{'' if ended[k] == 1 else 'es'}" for k in kinds]
    lines = [
        f"sweepq demo: interrupted ({why}): ended {' and '.join(counts) or 'no process'}; "
        "no process of the demo is left running",
        f"  removed: the runs' temporary blob stores ({work})",
    ]
    if written:
        lines.append(f"  left in {out_dir}: {', '.join(os.path.basename(p) for p in written)} (complete files)")
    missing = [n for n in DEMO_FILES if os.path.join(out_dir, n) not in written]
    if missing:
        lines.append(
            f"  not written: {', '.join(missing)} in {out_dir} (no partial files; any there are from an earlier run)"
        )
    print("\n".join(lines), file=sys.stderr, flush=True)


def run(
    cfg: DemoConfig, out_dir: str, console=None, compare: bool = True, busy_levels: Sequence[int] | None = None
) -> int:
    """The demo: for each busy load (``busy_levels``; default ``[cfg.busy]``), both runs with
    live progress; then the table, the PNG, Markdown and JSON in ``out_dir``. Returns 0 when
    every message arrived exactly once and in order in every run and every sweeping run kept
    its memory budget, 1 when not or when a run failed, 130 when interrupted (Ctrl-C,
    SIGTERM, SIGHUP: every process it started is ended and its files removed first). Call it
    from the thread that stays alive while it runs (the parent-death signal follows it)."""
    from rich.console import Console

    console = console or Console()
    say = console.print
    wanted = list(busy_levels) if busy_levels is not None else [cfg.busy]
    _introduce(say, cfg, wanted)
    children = Children()
    work = tempfile.mkdtemp(prefix="sweepq-demo-")
    written: list[str] = []
    levels: list[Level] = []
    try:
        with interrupts_as_ctrl_c():
            try:
                for n in wanted:
                    levels.append(_run_level(replace(cfg, busy=n), compare, console, children, work))
            except RuntimeError as e:
                console.print(f"sweepq demo: {e}", style="red", markup=False)
                return 1
            paths = _write_files(levels, cfg, out_dir, written)
    except KeyboardInterrupt as e:
        with ignoring_interrupts():
            children.end()
            shutil.rmtree(work, ignore_errors=True)
            _say_interrupted(children.ended, work, out_dir, written, str(e) or "Ctrl-C")
        return 130
    finally:
        children.end()
        shutil.rmtree(work, ignore_errors=True)
    for lv in levels:  # a table per busy load: four columns do not fit a terminal
        named = len(levels) > 1 or lv.busy
        say(_table([lv], f"{TITLE}, {lv.name()}" if named else TITLE))
    ok = _verify(say, levels)
    ok = _say_memory(say, levels) and ok
    say(f"plot: {os.path.abspath(paths['png'])}")
    say(
        f"figures: {os.path.abspath(paths['json'])} (and the tables as Markdown: {os.path.abspath(paths['md'])}; "
        f"its last alone: {os.path.basename(paths['peak'])})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
