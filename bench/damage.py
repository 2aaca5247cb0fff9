"""``sweepq damagetest``: the damage fuzz (issue 16, item 4; docs/damage.md).

Each trial builds a data directory with real traffic (persistent messages on two queues at
three priorities, units of work, sweeps into blobs, gets from memory and from blobs), then
damages one file of it chosen at random, *any* file (table files, write-ahead logs, the
manifest, CURRENT, OPTIONS, RocksDB's own logs, sweepq's checkpoint and statistics), by
flipping 1 to 3 bits or cutting it short, either between two opens or while a queue
manager has it open and goes on working. Then it opens the directory (with
``repair=True`` when the plain open refuses, as the refusal advises), drains every queue,
and judges:

* **no wrong data**: every message delivered is one that was put, byte for byte (each
  payload carries its id and a hash of itself);
* **no consumed message again**: no message whose get returned (or whose unit of work
  committed) is delivered again, and none twice in the drain;
* **usable**: the queue manager opens (with repair when asked) and puts and gets work.

Messages may be lost (damage destroys data): the fuzz counts them, and how many of them
the queue manager named (by MsgId, in ``recovery.damaged_msg_ids`` or a 2101).

Everything random comes from ``random.Random(f"{seed}:{trial}")``: a seed replays a trial.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import random
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from .crash.worker import check_payload, ident_of, ids_in_error, msg_id, payload

QUEUES = ("DMG.A", "DMG.B")
PRIORITIES = (0, 4, 9)
QUICK_TRIALS = 60
DEFAULT_TRIALS = 1000
PHASES = ("between opens", "while open")
KINDS = ("flip", "truncate")


@dataclass
class Trial:
    """One trial's plan and what came of it."""

    number: int
    phase: str
    kind: str
    target: str = ""  # the file damaged, by kind (sst, log, MANIFEST, ...)
    what: str = ""
    opened: str = "plainly"  # plainly | with repair
    put: int = 0
    consumed: int = 0
    delivered: int = 0
    lost: int = 0
    named: int = 0
    violations: list[str] = field(default_factory=list)


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

    def render(self, replay: str = "") -> str:
        n = len(self.trials)
        by = Counter((t.target, t.kind) for t in self.trials)
        repaired = Counter(t.target for t in self.trials if t.opened == "with repair")
        lost = sum(t.lost for t in self.trials)
        named = sum(t.named for t in self.trials)
        bad = [v for t in self.trials for v in t.violations]
        lines = [
            f"damage fuzz: {'PASS' if self.ok else 'FAIL'} (seed {self.seed}): {n} trials in {self.seconds:.0f} s",
            f"  messages put {sum(t.put for t in self.trials):,}; consumed {sum(t.consumed for t in self.trials):,}; "
            f"delivered after the damage {sum(t.delivered for t in self.trials):,}",
            f"  wrong data delivered: {sum('wrong data' in v for v in bad)}; consumed messages delivered again: "
            f"{sum('consumed' in v for v in bad)}; delivered twice: {sum('twice' in v for v in bad)}; "
            f"unusable after repair: {sum('unusable' in v for v in bad)}",
            f"  opens that needed repair=True: {sum(repaired.values())} ("
            + ", ".join(f"{f} {c}" for f, c in sorted(repaired.items()))
            + f"); messages lost to damage: {lost:,} ({named:,} of them named by MsgId)",
            "  trials by file and damage: " + ", ".join(f"{f} {k} {c}" for (f, k), c in sorted(by.items())),
            "  by phase: " + ", ".join(f"{p} {c}" for p, c in sorted(Counter(t.phase for t in self.trials).items())),
        ]
        for t in self.trials:
            for v in t.violations[:3]:
                lines.append(f"  trial {t.number} ({t.phase}, {t.kind} {t.what}): {v}")
        if replay:
            lines.append(f"  replay: {replay}")
        return "\n".join(lines)


