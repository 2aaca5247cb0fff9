"""The kill -9 crash harness (issue 10, §6): proof that persistent messages survive crashes.

Three parts, each importable on its own:

* the **worker** (``python -m sweepq.bench.crash worker ...``): a process that opens a data
  directory with the sweeper at a short interval and puts and gets persistent messages,
  mostly under syncpoint, in phases that build a backlog (so sweeps happen) and drain it
  (so unsweeps happen). It appends one line per event to its own log: what it STARTED and
  what RETURNED. The log is opened O_APPEND and written with one unbuffered ``os.write`` per
  line, so a SIGKILL of the worker keeps every line written before it (the kernel holds it);
  no fsync is needed, since only the process dies.
* the **driver** (:func:`run_crashtest`): starts a worker, kills it with SIGKILL at a moment
  chosen from ``random.Random(seed)`` (after a delay, during start-up and recovery, right after
  the worker logs a commit, a sweep or an unsweep, or at an exact point inside the worker),
  restarts it on the same directory, repeats, and finally opens the directory itself and
  drains every queue.
* the **verdict** (:func:`judge` over :func:`parse_logs`): from the logs alone, with these
  definitions:

  - a put is **committed** when ``put`` returned outside syncpoint, or ``commit`` returned for
    its unit of work; it is **maybe** when that call started and did not return (the kill
    came in between); it is **aborted** when its unit of work was backed out or was still
    open, no commit started, when the worker died;
  - a get **consumes** a message when it returned outside syncpoint, or its unit of work's
    commit returned; the final drain consumes what it gets. A get in a unit of work whose
    commit started and did not return consumed it or not: the rest of the history decides
    (a message got there that comes back later was not consumed), and the unit of work must
    be all or nothing.

  The invariants: every committed put is consumed exactly once (0 lost, 0 duplicated; a maybe
  put at most once); nothing aborted ever comes back; within one queue and priority the
  messages of one producer (one worker run) are consumed in put order across the whole
  history; a message comes back on its queue, at its priority, with the payload it was put
  with; a backout count never goes back. The one allowance: a get outside syncpoint that
  the kill interrupted may have removed the message at the head of its queue without
  returning it (MQ's own semantics for a get outside a unit of work).

Everything random comes from ``random.Random`` seeded from the run's seed, so a seed replays
the same plan (the same workload and kill choices; the instants of timed kills vary with the
machine). The verdict prints the seed.

Corruption (:func:`corrupt`): bit flips and truncation in the RocksDB files of a closed data
directory, for the test that a damaged store is reported by message.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from sweepq.bench.children import interrupts_held

QUEUES = ("CRASH.A", "CRASH.B")
PRIORITIES = (0, 4, 9)
DEFAULT_KILLS = 1000
QUICK_KILLS = 50
DEFAULT_INTERVAL = 0.05
DEPTH_CAP = 6000  # a worker drains once a queue holds this many messages (keeps restarts short)

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
# Log lines the driver can kill right after (the worker logs them as the thing begins).
MARKERS = {"commit": "C+", "sweep": "Wwrite", "unsweep": "U<"}
# What a worker does next, by phase: (cumulative share, kind of operation).
MIX = {
    "fill": ((0.6, "put-uow"), (0.75, "put"), (0.85, "get-uow"), (0.9, "get"), (1.01, "mix")),
    "drain": ((0.15, "put-uow"), (0.2, "put"), (0.75, "get-uow"), (0.9, "get"), (1.01, "mix")),
}


# -- messages: ids, MsgIds and payloads --------------------------------------------------------


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
    worker's threads, and the kernel keeps them when the process is killed."""

    def __init__(self, path: str | os.PathLike):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def emit(self, *fields: object) -> None:
        os.write(self.fd, (" ".join(str(f) for f in fields) + "\n").encode())

    def close(self) -> None:
        os.close(self.fd)


# -- the worker -------------------------------------------------------------------------------


def open_manager(path: str, sync: str, interval: float, **extra):
    """Open the queue manager on ``path`` with a short sweep interval and small blobs (so
    sweeps and unsweeps happen in a run of a second). Returns (manager, sync honoured): an
    engine without the ``sync`` option is opened without it."""
    from sweepq.engine import QueueManager
    from sweepq.sweeper import SweepPolicy

    opts = dict(
        sweep_policy=SweepPolicy(interval=interval),
        sweep_duty=0.5,
        store_options={"max_blob_records": 64},
        readahead_low_water=128,
    )
    opts.update(extra)
    try:
        return QueueManager.open(path, sync=sync, **opts), True
    except TypeError as e:
        if "sync" not in str(e):
            raise
        return QueueManager.open(path, **opts), False


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
            self.log.emit("K", name)
            os.kill(os.getpid(), signal.SIGKILL)

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
                self._wrap_queue(self.qm._queue(name))
            return True
        except AttributeError:
            return False

    def _wrap_queue(self, q) -> None:
        log, point, tier = self.log, self.point, q.tier
        begin, end, link, load, splice = q.sweep_begin, q.sweep_end, q.sweep_link, tier.load, tier.unsweep_locked

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

        q.sweep_begin, q.sweep_end, q.sweep_link = sweep_begin, sweep_end, sweep_link
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
    qm, honoured = open_manager(args.data_dir, args.sync, args.interval)
    define_queues(qm)
    w = Worker(qm, log, args.run, rng, kill_at)
    hooks = w.install_hooks()
    log.emit("R", f"sync={args.sync if honoured else 'unsupported'}", f"hooks={'on' if hooks else 'off'}")
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
        qm, _ = open_manager(data_dir, sync, DEFAULT_INTERVAL, sweeper=False, **({"repair": True} if repair else {}))
    except Exception as e:
        log.emit("OE", type(e).__name__)
        log.emit("Z")
        log.close()
        return f"{type(e).__name__}: {' '.join(str(e).split())}"
    if repair:
        log.emit("RP", *getattr(qm._storage, "repaired", ["?"]))  # the files it moved to lost/
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


