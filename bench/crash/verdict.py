"""The verdict of the kill -9 harness: from the logs alone (bench/crash/worker.py writes
them), with these definitions:

- a put is **committed** when ``put`` returned outside syncpoint, or ``commit`` returned for
  its unit of work; it is **maybe** when that call started and did not return (the kill
  came in between); it is **aborted** when its unit of work was backed out or was still
  open, no commit started, when the worker died;
- a get **consumes** a message when it returned outside syncpoint, or its unit of work's
  commit returned; the final drain consumes what it gets. A get in a unit of work whose
  commit started and did not return consumed it or not: the rest of the history decides
  (a message got there that comes back later was not consumed; one named damaged shows
  nothing either way), and the unit of work must be all or nothing.

The invariants: every committed put is consumed exactly once (0 lost, 0 duplicated; a maybe
put at most once); nothing aborted ever comes back; within one queue and priority the
messages of one producer (one worker run) are consumed in put order across the whole
history; a message comes back on its queue, at its priority, with the payload it was put
with; a backout count never goes back. The one allowance: a get outside syncpoint that
the kill interrupted may have removed the message at the head of its queue without
returning it (MQ's own semantics for a get outside a unit of work).
"""

from __future__ import annotations

import itertools
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field


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
    after plain kills is itself a violation. Either way a consumed message named damaged is a
    false loss (docs/damage.md: whoever sends again what was named lost delivers it twice)."""
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
        # those (the commit not applied), which the lost check below decides. A message named
        # damaged shows nothing either way: damage took it whether the commit's get had or not
        # (its own put lost with the writes after the damage, and this commit with them).
        taken = [g for g in gone if g.ident not in h.damaged]
        applied = any(h.gets.get(p) for p in u.puts) or (bool(taken) and not back)
        if not applied:
            held.update((g.ident, u) for g in taken)
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
            if cons and ident in h.damaged:
                told = h.damaged[ident]
                viol["false loss"].append(f"{ident} was consumed (run {cons[0].run}) and named damaged in run {told}")
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