# -- the workload ---------------------------------------------------------------------------------


class Traffic:
    """Puts and gets on :data:`QUEUES`, remembering what was put and what was consumed."""

    def __init__(self, rng: random.Random, run: int):
        self.rng = rng
        self.run = run
        self.n = 0
        self.put: set[str] = set()
        self.consumed: set[str] = set()

    def work(self, qm, steps: int) -> None:
        from sweepq.engine import GMO, MD, OO, PMO, MQError, Reason

        conn = qm.connect()
        hs = {q: conn.open(q, OO.OUTPUT | OO.INPUT_SHARED) for q in QUEUES}
        rng = self.rng
        try:
            for _ in range(steps):
                q = hs[rng.choice(QUEUES)]
                r = rng.random()
                if r < 0.55:
                    uow = rng.random() < 0.4
                    batch = [self._next() for _ in range(rng.randint(1, 8))]
                    for ident in batch:
                        prio = rng.choice(PRIORITIES)
                        q.put(
                            payload(ident, prio, rng.randint(40, 900)),
                            MD(msg_id=msg_id(ident), priority=prio),
                            PMO.SYNCPOINT if uow else PMO.NONE,
                        )
                    if uow:
                        conn.commit()
                    self.put.update(batch)
                elif r < 0.9:
                    uow = rng.random() < 0.5
                    got = []
                    for _ in range(rng.randint(1, 6)):
                        try:
                            got.append(q.get(GMO.SYNCPOINT if uow else GMO.NONE))
                        except MQError as e:
                            if e.reason not in (Reason.NO_MSG_AVAILABLE, Reason.OBJECT_DAMAGED):
                                raise
                            break
                    if uow and rng.random() < 0.2:
                        conn.backout()
                        continue
                    if uow:
                        conn.commit()
                    self.consumed.update(i for i in (check_payload(m.data)[0] for m in got) if i)
                else:
                    qm.sweeper.run_once()
        finally:
            with contextlib.suppress(Exception):
                conn.disconnect()

    def _next(self) -> str:
        self.n += 1
        return f"{self.run}.{self.n}"


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


# -- damage -----------------------------------------------------------------------------------------


def file_kind(name: str) -> str:
    """A data directory's file by what it is (the fuzz's figures count by these)."""
    for suffix, kind in ((".sst", "sst"), (".log", "log")):
        if name.endswith(suffix) and name[: -len(suffix)].isdigit():
            return kind
    for prefix in ("MANIFEST", "OPTIONS", "CURRENT", "IDENTITY", "LOCK", "LOG", "sweepq-checkpoint", "sweepq-stats"):
        if name.startswith(prefix):
            return prefix.split(".")[0]
    return "other"


def damage(path: str, rng: random.Random, kind: str) -> tuple[str, str]:
    """Flip 1-3 bits in, or cut short, one file of ``path`` chosen at random (any file with
    bytes in it). Returns (its kind, what was done)."""
    names = sorted(n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n)))
    names = [n for n in names if os.path.getsize(os.path.join(path, n)) > 0] or names
    name = rng.choice(names)
    full = os.path.join(path, name)
    size = os.path.getsize(full)
    if size == 0:
        return file_kind(name), f"{name}: empty, left as it is"
    with open(full, "r+b") as f:
        if kind == "truncate":
            cut = rng.randrange(size)
            f.truncate(cut)
            return file_kind(name), f"{name}: cut to {cut} of {size} bytes"
        offsets = sorted(rng.randrange(size) for _ in range(rng.randint(1, 3)))
        for off in offsets:
            f.seek(off)
            b = f.read(1)[0]
            f.seek(off)
            f.write(bytes([b ^ (1 << rng.randrange(8))]))
    return file_kind(name), f"{name}: bits flipped at {offsets} of {size} bytes"


# -- one trial ------------------------------------------------------------------------------------------