# -- the verdict ------------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Uow:
    run: str
    puts: list[str] = field(default_factory=list)
    gets: list[_Get] = field(default_factory=list)
    commit_started: bool = False
    fate: str = "open"  # committed | backedout | crashed | maybe
    end_seq: int = 0


@dataclass(eq=False, slots=True)
class _Get:
    seq: int
    ident: str
    queue: str
    prio: int
    backout: int
    run: str
    uow: _Uow | None
    consumed: bool | None = None  # None: its unit of work's commit did not return (resolved later)


@dataclass
class History:
    """What the logs say happened, in order: every put's fate, every get that returned."""

    puts: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (queue, priority)
    state: dict[str, str] = field(default_factory=dict)  # id -> committed | maybe | aborted | pending
    committed_at: dict[str, int] = field(default_factory=dict)
    gets: dict[str, list[_Get]] = field(default_factory=lambda: defaultdict(list))
    maybe_uows: list[_Uow] = field(default_factory=list)
    excuses: list[tuple[str, str, int]] = field(default_factory=list)  # (run, queue, seq) of cut gets
    damaged: dict[str, str] = field(default_factory=dict)  # id -> run that was told
    bad_payloads: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # get errors other than 2033 / 2101
    runs: list[str] = field(default_factory=list)
    kill_classes: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)


def parse_logs(logs: Iterable[tuple[str, Iterable[str]]]) -> History:
    """Read the logs of every run in order (``(run name, lines)``; the final drain last) into
    a :class:`History`. A run whose log does not end with ``Z`` (clean exit) was killed: its
    open unit of work is backed out, or in doubt when its commit had started."""
    h = History()
    seq = 0
    for run, lines in logs:
        h.runs.append(run)
        uow = _Uow(run)
        ns_put: str | None = None
        ns_get: str | None = None
        in_put = in_get = in_backout = ready = clean = False
        kill_point = None
        sweeping: Counter[str] = Counter()
        unsweeping: Counter[str] = Counter()
        for line in lines:
            if not line.endswith("\n"):
                break  # a line the kill cut short
            t = line.split()
            if not t:
                continue
            seq += 1
            op = t[0]
            if op == "P+":
                ident, q, prio, sync = t[1], t[2], int(t[3]), t[4] == "1"
                h.puts[ident] = (q, prio)
                in_put = True
                if sync:
                    h.state[ident] = "pending"
                    uow.puts.append(ident)
                else:
                    h.state[ident] = "maybe"
                    ns_put = ident
            elif op == "P=":
                in_put = False
                if t[1] == ns_put:
                    h.state[ns_put] = "committed"
                    h.committed_at[ns_put] = seq
                    ns_put = None
            elif op == "PE":
                in_put = False
                h.state[t[1]] = "aborted"
                if t[1] in uow.puts:
                    uow.puts.remove(t[1])
                ns_put = None
            elif op == "G+":
                in_get = True
                if t[2] == "0":
                    ns_get = t[1]
            elif op == "G=":
                ident, q, prio, backout, sync = t[1], t[2], int(t[3]), int(t[4]), t[5] == "1"
                g = _Get(seq, ident, q, prio, backout, run, uow if sync else None, None if sync else True)
                h.gets[ident].append(g)
                if sync:
                    uow.gets.append(g)
                in_get, ns_get = False, None
            elif op in ("G0", "GE", "GD"):
                in_get, ns_get = False, None
                if op == "GD":
                    for ident in t[3:]:
                        h.damaged.setdefault(ident, run)
                    h.counts["damaged_reports"] += 1
                elif op == "GE":
                    h.errors.append(f"run {run}: a get on {t[1]} failed with reason {t[3]}")
            elif op == "X":
                h.bad_payloads.append(f"run {run}: message {t[1]} came back with a different payload")
            elif op == "C+":
                uow.commit_started = True
            elif op in ("C=", "CE", "B="):
                # A commit that fails with 2003 backed the unit of work out; any other reason
                # leaves it in doubt.
                fate = {"C=": "committed", "B=": "backedout"}.get(op, "backedout" if t[1:2] == ["2003"] else "maybe")
                _finish(h, uow, fate, seq)
                uow = _Uow(run)
                in_backout = False
            elif op == "B+":
                in_backout = True
            elif op == "R":
                ready = True
            elif op == "Z":
                clean = True
            elif op == "K":
                kill_point = t[1]
            elif op == "Wbegin":
                sweeping[t[1]] += 1
            elif op == "Wend":
                sweeping[t[1]] -= 1
            elif op in ("U+", "U<"):
                unsweeping[t[1]] += 1
            elif op in ("U=", "Usplice"):
                unsweeping[t[1]] -= 1
        # the end of the run
        if uow.puts or uow.gets or uow.commit_started:
            if clean or not uow.commit_started or kill_point == "before-commit":
                fate = "crashed"  # backed out: commit never called
            elif kill_point == "after-commit":
                fate = "committed"  # the commit returned; the kill came before its log line
            else:
                fate = "maybe"
            _finish(h, uow, fate, seq)
        if ns_get is not None and not clean:
            h.excuses.append((run, ns_get, seq))
        if clean:
            continue
        if kill_point:
            what = f"self: {kill_point}"
        elif not ready:
            what = "opening (start-up, recovery)"
        elif uow.commit_started:
            what = "in commit"
        elif in_backout:
            what = "in backout"
        elif in_put:
            what = "in put"
        elif in_get:
            what = "in get"
        else:
            what = "between calls"
        if any(v > 0 for v in sweeping.values()):
            what += ", sweep running"
        if any(v > 0 for v in unsweeping.values()):
            what += ", unsweep running"
        h.kill_classes[what] += 1
    return h


