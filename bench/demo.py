"""``sweepq demo``: the memory-pressure demo, the README's first command.

Producers outpace a slow consumer on several queues, at several priorities, one of them
putting in units of work (and backing one out); the consumer gets under syncpoint and
writes an audit record per unit of work (and backs one out too). The slow queue sweeper
keeps what is in memory bounded by moving the surplus into zstd-compressed blobs in
RocksDB; then the producers stop, the consumer catches up, and every message comes back.

The same workload (same seed, same pacing) runs twice, each in its own subprocess so the
two resident-set figures do not mix: once with the sweeper, once without sweeping. The
parent shows live progress, then a table, writes a PNG and a JSON of the figures, and
verifies that every message arrived exactly once and in order per producer, queue and
priority; any violation makes it exit non-zero.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_INTERVAL = 5.0  # the sweeper's own default (seed 003)
PRIORITIES = (0, 4, 9)  # most messages are routine, a few urgent
PRIORITY_WEIGHTS = (70, 25, 5)
PUT_BATCH = 50  # the unit-of-work producer commits every PUT_BATCH puts
GET_BATCH = 10  # the consumer commits every GET_BATCH gets while slow
DRAIN_BATCH = 100  # ... and every DRAIN_BATCH gets while it catches up


@dataclass
class DemoConfig:
    queues: int = 3
    producers: int = 4
    messages: int = 600_000  # in all, over every producer
    size: int = 1024  # payload bytes
    seconds: float = 40.0  # how long the producers take to put them
    consumer_share: float = 0.1  # the slow consumer's rate, as a share of the producers'
    interval: float = DEFAULT_INTERVAL
    sample_every: float = 0.25
    seed: int = 1
    sweep: bool = True

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
    import psutil

    return psutil.Process().memory_info().rss


def _rocksdb_memory(qm) -> int:
    """Memtables, table readers and block cache of the blob store (0 until it is opened)."""
    mem = qm.store_memory()
    return sum(mem.get(k, 0) for k in ("memtable_bytes", "block_cache_bytes", "table_readers_bytes"))


@dataclass
class _Shared:
    put: int = 0
    got: int = 0
    phase: str = "filling"
    errors: list = field(default_factory=list)


def run_child(cfg: DemoConfig, emit) -> dict[str, Any]:
    """Run the workload once (with or without the sweeper); ``emit`` receives each sample."""
    from sweepq.engine import GMO, MD, OO, PMO, MQError, QueueManager, Reason
    from sweepq.sweeper import SweepPolicy

    rss_start = _rss()
    qm = QueueManager("DEMO", sweeper=cfg.sweep, sweep_policy=SweepPolicy(interval=cfg.interval))
    names = [f"ORDERS.{i}" for i in range(max(1, cfg.queues))]
    for n in names:
        qm.define_queue(n, max_depth=max(1_000_000, 2 * cfg.messages + 10))
    qm.define_queue("AUDIT", max_depth=max(1_000_000, cfg.messages + 10))
    shared = _Shared()
    bodies = _bodies(cfg.size)
    counts = cfg.per_producer()
    total_rate = cfg.messages / cfg.seconds
    expected: dict[tuple[int, int, int], int] = {}
    expected_lock = threading.Lock()
    t0 = time.monotonic()

    def producer(p: int, n: int) -> None:
        rng = random.Random(cfg.seed * 1_000 + p)
        seqs: dict[tuple[int, int], int] = {}
        rate = total_rate * n / max(1, cfg.messages)
        uow = p == 0  # the first producer puts in units of work and backs its first one out
        backed_out = False
        mine: dict[tuple[int, int, int], int] = {}
        try:
            with qm.connect() as c:
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
                        body = bodies[seq % len(bodies)]
                        hs[q].put(header(p, q, prio, seq) + body, MD(priority=prio), opts)
                    if uow and not backed_out:
                        c.backout()  # the puts vanish as if never made; put them again
                        backed_out = True
                        for q, prio, seq in batch:
                            hs[q].put(header(p, q, prio, seq) + bodies[seq % len(bodies)], MD(priority=prio), opts)
                    if uow:
                        c.commit()
                    for q, prio, _ in batch:
                        mine[(p, q, prio)] = mine.get((p, q, prio), 0) + 1
                    i += len(batch)
                    shared.put += len(batch)
                    ahead = t0 + i / rate - time.monotonic() if rate > 0 else 0
                    if ahead > 0:
                        time.sleep(ahead)
        except BaseException as e:
            shared.errors.append(f"producer {p}: {type(e).__name__}: {e}")
        with expected_lock:
            for k, v in mine.items():
                expected[k] = expected.get(k, 0) + v

    checker = DeliveryChecker()
    consumer_stats = {"audit_put": 0, "get_backouts": 0}
    producers_done = threading.Event()

    def consumer() -> None:
        try:
            with qm.connect() as c:
                hs = [c.open(name, OO.INPUT_SHARED) for name in names]
                audit = c.open("AUDIT", OO.OUTPUT)
                slow_rate = total_rate * cfg.consumer_share
                k = 0
                backed_out = False
                empty = [False] * len(hs)
                while True:
                    catching_up = producers_done.is_set()
                    if catching_up and shared.phase != "catching up":
                        shared.phase = "catching up"
                        empty = [False] * len(hs)
                    if catching_up and all(empty):
                        break
                    k = (k + 1) % len(hs)
                    if catching_up and empty[k]:
                        continue
                    batch = []
                    for _ in range(DRAIN_BATCH if catching_up else GET_BATCH):
                        try:
                            batch.append(hs[k].get(GMO.SYNCPOINT))
                        except MQError as e:
                            if e.reason != Reason.NO_MSG_AVAILABLE:
                                raise
                            empty[k] = True
                            break
                    if not batch:
                        if not catching_up:
                            time.sleep(0.005)
                        continue
                    audit.put(b"processed %d orders from %s" % (len(batch), names[k].encode()), None, PMO.SYNCPOINT)
                    if not backed_out and shared.got > 0:
                        c.backout()  # the gets come back in place, with their backout counts raised
                        backed_out = True
                        empty[k] = False
                        consumer_stats["get_backouts"] += len(batch)
                        continue
                    c.commit()
                    consumer_stats["audit_put"] += 1
                    for m in batch:
                        checker.see(*parse(m.data))
                    shared.got += len(batch)
                    if not catching_up and slow_rate > 0:
                        ahead = t0 + shared.got / slow_rate - time.monotonic()
                        if ahead > 0:
                            time.sleep(min(ahead, 0.5))
        except BaseException as e:
            shared.errors.append(f"consumer: {type(e).__name__}: {e}")

    samples: list[dict] = []
    rocks_peak = [0]

    def sample() -> dict:
        st = qm.stats()["*"]
        depth = sum(qm.inquire_queue(n).current_depth for n in names)
        rocks = _rocksdb_memory(qm)
        rocks_peak[0] = max(rocks_peak[0], rocks)
        s = {
            "t": round(time.monotonic() - t0, 3),
            "phase": shared.phase,
            "rss": _rss(),
            "depth": depth,
            "in_memory": st.msgs_in_memory,
            "swept_msgs": st.msgs_swept,
            "swept_bytes": st.bytes_swept_compressed,
            "swept_raw_bytes": st.bytes_swept_raw,
            "put": shared.put,
            "got": shared.got,
            "rocksdb_memory": rocks,
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
    threads = [threading.Thread(target=producer, args=(p, n), name=f"producer-{p}") for p, n in enumerate(counts)]
    cons = threading.Thread(target=consumer, name="consumer")
    for t in threads:
        t.start()
    cons.start()
    for t in threads:
        t.join()
    fill_seconds = time.monotonic() - t0
    producers_done.set()
    cons.join()
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
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_sampled_rss": max([s["rss"] for s in samples] + [last["rss"]]),
        "peak_in_memory": max([s["in_memory"] for s in samples] + [0]),
        "peak_depth": max([s["depth"] for s in samples] + [0]),
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
        "rocksdb_memory_peak": rocks_peak[0],
        "audit_records": audit_records,
        "put_backouts": min(PUT_BATCH, counts[0]) if counts else 0,
        "get_backouts": consumer_stats["get_backouts"],
        "samples": samples,
    }


def _child_main(argv: list[str]) -> int:
    cfg = DemoConfig(**json.loads(argv[0]))

    def emit(s: dict) -> None:
        print(json.dumps({"sample": s}), flush=True)

    result = run_child(cfg, emit)
    print(json.dumps({"result": result}), flush=True)
    return 0


# -- the parent: two runs, live display, table, files ------------------------------------------


class _Child:
    """One run in a subprocess of its own; a reader thread passes its samples to ``on_sample``."""

    def __init__(self, cfg: DemoConfig, on_sample) -> None:
        self.cfg = cfg
        self.result: dict | None = None
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sweepq.bench.demo", json.dumps(asdict(cfg))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(on_sample,), daemon=True),
            threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self, on_sample) -> None:
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
            which = "sweeping" if self.cfg.sweep else "non-sweeping"
            raise RuntimeError(f"the {which} run failed (exit {rc}):\n{tail}")
        return self.result


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def summary(runs: dict[str, dict]) -> dict[str, Any]:
    """The figures of the two runs that the table, the JSON and the README show."""
    w, wo = runs["with"], runs.get("without")
    out: dict[str, Any] = {
        "messages": w["messages"],
        "delivered_with_sweeper": w["delivered"],
        "peak_rss_with_sweeper": w["peak_rss"],
        "peak_rss_without_sweeping": wo["peak_rss"] if wo else None,
        "peak_in_memory_with_sweeper": w["peak_in_memory"],
        "peak_in_memory_without_sweeping": wo["peak_in_memory"] if wo else None,
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


TITLE = "sweepq demo: the same workload with and without the slow queue sweeper"


def table_rows(runs: dict[str, dict]) -> list[tuple[str, str, str]]:
    """(figure, with sweeper, without sweeping): the rows of the terminal and Markdown tables."""
    w, wo = runs["with"], runs.get("without")
    rows = []

    def row(label: str, key: str, fmt=lambda v: f"{v:,}") -> None:
        rows.append((label, fmt(w[key]), fmt(wo[key]) if wo else "-"))

    row("messages put", "messages")
    row("delivered (exactly once, in order)", "delivered")
    row("peak resident memory", "peak_rss", _mb)
    row("resident memory at start", "rss_start", _mb)
    row("peak messages in memory", "peak_in_memory")
    row("peak queue depth", "peak_depth")
    row("messages swept", "msgs_swept")
    row("bytes swept (raw)", "bytes_swept_raw", _mb)
    rows.append(("... compressed with zstd to", _mb(w["bytes_swept_compressed"]), "-"))
    ratio = w["bytes_swept_raw"] / w["bytes_swept_compressed"] if w["bytes_swept_compressed"] else 0
    rows.append(("compression ratio", f"{ratio:.1f} x" if ratio else "-", "-"))
    row("messages unswept (brought back)", "msgs_unswept")
    row("bytes unswept", "bytes_unswept_raw", _mb)
    row("sweeps", "sweeps")
    row("unsweeps (blobs brought back)", "unsweeps")
    rows.append(("sweep aborts", f"{sum(w['aborts'].values()):,}", f"{sum(wo['aborts'].values()):,}" if wo else "-"))
    row("RocksDB memory, peak (memtables, readers, cache)", "rocksdb_memory_peak", _mb)
    row("producers' time", "fill_seconds", lambda v: f"{v:.1f} s")
    row("catch-up (drain) time", "drain_seconds", lambda v: f"{v:.1f} s")
    return rows


def _table(runs: dict[str, dict]):
    from rich.table import Table

    t = Table(title=TITLE)
    t.add_column("figure")
    t.add_column("with sweeper", justify="right")
    t.add_column("without sweeping", justify="right")
    for r in table_rows(runs):
        t.add_row(*r)
    return t


def markdown(runs: dict[str, dict]) -> str:
    out = ["| figure | with sweeper | without sweeping |", "|---|--:|--:|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in table_rows(runs)]
    return "\n".join(out) + "\n"


def plot(runs: dict[str, dict], path: str) -> None:
    """Resident memory and depth over time, with and without the sweeper; swept bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    styles = {"with": ("tab:blue", "with sweeper"), "without": ("tab:red", "without sweeping")}
    for key, run in runs.items():
        if run is None:
            continue
        colour, label = styles[key]
        s = run["samples"]
        t = [x["t"] for x in s]
        axes[0].plot(t, [x["rss"] / 1e6 for x in s], color=colour, label=label)
        axes[1].plot(t, [x["depth"] for x in s], color=colour, label=f"queue depth, {label}")
        if key == "with":
            mem = [x["in_memory"] for x in s]
            axes[1].plot(t, mem, color=colour, ls="--", label="messages in memory, with sweeper")
            axes[2].plot(t, [x["swept_raw_bytes"] / 1e6 for x in s], color=colour, label="swept, raw")
            axes[2].plot(t, [x["swept_bytes"] / 1e6 for x in s], color="tab:green", label="swept, zstd in RocksDB")
        axes[0].axvline(run["fill_seconds"], color=colour, ls=":", lw=1)
    axes[0].set_ylabel("resident memory (MB)")
    axes[1].set_ylabel("messages")
    axes[2].set_ylabel("in blobs now (MB)")
    axes[2].set_xlabel("seconds (dotted: producers done, the consumer catches up)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    w = runs["with"]
    fig.suptitle(
        f"sweepq demo: {w['messages']:,} messages of {w['config']['size']} B on {w['config']['queues']} queues, "
        f"sweep interval {w['config']['interval']:g} s"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(cfg: DemoConfig, out_dir: str, console=None, compare: bool = True) -> int:
    """The demo: both runs, live progress, the table, the PNG and JSON; 0 when every message
    arrived exactly once and in order in both runs."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console()
    say = console.print
    say(
        f"[bold]sweepq demo[/]: {cfg.producers} producer(s) put {cfg.messages:,} messages of {cfg.size} B "
        f"over {cfg.seconds:g} s on {cfg.queues} queue(s), priorities {', '.join(map(str, PRIORITIES))}; "
        f"a slow consumer gets {cfg.consumer_share:.0%} of that rate under syncpoint, then catches up."
    )
    if cfg.interval != DEFAULT_INTERVAL:
        say(
            f"[yellow]note[/]: the sweep interval is shortened to {cfg.interval:g} s "
            f"(the sweeper's default is {DEFAULT_INTERVAL:g} s) so this run sees several sweep cycles."
        )
    else:
        say(f"The slow queue sweeper runs every {cfg.interval:g} s (its default).")
    say(
        "The same workload runs with the sweeper and without sweeping side by side, each in a subprocess "
        "of its own, so the resident-memory figures do not mix."
    )
    runs: dict[str, dict | None] = {"with": None, "without": None}
    modes = [("with", True)] + ([("without", False)] if compare else [])
    columns = (
        TextColumn("{task.description:<16}"),
        BarColumn(bar_width=10),
        TextColumn("put {task.fields[put]:>7} got {task.fields[got]:>7} {task.fields[phase]:<11}"),
        TextColumn("rss {task.fields[rss]:>8} in mem {task.fields[mem]:>7} swept {task.fields[swept]:>7}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        tasks = {
            key: progress.add_task(
                f"{'with sweeper' if sweep else 'without sweeping'}",
                total=max(1, cfg.messages),
                phase="waiting",
                put="0",
                got="0",
                rss="-",
                mem="-",
                swept="-",
                start=False,
            )
            for key, sweep in modes
        }
        children = {}
        for key, sweep in modes:
            task = tasks[key]
            progress.start_task(task)

            def on_sample(s: dict, task=task) -> None:
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

            children[key] = _Child(DemoConfig(**{**asdict(cfg), "sweep": sweep}), on_sample)
        failed = []
        for key, child in children.items():
            try:
                runs[key] = child.wait()
                progress.update(tasks[key], completed=max(1, cfg.messages), phase="done")
            except RuntimeError as e:
                failed.append(str(e))
    if failed:
        for e in failed:
            console.print(f"sweepq demo: {e}", style="red", markup=False)
        return 1
    if runs["without"] is None:
        runs.pop("without")
    say(_table(runs))
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, "demo.png")
    js = os.path.join(out_dir, "demo.json")
    md = os.path.join(out_dir, "demo.md")
    plot(runs, png)
    with open(md, "w") as f:
        f.write(markdown(runs))
    with open(js, "w") as f:
        json.dump({"summary": summary(runs), "runs": runs}, f, indent=1)
    ok = True
    for r in runs.values():
        label = "with sweeper" if r["sweeping"] else "without sweeping"
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
                f"[green]verified[/] ({label}): all {r['delivered']:,} messages arrived exactly once and in order "
                f"per producer, queue and priority ({r['streams']} streams); {r['audit_records']:,} audit records "
                f"for as many committed units of work; {r['put_backouts']} backed-out put(s) and "
                f"{r['get_backouts']} backed-out get(s) came out right"
            )
    w, wo = runs["with"], runs.get("without")
    if wo:
        say(
            f"peak resident memory: [bold]{_mb(w['peak_rss'])}[/] with the sweeper, "
            f"[bold]{_mb(wo['peak_rss'])}[/] without sweeping ({w['peak_rss'] / wo['peak_rss']:.2f} x)"
        )
    say(f"plot: {os.path.abspath(png)}")
    say(f"figures: {os.path.abspath(js)} (and the table as Markdown: {os.path.abspath(md)})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
