"""The processes of the kill -9 harness that work a data directory and log what they do.

* the **worker** (``python -m sweepq.bench.crash worker ...``): a process that opens a data
  directory with the sweeper at a short interval and puts and gets persistent messages,
  mostly under syncpoint, in phases that build a backlog (so sweeps happen) and drain it
  (so unsweeps happen). It appends one line per event to its own log: what it STARTED and
  what RETURNED. The log is opened O_APPEND and written with one unbuffered ``os.write`` per
  line, so a SIGKILL of the worker keeps every line written before it (the kernel holds it);
  no fsync is needed, since only the process dies.
* the **final drain** (:func:`drain`): opens the directory and gets every message, logging
  like a worker, so that the verdict (bench/crash/verdict.py) reads one history.

The messages' ids, MsgIds and payloads are made here too (the damage fuzz, the server and
channel harnesses use them): every payload carries its id and can be checked byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import signal
import threading
from collections import Counter
from typing import NoReturn

from ..harness_sizes import CRASH_INTERVAL as DEFAULT_INTERVAL

QUEUES = ("CRASH.A", "CRASH.B")
PRIORITIES = (0, 4, 9)
DEPTH_CAP = 6000  # a worker drains once a queue holds this many messages (keeps restarts short)

# Where a worker can kill itself (``--kill-at POINT:N``: at the N-th time it passes POINT).
# Where a worker can kill itself (``--kill-at POINT:N``: at the N-th time it passes POINT).
SELF_POINTS = (
    "before-commit",  # commit started (logged C+), the engine not yet called: a maybe not applied
    "after-commit",  # commit returned, not yet logged: a maybe that was applied
    "after-put",  # a put outside syncpoint returned, not yet logged: a maybe put applied
    "after-get",  # a get outside syncpoint returned, not logged: the one message allowed to go
    "sweep-write",  # a sweep wrote its blobs pending and has not linked them
    "sweep-link",  # a sweep linked a blob into its chain
    "unsweep-load",  # a get read a swept blob back and has not spliced it into memory
    "unsweep-splice",  # a blob came back into memory; the get that needed it has not returned
)
# What a worker does next, by phase: (cumulative share, kind of operation).
MIX = {
    "fill": ((0.6, "put-uow"), (0.75, "put"), (0.85, "get-uow"), (0.9, "get"), (1.01, "mix")),
    "drain": ((0.15, "put-uow"), (0.2, "put"), (0.75, "get-uow"), (0.9, "get"), (1.01, "mix")),
}


def msg_id(ident: str) -> bytes:
    """The 24-byte MsgId of message ``ident`` ("run.counter"): readable in a hex dump, and the
    way a damaged message is named back to the harness."""
    run, n = ident.split(".")
    return f"CR{int(run):06d}.{int(n):010d}".encode().ljust(24, b"\0")


def ident_of(mid: bytes) -> str | None:
    """The "run.counter" a MsgId made by :func:`msg_id` stands for, else None."""
    m = re.fullmatch(rb"CR(\d{6})\.(\d{10})\0*", mid)
    return f"{int(m[1])}.{int(m[2])}" if m else None


def payload(ident: str, prio: int, size: int) -> bytes:
    """A payload that carries its id and can be checked: header, then filler derived from it."""
    head = f"{ident}|{prio}|{size}|".encode()
    seed = hashlib.blake2b(head, digest_size=32).digest()
    n = max(size - len(head), 0)
    return head + (seed * (n // 32 + 1))[:n]


def check_payload(data: bytes) -> tuple[str | None, bool]:
    """(id, intact) of a payload made by :func:`payload`; (None, False) when it is not one."""
    try:
        ident, prio, size, _ = data.split(b"|", 3)
        ident_s = ident.decode()
        return ident_s, data == payload(ident_s, int(prio), int(size))
    except ValueError:
        return None, False


def ids_in_error(e: BaseException) -> list[str]:
    """The harness ids an OBJECT_DAMAGED error names: its ``msg_ids`` attribute when it has
    one, else every 24-byte MsgId written in hex in its text."""
    mids = getattr(e, "msg_ids", None)
    if mids is None:
        mids = [bytes.fromhex(h) for h in re.findall(r"(?<![0-9a-fA-F])[0-9a-fA-F]{48}(?![0-9a-fA-F])", str(e))]
    return [i for i in (ident_of(bytes(m)) for m in mids) if i]


# -- the event log -------------------------------------------------------------------------


class EventLog:
    """An append-only log of one process: one line per event, one ``os.write`` per line.

    Lines of a few dozen bytes written with O_APPEND are never torn or reordered between the
    worker's threads, and the kernel keeps them when the process is killed. Each line is
    written under the log's lock, so that :meth:`last` can end the process with its line the
    last one: another thread's line cannot come between them."""

    def __init__(self, path: str | os.PathLike):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.lock = threading.Lock()

    def emit(self, *fields: object) -> None:
        line = _line(fields)
        with self.lock:
            os.write(self.fd, line)

    def last(self, *fields: object) -> NoReturn:
        """Write this line, then SIGKILL this process, holding the lock throughout: no other
        thread writes after it (a kill at a chosen point says so as the log's last line)."""
        line = _line(fields)
        self.lock.acquire()  # never released: the process ends here
        os.write(self.fd, line)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("SIGKILL did not end the process")  # pragma: no cover

    def close(self) -> None:
        os.close(self.fd)