def _finish(h: History, uow: _Uow, fate: str, seq: int) -> None:
    uow.fate, uow.end_seq = fate, seq
    if fate == "committed":
        for ident in uow.puts:
            h.state[ident] = "committed"
            h.committed_at[ident] = seq
        for g in uow.gets:
            g.consumed = True
    elif fate == "maybe":
        for ident in uow.puts:
            h.state[ident] = "maybe"
        h.maybe_uows.append(uow)
    else:
        for ident in uow.puts:
            h.state[ident] = "aborted"
        for g in uow.gets:
            g.consumed = False


@dataclass
class Verdict:
    """The outcome: the figures, and every violation of the invariants by kind (empty: passed)."""

    seed: int | None = None
    kills: int = 0
    seconds: float = 0.0
    committed: int = 0
    maybe: int = 0
    maybe_applied: int = 0
    consumed: int = 0
    drained: int = 0
    damaged_reported: int = 0
    kill_classes: Counter = field(default_factory=Counter)
    violations: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def count(self, kind: str) -> int:
        return len(self.violations.get(kind, ()))

    def render(self, replay: str = "") -> str:
        lines = [f"crash harness verdict: {'PASS' if self.ok else 'FAIL'} (seed {self.seed})"]
        lines.append(
            f"  kill points: {self.kills:,}; committed messages: {self.committed:,}; in doubt at a kill: "
            f"{self.maybe:,} ({self.maybe_applied:,} of them applied); consumed: {self.consumed:,} "
            f"(final drain: {self.drained:,}); {self.seconds:.1f} s"
        )
        for kind in ("lost", "duplicated", "reordered", "phantom", "partial unit of work", "damaged payload"):
            lines.append(f"  {kind}: {self.count(kind):,}")
        for kind, items in self.violations.items():
            if kind not in ("lost", "duplicated", "reordered", "phantom", "partial unit of work", "damaged payload"):
                lines.append(f"  {kind}: {len(items):,}")
        if self.damaged_reported:
            lines.append(f"  reported damaged by MsgId (2101): {self.damaged_reported:,}")
        if self.kill_classes:
            lines.append("  where the kills landed:")
            for what, n in sorted(self.kill_classes.items(), key=lambda kv: -kv[1]):
                lines.append(f"    {n:6,}  {what}")
        for kind, items in self.violations.items():
            for text in items[:5]:
                lines.append(f"  {kind}: {text}")
            if len(items) > 5:
                lines.append(f"  {kind}: ... and {len(items) - 5:,} more")
        lines.extend(f"  note: {n}" for n in self.notes)
        if replay:
            lines.append(f"  replay: {replay}")
        return "\n".join(lines)


