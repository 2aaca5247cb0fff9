"""``sweepq damagetest``: the damage fuzz (issue 16 item 4, issue 24; docs/damage.md).

A trial damages one file of a data directory that real traffic built (persistent messages
on two queues at three priorities, units of work committed and backed out, sweeps into
blobs, gets from memory and from blobs, flushes into table files), then opens it (with
``repair=True`` when the plain open refuses, as the refusal advises), drains every queue
and judges. Every file kind, every damage, every state of the directory:

* file kinds (:data:`FILE_KINDS`): the manifest, ``CURRENT``, ``OPTIONS``, the
  write-ahead logs (``*.log``), the table files (``*.sst``), sweepq's own files
  (``sweepq-*``: the checkpoint, the change log, the record of the manifest, the
  statistics), RocksDB's others (``IDENTITY``, its info logs);
* damages (:data:`DAMAGES`): cut short at a random length, a 4 KiB page zeroed (the whole
  file when smaller), 1 to 3 bits flipped, deleted;
* states (:data:`STATES`): ``closed`` (the queue manager closed cleanly), ``killed`` (a
  process working on it killed with SIGKILL at a random point, in a unit of work or between
  two), ``open`` (damaged while a queue manager has it open and goes on working, then
  closes); and ``plain`` kills: killed, not damaged at all.

Every combination comes round in turn (:data:`COMBOS`: the quick form is one round), the
closed and killed ones on copies of a few shared directories (one build serves
:data:`PER_BASE` trials); everything random comes from ``random.Random(f"{seed}:{trial}")``.

The verdict of a trial, by class (a trial may fall in several):

* **wrong data** (violation): a message delivered that was never put, or with a payload
  that is not the one put (each carries its id and a hash of itself);
* **consumed back** (violation): a message whose get was committed is delivered again;
* **twice** (violation): a message delivered twice in the drain;
* **silent loss** (violation): committed messages neither consumed nor delivered, and the
  open reported nothing at all (no damage line, no 2101);
* **unusable** (violation): the queue manager does not open with ``repair=True``, or a
  put and a get fail after the drain;
* **false loss** (violation): a message named lost (``recovery.damaged_msg_ids``, or a 2101
  naming it) that was consumed or is delivered; after a plain kill, any message named;
* **named loss**: messages lost and named by MsgId; **reported loss**: lost, the damage
  reported, but these messages not named (what nothing could name: docs/damage.md).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from .crash.worker import EventLog, check_payload, ident_of, ids_in_error, msg_id, payload

QUEUES = ("DMG.A", "DMG.B")
PRIORITIES = (0, 4, 9)
FILE_KINDS = ("MANIFEST", "CURRENT", "OPTIONS", "log", "sst", "sweepq", "other")
DAMAGES = ("cut", "zero", "flip", "delete")
STATES = ("closed", "killed", "open")
# Every (state, file kind, damage) in the order trials take them, then one plain kill.
COMBOS = [(s, k, d) for k in FILE_KINDS for d in DAMAGES for s in STATES] + [("plain", "none", "none")]
QUICK_TRIALS = len(COMBOS)
DEFAULT_TRIALS = 1000
PER_BASE = 7  # closed or killed trials that share one built directory (each on a copy)
VIOLATIONS = ("wrong data", "consumed back", "twice", "silent loss", "unusable", "false loss")
TRIAL_SECONDS = 300  # a trial that takes longer is stuck (inside RocksDB, where it cannot be stopped)


@dataclass
class Trial:
    """One trial's plan and what came of it."""

    number: int
    state: str
    kind: str  # the kind of file damaged (FILE_KINDS), "none" for a plain kill
    damage: str
    target: str = ""  # the file damaged
    what: str = ""
    opened: str = "plainly"  # plainly | with repair
    put: int = 0
    consumed: int = 0
    delivered: int = 0
    lost: int = 0
    named: int = 0  # of the lost, named by MsgId
    reported: bool = False  # the open or a get reported damage
    violations: list[str] = field(default_factory=list)

    def violation(self, cls: str, text: str) -> None:
        self.violations.append(f"{cls}: {text}")

    def classes(self) -> set[str]:
        out = {v.split(":", 1)[0] for v in self.violations}
        if self.lost and self.named:
            out.add("named loss")
        if self.lost > self.named and "silent loss" not in out:
            out.add("reported loss")
        return out


