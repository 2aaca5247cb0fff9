"""The kill -9 harness of a channel (issue 20 §4): two processes joined by loopback TCP.

**QM1** (``python -m sweepq.bench.crash_channel qm1``) opens its data directory (the sweeper at
a short interval, small blobs: :func:`crash_worker.open_manager`), has the transmission queue QM2,
the remote queue TARGET (Q on QM2) and the sender channel QM1.QM2, and a producer thread
that puts persistent messages to TARGET in units of work of 1-6 messages at priorities 0, 4
and 9 (sometimes backed out), logging each unit of work before the put (``U id:prio ...``),
before the commit (``C+``) and after it (``C``). **QM2** (``... qm2``) serves the receiver on
127.0.0.1 with the harness's token and has a consumer thread that gets from Q under
syncpoint and logs what it got (``G id ...``) before the commit (``C+``) and after it (``C``).
Every line is one ``os.write`` on an O_APPEND file (:class:`crash_worker.EventLog`): a SIGKILL keeps
each line written before it.

The driver keeps both running and, ``kills`` times, SIGKILLs one of them (from the seed: at
random after it is ready, or the process kills itself at a point: QM1 between the receiver's
commit and its own (``between-commits``), with a batch hardened in doubt and not yet sent
(``batch-begun``), or during a sweep of the transmission queue, blobs written and not
linked (``sweep-write``); QM2 after its commit before it confirms (``receiver-commit``) or
during a sweep of Q), then restarts it on the same directory. At the end QM1 runs without
its producer until its transmission queue is empty and nothing is in doubt, QM2 is stopped
with SIGTERM, and the driver drains Q in process.

The verdict, from the logs alone: every committed put is consumed exactly once (a put whose
commit was cut at most once), nothing backed out or left uncommitted arrives, no message is
dead-lettered, every payload arrives intact at its priority, and within each priority the
messages are consumed in put order. A get whose commit was cut consumed its messages or not:
a message got there that is got again later was not consumed by it.

``sweepq crashtest-channel --kills N`` (the long form); tests/test_channels_crash.py runs the
quick form (``run_channel_crashtest(..., quick=True)``).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from .crash import driver as crash_driver
from .crash import verdict as crash_verdict
from .crash import worker as crash_worker
from .harness_sizes import CHANNEL_KILLS as DEFAULT_KILLS  # noqa: F401  (the names it always had)
from .harness_sizes import CHANNEL_QUICK_KILLS as QUICK_KILLS  # noqa: F401

CHANNEL = "QM1.QM2"
PRIORITIES = crash_worker.PRIORITIES
SIZE = 200  # bytes of a message's payload
DEPTH_CAP = 3000  # QM1's producer waits while its transmission queue holds this many
SELF_POINTS = {
    "qm1": ("between-commits", "batch-begun", "sweep-write"),
    "qm2": ("receiver-commit", "sweep-write"),
}
FAST = {"heartbeat": 1.0, "short_retry": 100_000, "short_interval": 0.02, "batch_size": 50}


# -- the two processes -----------------------------------------------------------------------------


def _kill_at(spec: str) -> tuple[str, int]:
    point, _, k = (spec or ":0").partition(":")
    return point, int(k or 0)


class _SelfKill:
    """SIGKILL this process at the ``k``-th pass of ``point`` (nothing when ``point`` is "")."""

    def __init__(self, spec: str, log: crash_worker.EventLog):
        self.point, self.k = _kill_at(spec)
        self.log = log
        self.passes: Counter = Counter()
        self.lock = threading.Lock()

    def passing(self, point: str) -> None:
        if point != self.point:
            return
        with self.lock:
            self.passes[point] += 1
            if self.passes[point] == self.k:
                self.log.last("K", point)


def _open(args: argparse.Namespace, name: str):
    qm = crash_worker.open_manager(args.data_dir, args.sync, args.interval, name=name)
    return qm


def _wait_for_term(stopping: threading.Event) -> None:
    signal.sigwait([signal.SIGTERM, signal.SIGINT])
    stopping.set()


def qm1_main(args: argparse.Namespace) -> int:
    """The sending queue manager and its producer (see the module docstring)."""
    from sweepq.engine import Persistence, Usage
    from sweepq.engine.distributed.sync import SenderSync

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    log = crash_worker.EventLog(args.log)
    log.emit("S", args.run, os.getpid())
    killer = _SelfKill(args.kill_at, log)
    commit, begin = SenderSync.commit, SenderSync.begin

    def commit_after_the_receivers(self):
        killer.passing("between-commits")  # the receiver confirmed: its commit is done
        return commit(self)

    def begun(self, batch):
        out = begin(self, batch)
        killer.passing("batch-begun")  # hardened in doubt, not yet sent
        return out

    SenderSync.commit, SenderSync.begin = commit_after_the_receivers, begun  # this process only
    qm = _open(args, "QM1")
    qm.sweeper.after_write = lambda q, t: killer.passing("sweep-write") if q.name == "QM2" else None
    if "QM2" not in qm.queue_names():
        qm.define_queue("QM2", usage=Usage.TRANSMISSION, default_persistence=Persistence.PERSISTENT)
    if "TARGET" not in qm.distributed.remotes:
        qm.define_remote_queue("TARGET", remote_queue="Q", remote_qmgr="QM2", xmit_queue="QM2")
    if CHANNEL not in qm.distributed.channels:
        qm.define_channel(CHANNEL, conname=args.conname, xmit_queue="QM2", token=args.token, **FAST)
    qm.channels.start(CHANNEL)
    stopping = threading.Event()
    log.emit("R")
    if args.produce:
        threading.Thread(target=_produce, args=(qm, log, args, stopping), daemon=True).start()
    if not args.produce:
        _until_sent(qm, stopping)
        log.emit("E")
        qm.close()
        return 0
    _wait_for_term(stopping)
    qm.close()
    return 0


def _produce(qm, log: crash_worker.EventLog, args: argparse.Namespace, stopping: threading.Event) -> None:
    from sweepq.engine import MD, OO, PMO

    rng = random.Random(f"{args.seed}:{args.run}")
    conn = qm.connect()
    h = conn.open("TARGET", OO.OUTPUT)
    x = qm.queue_named("QM2")
    n = 0
    while not stopping.is_set():
        if x.depth > DEPTH_CAP:
            stopping.wait(0.01)
            continue
        msgs = []
        for _ in range(rng.randint(1, 6)):
            n += 1
            msgs.append((f"{args.run}.{n}", rng.choice(PRIORITIES)))
        log.emit("U", *(f"{i}:{p}" for i, p in msgs))
        for ident, prio in msgs:
            h.put(
                crash_worker.payload(ident, prio, SIZE),
                MD(priority=prio, msg_id=crash_worker.msg_id(ident)),
                PMO.SYNCPOINT,
            )
        if rng.random() < 0.1:
            conn.backout()
            log.emit("B")
            continue
        log.emit("C+")
        conn.commit()
        log.emit("C")
        if rng.random() < 0.3:
            stopping.wait(0.002)


def _until_sent(qm, stopping: threading.Event) -> None:
    """Until the transmission queue is empty and no batch is in doubt (the final phase)."""
    sync = qm.distributed.sync(CHANNEL)
    while not stopping.is_set():
        if qm.inquire_queue("QM2").current_depth == 0 and sync.indoubt is None:
            return
        stopping.wait(0.02)


def qm2_main(args: argparse.Namespace) -> int:
    """The receiving queue manager, served on loopback TCP, and its consumer."""
    from sweepq.engine import Persistence
    from sweepq.engine.constants import ChannelType
    from sweepq.net.channels.receiver import Receiver

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    log = crash_worker.EventLog(args.log)
    log.emit("S", args.run, os.getpid())
    killer = _SelfKill(args.kill_at, log)
    real = Receiver.batch

    def batch(self, luwid, first_seq, records, end):
        out = real(self, luwid, first_seq, records, end)
        if end:
            killer.passing("receiver-commit")  # committed, not yet confirmed
        return out

    Receiver.batch = batch  # this process only
    qm = _open(args, "QM2")
    qm.sweeper.after_write = lambda q, t: killer.passing("sweep-write") if q.name == "Q" else None
    have = set(qm.queue_names())
    for name in ("Q", "DLQ"):
        if name not in have:
            qm.define_queue(name, default_persistence=Persistence.PERSISTENT)
    qm.alter_qmgr(dead_letter_queue="DLQ")
    if CHANNEL not in qm.distributed.channels:
        qm.define_channel(CHANNEL, type=ChannelType.RECEIVER)
    qm.serve(None, tcp=args.conname.removeprefix("tcp://"), token=args.token)
    stopping = threading.Event()
    consumer = threading.Thread(target=_consume, args=(qm, log, args, stopping), daemon=True)
    consumer.start()
    log.emit("R")
    _wait_for_term(stopping)
    consumer.join(30)
    qm.close()
    return 0


def _consume(qm, log: crash_worker.EventLog, args: argparse.Namespace, stopping: threading.Event) -> None:
    from sweepq.engine import GMO, OO, MQError, Reason

    rng = random.Random(f"{args.seed}:{args.run}:get")
    conn = qm.connect()
    h = conn.open("Q", OO.INPUT_SHARED)
    while not stopping.is_set():
        got = []
        for _ in range(rng.randint(1, 8)):
            try:
                got.append(h.get(GMO.SYNCPOINT | GMO.WAIT, 50))
            except MQError as e:
                if e.reason != Reason.NO_MSG_AVAILABLE:
                    raise
                break
        if not got:
            continue
        log.emit("G", *(_seen(m) for m in got))
        log.emit("C+")
        conn.commit()
        log.emit("C")
        if rng.random() < 0.2:
            stopping.wait(0.005)  # a slower consumer lets Q grow, so QM2 sweeps too


def _seen(m) -> str:
    """``id:priority`` of a message got, ``!id:priority`` when its payload is damaged."""
    ident, intact = crash_worker.check_payload(bytes(m.data))
    return f"{'' if intact else '!'}{ident}:{m.priority}"


# -- the driver -------------------------------------------------------------------------------------


@dataclass
class Plan:
    """One kill: ``victim`` (qm1 or qm2) SIGKILLed ``delay`` s after it is ready, or (``point``)
    killing itself at the ``k``-th pass of a point."""

    victim: str
    delay: float = 0.0
    point: str = ""
    k: int = 1

    def describe(self) -> str:
        return f"{self.victim} at {self.point} #{self.k}" if self.point else f"{self.victim} after {self.delay:.3f} s"

    @property
    def kind(self) -> str:
        return f"{self.victim} {self.point or 'at random'}"


def choose_plan(rng: random.Random, quick: bool, victim: str) -> Plan:
    """How the next life of ``victim`` ends: SIGKILL at random, or a kill point of its own."""
    if rng.random() < 0.45:
        return Plan(victim, delay=rng.uniform(0.0, 0.25 if quick else 1.5))
    return Plan(victim, point=rng.choice(SELF_POINTS[victim]), k=rng.randint(1, 4 if quick else 30))


class _Child:
    """One of the two processes, restarted life after life."""

    def __init__(self, role: str, work: str, common: list[str]):
        self.role, self.work, self.common = role, work, common
        self.proc: subprocess.Popen | None = None
        self.tail: crash_driver.Tail | None = None
        self.plan: Plan | None = None
        self.log = ""  # the event log of its current life
        self.started: list[subprocess.Popen] = []  # its lives not yet reaped

    def start(self, life: int, seed: int, plan: Plan | None = None, produce: bool = True) -> None:
        """Start life ``life``; ``plan`` is how it will end (a kill point is the child's own)."""
        self.plan = plan
        log = self.log = os.path.join(self.work, "logs", f"{self.role}-{life:05d}.log")
        cmd = [sys.executable, "-m", "sweepq.bench.crash_channel", self.role, *self.common]
        cmd += ["--data-dir", os.path.join(self.work, self.role), "--log", log, "--seed", str(seed)]
        kill_at = f"{plan.point}:{plan.k}" if plan is not None and plan.point else ""
        cmd += ["--run", str(life), "--kill-at", kill_at] + ([] if produce else ["--no-produce"])
        self.proc = crash_driver.start_child(cmd, log[:-4] + ".err", self.started)
        self.tail = crash_driver.Tail(log)

    def wait_ready(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.tail.poll()
            if self.tail.ready:
                return ""
            if self.proc.poll() is not None:
                if self.proc.returncode == -signal.SIGKILL and self.plan is not None and self.plan.point:
                    return ""  # its kill point came during recovery (a batch in doubt resolved)
                return f"{self.role} exited with {self.proc.returncode} before it was ready"
            time.sleep(0.002)
        return f"{self.role} was not ready within {timeout:.0f} s"

    def kill(self) -> None:
        crash_driver.kill_children(self.started)
        self.started.clear()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_channel_crashtest(
    work: str,
    kills: int,
    seed: int = 1,
    sync: str = "commit",
    interval: float = crash_worker.DEFAULT_INTERVAL,
    quick: bool = False,
    progress: Callable[[int, Plan, str], None] | None = None,
) -> crash_verdict.Verdict:
    """``kills`` SIGKILLs of QM1 or QM2 under load, the final delivery and drain, the verdict.
    The children are killed whatever ends this call (KeyboardInterrupt included)."""
    rng = random.Random(seed)
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    common = ["--conname", f"tcp://127.0.0.1:{_free_port()}", "--token", f"crash-{seed}-{os.getpid()}"]
    common += ["--sync", sync, "--interval", str(interval)]
    children = {role: _Child(role, work, common) for role in ("qm1", "qm2")}
    t0, lives, problems = time.monotonic(), itertools.count(1), []
    classes: Counter = Counter()
    try:
        for role in ("qm2", "qm1"):
            children[role].start(next(lives), seed, choose_plan(rng, quick, role))
            problem = children[role].wait_ready()
            if problem:
                problems.append(problem)
        for i in range(1, kills + 1):
            child = children[rng.choice(("qm1", "qm2"))]
            plan = child.plan
            problem = _one_kill(child, lives, seed, classes, choose_plan(rng, quick, child.role), quick)
            if problem:
                problems.append(f"kill {i} ({plan.describe()}): {problem}")
            if progress is not None:
                progress(i, plan, problem)
        problems += _deliver_the_rest(children, lives, seed)
    finally:
        for child in children.values():
            child.kill()
    drain_why = _drain(os.path.join(work, "qm2"), os.path.join(work, "logs", "drain.log"), sync)
    verdict = judge(os.path.join(work, "logs"))
    verdict.seed, verdict.kills, verdict.seconds = seed, kills, time.monotonic() - t0
    verdict.kill_classes = classes
    if drain_why:
        verdict.violations["final drain failed"].append(drain_why)
    verdict.violations["harness"].extend(problems)
    return verdict


def _one_kill(child: _Child, lives: Iterator[int], seed: int, classes: Counter, then: Plan, quick: bool) -> str:
    """End ``child``'s life as its plan says (a kill point not reached within the fallback:
    SIGKILL then), start its next life, which will end as ``then`` says; wait until ready."""
    plan = child.plan
    if plan.point:
        try:
            child.proc.wait(0.5 if quick else 2.0)
        except subprocess.TimeoutExpired:
            classes[f"{plan.kind} not reached: at random"] += 1
        else:  # counted as landed only on the child's own word: its last event is the kill at that point
            landed = child.proc.returncode == -signal.SIGKILL and _last_event(child.log) == f"K {plan.point}"
            classes[plan.kind if landed else f"{plan.kind} not reached: exited {child.proc.returncode}"] += 1
    else:
        time.sleep(plan.delay)
        classes[plan.kind] += 1
    child.kill()
    child.start(next(lives), seed, then)
    return child.wait_ready()


def _last_event(log_path: str) -> str:
    """The last complete line of a child's event log ("" when there is none)."""
    try:
        with open(log_path, "rb") as f:
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return ""
    complete = lines[:-1]  # what follows the last newline was cut by the kill
    return complete[-1].decode(errors="replace") if complete else ""


def _deliver_the_rest(
    children: dict[str, _Child], lives: Iterator[int], seed: int, timeout: float = 120.0
) -> list[str]:
    """The final phase: both started again without a kill point, QM1 without its producer
    until everything was sent; then QM2 is stopped (SIGTERM: its consumer ends, it closes)."""
    qm1, qm2 = children["qm1"], children["qm2"]
    problems = []
    for child in (qm2, qm1):
        child.kill()
        child.start(next(lives), seed, None, produce=child is qm2)
        problems += [p for p in (child.wait_ready(),) if p]
    try:
        qm1.proc.wait(timeout)
        if qm1.proc.returncode != 0:
            problems.append(f"QM1's final phase exited with {qm1.proc.returncode}")
    except subprocess.TimeoutExpired:
        problems.append(f"QM1 did not send everything within {timeout:.0f} s")
    qm2.proc.send_signal(signal.SIGTERM)
    try:
        qm2.proc.wait(60)
    except subprocess.TimeoutExpired:
        problems.append("QM2 did not stop on SIGTERM")
    return problems


def _drain(data_dir: str, log_path: str, sync: str) -> str:
    """Get everything left on QM2's Q, logged as a consumer's committed gets; say what is on
    its dead-letter queue. Returns why it could not, or ""."""
    from sweepq.engine import GMO, OO, DurabilitySettings, MQError, QueueManager, SweeperSettings

    log = crash_worker.EventLog(log_path)
    try:
        qm = QueueManager.open(data_dir, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync=sync))
    except MQError as e:
        return str(e)
    try:
        h = qm.connect().open("Q", OO.INPUT_SHARED)
        while True:
            try:
                log.emit("G", _seen(h.get(GMO.NO_SYNCPOINT)))
                log.emit("C")
            except MQError:
                break
        dead = qm.inquire_queue("DLQ").current_depth
        return f"{dead} message(s) on QM2's dead-letter queue" if dead else ""
    finally:
        qm.close()


# -- the verdict ---------------------------------------------------------------------------------------


def _lines(log_dir: str, prefix: str) -> list[list[str]]:
    names = sorted(n for n in os.listdir(log_dir) if n.startswith(prefix) and n.endswith(".log"))
    out = []
    for name in names:
        with open(os.path.join(log_dir, name), encoding="utf-8", errors="replace") as f:
            out.append([line.split() for line in f if line.strip()])
    return out


def _order_key(ident: str) -> tuple[int, int]:
    run, n = ident.split(".")
    return int(run), int(n)


def judge(log_dir: str) -> crash_verdict.Verdict:
    """The verdict of a harness directory, from its logs alone (see the module docstring)."""
    v = crash_verdict.Verdict()
    fate: dict[str, str] = {}  # put: committed | maybe | aborted
    prio: dict[str, int] = {}
    for lines in _lines(log_dir, "qm1-"):
        uow: list[str] = []
        state = ""
        for f in lines:
            if f[0] == "U":
                uow, state = [x.split(":")[0] for x in f[1:]], "open"
                prio.update((x.split(":")[0], int(x.split(":")[1])) for x in f[1:])
                fate.update((i, "aborted") for i in uow)
            elif f[0] == "C+":
                state = "maybe"
            elif f[0] == "C":
                fate.update((i, "committed") for i in uow)
                uow, state = [], ""
            elif f[0] == "B":
                uow, state = [], ""
        if state == "maybe":
            fate.update((i, "maybe") for i in uow)
    gets: list[tuple[str, int, bool, bool, bool]] = []  # (id, priority, damaged, consumed for sure, drained)
    for drained, lines in [
        *((False, x) for x in _lines(log_dir, "qm2-")),
        *((True, x) for x in _lines(log_dir, "drain")),
    ]:
        got: list[str] = []
        cut = False
        for f in lines:
            if f[0] == "G":
                got, cut = f[1:], False
            elif f[0] == "C+":
                cut = True
            elif f[0] == "C":
                gets += [(*_parse_seen(s), True, drained) for s in got]
                got, cut = [], False
        if cut:
            gets += [(*_parse_seen(s), False, drained) for s in got]
    _count(v, fate, prio, gets)
    return v


def _parse_seen(s: str) -> tuple[str, int, bool]:
    damaged = s.startswith("!")
    ident, _, p = s.lstrip("!").rpartition(":")
    return ident, int(p), damaged


def _count(v: crash_verdict.Verdict, fate: dict[str, str], prio: dict[str, int], gets: list) -> None:
    later: Counter = Counter(g[0] for g in gets)
    consumed: Counter = Counter()
    by_priority: dict[int, list[str]] = defaultdict(list)
    for ident, p, damaged, sure, drained in gets:
        later[ident] -= 1
        if not sure and later[ident] > 0:
            continue  # a cut commit that was not applied: the message came back and was got again
        consumed[ident] += 1
        v.drained += drained
        by_priority[p].append(ident)
        if damaged:
            v.violations["damaged payload"].append(ident)
        if ident in prio and prio[ident] != p:
            v.violations["wrong priority"].append(f"{ident}: put at {prio[ident]}, got at {p}")
    for ident, what in fate.items():
        n = consumed.get(ident, 0)
        if what == "committed":
            v.committed += 1
            if n == 0:
                v.violations["lost"].append(ident)
        elif what == "maybe":
            v.maybe += 1
            v.maybe_applied += n > 0
        elif n:
            v.violations["phantom"].append(f"{ident} (its unit of work was not committed)")
        if n > 1:
            v.violations["duplicated"].append(f"{ident} consumed {n} times")
    v.violations["phantom"] += [i for i in consumed if i not in fate]
    v.consumed = sum(consumed.values())
    for p, seq in by_priority.items():
        for a, b in itertools.pairwise(seq):
            if _order_key(a) > _order_key(b):
                v.violations["reordered"].append(f"priority {p}: {b} after {a}")


def main(argv: Sequence[str] | None = None) -> int:
    from sweepq.pipeline.args import HelpFormatter, Parser, number

    p = Parser(prog="python -m sweepq.bench.crash_channel", formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="what", required=True, parser_class=Parser)
    for name, func in (("qm1", qm1_main), ("qm2", qm2_main)):
        s = sub.add_parser(name)
        s.add_argument("--data-dir", required=True)
        s.add_argument("--log", required=True)
        s.add_argument("--conname", required=True)
        s.add_argument("--token", required=True)
        s.add_argument("--sync", default="commit")
        s.add_argument("--interval", type=float, default=crash_worker.DEFAULT_INTERVAL)
        s.add_argument("--seed", type=number(int, 0), default=1)
        s.add_argument("--run", type=number(int, 1), default=1)
        s.add_argument("--kill-at", default="")
        s.add_argument("--no-produce", dest="produce", action="store_false")
        s.set_defaults(func=func)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