def judge(h: History, allow_damaged: bool = False) -> Verdict:
    """Check the invariants (module docstring) over a :class:`History`.

    ``allow_damaged``: a committed message that never came back is not lost when a get named
    it in an OBJECT_DAMAGED (2101) error (the corruption test); without it, any such report
    after plain kills is itself a violation."""
    v = Verdict(kill_classes=h.kill_classes)
    viol = v.violations
    # 1. units of work whose commit did not return: applied when anything shows it (one of
    #    its puts came back, or the message of one of its gets never did); then all of it must
    #    have been (checked after the lost messages are known).
    applied_uows: list[tuple[_Uow, int]] = []
    uow_of: dict[str, _Uow] = {}
    held: dict[str, _Uow] = {}  # got in a cut commit judged not applied, and never back
    for u in h.maybe_uows:
        back = {id(g) for g in u.gets if any(a.seq > g.seq for a in h.gets[g.ident])}
        gone = [g for g in u.gets if id(g) not in back]
        # A put that came back shows the commit applied; so do gets whose messages never came
        # back, unless others did: then a later cut get outside syncpoint may have taken
        # those (the commit not applied), which the lost check below decides.
        applied = any(h.gets.get(p) for p in u.puts) or (bool(gone) and not back)
        if not applied:
            held.update((g.ident, u) for g in gone)
        for p in u.puts:
            h.state[p] = "committed" if applied else "aborted"
            if applied:
                h.committed_at[p] = u.end_seq
                uow_of[p] = u
        for g in u.gets:
            g.consumed = applied and id(g) not in back
        v.maybe += len(u.puts) + len(u.gets)
        if applied:
            v.maybe_applied += len(u.puts) + len(u.gets)
            applied_uows.append((u, len(back)))
    # 2. every put: consumed exactly once if committed, at most once if maybe, never if aborted
    lost: list[str] = []
    for ident, state in h.state.items():
        gets = h.gets.get(ident, [])
        cons = [g for g in gets if g.consumed]
        if state == "committed":
            v.committed += 1
        elif state == "maybe":
            v.maybe += 1
            v.maybe_applied += bool(gets)
        if state in ("committed", "maybe"):
            if len(cons) > 1:
                viol["duplicated"].append(f"{ident} consumed {len(cons)} times (runs {', '.join(g.run for g in cons)})")
            elif cons and any(g.seq > cons[0].seq for g in gets):
                later = next(g for g in gets if g.seq > cons[0].seq)
                viol["duplicated"].append(f"{ident} came back in run {later.run} after run {cons[0].run} consumed it")
            if not cons and (state == "committed" or gets):
                if ident in h.damaged:
                    v.damaged_reported += 1
                    if not allow_damaged:
                        viol["reported damaged"].append(f"{ident} named by a 2101 error in run {h.damaged[ident]}")
                else:
                    lost.append(ident)
        elif gets:
            viol["phantom"].append(f"{ident} was never committed ({state}) and came back in run {gets[0].run}")
    # A get outside syncpoint cut by the kill may have removed the message it was taking: the
    # one at the head of its queue then (highest priority, earliest arrival), and no other.
    lost_set = set(lost)
    taken: set[str] = set()  # by earlier cut gets
    first_consumed = {}
    for ident, gets in h.gets.items():
        seqs = [g.seq for g in gets if g.consumed]
        if seqs:
            first_consumed[ident] = min(seqs)
    orders: dict[str, list[str]] = {}
    for run, q, at in sorted(h.excuses, key=lambda e: e[2]) if lost_set else ():
        if q not in orders:
            orders[q] = _get_order(h, q)
        head = _head(h, orders[q], at, taken, first_consumed)
        if head in lost_set:
            lost_set.remove(head)
            taken.add(head)
            v.notes.append(f"{head}: taken by the get outside syncpoint that the kill cut in run {run}")
    missing: dict[_Uow, int] = defaultdict(int)  # puts of an applied unit of work that never came back
    for ident in lost:
        if ident in lost_set:
            if ident in uow_of:
                missing[uow_of[ident]] += 1
                continue
            if ident in held:  # neither taken by a cut get nor back: that commit half applied
                u = held[ident]
                viol["partial unit of work"].append(
                    f"run {u.run}: a commit cut by the kill kept {ident} removed while its other gets came back"
                )
                continue
            q, prio = h.puts[ident]
            viol["lost"].append(f"{ident} (queue {q}, priority {prio}) was committed and never came back")
    for u, back in applied_uows:
        if back or missing[u]:
            viol["partial unit of work"].append(
                f"run {u.run}: a commit cut by the kill took effect for {len(u.puts) - missing[u]} of "
                f"{len(u.puts)} puts and {len(u.gets) - back} of {len(u.gets)} gets"
            )
    for ident, gets in h.gets.items():
        if ident not in h.puts:
            viol["phantom"].append(f"{ident} came back and was never put")
            continue
        wrong = [g for g in gets if (g.queue, g.prio) != h.puts[ident]]
        if wrong:
            q, prio = h.puts[ident]
            viol["moved"].append(
                f"{ident} was put on {q} at priority {prio} and came back from {wrong[0].queue} at priority "
                f"{wrong[0].prio} (run {wrong[0].run})"
            )
    # 3. order: per queue, priority and producer, consumed in put order
    last: dict[tuple[str, int, str], tuple[int, str]] = {}
    consumed = sorted((g for gs in h.gets.values() for g in gs if g.consumed), key=lambda g: g.seq)
    for g in consumed:
        producer, n = g.ident.split(".")
        key = (g.queue, g.prio, producer)
        prev = last.get(key)
        if prev is not None and int(n) < prev[0]:
            viol["reordered"].append(
                f"queue {g.queue} priority {g.prio}: {g.ident} consumed (run {g.run}) after "
                f"{producer}.{prev[0]} (run {prev[1]})"
            )
        if prev is None or int(n) > prev[0]:
            last[key] = (int(n), g.run)
    v.consumed = len(consumed)
    v.drained = sum(1 for g in consumed if g.run == "drain")
    # 4. backout counts: raised by each backout, never lowered by a restart
    for ident, gets in h.gets.items():
        for a, b in itertools.pairwise(gets):
            need = a.backout + (1 if a.uow is not None and a.uow.fate == "backedout" else 0)
            if b.backout < need:
                viol["backout count"].append(
                    f"{ident}: backout count {b.backout} in run {b.run}, expected at least {need} "
                    f"(run {a.run} saw {a.backout})"
                )
    viol["damaged payload"].extend(h.bad_payloads)
    viol["get failed"].extend(h.errors)
    return v