@dataclass
class Verdict:
    """The fuzz's figures (see :meth:`render`)."""

    seed: int
    trials: list[Trial] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(t.violations for t in self.trials)

    def as_json(self, replay: str = "") -> dict:
        """Every trial, as ``sweepq damagetest --json`` prints it."""
        return {
            "ok": self.ok,
            "seed": self.seed,
            "seconds": self.seconds,
            "trials": [asdict(t) for t in self.trials],
            "replay": replay,
        }

    def table(self, by: Callable[[Trial], str]) -> list[str]:
        """Trials per group (``by``) and class, as text rows."""
        cols = [*VIOLATIONS, "named loss", "reported loss", "repair"]
        groups = sorted({by(t) for t in self.trials})
        rows = ["  " + " | ".join(["", "trials", *cols])]
        for g in [*groups, "all"]:
            ts = [t for t in self.trials if g == "all" or by(t) == g]
            n = Counter(c for t in ts for c in t.classes())
            n["repair"] = sum(t.opened == "with repair" for t in ts)
            rows.append("  " + " | ".join([g, str(len(ts)), *(str(n[c]) for c in cols)]))
        return rows

    def render(self, replay: str = "") -> str:
        n = len(self.trials)
        lost = sum(t.lost for t in self.trials)
        named = sum(t.named for t in self.trials)
        lines = [
            f"damage fuzz: {'PASS' if self.ok else 'FAIL'} (seed {self.seed}): {n} trials in {self.seconds:.0f} s",
            f"  messages put {sum(t.put for t in self.trials):,}; consumed {sum(t.consumed for t in self.trials):,}; "
            f"delivered after the damage {sum(t.delivered for t in self.trials):,}; lost to damage {lost:,} "
            f"({named:,} of them named by MsgId)",
            "  trials with each outcome, by file kind:",
            *self.table(lambda t: t.kind),
            "  by state of the directory:",
            *self.table(lambda t: t.state),
            "  by damage:",
            *self.table(lambda t: t.damage),
        ]
        for t in self.trials:
            for v in t.violations[:3]:
                lines.append(f"  trial {t.number} ({t.state}, {t.damage} {t.what}): {v[:300]}")
        if replay:
            lines.append(f"  replay: {replay}")
        return "\n".join(lines)


# -- the workload ---------------------------------------------------------------------------------


class Traffic:
    """Puts and gets on :data:`QUEUES`, remembering what was put and what was consumed.

    ``put`` and ``consumed`` are what returned (a put's call or its commit; a get's commit);
    ``maybe_put`` and ``maybe_consumed`` what a kill may have cut in the middle. ``log``
    (an EventLog) receives every event as it happens, for a process that is killed;
    ``die_at`` kills this process at that pass of a kill point."""

    def __init__(self, rng: random.Random, run: int, log: EventLog | None = None, die_at: int = 0):
        self.rng = rng
        self.run = run
        self.n = 0
        self.put: set[str] = set()
        self.consumed: set[str] = set()
        self.maybe_put: set[str] = set()
        self.maybe_consumed: set[str] = set()
        self.log = log
        self.die_at = die_at
        self.passes = 0

    def _event(self, kind: str, ids: list[str]) -> None:
        if self.log is not None:
            self.log.emit(kind, *ids)

    def _point(self) -> None:
        """A kill point: between two calls, or inside a unit of work before or after its commit."""
        self.passes += 1
        if self.die_at and self.passes == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def work(self, qm, steps: int) -> None:
        from sweepq.engine import GMO, MD, OO, PMO, MQError, Reason

        conn = qm.connect()
        hs = {q: conn.open(q, OO.OUTPUT | OO.INPUT_SHARED) for q in QUEUES}
        rng = self.rng
        try:
            for _ in range(steps):
                q = hs[rng.choice(QUEUES)]
                r = rng.random()
                self._point()
                if r < 0.55:
                    uow = rng.random() < 0.4
                    batch = [self._next() for _ in range(rng.randint(1, 8))]
                    self._event("P+", batch)
                    for ident in batch:
                        prio = rng.choice(PRIORITIES)
                        self.maybe_put.add(ident)
                        q.put(
                            payload(ident, prio, rng.randint(40, 900)),
                            MD(msg_id=msg_id(ident), priority=prio),
                            PMO.SYNCPOINT if uow else PMO.NONE,
                        )
                        if not uow:
                            self._event("P=", [ident])
                            self.put.add(ident)
                    if uow:
                        self._point()
                        conn.commit()
                        self._event("P=", batch)
                        self.put.update(batch)
                    self.maybe_put -= set(batch)
                elif r < 0.9:
                    got = []
                    for _ in range(rng.randint(1, 6)):
                        try:
                            got.append(check_payload(q.get(GMO.SYNCPOINT).data)[0])
                        except MQError as e:
                            if e.reason not in (Reason.NO_MSG_AVAILABLE, Reason.OBJECT_DAMAGED):
                                raise
                            break
                    got = [i for i in got if i]
                    self._point()
                    if rng.random() < 0.2:
                        conn.backout()
                        continue
                    self._event("G+", got)
                    self.maybe_consumed.update(got)
                    conn.commit()
                    self._event("G=", got)
                    self.consumed.update(got)
                    self.maybe_consumed -= set(got)
                else:
                    qm.sweeper.run_once()
                    if rng.random() < 0.3:
                        qm.blob_store().flush()  # a table file, and a manifest edit
        finally:
            with contextlib.suppress(Exception):
                conn.disconnect()

    def _next(self) -> str:
        self.n += 1
        return f"{self.run}.{self.n}"

    @classmethod
    def from_log(cls, path: str) -> Traffic:
        """What a killed process's event log says it did."""
        t = cls(random.Random(0), 0)
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # cut by the kill
                kind, *ids = line.split()
                if kind == "P+":
                    t.maybe_put.update(ids)
                elif kind == "P=":
                    t.put.update(ids)
                    t.maybe_put.difference_update(ids)
                elif kind == "G+":
                    t.maybe_consumed.update(ids)
                elif kind == "G=":
                    t.consumed.update(ids)
                    t.maybe_consumed.difference_update(ids)
        return t