def _line(fields: tuple) -> bytes:
    """One log line: the fields separated by spaces."""
    return (" ".join(str(f) for f in fields) + "\n").encode()


# -- the worker -------------------------------------------------------------------------------


def open_manager(
    path: str, sync: str, interval: float, *, name: str | None = None, run: bool = True, repair: bool = False
):
    """Open the queue manager on ``path`` with a short sweep interval and small blobs (so
    sweeps and unsweeps happen in a run of a second); ``run``: the background sweeper on."""
    from sweepq.engine import DurabilitySettings, QueueManager, SweeperSettings
    from sweepq.sweeper import SweepPolicy

    sweeping = SweeperSettings(run=run, policy=SweepPolicy(interval=interval), duty=0.5, readahead_low_water=128)
    durability = DurabilitySettings(sync=sync, repair=repair, store_options={"max_blob_records": 64})
    return QueueManager.open(path, name=name, sweeping=sweeping, durability=durability)


def define_queues(qm) -> None:
    """Define the harness's queues, persistent by default, unless the directory brought them back."""
    from sweepq.engine import Persistence

    have = set(qm.queue_names())
    for name in QUEUES:
        if name not in have:
            qm.define_queue(name, default_persistence=Persistence.PERSISTENT)


class Worker:
    """One worker run: a single producer and consumer on :data:`QUEUES`, logging every call.

    Operations never overlap: a unit of work is committed or backed out before the next one
    starts, and no put outside syncpoint happens while one is open, so within one priority
    the committed messages of this run sit in their queue in the order of their counters."""

    def __init__(self, qm, log: EventLog, run: int, rng: random.Random, kill_at: tuple[str, int] | None):
        from sweepq.engine import OO

        self.qm = qm
        self.log = log
        self.run = run
        self.rng = rng
        self.kill_at = kill_at
        self.passed: Counter[str] = Counter()
        self.n = 0
        self.conn = qm.connect()
        self.handles = {q: self.conn.open(q, OO.OUTPUT | OO.INPUT_SHARED) for q in QUEUES}

    # -- kill points and hooks ----------------------------------------------------------------

    def point(self, name: str) -> None:
        """Pass kill point ``name``: SIGKILL this process if it is the one ``--kill-at`` chose."""
        self.passed[name] += 1
        if self.kill_at and self.kill_at[0] == name and self.passed[name] == self.kill_at[1]:
            self.log.last("K", name)

    def install_hooks(self) -> bool:
        """Log sweeps and unsweeps (markers for the driver and the verdict) and place the kill
        points inside them. They wrap the engine's internal entry points; an engine whose
        internals moved runs without them (False) and the harness still works."""
        try:
            sweeper = self.qm.sweeper
            previous = sweeper.after_write

            def after_write(q, target):
                self.log.emit("Wwrite", q.name)
                self.point("sweep-write")
                if previous is not None:
                    previous(q, target)

            sweeper.after_write = after_write
            for name in QUEUES:
                self._wrap_queue(self.qm.internal.queue(name))
            return True
        except AttributeError:
            return False

    def _wrap_queue(self, q) -> None:
        log, point, tier, sw = self.log, self.point, q.tier, q.sweep
        begin, end, link, load, splice = sw.sweep_begin, sw.sweep_end, sw.sweep_link, tier.load, tier.unsweep_locked

        def sweep_begin(*a, **k):
            log.emit("Wbegin", q.name)
            return begin(*a, **k)

        def sweep_end(*a, **k):
            try:
                return end(*a, **k)
            finally:
                log.emit("Wend", q.name)

        def sweep_link(*a, **k):
            out = link(*a, **k)
            log.emit("Wlink", q.name)
            point("sweep-link")
            return out

        def tier_load(*a, **k):
            log.emit("U+", q.name)
            out = load(*a, **k)
            log.emit("U=", q.name)
            point("unsweep-load")
            return out

        def unsweep_locked(*a, **k):
            log.emit("U<", q.name)  # the blob's records go back to their own keys in this call
            out = splice(*a, **k)
            log.emit("Usplice", q.name)
            point("unsweep-splice")
            return out

        sw.sweep_begin, sw.sweep_end, sw.sweep_link = sweep_begin, sweep_end, sweep_link
        tier.load, tier.unsweep_locked = tier_load, unsweep_locked

    # -- operations, each logged as started and as returned -----------------------------------

    def put(self, q: str, sync: bool) -> None:
        from sweepq.engine import MD, PMO, MQError, Persistence

        self.n += 1
        ident = f"{self.run}.{self.n}"
        prio = self.rng.choice(PRIORITIES)
        size = self.rng.choice((24, 64, 200, 700, 1500))
        data = payload(ident, prio, size)
        md = MD(msg_id=msg_id(ident), priority=prio, persistence=Persistence.PERSISTENT)
        self.log.emit("P+", ident, q, prio, int(sync))
        try:
            self.handles[q].put(data, md, PMO.SYNCPOINT if sync else PMO.NO_SYNCPOINT)
        except MQError as e:
            self.log.emit("PE", ident, int(e.reason))
            return
        if not sync:
            self.point("after-put")
        self.log.emit("P=", ident)

    def get(self, q: str, sync: bool) -> bool:
        """One get; False when the queue had nothing to give."""
        from sweepq.engine import GMO, MQError, Reason

        self.log.emit("G+", q, int(sync))
        try:
            m = self.handles[q].get(GMO.SYNCPOINT if sync else GMO.NO_SYNCPOINT)
        except MQError as e:
            if e.reason == Reason.NO_MSG_AVAILABLE:
                self.log.emit("G0", q, int(sync))
                return False
            if e.reason == Reason.OBJECT_DAMAGED:
                self.log.emit("GD", q, int(sync), *ids_in_error(e))
                return True
            self.log.emit("GE", q, int(sync), int(e.reason))
            return False
        if not sync:
            self.point("after-get")
        ident, intact = check_payload(m.data)
        self.log.emit("G=", ident, q, m.md.priority, m.backout_count, int(sync))
        if not intact:
            self.log.emit("X", ident, "payload differs from what was put")
        return True

    def commit(self) -> None:
        from sweepq.engine import MQError

        self.log.emit("C+")
        self.point("before-commit")
        try:
            self.conn.commit()
        except MQError as e:
            self.log.emit("CE", int(e.reason))
            self.backout()
            return
        self.point("after-commit")
        self.log.emit("C=")

    def backout(self) -> None:
        self.log.emit("B+")
        self.conn.backout()
        self.log.emit("B=")

    def end_uow(self) -> None:
        """Commit (most of the time) or back out the unit of work just done."""
        if self.rng.random() < 0.85:
            self.commit()
        else:
            self.backout()

    # -- the workload -----------------------------------------------------------------------------

    def depth(self) -> int:
        return sum(self.qm.inquire_queue(q).current_depth for q in QUEUES)

    def run_forever(self, max_ops: int = 0, fill_only: bool = False) -> None:
        """Alternate fill phases (puts outpace gets: a backlog builds and the sweeper moves it
        into blobs) and drain phases (gets outpace puts: blobs come back), until killed, or
        for ``max_ops`` units of work when it is not 0 (``fill_only``: no drain phase)."""
        rng = self.rng
        phase, left, ops = "fill", rng.randint(20, 200), 0
        self.log.emit("F", phase)
        while not max_ops or ops < max_ops:
            ops += 1
            left -= 1
            if (left <= 0 and not fill_only) or (phase == "fill" and ops % 64 == 0 and self.depth() > DEPTH_CAP):
                phase = "drain" if phase == "fill" else "fill"
                left = rng.randint(20, 200)
                self.log.emit("F", phase)
            q = rng.choice(QUEUES)
            r = rng.random()
            kind = next(k for edge, k in MIX[phase] if r < edge)
            if kind == "put":
                self.put(q, sync=False)
            elif kind == "get":
                self.get(q, sync=False)
            elif kind == "put-uow":
                for _ in range(rng.randint(1, 20)):
                    self.put(rng.choice(QUEUES), sync=True)
                self.end_uow()
            elif kind == "get-uow":
                for _ in range(rng.randint(1, 20)):
                    if not self.get(q, sync=True):
                        break
                self.end_uow()
            else:  # a request-reply step: gets and puts in one unit of work
                for _ in range(rng.randint(1, 5)):
                    self.get(q, sync=True)
                for _ in range(rng.randint(1, 5)):
                    self.put(rng.choice(QUEUES), sync=True)
                self.end_uow()