def _head(h: History, order: list[str], at: int, taken: set[str], first_consumed: dict[str, int]) -> str | None:
    """The message a get at log position ``at`` would have returned from a queue whose
    committed messages are ``order`` (in get order: highest priority first, then earliest
    arrival, i.e. producer run, then counter): the first committed before ``at``, not
    consumed before it (``first_consumed``: id -> log position) and not ``taken`` by an
    earlier cut get."""
    for ident in order:
        if ident in taken or h.committed_at.get(ident, at) >= at or first_consumed.get(ident, at) < at:
            continue
        return ident
    return None


def _get_order(h: History, queue: str) -> list[str]:
    """The committed messages of ``queue`` in get order (see :func:`_head`)."""

    def key(ident: str) -> tuple[int, int, int]:
        run, n = ident.split(".")
        return (-h.puts[ident][1], int(run), int(n))

    return sorted((i for i, (q, _) in h.puts.items() if q == queue and h.state.get(i) == "committed"), key=key)


def read_run_logs(log_dir: str) -> list[tuple[str, list[str]]]:
    """The logs of a harness directory in run order, the drain last: ``(run, lines)``."""
    out = []
    names = sorted(n for n in os.listdir(log_dir) if n.startswith("run-") and n.endswith(".log"))
    for name in names:
        with open(os.path.join(log_dir, name), encoding="utf-8", errors="replace", newline="") as f:
            out.append((str(int(name[4:-4])), f.readlines()))
    drain_log = os.path.join(log_dir, "drain.log")
    if os.path.exists(drain_log):
        with open(drain_log, encoding="utf-8", errors="replace", newline="") as f:
            out.append(("drain", f.readlines()))
    return out


# -- the driver --------------------------------------------------------------------------------


@dataclass
class KillPlan:
    """How one worker run ends: ``kind`` is ``delay`` (SIGKILL ``delay`` s after the worker is
    ready), ``open`` (``delay`` s after it was started: lands in start-up or recovery),
    ``marker`` (right after its ``k``-th log line ``marker``, ``delay`` s later), ``self``
    (the worker kills itself at the ``k``-th pass of ``point``) or ``clean`` (no kill: the
    worker runs its units of work and closes, as the corruption trial needs)."""

    kind: str
    delay: float = 0.0
    marker: str = ""
    point: str = ""
    k: int = 1

    def describe(self) -> str:
        if self.kind == "self":
            return f"self at {self.point} #{self.k}"
        if self.kind == "marker":
            return f"after {self.marker} #{self.k} +{self.delay * 1000:.1f} ms"
        return f"{self.kind} {self.delay:.3f} s"


def choose_plan(rng: random.Random, quick: bool) -> KillPlan:
    """One kill plan: a third timed at random, the rest aimed at commits, sweeps and unsweeps."""
    r = rng.random()
    span = 0.6 if quick else 2.0
    if r < 0.3:
        return KillPlan("delay", delay=rng.uniform(0.0, span))
    if r < 0.4:
        return KillPlan("open", delay=rng.uniform(0.05, 0.6))
    if r < 0.65:
        what = rng.choice(sorted(MARKERS))
        return KillPlan("marker", marker=MARKERS[what], k=rng.randint(1, 30), delay=rng.choice((0, 0, 0.0005, 0.002)))
    return KillPlan("self", point=rng.choice(SELF_POINTS), k=rng.randint(1, 20))


class _Tail:
    """Follows a log file as the worker appends to it: ready or not, and counts of each event."""

    def __init__(self, path: str):
        self.path = path
        self.offset = 0
        self.partial = b""
        self.ready = False
        self.counts: Counter[str] = Counter()

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            op = line.split(b" ", 1)[0].decode()
            if op == "R":
                self.ready = True
            elif self.ready:
                self.counts[op] += 1


def run_worker_once(
    store_dir: str,
    log_path: str,
    seed: int,
    run: int,
    plan: KillPlan,
    sync: str = "commit",
    interval: float = DEFAULT_INTERVAL,
    fallback: float = 1.5,
    ready_timeout: float = 60.0,
    max_ops: int = 0,
    fill_only: bool = False,
) -> tuple[int, str]:
    """Start one worker, end it as ``plan`` says (SIGKILL at the latest ``fallback`` s after it
    is ready), and return (its exit status, a harness problem or ""). A plan of kind ``clean``
    lets it run ``max_ops`` units of work and close."""
    cmd = [sys.executable, "-m", "sweepq.bench.crash", "worker", "--data-dir", store_dir, "--log", log_path]
    cmd += ["--seed", str(seed), "--run", str(run), "--sync", sync, "--interval", str(interval)]
    if plan.kind == "self":
        cmd += ["--kill-at", f"{plan.point}:{plan.k}"]
    if max_ops:
        cmd += ["--max-ops", str(max_ops)]
    if fill_only:
        cmd.append("--fill-only")
    expected = 0 if plan.kind == "clean" else -signal.SIGKILL
    err_path = log_path[:-4] + ".err"
    started: list[subprocess.Popen] = []
    problem = ""
    ready_at = None
    try:
        proc = start_child(cmd, err_path, started)
        tail = _Tail(log_path)
        t0 = time.monotonic()
        while proc.poll() is None:
            now = time.monotonic()
            tail.poll()
            if tail.ready and ready_at is None:
                ready_at = now
            if plan.kind == "open" and now - t0 >= plan.delay:
                break
            if ready_at is None:
                if now - t0 > ready_timeout:
                    problem = f"not ready {ready_timeout:.0f} s after start"
                    break
                time.sleep(0.002)
                continue
            if plan.kind == "clean":
                if now - ready_at > ready_timeout:
                    problem = f"still running {ready_timeout:.0f} s after it was ready"
                    break
                time.sleep(0.01)
                continue
            if now - ready_at >= fallback and plan.kind in ("self", "marker"):
                break  # the point was not reached in time: a timed kill instead
            if plan.kind == "delay" and now - ready_at >= plan.delay:
                break
            if plan.kind == "marker" and tail.counts[plan.marker] >= plan.k:
                if plan.delay:
                    time.sleep(plan.delay)
                break
            time.sleep(0.0005 if plan.kind == "marker" else 0.002)
    finally:  # the planned kill, or an interrupted driver: never leave a worker behind
        kill_children(started)
    code = proc.returncode
    if code != expected and not problem:
        with open(err_path, "rb") as f:
            text = f.read().decode(errors="replace").strip().splitlines()
        problem = f"exited with status {code}: " + (text[-1] if text else "no error output")
    return code, problem