def _open(path: str, repair: bool = False):
    from sweepq.engine import QueueManager
    from sweepq.sweeper import ManualClock

    return QueueManager.open(
        path,
        sweeper=False,
        clock=ManualClock(),
        sync="os",
        repair=repair,
        readahead_low_water=0,
        store_options={"max_blob_records": 16, "write_buffer_bytes": 1 << 20},
    )


def _define(qm) -> None:
    from sweepq.engine import Persistence

    for q in QUEUES:
        if q not in qm.queue_names():
            qm.define_queue(q, default_persistence=Persistence.PERSISTENT, max_depth=10**6)


def build(path: str, rng: random.Random, run: int = 1) -> Traffic:
    """Real traffic on a new data directory ``path``, in two opens; closed cleanly."""
    traffic = Traffic(rng, run)
    for steps in (rng.randint(30, 90), rng.randint(20, 70)):
        qm = _open(path)
        _define(qm)
        traffic.work(qm, steps)
        qm.close()
    return traffic


_KILLED = """
import random, sys
from sweepq.bench import damage
from sweepq.bench.crash.worker import EventLog
path, seed, log, die_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
qm = damage._open(path)
damage._define(qm)
t = damage.Traffic(rng, 2, EventLog(log), die_at)
t.work(qm, 400)
"""


def build_killed(path: str, rng: random.Random) -> Traffic:
    """Real traffic on a new data directory ``path``: an open closed cleanly, then a process
    that works on it killed with SIGKILL at a random point (its event log says what it did)."""
    traffic = Traffic(rng, 1)
    qm = _open(path)
    _define(qm)
    traffic.work(qm, rng.randint(20, 60))
    qm.close()
    log = path + ".events"
    args = [sys.executable, "-c", _KILLED, path, str(rng.random()), log, str(rng.randint(20, 300))]
    out = subprocess.run(args, capture_output=True, text=True, timeout=TRIAL_SECONDS)
    if out.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the killed worker exited with {out.returncode}: {out.stderr[-1500:]}")
    killed = Traffic.from_log(log)
    os.remove(log)
    traffic.put |= killed.put
    traffic.maybe_put |= killed.maybe_put
    traffic.consumed |= killed.consumed
    traffic.maybe_consumed |= killed.maybe_consumed
    return traffic


# -- damage -----------------------------------------------------------------------------------------


