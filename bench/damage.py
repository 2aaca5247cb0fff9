"""``sweepq damagetest``: the damage fuzz (issue 16 item 4, issue 24; docs/damage.md).

A trial damages one file of a data directory that real traffic built (persistent messages
on two queues at three priorities, some in groups, units of work committed and backed out,
sweeps into blobs, gets in delivery order and gets of chosen messages by MsgId, CorrelId and
GroupId under syncpoint, from memory and out of the middle of blobs, also in the session
that is killed, flushes into table files), then opens it (with
``repair=True`` when the plain open refuses, as the refusal advises), drains every queue
and judges. Every file kind, every damage, every state of the directory:

* file kinds (:data:`FILE_KINDS`): the manifest, ``CURRENT``, ``OPTIONS``, the
  write-ahead logs (``*.log``), the table files (``*.sst``), sweepq's own files
  (``sweepq-*``: the checkpoint, the change log, the record of the manifest, the
  statistics), RocksDB's others (``IDENTITY``, its info logs);
* damages (:data:`DAMAGES`): cut short at a random length, a 4 KiB page zeroed (the whole
  file when smaller), 1 to 3 bits flipped, deleted; each within what the file holds, up to
  its last byte that is not zero (a side log keeps zeros ahead of its records);
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
* **out of order** (violation): within a queue and a priority, the drain delivers a message
  before one put earlier (FIFO, also after repair);
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
import itertools
import json
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

from sweepq.engine import GMO, GROUPID_NONE, MD, MF, MO, OO, PMO, MQError, Reason

from .crash.worker import EventLog, check_payload, ident_of, ids_in_error, msg_id, payload

# FILE_KINDS, DAMAGES, STATES and COMBOS (every combination in the order trials take them, then
# one plain kill) live with the sizes the command line shows, as do the trial counts.
from .harness_sizes import COMBOS, DAMAGES, FILE_KINDS, STATES  # noqa: F401  (damage.FILE_KINDS, ... as before)
from .harness_sizes import DAMAGE_QUICK_TRIALS as QUICK_TRIALS  # noqa: F401
from .harness_sizes import DAMAGE_TRIALS as DEFAULT_TRIALS  # noqa: F401

QUEUES = ("DMG.A", "DMG.B")
PRIORITIES = (0, 4, 9)
# The trials of the first round that the test suite runs (tests/test_damage_fuzz.py, ~25 s):
# the closed and killed directories with a write-ahead log, a table file or sweepq's own file
# damaged every way, and the plain kill: where consumed messages came back (issue 32 item 3).
SUITE_TRIALS = [
    k + 1
    for k, (s, kind, _d) in enumerate(COMBOS)
    if (s in ("closed", "killed") and kind in ("log", "sst", "sweepq")) or s == "plain"
]
PER_BASE = 7  # closed or killed trials that share one built directory (each on a copy)
VIOLATIONS = ("wrong data", "consumed back", "twice", "out of order", "silent loss", "unusable", "false loss")
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
    by_id: int = 0  # of the consumed, got by MsgId, CorrelId or GroupId (under syncpoint, committed)
    by_id_killed: int = 0  # of those, in the session that was killed
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
            f"  messages put {sum(t.put for t in self.trials):,}; consumed {sum(t.consumed for t in self.trials):,} "
            f"({sum(t.by_id for t in self.trials):,} got by MsgId, CorrelId or GroupId, "
            f"{sum(t.by_id_killed for t in self.trials):,} of them in a session that was killed); "
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
    ``maybe_put`` and ``maybe_consumed`` what a kill may have cut in the middle. ``live``
    maps each committed message not consumed to (its queue, CorrelId, GroupId): what a get
    by MsgId, CorrelId or GroupId selects it by. ``log`` (an EventLog) receives every event
    as it happens, for a process that is killed; ``die_at`` kills this process at that pass
    of a kill point."""

    def __init__(self, rng: random.Random, run: int, log: EventLog | None = None, die_at: int = 0):
        self.rng = rng
        self.run = run
        self.n = 0
        self.put: set[str] = set()
        self.consumed: set[str] = set()
        self.by_id: set[str] = set()  # of the consumed, those got by MsgId, CorrelId or GroupId
        self.maybe_put: set[str] = set()
        self.maybe_consumed: set[str] = set()
        self.live: dict[str, tuple[str, bytes, bytes]] = {}
        self.by_id_killed = 0  # of by_id, consumed in a session that was killed (build_killed)
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
        """``steps`` operations: puts (alone, in a unit of work, or a group in one), gets in
        delivery order and gets of chosen messages (by MsgId, CorrelId or GroupId), each
        unit of work committed or backed out, sweeps and flushes."""
        conn = qm.connect()
        hs = {q: conn.open(q, OO.OUTPUT | OO.INPUT_SHARED) for q in QUEUES}
        rng = self.rng
        try:
            for _ in range(steps):
                q = rng.choice(QUEUES)
                r = rng.random()
                self._point()
                if r < 0.5:
                    self._puts(conn, q, hs[q])
                elif r < 0.9:
                    chosen = r >= 0.68
                    got = self._chosen_gets(hs) if chosen else self._gets(hs[q])
                    self._point()
                    if rng.random() < 0.2:
                        conn.backout()
                        continue
                    self._event("G+", got)
                    self.maybe_consumed.update(got)
                    conn.commit()
                    self._event("GI=" if chosen else "G=", got)
                    self.consumed.update(got)
                    if chosen:
                        self.by_id.update(got)
                    self.maybe_consumed -= set(got)
                    for ident in got:
                        self.live.pop(ident, None)
                else:
                    qm.sweeper.run_once()
                    if rng.random() < 0.3:
                        qm.blob_store().flush()  # a table file, and a manifest edit
        finally:
            with contextlib.suppress(Exception):
                conn.disconnect()

    def _puts(self, conn, q: str, h) -> None:
        """A batch of 1 to 8 puts, alone or in a unit of work; a batch in a unit of work may
        be a group (its own GroupId, MSG_IN_GROUP then LAST_MSG_IN_GROUP). Every message has
        a CorrelId shared with a few neighbours."""
        rng = self.rng
        uow = rng.random() < 0.4
        batch = [self._next() for _ in range(rng.randint(1, 8))]
        gid = msg_id(batch[0]).replace(b"CR", b"GR", 1) if uow and rng.random() < 0.4 else GROUPID_NONE
        self._event("P+", batch)
        for k, ident in enumerate(batch):
            prio = rng.choice(PRIORITIES)
            cid = correl_id(ident)
            md = MD(msg_id=msg_id(ident), correl_id=cid, priority=prio)
            if gid != GROUPID_NONE:
                md.group_id, md.msg_seq_number = gid, k + 1
                md.msg_flags = int(MF.LAST_MSG_IN_GROUP if k == len(batch) - 1 else MF.MSG_IN_GROUP)
            self.maybe_put.add(ident)
            h.put(payload(ident, prio, rng.randint(40, 900)), md, PMO.SYNCPOINT if uow else PMO.NONE)
            if not uow:
                self._event("P=", [ident])
                self.put.add(ident)
                self.live[ident] = (q, cid, gid)
        if uow:
            self._point()
            conn.commit()
            self._event("P=", batch)
            self.put.update(batch)
            self.live.update((i, (q, correl_id(i), gid)) for i in batch)
        self.maybe_put -= set(batch)

    def _gets(self, h) -> list[str]:
        """1 to 6 gets in delivery order, under syncpoint: the ids got."""
        got = []
        for _ in range(self.rng.randint(1, 6)):
            m = _get_or_none(h)
            if m is not None:
                got.append(check_payload(m.data)[0])
        return [i for i in got if i]

    def _chosen_gets(self, hs: dict) -> list[str]:
        """1 to 4 gets under syncpoint of messages chosen among the live ones, anywhere in
        their queue (in memory or swept into a blob): by MsgId, by CorrelId (the first of
        the messages that share it) or by GroupId (the first of its group). The ids got."""
        rng = self.rng
        got: list[str] = []
        pool = sorted(self.live)
        for ident in rng.sample(pool, min(len(pool), rng.randint(1, 4))):
            q, cid, gid = self.live[ident]
            how = rng.choice(("msg_id", "correl_id", "group_id") if gid != GROUPID_NONE else ("msg_id", "correl_id"))
            if how == "msg_id":
                m = _get_or_none(hs[q], match=MO.MATCH_MSG_ID, msg_id=msg_id(ident))
            elif how == "correl_id":
                m = _get_or_none(hs[q], match=MO.MATCH_CORREL_ID, correl_id=cid)
            else:
                m = _get_or_none(hs[q], match=MO.MATCH_GROUP_ID, group_id=gid)
            if m is not None:
                got.append(check_payload(m.data)[0])
        return [i for i in got if i]

    def _next(self) -> str:
        self.n += 1
        return f"{self.run}.{self.n}"

    def save_live(self, path: str) -> None:
        """Write :attr:`live` for a process that goes on with this traffic (:meth:`load_live`)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump({i: [q, c.hex(), g.hex()] for i, (q, c, g) in self.live.items()}, f)

    def load_live(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            self.live = {i: (q, bytes.fromhex(c), bytes.fromhex(g)) for i, (q, c, g) in json.load(f).items()}

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
                elif kind in ("G=", "GI="):
                    t.consumed.update(ids)
                    t.maybe_consumed.difference_update(ids)
                    if kind == "GI=":
                        t.by_id.update(ids)
        return t


def correl_id(ident: str) -> bytes:
    """The CorrelId of message ``ident``: shared by the messages of its run whose counters
    differ only in the last digit, so that a get by CorrelId takes the first of several."""
    run, n = ident.split(".")
    return f"CO{int(run):06d}.{int(n) // 10:09d}".encode().ljust(24, b"\0")


def _get_or_none(h, **match):
    """A get under syncpoint (selecting by ``match``, the get's keywords); None when there is
    no such message or it was lost to damage (2033, 2101)."""
    try:
        return h.get(GMO.SYNCPOINT, **match)
    except MQError as e:
        if e.reason not in (Reason.NO_MSG_AVAILABLE, Reason.OBJECT_DAMAGED):
            raise
        return None


def _open(path: str, repair: bool = False):
    from sweepq.engine import DurabilitySettings, QueueManager, SweeperSettings
    from sweepq.sweeper import ManualClock

    return QueueManager.open(
        path,
        sweeping=SweeperSettings(run=False, readahead_low_water=0),
        durability=DurabilitySettings(
            sync="os", repair=repair, store_options={"max_blob_records": 16, "write_buffer_bytes": 1 << 20}
        ),
        clock=ManualClock(),
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
t.load_live(log + ".live")
t.work(qm, 400)
"""


def build_killed(path: str, rng: random.Random) -> Traffic:
    """Real traffic on a new data directory ``path``: an open closed cleanly, then a process
    that works on it (its gets by MsgId, CorrelId and GroupId choose among the messages of
    both) killed with SIGKILL at a random point (its event log says what it did)."""
    traffic = Traffic(rng, 1)
    qm = _open(path)
    _define(qm)
    traffic.work(qm, rng.randint(20, 60))
    qm.close()
    log = path + ".events"
    traffic.save_live(log + ".live")
    args = [sys.executable, "-c", _KILLED, path, str(rng.random()), log, str(rng.randint(20, 300))]
    out = subprocess.run(args, capture_output=True, text=True, timeout=TRIAL_SECONDS)
    if out.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the killed worker exited with {out.returncode}: {out.stderr[-1500:]}")
    killed = Traffic.from_log(log)
    os.remove(log)
    os.remove(log + ".live")
    traffic.put |= killed.put
    traffic.maybe_put |= killed.maybe_put
    traffic.consumed |= killed.consumed
    traffic.by_id |= killed.by_id
    traffic.by_id_killed = len(killed.by_id)
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
        # Within what the file holds: the zeros a side log keeps ahead of its records (written
        # in place or through a map) hold nothing, and damage there would test nothing.
        held = len(f.read().rstrip(b"\0")) or size
        if how == "cut":
            cut = rng.randrange(held)
            f.truncate(cut)
            return name, f"{name}: cut to {cut} of {size} bytes"
        if how == "zero":
            page = rng.randrange(max(held // 4096, 1)) * 4096 if held > 4096 else 0
            n = min(4096, size - page)
            f.seek(page)
            f.write(bytes(n))
            return name, f"{name}: bytes {page}..{page + n} of {size} zeroed"
        offsets = sorted(rng.randrange(held) for _ in range(rng.randint(1, 3)))
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
    t.by_id, t.by_id_killed = len(traffic.by_id), traffic.by_id_killed
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
    order: dict[tuple[str, int], list[str]] = {}  # (queue, priority) -> the ids in the order delivered
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
                    order.setdefault((q, m.md.priority), []).append(ident)
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
    for (q, prio), ids in order.items():
        orders = [_put_order(i) for i in ids]
        latest = list(itertools.accumulate(orders, max))  # the latest put delivered so far
        late = [ids[k] for k in range(1, len(ids)) if orders[k] < latest[k - 1]]
        if late:
            t.violation(
                "out of order", f"{len(late)} on {q} priority {prio} delivered after later puts ({', '.join(late[:5])})"
            )
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


def _put_order(ident: str) -> tuple[int, int]:
    """Where message ``ident`` ("run.counter") was put among all: runs follow each other, and
    a run puts its counters in order (one call at a time)."""
    run, n = ident.split(".")
    return int(run), int(n)


def run_fuzz(
    work: str,
    trials: int,
    seed: int,
    progress: Callable[[int, Trial], None] | None = None,
    numbers: list[int] | None = None,
) -> Verdict:
    """``trials`` trials in ``work`` (each in a directory of its own, removed after it);
    ``numbers``: these trials instead (e.g. :data:`SUITE_TRIALS`)."""
    t0 = time.monotonic()
    verdict = Verdict(seed)
    _BASES.clear()
    try:
        for k in numbers or range(1, trials + 1):
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