def worker_main(args: argparse.Namespace) -> int:
    """The worker process: open, define the queues if the directory has none, run until killed."""
    log = EventLog(args.log)
    rng = random.Random(f"{args.seed}:{args.run}")
    kill_at = None
    if args.kill_at:
        point, n = args.kill_at.rsplit(":", 1)
        kill_at = (point, int(n))
    log.emit("S", args.run, os.getpid(), args.seed)
    qm = open_manager(args.data_dir, args.sync, args.interval)
    define_queues(qm)
    w = Worker(qm, log, args.run, rng, kill_at)
    hooks = w.install_hooks()
    log.emit("R", f"sync={args.sync}", f"hooks={'on' if hooks else 'off'}")
    w.run_forever(args.max_ops, args.fill_only)
    w.conn.disconnect()
    qm.close()
    log.emit("Z")
    return 0


# -- the final drain -----------------------------------------------------------------------------


def drain(data_dir: str, log_path: str, sync: str = "commit", repair: bool = False) -> str | None:
    """Open ``data_dir`` in this process (with ``repair=True`` when asked) and get every
    message of every harness queue, under syncpoint in units of 200 (one sync each, not one
    per message), logging like a worker (run "drain"). Returns None, or why it could not
    open."""
    from sweepq.engine import GMO, OO, MQError, Reason

    log = EventLog(log_path)
    log.emit("S", "drain", os.getpid(), 0)
    try:
        qm = open_manager(data_dir, sync, DEFAULT_INTERVAL, run=False, repair=repair)
    except Exception as e:
        log.emit("OE", type(e).__name__)
        log.emit("Z")
        log.close()
        return f"{type(e).__name__}: {' '.join(str(e).split())}"
    if repair:
        log.emit("RP", *getattr(qm.internal.storage, "repaired", ["?"]))  # the files it moved to lost/
    named = [i for i in (ident_of(bytes(m)) for m in getattr(qm.recovery, "damaged_msg_ids", ())) if i]
    if named:  # damaged records the open named by MsgId (qm.recovery): reported, not lost
        for q in QUEUES:
            log.emit("GD", q, 1, *named)
            break
    log.emit("R")
    try:
        with qm.connect() as conn:
            for q in QUEUES:
                if q not in qm.queue_names():
                    log.emit("NQ", q)
                    continue
                h = conn.open(q, OO.INPUT_SHARED)
                errors = got = 0
                while errors < 100:
                    log.emit("G+", q, 1)
                    try:
                        m = h.get(GMO.SYNCPOINT)
                    except MQError as e:
                        if e.reason == Reason.NO_MSG_AVAILABLE:
                            log.emit("G0", q, 1)
                            break
                        errors += 1
                        if e.reason == Reason.OBJECT_DAMAGED:
                            log.emit("GD", q, 1, *ids_in_error(e))
                        else:
                            log.emit("GE", q, 1, int(e.reason))
                        continue
                    ident, intact = check_payload(m.data)
                    log.emit("G=", ident, q, m.md.priority, m.backout_count, 1)
                    if not intact:
                        log.emit("X", ident, "payload differs from what was put")
                    got += 1
                    if got % 200 == 0:
                        log.emit("C+")
                        conn.commit()
                        log.emit("C=")
                log.emit("C+")
                conn.commit()
                log.emit("C=")
    finally:
        qm.close()
        log.emit("Z")
        log.close()
    return None