def file_kind(name: str) -> str:
    """A data directory's file by the kind the fuzz counts (:data:`FILE_KINDS`)."""
    for suffix, kind in ((".sst", "sst"), (".log", "log")):
        if name.endswith(suffix) and name[: -len(suffix)].isdigit():
            return kind
    for prefix in ("MANIFEST", "OPTIONS", "CURRENT"):
        if name.startswith(prefix):
            return prefix
    return "sweepq" if name.startswith("sweepq-") else "other"


def damage(path: str, rng: random.Random, kind: str, how: str) -> tuple[str, str]:
    """Damage one file of kind ``kind`` in ``path`` (any file with bytes in it, when there is
    none of that kind) as ``how`` says (:data:`DAMAGES`). Returns (the file, what was done)."""
    names = sorted(n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n)) and n != "LOCK")
    pool = [n for n in names if file_kind(n) == kind] or [n for n in names if os.path.getsize(os.path.join(path, n))]
    name = rng.choice(pool or names)
    full = os.path.join(path, name)
    size = os.path.getsize(full)
    if how == "delete":
        os.remove(full)
        return name, f"{name}: deleted ({size} bytes)"
    if size == 0:
        return name, f"{name}: empty, left as it is"
    with open(full, "r+b") as f:
        if how == "cut":
            cut = rng.randrange(size)
            f.truncate(cut)
            return name, f"{name}: cut to {cut} of {size} bytes"
        if how == "zero":
            page = rng.randrange(max(size // 4096, 1)) * 4096 if size > 4096 else 0
            n = min(4096, size - page)
            f.seek(page)
            f.write(bytes(n))
            return name, f"{name}: bytes {page}..{page + n} of {size} zeroed"
        offsets = sorted(rng.randrange(size) for _ in range(rng.randint(1, 3)))
        for off in offsets:
            f.seek(off)
            b = f.read(1)[0]
            f.seek(off)
            f.write(bytes([b ^ (1 << rng.randrange(8))]))
    return name, f"{name}: bits flipped at {offsets} of {size} bytes"


# -- one trial ------------------------------------------------------------------------------------------


def _base(work: str, seed: int, number: int) -> tuple[str, Traffic]:
    """The directory that trial ``number`` (closed, killed or a plain kill) copies: built
    once for :data:`PER_BASE` trials of its state in its round of :data:`COMBOS`."""
    state = COMBOS[(number - 1) % len(COMBOS)][0]
    state = "killed" if state == "plain" else state
    at = (number - 1) % len(COMBOS)
    nth = sum(s == state for s, _k, _d in COMBOS[:at])  # this trial's place among its state's
    path = os.path.join(work, f"base-{state}-{(number - 1) // len(COMBOS)}-{nth // PER_BASE}")
    traffic = _BASES.get(path)
    if traffic is None:
        rng = random.Random(f"{seed}:{path[len(work) :]}")
        traffic = _BASES[path] = build_killed(path, rng) if state == "killed" else build(path, rng)
    return path, traffic


_BASES: dict[str, Traffic] = {}  # built directories of the running fuzz, by path


def run_trial(work: str, seed: int, number: int) -> Trial:
    """One trial (see the module docstring): the combination :data:`COMBOS` gives ``number``."""
    state, kind, how = COMBOS[(number - 1) % len(COMBOS)]
    rng = random.Random(f"{seed}:{number}")
    t = Trial(number, state, kind, how)
    path = os.path.join(work, f"trial-{number:05d}")
    if state == "open":
        traffic = _damaged_while_open(path, rng, t)
    else:
        base, traffic = _base(work, seed, number)
        shutil.copytree(base, path)
        if state == "plain":
            t.what = "killed, not damaged"
        else:
            t.target, t.what = damage(path, rng, kind, how)
    t.put, t.consumed = len(traffic.put), len(traffic.consumed)
    _judge(path, traffic, t)
    shutil.rmtree(path, ignore_errors=True)
    return t


def _damaged_while_open(path: str, rng: random.Random, t: Trial) -> Traffic:
    from sweepq.blobstore import StoreError
    from sweepq.engine import MQError

    traffic = Traffic(rng, 1)
    qm = _open(path)
    _define(qm)
    traffic.work(qm, rng.randint(40, 120))
    qm.blob_store().flush()
    traffic.work(qm, rng.randint(10, 60))
    t.target, t.what = damage(path, rng, t.kind, t.damage)
    with contextlib.suppress(MQError, StoreError):
        traffic.work(qm, rng.randint(5, 40))
        qm.blob_store().flush()
        traffic.work(qm, rng.randint(5, 20))
    with contextlib.suppress(MQError):
        qm.close()
    return traffic


def _judge(path: str, traffic: Traffic, t: Trial) -> None:
    from sweepq.engine import GMO, OO, MQError, Reason

    try:
        qm = _open(path)
    except MQError:
        t.opened = "with repair"
        try:
            qm = _open(path, repair=True)
        except MQError as e:
            t.violation("unusable", f"the open with repair=True failed: {' '.join(str(e).split())[:300]}")
            return
    named = {i for i in (ident_of(bytes(m)) for m in qm.recovery.damaged_msg_ids) if i}
    t.reported = bool(qm.recovery.damaged)
    seen: Counter[str] = Counter()
    try:
        _define(qm)
        with qm.connect() as conn:
            for q in QUEUES:
                h = conn.open(q, OO.INPUT_SHARED)
                errors = 0
                while errors < 200:
                    try:
                        m = h.get(GMO.NONE)
                    except MQError as e:
                        if e.reason == Reason.NO_MSG_AVAILABLE:
                            break
                        errors += 1
                        if e.reason == Reason.OBJECT_DAMAGED:
                            named.update(ids_in_error(e))
                            t.reported = True
                        continue
                    ident, intact = check_payload(m.data)
                    if not intact or ident not in traffic.put | traffic.maybe_put:
                        t.violation("wrong data", f"on {q}: {bytes(m.data[:40])!r}")
                        continue
                    seen[ident] += 1
            h = conn.open(QUEUES[0], OO.OUTPUT | OO.INPUT_SHARED)  # usable: a put and a get work
            h.put(b"after the damage")
            if h.get().data != b"after the damage":
                t.violation("unusable", "a put did not come back")
        t.reported = t.reported or bool(qm.damage())
    except MQError as e:
        t.violation("unusable", f"{' '.join(str(e).split())[:300]}")
    finally:
        with contextlib.suppress(MQError):
            qm.close()
    again = sorted(set(seen) & traffic.consumed)
    if again:
        t.violation("consumed back", f"{len(again)} ({', '.join(again[:5])})")
    twice = [i for i, c in seen.items() if c > 1]
    if twice:
        t.violation("twice", f"{len(twice)} ({', '.join(twice[:5])})")
    t.delivered = len(seen)
    lost = traffic.put - traffic.consumed - traffic.maybe_consumed - set(seen)
    t.lost, t.named = len(lost), len(lost & named)
    if lost and not t.reported:
        t.violation(
            "silent loss", f"{len(lost)} committed message(s) lost, nothing reported ({', '.join(sorted(lost)[:5])})"
        )
    false = named & (traffic.consumed | set(seen)) if t.state != "plain" else named
    if false:
        t.violation("false loss", f"{len(false)} named lost but consumed or delivered ({', '.join(sorted(false)[:5])})")
    if t.state == "plain" and lost:
        t.violation("silent loss" if not t.reported else "false loss", f"a plain kill lost {len(lost)} message(s)")


def run_fuzz(work: str, trials: int, seed: int, progress: Callable[[int, Trial], None] | None = None) -> Verdict:
    """``trials`` trials in ``work`` (each in a directory of its own, removed after it)."""
    t0 = time.monotonic()
    verdict = Verdict(seed)
    _BASES.clear()
    try:
        for k in range(1, trials + 1):
            trial = run_trial(work, seed, k)
            verdict.trials.append(trial)
            if progress is not None:
                progress(k, trial)
    finally:
        for path in _BASES:
            shutil.rmtree(path, ignore_errors=True)
        _BASES.clear()
    verdict.seconds = time.monotonic() - t0
    return verdict


def arm_watchdog() -> None:
    """(Re)arm the watchdog: a trial stuck longer than :data:`TRIAL_SECONDS` ends the process
    with every thread's stack on stderr (its directory kept), instead of hanging for ever."""
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no real stderr: no watchdog
        faulthandler.dump_traceback_later(TRIAL_SECONDS, exit=True, file=sys.__stderr__)


def disarm_watchdog() -> None:
    faulthandler.cancel_dump_traceback_later()