def start_child(cmd: list[str], err_path: str, started: list[subprocess.Popen]) -> subprocess.Popen:
    """Start a harness child (a worker or a server) in its own session, so that Ctrl-C in the
    terminal reaches only the driver, with its stderr appended to ``err_path``. The child is
    in ``started`` before an interrupt can arrive (interrupts are held while it starts), so
    the caller's ``finally: kill_children(started)`` never leaves one running."""
    with open(err_path, "ab") as err, interrupts_held():
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        started.append(proc)
    return proc


def kill_children(started: list[subprocess.Popen]) -> None:
    """SIGKILL every child in ``started`` that still runs, and reap them all."""
    for proc in started:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def run_crashtest(
    work_dir: str,
    kills: int = DEFAULT_KILLS,
    seed: int = 1,
    sync: str = "commit",
    interval: float = DEFAULT_INTERVAL,
    quick: bool = False,
    progress: Callable[[int, KillPlan, str], None] | None = None,
) -> Verdict:
    """The harness: ``kills`` worker runs, each SIGKILLed as :func:`choose_plan` says, on the
    store ``work_dir/store`` (logs in ``work_dir/logs``), then the final drain, then the
    verdict. ``progress(i, plan, problem)`` is called after each kill."""
    rng = random.Random(seed)
    store_dir = os.path.join(work_dir, "store")
    log_dir = os.path.join(work_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    t0 = time.monotonic()
    problems = []
    for i in range(1, kills + 1):
        plan = choose_plan(rng, quick)
        log_path = os.path.join(log_dir, f"run-{i:05d}.log")
        _, problem = run_worker_once(store_dir, log_path, seed, i, plan, sync, interval, fallback=0.8 if quick else 1.5)
        if problem:
            problems.append(f"run {i} ({plan.describe()}): {problem}")
        if progress is not None:
            progress(i, plan, problem)
    why = drain(store_dir, os.path.join(log_dir, "drain.log"), sync)
    verdict = judge(parse_logs(read_run_logs(log_dir)))
    verdict.seed, verdict.kills, verdict.seconds = seed, kills, time.monotonic() - t0
    if why:
        verdict.violations["final open failed"].append(why)
    verdict.violations["worker failed"].extend(problems)
    return verdict


# -- corruption ------------------------------------------------------------------------------------


def store_files(store_dir: str) -> dict[str, list[str]]:
    """The RocksDB files of a data directory by kind: ``sst`` (tables) and ``wal`` (logs)."""
    names = sorted(os.listdir(store_dir))
    return {
        "sst": [os.path.join(store_dir, n) for n in names if n.endswith(".sst")],
        "wal": [os.path.join(store_dir, n) for n in names if n.endswith(".log") and n[:-4].isdigit()],
    }


def corrupt(store_dir: str, kind: str, rng: random.Random) -> str:
    """Damage a closed data directory: ``sst-bitflip`` flips 3 bits in the data blocks (the first
    half) of its largest table, ``wal-bitflip`` 3 bits in the body of its newest write-ahead
    log, ``wal-truncate`` cuts the last third of that log, ``sst-truncate`` the last 200 bytes
    of its largest table. Returns what was done; raises FileNotFoundError when there is no
    such file."""
    files = store_files(store_dir)
    pool = files["sst" if kind.startswith("sst") else "wal"]
    pool = [p for p in pool if os.path.getsize(p) > 0]
    if not pool:
        raise FileNotFoundError(f"no {kind.split('-')[0]} file with data in {store_dir}")
    path = max(pool, key=os.path.getsize) if kind.startswith("sst") else pool[-1]
    size = os.path.getsize(path)
    name = os.path.basename(path)
    if kind.endswith("truncate"):
        cut = 200 if kind.startswith("sst") else max(size // 3, 1)
        with open(path, "r+b") as f:
            f.truncate(max(size - cut, 0))
        return f"{name}: cut {cut} of {size} bytes"
    hi = size // 2 if kind.startswith("sst") else size
    lo = 0 if kind.startswith("sst") else min(64, size - 1)
    offsets = sorted(rng.randrange(lo, max(hi, lo + 1)) for _ in range(3))
    with open(path, "r+b") as f:
        for off in offsets:
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ (1 << rng.randrange(8))]))
    return f"{name}: flipped a bit at offsets {offsets} of {size} bytes"