def run_trial(work: str, seed: int, number: int) -> Trial:
    """Build, damage and judge one data directory (see the module docstring)."""
    from sweepq.engine import MQError

    rng = random.Random(f"{seed}:{number}")
    t = Trial(number, rng.choice(PHASES), rng.choice(KINDS))
    path = os.path.join(work, f"trial-{number:05d}")
    traffic = Traffic(rng, 1)
    qm = _open(path)
    _define(qm)
    traffic.work(qm, rng.randint(40, 120))
    qm.blob_store().flush()
    traffic.work(qm, rng.randint(10, 60))
    if t.phase == "while open":
        t.target, t.what = damage(path, rng, t.kind)
        with contextlib.suppress(MQError):
            traffic.work(qm, rng.randint(5, 40))
            qm.blob_store().flush()
            traffic.work(qm, rng.randint(5, 20))
    with contextlib.suppress(MQError):
        qm.close()
    if t.phase == "between opens":
        t.target, t.what = damage(path, rng, t.kind)
    t.put, t.consumed = len(traffic.put), len(traffic.consumed)
    _judge(path, traffic, t)
    shutil.rmtree(path, ignore_errors=True)
    return t


def _judge(path: str, traffic: Traffic, t: Trial) -> None:
    from sweepq.engine import GMO, OO, MQError, Reason

    try:
        qm = _open(path)
    except MQError:
        t.opened = "with repair"
        try:
            qm = _open(path, repair=True)
        except MQError as e:
            t.violations.append(f"unusable after repair=True: {' '.join(str(e).split())[:300]}")
            return
    named = {i for i in (ident_of(bytes(m)) for m in qm.recovery.damaged_msg_ids) if i}
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
                        continue
                    ident, intact = check_payload(m.data)
                    if not intact or ident not in traffic.put:
                        t.violations.append(f"wrong data delivered on {q}: {bytes(m.data[:40])!r}")
                        continue
                    seen[ident] += 1
            # usable: a put and a get work
            h = conn.open(QUEUES[0], OO.OUTPUT | OO.INPUT_SHARED)
            h.put(b"after the damage")
            if h.get().data != b"after the damage":
                t.violations.append("unusable after repair=True: a put did not come back")
    except MQError as e:
        t.violations.append(f"unusable after repair=True: {' '.join(str(e).split())[:300]}")
    finally:
        with contextlib.suppress(MQError):
            qm.close()
    again = sorted(set(seen) & traffic.consumed)
    if again:
        t.violations.append(f"consumed messages delivered again: {len(again)} ({', '.join(again[:5])})")
    twice = [i for i, c in seen.items() if c > 1]
    if twice:
        t.violations.append(f"delivered twice: {len(twice)} ({', '.join(twice[:5])})")
    live = traffic.put - traffic.consumed
    t.delivered = len(seen)
    lost = live - set(seen)
    t.lost = len(lost)
    t.named = len(lost & named)


def run_fuzz(work: str, trials: int, seed: int, progress: Callable[[int, Trial], None] | None = None) -> Verdict:
    """``trials`` trials in ``work`` (each in a directory of its own, removed after it)."""
    t0 = time.monotonic()
    verdict = Verdict(seed)
    for k in range(1, trials + 1):
        trial = run_trial(work, seed, k)
        verdict.trials.append(trial)
        if progress is not None:
            progress(k, trial)
    verdict.seconds = time.monotonic() - t0
    return verdict


TRIAL_SECONDS = 300  # a trial that takes longer is stuck (inside RocksDB, where it cannot be stopped)


def arm_watchdog() -> None:
    """(Re)arm the watchdog: a trial stuck longer than :data:`TRIAL_SECONDS` ends the process
    with every thread's stack on stderr (its directory kept), instead of hanging for ever."""
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no real stderr: no watchdog
        faulthandler.dump_traceback_later(TRIAL_SECONDS, exit=True, file=sys.__stderr__)


def disarm_watchdog() -> None:
    faulthandler.cancel_dump_traceback_later()