CORRUPTIONS = ("sst-bitflip", "sst-truncate", "wal-bitflip", "wal-truncate")


def corruption_trial(work_dir: str, kind: str, seed: int = 1, sync: str = "commit") -> tuple[Verdict, str]:
    """Build a backlog with one worker run, damage the store as ``kind`` says (:func:`corrupt`),
    then drain and judge with damage allowed: passes when every committed message either
    comes back intact or is named by MsgId in an OBJECT_DAMAGED (2101) error, and the store
    opens (when it refuses with an MQError, a second drain opens it with ``repair=True``, as
    the refusal advises, and the verdict notes both). The tables exist after a clean close
    (``sst-*``: the worker runs 400 units of work and closes); the write-ahead log holds data
    after a kill (``wal-*``: killed 0.7 s after it is ready). Returns the verdict and what was
    damaged."""
    rng = random.Random(seed)
    store_dir = os.path.join(work_dir, "store")
    log_dir = os.path.join(work_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    t0 = time.monotonic()
    log_path = os.path.join(log_dir, "run-00001.log")
    if kind.startswith("sst"):
        _, problem = run_worker_once(store_dir, log_path, seed, 1, KillPlan("clean"), sync, max_ops=400, fill_only=True)
    else:
        _, problem = run_worker_once(store_dir, log_path, seed, 1, KillPlan("delay", delay=0.7), sync, fill_only=True)
    try:
        what = corrupt(store_dir, kind, rng)
    except FileNotFoundError as e:
        what = f"nothing damaged: {e}"
    drain_log = os.path.join(log_dir, "drain.log")
    why = drain(store_dir, drain_log, sync)
    notes = []
    if why and why.startswith("MQError"):
        # Refused, as the issue allows, with advice: an operator would open it again with
        # repair=True. In a new process: a refused open may hold the store's lock in this one.
        notes.append(f"open refused: {why}")
        os.remove(drain_log)
        cmd = [sys.executable, "-m", "sweepq.bench.crash", "drain", "--data-dir", store_dir, "--log", drain_log]
        out = subprocess.run([*cmd, "--sync", sync, "--repair"], capture_output=True, text=True)
        why = out.stderr.strip().splitlines()[-1] if out.returncode else None
        with open(drain_log) as f:
            moved = next((line.split()[1:] for line in f if line.startswith("RP")), None)
        if moved is not None:
            notes.append(f"opened with repair=True, which moved to lost/: {', '.join(moved) or 'nothing'}")

    verdict = judge(parse_logs(read_run_logs(log_dir)), allow_damaged=True)
    verdict.notes.extend(notes)
    verdict.seed, verdict.kills, verdict.seconds = seed, 0 if kind.startswith("sst") else 1, time.monotonic() - t0
    verdict.notes.insert(0, f"damage: {kind}, {what}")
    if why:
        verdict.violations["final open failed"].append(why)
    if problem:
        verdict.violations["worker failed"].append(problem)
    return verdict, what


# -- the command line ---------------------------------------------------------------------------------


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def keeps_work_on_interrupt(command: str, work: str) -> Iterator[None]:
    """Ctrl-C (or SIGTERM) during a harness run: its children are already killed by the
    runners' ``finally``; say where the logs and store are kept (they are what a user
    needs to look at an interrupted run), then let the interrupt end the command (exit 130)."""
    try:
        yield
    except KeyboardInterrupt:
        print(f"sweepq {command}: interrupted; the logs and store are kept in {work}", file=sys.stderr, flush=True)
        raise


def _crashtest_command(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # a terminated driver kills its worker first
    if args.kills is None:
        args.kills = QUICK_KILLS if args.quick else DEFAULT_KILLS
    work = args.data_dir
    made = work is None
    if made:
        work = tempfile.mkdtemp(prefix="sweepq-crash-")
    elif os.path.exists(work) and (not os.path.isdir(work) or os.listdir(work)):
        print(
            f"sweepq crashtest: error: {work} is not an empty directory; pass a new or empty one",
            file=sys.stderr,
        )
        return 2
    os.makedirs(work, exist_ok=True)
    if args.corrupt:
        print(f"sweepq crashtest: one worker's backlog, then {args.corrupt}, seed {args.seed}, in {work}", flush=True)
        with keeps_work_on_interrupt("crashtest", work):
            verdict, _ = corruption_trial(work, args.corrupt, args.seed, args.sync)
        print(verdict.render(f"sweepq crashtest --corrupt {args.corrupt} --seed {args.seed} --sync {args.sync}"))
        print(f"  logs and store kept in {work}")
        return 0 if verdict.ok else 1
    replay = f"sweepq crashtest --kills {args.kills} --seed {args.seed} --sync {args.sync} --interval {args.interval:g}"
    replay += " --quick" if args.quick else ""
    print(f"sweepq crashtest: {args.kills:,} kill points, seed {args.seed}, in {work}", flush=True)
    with keeps_work_on_interrupt("crashtest", work):
        verdict = _run_with_progress(args, work)
    print(verdict.render(replay))
    if verdict.ok and made and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"  logs and store kept in {work}")
    return 0 if verdict.ok else 1


def _run_with_progress(args: argparse.Namespace, work: str) -> Verdict:
    """run_crashtest with a progress bar (rich) or, without rich, a line every 50 kills."""
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:

        def say(i: int, plan: KillPlan, problem: str) -> None:
            if i % 50 == 0 or problem:
                print(f"kill {i}/{args.kills}: {plan.describe()} {problem}", flush=True)

        return run_crashtest(work, args.kills, args.seed, args.sync, args.interval, quick=args.quick, progress=say)
    columns = (TextColumn("kills"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, TextColumn("{task.description}")) as bar:
        task = bar.add_task("", total=args.kills)

        def show(i: int, plan: KillPlan, problem: str) -> None:
            bar.update(task, completed=i, description=plan.describe() + (f"  ! {problem}" if problem else ""))

        return run_crashtest(work, args.kills, args.seed, args.sync, args.interval, quick=args.quick, progress=show)


def add_crash_options(p: argparse.ArgumentParser) -> None:
    """The options of ``sweepq crashtest`` (and of ``python -m sweepq.bench.crash run``)."""
    from sweepq.pipeline.args import number

    p.add_argument(
        "--kills",
        type=number(int, 1),
        default=None,
        help=f"kill points, each a worker run ended by SIGKILL (default: {DEFAULT_KILLS:,}; --quick: {QUICK_KILLS})",
    )
    p.add_argument("--quick", action="store_true", help="the CI form: short worker runs, 50 kill points by default")
    p.add_argument(
        "--data-dir",
        default=None,
        help="an empty or new directory for the store and the logs (default: a temporary one, removed when the "
        "verdict passes)",
    )
    p.add_argument("--seed", type=number(int, 0), default=1, help="seed of every random choice; replays a run")
    p.add_argument("--sync", choices=("commit", "os", "none"), default="commit", help="the queue manager's sync option")
    p.add_argument(
        "--interval", type=number(float, 0, low_open=True), default=DEFAULT_INTERVAL, help="sweep interval, seconds"
    )
    p.add_argument("--keep", action="store_true", help="keep a temporary directory even when the verdict passes")
    p.add_argument(
        "--corrupt",
        choices=CORRUPTIONS,
        default=None,
        help="instead of kills: build a backlog, damage the store's files this way, drain and judge (every "
        "committed message must come back or be named damaged by MsgId)",
    )


def register_crash_command(sub) -> None:
    """Add ``crashtest`` to the ``sweepq`` subparsers ``sub``."""
    from sweepq.pipeline.args import HelpFormatter

    c = sub.add_parser(
        "crashtest",
        help="the kill -9 harness: kill a worker at random moments, restart, verify nothing lost or duplicated",
        description="Run a worker that puts and gets persistent messages under syncpoint with the sweeper at a "
        "short interval; SIGKILL it at random moments (in commits, sweeps, unsweeps, recovery), restart it on the "
        "same directory, N times; then drain and judge from the workers' logs: 0 committed messages lost, 0 "
        "delivered twice, order kept per priority. Exits 1 on any violation.",
        formatter_class=HelpFormatter,
    )
    add_crash_options(c)
    c.set_defaults(func=_crashtest_command)


def _drain_main(args: argparse.Namespace) -> int:
    """The drain as a process of its own; why it could not open goes to stderr (exit 1)."""
    why = drain(args.data_dir, args.log, args.sync, args.repair)
    if why:
        print(why, file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sweepq.bench.crash worker ...`` (one worker), ``... drain ...`` (the final
    drain in a process of its own) or ``... run ...`` (the harness)."""
    from sweepq.pipeline.args import HelpFormatter, Parser, number

    p = Parser(prog="python -m sweepq.bench.crash", formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="what", required=True, parser_class=Parser)
    w = sub.add_parser("worker", help="one worker run (the driver starts these)")
    w.add_argument("--data-dir", required=True, help="the store directory")
    w.add_argument("--log", required=True, help="the event log to append to")
    w.add_argument("--seed", type=number(int, 0), default=1, help="the harness seed")
    w.add_argument("--run", type=number(int, 1), default=1, help="this run's number (the producer id)")
    w.add_argument("--sync", choices=("commit", "os", "none"), default="commit", help="the sync option")
    w.add_argument("--interval", type=number(float, 0, low_open=True), default=DEFAULT_INTERVAL, help="sweep interval")
    w.add_argument("--kill-at", default=None, help="POINT:N, kill this process at the N-th pass of POINT")
    w.add_argument("--max-ops", type=number(int, 0), default=0, help="units of work, then close (0: until killed)")
    w.add_argument("--fill-only", action="store_true", help="no drain phases: a backlog builds")
    w.set_defaults(func=worker_main)
    d = sub.add_parser("drain", help="open a store, drain the harness queues, log like a worker")
    d.add_argument("--data-dir", required=True, help="the store directory")
    d.add_argument("--log", required=True, help="the event log to append to")
    d.add_argument("--sync", choices=("commit", "os", "none"), default="commit", help="the sync option")
    d.add_argument("--repair", action="store_true", help="open with repair=True")
    d.set_defaults(func=_drain_main)
    r = sub.add_parser("run", help="the harness, as 'sweepq crashtest'")
    add_crash_options(r)
    r.set_defaults(func=_crashtest_command)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
